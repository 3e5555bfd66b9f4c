"""The terminal report (rich), in reading order:

1. the verdict line;
2. the findings, root causes first, each with the symptoms it explains folded under it;
3. a one-line host summary (the GPU table only when a GPU has a finding, or with ``-v``);
4. the skipped checks, one line per reason with a count (``-v`` lists every check);
5. a closing summary line, as ruff, cargo and pytest end with one.

Lines fit the console's width: 80 columns, a terminal's own, or nothing wrapped when piped (``termwidth``). A
finding's headline is one short clause (at most ``HEADLINE_CHARS`` after its severity, code and subject); what else
its message says goes on the lines below it, its count and times (``seen:``, ``first:``, ``last:`` or ``at:``) and
the next action (``next:``) each on a line of its own. Prose wraps at word boundaries, continued under its label
(a comment's continuation is a comment too), and evidence quoted from the paste (a log line) at its blanks, every
character kept, continued under a deeper indent. One kind of line is never wrapped and may be wider: a command
(``soft_wrap``: pasted, a wrapped line would run as two; one command per line, ``to tell:`` included, printed whole
however long). A command's comment goes on its own line above it, and a step (an instruction in words) never looks
like a command. A finding's fixes come in the order `gpuhealth fix` runs them
(``report.common.fixes_for_host``): backups, read-only looks, changes, disruptive steps last; a step sits in its
place among the commands (those after it under ``then:``).

Evidence is printed as it is (a process name, a log line): the console must be ``inert.console()``, as the
command line's is, so that escape sequences in it show as ``\x1b`` and never act on the terminal.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuhealth.checks.diagnosis import RULED_OUT_BY
from gpuhealth.checks.diagnosis import next_commands as next_commands_for
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Candidate, Finding, Fix, Report, Severity
from gpuhealth.report.common import (
    Cause,
    cause_fixes,
    closing_line,
    fold,
    gpu_rows,
    host_line,
    next_commands,
    skipped_by_reason,
    skipped_summary,
    verdict_line,
)

STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
VERDICT_STYLE = {"BROKEN": "bold white on red", "DEGRADED": "bold black on yellow",
                 "HEALTHY": "bold white on green", "NO DIAGNOSIS": "bold white on blue"}
REASONS_SHOWN = 6  # skipped-check reasons listed without -v; the rest are counted on one line
REASON_CHARS = 110
HEADLINE_CHARS = 100  # a finding's headline, after its severity, code and subject: the rest goes below it
HEADLINE_MIN = 24  # a message is never cut closer to its start than this (the headline would say nothing)
# How the kernel-log checks end a message (checks/kernel_log._span, GH703): " x14, first T1, last T2", " at T";
# and GH301 ends with " - next: <action>". The report puts each on a line of its own.
NEXT = " - next: "
FIRST_LAST = lazy_re(r"(?: x(?P<count>\d+))?, first (?P<first>.+?), last (?P<last>.+?)$")
COUNT = lazy_re(r" x(?P<count>\d+)$")
# where a long message may be cut into its headline and the rest; before " (" the bracket goes with the rest
CLAUSE_ENDS = ("; ", ": ", " - ", ", ", " (")
I1, I2, I3 = " " * 4, " " * 6, " " * 8  # the indents: a finding's lines, their continuations and quotes, deeper
TAB = 8  # rich's tab size (Console.tab_size), as terminals expand a tab


def render(report: Report, console: Console, verbose: bool = False, fix_command: str = "gpuhealth fix") -> None:
    def out(text: Text | str = "") -> None:
        console.print(text, soft_wrap=True)

    width = console.width
    out(Text(f" {verdict_line(report)} ", style=VERDICT_STYLE.get(report.verdict, "bold")))
    out()
    shown: set[tuple[str, str]] = set()
    for cause in fold(report.findings):
        for line in _cause(cause, report, verbose, shown, width):
            out(line)
        out()
    for line in wrap(Text(host_line(report.snapshot), style="bold"), width, "  ", breaks=" · "):
        out(line)
    if verbose or any(not f.subject.is_host for f in report.findings):
        _gpu_table(report, console)
    for line in _skipped(report, verbose, width):
        out(line)
    commands = next_commands(report)
    if commands:
        out()
        lead = Text("Paste these next" if report.snapshot.origin == "evidence" else "Run these next", style="bold")
        for line in wrap(lead + Text(" (their output decides between the causes above):", style="dim"), width, "  "):
            out(line)
        for command in commands:
            out(Text(f"  {command}", style="green"))
    out()
    for line in _closing(closing_line(report, fix_command), STYLE.get(_worst(report), "bold green"), width):
        out(line)


def _closing(line: str, style: str, width: int) -> list[Text]:
    """The closing line, wrapped; when it does not fit, its `gpuhealth fix ...` command (a long bundle path) goes on
    a line of its own at the commands' indent, whole: a command is never cut."""
    head, found, command = line.rpartition("; run `")
    if len(line) <= width or not found or not command.endswith("` for a script"):
        return wrap(Text(line, style=style), width, "  ")
    return [*wrap(Text(f"{head}; for a script, run:", style=style), width, "  "),
            Text(I2 + command.removesuffix("` for a script"), style="green")]


def _worst(report: Report) -> Severity | None:
    return max((f.severity for f in report.findings), key=lambda s: s.rank, default=None)


# --------------------------------------------------------------------------- wrapping


def wrap(text: Text, width: int, hang: str = I2, breaks: str = " ", quoted: bool = False) -> list[Text]:
    """``text`` cut at word boundaries (or at ``breaks``) into lines of at most ``width`` characters, each line
    after the first starting with ``hang`` (an indent, or an indent and ``# `` for a comment). Text in backquotes
    (a command in a sentence) is never cut, unless the text is ``quoted`` (a program's line, whose backquotes are
    its own: "Assertion `0' failed"). A word longer than a whole line is cut where the line ends."""
    plain = text.plain
    if len(plain) <= width:
        return [text]
    cuts = _break_points(plain, breaks, spans=not quoted)
    lines: list[Text] = []
    start, limit = 0, width
    while len(plain) - start > limit:
        fitting = [c for c in cuts if start < c and len(plain[start:c].rstrip()) <= limit]
        end = fitting[-1] if fitting else start + max(limit, 1)  # one word too long for a line: cut it
        piece = text[start:end]
        piece.rstrip()
        lines.append(piece)
        start, limit = end, max(width - len(hang), 10)
    lines.append(text[start:])
    return [lines[0], *(Text(hang, style=text.style) + line for line in lines[1:])]


def _break_points(plain: str, breaks: str, spans: bool = True) -> list[int]:
    """Where a line may end: after each ``breaks`` (a space), outside backquotes (with ``spans``)."""
    points, quoted, i = [], False, 0
    while i < len(plain):
        if spans and plain[i] == "`":
            quoted = not quoted
        elif not quoted and plain.startswith(breaks, i):
            points.append(i + len(breaks))
            i += len(breaks)
            continue
        i += 1
    return points


def prose(label: str, text: str, width: int, style: str = "", hang: str = I2) -> list[Text]:
    """A labelled line of words (``    explains GH203: ...``), wrapped and continued under ``hang``."""
    return wrap(Text(label + text, style=style), width, hang)


# --------------------------------------------------------------------------- a finding


def _cause(cause: Cause, report: Report, verbose: bool, shown: set[tuple[str, str]], width: int) -> list[Text]:
    finding = cause.finding
    lines = _head(finding, width)
    lines += _evidence(finding, width)
    if verbose and finding.explanation:
        lines += prose(I1, finding.explanation.replace("\n", " "), width, "italic", I1)
    lines += _differential(finding, report.snapshot.commands_given, width)
    for symptom in cause.symptoms:
        where = "" if symptom.subject.is_host else f" [{symptom.subject}]"
        headline, rest, facts = split_message(symptom.message)
        lines += prose(f"{I1}explains {symptom.code}{where}: ", " ".join(x for x in (headline, rest) if x), width,
                       "dim")
        lines += [line for label, value in facts for line in prose(f"{I2}{label}: ", value, width, "dim", I3)]
    fixes = cause_fixes(cause, report.snapshot, shown)
    if not fixes and finding.fixes:
        lines.append(Text(f"{I1}fix: the commands listed above", style="dim"))
    lines += _fixes(fixes, report, width)
    # what it does to the node and what to do, as the scheduler formats and the JSON name them (docs/actions.md);
    # too long for the line, it breaks between its parts only ("more: gpuhealth explain GHnnn" stays whole)
    lines += wrap(Text(f"{I1}impact: {finding.impact}; action: {finding.action}; more: gpuhealth explain "
                       f"{finding.code}", style="dim"), width, I1, breaks="; ")
    return lines


def _head(finding: Finding, width: int) -> list[Text]:
    """The headline (severity, code, subject, one short clause), then the rest of the message: its other clauses,
    its count and times, and the next action, each on its own line."""
    headline, rest, facts = split_message(finding.message)
    head = Text()
    head.append(f"{finding.severity.value.upper():8}", style=STYLE[finding.severity])
    head.append(f" {finding.code} ", style="bold")
    if not finding.subject.is_host:
        head.append(f"[{finding.subject}] ", style="magenta")
    head.append(headline)
    lines = wrap(head, width, " " * 9)  # continued under the code: still the headline, deeper than what follows
    if rest:
        lines += prose(I1, rest, width)
    for label, value in facts:
        lines += prose(f"{I1}{label}: ", value, width)
    return lines


def split_message(message: str) -> tuple[str, str, list[tuple[str, str]]]:
    """``(headline, rest, facts)`` of a finding's message: the headline one clause of at most ``HEADLINE_CHARS``,
    the rest of the sentence after it (or ""), and the facts the checks append, each ``(label, value)``: how often
    (``seen``), when (``first``/``last``, or ``at``) and what to do next (``next``). Nothing is dropped: the
    headline, the rest and the facts hold every word of the message."""
    facts: list[tuple[str, str]] = []
    core, _, next_step = message.partition(NEXT)
    span = FIRST_LAST.search(core)
    if span:
        core = core[:span.start()]
        if span["count"]:
            facts.append(("seen", f"{span['count']} times"))
        facts += [("first", span["first"]), ("last", span["last"])]
    elif COUNT.search(core):
        count = COUNT.search(core)
        core, facts = core[:count.start()], [("seen", f"{count['count']} times")]
    elif " at " in core and _is_time(core.rsplit(" at ", 1)[1]):
        core, when = core.rsplit(" at ", 1)
        facts.append(("at", when))
    if next_step:
        facts.append(("next", next_step))
    headline, rest = _cut(core)
    return headline, rest, facts


def _is_time(text: str) -> bool:
    """A kernel log's timestamp as the checks print it (a time has a colon or a fraction: not any number)."""
    from gpuhealth.parsers.kernel_log import timestamp_seconds

    return (":" in text or "." in text) and timestamp_seconds(text) is not None


def _cut(text: str) -> tuple[str, str]:
    """A long message cut after its last clause that ends by ``HEADLINE_CHARS`` (outside brackets): the first
    clause that a reader needs to know what is wrong, and the rest (said on the next line)."""
    if len(text) <= HEADLINE_CHARS:
        return text, ""
    depth, best = 0, None
    for i, char in enumerate(text[:HEADLINE_CHARS]):
        depth += (char in "([") - (char in ")]")
        for sep in CLAUSE_ENDS:
            if depth == 0 and i >= HEADLINE_MIN and text.startswith(sep, i):
                # a colon or a dash announces the rest: kept on the headline; a semicolon or a comma is not
                mark = {": ": ":", " - ": " -"}.get(sep, "")
                if i + len(mark) <= HEADLINE_CHARS:  # the last clause end that fits: the longest whole clauses
                    best = (text[:i] + mark, text[i + len(sep):] if sep != " (" else text[i + 1:])
    if best is not None:
        return best
    cut = text.rfind(" ", HEADLINE_MIN, HEADLINE_CHARS)  # no clause ends in time: the last word that fits
    cut = cut if cut > 0 else HEADLINE_CHARS
    return text[:cut] + " …", "… " + text[cut:].lstrip()


def _evidence(finding: Finding, width: int) -> list[Text]:
    lines = []
    for evidence in finding.evidence:
        lines += prose(f"{I1}evidence: ", evidence.source, width, "dim", I3)
        # every character as quoted, wrapped at its blanks and continued deeper (I3) than the line it continues; a
        # line holding a newline (a message of several lines) keeps the indent on each. Its tabs are expanded as the
        # console expands them (to the next multiple of 8 from the line's start), so that what is measured is shown
        lines += [wrapped for line in evidence.lines for part in line.split("\n")
                  for wrapped in wrap(Text(f"{I2}{part}".expandtabs(TAB), style="dim"), width, I3, quoted=True)]
    return lines


def _fixes(fixes: tuple[Fix, ...], report: Report, width: int) -> list[Text]:
    """The fixes in the order given (``gpuhealth fix``'s order): commands under ``fix:``, each with its comment above
    it; a step as ``step:`` (``edit:``) prose in its place, and the commands after it under ``then:``. A step that must
    come before a command ("install gcc-<major>" before ``dkms autoinstall``) is never printed after it."""
    lines: list[Text] = []
    family_known = report.snapshot.os is not None and report.snapshot.os.family != "other"
    in_block = False
    for fix in fixes:
        if not fix.is_command:
            tail = [x for x in (fix.note, "disruptive" if fix.disruptive else "",
                                fix.family if fix.family != "any" and not family_known else "") if x]
            label = "edit" if fix.kind == "edit" else "step"  # a file change, or an instruction in words
            lines += prose(f"{I1}{label}: ", fix.command + (f" ({'; '.join(tail)})" if tail else ""), width)
            in_block = False
            continue
        if not in_block:
            lines.append(Text(f"{I1}then:" if lines else f"{I1}fix:"))
            in_block = True
        comment = _comment(fix, family_known)
        if comment:  # a comment wraps as comments: pasted with its command, each line stays one
            lines += prose(f"{I2}# ", comment, width, "dim", f"{I2}# ")
        lines.append(Text(f"{I2}{' '.join(fix.command.split())}", style="green"))
    return lines


def _comment(fix: Fix, family_known: bool) -> str:
    parts = []
    if fix.family != "any" and not family_known:
        parts.append(f"{fix.family} only")
    if fix.disruptive:
        parts.append("disruptive")
    if fix.note:
        parts.append(fix.note)
    return "; ".join(parts)


def _gpu_table(report: Report, console: Console) -> None:
    """The GPUs, as wide as the console: a long name wraps in its cell (piped, the console is unwrapped)."""
    rows = gpu_rows(report.snapshot)
    if not rows:
        return
    troubled = {f.subject.pci_address for f in report.findings if f.subject.pci_address} | {
        f.subject.gpu_index for f in report.findings if f.subject.gpu_index is not None}
    table = Table("GPU", "Name", "PCI address", "", box=None, padding=(0, 2), header_style="bold")
    for row in rows:
        index = int(row["index"]) if row["index"].isdigit() else None
        mark = "finding" if row["pci_address"] in troubled or index in troubled else ""
        table.add_row(row["index"], row["name"], row["pci_address"], Text(mark, style="red"))
    console.print(table)


def _skipped(report: Report, verbose: bool, width: int) -> list[Text]:
    if not report.skipped:
        return []
    summary = skipped_summary(report)
    if summary and not verbose:  # evidence mode: most checks lack evidence by nature; one line says so
        return wrap(Text(summary, style="dim"), width, "  ")
    lines = [Text("Skipped checks (not checked, not passed), by reason:", style="bold")]
    if verbose:
        for s in report.skipped:
            lines += prose(f"  {s.code} {s.slug}: ", s.reason, width, "dim", I1)
        return lines
    groups = skipped_by_reason(report)
    for reason, codes in groups[:REASONS_SHOWN]:
        text = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1].rstrip() + "…"
        lines += prose(f"  {len(codes):2} ", text, width, "dim", "     ")
    rest = groups[REASONS_SHOWN:]
    if rest:
        lines += prose(f"  {sum(len(c) for _, c in rest):2} ", f"for {len(rest)} other reasons; -v lists every "
                       "skipped check", width, "dim", "     ")
    return lines


def _ruled_out_why(candidate: Candidate) -> str:
    """The short reason: the rule's own words for a line that excludes it, else the check that ran clean."""
    if candidate.source and RULED_OUT_BY in candidate.why:
        return candidate.why.rsplit(RULED_OUT_BY, 1)[0]
    return f"{candidate.code} ran clean"


def _differential(finding: Finding, given: tuple[str, ...], width: int) -> list[Text]:
    """Most likely cause, the others that remain open, the ruled-out ones, and the commands that decide."""
    if not finding.differential:
        return []
    top, rest = finding.differential[0], finding.differential[1:]
    called = "cause" if top.status == "confirmed" else "most likely"  # a decided cause is no guess
    lines = prose(f"{I1}{called}: ", f"{top.title} ({top.why})", width)
    still = [c for c in rest if c.status != "ruled out"]
    if still:
        lines += prose(f"{I1}else: ", "; ".join(c.title for c in still[:4]) + (" ..." if len(still) > 4 else ""),
                       width)
    out = [c for c in rest if c.status == "ruled out"]
    # one cause per line, aligned under the first: several rules firing would make one line hundreds of characters
    # long; a cause too long for the line with its reason gets the reason on the next line
    lead = f"{I1}ruled out: "
    under = " " * len(lead)
    for i, candidate in enumerate(out):
        head = (lead if i == 0 else under) + candidate.title
        why = f"({_ruled_out_why(candidate)})"
        if len(head) + 1 + len(why) <= width:
            lines.append(Text(f"{head} {why}", style="dim"))
        else:  # the reason on a line of its own, under its cause
            lines += wrap(Text(head, style="dim"), width, under + "  ")
            lines += wrap(Text(under + "  " + why, style="dim"), width, under + "   ")
    commands = next_commands_for((finding,), given)[:4]
    # a lead by prior alone already shows these commands as its fixes (each noting the cause it decides): once is enough
    if commands and not set(commands) <= {fix.command for fix in finding.fixes}:
        label = f"{I1}to tell: "  # one command a line, each whole (pasteable), aligned under the first
        for i, command in enumerate(commands):
            lines.append(Text(label if i == 0 else " " * len(label)) + Text(command, style="green"))
    return lines
