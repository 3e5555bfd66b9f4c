"""Version banners read line by line (parsers/banners.py): each program's line, and lines that only look like one.

Hand-written examples in the forms the programs print (the module's docstring names where each form is defined);
the versions are chosen by hand.
"""

from __future__ import annotations

import pytest

from gpuhealth.model import ParseError
from gpuhealth.parsers.banners import read_banners


def _one(line: str) -> tuple[str, dict[str, str]]:
    banners = read_banners(line)
    assert len(banners) == 1, banners
    return banners[0].program, dict(banners[0].values)


@pytest.mark.parametrize(("line", "program", "values"), [
    ("Cuda compilation tools, release 10.0, V10.0.130", "nvcc --version", {"release": "10.0", "version": "10.0.130"}),
    ("Cuda compilation tools, release 12.4, V12.4.131", "nvcc --version", {"release": "12.4", "version": "12.4.131"}),
    ("Cuda compilation tools, release 5.5, V5.5.0", "nvcc --version", {"release": "5.5", "version": "5.5.0"}),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.54  Tue Aug 14 22:29:16 PDT 2018",
     "/proc/driver/nvidia/version", {"version": "396.54", "flavour": "proprietary"}),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  (dvs-builder@U16-I3-B03-4-3)",
     "/proc/driver/nvidia/version", {"version": "550.90.07", "flavour": "open"}),
    ("NVRM version:   535.104.05", "nvidia-container-cli info", {"version": "535.104.05"}),
    ("| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |", "nvidia-smi",
     {"driver": "535.104.05", "cuda": "12.2"}),
    ("NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2", "nvidia-smi",
     {"driver": "535.104.05", "cuda": "12.2"}),
    ("| NVIDIA-SMI 396.54                 Driver Version: 396.54                    |", "nvidia-smi",
     {"driver": "396.54"}),
    ("| NVIDIA-SMI 610.12     KMD Version: 610.12     CUDA UMD Version: 13.2     |", "nvidia-smi",
     {"driver": "610.12", "cuda": "13.2"}),
    ("| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: N/A |", "nvidia-smi",
     {"driver": "535.104.05"}),
    ("Driver Version                            : 535.104.05", "nvidia-smi -q", {"driver": "535.104.05"}),
    ("Driver Version : 535.104.05", "nvidia-smi -q", {"driver": "535.104.05"}),
    ("Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld "
     "(GNU Binutils for Ubuntu) 2.38) #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023", "/proc/version",
     {"release": "5.15.0-91-generic", "compiler": "gcc 11.4.0"}),
    ("Linux version 3.10.0-1160.el7.x86_64 (mockbuild@kbuilder.bsys.centos.org) (gcc version 4.8.5 20150623 "
     "(Red Hat 4.8.5-44) (GCC) ) #1 SMP Mon Oct 19 16:18:59 UTC 2020", "/proc/version",
     {"release": "3.10.0-1160.el7.x86_64", "compiler": "gcc 4.8.5"}),
    ("Linux gpu01 5.15.0-91-generic #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023 x86_64 x86_64 x86_64 GNU/Linux",
     "uname -a", {"release": "5.15.0-91-generic", "arch": "x86_64"}),
    ("Linux box 6.6.7-arch1-1 #1 SMP PREEMPT_DYNAMIC Thu, 14 Dec 2023 03:45:42 +0000 x86_64 GNU/Linux", "uname -a",
     {"release": "6.6.7-arch1-1", "arch": "x86_64"}),
    ("gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0", "gcc --version", {"version": "11.4.0"}),
    ("gcc (GCC) 4.8.5 20150623 (Red Hat 4.8.5-44)", "gcc --version", {"version": "4.8.5"}),
    ("cc (Debian 12.2.0-14) 12.2.0", "gcc --version", {"version": "12.2.0"}),
    ("x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0", "gcc --version", {"version": "12.3.0"}),
    ("torch                    2.1.0+cu121", "pip list", {"version": "2.1.0+cu121"}),
    ("torch 2.1.0+cu121", "pip list", {"version": "2.1.0+cu121"}),
    ("torch  2.2.0.dev20231010+cu121  /home/me/src/pytorch", "pip list", {"version": "2.2.0.dev20231010+cu121"}),
    ("[pip3] torch==1.13.1", "pip freeze", {"version": "1.13.1"}),
    ("PyTorch version: 2.1.0+cu121", "collect_env", {"torch": "2.1.0+cu121"}),
    ("Is CUDA available: False", "collect_env", {"available": "false"}),
    ("Is CUDA available: True", "collect_env", {"available": "true"}),
    ("CUDA used to build PyTorch: 12.1", "collect_env", {"torch_cuda": "12.1"}),
])
def test_each_program_line_is_read(line, program, values):
    found, read = _one(line)
    assert found == program
    assert values.items() <= read.items()


@pytest.mark.parametrize("line", [
    "I use CUDA 10.0",  # a sentence quoting a version: the prose reader's
    "My nvcc says Cuda compilation tools, release 10.0, V10.0.130",  # quoted inside a sentence
    "Cuda compilation tools, release 10.0 was installed yesterday",
    "NVRM version: whatever the driver is",
    "CUDA Version: 12.2",  # an issue template's field a person fills in, not -q's padded key
    "Driver Version: 535.104.05",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "Linux version 5.15 is what I run",
    "Linux is great 5.15.0 #1 for me",
    "gcc (the compiler) 11 is too old",
    "I installed gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 today",
    "nvcc (NVIDIA) 12.1.105",
    "g++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0",
    "torch 2.1.0 broke my build",
    "torchvision              0.16.0+cu121",
    "- torch 2.1.0",
    "torch 2.1.0",  # one space and no wheel tag: a person's list as likely as pip's row
    "torch==2.1.0+cu121",  # a requirements file's pin as likely as pip freeze's line
    "PyTorch version: Could not collect",
    "CUDA used to build PyTorch: None",
    "Is CUDA available: maybe",
    "Kernel driver in use: nvidia",  # names no device without lspci's line above it
])
def test_a_line_that_only_looks_like_a_banner_is_not_read(line):
    assert read_banners(line) == ()


def test_the_driver_compiler_line_is_read_only_after_its_version_line():
    text = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.54  Tue Aug 14 22:29:16 PDT 2018\n"
            "GCC version:  gcc version 7.3.0 (Ubuntu 7.3.0-16ubuntu3)\n")
    (banner,) = read_banners(text)
    assert banner.value("compiler") == "gcc version 7.3.0 (Ubuntu 7.3.0-16ubuntu3)"
    assert read_banners("GCC version:  gcc version 7.3.0 (Ubuntu 7.3.0-16ubuntu3)\n") == ()


def test_smi_query_cuda_version_is_read_only_beside_its_driver_version():
    """nvidia-smi -q prints both; a lone "CUDA Version : 12.2" may be a toolkit a person names."""
    assert read_banners("CUDA Version                              : 12.2\n") == ()
    both = read_banners("Driver Version                            : 535.104.05\n"
                        "CUDA Version                              : 12.2\n")
    assert [dict(b.values) for b in both] == [{"driver": "535.104.05"}, {"cuda": "12.2"}]


def test_banners_among_prose_keep_their_order_and_line_numbers():
    text = ("The job fails on our node.\n\n"
            "    Cuda compilation tools, release 10.0, V10.0.130\n"
            "and the driver:\n"
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.54  Tue Aug 14 22:29:16 PDT 2018\n")
    banners = read_banners(text)
    assert [(b.index, b.program) for b in banners] == [(2, "nvcc --version"), (4, "/proc/driver/nvidia/version")]


def test_a_long_line_is_no_banner_and_costs_little():
    assert read_banners("Cuda compilation tools, release 10.0, V10.0.130" + " " * 500 + "x") == ()
    assert read_banners("gcc (" * 50_000) == ()


def test_not_text_is_a_parse_error():
    with pytest.raises(ParseError):
        read_banners(b"Cuda compilation tools")  # type: ignore[arg-type]
