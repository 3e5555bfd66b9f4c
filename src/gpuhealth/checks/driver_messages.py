"""GH308: NVRM lines known from the driver's own source (knowledge/mined/nvrm.csv), with what they mean."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from gpuhealth.checks.kernel_log import Tally, last_seen, samples
from gpuhealth.checks.registry import Draft, Expectations, check, table_fixes
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import EventGroup, Evidence, Severity, Snapshot, normalize_pci_address

# The kernel log's groups a mined row may explain: lines no parser made an event of ("other"), and the generic
# NVRM/GSP error lines GH306 reports without knowing what they mean.
KINDS = {"other", "nvrm", "gsp"}
MAX_ROWS = 8  # rows named in one finding's labels and source evidence
_ADDRESS = lazy_re(r"\b((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")


def mined_row(group: EventGroup):  # -> MinedMessage | None (the import is lazy: only a kernel log with NVRM lines)
    """The mined row that names this group's NVRM line, when no signature of the catalogue does (a catalogue
    row says more: it was written for that line, with its cause)."""
    if "NVRM" not in group.first.line:
        return None
    from gpuhealth.knowledge.mined import lookup
    from gpuhealth.knowledge.signatures import match_line

    message = group.first.message
    if match_line(group.first.line) is not None:
        return None
    return lookup(message)


def group_key(group: EventGroup) -> tuple[str, str, str]:
    """A group's identity across calls (a hand-built log's ``tallies`` makes new groups at each call)."""
    return group.kind, group.template, group.first.line


def explained_groups(snapshot: Snapshot) -> dict[tuple[str, str, str], object]:
    """group_key -> its mined row, for the kernel log's groups of ``KINDS`` that a mined row names."""
    log = snapshot.kernel_log
    if log is None:
        return {}
    if _LAST and _LAST[0] is log:  # GH306 and GH308 (and GH303's reason) ask for the same log in one run
        return _LAST[1]
    found = {}
    for group in log.tallies(KINDS):
        row = mined_row(group)
        if row is not None:
            found[group_key(group)] = row
    _LAST[:] = [log, found]
    return found


_LAST: list = []  # [the kernel log last read, its explained groups]


@check("GH308", "nvrm-driver-messages", "NVIDIA driver messages known from its source", requires=("kernel_log",))
def driver_messages(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    NVRM lines of the kernel log that no other check reads and no row of the signature catalogue names, but that
    the driver's own source prints: every error- and warning-level `NV_PRINTF`/`nv_printf` format string of
    NVIDIA/open-gpu-kernel-modules at its pinned release tags is a row of `knowledge/mined/nvrm.csv`
    (docs/mined-messages.md). One finding per GPU and family of messages (GSP boot, GPU initialisation, PCI BAR,
    memory, channels, NVLink ...), naming the driver file that printed each line, what the family means, and
    where the source is (repository, tag range, file:line, also in the finding's labels).

    Why it matters:
    An error the driver prints is evidence, even when nobody wrote a rule for its wording. A family that points
    to a known cause says so: a GSP firmware boot failure or a failed initialisation step is why `RmInitAdapter
    failed` follows, and that finding leads over the GH303 symptom; a GPU reported lost is GH302's cause.

    How to fix:
    Follow the family's pointer (the check named in the finding); otherwise read the line in its source file
    (the address in the evidence) and, when it repeats, collect `sudo nvidia-bug-report.sh` for the vendor.

    Exceptions:
    Warning-level messages are shown as information. A message printed during a driver load that then
    succeeded may be harmless.
    """
    if snapshot.kernel_log is None:
        return
    from gpuhealth.knowledge.mined import families

    rows = explained_groups(snapshot)
    if not rows:
        return
    by_key: dict[tuple[str | None, str], list[tuple[EventGroup, object]]] = {}
    for group in snapshot.kernel_log.tallies(KINDS):
        row = rows.get(group_key(group))
        if row is not None:
            by_key.setdefault((_address_of(group), row.family), []).append((group, row))
    known = families()
    source = snapshot.kernel_log.source
    for (address, family_id), found in sorted(by_key.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        family = known[family_id]
        tally = Tally()
        for group, _ in found:
            tally.add(group)
        where = f"GPU {address}: " if address else ""
        yield family_draft(family, found, f"{where}the NVIDIA driver", found[0][0].first.message,
                           (Evidence(source, samples(tally)),), "driver source",
                           subject=snapshot.gpu_subject(address), last_seen=last_seen(tally))


def _rows(found: list[tuple[object, object]]) -> tuple[list, list]:
    """The distinct rows of a family's lines (at most MAX_ROWS), and those of them at error level."""
    matched = list(dict.fromkeys(row for _, row in found))[:MAX_ROWS]
    return matched, [row for row in matched if row.level == "error"]


def lead_row(found: list[tuple[object, object]]) -> object:
    """The row a family's finding quotes: its first error-level row, else its first row."""
    matched, errors = _rows(found)
    return (errors or matched)[0]


def family_draft(family, found: list[tuple[object, object]], who: str, line: str, evidence: tuple[Evidence, ...],
                 source_name: str, labels: dict[str, str] | None = None, **draft: object) -> Draft:
    """The finding of one family of mined messages (GH308 here, GH310 in tool_messages): ``found`` pairs each line
    with its row; ``who`` (the program) printed ``line``, the line quoted; ``evidence`` (the lines) comes before the
    rows' source, ``labels`` between the rows' ids and their source."""
    matched, errors = _rows(found)
    # a warning-level message, or a notice family's (a deprecation printed at error level), is information
    severity = (Severity.INFO if not errors or family.severity == "info" else
                Severity.CRITICAL if family.severity == "critical" else Severity.WARNING)
    files = ", ".join(dict.fromkeys(posixpath.basename(row.file) for row in matched))
    points = f" (see {family.code})" if family.code else ""
    return Draft(
        severity,
        f"{who} ({files}) reported {'an error' if errors else 'a warning'}: {line[:160]}"
        f"{' ...' if len(found) > 1 else ''}; it means {family.title}{points}: {family.meaning}",
        evidence=(*evidence, Evidence(source_name, tuple(f"{row.repository} {row.file_line} [{row.tags}] "
                                                         f"{row.level}: {row.format}  {row.url}" for row in matched))),
        fixes=table_fixes(family.code) if family.code and severity is not Severity.INFO else (),
        # a family that only suggests its cause explains no symptom: the symptom's differential ranks that cause
        explains=family.explains if severity is Severity.CRITICAL and family.decides != "suggests" else (),
        labels={"mined": " ".join(row.id for row in matched), "family": family.id, **(labels or {}),
                "source": "; ".join(f"{row.repository} {row.tags} {row.file_line}" for row in matched)},
        **draft,
    )


def _address_of(group: EventGroup) -> str | None:
    if group.pci_address:
        return group.pci_address
    match = _ADDRESS.search(group.first.message)
    return normalize_pci_address(match[1]) if match else None




WHY_LINES = 8  # how far above a failure the driver's own reason may be logged


def why_before(snapshot: Snapshot, address: str | None, line_number: int | None) -> str | None:
    """The driver's reason for a failure logged at ``line_number`` (RmInitAdapter failed, GH303): the nearest mined
    error-level line up to ``WHY_LINES`` above it, for the same GPU or naming none, as "<file>: <line> (<family>)".
    RmInitAdapter's own code does not say why; the line the driver printed just before it does."""
    if snapshot.kernel_log is None or line_number is None:
        return None
    rows = explained_groups(snapshot)
    best: tuple[int, EventGroup, object] | None = None
    for group in snapshot.kernel_log.tallies(KINDS):
        row = rows.get(group_key(group))
        if row is None or row.level != "error" or _address_of(group) not in (None, address):
            continue
        for event in group.samples:
            at = event.line_number
            if at is not None and 0 < line_number - at <= WHY_LINES and (best is None or at > best[0]):
                best = (at, group, row)
    if best is None:
        return None
    from gpuhealth.knowledge.mined import families

    _, group, row = best
    return f"{posixpath.basename(row.file)}: {group.first.message[:160]} ({families()[row.family].title})"
