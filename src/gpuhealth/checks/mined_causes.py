"""Mined messages whose family points to a cause, read by the diagnosis the way it reads signature rows.

Each mined table says, per family (per row for the API errors, whose rows are their own families), the check and
cause a message points to and whether a message of it CONFIRMS that cause or only SUGGESTS it (its ``decides``
column): ``knowledge/mined_families.csv`` (the driver's NVRM messages, GH308), ``knowledge/mined_tool_families.csv``
(the container toolkit and nvidia-installer, GH310), and ``tools/mine/api_causes.csv`` joined into
``knowledge/mined/api_errors.csv`` (CUDA, NVML, NCCL and DCGM errors, GH309).

:func:`mined_lines` gathers the lines a mined row names and no signature row does (a signature row is hand-verified:
it wins), each with its pointer. The diagnosis (``diagnosis.py``) then reads a confirming line as a catalogue line
naming its cause (:func:`as_signature`): the cause leads with its fix, the symptom it produces folds under it, and the
mined check's own finding folds under the cause instead of standing beside it as a second critical. A suggesting line
only moves its cause up a symptom's differential. A new mined table joins by adding a reader to ``READERS``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from gpuhealth.knowledge.signatures import Signature
from gpuhealth.model import MessageLine, Snapshot
from gpuhealth.records import record

CONFIRMS, SUGGESTS = "confirms", "suggests"
PREFIX = "mined:"  # the id of a mined line's stand-in signature row: "mined:GH310:inst-6299fbd645"


@record
class MinedLine:
    """A pasted line a mined row names, with what its family points to."""

    message: MessageLine
    check: str  # the check that reports the mined row: GH308, GH309, GH310
    row: str  # the mined row's id
    family: str  # its family ("" for an API error: the row is its own family)
    title: str  # what the family (or error) means, in words
    reporter: str  # who printed it: "nvidia-installer (kernel.c)", "the NVIDIA driver (nv.c)", "NVML"
    code: str  # the check the family points to
    cause: str  # knowledge/causes.csv id
    decides: str  # CONFIRMS or SUGGESTS
    severity: str  # info | warning | critical: how grave the line is, as its mined check grades it
    explains: tuple[str, ...]  # check codes whose findings a line of the family explains
    source: str  # "repository tags file:line"
    url: str

    @property
    def signature_id(self) -> str:
        return f"{PREFIX}{self.check}:{self.row}"

    def as_message(self) -> MessageLine:
        """The line as the catalogue would have filed it, under its stand-in signature row."""
        from dataclasses import replace

        _MADE.setdefault(self.signature_id, as_signature(self))
        return replace(self.message, signature=self.signature_id)


def as_signature(line: MinedLine) -> Signature:
    """A confirming mined line's stand-in signature row: its family's check, cause and severity."""
    return Signature(line.signature_id, "mined", "", line.message.symptom or "", line.cause, line.code, line.severity,
                     f"{line.reporter} reported {line.title}", line.message.line, line.source, line.url)


_MADE: dict[str, Signature] = {}  # stand-in rows by id (each a pure function of its mined row)


def is_mined(signature_id: str | None) -> bool:
    return bool(signature_id) and signature_id.startswith(PREFIX)


def signature_of(signature_id: str) -> Signature:
    """The stand-in row of a mined line :meth:`MinedLine.as_message` filed (KeyError for any other id)."""
    return _MADE[signature_id]


def mined_lines(snapshot: Snapshot) -> list[MinedLine]:
    """Every line a mined row names whose family points to a cause, from every mined table, in table order."""
    return [line for read in READERS for line in read(snapshot) if line.cause and line.decides in (CONFIRMS, SUGGESTS)]


def _grade(level: str, family_severity: str, decides: str = "") -> str:
    """The mined checks' rule: a notice family's message is information, an error-level message has the family's
    severity, and a warning-level one is information, unless its family confirms its cause: then the program's own
    check decided the cause (nvidia-installer's legacy GPU list), and its warning is a warning."""
    if family_severity == "info":
        return "info"
    if level == "error":
        return family_severity
    return "warning" if decides == CONFIRMS else "info"


def _driver_lines(snapshot: Snapshot) -> list[MinedLine]:
    """GH308's: NVRM lines of the kernel log no parser made an event of, so no check judged them (``read_into``
    stays empty)."""
    log = snapshot.kernel_log
    if log is None:
        return []
    from gpuhealth.checks.driver_messages import KINDS, explained_groups, group_key

    rows = explained_groups(snapshot)
    if not rows:
        return []
    from gpuhealth.knowledge.mined import families

    known = families()
    out = []
    for group in log.tallies(KINDS):
        row = rows.get(group_key(group))
        if row is None:
            continue
        family = known[row.family]
        out.append(MinedLine(MessageLine(group.first.line.strip()[:500], log.source), "GH308", row.id, family.id,
                             family.title, f"the NVIDIA driver ({posixpath.basename(row.file)})", family.code,
                             family.cause, family.decides, _grade(row.level, family.severity, family.decides),
                             family.explains, f"{row.repository} {row.tags} {row.file_line}", row.url))
    return out


def _api_lines(snapshot: Snapshot) -> list[MinedLine]:
    """GH309's: lines naming a CUDA, NVML, NCCL or DCGM error that no signature row names."""
    found = [m for m in snapshot.messages or () if m.mined and m.signature is None]
    if not found:
        return []
    from gpuhealth.knowledge.causes import symptoms
    from gpuhealth.knowledge.mined_api import by_id

    rows = by_id()
    table = symptoms()
    out = []
    for message in found:
        row = rows.get(message.mined)
        if row is None or not row.cause:
            continue
        name = f"{row.name} ({row.number})" if row.number else row.name
        # an error code has no family severity: the symptom it shows sets it (a GPU lost is critical)
        severity = table[row.symptom].severity if row.symptom in table else "warning"
        out.append(MinedLine(message, "GH309", row.id, "", name, row.reporter, row.code, row.cause, row.decides,
                             severity, (), row.where, row.url))
    return out


def _tool_lines(snapshot: Snapshot) -> list[MinedLine]:
    """GH310's: error-looking lines of the container toolkit and nvidia-installer no signature row names."""
    from gpuhealth.checks.tool_messages import explained, unknown_lines

    rows = explained(snapshot)
    if not rows:
        return []
    from gpuhealth.knowledge.mined_tools import families, program

    known = families()
    out = []
    for message in unknown_lines(snapshot):
        row = rows.get(message.line)
        if row is None:
            continue
        family = known[row.family]
        out.append(MinedLine(message, "GH310", row.id, family.id, family.title,
                             f"{program(row)} ({posixpath.basename(row.file)})", family.code, family.cause,
                             family.decides, _grade(row.level, family.severity, family.decides), family.explains,
                             f"{row.repository} {row.tags} {row.file_line}", row.url))
    return out


READERS: tuple[Callable[[Snapshot], list[MinedLine]], ...] = (_driver_lines, _api_lines, _tool_lines)
