"""/proc/driver/nvidia/version and gpus/<bdf>/information parsers: corpus, hand-written banners, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import DriverInfo, ParseError
from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version, parse_proc_gpu_information

VERSION_FILES = corpus_files("**/proc_driver_nvidia_version*")
INFORMATION_FILES = corpus_files("**/proc_driver_nvidia_gpus_*information*")
PARAMS_FILES = corpus_files("**/proc_driver_nvidia_params*")
BUG = CORPUS / "nvidia-bug-report-352.63"


def test_corpus_has_proc_files():
    assert VERSION_FILES and INFORMATION_FILES


@pytest.mark.parametrize("path", VERSION_FILES, ids=corpus_id)
def test_version_corpus_file_parses(path: Path):
    info = parse_proc_driver_version(path.read_text(errors="replace"))
    assert info.version and info.version[0].isdigit()
    assert info.flavour in ("open", "proprietary")
    assert info.banner and info.banner.startswith("NVIDIA UNIX")


@pytest.mark.parametrize("path", INFORMATION_FILES, ids=corpus_id)
def test_information_corpus_file_parses(path: Path):
    info = parse_proc_gpu_information(path.read_text(errors="replace"))
    assert info.get("Model")
    assert info.get("Bus Location")


@pytest.mark.parametrize("path", PARAMS_FILES, ids=corpus_id)
def test_params_file_is_not_gpu_information(path: Path):
    with pytest.raises(ParseError):
        parse_proc_gpu_information(path.read_text(errors="replace"))


def test_352_banner():
    info = parse_proc_driver_version((BUG / "proc_driver_nvidia_version.txt").read_text())
    assert info == DriverInfo(
        version="352.63",
        flavour="proprietary",
        banner="NVIDIA UNIX x86_64 Kernel Module  352.63  Sat Nov  7 21:25:42 PST 2015",
        compiler="gcc version 5.2.1 20151028 (Ubuntu 5.2.1-23ubuntu1~15.10)",
    )


def test_352_information():
    info = parse_proc_gpu_information((BUG / "proc_driver_nvidia_gpus_0000_06_00.0_information.txt").read_text())
    assert info["Model"] == "GeForce GTX TITAN X"
    assert info["IRQ"] == "52"
    assert info["GPU UUID"] == "GPU-465c200a-55e4-f8cd-421f-dba04acf20bf"
    assert info["Video BIOS"] == "84.00.1f.00.90"
    assert info["Bus Location"] == "0000:06:00.0"
    assert info["DMA Mask"] == "0xffffffffff"


# Hand-written banners in the shapes the driver prints (the corpus has only a 352 proprietary one).
OPEN_X86 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:35:42 UTC 2024\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
OPEN_ARM = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build  "
    "(dvs-builder@U16-I2-C03-12-4)  Wed Feb 26 01:48:04 UTC 2025\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
)
PROPRIETARY_ARM = (
    "NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.129.03  Thu Oct 19 18:42:12 UTC 2023\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n"
)
DMESG_LOAD = "[    5.123456] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"


@pytest.mark.parametrize(
    ("text", "version", "flavour", "compiler"),
    [
        (OPEN_X86, "550.90.07", "open", "gcc version 12.2.0 (Debian 12.2.0-14)"),
        (OPEN_ARM, "570.124.06", "open", "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"),
        (PROPRIETARY_ARM, "535.129.03", "proprietary", "gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)"),
        (DMESG_LOAD, "550.54.15", "proprietary", None),
    ],
)
def test_hand_written_banners(text: str, version: str, flavour: str, compiler: str | None):
    info = parse_proc_driver_version(text)
    assert (info.version, info.flavour, info.compiler) == (version, flavour, compiler)
    assert info.banner is not None and version in info.banner


def test_information_newer_keys():
    # Hand-written: a 5xx-era information file (Device Minor, GPU Excluded, Firmware).
    text = (
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-????????-????-????-????-????????????\n"
        "Video BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
        "Bus Location: \t 0000:19:00.0\nDevice Minor: \t 0\nGPU Firmware: \t 550.90.07\nGPU Excluded:\t No\n"
    )
    info = parse_proc_gpu_information(text)
    assert info["Model"] == "NVIDIA H100 80GB HBM3"
    assert info["Device Minor"] == "0"
    assert info["GPU Excluded"] == "No"


@pytest.mark.parametrize("text", ["", "hello\n", "NVRM version:\n", "GCC version: gcc 12\n"])
def test_not_a_version_file(text: str):
    with pytest.raises(ParseError):
        parse_proc_driver_version(text)


@pytest.mark.parametrize("text", ["", "hello\n", "Foo: bar\n"])
def test_not_an_information_file(text: str):
    with pytest.raises(ParseError):
        parse_proc_gpu_information(text)


# --------------------------------------------------------------------------- fuzzing

_TEXTS = [p.read_text(errors="replace") for p in VERSION_FILES + INFORMATION_FILES] + [OPEN_X86, OPEN_ARM]




test_fuzz_random_text, test_fuzz_mutated_corpus = fuzz_tests(
    only_parse_errors(parse_proc_driver_version, parse_proc_gpu_information), _TEXTS)
