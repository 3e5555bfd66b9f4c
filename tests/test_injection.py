"""Evidence never becomes a command (issue 25, attacks 1-5, 10 and 18).

Each attack builds the hostile evidence as a stranger would hand it over (a pasted ``ldconfig -p``, a bundle
from another machine, a config value), writes ``gpuhealth fix`` for it and runs the script with every external
command replaced by a recording stub (tests/stubshell.py). It passes when no attacker command ran, no attacker
text reached any command's arguments, and the value the attack rode in on is refused in words instead.
The last tests run every test host's script under ``set -u`` with no variable set: each runs to its end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpuhealth.advice_commands import fix as fix_command
from gpuhealth.analyze import analyze_texts
from gpuhealth.bundle import RecordingHost
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from gpuhealth.model import Finding, HostEnvironment, OsInfo, Report, Severity, Snapshot
from hostcases import FakeHost, case_names, load_spec
from stubshell import live_lines, ran_to_its_end, run_stubbed

MARK = "PWNED"  # every attack's own command names this file: it must never reach a command


def script_from_paste(tmp_path: Path, text: str) -> str:
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    result = CliRunner().invoke(fix_command, [str(paste)])
    assert result.exit_code == 0, result.output
    return result.output


def script_from_bundle(tmp_path: Path, spec: dict[str, Any], hostname: str | None = None) -> str:
    recorder = RecordingHost(FakeHost(spec), tmp_path / "b", hostname=hostname)
    collect(recorder)
    recorder.finish()
    result = CliRunner().invoke(fix_command, ["--from", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    return result.output


def with_text_replaced(name: str, old: str, new: str) -> dict[str, Any]:
    """Test host ``name`` with every ``old`` in its spec (names, paths, listings, contents) made ``new``."""
    text = json.dumps(load_spec(name))
    assert old in text
    return json.loads(text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))


def assert_harmless(script: str, tmp_path: Path, *attacker_words: str) -> None:
    """bash -n and shellcheck pass, the script runs to its end with stubs, and no attacker command or text ran."""
    syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    run = run_stubbed(script, tmp_path / "run")
    assert ran_to_its_end(run, script), run
    assert "touch" not in run.names and "id" not in run.names, run
    for word in (MARK, *attacker_words):
        assert not any(word in argument for argument in run.arguments()), (word, run)
        assert not any(word in call[0] for call in run.calls), (word, run)
    assert not (tmp_path / "run" / MARK).exists() and not Path("/tmp", MARK).exists()


# --------------------------------------------------------------------------- attacks 1 and 2: a pasted libcuda path

PASTE_803 = """$ cat /proc/driver/nvidia/version
NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Wed Feb 26 02:04:31 UTC 2025
$ ldconfig -p | grep libcuda
\tlibcuda.so.1 (libc6,x86-64) => {path}
\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so
"""


def test_the_same_paste_with_a_plain_path_gives_the_rm_with_its_path(tmp_path):
    # the control: the hostile pastes below are read the same way, so their refusal is the shape's doing. The rm is
    # the reader's choice ("only if that file belongs to no installed driver package"): a comment with the path in it
    script = script_from_paste(tmp_path, PASTE_803.format(path="/usr/lib64/libcuda.so.550.54.15"))
    assert "# sudo rm /usr/lib64/libcuda.so.550.54.15 && sudo ldconfig" in script
    assert "a choice the script cannot make" in script and "<libcuda path>" not in script
    run = run_stubbed(script, tmp_path / "run")
    assert "rm" not in run.names and ran_to_its_end(run, script)


@pytest.mark.parametrize("path, words", [
    (f"/x/$(touch /tmp/{MARK})/libcuda.so.550.54.15", ()),  # attack 1: command substitution
    (f"/x/`touch {MARK}`/libcuda.so.550.54.15", ()),
    ("/ -rf --no-preserve-root /x/libcuda.so.550.54.15", ("--no-preserve-root", "-rf")),  # attack 2: word splitting
])
def test_a_pasted_libcuda_path_never_reaches_rm(tmp_path, path, words):
    script = script_from_paste(tmp_path, PASTE_803.format(path=path))
    assert "# sudo rm <libcuda path> && sudo ldconfig" in script
    assert "the libcuda path is not a plausible absolute path: check it by hand" in script
    assert not [line for line in live_lines(script) if "libcuda.so.550" in line]
    assert_harmless(script, tmp_path, *words)
    run = run_stubbed(script, tmp_path / "again")
    assert "rm" not in run.names and ["/"] not in [call[1:2] for call in run.calls]


def test_analyze_prints_the_same_refused_command(tmp_path):
    """analyze shows the fixes the script writes: the slotted ones, never the pasted path inside a command."""
    paste = tmp_path / "paste.txt"
    paste.write_text(PASTE_803.format(path=f"/x/$(touch /tmp/{MARK})/libcuda.so.550.54.15"))
    result = CliRunner().invoke(main, ["analyze", str(paste)])
    commands = [line for line in result.output.splitlines() if "rm " in line or "dpkg -S" in line]
    assert commands and all(MARK not in line for line in commands), result.output
    assert any("sudo rm <libcuda path> && sudo ldconfig" in line for line in commands)
    snapshot, _ = analyze_texts([("paste.txt", paste.read_text())])
    fixes = [fix for f in run_checks(snapshot).findings for fix in f.fixes]
    assert not [fix for fix in fixes if MARK in fix.command]


# --------------------------------------------------------------------------- attack 3: ld.so.conf.d file names


@pytest.mark.parametrize("name, words", [
    (f"cuda-11.8;touch {MARK};.conf", ()),
    ("cuda 11.8.conf", ("cuda", "11.8.conf")),  # a blank alone deleted two wrong files
])
def test_a_bundles_ld_so_conf_d_file_name_never_reaches_rm(tmp_path, name, words):
    spec = with_text_replaced("h100x8-cuda-after-install-broken", "988_cuda-11.conf", name)
    script = script_from_bundle(tmp_path, spec)
    assert "# sudo rm <conf file>" in script and "the conf file is not a plausible absolute path" in script
    assert "GH602" in script and not [line for line in live_lines(script) if "11.8" in line]
    assert_harmless(script, tmp_path, *(f"/etc/ld.so.conf.d/{w}" for w in words))


def test_a_plain_ld_so_conf_d_file_name_is_still_removed(tmp_path):
    script = script_from_bundle(tmp_path, load_spec("h100x8-cuda-after-install-broken"))
    assert "sudo rm /etc/ld.so.conf.d/988_cuda-11.conf" in live_lines(script)


# --------------------------------------------------------------------------- attack 4: a kernel release


def test_a_bundles_kernel_release_never_reaches_apt_or_dkms(tmp_path):
    evil = f"5.15.0-107-generic$(touch {MARK})"
    spec = with_text_replaced("ubuntu-next-kernel-without-module", "5.15.0-107-generic", evil)
    script = script_from_bundle(tmp_path, spec)
    assert "# sudo apt-get install linux-headers-<kernel release>" in script
    assert "# sudo dkms autoinstall -k <kernel release>" in script
    assert "the kernel release is not a plausible one: check it by hand" in script
    assert_harmless(script, tmp_path)


def test_a_plain_newer_kernel_is_still_built_for(tmp_path):
    script = script_from_bundle(tmp_path, load_spec("ubuntu-next-kernel-without-module"))
    lines = live_lines(script)
    assert "sudo apt-get install linux-headers-5.15.0-107-generic" in lines
    assert "sudo dkms autoinstall -k 5.15.0-107-generic" in lines


def test_a_bundles_running_kernel_release_never_runs(tmp_path):
    spec = load_spec("debian-kernel-update-lost-driver")
    release = spec["files"]["/proc/sys/kernel/osrelease"].strip()
    spec = with_text_replaced("debian-kernel-update-lost-driver", release, f"{release}$(touch {MARK})")
    assert_harmless(script_from_bundle(tmp_path, spec), tmp_path)


# --------------------------------------------------------------------------- attack 5: the script's header


@pytest.mark.parametrize("field", ["hostname", "captured_at", "os"])
def test_a_newline_or_escape_in_the_header_stays_in_its_comment(tmp_path, field):
    hostile = f"node-17\ntouch {MARK}\n\x1b[8mhidden\x1b[0m"
    spec = load_spec("nouveau-holds-gpu")
    hostname = None
    if field == "hostname":
        hostname = hostile
        spec["files"]["/proc/sys/kernel/hostname"] = hostile + "\n"
    elif field == "captured_at":
        spec["captured_at"] = "2026-11-30T12:00:00+0000" + hostile
    else:
        spec["files"]["/etc/os-release"] = spec["files"]["/etc/os-release"].replace(
            "PRETTY_NAME=", f'PRETTY_NAME="Rocky {hostile}"\nOLD_PRETTY_NAME=')
    script = script_from_bundle(tmp_path, spec, hostname=hostname)
    head = script.split("\nset -euo pipefail\n")[0].splitlines()
    assert head[0] == "#!/usr/bin/env bash" and all(line.startswith("#") or not line for line in head[1:])
    assert "\x1b" not in script and f"\ntouch {MARK}" not in script
    assert "\\x1b[8m" in script or field == "os"  # shown as an escape where the field reached the header
    assert_harmless(script, tmp_path)


def test_a_notes_newline_stays_in_its_comment(tmp_path):
    report = Report(Snapshot(os=OsInfo(id="ubuntu")), (
        Finding("GH999", "x", Severity.WARNING, "m", action="none", impact="degraded", fixes=(
            __import__("gpuhealth.model", fromlist=["Fix"]).Fix(
                "nvidia-smi -L", "any", note=f"see\ntouch {MARK}\n\x1b]0;title\x07"),)),))
    script = fix_script(report)
    assert f"\ntouch {MARK}" not in script and "\x1b" not in script and "\\x1b]0;title\\x07" in script
    assert_harmless(script, tmp_path)


# --------------------------------------------------------------------------- attack 18: a config driver_params value


def _driver_params_report(tmp_path: Path, config_text: str) -> Report:
    from gpuhealth.config import load_expectations

    config = tmp_path / "gpuhealth.toml"
    config.write_text(config_text)
    snapshot = Snapshot(captured_at="2026-01-15T10:00:00+0000", os=OsInfo(id="ubuntu", version_id="22.04"),
                        host_env=HostEnvironment(driver_params={"EnableMSI": "0", "EnablePCIeGen3": "0"}))
    return run_checks(snapshot, load_expectations(config))


def test_a_config_driver_param_with_a_quote_cannot_break_out(tmp_path):
    report = _driver_params_report(
        tmp_path, f'driver_params = {{ EnableMSI = "1\' ; touch {MARK} ; echo \'", EnablePCIeGen3 = 1 }}\n')
    script = fix_script(report)
    assert "the NVreg parameter value is not a plausible one: check it by hand" in script
    assert "# echo options nvidia NVreg_EnableMSI=<NVreg parameter value> | sudo tee -a" in script
    assert_harmless(script, tmp_path)
    run = run_stubbed(script, tmp_path / "again")
    assert ["echo", "options nvidia NVreg_EnableMSI=1"] not in run.calls  # echo is a builtin: the tee is what ran
    assert ["tee", "-a", "/etc/modprobe.d/nvidia-params.conf"] in run.calls  # the plausible parameter's line


def test_a_config_driver_params_registry_value_is_quoted(tmp_path):
    report = _driver_params_report(tmp_path, 'driver_params = { EnableMSI = "a=1;b=2" }\n')
    lines = live_lines(fix_script(report))
    assert "echo options nvidia NVreg_EnableMSI='a=1;b=2' | sudo tee -a /etc/modprobe.d/nvidia-params.conf" in lines


# --------------------------------------------------------------------------- attack 10: set -u, and every test host


def test_the_harness_runs_set_u_with_variables_unset(tmp_path):
    # the harness itself: the old row `echo $LD_LIBRARY_PATH` aborts under it, and a stray command is recorded
    old = "#!/usr/bin/env bash\nset -euo pipefail\necho $LD_LIBRARY_PATH || true\necho done\n"
    run = run_stubbed(old, tmp_path / "old")
    assert run.returncode != 0 and "LD_LIBRARY_PATH: unbound variable" in run.stderr
    new = '#!/usr/bin/env bash\nset -euo pipefail\necho "${LD_LIBRARY_PATH-}" || true\nsudo touch x | grep y\n'
    run = run_stubbed(new, tmp_path / "new")
    assert run.returncode == 0 and sorted(run.calls) == [["grep", "y"], ["sudo", "touch", "x"], ["touch", "x"]]
    assert not (tmp_path / "new" / "x").exists()


def test_the_environment_rows_run_under_set_u(tmp_path):
    from gpuhealth.checks.registry import table_fixes

    report = Report(Snapshot(os=OsInfo(id="ubuntu")), tuple(
        Finding(code, code, Severity.WARNING, "m", action="none", impact="degraded", fixes=table_fixes(code))
        for code in ("GH602", "GH608", "GH612")))
    script = fix_script(report)
    assert script.count('echo "${LD_LIBRARY_PATH-}" || true') == 1
    assert 'echo "${CUDA_VISIBLE_DEVICES-}" || true' in script
    run = run_stubbed(script, tmp_path / "run")
    assert ran_to_its_end(run, script), run
    assert ["ldconfig"] in run.calls  # the change after the looks ran: the script did not stop at them


@pytest.mark.parametrize("name", case_names())
def test_every_test_hosts_script_runs_to_its_end_under_set_u(name, tmp_path):
    script = fix_script(run_checks(collect(FakeHost(load_spec(name)))))
    run = run_stubbed(script, tmp_path)
    assert ran_to_its_end(run, script), run
    commands = [line for line in live_lines(script) if not line.startswith(("set ", "echo ", "exit "))]
    assert len(run.calls) >= len(commands)


@pytest.mark.parametrize("name", case_names())
def test_every_test_hosts_script_passes_shellcheck(name, tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed: CI installs it (.ci/run)")
        pytest.skip("shellcheck is not installed: only bash -n and the stubbed run checked the script")
    path = tmp_path / "fix.sh"
    path.write_text(fix_script(run_checks(collect(FakeHost(load_spec(name))))))
    result = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
