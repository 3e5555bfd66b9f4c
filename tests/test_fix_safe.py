"""Fix scripts safe to run unread (issue 22, "What to build" 3; its Done-when line: "For every fixture that produces a
fix script, the script passes `bash -n` and shellcheck. No two alternatives are live, `reboot` is last, and nothing live
depends on a commented line").

Every test host (tests/hosts) and every evaluation case (tests/cases, through `analyze`'s path) gives a script; each is
held to those rules. Then the rules one by one: the distribution from evidence other than os-release, a step whose
prerequisite is a comment is one too, a GPU reset the evidence says not to run yet (drain first, a process on the GPU),
the undo beside a hold, and torch reinstalled with its companions.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from hypothesis import given

from fixture_scripts import all_scripts
from fuzzing import FUZZ, mutated
from gpuhealth.advice_commands import _os_info
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.command_ranges import out_of_range, ranges
from gpuhealth.distro_infer import inferred_family, with_inferred_family
from gpuhealth.fixscript import DONE_BY_REBOOT, REBOOT, fix_script
from gpuhealth.fixsections import NEEDS, UNDO
from gpuhealth.knowledge import table_rows
from gpuhealth.knowledge.fixes import check_fixes
from gpuhealth.model import (
    CommandRun,
    DriverInfo,
    Finding,
    Fix,
    Gpu,
    GpuProcess,
    HostEnvironment,
    NvidiaPackage,
    OsInfo,
    Report,
    Severity,
    SmiReport,
    Snapshot,
)
from hostcases import FakeHost, case_names, load_spec
from stubshell import live_lines


def with_commands() -> list[str]:
    return [name for name, script in all_scripts().items() if live_lines(script)[:-1] or "\n# sudo" in script]


def steps(script: str) -> list[tuple[list[str], bool, str]]:
    """The script's steps: (the codes that asked for it, live, the command), from its comment blocks."""
    out, codes = [], None
    for line in script.splitlines():
        head = re.match(r"# (?:DISRUPTIVE )?((?:GH\d{3}(?::[\w-]+)?(?:, )?)+)(?: \[\w+\])?(?::|$)", line)
        if head:
            codes = re.findall(r"GH\d{3}", head[1])
        elif codes is not None and line.startswith("# (") and line.endswith(")"):
            continue
        elif codes is not None and line.strip():
            live = not line.startswith("#")
            out.append((codes, live, line if live else line[2:]))
            codes = None
    return out


def test_the_fixtures_give_scripts_with_commands():
    assert len(with_commands()) >= 100  # the rules below are held over real scripts, not over empty ones


def test_every_script_passes_bash_n():
    for name, script in all_scripts().items():
        result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_every_script_passes_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (.ci/run installs it): only bash -n was checked")
    paths = []
    for index, (name, script) in enumerate(sorted(all_scripts().items())):
        path = tmp_path / f"{index:03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.sh"
        path.write_text(script)
        paths.append(str(path))
    result = subprocess.run([shellcheck, "-s", "bash", *paths], capture_output=True, text=True)  # one run for all
    assert result.returncode == 0, result.stdout[-4000:]


def test_no_two_alternatives_are_live_and_a_reboot_is_last():
    for name, script in all_scripts().items():
        lines = live_lines(script)
        reboots = [i for i, line in enumerate(lines) if REBOOT.match(line)]
        if reboots:
            assert reboots == [len(lines) - 1], name
            assert not [line for line in lines if DONE_BY_REBOOT.search(line)], name


def test_nothing_live_depends_on_a_commented_line():
    checked = 0
    for name, script in all_scripts().items():
        found = steps(script)
        for codes, live, command in found:
            for needs, prerequisite in NEEDS:
                if not (live and needs.search(command)):
                    continue
                before = [other for other in found if prerequisite.search(other[2]) and set(other[0]) & set(codes)]
                checked += bool(before)
                assert not before or any(other[1] for other in before), f"{name}: {command}"
    assert checked  # some script has a live dependent step whose prerequisite is live: the rule was exercised



# a step that completes only at boot: it changes no running state, so rebooting without it changes nothing
_BOOT_CHANGE = re.compile(r"blacklist-nouveau|update-initramfs|dracut|mokutil --import|grubby|update-grub|dnf install|"
                          r"apt-get install")


def test_a_live_reboot_follows_a_live_change_or_is_the_fix_itself():
    """A reboot whose finding's changes are all comments (an instruction, a choice, another distribution's command)
    would stop the host's jobs and complete nothing: it is a comment too. Held over every script: where a step that
    completes at boot precedes a live reboot for the same finding, some such step is live."""
    checked = 0
    for name, script in all_scripts().items():
        found = steps(script)
        for codes, live, command in found:
            if not (live and REBOOT.match(command)):
                continue
            boot = [other for other in found if _BOOT_CHANGE.search(other[2]) and set(other[0]) & set(codes)
                    and not any(hold.search(other[2]) for hold, _, _ in UNDO)]  # a hold guards later upgrades
            checked += bool(boot)
            assert not boot or any(other[1] for other in boot), f"{name}: the reboot is live, every change a comment"
    assert checked


def test_the_script_never_chooses_which_driver_install_to_remove():
    """GH509 (several install routes): which route to keep is the person's choice. Every removal is a comment saying
    so, and no reboot follows live (before, the script removed every route it found, then rebooted into no driver)."""
    scripts = {name: script for name, script in all_scripts().items()
               if re.search(r"^# (?:DISRUPTIVE )?GH509\b", script, re.M)}
    assert scripts
    for name, script in scripts.items():
        removals = [(live, command) for codes, live, command in steps(script)
                    if "GH509" in codes and re.search(r"nvidia-uninstall|\b(?:remove|purge)\b", command)]
        assert all(not live for live, _ in removals), name
        # the reinstall is by hand: a live reboot is another finding's
        assert not [c for codes, live, c in steps(script) if live and REBOOT.match(c) and codes == ["GH509"]], name

# --------------------------------------------------------------------------- the distribution from evidence

DPKG = """Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinstreq/Bad-inst/Conf-missing/Half-conf/Half-inst/trig-aWait/Trig-pend
||/ Name                        Version                  Architecture Description
+++-===========================-========================-============-=================
ii  nvidia-driver-535           535.183.01-0ubuntu0.22.04.1 amd64     NVIDIA driver metapackage
ii  nvidia-utils-535            535.183.01-0ubuntu0.22.04.1 amd64     NVIDIA driver support binaries
"""
RPM = "nvidia-driver-550.90.07-1.el9.x86_64\nkmod-nvidia-open-dkms-550.90.07-1.el9.x86_64\n"


def _snapshot(*texts: str) -> Snapshot:
    return analyze_texts([(f"paste{i}.txt", text) for i, text in enumerate(texts)])[0]


def test_a_dpkg_listing_sets_the_debian_family_and_says_so():
    snapshot = _snapshot(DPKG)
    assert snapshot.os is not None and snapshot.os.family == "debian"
    assert snapshot.os.family_from.startswith("the dpkg package listing")
    assert snapshot.os.id is None  # inferred: nothing claims to be os-release's ID


def test_an_rpm_listing_sets_the_rhel_family():
    snapshot = _snapshot(RPM)
    assert snapshot.os is not None and snapshot.os.family == "rhel" and "rpm" in snapshot.os.family_from


def test_apt_output_and_a_version_suffix_set_the_family():
    apt = "Reading package lists... Done\nBuilding dependency tree... Done\nE: Unable to locate package foo\n"
    assert inferred_family(Snapshot(), texts=[apt]) == ("debian", "apt's output")
    assert inferred_family(Snapshot(), texts=["gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)"])[0] == "debian"
    assert inferred_family(Snapshot(), commands=["sudo dnf install -y kernel-devel"])[0] == "rhel"
    assert inferred_family(Snapshot(), texts=["kernel-5.14.0-362.8.1.el9_3.x86_64"])[0] == "rhel"


@FUZZ
@given(mutated([DPKG, RPM, "Reading package lists... Done\n$ sudo dnf install -y kernel-devel\n"
                "kernel-5.14.0-362.8.1.el9_3.x86_64\ngcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n"]))
def test_fuzz_family_inference_takes_any_text(text):
    """Any pasted text or command: a family and how, or None; never an exception."""
    found = inferred_family(Snapshot(), commands=text.splitlines()[:50], texts=[text])
    assert found is None or (found[0] in ("debian", "rhel") and found[1])


def test_evidence_of_both_families_decides_nothing():
    assert inferred_family(Snapshot(), texts=["Reading package lists... Done", RPM]) is None
    assert _snapshot(DPKG, RPM).os is None or _snapshot(DPKG, RPM).os.family == "other"


def test_os_release_is_never_overridden():
    package = NvidiaPackage("nvidia-driver-535", "535-0ubuntu1", "dpkg")
    snapshot = Snapshot(os=OsInfo(id="rocky", id_like=("rhel",)), host_env=HostEnvironment(packages=(package,)))
    assert with_inferred_family(snapshot, texts=[DPKG]) is snapshot


def test_an_inferred_family_makes_its_lines_live_and_the_header_says_how():
    snapshot = with_inferred_family(Snapshot(host_env=HostEnvironment(
        packages=(NvidiaPackage("nvidia-driver-535", "535.183.01-0ubuntu1", "dpkg"),))))
    report = Report(snapshot, (_finding("GH802", Fix("sudo apt-get install -y nvidia-container-toolkit", "debian"),
                                        Fix("sudo nvidia-ctk runtime configure --runtime=docker")),))
    script = fix_script(report)
    assert "# No os-release in the evidence: distribution inferred from the dpkg package listing" in script
    assert live_lines(script)[:3] == ["set -euo pipefail", "sudo apt-get install -y nvidia-container-toolkit",
                                      "sudo nvidia-ctk runtime configure --runtime=docker"]


# --------------------------------------------------------------------------- a step whose prerequisite is a comment


def _finding(code: str, *fixes: Fix, action: str = "fix_host_software") -> Finding:
    return Finding(code, code, Severity.WARNING, "m", fixes=fixes, action=action, impact="degraded")


def test_unknown_family_comments_the_toolkit_steps_and_the_restart_after_them():
    report = Report(Snapshot(), (_finding(
        "GH802", Fix("sudo apt-get install -y nvidia-container-toolkit", "debian"),
        Fix("sudo dnf install -y nvidia-container-toolkit", "rhel"),
        Fix("sudo nvidia-ctk runtime configure --runtime=docker"),
        Fix("sudo systemctl restart docker", disruptive=True)),))
    script = fix_script(report)
    assert live_lines(script) == ["set -euo pipefail", 'echo "gpuhealth fix script: all steps done"']
    assert "# (needs `sudo apt-get install -y nvidia-container-toolkit`, commented above: run that first)" in script
    assert "# (needs `sudo nvidia-ctk runtime configure --runtime=docker`, commented above" in script


def test_a_placeholder_in_the_gcc_install_comments_the_dkms_build():
    script = all_scripts()["case gcc-mismatch-void-nvidia340"]
    assert "# sudo apt-get install gcc-<major>" in script and "sudo dkms autoinstall" not in live_lines(script)
    assert "# (needs `sudo apt-get install gcc-<major>`, commented above: run that first)" in script


def test_a_step_another_finding_asks_for_alone_follows_its_own_finding():
    """The rule is per finding: GH507's rebuild has no install step, so its prerequisite is not another's comment."""
    report = Report(Snapshot(), (_finding("GH505", Fix("sudo apt-get install gcc-<major>", "debian")),
                                 _finding("GH507", Fix("sudo dkms autoinstall -k $(uname -r)"))))
    assert "sudo dkms autoinstall -k $(uname -r)" in live_lines(fix_script(report))


# --------------------------------------------------------------------------- conditions from the evidence

RESET = "sudo nvidia-smi --gpu-reset -i {index}"


def test_drain_then_reset_keeps_the_reset_a_comment_and_says_drain_first():
    script = all_scripts()["host h100x8-xid-ecc"]
    assert "# BEFORE ANYTHING: drain the node first (GH301" in script
    assert "# sudo nvidia-smi --gpu-reset -i 0" in script
    assert not [line for line in live_lines(script) if "--gpu-reset" in line]


def test_no_reset_of_a_gpu_a_process_holds():
    gpus = (Gpu(index=0, processes=(GpuProcess(pid=1248209, name="python3.10", used_memory_mib=70000.0),)),
            Gpu(index=1))
    report = Report(Snapshot(os=OsInfo(id="ubuntu"), smi=SmiReport(gpus=gpus)),
                    (_finding("GH403", Fix("sudo nvidia-smi --gpu-reset -i 0", disruptive=True),
                              Fix("sudo nvidia-smi --gpu-reset -i 1", disruptive=True), action="reset_gpu"),))
    script = fix_script(report)
    assert "# (GPU 0 is used by pid 1248209 python3.10: stop it first)\n# sudo nvidia-smi --gpu-reset -i 0" in script
    assert "sudo nvidia-smi --gpu-reset -i 1" in live_lines(script)  # nothing runs on GPU 1


def test_a_reset_without_an_index_waits_for_every_gpu():
    gpus = (Gpu(index=0), Gpu(index=3, processes=(GpuProcess(pid=7, name="nv-hostengine"),)))
    report = Report(Snapshot(smi=SmiReport(gpus=gpus)),
                    (_finding("GH404", Fix("sudo nvidia-smi --gpu-reset", disruptive=True), action="reset_gpu"),))
    assert "# (GPU 3 is used by pid 7 nv-hostengine: stop it first)" in fix_script(report)


# --------------------------------------------------------------------------- the undo beside a hold


def test_every_hold_has_its_undo_beside_it():
    script = all_scripts()["host driver-library-mismatch"]
    lines = script.splitlines()
    at = lines.index("sudo apt-mark hold $(dpkg-query -W -f='${Package}\\n' '*nvidia*' | tr '\\n' ' ')")
    assert lines[at + 1] == ("# undo it before you upgrade the driver on purpose: "
                             "sudo apt-mark unhold $(dpkg-query -W -f='${Package}\\n' '*nvidia*' | tr '\\n' ' ')")
    rocky = Report(Snapshot(os=OsInfo(id="rocky", id_like=("rhel",))), (_finding("GH202", Fix(
        "sudo dnf install python3-dnf-plugin-versionlock && sudo dnf versionlock add '*nvidia*'", "rhel")),))
    lines = fix_script(rocky).splitlines()
    at = lines.index("sudo dnf install python3-dnf-plugin-versionlock && sudo dnf versionlock add '*nvidia*'")
    assert lines[at + 1] == ("# undo it before you upgrade the driver on purpose: "
                             "sudo dnf versionlock delete '*nvidia*'")  # the lock alone, not the plugin's install
    for name, text in all_scripts().items():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            command = line[2:] if line.startswith("# ") else line
            if any(change.search(command) for change, _, _ in UNDO) and not line.startswith("# undo"):
                assert lines[i + 1].startswith("# undo it "), f"{name}: {line}"


# --------------------------------------------------------------------------- torch with its companions


def _torch_installs() -> list[str]:
    commands = [f.command for fixes in check_fixes().values() for f in fixes]
    commands += [row.get("fix") or "" for row in table_rows("causes.csv")]
    commands += [line for script in all_scripts().values() for line in script.splitlines()]
    return [c for c in commands if re.search(r"pip3? install\b.*\btorch\b.*--index-url", c)]


def test_torch_is_reinstalled_with_torchvision_and_torchaudio_from_the_same_index():
    installs = _torch_installs()
    assert installs  # GH605, GH606 and the torch-cpu-build cause reinstall torch
    for command in installs:
        words = command.split()
        assert {"torch", "torchvision", "torchaudio"} <= set(words), command
        assert words.count("--index-url") == 1, command



# --------------------------------------------------------------------------- commands valid for what they target


def test_a_command_out_of_its_range_is_a_comment_saying_where_it_is_valid():
    finding = _finding("GH209", Fix("ubuntu-drivers list", "debian"),
                       Fix("sudo dnf module install nvidia-driver:<branch>-open", "rhel", kind="step"))
    debian = fix_script(Report(Snapshot(os=OsInfo(id="debian", version_id="12")), (finding,)))
    assert "# (valid only for Ubuntu's ubuntu-drivers tool" in debian and "this host is debian 12)" in debian
    assert "ubuntu-drivers list" not in live_lines(debian)
    ubuntu = fix_script(Report(Snapshot(os=OsInfo(id="ubuntu", id_like=("debian",), version_id="22.04")), (finding,)))
    assert "ubuntu-drivers list" in live_lines(ubuntu)


def test_every_fixture_host_gets_only_commands_valid_for_its_release():
    judged = 0
    for name in case_names():
        snapshot = collect(FakeHost(load_spec(name)))
        for line in live_lines(fix_script(run_checks(snapshot))):
            judged += bool(snapshot.os and snapshot.os.id)
            assert not out_of_range(line, snapshot.os), f"{name}: {line}"
    assert judged


def test_every_range_row_is_sourced_and_matches_a_command_gpuhealth_prints():
    printed = [f.command for fixes in check_fixes().values() for f in fixes]
    recommended = [c for distro in ("ubuntu-22.04", "rhel-9", "fedora-42") for c in _recommended(distro, "H100")]
    for row in ranges():
        assert re.search(r"<https://[^>]+>", row.source), row.source
        assert any(row.pattern.search(c) for c in printed + recommended), row.pattern.pattern


DISTROS = ["ubuntu-20.04", "ubuntu-22.04", "ubuntu-24.04", "debian-11", "debian-12", "rhel-8", "rhel-9", "rocky-9",
           "rocky-10", "almalinux-9", "ol-9", "centos-7", "fedora-40", "fedora-41", "fedora-44"]
GPUS = ["H100", "Tesla K80", "NVIDIA RTX A6000", "Tesla V100-SXM2-16GB"]


def _recommended(distro: str, gpu: str) -> list[str]:
    result = CliRunner().invoke(main, ["recommend", "--os", distro, "--gpu", gpu, "--format", "json"])
    assert result.exit_code in (0, 1, 2), result.output
    return [c["text"] for c in (json.loads(result.stdout).get("install") or {}).get("commands", [])]


@pytest.mark.parametrize("distro", DISTROS)
def test_every_recommended_command_is_valid_for_the_release_it_targets(distro):
    os_info = _os_info(distro)
    for gpu in GPUS:
        for command in _recommended(distro, gpu):
            assert not out_of_range(command, os_info), f"{distro} {gpu}: {command}"


def _gh208_fixes(*packages: NvidiaPackage) -> list[str]:
    snapshot = Snapshot(os=OsInfo(id="ubuntu", id_like=("debian",), version_id="24.04"),
                        driver=DriverInfo(version="535.183.01"),
                        smi_run=CommandRun(("nvidia-smi",), None, error="not installed"),
                        host_env=HostEnvironment(packages=packages))
    found = next(f for f in run_checks(snapshot).findings if f.code == "GH208")
    return [fix.command for fix in found.fixes]


def test_the_utilities_package_matches_the_installed_driver_build():
    """nvidia-utils-<branch> vs -server: Ubuntu's server build has its own utilities package."""
    server = _gh208_fixes(NvidiaPackage("nvidia-driver-535-server", "535.183.01-0ubuntu0.24.04.1", "dpkg"))
    assert "sudo apt-get install nvidia-utils-535-server" in server
    desktop = _gh208_fixes(NvidiaPackage("nvidia-driver-535", "535.183.01-0ubuntu0.24.04.1", "dpkg"))
    assert "sudo apt-get install nvidia-utils-535" in desktop and not any("-server" in c for c in desktop)
    unknown = _gh208_fixes()  # no package listing: which build is installed is not known
    assert "sudo apt-get install nvidia-utils-<branch>" in unknown


def test_distribution_tokens_are_linear_on_long_runs():
    """The version tokens' runs are bounded: a pasted line of "1.1.1..." cost quadratic time (0.45 s per 20 KB)."""
    import time

    from gpuhealth.distro_infer import inferred_family
    from gpuhealth.model import Snapshot

    for text in ("1." * 10_000, "1-" + "a." * 10_000, "0:" * 10_000):
        start = time.process_time()
        assert inferred_family(Snapshot(), (), [text]) is None
        assert time.process_time() - start < 0.1


def test_dnf_is_a_comment_on_an_el7_host():
    """RHEL/CentOS 7 and Amazon Linux 2 have yum, not dnf: GH202's versionlock hold is written as a comment there."""
    hold = "sudo dnf install python3-dnf-plugin-versionlock && sudo dnf versionlock add '*nvidia*'"
    finding = _finding("GH202", Fix(hold, "rhel"))
    for os_id, like, version in (("centos", ("rhel", "fedora"), "7"), ("amzn", ("centos", "rhel", "fedora"), "2")):
        script = fix_script(Report(Snapshot(os=OsInfo(id=os_id, id_like=like, version_id=version)), (finding,)))
        assert hold not in live_lines(script) and "(RHEL/CentOS 7 have yum)" in script
    for os_id, like, version in (("rocky", ("rhel", "centos", "fedora"), "9.3"), ("amzn", ("fedora",), "2023")):
        script = fix_script(Report(Snapshot(os=OsInfo(id=os_id, id_like=like, version_id=version)), (finding,)))
        assert hold in live_lines(script)
