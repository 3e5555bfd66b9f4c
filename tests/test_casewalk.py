"""Rules added while walking new real threads (casewalk): each on its real line and on a near miss."""

from __future__ import annotations

import pytest

from gpuhealth.knowledge.fixes import fixes_of
from gpuhealth.knowledge.signatures import match_line


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
