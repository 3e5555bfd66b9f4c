"""A suite of short tests or programs told as many times slower on the GPU host than on a laptop ("the unit tests
run 10x slower on the GPU server than on my laptop"): each test is a process that pays the driver's GPU
initialisation when no client keeps the GPUs open (NVIDIA Driver Persistence, Background: load times on the order of
seconds for each job), so the reporter's words point to persistence mode off (knowledge/cause_phrases.csv
told-short-runs-slower-on-gpu-host). GH604 leads as a warning; training or throughput slower, a comparison with a
CPU that wins, a hypothetical or a fixed past are not it, and nvidia-smi showing persistence on overrules the words.
The sentences are written for these tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from smi_tables import a100_table


def findings_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot).findings


@pytest.mark.parametrize("words", [
    "The same gtest binaries are 15x slower on the CUDA server than on my laptop.",
    "Our pytest suite is ten times faster on a MacBook than on the multi-GPU node.",
    "Our gtest suite finishes 6 times faster than on gpu-node-7 although gpu-node-7 has eight GPUs.",
    "Trivial CUDA programs are an order of magnitude slower on the headless box.",
])
def test_short_runs_slower_on_the_gpu_host_are_persistence_off_as_words(words):
    findings = findings_of(("notes.txt", words + "\n"))
    first = findings[0]
    assert first.code == "GH604", [(f.code, f.message) for f in findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"


@pytest.mark.parametrize("words", [
    "Training is 10x slower on the GPU server than on my laptop.",
    "The tests run 10x faster on the GPU server than on my laptop's CPU.",
    "If persistence mode is off, the tests can be 10x slower on the GPU server.",
    "Building the tests is 5x slower on the GPU box than on my laptop.",
    "Inference throughput of the tests is 3x lower on the GPU server.",
])
def test_training_a_faster_gpu_a_hypothetical_or_a_build_is_not_it(words):
    findings = findings_of(("notes.txt", words + "\n"))
    assert not [f for f in findings if f.code == "GH604"], [(f.code, f.message) for f in findings]


def test_a_gpu_that_slows_down_is_still_the_slowdown_family():
    findings = findings_of(("notes.txt", "Training runs 3x slower on the GPU server since the heat wave.\n"))
    assert findings[0].code != "GH604"


def test_persistence_mode_on_in_nvidia_smi_wins_over_the_words():
    findings = findings_of(("nvidia-smi.txt", a100_table() + "\n"),
                           ("notes.txt", "The unit tests run 10x slower on the GPU server than on my laptop.\n"))
    assert not [f for f in findings if f.code == "GH604"], [(f.code, f.message) for f in findings]
