"""``--format npd``: a Kubernetes node-problem-detector custom plugin.

Exit 0 = OK, 1 = NonOK (a problem), 2 = Unknown (gpuhealth could not judge); one line on stdout of at
most ``MAX_MESSAGE`` (80) characters, which NPD sets as the condition's message (NPD truncates at the
plugin's ``max_output_length``).

* NonOK: a finding whose impact takes the node out of service (node_unusable, gpu_unusable; degraded too with
  ``GPUHEALTH_FAIL_ON=degraded``, the same setting as ``--format nhc``). user_environment never does.
* Unknown: no problem found, but gpuhealth could not judge: no check ran, every check that ran was
  skipped, or a check failed inside gpuhealth (GH001).
* OK: anything else; other findings are named in the message.

The message names the finding's impact and action (``impact=gpu_unusable action=reset_gpu``).
See deploy/kubernetes/npd-gpuhealth-plugin.json.
"""

from __future__ import annotations

from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.nhc import could_not_judge, one_line, problems

OK, NON_OK, UNKNOWN = 0, 1, 2
MAX_MESSAGE = 80


def _brief(finding: Finding) -> str:
    gpu = f" GPU {finding.subject.gpu_index}" if finding.subject.gpu_index is not None else (
        f" {finding.subject.pci_address}" if finding.subject.pci_address else "")
    return f"{finding.code}{gpu} {finding.impact}/{finding.action}: {one_line(finding.message)}"


def status(report: Report, impacts: tuple[str, ...] | None = None) -> tuple[int, str]:
    """(NPD exit status, message before truncation)."""
    found = problems(report, impacts)
    if found:
        more = f" (+{len(found) - 1})" if len(found) > 1 else ""
        return NON_OK, f"gpuhealth: {report.verdict}{more}: {_brief(found[0])}"
    unknown = could_not_judge(report)
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


def render(report: Report, impacts: tuple[str, ...] | None = None, limit: int = MAX_MESSAGE) -> str:
    return fit(status(report, impacts)[1], limit) + "\n"


def exit_code(report: Report, impacts: tuple[str, ...] | None = None) -> int:
    return status(report, impacts)[0]
