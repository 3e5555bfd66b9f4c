"""An OS upgrade or an automatic update told in words (a distribution's minor release, dnf update, do-release-upgrade,
unattended-upgrades, an image that updated itself) installs a new kernel: beside a driver failure it is the reporter's
statement of GH507's cause, the module not built for the new kernel (knowledge/cause_phrases.csv
told-os-upgrade-broke-module, parsers/os_upgrade.py); beside the kernel headers missing for it, GH503's. Told with no
failure, with a working GPU, or of another package, it names nothing. The sentences are written for these tests
(hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.os_upgrade import FAMILY
from gpuhealth.parsers.prose_symptoms import told_alone, told_symptoms

SMI_FAILS = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")
MODPROBE_FAILS = "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': No such device\n"
SMI_WORKS = "$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"


def findings_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot).findings


def codes(findings) -> list[tuple[str, str]]:
    return [(f.code, f.message) for f in findings]


@pytest.mark.parametrize("story", [
    "Last week we moved the whole cluster from Rocky Linux 9.4 to 9.5.",
    "The nodes ran dnf upgrade on Sunday night and were rebooted by the maintenance job.",
    "Yesterday I did a do-release-upgrade on the workstation.",
    "Unattended-upgrades installed updates on the box overnight.",
    "Our cloud image updated itself when the instance booted.",
    "We went from AlmaLinux 8.9 to 8.10 this morning.",
    "The servers got the HWE kernel with the latest point release.",
    "The VM was updated automatically overnight.",
    "cloud-init ran package_upgrade on the first boot of the instance.",
    "After that reboot the kernel version changed.",
    "The latest kernel was installed automatically.",
])
@pytest.mark.parametrize("failure", [SMI_FAILS, MODPROBE_FAILS])
def test_an_upgrade_told_before_a_driver_failure_names_the_module_not_built(story, failure):
    findings = findings_of(("notes.txt", story + "\n"), ("session.txt", failure))
    first = findings[0]
    assert first.code == "GH507", codes(findings)
    assert first.labels.get("reported") == "words"  # the upgrade is the reporter's, the failure the machine's
    assert {"GH201", "GH203"} & set(first.explains)  # the failure folds under its cause


@pytest.mark.parametrize("story", [
    "After upgrading from Rocky 9.3 to 9.4 the nvidia driver no longer loads.",
    "We ran dnf update on the GPU nodes and now nvidia-smi fails on every one of them.",
    "Since the dist-upgrade of our Debian box the driver stopped working.",
])
def test_an_upgrade_and_a_failure_in_one_sentence_alone_stay_a_warning(story):
    first = findings_of(("notes.txt", story + "\n"))[0]
    assert first.code == "GH507" and first.severity is Severity.WARNING
    assert first.labels.get("reported") == "words"


@pytest.mark.parametrize("story", [
    "We upgraded the servers from Ubuntu 22.04 to 24.04 and the kernel headers for the new kernel are missing.",
    "After dnf update there is no kernel-devel for the new kernel in the repository.",
    "We patched the servers on Sunday. The kernel was upgraded but kernel-devel was not.",
    "After the unattended upgrade our linux-headers are older than the running kernel.",
])
def test_an_upgrade_with_the_headers_missing_for_the_new_kernel_names_the_headers(story):
    findings = findings_of(("notes.txt", story + "\n"), ("session.txt", SMI_FAILS))
    assert findings[0].code == "GH503", codes(findings)
    assert "GH203" in findings[0].explains


def test_the_package_manager_saying_the_headers_are_not_there_names_the_headers():
    session = (SMI_FAILS + "$ sudo dnf install kernel-devel-$(uname -r)\n"
               "Error: Unable to find a match: kernel-devel-5.14.0-503.11.1.el9_5.x86_64\n")
    findings = findings_of(("notes.txt", "We ran dnf update yesterday.\n"), ("session.txt", session))
    assert findings[0].code == "GH503", codes(findings)
    assert not any(f.code == "GH507" and f.labels.get("reported") == "words" for f in findings)


def test_dkms_showing_the_module_built_for_the_running_kernel_rules_the_words_out():
    session = (SMI_FAILS + "$ uname -r\n6.8.0-45-generic\n$ dkms status\n"
               "nvidia/550.120, 6.8.0-45-generic, x86_64: installed\n")
    findings = findings_of(("notes.txt", "Yesterday we upgraded the servers from Ubuntu 22.04 to 24.04.\n"),
                           ("session.txt", session))
    assert not any(f.code == "GH507" for f in findings), codes(findings)
    assert findings[0].code == "GH203"


def test_a_driver_package_upgrade_keeps_its_library_mismatch():
    session = "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
    findings = findings_of(("notes.txt", "We ran apt upgrade this morning.\n"), ("session.txt", session))
    assert findings[0].code == "GH202", codes(findings)
    assert not any(f.code == "GH507" for f in findings)


@pytest.mark.parametrize("story", [
    "We upgraded the servers from Ubuntu 22.04 to 24.04 last week.",
    "The nodes ran dnf update on Sunday night.",
    "unattended-upgrades is enabled on every node.",
])
def test_an_upgrade_without_a_failure_raises_nothing(story):
    alone = findings_of(("notes.txt", story + "\n"))
    working = findings_of(("notes.txt", story + "\n"), ("session.txt", SMI_WORKS))
    for findings in (alone, working):
        assert not any(f.code == "GH507" for f in findings), codes(findings)
        assert not any(f.severity is Severity.CRITICAL for f in findings), codes(findings)


@pytest.mark.parametrize("story", [
    "I upgraded pytorch and numpy yesterday.",  # another package, not the system
    "I ran sudo apt update before installing the toolkit.",  # apt update refreshes the lists, installs nothing
    "We ran dnf update nvidia-driver to get the new branch.",  # one named package, not the kernel
    "We hold the kernel, so dnf update never changes it.",
    "Should we run dnf update on the GPU nodes?",
    "We are planning to upgrade Ubuntu 22.04 to 24.04 next month.",
    "I did not upgrade the system.",
    "The docker image was updated to the new CUDA tag.",  # a container image, not the host's kernel
])
def test_no_upgrade_of_the_system_is_read_beside_a_failure(story):
    assert not told_alone(story, FAMILY)
    findings = findings_of(("notes.txt", story + "\n"), ("session.txt", SMI_FAILS))
    assert not any(f.code == "GH507" for f in findings), codes(findings)


@pytest.mark.parametrize(("words", "named"), [
    ("After the system update the driver works fine.", False),
    ("The OS upgrade broke the nvidia driver, but reinstalling it fixed it.", False),
    ("Our Rocky 9.5 -> 9.6 update broke the nvidia driver.", True),
    ("Since the apt full-upgrade the nvidia module won't load.", True),
])
def test_the_one_sentence_family(words, named):
    assert (FAMILY in [t.phrase for t in told_symptoms(words)]) is named


def test_an_unknown_family_is_a_key_error():
    with pytest.raises(KeyError):
        told_alone("we upgraded", "no-such-family")


# A package tool's own lines showing an update that installed a kernel (hand-written in the formats of apt's
# history.log, dnf's "history info" and "history" list, dpkg's terminal output and yum's rpm log): machine output
APT_HISTORY_KERNEL = (
    "Start-Date: 2025-03-04  06:12:40\nCommandline: /usr/bin/unattended-upgrade\n"
    "Install: linux-image-6.8.0-57-generic:amd64 (6.8.0-57.59, automatic), "
    "linux-modules-6.8.0-57-generic:amd64 (6.8.0-57.59, automatic)\n"
    "Upgrade: linux-image-generic:amd64 (6.8.0-55.57, 6.8.0-57.59)\nEnd-Date: 2025-03-04  06:14:02\n")
APT_HISTORY_OTHER = (
    "Start-Date: 2025-03-04  06:12:40\nCommandline: /usr/bin/unattended-upgrade\n"
    "Upgrade: openssl:amd64 (3.0.13-0ubuntu3.4, 3.0.13-0ubuntu3.5), libssl3t64:amd64 (3.0.13-0ubuntu3.4, "
    "3.0.13-0ubuntu3.5)\nEnd-Date: 2025-03-04  06:14:02\n")
DNF_HISTORY_INFO = (
    "$ sudo dnf history info 22\nTransaction ID : 22\nCommand Line   : upgrade -y\nPackages Altered:\n"
    "    Install  kernel-5.14.0-570.12.1.el9_6.x86_64        @baseos\n"
    "    Install  kernel-core-5.14.0-570.12.1.el9_6.x86_64   @baseos\n"
    "    Upgrade  openssh-8.7p1-45.el9.x86_64                 @baseos\n")
DNF_HISTORY_LIST = (
    "$ sudo dnf history\nID     | Command line             | Date and time    | Action(s)      | Altered\n"
    "-------------------------------------------------------------------------------\n"
    "    22 | upgrade -y               | 2025-06-02 04:10 | I, U           |  212 EE\n"
    "    21 | install tmux             | 2025-05-20 11:31 | Install        |    1\n")


@pytest.mark.parametrize("history", [APT_HISTORY_KERNEL, DNF_HISTORY_INFO, DNF_HISTORY_LIST])
@pytest.mark.parametrize("failure", [SMI_FAILS, MODPROBE_FAILS])
def test_a_package_tool_showing_an_update_install_a_kernel_names_the_module_not_built(history, failure):
    findings = findings_of(("history.txt", history), ("session.txt", failure))
    first = findings[0]
    assert first.code == "GH507", codes(findings)
    assert first.labels.get("reported") != "words"  # the package tool's output, not the reporter's words
    assert "package tool" in first.message


@pytest.mark.parametrize("history", [APT_HISTORY_KERNEL, DNF_HISTORY_INFO, DNF_HISTORY_LIST])
def test_a_kernel_installed_with_a_working_gpu_raises_nothing(history):
    for findings in (findings_of(("history.txt", history)),
                     findings_of(("history.txt", history), ("session.txt", SMI_WORKS))):
        assert not any(f.code == "GH507" for f in findings), codes(findings)
        assert not any(f.severity is Severity.CRITICAL for f in findings), codes(findings)


def test_an_update_of_other_packages_names_nothing():
    findings = findings_of(("history.txt", APT_HISTORY_OTHER), ("session.txt", SMI_FAILS))
    assert not any(f.code == "GH507" for f in findings), codes(findings)


def test_dkms_built_for_the_running_kernel_outweighs_the_history():
    session = (SMI_FAILS + "$ uname -r\n6.8.0-57-generic\n$ dkms status\n"
               "nvidia/570.133.07, 6.8.0-57-generic, x86_64: installed\n")
    findings = findings_of(("history.txt", APT_HISTORY_KERNEL), ("session.txt", session))
    assert not any(f.code == "GH507" for f in findings), codes(findings)


@pytest.mark.parametrize("missing", [
    "$ sudo yum install kernel-devel-$(uname -r)\nNo package kernel-devel-3.10.0-1160.119.1.el7.x86_64 available.\n",
    "$ sudo apt install linux-headers-$(uname -r)\nE: Unable to locate package linux-headers-6.8.0-1021-gcp\n",
    "$ sudo apt install linux-headers-6.8.0-1021-gcp\nE: Package 'linux-headers-6.8.0-1021-gcp' has no installation "
    "candidate\n",
])
def test_the_package_tool_without_headers_for_the_new_kernel_names_the_headers(missing):
    findings = findings_of(("history.txt", APT_HISTORY_KERNEL), ("session.txt", SMI_FAILS + missing))
    assert findings[0].code == "GH503", codes(findings)


@pytest.mark.parametrize(("line", "shows"), [
    ("Setting up linux-image-6.8.0-57-generic (6.8.0-57.59) ...", True),
    ("2025-03-04 06:13:01 install linux-image-6.1.0-32-amd64:amd64 <none> 6.1.129-1", True),
    ("2025-06-02T04:11:17+0000 SUBDEBUG Installed: kernel-core-5.14.0-570.12.1.el9_6.x86_64", True),
    ("2025-03-04 06:12:40,511 INFO Packages that will be upgraded: linux-generic linux-image-generic openssl", True),
    ("ii  linux-image-6.8.0-57-generic  6.8.0-57.59  amd64  Signed kernel image generic", False),  # a listing
    ("Upgrade: openssl:amd64 (3.0.13-0ubuntu3.4, 3.0.13-0ubuntu3.5)", False),
    ("    21 | install tmux             | 2025-05-20 11:31 | Install        |    1", False),
    ("    23 | update nvidia-driver     | 2025-06-09 09:00 | Upgrade        |    9", False),
])
def test_which_package_tool_lines_show_a_kernel_installed(line, shows):
    from gpuhealth.parsers.os_upgrade import kernel_install_lines

    assert bool(kernel_install_lines([line], "history.txt")) is shows


DNF_TRANSACTION = (
    "$ sudo dnf upgrade -y\nDependencies resolved.\n"
    " Package              Arch     Version                     Repository    Size\n"
    "Installing:\n"
    " kernel               x86_64   5.14.0-570.12.1.el9_6       baseos       1.8 M\n"
    "Upgrading:\n"
    " bash                 x86_64   5.1.8-10.el9                baseos       1.7 M\n"
    "Removing:\n"
    " kernel               x86_64   5.14.0-427.13.1.el9_4       @baseos        0\n")
APT_NEW_PACKAGES = (
    "$ sudo apt full-upgrade\nThe following NEW packages will be installed:\n"
    "  linux-headers-6.8.0-57-generic linux-image-6.8.0-57-generic linux-modules-6.8.0-57-generic\n"
    "The following packages will be upgraded:\n  openssl\n")


@pytest.mark.parametrize(("output", "rows"), [
    (DNF_TRANSACTION, 1),  # the kernel installed, not the one removed
    (APT_NEW_PACKAGES, 1),
    ("Removing:\n kernel               x86_64   5.14.0-427.13.1.el9_4       @baseos        0\n"
     "Removed:\n  kernel-5.14.0-427.13.1.el9_4.x86_64\n", 0),
    ("The following packages will be REMOVED:\n  linux-image-6.8.0-40-generic\n", 0),
    ("Installing:\n kernel-devel         x86_64   5.14.0-570.12.1.el9_6       appstream     20 M\n", 0),
])
def test_a_transaction_shows_the_kernels_it_installs_not_those_it_removes(output, rows):
    from gpuhealth.parsers.os_upgrade import kernel_install_lines

    assert len(kernel_install_lines(output.splitlines(), "session.txt")) == rows


def test_an_upgrade_transaction_before_a_failure_names_the_module_not_built():
    findings = findings_of(("upgrade.txt", DNF_TRANSACTION), ("session.txt", SMI_FAILS))
    assert findings[0].code == "GH507", codes(findings)
