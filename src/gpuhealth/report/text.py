"""The terminal report (rich): verdict first, then causes with evidence and fixes, then what was skipped."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpuhealth.checks.diagnosis import next_commands as next_commands_for
from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.common import (
    fixes_for_host,
    fold,
    gpu_rows,
    host_summary,
    next_commands,
    skipped_by_reason,
    skipped_summary,
    verdict_line,
)

STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
VERDICT_STYLE = {"BROKEN": "bold white on red", "DEGRADED": "bold black on yellow",
                 "HEALTHY": "bold white on green", "NO DIAGNOSIS": "bold white on blue"}


def render(report: Report, console: Console, verbose: bool = False) -> None:
    console.print(Text(f" {verdict_line(report)} ", style=VERDICT_STYLE[report.verdict]))
    console.print()
    summary = Table.grid(padding=(0, 2))
    for label, value in host_summary(report.snapshot):
        summary.add_row(Text(label, style="bold"), Text(value))
    console.print(summary)
    rows = gpu_rows(report.snapshot)
    if rows:
        table = Table("GPU", "Name", "PCI address", box=None, padding=(0, 2), header_style="bold")
        for row in rows:
            table.add_row(row["index"], row["name"], row["pci_address"])
        console.print(table)
    console.print()
    for cause in fold(report.findings):
        console.print(_finding(cause.finding, report, verbose))
        for symptom in cause.symptoms:
            console.print(Text(f"    explains {symptom.code} {symptom.slug}: {symptom.message}", style="dim"))
        console.print()
    summary = skipped_summary(report)
    if summary and not verbose:
        console.print(Text(summary, style="dim"))
    elif report.skipped:
        console.print(Text(f"Skipped ({len(report.skipped)}): not checked, not passed", style="bold"))
        if verbose:
            for skipped in report.skipped:
                console.print(Text(f"  {skipped.code} {skipped.slug}: {skipped.reason}", style="dim"))
        else:
            for reason, codes in skipped_by_reason(report):
                console.print(Text(f"  {', '.join(codes)}: {reason}", style="dim"))
    commands = next_commands(report)
    if commands:
        console.print()
        console.print(Text("Paste these next" if report.snapshot.origin == "evidence" else "Run these next",
                           style="bold"), Text("(their output decides between the causes above):", style="dim"))
        for command in commands:
            console.print(Text(f"  {command}", style="green"))


def _finding(finding: Finding, report: Report, verbose: bool) -> Group:
    parts: list[Text] = []
    head = Text()
    head.append(f"{finding.severity.value.upper():8}", style=STYLE[finding.severity])
    head.append(f" {finding.code} ", style="bold")
    if not finding.subject.is_host:
        head.append(f"[{finding.subject}] ", style="magenta")
    head.append(finding.message)
    parts.append(head)
    for evidence in finding.evidence:
        parts.append(Text(f"    evidence: {evidence.source}", style="dim"))
        for line in evidence.lines:
            parts.append(Text(f"      {line}", style="dim"))
    if verbose and finding.explanation:
        parts.append(Text("    " + finding.explanation.replace("\n", " "), style="italic"))
    parts.extend(_differential(finding, report.snapshot.commands_given))
    for fix in fixes_for_host(finding, report.snapshot):
        label = f"[{fix.family}] " if fix.family != "any" else ""
        warn = " (disruptive)" if fix.disruptive else ""
        note = f"  # {fix.note}" if fix.note else ""
        parts.append(Text.from_markup(f"    fix{escape(warn)}: {escape(label)}[green]{escape(fix.command)}"
                                      f"[/green]{escape(note)}"))
    parts.append(Text(f"    more: gpuhealth explain {finding.code}", style="dim"))
    return Group(*parts)


def _differential(finding: Finding, given: tuple[str, ...]) -> list[Text]:
    """Most likely cause, the others that remain open, the ruled-out ones, and the commands that decide."""
    if not finding.differential:
        return []
    candidates = finding.differential
    top, rest = candidates[0], candidates[1:]
    lines = [Text(f"    most likely: {top.title} ({top.why})")]
    still = [c for c in rest if c.status != "ruled out"]
    if still:
        lines.append(Text("    else: " + "; ".join(c.title for c in still[:4]) + (" ..." if len(still) > 4 else "")))
    out = [c for c in rest if c.status == "ruled out"]
    if out:
        lines.append(Text("    ruled out: " + "; ".join(f"{c.title} ({c.code} ran clean)" for c in out), style="dim"))
    commands = next_commands_of(finding, given)[:4]
    if commands:
        lines.append(Text.from_markup("    to tell: " + ", ".join(f"[green]{escape(c)}[/green]" for c in commands)))
    return lines


def next_commands_of(finding: Finding, given: tuple[str, ...]) -> list[str]:
    return next_commands_for((finding,), given)
