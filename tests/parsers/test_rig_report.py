"""parse_rig_report: the GPU section of club-3090 rig reports (real ones in tests/data/rig-report), near misses,
fuzzing; and what analyze makes of a whole report."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import identify, route
from gpuhealth.model import ParseError
from gpuhealth.parsers.rig_report import looks_like_rig_report, parse_rig_report

DATA = Path(__file__).parent.parent / "data" / "rig-report"
CAPPED = (DATA / "club-3090-585-2x3090-x4-capped.md").read_text()
EGPU = (DATA / "club-3090-353-3090ti-egpu-x4.md").read_text()
SAMPLES = [CAPPED, EGPU]


def test_two_capped_3090s_one_at_x4():
    report = parse_rig_report(CAPPED)
    assert report.format == "rig-report" and report.driver_version == "610.43.02"
    first, second = report.gpus
    assert (first.index, first.name, first.memory_total_mib) == (0, "NVIDIA GeForce RTX 3090", 24576)
    assert (first.power_limit_w, first.power_default_limit_w, first.power_draw_w) == (250.0, 370.0, 144.23)
    assert (first.pcie_width_current, first.pcie_width_max, first.pcie_gen_max) == (4, 16, 4)
    assert first.pci_address == "0000:05:00.0" and first.persistence_mode is True
    assert first.vbios_version == "94.02.42.80.88"
    assert (second.pcie_width_current, second.pcie_width_max, second.pci_address) == (16, 16, "0000:0a:00.0")
    assert second.pcie_gen_current is None  # the report prints the maximum generation only


def test_one_egpu_at_its_default_power():
    (gpu,) = parse_rig_report(EGPU).gpus
    assert gpu.name == "NVIDIA GeForce RTX 3090 Ti" and gpu.persistence_mode is False
    assert gpu.power_limit_w == gpu.power_default_limit_w == 450.0
    assert (gpu.pcie_width_current, gpu.pcie_width_max, gpu.pci_address) == (4, 16, "0000:c5:00.0")


@pytest.mark.parametrize("text", SAMPLES)
def test_the_real_reports_are_recognised_as_rig_reports(text):
    assert looks_like_rig_report(text) and identify(text) == "rig-report"


def test_a_pasted_gpu_section_without_the_title_is_recognised():
    section = CAPPED[CAPPED.index("- **GPU 0:**"):]
    assert identify(section) == "rig-report"
    assert len(parse_rig_report(section).gpus) == 2


def test_the_report_command_routes_to_the_kind():
    assert route("bash scripts/report.sh --full", CAPPED).name == "rig-report"


@pytest.mark.parametrize("text", [
    "- **OS:** Ubuntu 24.04.4 LTS\n- **Kernel:** 6.8.0-134-generic\n",  # other sections only
    "  - **PCIe:** x4 lanes negotiated (GPU max x16, Gen up to 4) | bus 00000000:05:00.0\n",  # no GPU line
    "GPU 0: NVIDIA GeForce RTX 3090 | 24576 MiB | driver 610.43.02\n",  # not a bullet
    "- **GPU 0:** NVIDIA GeForce RTX 3090 | 24576 MiB\n",  # a GPU line alone: nothing says it is this report
])
def test_near_misses_are_not_rig_reports(text):
    assert not looks_like_rig_report(text)


def test_a_gpu_listed_twice_is_refused():
    gpu = CAPPED[CAPPED.index("- **GPU 0:**"):CAPPED.index("- **GPU 1:**")]
    with pytest.raises(ParseError, match="listed twice"):
        parse_rig_report(gpu + gpu)


def test_an_impossible_link_width_is_refused():
    with pytest.raises(ParseError, match="no PCIe width"):
        parse_rig_report(CAPPED.replace("x4 lanes negotiated", "x0 lanes negotiated"))


def test_no_gpu_line_is_a_parse_error():
    with pytest.raises(ParseError, match="GPU section"):
        parse_rig_report("## GPU hardware\n\n- **CUDA Runtime (per driver):** 13.0\n")


def test_a_bullet_of_the_next_gpu_is_not_read_as_this_ones():
    text = ("- **GPU 0:** NVIDIA GeForce RTX 3090 | 24576 MiB | driver 595.71.05\n"
            "- **GPU 1:** NVIDIA GeForce RTX 3090 | 24576 MiB | driver 595.71.05\n"
            "  - **Power:** limit=250.00 W (default=350.00 W, max=350.00 W) | current_draw=24.67 W\n")
    first, second = parse_rig_report(text).gpus
    assert first.power_limit_w is None and second.power_limit_w == 250.0


def test_analyze_judges_the_capped_report_like_nvidia_smi():
    snapshot, log = analyze_texts([("my-rig.md", CAPPED)])
    assert [r.kind for r in log] == ["rig-report"]
    assert snapshot.smi is not None and len(snapshot.smi.gpus) == 2
    codes = [f.code for f in run_checks(snapshot).findings]
    assert codes.count("GH412") == 2 and codes.count("GH407") == 1


test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(
    only_parse_errors(parse_rig_report), SAMPLES)


@pytest.mark.parametrize("text", SAMPLES)
def test_recognise_never_raises_on_a_cut_report(text):
    for end in range(0, len(text), 97):
        looks_like_rig_report(text[:end])


def test_a_gpu_list_after_the_report_does_not_replace_its_power_and_link_data():
    listing = ("GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
               "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-00000000-0000-0000-0000-000000000001)\n")
    snapshot, _ = analyze_texts([("my-rig.md", CAPPED), ("nvidia-smi-L.txt", listing)])
    assert snapshot.smi.format == "rig-report"
    assert [g.power_limit_w for g in snapshot.smi.gpus] == [250.0, 250.0]
