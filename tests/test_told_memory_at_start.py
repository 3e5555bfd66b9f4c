"""GPU memory told as held before the reporter's own job starts ("6 GB is already occupied before I run anything",
"아무것도 실행하지 않았는데 GPU 메모리 8GB가 점유되어 있습니다"): the symptom gpu-memory-held, whose likeliest cause is
another process holding it (knowledge/symptom_phrases.csv memory-held-at-start and its -ko, -zh and -ja rows, citing
nvidia-smi(1): Used is what active contexts allocated). GH414 leads as the reporter's words, a warning; a desktop's
display server, a small driver reservation, the user's own allocation or RAM are not it. The sentences are written
for these tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms


def findings_of(text: str):
    snapshot, _ = analyze_texts([("notes.txt", text)])
    return run_checks(snapshot).findings


@pytest.mark.parametrize("words", [
    "Even before I launch anything, 12 GB of the GPU memory is already taken and my job runs out of memory.",
    "On our shared node the VRAM of GPU 3 is occupied at idle, about 20 GB.",
    "기본적으로 그래픽 카드 메모리 4기가를 차지하고 있어서 배치 크기를 줄여도 OOM이 납니다.",
    "训练还没开始，显存就已经占用了 9G。",
    "何も動かしていないのに、GPUメモリが7GB使われています。",
    # a leftover process said to hold it, in Korean (memory-held-by-leftover-process-ko)
    "중단한 학습 프로세스가 GPU 메모리를 20GB 넘게 붙잡고 있습니다.",
])
def test_memory_held_before_the_job_starts_leads_with_gh414_as_words(words):
    findings = findings_of(words + "\n")
    first = findings[0]
    assert first.code == "GH414", [(f.code, f.message) for f in findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"
    assert not [f for f in findings if f.severity is Severity.CRITICAL]


@pytest.mark.parametrize("words", [
    "Xorg already uses some GPU memory at idle on this desktop.",
    "About 400 MB of GPU memory is used at idle, that is the driver.",
    "My script allocates 6 GB of GPU memory at start, as configured.",
    "기본적으로 시스템 메모리 8기가를 차지하고 있습니다.",
    "Is 6 GB of GPU memory already occupied before the job starts?",
    "No GPU memory is used at idle.",
    # PyTorch's own out-of-memory report inside a sentence: the process's allocations
    "Training stops with CUDA out of memory (GPU 0; 11.17 GiB total capacity; 10.2 GiB already allocated; 8 MiB free).",
])
def test_a_display_server_a_small_reservation_own_use_ram_or_a_question_is_not_it(words):
    assert not [t for t in told_symptoms(words) if t.symptom == "gpu-memory-held"]


def test_nvidia_smi_showing_the_memory_free_overrules_the_words():
    """memory held is a state a snapshot shows: an nvidia-smi table with the memory free wins over the words"""
    smi = """$ nvidia-smi
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-PCIE-40GB          On  |   00000000:3B:00.0 Off |                    0 |
| N/A   31C    P0             36W /  250W |       4MiB /  40960MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+
"""
    findings = findings_of("About 12 GB of GPU memory is already occupied before I start anything.\n" + smi)
    assert not [f for f in findings if f.code == "GH414"], [(f.code, f.message) for f in findings]
