"""``--format npd``: a Kubernetes node-problem-detector custom plugin.

Exit 0 = OK, 1 = NonOK (a problem), 2 = Unknown (gpuhealth could not judge); one line on stdout of at
most ``MAX_MESSAGE`` (80) characters, which NPD sets as the condition's message (NPD truncates at the
plugin's ``max_output_length``).

* NonOK: a finding at or above the threshold: critical by default, ``GPUHEALTH_FAIL_ON=warning``
  adds warnings (the same setting as ``--format nhc``).
* Unknown: no problem found, but gpuhealth could not judge: no check ran, every check that ran was
  skipped, or a check failed inside gpuhealth (GH001).
* OK: anything else; warnings below the threshold are named in the message.

See deploy/kubernetes/npd-gpuhealth-plugin.json.
"""

from __future__ import annotations

from gpuhealth.checks.engine import INTERNAL_ERROR
from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.nhc import one_line, problems

OK, NON_OK, UNKNOWN = 0, 1, 2
MAX_MESSAGE = 80


def _unknown_reason(report: Report) -> str | None:
    """Why gpuhealth could not judge this node, or None when it could."""
    internal = [f for f in report.findings if f.code == INTERNAL_ERROR]
    if internal:
        return f"gpuhealth failed in a check: {one_line(internal[0].message)}"
    if report.checks_run == 0:
        return "no check ran"
    if not report.findings and report.checks_run <= len({s.code for s in report.skipped}):
        reason = f": {one_line(report.skipped[0].reason)}" if report.skipped else ""
        return f"all {report.checks_run} checks skipped{reason}"
    return None


def _brief(finding: Finding) -> str:
    gpu = f" GPU {finding.subject.gpu_index}" if finding.subject.gpu_index is not None else (
        f" {finding.subject.pci_address}" if finding.subject.pci_address else "")
    return f"{finding.code}{gpu}: {one_line(finding.message)}"


def status(report: Report, threshold: Severity | None = None) -> tuple[int, str]:
    """(NPD exit status, message before truncation)."""
    found = problems(report, threshold)
    if found:
        more = f" (+{len(found) - 1})" if len(found) > 1 else ""
        return NON_OK, f"gpuhealth: {report.verdict}{more}: {_brief(found[0])}"
    unknown = _unknown_reason(report)
    if unknown:
        return UNKNOWN, f"gpuhealth: UNKNOWN: {unknown}"
    if report.findings and report.findings[0].severity is not Severity.INFO:
        return OK, f"gpuhealth: {report.verdict}: {_brief(report.findings[0])}"
    skipped = f", {len(report.skipped)} skipped" if report.skipped else ""
    return OK, f"gpuhealth: {report.verdict}: {report.checks_run} checks{skipped}"


def fit(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes (NPD counts bytes), ending in ``...`` when cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: max(limit - 3, 0)].decode("utf-8", "ignore") + "..."


def render(report: Report, threshold: Severity | None = None, limit: int = MAX_MESSAGE) -> str:
    return fit(status(report, threshold)[1], limit) + "\n"


def exit_code(report: Report, threshold: Severity | None = None) -> int:
    return status(report, threshold)[0]
