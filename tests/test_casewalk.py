"""Rules added while walking new real threads (casewalk): each on its real line and on a near miss."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.fixes import fixes_of
from gpuhealth.knowledge.signatures import match_line
from gpuhealth.report.common import fold


@pytest.mark.parametrize(("line", "row"), [
    # NVIDIA/open-gpu-kernel-modules#805: the open modules compile C++ (nvidia-modeset's displayport code)
    ("/bin/sh: line 1: g++: command not found", "shell-compiler-not-found"),
    ("sh: 1: cc: not found", "shell-compiler-not-found"),
    ("bash: make: command not found", "shell-compiler-not-found"),
    # negativo17/nvidia-driver#192: akmods' rpmbuild stops on the missing BuildRequires
    ("\tgcc-c++ is needed by nvidia-kmod-3:590.48.01-1.fc43.x86_64", "rpm-build-dep-compiler"),
    ("2026/02/11 18:46:29 akmodsbuild: \tgcc-c++ is needed by nvidia-kmod-3:590.48.01-1.fc43.x86_64",
     "rpm-build-dep-compiler"),
])
def test_a_missing_compiler_is_build_tools_missing(line: str, row: str) -> None:
    sig = match_line(line)
    assert sig is not None and sig.id == row and sig.code == "GH504"


@pytest.mark.parametrize("line", [
    "bash: nvcc: command not found",  # the CUDA toolkit is not on PATH: not the module's build tools
    "-bash: nvidia-smi: command not found",
    "\tkernel-devel-uname-r = 6.18.8-200.fc43.x86_64 is needed by nvidia-kmod-3:590.48.01-1.fc43.x86_64",
    "gcc-c++ is needed by zfs-kmod-2.2.7-1.fc43.x86_64",  # another kmod
])
def test_near_misses_are_not_build_tools_missing(line: str) -> None:
    sig = match_line(line)
    assert sig is None or sig.code != "GH504"


def test_the_rhel_fix_installs_the_cxx_compiler_the_open_modules_need() -> None:
    commands = [fix.command for fix in fixes_of("GH504") if fix.family == "rhel"]
    assert any("gcc-c++" in command for command in commands)


# ----------------------------------------------------------------------- one fault, one finding, and both versions

# h8d13/archinstoo#244 (a case): the firmware left BAR0 empty, then the driver's probe failed for that GPU
BAR_THEN_PROBE = """         NVRM: BAR0 is 0M @ 0x0 (PCI:0000:01:00.0)
[    6.554916] NVRM: The NVIDIA probe routine failed for 1 device(s).
[    6.554922] NVRM: None of the NVIDIA devices were initialized.
[    6.821212] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:
               NVRM: BAR0 is 0M @ 0x0 (PCI:0000:01:00.0)
[    6.821283] NVRM: The NVIDIA probe routine failed for 1 device(s).
"""
# illinois-scicomp/machine-shop-maintenance#70 (a case): Debian's nvidia-smi package is the user-space release
MISMATCH = "user@gpubox:~$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
DEBIAN_VERSIONS = """user@gpubox:~$ cat /proc/driver/nvidia/version
NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
user@gpubox:~$ dpkg -l nvidia-smi
Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)
||/ Name           Version      Architecture Description
+++-==============-============-============-==================================
ii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface
"""


def _roots(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", text) for i, text in enumerate(texts)])
    return fold(run_checks(snapshot).findings)


def test_a_bar_failure_explains_the_probe_failure_it_causes() -> None:
    roots = _roots(BAR_THEN_PROBE)
    assert roots[0].finding.code == "GH304"
    assert "GH305" in [f.code for f in roots[0].symptoms]
    assert all(cause.finding.code != "GH305" for cause in roots)


def test_a_probe_failure_without_a_bar_message_still_leads() -> None:
    roots = _roots("\n".join(line for line in BAR_THEN_PROBE.splitlines() if "BAR0" not in line
                             and "I/O region" not in line) + "\n")
    assert roots[0].finding.code == "GH305"


def test_debian_nvidia_smi_package_gives_the_user_space_version() -> None:
    lead = _roots(MISMATCH, DEBIAN_VERSIONS)[0].finding
    assert lead.code == "GH202"
    assert "kernel module 520.56.06, user space 525.85.12" in lead.message


def test_a_non_driver_version_of_a_package_named_nvidia_smi_is_not_a_driver_version() -> None:
    listing = DEBIAN_VERSIONS.replace("525.85.12-1 ", "1.0.2-1     ")
    lead = _roots(MISMATCH, listing)[0].finding
    assert lead.code == "GH202" and "user space not shown" in lead.message


@pytest.mark.parametrize("line", [
    # NVIDIA/open-gpu-kernel-modules#255 (Fedora 36, building the open modules by hand)
    "make[2]: *** /lib/modules/5.17.8-300.fc36.x86_64/build: No such file or directory.  Stop.",
    # lwfinger/rtw88#90: the maintainer: 'You have not installed the kernel headers'
    "make[1]: *** /lib/modules/5.17.5-300.fc36.x86_64/build: No such file or directory.  Stop.",
])
def test_a_missing_kernel_build_tree_is_kernel_headers_missing(line: str) -> None:
    sig = match_line(line)
    assert sig is not None and sig.id == "kbuild-modules-build-dir-missing" and sig.code == "GH503"


@pytest.mark.parametrize("line", [
    "make[2]: Entering directory '/lib/modules/5.17.8-300.fc36.x86_64/build'",
    "ls: cannot access '/lib/modules/5.17.8-300.fc36.x86_64/kernel/drivers/video/nvidia.ko': No such file or directory",
])
def test_near_misses_are_not_a_missing_build_tree(line: str) -> None:
    sig = match_line(line)
    assert sig is None or sig.id != "kbuild-modules-build-dir-missing"
