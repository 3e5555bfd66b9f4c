"""The terminal report (rich), in reading order:

1. the verdict line;
2. the findings, root causes first, each with the symptoms it explains folded under it;
3. a one-line host summary (the GPU table only when a GPU has a finding, or with ``-v``);
4. the skipped checks, one line per reason with a count (``-v`` lists every check);
5. a closing summary line, as ruff, cargo and pytest end with one.

Commands are never wrapped (``soft_wrap``): pasted, a wrapped line would run as two. A command's comment
goes on its own line above it, and a step (an instruction in words) never looks like a command. A finding's
fixes come in the order `gpuhealth fix` runs them (``report.common.fixes_for_host``): backups, read-only looks,
changes, disruptive steps last; a step sits in its place among the commands (those after it under ``then:``).

Evidence is printed as it is (a process name, a log line): the console must be ``inert.console()``, as the
command line's is, so that escape sequences in it show as ``\x1b`` and never act on the terminal.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuhealth.checks.diagnosis import RULED_OUT_BY
from gpuhealth.checks.diagnosis import next_commands as next_commands_for
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
RULED_OUT_CHARS = 140  # a ruled-out cause longer than this with its reason gets the reason on the next line


def render(report: Report, console: Console, verbose: bool = False, fix_command: str = "gpuhealth fix") -> None:
    def out(text: Text | str = "") -> None:
        console.print(text, soft_wrap=True)

    out(Text(f" {verdict_line(report)} ", style=VERDICT_STYLE.get(report.verdict, "bold")))
    out()
    shown: set[tuple[str, str]] = set()
    for cause in fold(report.findings):
        for line in _cause(cause, report, verbose, shown):
            out(line)
        out()
    out(Text(host_line(report.snapshot), style="bold"))
    if verbose or any(not f.subject.is_host for f in report.findings):
        _gpu_table(report, console)
    for line in _skipped(report, verbose):
        out(line)
    commands = next_commands(report)
    if commands:
        out()
        out(Text("Paste these next" if report.snapshot.origin == "evidence" else "Run these next", style="bold")
            + Text(" (their output decides between the causes above):", style="dim"))
        for command in commands:
            out(Text(f"  {command}", style="green"))
    out()
    out(Text(closing_line(report, fix_command), style=STYLE.get(_worst(report), "bold green")))


def _worst(report: Report) -> Severity | None:
    return max((f.severity for f in report.findings), key=lambda s: s.rank, default=None)


def _cause(cause: Cause, report: Report, verbose: bool, shown: set[tuple[str, str]]) -> list[Text]:
    finding = cause.finding
    lines = _head(finding)
    lines += _evidence(finding)
    if verbose and finding.explanation:
        lines.append(Text("    " + finding.explanation.replace("\n", " "), style="italic"))
    lines += _differential(finding, report.snapshot.commands_given)
    for symptom in cause.symptoms:
        where = "" if symptom.subject.is_host else f" [{symptom.subject}]"
        lines.append(Text(f"    explains {symptom.code}{where}: {symptom.message}", style="dim"))
    fixes = cause_fixes(cause, report.snapshot, shown)
    if not fixes and finding.fixes:
        lines.append(Text("    fix: the commands listed above", style="dim"))
    lines += _fixes(fixes, report)
    # what it does to the node and what to do, as the scheduler formats and the JSON name them (docs/actions.md)
    lines.append(Text(f"    impact: {finding.impact}; action: {finding.action}; more: gpuhealth explain {finding.code}",
                      style="dim"))
    return lines


def _head(finding: Finding) -> list[Text]:
    head = Text()
    head.append(f"{finding.severity.value.upper():8}", style=STYLE[finding.severity])
    head.append(f" {finding.code} ", style="bold")
    if not finding.subject.is_host:
        head.append(f"[{finding.subject}] ", style="magenta")
    head.append(finding.message)
    return [head]


def _evidence(finding: Finding) -> list[Text]:
    lines = []
    for evidence in finding.evidence:
        lines.append(Text(f"    evidence: {evidence.source}", style="dim"))
        lines += [Text(f"      {line}", style="dim") for line in evidence.lines]
    return lines


def _fixes(fixes: tuple[Fix, ...], report: Report) -> list[Text]:
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
            lines.append(Text(f"    {label}: {fix.command}" + (f" ({'; '.join(tail)})" if tail else "")))
            in_block = False
            continue
        if not in_block:
            lines.append(Text("    then:" if lines else "    fix:"))
            in_block = True
        comment = _comment(fix, family_known)
        if comment:
            lines.append(Text(f"      # {comment}", style="dim"))
        lines.append(Text(f"      {' '.join(fix.command.split())}", style="green"))
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


def _skipped(report: Report, verbose: bool) -> list[Text]:
    if not report.skipped:
        return []
    summary = skipped_summary(report)
    if summary and not verbose:  # evidence mode: most checks lack evidence by nature; one line says so
        return [Text(summary, style="dim")]
    lines = [Text("Skipped checks (not checked, not passed), by reason:", style="bold")]
    if verbose:
        return lines + [Text(f"  {s.code} {s.slug}: {s.reason}", style="dim") for s in report.skipped]
    groups = skipped_by_reason(report)
    for reason, codes in groups[:REASONS_SHOWN]:
        text = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1].rstrip() + "…"
        lines.append(Text(f"  {len(codes):2} {text}", style="dim"))
    rest = groups[REASONS_SHOWN:]
    if rest:
        lines.append(Text(f"  {sum(len(c) for _, c in rest):2} for {len(rest)} other reasons; -v lists every "
                          "skipped check", style="dim"))
    return lines


def _ruled_out_why(candidate: Candidate) -> str:
    """The short reason: the rule's own words for a line that excludes it, else the check that ran clean."""
    if candidate.source and RULED_OUT_BY in candidate.why:
        return candidate.why.rsplit(RULED_OUT_BY, 1)[0]
    return f"{candidate.code} ran clean"


def _differential(finding: Finding, given: tuple[str, ...]) -> list[Text]:
    """Most likely cause, the others that remain open, the ruled-out ones, and the commands that decide."""
    if not finding.differential:
        return []
    top, rest = finding.differential[0], finding.differential[1:]
    lead = "cause" if top.status == "confirmed" else "most likely"  # a decided cause is no guess
    lines = [Text(f"    {lead}: {top.title} ({top.why})")]
    still = [c for c in rest if c.status != "ruled out"]
    if still:
        lines.append(Text("    else: " + "; ".join(c.title for c in still[:4]) + (" ..." if len(still) > 4 else "")))
    out = [c for c in rest if c.status == "ruled out"]
    # one cause per line, aligned under the first: several rules firing would make one line hundreds of characters
    # long, and the report never wraps (soft_wrap keeps commands whole)
    lead = "    ruled out: "
    for i, candidate in enumerate(out):
        head = (lead if i == 0 else " " * len(lead)) + candidate.title
        why = f"({_ruled_out_why(candidate)})"
        if len(head) + 1 + len(why) <= RULED_OUT_CHARS:
            lines.append(Text(f"{head} {why}", style="dim"))
        else:  # the reason on a line of its own, under its cause
            lines += [Text(head, style="dim"), Text(" " * (len(lead) + 2) + why, style="dim")]
    commands = next_commands_for((finding,), given)[:4]
    # a lead by prior alone already shows these commands as its fixes (each noting the cause it decides): once is enough
    if commands and not set(commands) <= {fix.command for fix in finding.fixes}:
        lines.append(Text("    to tell: ") + Text(", ".join(commands), style="green"))
    return lines
