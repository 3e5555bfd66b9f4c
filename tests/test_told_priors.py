"""Symptoms in the reporter's words whose cause NVIDIA's documents name (knowledge/cause_phrases.csv, read by
parsers/prose_symptoms.py): the cause's check leads as the reporter's words, at most a warning, and machine output
that says otherwise wins. The sentences are written for these tests from the documents each row cites (hand-written,
no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from smi_tables import a100_table


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def codes(report) -> list[str]:
    return [f.code for f in report.findings if f.severity is not Severity.INFO]


def lead_of(words: str):
    report = report_of(("notes.txt", words + "\n"))
    return report.findings[0], report


# --------------------------------------------------------------------------- 1. a slow start: persistence or JIT

@pytest.mark.parametrize("words", [
    # the Driver Persistence document: without a client the driver tears the GPU state down, so EVERY CUDA process
    # (each test of a suite, each nvidia-smi call) pays the initialisation again
    "On our headless server with 4 GPUs every test takes about 10 seconds, even the trivial ones.",
    "cudaFree(0) takes 5 seconds at the start of every process on this machine.",
    "Each CUDA program spends several seconds before it starts; it is the same for every process on the GPU node.",
    "Enabling persistence mode fixed it: CUDA programs start at once now.",
    "sudo nvidia-smi -pm 1 solved the slow start on the GPU box.",
    "The tests take 10 seconds each on our 4-GPU server.",
    "Every CUDA application has a startup overhead of about 8 seconds on this headless machine.",
    "On our 8-GPU node the first CUDA call takes about 40 seconds in every job.",
])
def test_a_slow_start_of_every_process_is_persistence_off(words):
    first, report = lead_of(words)
    assert first.code == "GH604", [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"
    assert not {"GH003", "GH004"} & set(codes(report))


@pytest.mark.parametrize("words", [
    # the JIT cache (CUDA Pro Tip: Fat Binaries and JIT Caching): PTX compiled at start, once, then kept
    "The first run takes 20 minutes because the driver JIT-compiles the PTX for the new GPU.",
    "Every CUDA test takes 10 seconds only the first time after the install, then it is fast: the PTX is JIT "
    "compiled and takes a while.",
    "The JIT takes 40 seconds at each start since our ComputeCache is on a read-only NFS home.",
])
def test_a_slow_start_from_jit_compilation_is_gh609s(words):
    first, report = lead_of(words)
    assert first.code == "GH609", [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING and "GH604" not in codes(report)


def test_a_first_call_told_slow_ranks_persistence_then_jit():
    first, _ = lead_of("The first CUDA call takes about 30 seconds on our 8-GPU server.")
    assert first.code == "GH609"
    assert [c.cause for c in first.differential][:2] == ["persistence-off", "ptx-jit-compile"]


@pytest.mark.parametrize("words", [
    "Each epoch takes 30 seconds on the GPU.",
    "Every test takes 1 second on the GPU.",
    "If persistence mode is off, every CUDA process can take a few seconds to start.",
    "Every test used to take 10 seconds on the GPU server before I enabled persistence mode.",
    "Each test takes 10 seconds on my laptop's CPU.",
    "Enabling persistence mode did not help at all with the GPU.",
])
def test_words_that_do_not_tell_a_slow_start_raise_no_gh604(words):
    _, report = lead_of(words)
    assert "GH604" not in codes(report), [(f.code, f.message) for f in report.findings]


def test_persistence_mode_on_in_nvidia_smi_wins_over_the_words():
    report = report_of(("nvidia-smi.txt", a100_table() + "\n"),
                       ("notes.txt", "On our GPU server every test takes about 10 seconds.\n"))
    assert "GH604" not in codes(report), [(f.code, f.message) for f in report.findings]


# --------------------------------------------------------------------------- 2. CUDA's unknown error and nvidia-uvm

TORCH_UNKNOWN = ("UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
                 "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the "
                 "available devices to be zero.")


@pytest.mark.parametrize("words", [
    # the CUDA Installation Guide's Device Node Verification: nvidia-uvm and /dev/nvidia-uvm are made on demand or by
    # a start-up script; nvidia-modprobe -u loads the Unified Memory module
    "After running sudo nvidia-modprobe -u it works again until the next reboot.",
    # running a program as root (nvidia-smi, X) first fixes CUDA's unknown error (999): error 999 is UVM's, the root
    # program's nvidia-modprobe made what was missing; without the error in sight the same words are the device nodes
    "CUDA gives the unknown error and it only works after I run nvidia-smi once as root.",
    "sudo modprobe nvidia-uvm fixed it.",
    "The /dev/nvidia-uvm node is missing after boot.",
    "The workaround is to run sudo nvidia-modprobe -u -c=0 after boot.",
    "Fixed by adding nvidia-uvm to /etc/modules.",
])
def test_cudas_unknown_error_with_uvm_loaded_by_hand_is_gh205(words):
    report = report_of(("traceback.txt", TORCH_UNKNOWN + "\n"), ("notes.txt", words + "\n"))
    assert report.findings[0].code == "GH205", [(f.code, f.message) for f in report.findings]
    assert not {"GH003", "GH004"} & set(codes(report))


def test_the_cause_told_in_the_sentence_of_the_message_is_read():
    first, report = lead_of("cuInit keeps returning CUDA_ERROR_UNKNOWN until I run sudo nvidia-modprobe -u by hand.")
    assert first.code == "GH205", [(f.code, f.message) for f in report.findings]
    assert any("reporter" in e.source for e in first.evidence)


def test_the_words_alone_name_uvm_as_a_warning():
    first, _ = lead_of("nvidia_uvm is not loaded on the headless GPU box, lsmod only shows nvidia.")
    assert first.code == "GH205" and first.severity is Severity.WARNING and first.labels.get("reported") == "words"


@pytest.mark.parametrize("words", [
    "Installing the nvidia-modprobe package fixed the CUDA error for normal users.",
    "The CUDA samples fail on the headless node until I run nvidia-smi as root once after boot.",
])
def test_device_nodes_made_by_a_privileged_program_are_gh207(words):
    first, _ = lead_of(words)
    assert first.code == "GH207" and first.severity is Severity.WARNING


@pytest.mark.parametrize("words", [
    "If CUDA fails with an unknown error, try sudo modprobe nvidia-uvm.",
    "sudo modprobe nvidia-uvm did not help, CUDA still fails.",
    "The CUDA unknown error stays even after I run nvidia-smi as root.",
    "/dev/nvidia-uvm exists and nvidia_uvm is loaded.",
])
def test_words_that_do_not_name_uvm_raise_no_gh205(words):
    _, report = lead_of(words)
    assert "GH205" not in codes(report), [(f.code, f.message) for f in report.findings]


# --------------------------------------------------------------------------- 3. GPU memory a leftover process holds

@pytest.mark.parametrize("words", [
    "There is a zombie process holding 20GB on GPU 2.",
    "The killed job left defunct python processes that still hold the GPU memory.",
    "I killed the training job but the GPU memory is never freed.",
    "nvidia-smi shows 10GB used on GPU 0 but no process is listed.",
    # a program gone is the symptom's setting, not the symptom over
    "The process is gone but the GPU memory usage does not go down.",
])
def test_memory_a_leftover_process_holds_is_gh414(words):
    first, report = lead_of(words)
    assert first.code == "GH414", [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING
    # the kernel's answer to a zombie: its parent (ps shows the PPID), and who holds /dev/nvidia*
    shown = [f.command for f in first.fixes]
    assert "sudo fuser -v /dev/nvidia*" in shown and any("ppid" in c for c in shown)


def test_a_zombie_said_to_hold_nothing_raises_no_gh414():
    _, report = lead_of("The zombie process holds no GPU memory.")
    assert "GH414" not in codes(report)


# ----------------------------------------------------------------------- 4. a passive data-center card, no airflow

SMI_P40 = a100_table(temp=89, watts=180).replace("NVIDIA A100-SXM4-80GB          On ",
                                                  "Tesla P40                      Off")


@pytest.mark.parametrize("words", [
    "I put a Tesla P40 in my workstation and it reaches 90C under load.",
    "The NVIDIA T4 has no fan of its own, in our desktop tower it throttles after a minute.",
])
def test_a_passive_card_without_airflow_is_gh406(words):
    first, report = lead_of(words)
    assert first.code == "GH406", [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"


def test_fan_na_on_a_passive_card_alone_is_no_fan_error():
    report = report_of(("nvidia-smi.txt", SMI_P40 + "\n"))
    assert "Tesla P40" in SMI_P40 and "GH410" not in codes(report)


@pytest.mark.parametrize("words", [
    "The Tesla P40 in our Supermicro GPU server runs at 45C.",
    "My RTX 3090 gets hot in my desktop case.",
])
def test_no_passive_card_or_a_server_is_not_told_as_no_airflow(words):
    _, report = lead_of(words)
    assert not any(f.code == "GH406" and "passively" in f.message for f in report.findings)


# --------------------------------------------------------------------------- 5. GPUs on risers or narrow slots

LSPCI_X1 = """\
03:00.0 VGA compatible controller: NVIDIA Corporation GA102 [GeForce RTX 3090] (rev a1) (prog-if 00 [VGA controller])
\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <1us, L1 <4us
\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x1 (downgraded)
\tKernel driver in use: nvidia
"""


@pytest.mark.parametrize("words", [
    "I have 6 GPUs on PCIe x1 risers in a mining rig and multi-GPU training hangs in all-reduce.",
    "Two of the cards sit in x4 slots and NCCL is very slow between them.",
    "The GPUs are on risers and training hangs.",
])
def test_gpus_on_risers_or_narrow_slots_are_gh407(words):
    first, report = lead_of(words)
    assert first.code == "GH407", [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING


def test_a_hang_told_beside_a_link_trained_to_x1_leads_with_the_link():
    report = report_of(("lspci-vv.txt", LSPCI_X1),
                       ("notes.txt", "Training on the GPUs hangs in all-reduce, they are on USB risers.\n"))
    assert report.findings[0].code == "GH407", [(f.code, f.message) for f in report.findings]
    assert "GH806" in report.findings[0].explains or "GH806" not in codes(report)


@pytest.mark.parametrize("words", [
    "All four GPUs sit in x16 slots, no risers.",
    "The GPU is on a x16 riser cable in a vertical mount.",
    "The GPUs are on risers.",
])
def test_full_width_slots_are_not_told_narrow(words):
    _, report = lead_of(words)
    assert "GH407" not in codes(report)


# ----------------------------------------------------------------------- a test runner's summary is no error line

@pytest.mark.parametrize("line", [
    "100% tests passed, 0 tests failed out of 3", "12 passed, 0 failed", "no tests failed",
])
def test_a_count_of_none_failed_is_no_unknown_error_line(line):
    report = report_of(("ctest.txt", line + "\n"))
    assert "GH003" not in codes(report)


def test_a_count_of_some_failed_still_is():
    report = report_of(("ctest.txt", "67% tests passed, 1 tests failed out of 3\n"))
    assert "GH003" in codes(report)


def test_a_gpu_gone_from_nvidia_smi_on_a_passive_card_without_airflow_leads_with_the_airflow():
    # the GPU turns itself off at its shutdown temperature (GH406): a passive board without airflow explains a GPU
    # nvidia-smi can no longer reach
    lost = "Unable to determine the device handle for GPU 0000:01:00.0: Unknown Error\n"
    report = report_of(("nvidia-smi.txt", lost),
                       ("notes.txt", "The Tesla P4 has no fan of its own and gets very hot in this small case.\n"))
    first = report.findings[0]
    assert first.code == "GH406" and "GH102" in first.explains, [(f.code, f.message) for f in report.findings]


# --------------------------------------------------------------- a listing without /dev/nvidia-uvm beside CUDA's error

LS_NO_UVM = """\
$ ls -l /dev/nvidia*
crw-rw-rw- 1 root root 195,   0 Dec  7 10:00 /dev/nvidia0
crw-rw-rw- 1 root root 195, 255 Dec  7 10:00 /dev/nvidiactl
crw-rw-rw- 1 root root 195, 254 Dec  7 10:00 /dev/nvidia-modeset
"""


def test_a_listing_without_the_uvm_node_confirms_uvm_missing_beside_cudas_unknown_error():
    # the CUDA Installation Guide's Device Node Verification: CUDA needs /dev/nvidia-uvm, which exists once the
    # nvidia-uvm module loaded and its node was made; the driver's own nodes show the nvidia module itself is loaded
    report = report_of(("ls.txt", LS_NO_UVM), ("traceback.txt", TORCH_UNKNOWN + "\n"))
    first = report.findings[0]
    assert first.code == "GH205" and "GH605" in first.explains, [(f.code, f.message) for f in report.findings]
    assert any("absent: nvidia-uvm" in line for e in first.evidence for line in e.lines)


def test_the_listing_alone_stays_gh207s_warning():
    report = report_of(("ls.txt", LS_NO_UVM))
    assert [f.code for f in report.findings if f.severity is not Severity.INFO] == ["GH207"]
    assert report.findings[0].severity is Severity.WARNING
