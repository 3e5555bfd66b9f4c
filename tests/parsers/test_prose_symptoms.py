"""A symptom told in words (parsers/prose_symptoms.py over knowledge/symptom_phrases.csv): each family with sentences
written here (not the table's own examples, which tests/test_symptom_phrases.py checks), and the reader's rules for
negation, questions, hypotheticals, history and machine output. All sentences are hand-written."""

from __future__ import annotations

import time

import pytest

from gpuhealth.knowledge import symptom_phrases
from gpuhealth.parsers.prose_symptoms import MAX_PER_SYMPTOM, told_symptoms


def told(text: str) -> list[str]:
    return [t.symptom for t in told_symptoms(text)]


# (symptom, sentences that tell it, sentences that do not): word order, synonyms, tenses, another language
FAMILIES = [
    ("nvidia-smi-slow",
     ["Running nvidia-smi on the new node takes ages.", "Each nvidia-smi call needs about 8 seconds here.",
      "nvidia_smi returns only after 12s", "Painfully slow nvidia-smi on a DGX, any idea?",
      "The response time of nvidia-smi is around 5 to 7 seconds.",
      "Our nvidia-smi is sluggish since the reboot."],
     ["nvidia-smi is fast now.", "nvidia-smi takes less than 1 s.", "nvidia-smi isn't slow at all.",
      "Does nvidia-smi get slow when persistence mode is off?",
      "It was slow until I started nvidia-persistenced, nvidia-smi now answers at once."]),
    ("nvidia-smi-hangs",
     ["nvidia-smi froze and I had to close the terminal.", "Our nvidia-smi times out in the exporter.",
      "The nvidia-smi command never returns on node 3."],
     ["nvidia-smi never hangs.", "Will nvidia-smi hang if the GPU is lost?"]),
    ("gpu-memory-held",
     ["Even after the script exits, VRAM remains allocated.",
      "GPU memory can't be released after Ctrl+C, I have to reboot.",
      "我的显存一直被占用", "nvidia-smi shows memory full on GPU 2 but no processes."],
     ["The VRAM is released right after the script exits.", "GPU memory is not held by anything now.",
      "host memory is not released after the job"]),
    ("gpu-overheats",
     ["The GPU is overheating under full load.", "my RTX card ran so hot that the PC turned off",
      "GPU temps go up to 95 degrees during training"],
     ["The GPU is not overheating.", "How hot can a GPU get before it throttles?", "the GPU idles at 35 C"]),
    ("gpu-slower",
     ["Training slowed down a lot after the first hour.", "training got slower",
      "After a while the GPU gets much slower.",
      "Throughput on the GPU decreases from 300 to 150 images/sec after ten minutes."],
     ["Training does not slow down.", "Training is slower than on the CPU, is that normal?",
      "the loss decreases slowly during training"]),
    ("gpu-lost",
     ["One of the GPUs vanished from nvidia-smi after two days of training.",
      "The card went missing after a few hours under load."],
     ["The GPU did not disappear this time.", "The error message disappeared after the GPU driver update."]),
    ("nouveau-despite-blacklist",
     ["nouveau is still active even after blacklisting it", "Somehow nouveau keeps getting loaded at boot."],
     ["nouveau is not active any more", "Before I blacklisted it, nouveau was still active."]),
    ("login-loop",
     ["Since the driver update Ubuntu keeps looping back to the login screen.",
      "I'm stuck in a login loop after installing the NVIDIA driver.",
      "The desktop won't start after the nvidia install."],
     ["To avoid a login loop, stop the display manager before installing the driver.",
      "The black screen went away after I reinstalled the NVIDIA driver."]),
    ("torch-no-gpu",
     ["On the new box PyTorch can't find the GPU.", "torch.cuda.is_available() always gives False for me",
      "torch.cuda.device_count() returns 0 on our cluster node"],
     ["PyTorch uses the GPU fine.", "Why would torch.cuda.is_available() return False in general?",
      "torch.cuda.is_available() is True"]),
    ("framework-no-gpu",
     ["Keras is not able to use the GPU on Ubuntu 22.04.", "cupy cannot access the GPU after the driver update"],
     ["TensorFlow does not fail to find the GPU any more, it works", "Can TensorFlow use the GPU without cuDNN?"]),
    ("container-no-gpu",
     ["Our Kubernetes pods cannot see any GPUs after the upgrade.",
      "With podman the container is unable to use the GPU."],
     ["The container can use the GPU now.", "Before I installed the toolkit, the container didn't see the GPU."]),
    ("gpu-missing",
     ["nvidia-smi lists only two GPUs out of eight.", "After the reboot nvidia-smi can't see the second GPU."],
     ["nvidia-smi lists all eight GPUs.", "Why would nvidia-smi show only one of two GPUs in general?"]),
    ("cuda-init-slow",
     ["Creating the CUDA context takes over a minute.",
      "Our first CUDA operation hangs for 20 seconds on the A100 node."],
     ["The CUDA context is created at once.", "Is CUDA initialization slow without persistence mode?"]),
    ("driver-unreachable",
     ["Since the kernel upgrade nvidia-smi no longer works.", "nvidia-smi gives an error after I rebooted the server."],
     ["nvidia-smi works fine after the update.", "nvidia-smi fails? Rebuild the module after a kernel update."]),
    ("install-failed",
     ["The NVIDIA driver install errors out while building the kernel module.",
      "I could not install the nvidia driver with the run file."],
     ["The driver installation finished without errors.", "pip install of the CUDA wheel failed"]),
    ("module-refuses-to-load",
     ["The nvidia-dkms module won't load on kernel 6.8.",
      "Since the update the NVIDIA kernel module is not loaded at boot."],
     ["The nvidia kernel module loads fine now.", "Before I disabled Secure Boot, the nvidia module did not load."]),
    ("job-hang",
     ["torchrun with 4 GPUs freezes at the first barrier.", "NCCL all_reduce is stuck forever on two nodes.",
      "Multi-GPU training hangs after init_process_group."],
     ["Multi-GPU training no longer hangs.", "Does DDP hang if one rank dies?"]),
]


@pytest.mark.parametrize(("symptom", "positives", "negatives"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_each_family_reads_its_wordings_and_only_them(symptom: str, positives: list[str], negatives: list[str]):
    for sentence in positives:
        assert symptom in told(sentence), sentence
    for sentence in negatives:
        assert symptom not in told(sentence), sentence


def test_every_symptom_the_table_reads_has_a_family_here():
    assert {row.symptom for row in symptom_phrases.phrases()} == {f[0] for f in FAMILIES}


@pytest.mark.parametrize(("sentence", "symptom"), [
    ("the GPU memory doesnt get released after the job", "gpu-memory-held"),
    ("PyTorch doesnt see my GPU", "torch-no-gpu"),
    ("my nvidia driver cant load because of secure boot", "module-refuses-to-load"),
])
def test_contractions_typed_without_the_apostrophe(sentence: str, symptom: str):
    assert told(sentence) == [symptom]


@pytest.mark.parametrize("sentence", [
    "nvidia-smi isnt slow.", "nvidia-smi doesnt hang.",
    "nvidia-smi is not slow.", "nvidia-smi is no longer slow since the upgrade.", "nvidia-smi doesn't take long.",
    "The GPU memory is not occupied.", "显存没有被占用",
])
def test_negated_words_tell_nothing(sentence: str):
    assert told(sentence) == []


@pytest.mark.parametrize(("sentence", "reports"), [
    ("Is nvidia-smi slow without persistence mode?", False),  # only asks
    ("Can nvidia-smi hang when a GPU falls off the bus?", False),
    ("Why is nvidia-smi so slow?", True),  # presupposes it
    ("How do I fix nvidia-smi being slow?", True),
    ("Is it normal that nvidia-smi takes 6 seconds on my server?", True),  # the asker's own machine
    ("nvidia-smi takes 10 seconds, is that persistence mode?", True),  # reports, then asks
])
def test_questions_report_only_when_they_presuppose_the_symptom(sentence: str, reports: bool):
    assert ("nvidia-smi-slow" in told(sentence) or "nvidia-smi-hangs" in told(sentence)) is reports


@pytest.mark.parametrize(("sentence", "reports"), [
    ("If persistence mode is off, nvidia-smi can be slow.", False),  # a general statement
    ("Without persistence mode nvidia-smi may take several seconds.", False),
    ("If I run nvidia-smi it takes 10 seconds.", True),  # the writer's own machine
    ("Enable persistence mode to avoid a slow nvidia-smi.", False),
    ("Blacklist nouveau first, otherwise you may end up in a login loop.", False),
])
def test_hypotheticals_are_not_reports(sentence: str, reports: bool):
    assert bool(told(sentence)) is reports, sentence


@pytest.mark.parametrize(("sentence", "reports"), [
    ("nvidia-smi used to take 10 seconds.", False),
    ("nvidia-smi was slow before I enabled persistence mode.", False),
    ("The login loop is gone after purging the driver.", False),
    ("The slow nvidia-smi is fixed now.", False),
    ("Previously I started a job and after it finished the GPU memory stayed occupied.", True),  # dates, not ended
    ("nvidia-smi was slow yesterday and it still is.", True),
])
def test_history_is_not_a_report(sentence: str, reports: bool):
    assert bool(told(sentence)) is reports, sentence


@pytest.mark.parametrize("line", [
    "[  12.345678] NVRM: nvidia-smi takes 10 seconds",
    "Jan 17 11:33:15 gpubox kernel: NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.",
    "E0819 07:02:54.757556       1 rm.go:109] NCCL training hangs in all_reduce",
    "| 0  Tesla T4   Off | memory is not released on the other GPUs |",
    "2024-05-01 12:00:00 WARNING nvidia-smi took 12 seconds",
    "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False.",
    "Mar 06 15:12:17 gpubox nvidia-settings-autostart.desktop[2777]: ERROR: NVIDIA driver is not loaded",
])
def test_machine_lines_are_not_the_reporters_words(line: str):
    assert told(line) == []


def test_the_sentence_and_its_line_are_kept():
    text = "Some context first.\nOur setup: 8 GPUs. nvidia-smi takes forever to print anything!\n"
    (found,) = told_symptoms(text)
    assert found.sentence == "nvidia-smi takes forever to print anything!"
    assert found.line == 1 and found.phrase == "smi-slow"


def test_a_symptom_is_kept_a_bounded_number_of_times():
    text = "nvidia-smi takes forever.\n" * 20
    assert told(text) == ["nvidia-smi-slow"] * MAX_PER_SYMPTOM


def test_a_paste_without_any_literal_does_not_read_the_table(monkeypatch: pytest.MonkeyPatch):
    def refuse() -> tuple:
        raise AssertionError("the table was read for a paste that holds none of its literals")

    symptom_phrases.literals()  # the literals are known once the table was read for another paste
    monkeypatch.setattr(symptom_phrases, "phrases", refuse)
    assert told_symptoms("Traceback (most recent call last):\n  File 'x.py', line 3\nValueError: bad value\n") == []


def test_long_adversarial_lines_stay_linear():
    for unit in ("nvidia-smi slow ", "memory not released gpu ", "throttlthrottl", "still still nouveau ",
                 "gpu temperature 9 ", "nccl hangs ddp ", "a" * 50 + " ", "overheat"):
        text = unit * (200_000 // len(unit))
        start = time.process_time()
        told_symptoms(text)
        assert time.process_time() - start < 1.0, unit
