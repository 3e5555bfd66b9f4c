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

``--format npd-gpu`` (``-driver``, ``-fabric``, ``-network``, ``-host``): the same, for one class of checks only
(knowledge/classes.csv maps each check code to its class), so that the plugin sets one condition per class and the
remediation people already run (a drainer, a cluster autoscaler's node repair) can act on the class: a GPU fault
is not a driver installation, nor a down InfiniBand port. The message leads with the action and the GPU. A code
the table does not know (none: tests/test_fleet_formats.py holds every check code to a row) counts as host.
See deploy/kubernetes/npd-gpuhealth-plugin.json.
"""

from __future__ import annotations

import functools

from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.nhc import could_not_judge, one_line, problems

OK, NON_OK, UNKNOWN = 0, 1, 2
MAX_MESSAGE = 80
CLASSES = ("gpu", "driver", "fabric", "network", "host")
# The condition type each class sets (deploy/kubernetes/npd-gpuhealth-plugin.json declares the same).
CONDITIONS = {"gpu": "GPUUnhealthy", "driver": "GPUDriverUnhealthy", "fabric": "GPUFabricUnhealthy",
              "network": "GPUNetworkUnhealthy", "host": "GPUHostUnhealthy"}
FALLBACK_CLASS = "host"


@functools.cache
def classes() -> dict[str, str]:
    """Check code -> class (knowledge/classes.csv)."""
    from gpuhealth.knowledge import table_rows

    return {row["code"]: row["class"] for row in table_rows("classes.csv")}


def class_of(code: str) -> str:
    return classes().get(code, FALLBACK_CLASS)


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


# --------------------------------------------------------------------------- one condition per class


def _action_first(finding: Finding) -> str:
    gpu = f" GPU {finding.subject.gpu_index}" if finding.subject.gpu_index is not None else (
        f" {finding.subject.pci_address}" if finding.subject.pci_address else "")
    return f"{finding.action}{gpu} ({finding.code} {finding.impact}): {one_line(finding.message)}"


def class_status(report: Report, kind: str, impacts: tuple[str, ...] | None = None) -> tuple[int, str]:
    """(NPD exit status, message) of the ``kind`` class's condition: NonOK on a finding of that class that takes
    the node or a GPU out of service, Unknown when gpuhealth could not judge the node at all, else OK."""
    found = [f for f in problems(report, impacts) if class_of(f.code) == kind]
    if found:
        more = f", +{len(found) - 1}" if len(found) > 1 else ""
        lead = _action_first(found[0]).replace(")", f"{more})", 1)
        return NON_OK, f"gpuhealth {kind}: {lead}"
    unknown = could_not_judge(report)
    if unknown:
        return UNKNOWN, f"gpuhealth {kind}: UNKNOWN: {unknown}"
    mine = [f for f in report.findings if class_of(f.code) == kind and f.severity is not Severity.INFO]
    if mine:
        return OK, f"gpuhealth {kind}: OK (not draining): {_action_first(mine[0])}"
    return OK, f"gpuhealth {kind}: OK: no {kind} problem ({report.checks_run} checks)"


def render_class(report: Report, kind: str, limit: int = MAX_MESSAGE) -> str:
    return fit(class_status(report, kind)[1], limit) + "\n"


def class_exit_code(report: Report, kind: str) -> int:
    return class_status(report, kind)[0]
