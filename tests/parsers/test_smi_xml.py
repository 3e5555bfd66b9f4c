"""parse_smi_xml against every ``nvidia-smi -q -x`` file in the corpus, plus edge cases and fuzzing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError, normalize_pci_address
from gpuhealth.parsers.smi_xml import parse_smi_xml

XML_FILES = corpus_files("telegraf-nvidia-smi/*.xml", "netdata-go.d-nvidia-smi/*.xml")
_GPU_ID = re.compile(r'<gpu id="([^"]+)"')


def parse(name: str):
    return parse_smi_xml((CORPUS / name).read_text())


def test_corpus_has_xml_files():
    assert len(XML_FILES) >= 25


@pytest.mark.parametrize("path", XML_FILES, ids=corpus_id)
def test_every_xml_file_parses_with_the_gpus_it_shows(path: Path):
    text = path.read_text()
    report = parse_smi_xml(text)
    shown = _GPU_ID.findall(text)
    assert report.format == "xml"
    assert len(report.gpus) == len(shown)
    assert [g.index for g in report.gpus] == list(range(len(shown)))
    assert [g.pci_address for g in report.gpus] == [normalize_pci_address(s) for s in shown]
    assert all(g.pci_address for g in report.gpus)
    for gpu in report.gpus:
        assert gpu.name and gpu.uuid and gpu.uuid.startswith("GPU-")
        assert gpu.driver_version == report.driver_version
        assert set(gpu.clock_event_reasons) <= {
            "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
            "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"}


def test_525_throttle_reasons_and_535_event_reasons_give_the_same_names():
    old = parse("telegraf-nvidia-smi/quadro-p2000-v12.xml").gpus[0]  # <clocks_throttle_reasons>
    new = parse("netdata-go.d-nvidia-smi/rtx-4090-driver-535.xml").gpus[0]  # <clocks_event_reasons>
    assert old.clock_event_reasons == new.clock_event_reasons == ("gpu_idle",)
    assert parse("telegraf-nvidia-smi/3090-v13.xml").gpus[0].clock_event_reasons == ("sw_power_cap",)
    assert parse("telegraf-nvidia-smi/pro-6000-maxq-blackwell-v13.xml").gpus[0].clock_event_reasons == ()


def test_power_from_old_power_readings():
    gpu = parse("telegraf-nvidia-smi/quadro-p2000-v12.xml").gpus[0]
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.power_default_limit_w) == (4.61, 75.0, 75.0)


def test_power_from_gpu_power_readings_prefers_instant_draw():
    gpu = parse("telegraf-nvidia-smi/rtx-3060-v12.xml").gpus[0]  # 570: average 11.60 W, instant 11.63 W
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.power_default_limit_w) == (11.63, 170.0, 170.0)
    gpu = parse("telegraf-nvidia-smi/3090-v13.xml").gpus[0]
    assert (gpu.power_draw_w, gpu.power_limit_w) == (35.15, 350.0)


def test_power_from_535_gpu_power_readings_power_draw():
    gpu = parse("telegraf-nvidia-smi/a100-sxm4-v12.xml").gpus[0]
    assert (gpu.power_draw_w, gpu.power_limit_w) == (67.03, 500.0)


def test_v13_recovery_action():
    gpu = parse("telegraf-nvidia-smi/3090-v13.xml").gpus[0]
    assert gpu.recovery_action == "None"
    assert gpu.reset_required is False


def test_570_deprecated_reset_status_falls_back_to_recovery_action():
    gpu = parse("telegraf-nvidia-smi/rtx-3060-v12.xml").gpus[0]
    assert (gpu.recovery_action, gpu.reset_required) == ("None", False)


def test_a100_mig_xml():
    report = parse("telegraf-nvidia-smi/a100-sxm4-v12.xml")
    gpu = report.gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending, gpu.mig_devices) == ("Enabled", "Enabled", 4)
    assert report.warnings == ("nvidia-smi reports 4 attached GPUs but the output shows 1",)
    assert parse("netdata-go.d-nvidia-smi/a100-sxm4-mig.xml").gpus[0].mig_devices == 2
    assert parse("telegraf-nvidia-smi/3090-v13.xml").gpus[0].mig_devices == 0  # "<mig_devices>None"


def test_identity_and_versions():
    report = parse("telegraf-nvidia-smi/dual_a5000-v13.xml")
    assert (report.driver_version, report.cuda_version) == ("590.44.01", "13.1")
    first = report.gpus[0]
    assert first.name == "NVIDIA RTX A5000"
    assert first.pci_address == "0000:81:00.0"
    assert first.pci_device_id == "2231"
    assert first.vbios_version == "94.02.6D.00.0D"
    assert first.persistence_mode is True
    assert first.compute_mode == "Default"
    assert (first.pcie_gen_current, first.pcie_gen_max, first.pcie_width_current, first.pcie_width_max) == (
        1, 4, 16, 16)
    assert first.processes[0].pid == 100477
    assert first.processes[0].name == "/root/src/llama.cpp/build/bin/llama-server"
    assert first.processes[0].used_memory_mib == 22430.0


def test_ecc_and_retired_pages_on_p100():
    gpu = parse("netdata-go.d-nvidia-smi/tesla-p100.xml").gpus[0]
    assert gpu.ecc_mode_current == "Enabled"
    assert (gpu.ecc_volatile_corrected, gpu.ecc_aggregate_corrected, gpu.ecc_aggregate_uncorrected) == (0, 3, 0)
    assert (gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.retired_pages_pending) == (0, 0, False)


def test_temperatures_and_memory():
    gpu = parse("netdata-go.d-nvidia-smi/a100-sxm4-mig.xml").gpus[0]
    assert (gpu.temperature_c, gpu.temperature_slowdown_c, gpu.temperature_shutdown_c) == (36.0, 89.0, 92.0)
    assert (gpu.temperature_max_operating_c, gpu.memory_temperature_c) == (85.0, 44.0)
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (40960.0, 38.0)


def test_placeholders_become_none():
    gpu = parse("telegraf-nvidia-smi/rtx-3090-v12.xml").gpus[0]
    assert gpu.pci_device_id is None  # "[REDACTED]"
    assert gpu.ecc_mode_current is None and gpu.remapped_rows_pending is None
    assert parse("telegraf-nvidia-smi/a10g.xml").gpus[0].pci_device_id is None  # "000000DE"


def test_file_without_driver_version():
    report = parse("telegraf-nvidia-smi/gtx-1070-ti.xml")
    assert report.driver_version is None and len(report.gpus) == 1


# --------------------------------------------------------------------------- synthetic edge cases

_V13 = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">
<nvidia_smi_log>
  <driver_version>610.57.04 [Deprecated]</driver_version>
  <kmd_version>610.57.04</kmd_version>
  <cuda_version>13.3</cuda_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000008:3A:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <gpu_recovery_action>GPU Reset</gpu_recovery_action>
    <ecc_errors>
      <volatile>
        <sram_correctable>2</sram_correctable>
        <sram_uncorrectable_parity>1</sram_uncorrectable_parity>
        <sram_uncorrectable_secded>2</sram_uncorrectable_secded>
        <dram_correctable>3</dram_correctable>
        <dram_uncorrectable>N/A</dram_uncorrectable>
      </volatile>
      <aggregate>
        <sram_correctable>N/A</sram_correctable>
        <sram_uncorrectable_parity>4</sram_uncorrectable_parity>
        <sram_uncorrectable_secded>5</sram_uncorrectable_secded>
        <dram_correctable>N/A</dram_correctable>
        <dram_uncorrectable>1</dram_uncorrectable>
      </aggregate>
    </ecc_errors>
    <retired_pages>
      <pending_blacklist>No</pending_blacklist>
      <pending_retirement>Yes</pending_retirement>
    </retired_pages>
    <remapped_rows>
      <remapped_row_corr>1</remapped_row_corr>
      <remapped_row_unc>2</remapped_row_unc>
      <remapped_row_pending>Yes</remapped_row_pending>
      <remapped_row_failure>No</remapped_row_failure>
    </remapped_rows>
  </gpu>
</nvidia_smi_log>
"""


def test_v13_sram_split_sums_and_recovery_action_implies_reset():
    report = parse_smi_xml(_V13)
    gpu = report.gpus[0]
    assert report.driver_version == gpu.driver_version == "610.57.04"
    assert gpu.pci_address == "0008:3a:00.0"
    assert (gpu.ecc_volatile_corrected, gpu.ecc_volatile_uncorrected) == (5, 3)
    assert (gpu.ecc_aggregate_corrected, gpu.ecc_aggregate_uncorrected) == (None, 10)
    assert gpu.sram_uncorrectable == 9
    assert (gpu.recovery_action, gpu.reset_required) == ("GPU Reset", True)
    assert gpu.retired_pages_pending is True
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (1, 2)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (True, False)
    assert gpu.mig_devices is None  # no <mig_mode>/<mig_devices>: unknown, not zero


@pytest.mark.parametrize("text, reason", [
    ("", "not nvidia-smi -q -x XML"),
    ("hello", "not nvidia-smi -q -x XML"),
    ("<html><body/></html>", "no <nvidia_smi_log> root"),
    ("<nvidia_smi_log><gpu id='1'>", "not nvidia-smi -q -x XML"),
    ('<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>', "entities"),
    ("<a>\udc80</a>", "not nvidia-smi -q -x XML"),
])
def test_bad_input_raises_parse_error(text: str, reason: str):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_smi_xml(text)


def test_query_text_is_not_xml():
    text = (CORPUS / "nvidia-bug-report-352.63/nvidia-smi_-q.txt").read_text()
    with pytest.raises(ParseError):
        parse_smi_xml(text)


def test_empty_log_has_no_gpus():
    report = parse_smi_xml("<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>")
    assert report.gpus == () and report.warnings == ()


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.read_text() for p in XML_FILES if p.stat().st_size < 40_000][:6] or ["<nvidia_smi_log/>"]


test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(only_parse_errors(parse_smi_xml), _SAMPLES)



def test_process_types():
    t4 = parse("telegraf-nvidia-smi/tesla_t4.xml").gpus[0]
    assert len(t4.processes) == 15 and {p.type for p in t4.processes} == {"C+G"}
    assert (t4.processes[0].pid, t4.processes[0].name) == (2320, None)  # Windows: no name, no memory
    win = parse("netdata-go.d-nvidia-smi/rtx-2080-win.xml").gpus[0]
    assert win.processes[0].type == "C+G"
    assert win.processes[0].name.endswith("PhoneExperienceHost.exe")
    assert len(win.processes) == 26
