"""`systemctl status` pasted without its "Loaded:" line, and the NVIDIA suspend units' state.

Every listing here is hand-written for this test in the form systemd prints it (systemd
src/systemctl/systemctl-show.c, print_status_info: the bullet line "● unit.service - Description", then
"Loaded: ...", "Active: <state> (<sub-state>) since ...", "Process:", "Main PID:", the journal tail), not
copied from an evaluation case; people cut the Loaded: line or paste only the bullet line and Active:.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import mined_helpers
from gpuhealth.analyze import analyze_texts
from gpuhealth.model import Report, Severity

FM_FAILED_NO_LOADED = (
    "× nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
    "     Active: failed (Result: exit-code) since Tue 2026-12-08 00:12:03 UTC; 5min ago\n"
    "    Process: 2211 ExecStart=/usr/bin/nvidia-fabricmanager-start.sh --mode start (code=exited, "
    "status=1/FAILURE)\n"
    "        CPU: 12ms\n\n"
    "Dec 08 00:12:03 gpu01 systemd[1]: nvidia-fabricmanager.service: Failed with result 'exit-code'.\n"
    "Dec 08 00:12:03 gpu01 systemd[1]: Failed to start NVIDIA fabric manager service.\n")

PERSISTENCED_DEAD_NO_LOADED = (
    "○ nvidia-persistenced.service - NVIDIA Persistence Daemon\n"
    "     Active: inactive (dead)\n")

H100_SXM = ("$ nvidia-smi -L\n"
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6f1c2a3b-0000-1111-2222-333344445555)\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-6f1c2a3b-0000-1111-2222-333344445556)\n")


def report(text: str) -> Report:
    return mined_helpers.report(text, "paste.txt")


def kinds(text: str) -> list[str | None]:
    _, recognised = analyze_texts([("paste.txt", text)])
    return [r.kind for r in recognised]


def codes(result: Report) -> list[str]:
    return [f.code for f in result.findings]


def test_a_status_block_without_its_loaded_line_is_systemctl_status():
    assert kinds(FM_FAILED_NO_LOADED) == ["systemctl-status"]
    assert kinds(PERSISTENCED_DEAD_NO_LOADED) == ["systemctl-status"]


def test_the_cut_block_says_what_the_whole_block_says():
    snapshot, _ = analyze_texts([("paste.txt", FM_FAILED_NO_LOADED)])
    assert snapshot.cuda is not None and snapshot.cuda.fabricmanager_active == "failed"
    snapshot, _ = analyze_texts([("paste.txt", PERSISTENCED_DEAD_NO_LOADED)])
    assert snapshot.cuda is not None and snapshot.cuda.persistenced_active == "inactive"


def test_a_failed_fabric_manager_without_loaded_leads_and_nothing_is_left_unread():
    result = report(FM_FAILED_NO_LOADED)
    assert result.findings[0].code == "GH210"
    assert "GH002" not in codes(result) and "GH004" not in codes(result)


def test_an_inactive_persistenced_without_loaded_is_read():
    result = report(PERSISTENCED_DEAD_NO_LOADED)
    assert "GH604" in codes(result) and "GH004" not in codes(result)


def test_fabric_manager_not_found_on_an_nvswitch_system_leads():
    result = report(H100_SXM + "$ systemctl status nvidia-fabricmanager\n"
                    "Unit nvidia-fabricmanager.service could not be found.\n")
    lead = result.findings[0]
    assert lead.code == "GH210" and lead.severity is Severity.CRITICAL


@pytest.mark.parametrize("text", [
    "the service is active\n",
    "nvidia-fabricmanager.service - it keeps failing\nActive: yes, the unit says so\n",
    "I ran it and nvidia-fabricmanager.service - NVIDIA fabric manager service\nis failed\n",
    "Active: failed (Result: exit-code) since Tue 2026-12-08 00:12:03 UTC; 5min ago\n",  # which unit is not said
])
def test_sentences_and_loose_lines_are_not_systemctl_status(text: str):
    assert "systemctl-status" not in kinds(text)


def test_end_to_end_through_analyze_stdin():
    done = subprocess.run([sys.executable, "-m", "gpuhealth", "analyze", "-"], input=FM_FAILED_NO_LOADED,
                          capture_output=True, text=True, timeout=120)
    assert "GH210" in done.stdout and "format not recognised" not in done.stdout
    assert "GH002" not in done.stdout


# --------------------------------------------------------------------------- NVIDIA's suspend units (GH804)
# The units and the parameter as NVIDIA's Linux driver README, "Configuring Power Management Support", names them;
# each block in systemctl status's form (a oneshot unit that ran no suspend since boot is "inactive (dead)").

def _unit(name: str, enabled: str, active: str = "inactive (dead)", bullet: str = "○") -> str:
    return (f"{bullet} {name}.service - NVIDIA system {name.split('-')[1]} actions\n"
            f"     Loaded: loaded (/usr/lib/systemd/system/{name}.service; {enabled}; preset: enabled)\n"
            f"     Active: {active}\n\n")


def sleep_units(enabled: str) -> str:
    return ("$ systemctl status nvidia-suspend.service nvidia-resume.service nvidia-hibernate.service\n"
            + "".join(_unit(name, enabled) for name in ("nvidia-suspend", "nvidia-resume", "nvidia-hibernate")))


def params(value: str) -> str:
    return ("$ grep -E 'PreserveVideoMemoryAllocations|TemporaryFilePath' /proc/driver/nvidia/params\n"
            f"PreserveVideoMemoryAllocations: {value}\nTemporaryFilePath: \"/var/tmp\"\n")


MODPROBE_ON = ("$ cat /etc/modprobe.d/nvidia-power-management.conf\n"
               "options nvidia NVreg_PreserveVideoMemoryAllocations=1 NVreg_TemporaryFilePath=/var/tmp\n")


def gh804(result: Report) -> list:
    return [f for f in result.findings if f.code == "GH804"]


def test_disabled_suspend_units_with_preserved_video_memory_are_the_broken_setup():
    (finding,) = gh804(report(sleep_units("disabled") + params("1")))
    assert finding.severity is Severity.WARNING
    assert finding.labels.get("cause") == "nvidia-suspend-path-failed"
    lines = [line for e in finding.evidence for line in e.lines]
    assert "nvidia-suspend.service: disabled" in lines and "PreserveVideoMemoryAllocations: 1" in lines
    assert "sudo systemctl enable nvidia-suspend.service nvidia-resume.service nvidia-hibernate.service" in [
        f.command for f in finding.fixes]


def test_a_modprobe_option_stands_for_the_parameter_and_a_masked_unit_is_off():
    text = "$ systemctl status nvidia-resume.service\n" + _unit("nvidia-resume", "masked") + MODPROBE_ON
    (finding,) = gh804(report(text))
    assert "nvidia-resume.service: masked" in finding.evidence[0].lines


@pytest.mark.parametrize("text", [
    sleep_units("disabled") + params("0"),  # the driver's default suspend path: the units are not needed
    sleep_units("disabled"),  # the parameter is not in the evidence
    sleep_units("enabled") + params("1"),  # the README's set-up; inactive (dead) between suspends
    sleep_units("disabled") + MODPROBE_ON + params("0"),  # the loaded driver runs with 0 whatever modprobe.d says
])
def test_counterexamples_raise_no_suspend_finding(text: str):
    assert not gh804(report(text))


def test_a_failed_suspend_unit_is_a_failed_suspend_path_whatever_the_parameter():
    text = ("× nvidia-resume.service - NVIDIA system resume actions\n"
            "     Active: failed (Result: exit-code) since Tue 2026-12-08 00:12:03 UTC; 5min ago\n"
            "    Process: 4411 ExecStart=/usr/bin/logger -t suspend -s Resuming (code=exited, status=1/FAILURE)\n")
    (finding,) = gh804(report(text))
    assert "nvidia-resume.service: Active: failed" in finding.evidence[0].lines


def test_the_parameter_grep_gpuhealth_asks_for_is_read_and_a_sentence_is_not():
    assert kinds("PreserveVideoMemoryAllocations: 1\n") == ["driver-params"]
    assert "driver-params" not in kinds("I set PreserveVideoMemoryAllocations to 1 in modprobe\n")
    assert "driver-params" not in kinds("PreserveVideoMemoryAllocations: 1\nand the laptop still hangs: badly\n")


def test_suspend_units_end_to_end_through_analyze_stdin():
    done = subprocess.run([sys.executable, "-m", "gpuhealth", "analyze", "-"],
                          input=sleep_units("disabled") + params("1"), capture_output=True, text=True, timeout=120)
    assert "WARNING  GH804 NVIDIA's suspend path is broken" in done.stdout
    assert "nvidia-suspend.service: disabled" in done.stdout and "PreserveVideoMemoryAllocations: 1" in done.stdout
    assert "GH002" not in done.stdout


# `systemctl is-enabled UNIT...` (systemd src/systemctl/systemctl-is-enabled.c): one state per unit, in order

IS_ENABLED = "$ systemctl is-enabled nvidia-suspend nvidia-resume\n"


def test_is_enabled_states_pair_with_the_units_the_command_names():
    snapshot, recognised = analyze_texts([("paste.txt", IS_ENABLED + "disabled\nmasked\n")])
    assert [r.kind for r in recognised] == ["systemctl-is-enabled"]
    assert snapshot.host_env is not None
    assert snapshot.host_env.sleep_units == (("nvidia-suspend", "", "disabled"), ("nvidia-resume", "", "masked"))


def test_a_unit_is_enabled_cannot_find_is_not_found_and_takes_no_state_word():
    text = IS_ENABLED + "Failed to get unit file state for nvidia-suspend.service: No such file or directory\n"
    snapshot, _ = analyze_texts([("paste.txt", text)])
    assert snapshot.host_env is not None and snapshot.host_env.sleep_units == (("nvidia-suspend", "", "not-found"),)


def test_is_enabled_with_the_parameter_set_gives_the_suspend_finding_and_enabled_gives_none():
    (finding,) = gh804(report(IS_ENABLED + "disabled\ndisabled\n" + params("1")))
    assert "nvidia-resume.service: disabled" in finding.evidence[0].lines
    assert not gh804(report(IS_ENABLED + "enabled\nenabled\n" + params("1")))


def test_a_command_cut_in_the_pieces_name_does_not_pair_its_cut_unit():
    # the piece's name keeps the command's first 80 characters: "nvidia-hibernate.service" is cut, so not paired
    text = ("$ systemctl is-enabled nvidia-suspend.service nvidia-resume.service nvidia-hibernate.service\n"
            "enabled\nenabled\ndisabled\n")
    snapshot, _ = analyze_texts([("paste.txt", text)])
    assert snapshot.host_env is not None
    assert [unit for unit, _, _ in snapshot.host_env.sleep_units] == ["nvidia-suspend", "nvidia-resume"]


@pytest.mark.parametrize("text", ["it is enabled, I checked\n", "enabled\nbut the GPU still hangs\n"])
def test_words_are_not_is_enabled_output(text: str):
    assert "systemctl-is-enabled" not in kinds(text)
