"""Package tools' logs (apt history.log and term.log, dpkg.log, dnf/yum history info, dnf.rpm.log, yum.log, zypper's
history, pacman.log) are their own evidence kind, read by parsers/package_log.py and judged by the checks that read
the fields they fill: GH202 (a driver upgrade under a loaded module), GH503 (a kernel installed without its headers).
The logs are hand-written in each tool's format (tests/data/package-logs/README.md cites the source of each)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main
from gpuhealth.evidence import KINDS, identify
from gpuhealth.model import ParseError
from gpuhealth.parsers.package_log import category, is_log_line, looks_like_package_log, parse_package_log
from repo_paths import DATA

LOGS = DATA / "package-logs"
PROC_VERSION = ("$ cat /proc/driver/nvidia/version\nNVRM version: NVIDIA UNIX x86_64 Kernel Module  {}  "
                "Thu Mar 28 10:00:00 UTC 2024\nGCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n")
SMI_MISMATCH = "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"


def log(name: str) -> str:
    return (LOGS / name).read_text()


def analyze(*texts: str) -> dict:
    """`gpuhealth analyze -` on the texts pasted one after the other, as its JSON report."""
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input="\n".join(texts))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


def findings(report: dict) -> dict[str, dict]:
    return {f["code"]: f for f in report["findings"]}


# (file, tool, action, name, version, version before) of one change each log must show
@pytest.mark.parametrize(("name", "tool", "action", "package", "version", "before"), [
    ("apt-history-unattended-driver.log", "apt", "upgrade", "libnvidia-compute-535", "535.183.01-0ubuntu0.22.04.1",
     "535.171.04-0ubuntu0.22.04.1"),
    ("apt-history-kernel-no-headers.log", "apt", "install", "linux-image-6.5.0-35-generic", "6.5.0-35.35~22.04.1",
     None),
    ("apt-history-driver-removed.log", "apt", "remove", "nvidia-driver-535", "535.183.01-0ubuntu0.22.04.1", None),
    ("apt-term.log", "dpkg", "upgrade", "nvidia-utils-535", "535.183.01-0ubuntu0.22.04.1",
     "535.171.04-0ubuntu0.22.04.1"),
    ("dpkg.log", "dpkg", "upgrade", "libnvidia-compute-535", "535.183.01-0ubuntu0.22.04.1",
     "535.171.04-0ubuntu0.22.04.1"),
    ("dnf-history-info.txt", "dnf", "upgrade", "nvidia-driver", "550.54.15-1.el9", "550.54.14-1.el9"),
    ("dnf-history-info.txt", "dnf", "install", "kernel-core", "5.14.0-427.16.1.el9_4", None),
    ("dnf.rpm.log", "dnf", "upgrade", "nvidia-driver-cuda-libs", "550.54.15-1.el9", "550.54.14-1.el9"),
    ("yum.log", "yum", "install", "kernel-devel", "3.10.0-1160.119.1.el7", None),
    ("yum.log", "yum", "upgrade", "nvidia-driver-latest-dkms", "550.54.15-1.el7", None),
    ("zypp-history", "zypper", "upgrade", "nvidia-compute-G06", "550.90.07-lp155.1", "550.78-lp155.1"),
    ("zypp-history", "zypper", "remove", "kernel-default", "6.4.0-150600.21.2", None),
    ("pacman.log", "pacman", "upgrade", "nvidia", "550.90.07-1", "550.78-6"),
    ("pacman.log", "pacman", "upgrade", "linux", "6.9.1.arch1-1", "6.8.9.arch1-1"),
])
def test_each_log_is_its_own_kind_and_shows_its_changes(name, tool, action, package, version, before):
    text = log(name)
    assert identify(text) == "package-log"
    changes, _ = parse_package_log(text)
    shown = {(c.tool, c.action, c.name, c.version, c.old_version) for c in changes}
    assert (tool, action, package, version, before) in shown, sorted(shown)


def test_dates_and_the_command_line_come_with_each_change():
    changes, _ = parse_package_log(log("apt-history-unattended-driver.log"))
    assert {(c.date, c.command) for c in changes} == {("2024-05-14 06:25:11", "/usr/bin/unattended-upgrade")}
    changes, _ = parse_package_log(log("pacman.log"))
    assert changes[0].command == "pacman -Syu" and changes[0].date == "2024-05-14T03:10:41+0000"
    changes, _ = parse_package_log(log("zypp-history"))
    assert changes[-1].command == "zypper up -y"


def test_other_packages_are_read_but_not_kept():
    changes, total = parse_package_log(log("apt-history-security-benign.log"))
    assert changes == () and total == 5  # openssl, libssl3, libc6, libc-bin, locales


@pytest.mark.parametrize(("package", "tool", "kind"), [
    ("linux-image-6.8.0-45-generic", "apt", "kernel"), ("linux-headers-6.8.0-45-generic", "apt", "headers"),
    ("linux-image-generic", "apt", None), ("kernel-core", "dnf", "kernel"), ("kernel-devel", "yum", "headers"),
    ("kernel-default-devel", "zypper", "headers"), ("linux-lts-headers", "pacman", "headers"),
    ("linux", "pacman", "kernel"), ("linux", "apt", None), ("nvidia-driver-535", "apt", "driver"),
    ("cuda-drivers", "dnf", "driver"), ("kmod-nvidia-latest-dkms", "dnf", "driver"),
    ("cuda-toolkit-12-4", "apt", "cuda"), ("nvidia-cuda-toolkit", "apt", "cuda"),
    ("nvidia-container-toolkit", "apt", "container-toolkit"), ("libnvidia-container1", "apt", "container-toolkit"),
    ("openssl", "apt", None), ("libc6", "dpkg", None),
])
def test_categories(package, tool, kind):
    assert category(package, tool) == kind


@pytest.mark.parametrize("text", [
    "I ran apt upgrade yesterday and now nvidia-smi fails.\n",
    "Install: the driver from the NVIDIA website\nthen reboot\n",
    "2024-05-14 06:25:40 the job started\n2024-05-14 06:25:41 the job failed\n",
    "",
])
def test_words_and_other_logs_are_not_package_logs(text):
    assert not looks_like_package_log(text)
    with pytest.raises(ParseError):
        parse_package_log(text)


def test_a_log_line_is_the_tools_not_prose():
    assert is_log_line("Commandline: /usr/bin/unattended-upgrade")
    assert is_log_line("Setting up nvidia-utils-535 (535.183.01-0ubuntu0.22.04.1) ...")
    assert not is_log_line("After this upgrade the GPU disappeared.")


# ------------------------------------------------------------------ judged through the checks, end to end


def test_an_apt_history_log_is_machine_output_not_the_reporters_words():
    report = analyze(log("apt-history-kernel-no-headers.log"))
    text = json.dumps(report)
    assert "reporter's words" not in text
    assert report["verdict"] != "HEALTHY"


def test_a_driver_upgrade_alone_warns_that_the_loaded_module_is_the_old_one():
    report = analyze(log("apt-history-unattended-driver.log"))
    found = findings(report)["GH202"]
    assert found["severity"] == "warning"
    assert "535.171.04 to 535.183.01" in found["message"] and "automatic update" in found["message"]
    assert any("Upgrade: libnvidia-compute-535" in line for e in found["evidence"] for line in e.get("lines", []))
    # whether the host rebooted since is not in a log: nothing shows a call failing, so nothing drains on it
    assert found["impact"] == "degraded"


@pytest.mark.parametrize("name", ["dnf.rpm.log", "dnf-history-info.txt", "pacman.log", "zypp-history"])
def test_a_driver_upgrade_in_other_tools_logs_warns_too(name):
    found = findings(analyze(log(name)))["GH202"]
    assert found["severity"] == "warning" and "automatic update" not in found["message"]


def test_the_old_module_still_loaded_after_the_upgrade_is_the_mismatch():
    report = analyze(PROC_VERSION.format("535.171.04"), "$ cat /var/log/dpkg.log\n" + log("dpkg.log"))
    found = findings(report)["GH202"]
    assert found["severity"] == "critical"
    assert "kernel module 535.171.04, user space 535.183.01" in found["message"]


def test_the_new_module_loaded_means_the_host_rebooted():
    report = analyze(PROC_VERSION.format("535.183.01"), "$ cat /var/log/dpkg.log\n" + log("dpkg.log"))
    assert report["host"]["Driver"].startswith("535.183.01") and "GH202" not in findings(report)


def test_the_mismatch_nvidia_smi_prints_carries_the_upgrade_that_caused_it():
    history = "$ cat /var/log/apt/history.log\n" + log("apt-history-unattended-driver.log")
    found = findings(analyze(SMI_MISMATCH, history))["GH202"]
    assert found["severity"] == "critical"
    lines = [line for e in found["evidence"] for line in e.get("lines", [])]
    assert any(line.startswith("Upgrade: nvidia-utils-535") for line in lines)


def test_a_kernel_installed_without_its_headers():
    found = findings(analyze(log("apt-history-kernel-no-headers.log")))["GH503"]
    assert found["severity"] == "warning"
    assert "kernel installed last 6.5.0-35-generic" in found["message"] and "6.5.0-21-generic" in found["message"]


def test_a_kernel_installed_with_its_headers_is_fine():
    report = analyze(log("yum.log"))  # kernel and kernel-devel of 3.10.0-1160.119.1.el7
    assert "GH503" not in findings(report)


def test_security_updates_of_other_packages_are_no_fault():
    report = analyze(log("apt-history-security-benign.log"))
    assert report["counts"]["critical"] == 0 and report["counts"]["warning"] == 0
    assert report["verdict"] != "HEALTHY"  # a package log says what changed, not whether the GPUs work
    assert set(findings(report)) == {"GH005"}


def test_the_kind_reads_its_own_example():
    overlays = KINDS["package-log"].parse(log("apt-history-unattended-driver.log"), "history.log")
    host_env = overlays["host_env"]
    assert {p.name for p in host_env.packages} >= {"libnvidia-compute-535", "nvidia-utils-535"}
    assert host_env.package_log_source == "history.log"


# ------------------------------------------------------------------ the driver removed, a branch switched

NO_SMI = "$ nvidia-smi\nbash: nvidia-smi: command not found\n"
SMI_NO_DRIVER = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.\n")


def history(text: str) -> str:
    return "$ cat /var/log/apt/history.log\n" + text


def test_the_driver_removed_alone_is_a_warning_naming_the_command():
    found = findings(analyze(log("apt-history-driver-removed.log")))["GH201"]
    assert found["severity"] == "warning"
    assert "removed on 2024-07-09 14:02:17 by `apt autoremove --purge`" in found["message"]
    assert found["impact"] == "degraded"  # the loaded module stays until the next boot: no drain on a log alone
    assert any("sudo apt-get install nvidia-driver-535" in (fix.get("command") or "") for fix in found["fixes"])


@pytest.mark.parametrize("failure", [NO_SMI, SMI_NO_DRIVER])
def test_the_driver_removed_is_why_nvidia_smi_fails(failure):
    report = analyze(failure, history(log("apt-history-driver-removed.log")))
    first = report["findings"][0]
    assert (first["code"], first["severity"]) == ("GH201", "critical"), [f["code"] for f in report["findings"]]
    assert first["impact"] == "node_unusable"  # nvidia-smi shows the module gone: this one drains
    assert "driver packages were removed" in first["message"]


def test_a_driver_installed_again_after_the_removal_is_no_removal():
    again = (log("apt-history-driver-removed.log") + "\nStart-Date: 2024-07-10  08:00:00\nCommandline: apt install "
             "nvidia-driver-535\nInstall: nvidia-driver-535:amd64 (535.183.01-0ubuntu0.22.04.1)\n"
             "End-Date: 2024-07-10  08:01:00\n")
    assert "GH201" not in findings(analyze(again))


def test_a_branch_switch_is_an_upgrade_not_a_removal():
    found = findings(analyze(log("apt-history-branch-switch.log")))  # apt switching driver branches
    assert "GH201" not in found
    assert "from 535.183.01 to 550.107.02" in found["GH202"]["message"]
    assert found["GH202"]["severity"] == "warning"


def test_lines_grepped_out_of_history_log_are_still_the_log():
    grepped = "\n".join(line for line in log("apt-history-unattended-driver.log").splitlines()
                        if line.startswith(("Commandline", "Upgrade")))
    assert identify(grepped) == "package-log"
    assert findings(analyze(grepped))["GH202"]["severity"] == "warning"


BANNER = ("$ sudo dmesg | grep NVRM\n[    5.123456] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {}  "
          "Sun May 12 19:39:15 UTC 2024\n")  # the driver's load banner (nv.c's "loading NVIDIA UNIX ... Kernel Module")


def test_the_kernel_log_loading_the_new_module_means_the_host_rebooted():
    report = analyze(BANNER.format("535.183.01"), history(log("apt-history-unattended-driver.log")))
    assert "GH202" not in findings(report)


def test_the_kernel_log_loading_only_the_old_module_keeps_the_warning():
    report = analyze(BANNER.format("535.171.04"), history(log("apt-history-unattended-driver.log")))
    assert findings(report)["GH202"]["severity"] == "warning"


def test_other_pastes_do_not_load_the_package_log_reader():
    """The kind ranks above the logs, so most pieces reach its sniff: a piece without any of the formats' literals is
    turned away before the parser is imported."""
    import subprocess
    import sys

    code = ("import sys\nfrom gpuhealth.evidence import identify\n"
            "identify('[ 5.1] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\\n')\n"
            "identify('my training job dies after an hour with CUDA error: out of memory\\n')\n"
            "print('gpuhealth.parsers.package_log' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
