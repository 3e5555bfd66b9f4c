"""The systemd units in deploy/systemd against what gpuhealth does: the daily check's unit fails on a critical
finding (so that OnFailure= and `systemctl --failed` see it) and still logs the drift; the long-running units
leave stderr to the journal, where the monitor's alert lines carry their syslog priority."""

from __future__ import annotations

import re

from conftest import REPO
from gpuhealth.model import Finding, Report, Severity, Snapshot, Subject

UNITS = REPO / "deploy" / "systemd"


def _settings(unit: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in (UNITS / unit).read_text().splitlines():
        match = re.match(r"([A-Za-z]+)=(.*)", line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


def _exit_code(severity: Severity) -> int:
    finding = Finding("GH301", "xid-errors", severity, "Xid", Subject(0), action="reset_gpu", impact="gpu_unusable")
    return Report(Snapshot(), (finding,)).exit_code


def test_the_check_unit_fails_on_a_critical_finding_and_succeeds_on_warnings():
    settings = _settings("gpuhealth-check.service")
    success = {int(code) for value in settings.get("SuccessExitStatus", []) for code in value.split()}
    assert _exit_code(Severity.WARNING) in success  # warnings: the check ran, the host works
    assert _exit_code(Severity.CRITICAL) not in success and 3 not in success  # critical / could not judge: failed
    (check,) = settings["ExecStart"]
    assert " check " in check and "--save /var/lib/gpuhealth/runs" in check
    # the drift report after a failed check too: ExecStartPost= would be skipped when ExecStart= fails
    assert "ExecStartPost" not in settings
    assert settings["ExecStopPost"] == ["-/usr/local/bin/gpuhealth diff --latest /var/lib/gpuhealth/runs"]


def test_the_long_running_units_leave_stderr_to_the_journal_with_level_prefixes():
    for unit in ("gpuhealth-monitor.service", "gpuhealth-serve.service"):
        settings = _settings(unit)
        assert "StandardError" not in settings and "StandardOutput" not in settings, unit
        assert settings.get("SyslogLevelPrefix", ["yes"]) == ["yes"], unit
        assert settings["Environment"] == ["PYTHONUNBUFFERED=1"], unit  # each alert line at once
