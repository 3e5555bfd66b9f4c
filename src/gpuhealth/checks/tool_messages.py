"""GH310: pasted error lines of the NVIDIA container toolkit and driver installer, known from their source."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.driver_messages import family_draft, lead_row
from gpuhealth.checks.registry import Draft, Expectations, check, line_evidence
from gpuhealth.model import MessageLine, Snapshot


def unknown_lines(snapshot: Snapshot) -> list[MessageLine]:
    """Pasted lines that look like an error and that no signature row or parser explains (GH003's lines), and lines
    explained only by an API error code they name (GH309's: "failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND"):
    the program's own message around the code says which program failed and why, which the bare code cannot."""
    return [m for m in snapshot.messages or () if m.signature is None and (m.symptom is None or m.mined)]


def explained(snapshot: Snapshot) -> dict[str, object]:
    """line -> its mined row (a MinedMessage), for the unknown error lines a mined row names. The table is imported
    only when such lines exist."""
    lines = unknown_lines(snapshot)
    if not lines:
        return {}
    from gpuhealth.knowledge.mined_tools import match

    found = {}
    for message in lines:
        row = match(message.line)
        if row is not None:
            found[message.line] = row
    return found


@check("GH310", "tool-messages", "Container toolkit and installer messages known from their source",
       requires=("messages",))
def tool_messages(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    Pasted lines that look like an error, that no row of the signature catalogue names, but that the NVIDIA
    container toolkit (`nvidia-ctk`, `nvidia-container-runtime`, `nvidia-cdi-hook` ...), libnvidia-container
    (`nvidia-container-cli: ...`), `nvidia-installer`, the Kubernetes device plugin (and gpu-feature-discovery), the
    GPU operator's validator or `nvidia-mig-parted` (and the MIG manager) prints: every error and warning string of
    their source at pinned release tags (libnvidia-container: files at pinned commits) is a row of
    `knowledge/mined/tools.csv` (docs/mined-messages.md). One finding per family of messages (CDI devices,
    runtime configuration, the host driver not found, kernel module build, kernel source, DKMS, Secure Boot ...),
    naming the program and file that printed each line, what the family means, and where the source is
    (repository, tag range, file:line, also in the finding's labels).

    Why it matters:
    An error these programs print is evidence even when nobody wrote a rule for its wording: a family that points
    to a known cause says so (a toolkit that cannot resolve the GPUs asked for is GH802's; an installer that finds
    no kernel headers is GH503's), and the check it names has the fix.

    How to fix:
    Follow the family's pointer (the check named in the finding); otherwise read the line in its source file
    (the address in the evidence).

    Exceptions:
    Warning-level messages are shown as information. A toolkit line is read only with a sign of the container
    stack on it (a logrus `ERRO[`/`level=error` prefix, "nvidia", "OCI runtime", "CDI", "hook"); a libnvidia-container
    line only with `nvidia-container-cli` on it (or its debug log's `nvc.c:280]`); an installer line only with its
    `ERROR:`/`WARNING:` prefix or the program's name; a device plugin or validator line only with klog's prefix
    (`E0819 07:02:54.757556 1 rm.go:109]`), logrus's error level, or a name of the programs; a mig-parted line only
    with logrus' prefix (`FATA[`, `ERRO[`, `level=`) or its name. A Go error wraps its
    callers' messages: the innermost message found on the line is the one reported.
    """
    rows = explained(snapshot)
    if not rows:
        return
    from gpuhealth.knowledge.mined_tools import families, program

    known = families()
    by_family: dict[str, list[tuple[MessageLine, object]]] = {}
    for message in unknown_lines(snapshot):
        row = rows.get(message.line)
        if row is not None:
            by_family.setdefault(row.family, []).append((message, row))
    for family_id, found in sorted(by_family.items()):
        family = known[family_id]
        first = lead_row(found)
        yield family_draft(family, found, program(first), next(m.line for m, row in found if row is first),
                           line_evidence([m for m, _ in found]), "source",
                           labels={"cause": family.cause} if family.cause else None)
