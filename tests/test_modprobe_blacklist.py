"""Module configuration as evidence: modprobe.d text (a file's content, `grep -r` over the folders, `modprobe -c`) and
/proc/cmdline fill the same snapshot fields live collection fills, and GH201 names the configuration that keeps the
nvidia module out as the cause, with its file and the fix (take the lines out, rebuild the initramfs, reboot).

The modprobe.d lines follow modprobe.d(5) <https://man7.org/linux/man-pages/man5/modprobe.d.5.html>; the
supergfxd and system76-power files are the ones those tools write (knowledge/modprobe_writers.csv cites their
source). Everything else here (paths, host names, the posts) is written for these tests.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from gpuhealth.model import Severity
from gpuhealth.parsers.install import kernel_cmdline_blacklist
from gpuhealth.parsers.system import modprobe_text_by_file
from hostcases import FakeHost, load_spec
from smi_tables import a100_table

INTEGRATED = "blacklist nvidia\nblacklist nvidia-drm\nblacklist nvidia-modeset\nblacklist nouveau\nalias nouveau off\n"
GREP = ("$ grep -r nvidia /etc/modprobe.d\n"
        "/etc/modprobe.d/supergfxd.conf:blacklist nvidia\n/etc/modprobe.d/supergfxd.conf:blacklist nvidia-drm\n"
        "/etc/modprobe.d/nvidia-uvm.conf:options nvidia_uvm uvm_disable_hmm=1\n")
LSMOD_WITH_NVIDIA = ("$ lsmod\nModule                  Size  Used by\nnvidia_uvm           1437696  0\n"
                     "nvidia              56594432  1 nvidia_uvm\ndrm                   622592  3\n")
LSMOD_WITHOUT = "$ lsmod\nModule                  Size  Used by\ndrm                   622592  3\next4   1019904  1\n"
SMI_FAILED = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
              "that the latest NVIDIA driver is installed and running.\n")


def report_of(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", text) for i, text in enumerate(texts)])
    return snapshot, run_checks(snapshot)


def gh201(report):
    return [f for f in report.findings if f.code == "GH201"]


def commands(finding) -> list[str]:
    return [f.command for f in finding.fixes]


# --------------------------------------------------------------------------- reading the text

def test_grep_prefixes_and_head_banners_name_the_files():
    text = ("/etc/modprobe.d/a.conf:blacklist nvidia\n/etc/modprobe.d/b.conf:3:options nouveau modeset=0\n"
            "==> /usr/lib/modprobe.d/c.conf <==\nblacklist nouveau\n")
    assert modprobe_text_by_file(text) == {"/etc/modprobe.d/a.conf": "blacklist nvidia",
                                           "/etc/modprobe.d/b.conf": "options nouveau modeset=0",
                                           "/usr/lib/modprobe.d/c.conf": "blacklist nouveau\n"}
    assert modprobe_text_by_file("blacklist nvidia\n") == {"": "blacklist nvidia\n"}


def test_a_grep_listing_gives_one_file_per_path_with_its_real_path():
    snapshot, _ = report_of(GREP)
    files = {f.path: f.blacklisted for f in snapshot.install.modprobe_files}
    assert files == {"/etc/modprobe.d/supergfxd.conf": ("nvidia", "nvidia_drm"),
                     "/etc/modprobe.d/nvidia-uvm.conf": ()}


def test_the_file_a_cat_command_names_is_the_files_path():
    snapshot, _ = report_of(f"$ cat /etc/modprobe.d/system76-power.conf\n{INTEGRATED}")
    assert [f.path for f in snapshot.install.modprobe_files] == ["/etc/modprobe.d/system76-power.conf"]


def test_a_fence_holds_the_file_the_line_above_it_names():
    post = "Contents of `/etc/modprobe.d/supergfxd.conf`:\n\n```\nblacklist nvidia\n```\n"
    snapshot, _ = report_of(post)
    assert [f.path for f in snapshot.install.modprobe_files] == ["/etc/modprobe.d/supergfxd.conf"]
    # two files named above it: which one the fence holds is not known
    two = "I have `/etc/modprobe.d/a.conf` and `/etc/modprobe.d/b.conf`:\n\n```\nblacklist nvidia\n```\n"
    snapshot, _ = report_of(two)
    assert snapshot.install.modprobe_files[0].path.endswith("(pasted)")


def test_modprobe_showconfig_is_modprobe_d_text():
    text = ("$ modprobe -c | grep nvidia\nblacklist nvidia\noptions nvidia NVreg_OpenRmEnableUnsupportedGpus=1\n"
            "alias pci:v000010DEd*sv*sd*bc03sc02i00* nvidia\n")
    snapshot, log = analyze_texts([("paste.txt", text)])
    assert any(r.kind == "modprobe-d" for r in log)
    assert snapshot.install.modprobe_files[0].blacklisted == ("nvidia",)


def test_two_pasted_files_add_up():
    snapshot, _ = report_of("$ cat /etc/modprobe.d/a.conf\nblacklist nvidia\n",
                            "$ cat /etc/modprobe.d/b.conf\nblacklist nouveau\noptions nouveau modeset=0\n")
    assert [f.path for f in snapshot.install.modprobe_files] == ["/etc/modprobe.d/a.conf", "/etc/modprobe.d/b.conf"]


def test_the_command_line_parameters_that_keep_a_module_out_after_boot():
    line = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 module_blacklist=nvidia,nvidia-drm rd.driver.blacklist=nouveau " \
           "modprobe.blacklist=nvidia_uvm nvidia-drm.modeset=1"
    # dracut's rd.driver.blacklist applies inside the initramfs only: the booted system loads the module
    assert kernel_cmdline_blacklist(line) == {"nvidia": "module_blacklist", "nvidia_drm": "module_blacklist",
                                              "nvidia_uvm": "modprobe.blacklist"}


# --------------------------------------------------------------------------- GH201 names the cause

def test_a_blacklist_alone_is_a_warning_naming_the_file_and_the_whole_fix():
    _, report = report_of(GREP)
    [finding] = gh201(report)
    assert finding.severity is Severity.WARNING  # the module stays out at boot; nobody saw it missing
    assert "/etc/modprobe.d/supergfxd.conf" in finding.message and "supergfxd" in finding.message
    assert finding.labels.get("decided") == "driver-blacklisted"
    fixes = commands(finding)
    assert "sudo systemctl disable --now supergfxd.service" in fixes
    edit = next(c for c in fixes if c.startswith("sudo sed -i.bak"))
    assert edit.endswith(" /etc/modprobe.d/supergfxd.conf")
    assert {"sudo update-initramfs -u", "sudo dracut --force"} <= set(fixes)
    assert any("mkinitcpio -P" in c for c in fixes) and fixes[-1] == "sudo reboot"


def test_the_edit_deletes_exactly_the_lines_that_keep_the_nvidia_modules_out(tmp_path):
    _, report = report_of(GREP)
    edit = next(c for c in commands(gh201(report)[0]) if c.startswith("sudo sed"))
    conf = tmp_path / "supergfxd.conf"
    kept = ["# Automatically generated", "blacklist nouveau", "alias nouveau off", "blacklist nvidiafb",
            "install nvidia modprobe -i nvidia-current $CMDLINE_OPTS",
            "options nvidia NVreg_DynamicPowerManagement=0x02"]
    removed = ["blacklist nvidia", "blacklist nvidia-drm", "  blacklist nvidia_modeset  ", "alias nvidia off",
               "install nvidia_uvm /bin/false", "install nvidia /usr/bin/true"]
    conf.write_text("\n".join(kept[:2] + removed + kept[2:]) + "\n")
    command = edit.removeprefix("sudo ").rsplit(" ", 1)[0] + f" {conf}"
    subprocess.run(["bash", "-c", command], check=True)
    assert conf.read_text().splitlines() == kept
    assert (tmp_path / "supergfxd.conf.bak").exists()  # not a .conf: modprobe does not read it


def test_a_fenced_block_in_a_post_is_read_and_its_prose_kept_from_an_all_clear():
    post = ("Hardware: 2x RTX A6000\n\nnvidia-smi -> No supported GPUs found\n\nmy modprobe config:\n\n"
            f"```\n{INTEGRATED}```\n")
    _, report = report_of(post)
    [finding] = gh201(report)
    assert finding.severity is Severity.WARNING
    # no path is known: the fix finds the files instead of editing one
    assert any(c.startswith("grep -rsnE") and "/etc/modprobe.d" in c for c in commands(finding))
    assert not any(c.startswith("sudo sed") for c in commands(finding))
    assert report.verdict != "HEALTHY"
    # the person deletes the lines the search prints: the script rebuilds nothing and reboots for nothing before that
    script = fix_script(report).splitlines()
    assert [line for line in script if line.startswith("grep -rsnE")]  # the search runs: it only reads
    rebuilds = [line for line in script if "update-initramfs" in line or "dracut" in line or line.endswith("reboot")]
    assert rebuilds and all(line.startswith("#") for line in rebuilds)


def test_with_nvidia_smi_failing_the_blacklist_is_the_critical_cause():
    _, report = report_of(GREP, SMI_FAILED)
    [finding] = gh201(report)
    assert finding.severity is Severity.CRITICAL and "supergfxd.conf" in finding.message
    assert "GH203" in finding.explains


def test_with_the_module_list_showing_nvidia_missing_the_blacklist_is_named():
    _, report = report_of(GREP, LSMOD_WITHOUT, SMI_FAILED)
    [finding] = gh201(report)
    assert finding.severity is Severity.CRITICAL and "blacklists it" in finding.message


@pytest.mark.parametrize("loaded", [LSMOD_WITH_NVIDIA, f"$ nvidia-smi\n{a100_table()}"])
def test_a_blacklist_while_the_machine_shows_nvidia_loaded_is_no_cause(loaded):
    _, report = report_of(GREP, loaded)
    assert not [f for f in gh201(report) if f.severity is not Severity.INFO]


def test_a_compute_only_blacklist_is_no_cause():
    # system76-power's compute mode: nvidia-drm and nvidia-modeset kept out, nvidia itself loads and CUDA works
    _, report = report_of("$ cat /etc/modprobe.d/system76-power.conf\nblacklist nvidia-drm\nblacklist nvidia-modeset\n"
                          "alias nvidia-drm off\nalias nvidia-modeset off\n")
    assert not gh201(report)


def test_the_kernel_command_line_is_named_and_its_fix_is_a_step():
    _, report = report_of("$ cat /proc/cmdline\nBOOT_IMAGE=/vmlinuz-6.8.0 root=UUID=1234 ro module_blacklist=nvidia\n")
    [finding] = gh201(report)
    assert finding.severity is Severity.WARNING and "module_blacklist=nvidia" in str(finding.evidence)
    step = next(f for f in finding.fixes if "kernel command line" in f.command)
    assert step.kind == "step" and finding.evidence[0].source == "/proc/cmdline"
    assert not any("initramfs" in f.command or "dracut" in f.command for f in finding.fixes)  # only the reboot
    assert finding.fixes[-1].command == "sudo reboot"
    _, initramfs_only = report_of("$ cat /proc/cmdline\nBOOT_IMAGE=/vmlinuz root=UUID=1 rd.driver.blacklist=nvidia\n")
    assert not gh201(initramfs_only)


# --------------------------------------------------------------------------- the live host, through the same fields

def live_host(conf: str, text: str, cmdline: str = "") -> FakeHost:
    """The Debian 12 test host with its module built for the running kernel too (so only the configuration keeps it
    out) and one more modprobe.d file."""
    spec = load_spec("debian-kernel-update-lost-driver")
    module = "/lib/modules/6.1.0-21-amd64/updates/dkms/nvidia.ko"
    spec["commands"]["dkms status"] = {"stdout": "nvidia, 535.161.08, 6.1.0-18-amd64, x86_64: installed\n"
                                                 "nvidia, 535.161.08, 6.1.0-21-amd64, x86_64: installed\n"}
    spec["commands"]["modinfo nvidia"] = {"stdout": f"filename:       {module}\nversion:        535.161.08\n"}
    spec["listings"]["/lib/modules/6.1.0-21-amd64/updates/dkms"] = ["nvidia.ko"]
    spec["files"][conf] = text
    if cmdline:
        spec["files"]["/proc/cmdline"] = cmdline
    spec["listings"]["/etc/modprobe.d"].append(conf.rsplit("/", 1)[-1])
    return FakeHost(spec)


def test_live_check_names_the_file_that_blacklists_nvidia():
    written = f"# Automatically generated by system76-power\n{INTEGRATED}alias nvidia off\n"
    report = run_checks(collect(live_host("/etc/modprobe.d/system76-power.conf", written)))
    [finding] = gh201(report)
    assert finding.severity is Severity.CRITICAL
    assert "/etc/modprobe.d/system76-power.conf" in finding.message and "system76-power" in finding.message
    assert "sudo system76-power graphics nvidia" in commands(finding)


def test_the_live_fix_script_is_valid_bash_and_passes_shellcheck(tmp_path):
    script = fix_script(run_checks(collect(live_host("/etc/modprobe.d/supergfxd.conf", INTEGRATED))))
    assert "/etc/modprobe.d/supergfxd.conf" in script and "sudo update-initramfs -u" in script
    path = tmp_path / "fix.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests never install it): only bash -n was checked")
    result = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_live_check_reads_the_kernel_command_line():
    cmdline = "BOOT_IMAGE=/vmlinuz-6.1.0-21-amd64 root=UUID=0b1c2d3e ro quiet module_blacklist=nvidia\n"
    report = run_checks(collect(live_host("/etc/modprobe.d/nvidia-options.conf", "options nvidia NVreg_X=1\n",
                                          cmdline)))
    [finding] = gh201(report)
    assert finding.severity is Severity.CRITICAL and "(/proc/cmdline)" in finding.message
    assert commands(finding)[-1] == "sudo reboot"
