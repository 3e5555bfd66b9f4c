"""parse_smi_query against every ``nvidia-smi -q`` text in the corpus (the capture bundles' too),
split_capture_bundle, edge cases and fuzzing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError, normalize_pci_address
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.smi_query import parse_smi_query

QUERY_FILES = corpus_files(
    "azhpc-diagnostics/nvidia-smi-q_*",
    "gpud/*nvidia-smi-query*",
    "nvidia-bug-report-352.63/nvidia-smi_-q.txt",
    "ml-engineering/nvidia-smi-q_excerpt_*",
    "azurehpc-health-checks/*nvsmi8_output.txt",
)
BUNDLES = corpus_files("nvidia-gpu-exporter/linux-x86_64__*.txt")
TRUNCATED = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.183.01.out.0.invalid"
_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", re.MULTILINE)
REASONS = {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
           "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"}


def parse(name: str):
    return parse_smi_query((CORPUS / name).read_text())


def bundle_query(name: str, key: str = "nvidia-smi -q"):
    return parse_smi_query(split_capture_bundle((CORPUS / name).read_text())[key])


def _bundle_sections() -> list[tuple[str, str]]:
    """(id, text) of every ``-q`` section in every capture bundle."""
    sections = []
    for path in BUNDLES:
        for key, text in split_capture_bundle(path.read_text()).items():
            if key.endswith("nvidia-smi -q"):
                sections.append((f"{corpus_id(path)}::{key}", text))
    return sections


BUNDLE_SECTIONS = _bundle_sections()


def check_matches_file(text: str) -> None:
    """GPU count, order and bus ids as the text shows them; an excerpt without a header is one GPU."""
    report = parse_smi_query(text)
    shown = _HEADER.findall(text)
    assert report.format == "query"
    if shown:
        assert [g.pci_address for g in report.gpus] == [normalize_pci_address(s) for s in shown]
        assert [g.index for g in report.gpus] == list(range(len(shown)))
        assert all(g.pci_address for g in report.gpus)
    else:
        assert len(report.gpus) == 1 and report.gpus[0].index is None
    for gpu in report.gpus:
        assert gpu.driver_version == report.driver_version
        assert set(gpu.clock_event_reasons) <= REASONS


def test_corpus_has_query_files():
    assert len(QUERY_FILES) >= 18
    assert len(BUNDLE_SECTIONS) == 2 * len(BUNDLES) >= 16


@pytest.mark.parametrize("path", QUERY_FILES, ids=corpus_id)
def test_every_query_file_parses_with_the_gpus_it_shows(path: Path):
    check_matches_file(path.read_text())


@pytest.mark.parametrize("text", [t for _, t in BUNDLE_SECTIONS], ids=[i for i, _ in BUNDLE_SECTIONS])
def test_every_bundle_query_section_parses(text: str):
    check_matches_file(text)
    report = parse_smi_query(text)
    gpu = report.gpus[0]
    assert gpu.name and gpu.uuid and gpu.pci_device_id and gpu.memory_total_mib
    assert gpu.recovery_action == "None" and gpu.reset_required is False  # all are 590+


def test_truncated_file_parses_partially_and_says_so():
    """Decision: a cut-off -q output yields the GPUs it shows, plus a warning, not an error."""
    report = parse(TRUNCATED)
    assert [g.pci_address for g in report.gpus] == ["0000:53:00.0"]
    assert report.warnings == ("nvidia-smi reports 8 attached GPUs but the output shows 1",)
    gpu = report.gpus[0]
    assert gpu.pcie_replay_counter == 120
    assert gpu.clock_event_reasons == ("gpu_idle",)  # "Invalid HW Slowdown" lines are ignored
    assert gpu.temperature_c is None  # cut before the Temperature section


def test_8x_a100_460():
    report = parse("azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out")
    assert (report.driver_version, report.cuda_version, report.warnings) == ("460.32.03", "11.2", ())
    assert len(report.gpus) == 8
    assert {g.name for g in report.gpus} == {"A100-SXM4-40GB"}
    # Hyper-V gives each GPU its own PCI domain: 1-4 and b-e on this VM.
    assert [g.pci_address for g in report.gpus] == [f"000{d}:00:00.0" for d in "1234bcde"]
    gpu = report.gpus[0]
    assert gpu.serial == "1323120035212"
    assert gpu.uuid == "GPU-b01e9f90-c60c-4ad1-2052-154833662357"
    assert gpu.pci_device_id == "20b0"
    assert gpu.vbios_version == "92.00.36.00.04"
    assert (gpu.persistence_mode, gpu.mig_mode_current, gpu.mig_devices) == (False, "Disabled", 0)
    assert (gpu.temperature_c, gpu.temperature_slowdown_c, gpu.temperature_shutdown_c) == (41.0, 89.0, 92.0)
    assert (gpu.temperature_max_operating_c, gpu.memory_temperature_c) == (85.0, 40.0)
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.power_default_limit_w) == (55.63, 400.0, 400.0)
    assert gpu.clock_event_reasons == ("gpu_idle",)
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (40536.0, 0.0)
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (4, 4, 16, 16)
    assert gpu.ecc_mode_current == "Enabled"
    assert (gpu.ecc_volatile_corrected, gpu.ecc_aggregate_uncorrected, gpu.sram_uncorrectable) == (0, 0, 0)
    assert (gpu.retired_pages_sbe, gpu.retired_pages_pending) == (None, None)  # N/A on A100
    for g in report.gpus:
        assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable) == (0, 0)
        assert (g.remapped_rows_pending, g.remapped_rows_failure) == (False, False)
    assert gpu.processes == ()


def test_remapped_rows_pending_excerpt():
    report = parse("ml-engineering/nvidia-smi-q_excerpt_A100_510.73.08_remapped_rows_pending.txt")
    gpu = report.gpus[0]
    assert (gpu.pci_address, gpu.name) == ("0000:10:1c.0", "NVIDIA A100-SXM4-80GB")
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (1, 0)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (True, False)
    assert (gpu.ecc_volatile_corrected, gpu.ecc_aggregate_corrected) == (177, 177)


def test_retired_pages_pending_excerpt():
    gpu = parse("ml-engineering/nvidia-smi-q_excerpt_retired_pages_pending.txt").gpus[0]
    assert (gpu.index, gpu.pci_address) == (None, None)
    assert (gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.retired_pages_pending) == (2, 0, True)


def test_sram_uncorrectable_excerpt():
    gpu = parse("ml-engineering/nvidia-smi-q_excerpt_ecc_sram_uncorrectable.txt").gpus[0]
    assert gpu.sram_uncorrectable == 5  # the aggregate count; volatile is 1
    assert (gpu.ecc_volatile_uncorrected, gpu.ecc_aggregate_uncorrected) == (1, 5)
    assert (gpu.ecc_volatile_corrected, gpu.ecc_aggregate_corrected) == (0, 0)


def test_page_retired_partial_output_per_gpu():
    report = parse("azurehpc-health-checks/bad_nvsmi8_output.txt")
    assert report.driver_version == "535.86.10"
    assert [(g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) for g in report.gpus] == [
        (60, 5, False), (2, 61, True), (0, 0, False), (6, 0, True),
        (0, 0, False), (20, 45, True), (0, 0, False), (8, 56, True)]
    assert report.gpus[7].pci_address == "0008:00:00.0"
    assert report.gpus[0].name is None and report.gpus[0].mig_devices is None


def test_610_driver_version_from_kmd_version():
    report = bundle_query("nvidia-gpu-exporter/linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt")
    assert (report.driver_version, report.cuda_version) == ("610.57.04", "13.3")
    gpu = report.gpus[0]
    assert (gpu.driver_version, gpu.cuda_version) == ("610.57.04", "13.3")
    assert (gpu.power_limit_w, gpu.power_default_limit_w) == (250.0, 250.0)  # under "GPU Ceiling Power Limit"


def test_610_load_section_instant_power_and_processes():
    report = bundle_query("nvidia-gpu-exporter/linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt",
                          "load :: nvidia-smi -q")
    gpu = report.gpus[0]
    assert gpu.power_draw_w == 97.75  # Average Power Draw is N/A; Instantaneous is read
    assert [(p.pid, p.name, p.used_memory_mib) for p in gpu.processes] == [
        (1720, "/usr/bin/gnome-shell", 173.0), (4556, "/usr/bin/Xwayland", 3.0),
        (28511, "ffmpeg", 230.0), (28512, "ffmpeg", 370.0)]
    assert [p.type for p in gpu.processes] == ["G", "G", "C", "C"]
    assert (gpu.utilization_gpu_pct, gpu.utilization_memory_pct, gpu.fan_speed_pct) == (8.0, 3.0, 38.0)


def test_throttle_and_event_reasons_text_give_the_same_names():
    old = parse("azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out").gpus[0]
    new = parse("gpud/accelerator_nvidia_query__nvidia-smi-query.535.183.01.out.0.valid").gpus[0]
    assert old.clock_event_reasons == new.clock_event_reasons == ("gpu_idle",)
    hgx = parse("gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid")
    assert {g.clock_event_reasons for g in hgx.gpus} == {("hw_slowdown", "hw_power_brake_slowdown")}
    assert parse("nvidia-bug-report-352.63/nvidia-smi_-q.txt").gpus[0].clock_event_reasons == (
        "applications_clocks_setting",)


def test_352_old_layout():
    report = parse("nvidia-bug-report-352.63/nvidia-smi_-q.txt")
    assert (report.driver_version, report.cuda_version) == ("352.63", None)
    assert len(report.gpus) == 1  # the appended "-q -u" output adds no GPU
    gpu = report.gpus[0]
    assert (gpu.pci_address, gpu.pci_device_id, gpu.fan_speed_pct) == ("0000:06:00.0", "17c2", 22.0)
    assert [p.pid for p in gpu.processes] == [878, 1804, 8822]
    assert gpu.processes[0].name == "/usr/bin/X" and gpu.processes[0].used_memory_mib == 198.0
    assert [p.type for p in gpu.processes] == ["G", "G", "G"]
    assert gpu.ecc_volatile_corrected is None  # Single Bit Total: N/A
    assert gpu.mig_devices is None  # no MIG Mode section in 352


def test_535_a10_remapped_rows_and_reset_status():
    gpu = parse("gpud/accelerator_nvidia_query__nvidia-smi-query.535.129.03.out.0.valid.a10").gpus[0]
    assert (gpu.remapped_rows_uncorrectable, gpu.remapped_rows_pending) == (4, True)
    assert (gpu.reset_required, gpu.recovery_action) == (False, None)


def test_h200_mig_devices_do_not_leak_into_the_gpu():
    gpu = bundle_query("nvidia-gpu-exporter/linux-x86_64__nvidia-h200-mig__590.48.01.txt").gpus[0]
    assert (gpu.name, gpu.pci_device_id) == ("NVIDIA H200", "2335")
    assert (gpu.mig_mode_current, gpu.mig_devices) == ("Enabled", 5)
    assert gpu.memory_total_mib == 143771.0  # the GPU's FB memory, not a MIG device's shared one


def test_4_and_8_digit_domains_normalise_alike():
    four = parse("nvidia-bug-report-352.63/nvidia-smi_-q.txt").gpus[0].pci_address
    eight = parse("gpud/accelerator_nvidia_query__nvidia-smi-query.560.35.03.out.0.valid").gpus[0].pci_address
    assert four == "0000:06:00.0" and eight == "0000:01:00.0"


# --------------------------------------------------------------------------- synthetic edge cases

_SYNTHETIC = """WARNING: infoROM is corrupted at gpu 0000:3B:00.0

==============NVSMI LOG==============

Timestamp                                              : Mon Jan  5 10:00:00 2026
Driver Version                                         : 595.80
CUDA Version                                           : 13.2

Attached GPUs                                          : 2
GPU 00000000:19:00.0
    Product Name                                       : NVIDIA H100 80GB HBM3
    GPU Recovery Action                                : Node Reboot
    ECC Errors
        Volatile
            SRAM Correctable                           : 1
            SRAM Uncorrectable Parity                  : 2
            SRAM Uncorrectable SEC-DED                 : 3
            DRAM Correctable                           : 4
            DRAM Uncorrectable                         : 5
    Retired Pages
        Pending Page Retirement                        : Yes
GPU 00000000:3B:00.0
    Product Name                                       : NVIDIA H100 80GB HBM3
    GPU Reset Status
        Reset Required                                 : Yes
"""


def test_synthetic_recovery_sram_split_pending_retirement_and_inforom_warning():
    report = parse_smi_query(_SYNTHETIC)
    first, second = report.gpus
    assert (first.recovery_action, first.reset_required) == ("Node Reboot", True)
    assert (first.ecc_volatile_corrected, first.ecc_volatile_uncorrected) == (5, 10)
    assert first.sram_uncorrectable is None  # only the aggregate count is kept, and it is absent
    assert first.retired_pages_pending is True
    assert first.inforom_corrupted is None and second.inforom_corrupted is True
    assert second.reset_required is True
    assert report.warnings == ("WARNING: infoROM is corrupted at gpu 0000:3B:00.0",)


def test_huge_counter_is_none_not_a_crash():
    text = f"GPU 00000000:01:00.0\n    PCI\n        Replays Since Reset : {'9' * 400}\n    Fan Speed : 30 %\n"
    gpu = parse_smi_query(text).gpus[0]
    assert (gpu.pcie_replay_counter, gpu.fan_speed_pct) == (None, 30.0)


def test_tabs_and_crlf():
    text = "GPU 00000000:01:00.0\r\n\tRetired Pages\r\n\t\tSingle Bit ECC : 3\r\n\t\tPending Page Blacklist : No\r\n"
    gpu = parse_smi_query(text).gpus[0]
    assert (gpu.retired_pages_sbe, gpu.retired_pages_pending) == (3, False)


@pytest.mark.parametrize("name", [
    "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid",  # the default table
    "netdata-go.d-nvidia-smi/tesla-p100.xml",
    "netdata-go.d-nvidia-smi/tesla-p100.csv",
    "nvidia-gpu-exporter/list_gpus_8xH100_mig.txt",
    "gpud/dmesg__dmesg.decode.iso.log.0",
])
def test_other_formats_raise_parse_error(name: str):
    with pytest.raises(ParseError, match="not nvidia-smi -q output"):
        parse(name)


@pytest.mark.parametrize("text", ["", "\n\n", "hello world", "a : b\n", "GPU 0000:01:00.0\n"])
def test_garbage_raises_parse_error(text: str):
    with pytest.raises(ParseError):
        parse_smi_query(text)


def test_version_output_is_not_query_output():
    sections = split_capture_bundle(
        (CORPUS / "nvidia-gpu-exporter/linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt").read_text())
    with pytest.raises(ParseError):
        parse_smi_query(sections["nvidia-smi --version"])


# --------------------------------------------------------------------------- split_capture_bundle


@pytest.mark.parametrize("path", BUNDLES, ids=corpus_id)
def test_split_capture_bundle(path: Path):
    sections = split_capture_bundle(path.read_text())
    assert "nvidia-smi -q" in sections and "load :: nvidia-smi -q" in sections
    assert sections["nvidia-smi -q"].lstrip().startswith("==============NVSMI LOG")
    assert sections["nvidia-smi -L"].startswith("GPU 0: NVIDIA ")
    assert "nvidia-smi" in sections and "nvidia-smi topo -m" in sections
    assert "collected_at:" in sections["nvidia_gpu_exporter GPU capture"]
    assert not any("####" in body for body in sections.values())
    assert sections["nvidia-smi pmon -c 5"].startswith("# gpu")  # '#' lines inside outputs are kept


def test_split_capture_bundle_rejects_other_text():
    with pytest.raises(ParseError, match="not a capture bundle"):
        split_capture_bundle("nvidia-smi -q\n")
    with pytest.raises(ParseError):
        split_capture_bundle("#" * 80 + "\n")


def test_split_capture_bundle_numbers_a_repeat_in_the_same_phase():
    rule = "#" * 80
    text = "\n".join([rule, "# idle :: x", "# $ cmd", rule, "one", rule, "# idle :: x", "# $ cmd", rule, "two"])
    assert split_capture_bundle(text) == {"cmd": "one\n", "idle :: cmd": "two\n"}


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.read_text()[:20_000] for p in QUERY_FILES[:8]] or ["GPU 00000000:01:00.0\n"]


_parse_or_parse_error = only_parse_errors(parse_smi_query)
test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(_parse_or_parse_error, _SAMPLES)


@FUZZ
@given(st.sampled_from(_SAMPLES), st.data())
def test_fuzz_mutated_lines_of_real_files(text: str, data):
    """Lines dropped, re-indented or given arbitrary values keep the parser inside ParseError."""
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, max(len(lines) - 1, 0)))
        if not lines:
            break
        action = data.draw(st.sampled_from(["drop", "indent", "value"]))
        if action == "drop":
            del lines[i]
        elif action == "indent":
            lines[i] = " " * data.draw(st.integers(0, 16)) + lines[i].lstrip()
        else:
            lines[i] = lines[i].split(" : ")[0] + " : " + data.draw(st.text(max_size=400))
    _parse_or_parse_error("\n".join(lines))


@FUZZ
@given(st.text(max_size=3000), st.text(max_size=3000))
def test_fuzz_split_capture_bundle(prefix: str, suffix: str):
    rule = "#" * 80
    try:
        split_capture_bundle(f"{prefix}\n{rule}\n# a :: b\n# $ c\n{rule}\n{suffix}")
    except ParseError:
        pass


def test_compute_process_type():
    gpu = parse("gpud/accelerator_nvidia_query__nvidia-smi-query.535.154.05.out.0.valid.4090").gpus[0]
    assert [(p.pid, p.type, p.name) for p in gpu.processes] == [(2010222, "C", "/usr/bin/python")]
