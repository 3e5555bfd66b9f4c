"""``--format markdown``: the report as a ticket body, read in a terminal first: inert (``inert.visible``)."""

from __future__ import annotations

from gpuhealth.inert import visible
from gpuhealth.model import Finding, Report
from gpuhealth.report.common import (
    fixes_for_host,
    fold,
    gpu_rows,
    host_summary,
    skipped_by_reason,
    verdict_line,
)


def render(report: Report) -> str:
    out = [f"## gpuhealth: {verdict_line(report)}", ""]
    out += [f"- **{label}:** {value}" for label, value in host_summary(report.snapshot)]
    rows = gpu_rows(report.snapshot)
    if rows:
        out += ["", "| GPU | Name | PCI address |", "|---|---|---|"]
        out += [f"| {r['index']} | {r['name']} | {r['pci_address']} |" for r in rows]
    for cause in fold(report.findings):
        out += ["", *_finding(cause.finding, report)]
        out += [f"  - explains `{s.code}` {s.message}" for s in cause.symptoms]
    if report.skipped:
        out += ["", "### Skipped (not checked, not passed)", ""]
        for reason, codes in skipped_by_reason(report):
            out.append(f"- {', '.join(f'`{code}`' for code in codes)}: {reason}")
    return visible("\n".join(out) + "\n")  # one pass over the whole body: no value from evidence is missed


def _finding(finding: Finding, report: Report) -> list[str]:
    subject = "" if finding.subject.is_host else f" [{finding.subject}]"
    lines = [f"### {finding.severity.value.upper()} `{finding.code}` {finding.slug}{subject}", "",
             finding.message, "", f"Impact: `{finding.impact}`; action: `{finding.action}` (docs/actions.md).", ""]
    for evidence in finding.evidence:
        lines += [f"Evidence from `{evidence.source}`:", "", "```", *evidence.lines, "```", ""]
    fixes = fixes_for_host(finding, report.snapshot)
    if fixes:
        lines += ["Fix:", ""]
        # only a command is shown as code: a step or a file edit in words is never pasted into a shell
        lines += [(f"- `{f.command}`" if f.is_command else f"- {f.kind}: {f.command}")
                  + (" (disruptive)" if f.disruptive else "")
                  + (f" ({f.family})" if f.family != "any" else "") + (f": {f.note}" if f.note else "")
                  for f in fixes]
    return lines
