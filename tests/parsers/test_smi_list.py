"""parse_smi_list against every ``nvidia-smi -L`` output in the corpus, edge cases, fuzzing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.smi_list import parse_smi_list

LIST_FILES = corpus_files("nvidia-gpu-exporter/list_gpus*.txt")
MIXED_FILES = corpus_files("nvidia-gpu-exporter/output_*.txt")  # "# <command>" then its output
BUNDLES = corpus_files("nvidia-gpu-exporter/linux-*.txt")


def _commented_section(path: Path, command: str) -> str:
    text = path.read_text()
    start = text.index("\n", text.index(f"# nvidia-smi {command}")) + 1
    return text[start:].split("\n\n", 1)[0] + "\n"


def _bundle_list(path: Path) -> str:
    return split_capture_bundle(path.read_text())["nvidia-smi -L"]


ALL_LISTS = (
    [pytest.param(p.read_text(), id=corpus_id(p)) for p in LIST_FILES]
    + [pytest.param(_commented_section(p, "--list-gpus"), id=corpus_id(p)) for p in MIXED_FILES]
    + [pytest.param(_bundle_list(p), id=corpus_id(p)) for p in BUNDLES]
)


def test_corpus_has_lists():
    assert len(ALL_LISTS) >= 10


@pytest.mark.parametrize("text", ALL_LISTS)
def test_every_list_parses_with_its_gpus_and_mig_devices(text: str):
    report = parse_smi_list(text)
    gpu_lines = re.findall(r"^GPU \d+: ", text, re.MULTILINE)
    assert report.format == "list" and len(report.gpus) == len(gpu_lines)
    assert [g.index for g in report.gpus] == list(range(len(gpu_lines)))
    assert all(g.name and g.uuid and g.uuid.startswith("GPU-") for g in report.gpus)
    assert sum(g.mig_devices for g in report.gpus) == len(re.findall(r"^\s+MIG ", text, re.MULTILINE))


def test_eight_h100_with_seven_mig_devices_each():
    report = parse_smi_list((CORPUS / "nvidia-gpu-exporter/list_gpus_8xH100_mig.txt").read_text())
    assert len(report.gpus) == 8
    assert {g.name for g in report.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g.mig_devices for g in report.gpus} == {7}
    assert report.gpus[0].uuid == "GPU-63d1e50a-b952-d15c-0740-12bc14859142"
    assert report.gpus[7].uuid == "GPU-882ebfab-da98-c41e-357c-47272c0d560d"
    assert report.gpus[0].source == "nvidia-smi -L"


def test_465_list_and_mig_bundles():
    (gpu,) = parse_smi_list(_commented_section(CORPUS / "nvidia-gpu-exporter/output_ubuntu_20.04_v465.27.txt",
                                               "--list-gpus")).gpus
    assert (gpu.name, gpu.uuid, gpu.mig_devices) == ("NVIDIA GeForce RTX 2080 SUPER",
                                                     "GPU-1937b558-347d-0f30-105b-893b98985668", 0)
    mig = {p.name.split("__")[1]: parse_smi_list(_bundle_list(p)).gpus[0].mig_devices for p in BUNDLES}
    if mig:
        assert (mig["nvidia-h100-mig"], mig["nvidia-h200-mig"], mig["nvidia-h200"]) == (4, 5, 0)


def test_gpu_line_without_uuid_and_warning():
    report = parse_smi_list("GPU 0: Tesla K80\nWARNING: infoROM is corrupted at gpu 0000:04:00.0\n")
    assert (report.gpus[0].name, report.gpus[0].uuid) == ("Tesla K80", None)
    assert report.warnings == ("WARNING: infoROM is corrupted at gpu 0000:04:00.0",)


@pytest.mark.parametrize(("text", "reason"), [
    ("", "no 'GPU n"),
    ("No devices were found\n", "not nvidia-smi -L output"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "not nvidia-smi -L"),
    ("  MIG 1g.10gb     Device  0: (UUID: MIG-4d0efb7d-0970-51d9-b761-0686be6b8af3)\n", "before any GPU"),
    ("GPU 0: A (UUID: GPU-1)\n\t Link 0: 25 GB/s\n", "not nvidia-smi -L output"),
])
def test_bad_input_raises_parse_error(text: str, reason: str):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_smi_list(text)


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.values[0] for p in ALL_LISTS][:6] or ["GPU 0: A (UUID: GPU-1)\n"]


test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(only_parse_errors(parse_smi_list), _SAMPLES)

