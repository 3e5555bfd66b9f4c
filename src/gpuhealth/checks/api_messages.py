"""GH309: CUDA, NVML, NCCL and DCGM errors known from their documentation (knowledge/mined/api_errors.csv)."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.registry import Draft, Expectations, check, line_evidence, table_fixes
from gpuhealth.model import Evidence, Severity, Snapshot

MAX_ROWS = 8  # rows named in one finding's labels and source evidence


@check("GH309", "api-error-codes", "CUDA, NVML, NCCL and DCGM errors known from their documentation",
       requires=("messages",))
def api_error_codes(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    Pasted lines that name an error of the CUDA driver or runtime API (`CUDA_ERROR_*`, `cudaError*`, or by number
    where words tie it to CUDA: "CUDA error 35", "cuInit returned 802"), of NVML (`NVML_ERROR_*`, pynvml's
    `NVMLError_*`, go-nvml's `ERROR_*`), an `NCCL WARN` line, a DCGM failure code (`DCGM_FR_*`), or a message
    PyTorch raises or warns while it initialises CUDA, that no row of the signature catalogue names. Each of these
    is a row of `knowledge/mined/api_errors.csv`, mined from the CUDA Toolkit's headers, nvidia-ml-py, NVIDIA/nccl,
    NVIDIA/DCGM and pytorch/pytorch (docs/mined-messages.md). One finding per
    API or library and error: which one reported it, what its documentation says it means, the check it points to
    where one is known, and where the text is (source, version range, file:line, also in the finding's labels).

    Why it matters:
    An error code an NVIDIA library reports has a documented meaning even when nobody wrote a rule for the log
    line around it; "unknown" would hide it. Where the code points to a cause (CUDA error 802: Fabric Manager,
    GH210; NVML's version mismatch: GH202; a GPU lost: GH302; an NCCL InfiniBand verbs failure: GH720; PyTorch's
    "driver too old": GH601), the finding names that check and its fixes.

    How to fix:
    Follow the check the finding names; otherwise read the documented meaning and the source line (the address in
    the evidence). DCGM's own suggested action is in the finding.

    Exceptions:
    Many CUDA errors are a program's own bug (an invalid argument, an out-of-range launch): no host check fixes
    them. NCCL warnings can precede a fallback that then works.
    """
    from gpuhealth.knowledge.mined_api import by_id

    # a line the catalogue names only generically ("NCCL printed a warning") is reported by the catalogue's check;
    # this finding then adds which warning it is, as information
    found = [m for m in snapshot.messages or () if m.mined]
    if not found:
        return
    rows = by_id()
    groups: dict[tuple[str, str], list] = {}
    for message in found:
        row = rows.get(message.mined)
        if row is not None:
            by_message = row.api in ("nccl", "pytorch")  # their "name" is a file or an exception class
            groups.setdefault((row.api, row.code or row.name if by_message else row.name), []).append((message, row))
    for (api, _), members in sorted(groups.items()):
        matched = list(dict.fromkeys(row for _, row in members))[:MAX_ROWS]
        row = matched[0]
        name = f"{row.name} ({row.number})" if row.number else f"a warning ({row.file})"
        if api == "pytorch":  # an exception or a warning, and the file that raises it
            name = f"{'a warning' if row.name == 'UserWarning' else 'an error'} ({row.file.rsplit('/', 1)[-1]})"
        points = f" (see {row.code})" if row.code else ""
        action = f"; DCGM suggests: {row.action}" if row.action else ""
        meaning = row.text if api not in ("nccl", "pytorch") else f'"{row.text}"'
        alone = any(m.signature is None for m, _ in members)
        yield Draft(
            Severity.WARNING if alone else Severity.INFO,
            f"{row.reporter} reported {name}{points}: {meaning}{action}",
            evidence=line_evidence(m for m, _ in members) + (
                Evidence("documented in", tuple(f"{r.where}: {r.name} {r.number} {r.text[:200]}  {r.url}".rstrip()
                                                for r in matched)),),
            fixes=table_fixes(row.code) if row.code else (),
            labels={"mined": " ".join(r.id for r in matched), "api": api,
                    "source": "; ".join(r.where for r in matched)},
        )
