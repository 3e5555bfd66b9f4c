"""GPU models and counts named in words and in program output other than nvidia-smi's table (parsers/gpu_mentions.
named_gpus, knowledge/gpu_models.csv), and the checks that use their product line: GH608's count, the NVSwitch
platform, forward compatibility (GH603) and the fan check (GH410). Every sentence below is written here (hand-made,
no case of tests/cases)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.cuda import forward_compat_gpu
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.gpu_models import model_named, models
from gpuhealth.model import Gpu, SmiReport, Snapshot
from gpuhealth.parsers.gpu_mentions import named_gpus
from gpuhealth.parsers.platform import platform_of_named
from gpuhealth.parsers.prose import gpu_count_statements


def named(text: str) -> list[tuple[str, str, str, int | None]]:
    return [(g.named, g.line, g.form, g.count) for g in named_gpus(text)]


def test_every_row_has_a_line_and_a_source():
    rows = models()
    assert len(rows) >= 25 and all(r.source and r.line in ("geforce", "workstation", "datacenter") for r in rows)
    assert {r.line for r in rows} == {"geforce", "workstation", "datacenter"}


@pytest.mark.parametrize(("text", "expected"), [
    ("Per node: 8x H20, and all-reduce is slow.", [("H20", "datacenter", "sxm", 8)]),
    ("I have 2x RTX 3090 in one box.", [("RTX 3090", "geforce", "pcie", 2)]),
    ("A Tesla P4 in a desktop gets very hot.", [("Tesla P4", "datacenter", "pcie", None)]),
    ("The server has 4x A100-80GB PCIe.", [("A100-80GB PCIe", "datacenter", "pcie", 4)]),
    ("AWS g5 with an A10G, driver 535.", [("A10G", "datacenter", "pcie", None)]),
    ("My GTX 1080 Ti says error 804.", [("GTX 1080 Ti", "geforce", "pcie", None)]),
    ("Our node: eight H100 SXM GPUs.", [("H100 SXM", "datacenter", "sxm", 8)]),
    ("The lab ordered 8 H20s for serving.", [("H20s", "datacenter", "sxm", 8)]),
    ("The RTX A6000 runs at 80C.", [("RTX A6000", "workstation", "pcie", None)]),
    ("Quadro RTX 8000 on CentOS 7.", [("Quadro RTX 8000", "workstation", "pcie", None)]),
    ("Training on RTX 4090 x2 fails.", [("RTX 4090", "geforce", "pcie", 2)]),
    ("The NVIDIA T4 shows N/A for the fan.", [("T4", "datacenter", "pcie", None)]),
])
def test_models_and_counts_named(text, expected):
    assert named(text) == expected


@pytest.mark.parametrize("text", [
    "I want to buy an A100 for this.",  # a purchase
    "Is a T4 enough for inference?",  # a question
    "It is ten times faster than an A100.",  # a comparison
    "A100 vs H100, which one is better",
    "On my laptop it works with an RTX 3060.",  # another machine
    "We used to have a GTX 1080 in this box.",  # the past
    "If you have an H100, set this flag.",  # a condition
    "We launched a p4d.24xlarge and an a2-highgpu-8g.",  # instance names hold no P4 or A2
    "the T4 branch of the repo",  # a short name alone names no GPU
    "|   0  NVIDIA GeForce RTX 3090        Off |",  # nvidia-smi's own table: the driver's list
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1234)",
])
def test_what_names_no_gpu_of_this_host(text):
    assert named_gpus(text) == ()


def test_a_count_of_named_models_is_the_gpu_count():
    (stated,) = gpu_count_statements("I run the script on 2x RTX 3090 and get invalid device ordinal.")
    assert (stated.thing, stated.value) == ("gpu-count", "2")
    (both,) = gpu_count_statements("The box has 2x RTX 3090 and 2x RTX 4090.")
    assert both.value == "4"
    assert gpu_count_statements("My RTX 3090 and 2x A100 both fail.") == ()  # how many 3090s is not said
    (plain,) = gpu_count_statements("We have two GPUs.")  # the count statement itself still decides first
    assert plain.value == "2"


def test_eight_sxm_gpus_named_in_words_make_a_reported_board():
    board = platform_of_named(named_gpus("We have 8x H100 SXM in one node."))
    assert board is not None and board.reported and "HGX H100" in board.name
    assert platform_of_named(named_gpus("Two nodes, each with 8 H20s.")) is not None
    assert platform_of_named(named_gpus("We have 8x A100 PCIe.")) is None  # cards, no baseboard
    assert platform_of_named(named_gpus("We have 8x A100.")) is None  # SXM or PCIe: not said
    assert platform_of_named(named_gpus("We have 8x RTX 4090.")) is None
    assert platform_of_named(named_gpus("We have 4x H100 SXM.")) is None  # the 4-GPU board has no NVSwitch
    snapshot, _ = analyze_texts([("issue.txt", "We run 8x H100 SXM.\nRuntimeError: CUDA error: system not yet "
                                               "initialized\n")])
    assert snapshot.platform is not None and snapshot.platform.reported
    assert snapshot.gpus_named and snapshot.reported_fact("gpus_named") is not None
    assert snapshot.machine_only().gpus_named == ()  # the words' GPUs are no program's output


def test_forward_compat_reads_the_product_line_named_where_no_program_lists_gpus():
    geforce = Snapshot(origin="evidence", gpus_named=named_gpus("My GTX 1080 Ti fails."))
    assert forward_compat_gpu(geforce) == "consumer"
    datacenter = Snapshot(origin="evidence", gpus_named=named_gpus("Our 4x A100 PCIe fail."))
    assert forward_compat_gpu(datacenter) == "datacenter"
    workstation = Snapshot(origin="evidence", gpus_named=named_gpus("Our RTX A6000 fails."))
    assert forward_compat_gpu(workstation) is None  # select NGC-ready RTX parts only: the name does not decide
    listed = dataclasses.replace(geforce, smi=SmiReport(gpus=(Gpu(index=0, name="NVIDIA A100-SXM4-80GB"),)))
    assert forward_compat_gpu(listed) == "datacenter"  # the driver's list wins over the words


def fan_err(name: str) -> Snapshot:
    gpu = Gpu(index=0, name=name, fan_error=True, temperature_c=40.0)
    return Snapshot(origin="evidence", smi=SmiReport(gpus=(gpu,)), sources={"smi": "nvidia-smi"})


def test_a_passive_boards_fan_column_is_no_fan_error():
    assert model_named("Tesla T4").passive and model_named("NVIDIA A10").passive
    assert not model_named("NVIDIA GeForce RTX 3090").passive
    assert not [f for f in run_checks(fan_err("Tesla T4"), select=["GH410"]).findings if f.code == "GH410"]
    assert [f for f in run_checks(fan_err("NVIDIA GeForce RTX 3090"), select=["GH410"]).findings
            if f.code == "GH410"]


def test_a_device_index_beyond_the_gpus_named_with_their_count_is_gh608():
    snapshot, _ = analyze_texts([("issue.txt", 'I train on 2x RTX 3090 with device = torch.device("cuda:2").\n'
                                               "RuntimeError: CUDA error: invalid device ordinal\n")])
    assert snapshot.gpus_stated == 2
    (found,) = [f for f in run_checks(snapshot).findings if f.code == "GH608"]
    assert found.severity.value == "warning" and "valid indices are 0-1" in found.message


def test_a_geforce_named_in_words_is_said_to_have_no_forward_compatibility():
    # the module's version and a compat directory, no GPU listed by any program: the words name a GeForce
    session = ("$ cat /proc/driver/nvidia/version\n"
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.07  Fri Mar 14 21:40:38 UTC 2025\n"
               "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.9/compat\n$ ./app\n"
               "RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination\n")
    words = "This is my home box with a GeForce RTX 3060 in it.\n"
    snapshot, _ = analyze_texts([("session.txt", session), ("issue.txt", words)])
    gh603 = next(f for f in run_checks(snapshot).findings if f.code == "GH603")
    assert "RTX 3060 (a GeForce, in the reporter's words)" in gh603.message
    assert "if these GPUs support forward compatibility" not in gh603.message
    assert gh603.labels.get("reported") == "words"  # the words changed it (the 803 beside it keeps it critical)
