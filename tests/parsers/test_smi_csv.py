"""parse_smi_csv against every ``--query-gpu --format=csv`` output in the corpus, edge cases, fuzzing."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, fuzz_tests, only_parse_error
from gpuhealth.model import ParseError, normalize_pci_address
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.smi_csv import parse_smi_csv

CSV_FILES = corpus_files("netdata-go.d-nvidia-smi/*.csv")
MIXED_FILES = corpus_files("nvidia-gpu-exporter/output_*.txt")  # "# <command>" then its output
BUNDLES = corpus_files("nvidia-gpu-exporter/linux-*.txt")
REASONS = {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
           "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"}


def _commented_section(path: Path, command: str) -> str:
    """The output after a ``# nvidia-smi <command>...`` line, up to the next blank line."""
    text = path.read_text()
    start = text.index("\n", text.index(f"# nvidia-smi {command}")) + 1
    return text[start:].split("\n\n", 1)[0] + "\n"


def _all_csvs() -> list:
    params = [pytest.param(p.read_text(), id=corpus_id(p)) for p in CSV_FILES]
    params += [pytest.param(_commented_section(p, "--query-gpu"), id=corpus_id(p)) for p in MIXED_FILES]
    for path in BUNDLES:
        for key, text in split_capture_bundle(path.read_text()).items():
            if key.split(" :: ")[-1].startswith("nvidia-smi --query-gpu="):
                params.append(pytest.param(text, id=f"{corpus_id(path)}::{key[:30]}"))
    return params


ALL_CSVS = _all_csvs()


def _rows(text: str) -> list[dict[str, str]]:
    """The CSV as the csv module reads it, header units stripped: the reference to compare with."""
    rows = [[v.strip() for v in row] for row in csv.reader(io.StringIO(text)) if row]
    names = [re.sub(r"\s*\[.*\]$", "", n) for n in rows[0]]
    return [dict(zip(names, row, strict=True)) for row in rows[1:]]


def bundle_csv(fragment: str, phase: str = "idle"):
    path = next(p for p in BUNDLES if fragment in p.name)
    sections = split_capture_bundle(path.read_text())
    prefix = "load :: nvidia-smi --query-gpu=" if phase == "load" else "nvidia-smi --query-gpu="
    text = next(v for k, v in sections.items() if k.startswith(prefix))
    return parse_smi_csv(text), _rows(text)[0]


def test_corpus_has_csvs():
    assert len(ALL_CSVS) >= 18


@pytest.mark.parametrize("text", ALL_CSVS)
def test_every_csv_parses_one_gpu_per_row(text: str):
    report = parse_smi_csv(text)
    rows = _rows(text)
    assert report.format == "csv" and len(report.gpus) == len(rows)
    for gpu, row in zip(report.gpus, rows, strict=True):
        assert gpu.name == row["name"] and gpu.uuid == row["uuid"]
        assert gpu.memory_used_mib is not None
        assert (gpu.utilization_gpu_pct is None) == (gpu.mig_mode_current == "Enabled")  # [N/A] under MIG
        if "pci.bus_id" in row:
            assert gpu.pci_address == normalize_pci_address(row["pci.bus_id"])
            assert gpu.index == int(row["index"]) and gpu.driver_version == report.driver_version
        assert set(gpu.clock_event_reasons) <= REASONS


def test_p100_nounits():
    report = parse_smi_csv((CORPUS / "netdata-go.d-nvidia-smi/tesla-p100.csv").read_text())
    (gpu,) = report.gpus
    assert gpu.name == "Tesla P100-PCIE-16GB"
    assert gpu.uuid == "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"
    assert gpu.fan_speed_pct is None  # [N/A]
    assert (gpu.temperature_c, gpu.power_draw_w, gpu.memory_used_mib) == (37.0, 28.16, 0.0)
    assert report.driver_version is None  # not queried


def test_noheader_needs_fields():
    text = (CORPUS / "netdata-go.d-nvidia-smi/tesla-p100.csv").read_text()
    header, data = text.split("\n", 1)
    fields = [f.strip() for f in header.split(",")]
    assert parse_smi_csv(data, fields) == parse_smi_csv(text)
    assert parse_smi_csv(text, fields) == parse_smi_csv(text)  # a header that matches is skipped
    assert parse_smi_csv(data, ",".join(fields)) == parse_smi_csv(text)  # the --query-gpu= argument
    with pytest.raises(ParseError, match="pass fields="):
        parse_smi_csv(data)
    with pytest.raises(ParseError, match="values for"):
        parse_smi_csv(data, fields[:-1])


def test_465_old_throttle_reason_names():
    text = _commented_section(CORPUS / "nvidia-gpu-exporter/output_ubuntu_20.04_v465.27.txt", "--query-gpu")
    (gpu,) = parse_smi_csv(text).gpus
    assert gpu.clock_event_reasons == ("gpu_idle",)  # clocks_throttle_reasons.gpu_idle: Active
    assert (gpu.name, gpu.driver_version, gpu.pci_address) == ("NVIDIA GeForce RTX 2080 SUPER", "465.27",
                                                               "0000:0c:00.0")
    assert (gpu.pci_device_id, gpu.vbios_version, gpu.serial) == ("1e81", "90.04.7A.40.73", None)
    assert (gpu.fan_speed_pct, gpu.memory_total_mib, gpu.memory_used_mib) == (38.0, 7979.0, 344.0)
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (1, 3, 16, 16)
    assert (gpu.persistence_mode, gpu.power_limit_w, gpu.power_default_limit_w) == (False, 250.0, 250.0)
    assert gpu.ecc_mode_current is None and gpu.retired_pages_pending is None  # [N/A]
    assert gpu.memory_temperature_c is None  # "N/A" without brackets


def test_h100_590_fields():
    report, row = bundle_csv("h100-80gb")
    (gpu,) = report.gpus
    assert report.driver_version == "590.48.01"
    assert gpu.clock_event_reasons == ("gpu_idle",)
    assert gpu.power_draw_w == float(row["power.draw.instant"].split()[0])  # instant wins, as in -q/XML
    assert (gpu.power_limit_w, gpu.temperature_c, gpu.memory_temperature_c) == (700.0, 41.0, 48.0)
    assert (gpu.ecc_mode_current, gpu.ecc_volatile_uncorrected, gpu.ecc_aggregate_corrected) == ("Enabled", 0, 0)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure, gpu.remapped_rows_uncorrectable) == (False, False, 0)
    assert (gpu.recovery_action, gpu.mig_mode_current, gpu.persistence_mode) == ("None", "Disabled", True)
    assert (gpu.pci_device_id, gpu.serial, gpu.pcie_gen_current) == ("2330", "0000000000000", 5)
    assert gpu.fan_speed_pct is None and gpu.source == "nvidia-smi --query-gpu"
    load, _ = bundle_csv("h100-80gb", "load")
    assert load.gpus[0].clock_event_reasons == () and load.gpus[0].utilization_gpu_pct == 100.0


def test_610_kmd_version_and_mig():
    report, _ = bundle_csv("rtx-2080-super__610")
    assert report.driver_version == report.gpus[0].driver_version == "610.57.04"
    gpu = bundle_csv("h200-mig")[0].gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending, gpu.utilization_gpu_pct) == ("Enabled", "Enabled", None)


@pytest.mark.parametrize("text", [p for p in ALL_CSVS if "active" in p.values[0]])
def test_reason_columns_agree_with_the_active_bit_mask(text: str):
    """Decoding only ``.active`` gives the reasons the per-reason columns say are Active."""
    for gpu, row in zip(parse_smi_csv(text).gpus, _rows(text), strict=True):
        name = next(k for k in row if k.endswith("_reasons.active"))
        (mask_only,) = parse_smi_csv(f"{name}\n{row[name]}\n").gpus
        assert mask_only.clock_event_reasons == gpu.clock_event_reasons


def test_sw_power_cap_at_idle():
    assert bundle_csv("rtx-2080-super__595")[0].gpus[0].clock_event_reasons == ("sw_power_cap",)


def test_placeholders_and_absurd_numbers():
    text = "index, name, fan.speed [%], memory.used [MiB], ecc.errors.uncorrected.volatile.total\n"
    text += f"{'9' * 5000}, [Not Supported], [Unknown Error], [Requested functionality has been deprecated], 2\n"
    (gpu,) = parse_smi_csv(text).gpus
    assert (gpu.index, gpu.name, gpu.fan_speed_pct, gpu.memory_used_mib) == (None, None, None, None)
    assert gpu.ecc_volatile_uncorrected == 2


def test_several_gpus():
    text = "index, pci.bus_id, temperature.gpu\n0, 00000001:00:00.0, 30\n1, 00000002:00:00.0, 31\n"
    report = parse_smi_csv(text)
    assert [(g.index, g.pci_address, g.temperature_c) for g in report.gpus] == [
        (0, "0001:00:00.0", 30.0), (1, "0002:00:00.0", 31.0)]


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ("\n\n", "empty"),
    ("No devices were found\n", "not a --query-gpu header"),
    ("timestamp, count\n2026/01/01 00:00:00.000, 1\n", "no --query-gpu field"),
    ("index, name\n0\n", "values for 2 fields"),
    ("pid, process_name, used_gpu_memory [MiB]\n1, x, 3 MiB\n", "per-process"),
    ("index, name\n0, " + "x" * 200_000 + "\n", "unreadable CSV"),  # over the csv module's field limit
])
def test_bad_input_raises_parse_error(text: str, reason: str):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_smi_csv(text)


def test_compute_apps_csv_is_not_query_gpu():
    path = next(iter(BUNDLES), None)
    if path is None:
        pytest.skip("no capture bundles")
    sections = split_capture_bundle(path.read_text())
    text = next(v for k, v in sections.items() if k.startswith("nvidia-smi --query-compute-apps="))
    with pytest.raises(ParseError):
        parse_smi_csv(text)


def test_header_only_means_no_gpus():
    assert parse_smi_csv("index, name\n").gpus == ()


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.values[0] for p in ALL_CSVS][:8] or ["index, name\n0, x\n"]
_FIELDS = ["index", "fan.speed [%]", "clocks_event_reasons.active", "pci.bus_id", "power.draw", "mig.mode.current"]


def _parse_or_parse_error(text: str, fields=None) -> None:
    only_parse_error(parse_smi_csv, text, fields)


test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(_parse_or_parse_error, _SAMPLES)


@FUZZ
@given(st.text(), st.lists(st.sampled_from(_FIELDS) | st.text(max_size=20), max_size=8))
def test_fuzz_random_text_with_fields(text: str, fields: list[str]):
    _parse_or_parse_error(text, fields)

