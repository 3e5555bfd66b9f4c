"""Host, driver and hardware causes told in a person's words (knowledge/cause_phrases.csv: a driver updated without a
reboot, a GPU fallen off the bus, a runfile over packages, Fabric Manager down, thermal throttling, memory a finished
job holds, a process that keeps the GPU open, GSP firmware missing, an initramfs not rebuilt after the nouveau
blacklist, a dead fan). Alone, the cause's check leads as the reporter's words (a warning); beside a program's own
line of the symptom the cause leads and explains it; a control raises nothing; where the cause's check reads machine
output that shows otherwise, the machine wins. The sentences are written for these tests (hand-written, no case's
text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms
from smi_tables import a100_table

SMI_IDLE = (Path(__file__).parent / "data" / "corpus" / "gpud"
            / "accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid")  # 8 idle H100s


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def notes(words: str) -> tuple[str, str]:
    return ("notes.txt", words + "\n")


@pytest.mark.parametrize(("words", "code"), [
    ("Yesterday we updated the NVIDIA driver on the node and did not reboot it.", "GH202"),
    ("GPU 2 fell off the bus twice during the last week of training.", "GH302"),
    ("Somebody installed the runfile driver on top of the distro's nvidia-driver-535 package.", "GH509"),
    ("On the HGX box the nvidia-fabricmanager service failed to start.", "GH210"),
    ("The A100 keeps thermal throttling in the hot rack.", "GH406"),
    ("A crashed training run still holds 20 GB on the GPU.", "GH414"),
    ("nvidia-smi --gpu-reset failed because a python process is still using the GPU.", "GH901"),
    ("The GSP firmware files are missing for the installed nvidia driver.", "GH611"),
    ("I blacklisted nouveau, but the initramfs was never rebuilt.", "GH502"),
    ("The fan of the GPU has died.", "GH410"),
    ("昨天升级了 nvidia 驱动，服务器还没有重启。", "GH202"),
    ("服务器里一张显卡的风扇坏了。", "GH410"),
])
def test_a_story_alone_leads_with_its_cause_as_a_warning(words, code):
    report = report_of(notes(words))
    first = report.findings[0]
    assert first.code == code, [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"
    assert any(words in line for e in first.evidence for line in e.lines)
    assert not [f for f in report.findings if f.severity is Severity.CRITICAL]


@pytest.mark.parametrize(("machine", "words", "code", "explained"), [
    # nvidia-smi cannot reach the driver: the words say why (the module loaded is the one before the update)
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.", "We updated the nvidia driver yesterday and have not rebooted yet.",
     "GH202", "GH203"),
    # a GPU nvidia-smi cannot open: the words say it fell off the bus
    ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error", "The GPU fell off the bus during "
     "training.", "GH302", "GH102"),
])
def test_a_story_beside_the_machine_symptom_leads_and_explains_it(machine, words, code, explained):
    report = report_of(("smi.txt", machine + "\n"), notes(words))
    first = report.findings[0]
    assert first.code == code, [(f.code, f.message) for f in report.findings]
    assert explained in first.explains
    assert any(words in line for e in first.evidence for line in e.lines)


@pytest.mark.parametrize("words", [
    "After the driver update I rebooted and nvidia-smi works.",
    "If the GPU falls off the bus, check the power cables first.",
    "I removed the apt driver packages before running the .run installer.",
    "Fabric Manager is active and its version matches the driver.",
    "The GPU no longer throttles from heat since we added fans.",
    "The previous job holds no GPU memory.",
    "fuser shows no process on /dev/nvidia0.",
    "Is the GSP firmware missing?",
    "I rebuilt the initramfs after blacklisting nouveau and it is gone.",
    "The GPU fan spins fine under load.",
    "The case fan is dead but the GPU is cool.",
    "驱动更新后已经重启了，nvidia-smi 正常。",
    "机箱风扇坏了，但是显卡温度正常。",
])
def test_a_control_story_raises_nothing(words):
    assert not [t for t in told_symptoms(words) if t.cause], told_symptoms(words)
    report = report_of(notes(words))
    assert not [f for f in report.findings if f.severity is not Severity.INFO], \
        [(f.code, f.message) for f in report.findings]


@pytest.mark.parametrize("smi", [a100_table(), SMI_IDLE.read_text()])
def test_memory_shown_free_wins_over_the_words(smi):
    """memory-held-idle is a state nvidia-smi shows: GH414 read the table, found the memory free, and the machine output
    wins over the words."""
    report = report_of(("nvidia-smi.txt", smi), notes("The previous job still holds 30 GB on GPU 0."))
    assert "GH414" not in {f.code for f in report.findings}


def test_an_event_cause_is_not_overruled_by_a_healthy_table():
    """A throttling GPU or a runfile install is not something one nvidia-smi table at rest clears: the words stay."""
    for words, code in (("The A100 keeps thermal throttling in the hot rack.", "GH406"),
                        ("I installed the .run driver on top of the apt one.", "GH509")):
        report = report_of(("nvidia-smi.txt", a100_table()), notes(words))
        assert report.findings and report.findings[0].code == code
        assert report.findings[0].severity is Severity.WARNING


@pytest.mark.parametrize(("words", "cause"), [
    ("The driver got updated by apt this morning but the server was not rebooted.", "driver-library-mismatch"),
    ("apt upgraded libnvidia-compute and nvidia-utils but the machine has not been rebooted since.",
     "driver-library-mismatch"),
    ("The old nvidia module is still loaded after the upgrade.", "driver-library-mismatch"),
    ("Every few days a GPU goes off the bus and we have to power cycle the node.", "gpu-fallen-off-bus"),
    ("I previously installed the driver with the .run file and later with apt.", "install-routes-mixed"),
    ("We forgot to install the fabric manager on the H100 HGX.", "fabric-manager-failed"),
    ("The GPU downclocks due to temperature.", "thermal-slowdown"),
    ("Memory of the GPU is still held by a dead process after training crashed.", "memory-held-idle"),
    ("I can't switch MIG mode because a process still holds the GPU.", "compute-process-holds-gpu"),
    ("The GSP firmware isn't installed for the nvidia driver.", "gsp-firmware-missing"),
    ("The initramfs was built before I blacklisted nouveau.", "initramfs-stale"),
    ("nvidia-smi shows fan ERR! on GPU 2.", "fan-failed"),
])
def test_other_wordings_of_each_family_are_read(words, cause):
    assert cause in {t.cause for t in told_symptoms(words)}, told_symptoms(words)


@pytest.mark.parametrize("words", [
    "I updated pytorch and did not reboot.",
    "I downloaded the CUDA runfile and also installed python packages with pip.",
    "Fabric manager is running, but the training job failed with an OOM.",
    "My training process is using 20 GB of GPU memory, as expected.",
    "The power supply shut the server down when the GPUs started training, the PSU is too small.",
    "The fan is not running at idle, which is the zero-rpm mode of my GPU.",
])
def test_a_neighbouring_statement_is_not_one_of_these_causes(words):
    assert not [t for t in told_symptoms(words) if t.cause], told_symptoms(words)
