"""parse_smi_table against every default ``nvidia-smi`` table in the corpus, edge cases, fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError, normalize_pci_address
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.smi_table import parse_smi_table

TABLE_FILES = corpus_files(
    "azhpc-diagnostics/nvidia-smi_*.out", "gpud/accelerator_nvidia_query__nvidia-smi.*"
)
BUNDLES = corpus_files("nvidia-gpu-exporter/linux-*.txt")
_BUS_ID = re.compile(r"^\|.*?\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b", re.MULTILINE)


def _bundle_tables() -> list:
    params = []
    for path in BUNDLES:
        sections = split_capture_bundle(path.read_text())
        for key in ("nvidia-smi", "load :: nvidia-smi"):
            if key in sections:
                params.append(pytest.param(sections[key], id=f"{corpus_id(path)}::{key}"))
    return params


BUNDLE_TABLES = _bundle_tables()
ALL_TABLES = [pytest.param(p.read_text(), id=corpus_id(p)) for p in TABLE_FILES] + BUNDLE_TABLES


def parse(name: str):
    return parse_smi_table((CORPUS / name).read_text())


def bundle_table(fragment: str, key: str = "nvidia-smi"):
    path = next(p for p in BUNDLES if fragment in p.name)
    return parse_smi_table(split_capture_bundle(path.read_text())[key])


def test_corpus_has_tables():
    assert len(TABLE_FILES) >= 3 and len(BUNDLE_TABLES) >= 16


@pytest.mark.parametrize("text", ALL_TABLES)
def test_every_table_parses_with_the_gpus_it_shows(text: str):
    report = parse_smi_table(text)
    shown = _BUS_ID.findall(text)
    assert report.format == "table"
    assert report.driver_version and report.cuda_version
    assert [g.pci_address for g in report.gpus] == [normalize_pci_address(s) for s in shown]
    assert [g.index for g in report.gpus] == list(range(len(shown)))
    for gpu in report.gpus:
        assert gpu.name and gpu.driver_version == report.driver_version
        assert gpu.memory_total_mib and gpu.memory_used_mib is not None
        assert gpu.temperature_c and gpu.power_draw_w and gpu.power_limit_w
        assert gpu.compute_mode in ("Default", "Exclusive_Process")
        assert gpu.persistence_mode is not None


def test_old_layout_with_inforom_warning():
    report = parse("azhpc-diagnostics/nvidia-smi_8xV100-SXM2_460.32.03_inforom-corrupted.out")
    assert (report.driver_version, report.cuda_version) == ("460.32.03", "11.2")
    assert len(report.gpus) == 8
    assert {g.name for g in report.gpus} == {"Tesla V100-SXM2..."}  # truncated, kept as printed
    assert [g.pci_address for g in report.gpus] == [f"000{i}:00:00.0" for i in range(1, 9)]
    assert report.warnings == ("WARNING: infoROM is corrupted at gpu 0008:00:00.0",)
    # The warning's 4-digit domain names the table's 00000008:00:00.0, which is GPU 7.
    assert [g.index for g in report.gpus if g.inforom_corrupted] == [7]
    assert all(g.inforom_corrupted is None for g in report.gpus[:7])
    first = report.gpus[0]
    assert (first.temperature_c, first.power_draw_w, first.power_limit_w) == (40.0, 43.0, 300.0)
    assert (first.memory_used_mib, first.memory_total_mib) == (0.0, 32510.0)
    assert (first.persistence_mode, first.ecc_volatile_uncorrected, first.utilization_gpu_pct) == (False, 0, 0.0)
    assert (first.fan_speed_pct, first.fan_error, first.mig_mode_current) == (None, None, None)
    assert first.processes == () and first.mig_devices == 0


def test_fan_err_and_exclusive_process():
    report = parse("gpud/accelerator_nvidia_query__nvidia-smi.525.125.06.out.0.valid")  # no final newline
    (gpu,) = report.gpus
    assert (gpu.fan_error, gpu.fan_speed_pct) == (True, None)
    assert gpu.compute_mode == "Exclusive_Process"  # printed "E. Process"
    assert gpu.name == "NVIDIA GeForce ..."
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.power_limit_w) == (2021.0, 23028.0, 450.0)


def test_new_layout_eight_h100():
    report = parse("gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid")
    assert (report.driver_version, report.cuda_version) == ("550.90.07", "12.4")
    assert [g.pci_address for g in report.gpus] == [
        "0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
        "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0"]
    assert {g.name for g in report.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g.mig_mode_current for g in report.gpus} == {"Disabled"}
    assert all(g.persistence_mode and g.memory_total_mib == 81559.0 for g in report.gpus)


def test_driver_610_kmd_header_and_processes():
    report = bundle_table("rtx-2080-super__610", "load :: nvidia-smi")
    assert (report.driver_version, report.cuda_version) == ("610.57.04", "13.3")
    (gpu,) = report.gpus
    assert gpu.name == "NVIDIA GeForce RTX 2080 ..."
    assert (gpu.fan_speed_pct, gpu.fan_error, gpu.utilization_gpu_pct) == (38.0, False, 8.0)
    assert [(p.pid, p.name, p.used_memory_mib) for p in gpu.processes] == [
        (1720, "/usr/bin/gnome-shell", 173.0), (4556, "/usr/bin/Xwayland", 3.0),
        (28511, "ffmpeg", 230.0), (28512, "ffmpeg", 370.0)]


def test_combined_process_type():
    (gpu,) = bundle_table("rtx-4080-super").gpus
    assert (gpu.fan_speed_pct, gpu.fan_error) == (0.0, False)
    assert gpu.processes[0].pid == 2165 and gpu.processes[0].name == "/usr/bin/kwin_wayland"  # "C+G"


@pytest.mark.parametrize(("fragment", "devices"), [("h100-mig", 4), ("h200-mig", 5)])
def test_mig_devices_counted(fragment: str, devices: int):
    for key in ("nvidia-smi", "load :: nvidia-smi"):
        (gpu,) = bundle_table(fragment, key).gpus
        assert (gpu.mig_mode_current, gpu.mig_devices) == ("Enabled", devices)
        assert gpu.utilization_gpu_pct is None  # N/A in MIG mode
        assert gpu.ecc_volatile_uncorrected == 0  # the GPU row says "On"; the MIG rows count 0 each


def test_mig_processes_attach_to_their_gpu():
    (gpu,) = bundle_table("h200-mig", "load :: nvidia-smi").gpus
    assert [(p.pid, p.used_memory_mib) for p in gpu.processes] == [(12249, 2194.0), (12250, 1170.0),
                                                                   (12267, 13526.0)]


def test_without_the_mig_row_of_pre_450_tables():
    text = (CORPUS / "azhpc-diagnostics/nvidia-smi_8xV100-SXM2_460.32.03_inforom-corrupted.out").read_text()
    old = "\n".join(line for line in text.splitlines() if not re.fullmatch(r"\|\s+\|\s+\|\s+(N/A|MIG M\.) \|", line))
    report = parse_smi_table(old)
    assert len(report.gpus) == 8 and report.gpus[7].inforom_corrupted
    assert {g.mig_devices for g in report.gpus} == {None}


def test_process_rows_without_gi_ci_columns():
    text = (CORPUS / "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid").read_text()
    text = text.replace("|  No running processes found", "|    3      4242      C   python3     1234MiB        ")
    gpu = parse_smi_table(text).gpus[3]
    assert [(p.pid, p.name, p.used_memory_mib) for p in gpu.processes] == [(4242, "python3", 1234.0)]


def test_repeated_tables_keep_the_last():
    text = (CORPUS / "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid").read_text()
    later = text.replace("72W /  700W", "99W /  700W")
    report = parse_smi_table(f"{text}\n{later}")  # what "nvidia-smi -l 1" prints
    assert len(report.gpus) == 8 and report.gpus[0].power_draw_w == 99.0


def test_error_lines_outside_the_boxes_are_warnings_but_the_timestamp_is_not():
    text = (CORPUS / "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid").read_text()
    assert parse_smi_table(text).warnings == ()  # starts with "Mon Jan 20 10:18:26 2025"
    lost = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"
    assert parse_smi_table(f"{lost}\n{text}").warnings == (lost,)


@pytest.mark.parametrize(("text", "reason"), [
    ("", "no 'NVIDIA-SMI"),
    ("No devices were found\n", "no 'NVIDIA-SMI"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no 'NVIDIA-SMI"),
    # a header with its driver version is read without GPUs (tests/test_cuda_driver_pastes.py); without one,
    # nothing is known
    ("| NVIDIA-SMI 550.90.07                                  |\n", "no GPU rows"),
])
def test_bad_input_raises_parse_error(text: str, reason: str):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_smi_table(text)


def test_incomplete_gpu_box_raises_parse_error():
    text = (CORPUS / "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid").read_text()
    cut = text.index("| N/A   27C")
    with pytest.raises(ParseError, match="incomplete GPU box"):
        parse_smi_table(text[:cut])


@pytest.mark.parametrize("name", [
    "nvidia-bug-report-352.63/nvidia-smi_-q.txt",
    "netdata-go.d-nvidia-smi/tesla-p100.csv",
    "gpud/nvidia-query__nvidia-smi.nvlink.status.a100",
])
def test_other_formats_are_not_tables(name: str):
    with pytest.raises(ParseError):
        parse(name)


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.values[0] for p in ALL_TABLES][:8] or ["| NVIDIA-SMI 1 Driver Version: 1 |"]
_TABLE_ALPHABET = st.sampled_from(list("|+-= \n0123456789:.%/WCMiBNAPOnf") + ["ERR!", "N/A", "MiB", "Off"])


_parse_or_parse_error = only_parse_errors(parse_smi_table)
test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(_parse_or_parse_error, _SAMPLES)


@FUZZ
@given(st.lists(_TABLE_ALPHABET, max_size=400).map("".join))
def test_fuzz_table_like_text(text: str):
    _parse_or_parse_error(text)

