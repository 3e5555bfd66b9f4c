"""parse_smi_nvlink against every ``nvidia-smi nvlink -s`` output in the corpus, edge cases, fuzzing."""

from __future__ import annotations

import re

import pytest

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.smi_nvlink import parse_smi_nvlink

NVLINK_FILES = corpus_files(
    "azhpc-diagnostics/nvlink-s_*", "azurehpc-health-checks/*nvlink_status.txt", "gpud/*nvlink*"
)
BUNDLES = corpus_files("nvidia-gpu-exporter/linux-*.txt")
ERRORS = {"all links are inactive", "not supported in MIG mode", "not supported"}

ALL_NVLINK = [pytest.param(p.read_text(), id=corpus_id(p)) for p in NVLINK_FILES] + [
    pytest.param(split_capture_bundle(p.read_text())["nvidia-smi nvlink -s"], id=corpus_id(p)) for p in BUNDLES
]


def parse(name: str):
    return parse_smi_nvlink((CORPUS / name).read_text())


def bundle_nvlink(fragment: str):
    path = next(p for p in BUNDLES if fragment in p.name)
    return parse_smi_nvlink(split_capture_bundle(path.read_text())["nvidia-smi nvlink -s"])


def test_corpus_has_nvlink_outputs():
    assert len(NVLINK_FILES) >= 4 and len(ALL_NVLINK) >= 12


@pytest.mark.parametrize("text", ALL_NVLINK)
def test_every_output_parses_with_its_gpus_and_links(text: str):
    states = parse_smi_nvlink(text)
    assert [s.gpu_index for s in states] == [int(i) for i in re.findall(r"^GPU (\d+):", text, re.MULTILINE)]
    assert sum(len(s.link_speeds_gbps) for s in states) == len(re.findall(r"Link \d+:", text))
    for state in states:
        assert state.gpu_name and state.uuid and state.uuid.startswith("GPU-")
        assert bool(state.link_speeds_gbps) != bool(state.error)  # links, or the reason there are none
        assert state.error is None or state.error in ERRORS


def test_eight_a100_with_twelve_links_at_25():
    states = parse("gpud/nvidia-query__nvidia-smi.nvlink.status.a100")
    assert [s.gpu_index for s in states] == list(range(8))
    assert all(s.link_speeds_gbps == (25.0,) * 12 and s.error is None for s in states)
    assert states[0].gpu_name == "NVIDIA A100-SXM4-80GB"
    assert states[0].uuid == "GPU-5269b708-678a-b1a8-60f0-c90406537486"


def test_one_gpu_tab_indented():
    (state,) = parse("azurehpc-health-checks/good_nvlink_status.txt")
    assert (state.gpu_index, state.link_speeds_gbps) == (7, (25.0,) * 12)


def test_all_links_inactive():
    (state,) = parse("azurehpc-health-checks/bad_nvlink_status.txt")
    assert (state.gpu_index, state.link_speeds_gbps, state.error) == (6, (), "all links are inactive")
    (state,) = bundle_nvlink("rtx-2080-super__610")  # 590+ spells it "inActive"
    assert state.error == "all links are inactive"


def test_inactive_links_are_none():
    states = parse("azhpc-diagnostics/nvlink-s_8xV100-SXM2_inactive-links.out")
    assert len(states) == 7  # GPUs 0-6: the file stops there
    assert states[0].link_speeds_gbps == (25.781,) * 6
    assert states[3].link_speeds_gbps == (25.781, 25.781, 25.781, None, 25.781, None)
    assert states[5].link_speeds_gbps == (None, 25.781, 25.781, 25.781, None, 25.781)
    assert sum(speed is None for s in states for speed in s.link_speeds_gbps) == 6


def test_bundles_h100_mig_and_no_nvlink():
    assert bundle_nvlink("h100-80gb")[0].link_speeds_gbps == (26.562,) * 18
    assert bundle_nvlink("h100-mig")[0].error == "not supported in MIG mode"
    assert bundle_nvlink("l40s")[0].error == "not supported"


def test_unknown_message_is_kept_and_link_gaps_are_none():
    (state,) = parse_smi_nvlink("GPU 0: X (UUID: GPU-1)\nNVML: Unknown Error\n")
    assert state.error == "NVML: Unknown Error"
    (state,) = parse_smi_nvlink("GPU 0: X (UUID: GPU-1)\n\t Link 2: 50 GB/s\n")
    assert state.link_speeds_gbps == (None, None, 50.0)


@pytest.mark.parametrize(("text", "reason"), [
    ("", "no 'GPU n"),
    ("\n \n", "no 'GPU n"),
    ("\t Link 0: 25 GB/s\n", "not nvidia-smi nvlink -s output"),
    ("Failed to initialize NVML: Driver/library version mismatch\n", "not nvidia-smi nvlink -s output"),
])
def test_bad_input_raises_parse_error(text: str, reason: str):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_smi_nvlink(text)


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.values[0] for p in ALL_NVLINK][:6] or ["GPU 0: A (UUID: GPU-1)\n\t Link 0: 25 GB/s\n"]


test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(only_parse_errors(parse_smi_nvlink), _SAMPLES)

