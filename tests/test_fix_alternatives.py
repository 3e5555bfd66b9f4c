"""A fix script never runs two alternatives, and a reboot is last and alone (issue 22, "What to build" 3).

GH202 offers a reboot and, "without a reboot", a module unload/reload: both were live, the reload after the
reboot, running while the machine shut down. Its reload also ended in ``modprobe nvidia nvidia_uvm``, which
loads nvidia with a parameter named nvidia_uvm and never loads nvidia_uvm.
"""

from __future__ import annotations

import re
import shlex

import pytest

from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import DONE_BY_REBOOT, REBOOT, fix_script
from gpuhealth.knowledge import table_rows
from gpuhealth.knowledge.fixes import check_fixes
from gpuhealth.model import Finding, Fix, OsInfo, Report, Severity, Snapshot
from hostcases import FakeHost, case_names, load_spec
from stubshell import live_lines, ran_to_its_end, run_stubbed


def script_for(name: str) -> str:
    return fix_script(run_checks(collect(FakeHost(load_spec(name)))))


def test_gh202_reboots_last_and_keeps_the_reload_as_a_comment(tmp_path):
    script = script_for("driver-library-mismatch")
    lines = live_lines(script)
    assert lines[-1] == "sudo reboot" and lines.count("sudo reboot") == 1
    assert not [line for line in lines if "rmmod" in line]
    assert "# (the reboot at the end does this too: run this instead of the reboot, never both)" in script
    assert "# sudo systemctl stop nvidia-persistenced 2>/dev/null; sudo rmmod" in script
    run = run_stubbed(script, tmp_path)
    assert ran_to_its_end(run, script), run
    assert run.calls[-2:] == [["sudo", "reboot"], ["reboot"]] and "rmmod" not in run.names


@pytest.mark.parametrize("name", case_names())
def test_no_host_runs_an_alternative_to_its_reboot(name):
    lines = live_lines(script_for(name))
    reboots = [i for i, line in enumerate(lines) if REBOOT.match(line)]
    if not reboots:
        return
    assert reboots == [len(lines) - 1], lines  # one reboot, the last command
    assert not [line for line in lines if DONE_BY_REBOOT.search(line)]


def _finding(code: str, *fixes: Fix) -> Finding:
    return Finding(code, code, Severity.WARNING, "m", fixes=fixes, action="none", impact="degraded")


def test_without_a_reboot_a_reset_stays_live():
    report = Report(Snapshot(os=OsInfo(id="ubuntu")), (_finding("GH403", Fix("sudo nvidia-smi --gpu-reset -i 0")),))
    lines = live_lines(fix_script(report))
    assert "sudo nvidia-smi --gpu-reset -i 0" in lines and lines[-1].startswith('echo "gpuhealth fix script')
    with_reboot = Report(report.snapshot, (*report.findings, _finding("GH302", Fix("sudo reboot"))))
    script = fix_script(with_reboot)
    assert "# sudo nvidia-smi --gpu-reset -i 0" in script and live_lines(script)[-1] == "sudo reboot"


def _modprobe_loads(command: str) -> list[list[str]]:
    """The argument lists of every ``modprobe`` that loads (not -r) in ``command``."""
    words = shlex.split(re.sub(r"[;&|]+", " ; ", command), comments=False)
    out, current = [], None
    for word in [*words, ";"]:
        if word == "modprobe":
            current = []
        elif word == ";" and current is not None:
            out.append(current)
            current = None
        elif current is not None:
            current.append(word)
    return [args for args in out if not {"-r", "--remove"} & set(args)]


def test_a_modprobe_of_several_modules_says_all():
    """Without -a, modprobe reads the words after the first module as its parameters (modprobe(8))."""
    commands = [f.command for fixes in check_fixes().values() for f in fixes if f.is_command]
    commands += [part for row in table_rows("causes.csv") for part in (row.get("decide") or "", row.get("fix") or "")]
    loads = [(command, args) for command in commands if "modprobe" in command for args in _modprobe_loads(command)]
    assert any(len([a for a in args if not a.startswith("-")]) > 1 for _, args in loads)  # GH202's reload
    for command, args in loads:
        names = [a for a in args if not a.startswith("-") and "=" not in a]
        assert len(names) <= 1 or {"-a", "--all"} & set(args), command
