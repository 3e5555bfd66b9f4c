"""fix_script(): one ordered, commented bash script from a report's fixes; and the `fix` command."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess

import pytest
from click.testing import CliRunner

from gpuhealth.advice_commands import fix as fix_command
from gpuhealth.bundle import RecordingHost
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from gpuhealth.fixsections import PLACEHOLDER
from gpuhealth.model import Finding, Fix, OsInfo, Report, Severity, Snapshot
from hostcases import FakeHost, case_names, load_spec

HOSTS = ["nouveau-holds-gpu", "driver-library-mismatch", "ubuntu-before-install", "h100x8-xid-ecc",
         "rocky-initramfs-stale-unsigned", "gpu-fell-off-bus", "device-nodes-missing"]


def script_for(name: str) -> str:
    return fix_script(run_checks(collect(FakeHost(load_spec(name)))))


def live_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def bash_syntax_ok(script: str, tmp_path) -> None:
    path = tmp_path / "fix.sh"
    path.write_text(script)
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", case_names())
def test_every_host_gives_a_valid_script(name, tmp_path):
    script = script_for(name)
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script and "never runs this script" in script
    bash_syntax_ok(script, tmp_path)
    for line in live_lines(script):
        assert not PLACEHOLDER.search(line), f"live placeholder: {line}"


@pytest.mark.parametrize("name", HOSTS)
def test_shellcheck(name, tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests never install it): only bash -n was checked")
    path = tmp_path / "fix.sh"
    path.write_text(script_for(name))
    result = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def positions(script: str, *needles: str) -> list[int]:
    lines = script.splitlines()
    return [next(i for i, line in enumerate(lines) if needle in line) for needle in needles]


def test_rocky_nouveau_order_family_and_checks():
    script = script_for("nouveau-holds-gpu")
    backup, blacklist, dracut, reboot = positions(
        script, "sudo cp /boot/initramfs-$(uname -r).img{,.bak}", "blacklist-nouveau.conf", "sudo dracut --force",
        "sudo reboot")
    assert backup < blacklist < dracut < reboot
    assert "update-initramfs" not in script and "apt-get" not in script  # a Rocky host: rhel commands only
    assert "test -f /boot/initramfs-$(uname -r).img.bak ||" in script
    assert "test -s /etc/modprobe.d/blacklist-nouveau.conf ||" in script
    # GH201 (module not loaded) is nouveau's symptom: its `modprobe nvidia` and kernel-devel fixes do not fit
    assert "modprobe nvidia" not in script and "kernel-devel" not in script
    assert script.count("\nsudo reboot\n") == 1  # GH206 and GH501 both ask: written once
    assert "# DISRUPTIVE GH206, GH501" in script


def test_mismatch_disruptive_last_and_ubuntu_only():
    script = script_for("driver-library-mismatch")
    lines = live_lines(script)
    disruptive = [i for i, line in enumerate(lines) if "reboot" in line or "rmmod" in line]
    others = [i for i, line in enumerate(lines) if "apt-mark hold" in line]
    assert disruptive and others and max(others) < min(disruptive)
    assert "versionlock" not in script
    assert script.index("# DISRUPTIVE") > script.index("apt-mark hold")


def test_ubuntu_before_install_backups_first():
    script = script_for("ubuntu-before-install")
    lines = live_lines(script)
    first_change = next(i for i, line in enumerate(lines) if line.startswith("sudo") and ".bak" not in line)
    backups = [i for i, line in enumerate(lines) if ".bak" in line and line.startswith("sudo cp")]
    assert backups and max(backups) < first_change
    assert "sudo update-initramfs -u" in script and "dracut" not in script


def test_xid_reset_and_instructions_are_comments():
    script = script_for("h100x8-xid-ecc")
    # Xid 48 with Xid 63 on GPU 0: its action is drain_then_reset, so the reset waits for the drain (test_fix_safe.py)
    assert "\n# sudo nvidia-smi --gpu-reset -i 0\n" in script and "drain the node first" in script
    assert "# restart the application; if it recurs, run it under compute-sanitizer" in script
    assert not any(line.startswith("restart") for line in live_lines(script))


def _report(os_info, *fixes: Fix, code="GH999") -> Report:
    finding = Finding(code, "test", Severity.WARNING, "test", fixes=fixes, action="none", impact="degraded")
    return Report(Snapshot(os=os_info), findings=(finding,))


def test_placeholders_unknown_family_and_dedup(tmp_path):
    report = Report(Snapshot(os=None), findings=(
        Finding("GH203", "a", Severity.CRITICAL, "m", fixes=(
            Fix("sudo nvidia-smi --gpu-reset -i <index>", "any", disruptive=True, note="stop jobs first"),
            Fix("sudo apt-get install build-essential", "debian"), Fix("sudo dnf install gcc make", "rhel"),
            Fix("sudo modprobe nvidia_uvm", "any"), Fix("check the seating", "any", disruptive=True)),
                action="reboot", impact="node_unusable"),
        Finding("GH205", "b", Severity.INFO, "m", fixes=(Fix("sudo modprobe nvidia_uvm", "any"),),
                action="none", impact="none"),
    ))
    script = fix_script(report)
    bash_syntax_ok(script, tmp_path)
    assert "# sudo nvidia-smi --gpu-reset -i <index>" in script and "fill in the placeholder" in script
    assert "# sudo apt-get install build-essential" in script and "# sudo dnf install gcc make" in script
    assert "distribution family is unknown" in script
    assert script.count("\nsudo modprobe nvidia_uvm\n") == 1 and "# GH203, GH205" in script
    assert "lsmod | grep -q '^nvidia_uvm ' ||" in script
    assert "# check the seating" in script
    assert live_lines(script) == ["set -euo pipefail", "sudo modprobe nvidia_uvm",
                                  "lsmod | grep -q '^nvidia_uvm ' || { echo \"check failed: module nvidia_uvm "
                                  "not loaded\" >&2; exit 1; }", 'echo "gpuhealth fix script: all steps done"']


def test_a_step_only_a_person_can_decide_is_a_comment(tmp_path):
    # "only if the lower limit is not intended": a deliberate power cap is a valid choice, and a script run unread
    # must not undo it (nor delete a library file a package may own)
    report = _report(OsInfo(id="ubuntu", id_like=("debian",)),
                     Fix("sudo nvidia-smi -i 0 -pl 350", "any", note="only if the lower limit is not intended"),
                     Fix("sudo rm /usr/lib/libcuda.so.1 && sudo ldconfig", "any",
                         note="only if that file belongs to no installed driver package"),
                     Fix("nvidia-smi -q -d POWER", "any"))
    script = fix_script(report)
    bash_syntax_ok(script, tmp_path)
    assert "# sudo nvidia-smi -i 0 -pl 350" in script and "# sudo rm /usr/lib/libcuda.so.1 && sudo ldconfig" in script
    assert script.count("a choice the script cannot make") == 2
    assert not [line for line in live_lines(script) if "-pl" in line or "rm " in line]
    assert "nvidia-smi -q -d POWER || true" in live_lines(script)


def test_nothing_to_fix(tmp_path):
    script = fix_script(Report(Snapshot(os=OsInfo(id="ubuntu"))))
    bash_syntax_ok(script, tmp_path)
    assert "Nothing to do" in script and live_lines(script)[-1] == "exit 0"


def test_brace_placeholders_and_backups_of_etc(tmp_path):
    script = fix_script(_report(OsInfo(id="rocky", id_like=("rhel",)),
                                Fix("sudo systemctl restart nvidia-fabricmanager", "any"),
                                Fix("sudo nvidia-smi --gpu-reset -i {index}", "any", disruptive=True),
                                Fix("sudo cp /etc/modprobe.d/nvidia.conf /root/nvidia.conf.orig", "any"),
                                Fix("sudo systemctl enable --now nvidia-persistenced", "any")))
    bash_syntax_ok(script, tmp_path)
    lines = live_lines(script)
    assert lines[1].startswith("sudo cp /etc/modprobe.d/nvidia.conf")  # a backup: first
    assert lines.index("sudo systemctl restart nvidia-fabricmanager") > lines.index(
        "sudo systemctl enable --now nvidia-persistenced")  # a restart is disruptive: last
    assert "systemctl is-active --quiet nvidia-persistenced ||" in script
    assert "# sudo nvidia-smi --gpu-reset -i {index}" in script
    assert not any(re.search(r"\{index\}", line) for line in lines)


def test_cli_fix_writes_an_executable_script(tmp_path):
    recorder = RecordingHost(FakeHost(load_spec("nouveau-holds-gpu")), tmp_path / "b", hostname="gpu-node-17")
    collect(recorder, captured_at="t")
    recorder.finish()
    runner = CliRunner()
    printed = runner.invoke(fix_command, ["--from", str(tmp_path / "b")])
    assert printed.exit_code == 0 and printed.output.startswith("#!/usr/bin/env bash")
    out = tmp_path / "fix.sh"
    written = runner.invoke(fix_command, ["--from", str(tmp_path / "b"), "-o", str(out)])
    assert written.exit_code == 0, written.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert "sudo dracut --force" in out.read_text()
    assert runner.invoke(fix_command, ["--from", str(tmp_path)]).exit_code == 3


@pytest.mark.parametrize("os_info", [OsInfo(id="ubuntu"), OsInfo(id="rocky"), OsInfo(id="arch"), None])
def test_the_script_and_the_report_pick_the_same_fixes_per_family(os_info):
    """fix_script filters a finding's fixes with report.common.fixes_for_host, the filter the text report
    shows: a debian host gets no dnf line, an unknown family gets every variant (commented)."""
    from gpuhealth.report.common import fixes_for_host

    finding = Finding("GH504", "build-tools-missing", Severity.WARNING, "m", fixes=(
        Fix("sudo apt-get install -y build-essential", "debian"), Fix("sudo dnf install -y gcc make", "rhel"),
        Fix("gcc --version", "any")), action="none", impact="degraded")
    report = Report(Snapshot(os=os_info), findings=(finding,))
    script = fix_script(report)
    written = {f.command for f in finding.fixes if f.command in script}
    assert written == {f.command for f in fixes_for_host(finding, report.snapshot)}
    assert len(written) == {"ubuntu": 2, "rocky": 2}.get(os_info.id if os_info else "", 3)
