"""The text report prints a worded step in its place among a finding's commands: the order `gpuhealth fix` uses
(``fixsections.in_script_order``), never every command first and the steps after them.

Before, the renderer listed all commands under ``fix:`` and then the steps, so "install gcc-<major>" came after
``sudo dkms autoinstall`` that needs it (GH505), the Fabric Manager package after ``systemctl enable --now`` of its
service (GH210), and the LD_LIBRARY_PATH edit after the ``ldconfig`` that follows it (GH602).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from gpuhealth.fixsections import in_script_order
from gpuhealth.knowledge.fixes import check_fixes
from gpuhealth.model import Finding, Fix, OsInfo, Report, Severity, Snapshot
from gpuhealth.report import text
from test_fix_order import evidence_report, printed_fixes

CASES = Path(__file__).parent / "cases" / "dev"


def shown_as(fix: Fix) -> str:
    """How the report starts the fix's line: a command as is, a step or an edit behind its label."""
    command = " ".join(fix.command.split())
    return command if fix.is_command else f"{'edit' if fix.kind == 'edit' else 'step'}: {fix.command}"


def test_real_gcc_mismatch_prints_the_install_step_before_the_rebuild():
    # a real DKMS build log (tests/cases/dev/gcc-mismatch-void-nvidia340, distribution unknown): GH505's table rows are
    # the looks, the gcc install (a step: <major> is a placeholder), then the DKMS rebuild that needs that gcc
    findings = printed_fixes(evidence_report("gcc-mismatch-void-nvidia340"))
    lines = next(f for f in findings if "sudo dkms autoinstall" in f)
    step = next(i for i, line in enumerate(lines) if line.startswith("step: sudo apt-get install gcc-<major>"))
    assert lines.index("gcc --version") < step < lines.index("sudo dkms autoinstall")


def test_real_fabric_manager_case_installs_the_package_before_enabling_it():
    findings = printed_fixes(evidence_report("fabric-manager-missing-802-bandwidthtest"))
    lines = next(f for f in findings if "sudo systemctl enable --now nvidia-fabricmanager" in f)
    step = next(i for i, line in enumerate(lines) if line.startswith("step: sudo dnf install nvidia-fabric-manager"))
    assert step < lines.index("sudo systemctl enable --now nvidia-fabricmanager")


@pytest.mark.parametrize("family", ["debian", "rhel", "other"])
@pytest.mark.parametrize("code", sorted(check_fixes()))
def test_every_table_procedure_prints_in_script_order(code, family):
    """Each check's rows as one finding: the printed commands and steps are the script's order, steps in place."""
    fixes = check_fixes()[code]
    distro = {"debian": "ubuntu", "rhel": "rocky"}.get(family)
    snapshot = Snapshot(os=OsInfo(id=distro)) if distro else Snapshot()
    report = Report(snapshot, (Finding(code, "x", Severity.WARNING, "a finding", fixes=fixes,
                                       action="none", impact="degraded"),))
    wanted = [shown_as(f) for f in in_script_order(tuple(f for f in fixes if family == "other"
                                                          or f.family in ("any", family)))]
    printed = printed_fixes(report)
    assert [[line for line in printed[0] if any(line.startswith(w) for w in wanted)]] == [printed[0]]
    assert [next(w for w in wanted if line.startswith(w)) for line in printed[0]] == wanted


def test_a_step_between_commands_is_followed_by_then():
    fixes = (Fix("cat /proc/version"), Fix("sudo apt-get install gcc-<major>", note="<major>: the kernel's gcc"),
             Fix("sudo dkms autoinstall"))
    buffer = io.StringIO()
    report = Report(Snapshot(os=OsInfo(id="ubuntu")), (Finding("GH505", "x", Severity.WARNING, "m", fixes=fixes,
                                                               action="none", impact="degraded"),))
    text.render(report, Console(file=buffer, width=200, highlight=False, color_system=None))
    lines = buffer.getvalue().splitlines()
    start = lines.index("    fix:")
    assert lines[start:start + 5] == ["    fix:", "      cat /proc/version",
                                      "    step: sudo apt-get install gcc-<major> (<major>: the kernel's gcc)",
                                      "    then:", "      sudo dkms autoinstall"]
