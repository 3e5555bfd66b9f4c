"""Software, CUDA and container causes told in words (knowledge/cause_phrases.csv: the container toolkit missing, the
image shipping driver libraries, CUDA_VISIBLE_DEVICES hiding GPUs, a CPU-only torch, CUDA newer than the driver,
several CUDA versions on the path, a CUDA library missing, an extension built for another torch, a GPU the torch build
has no kernels for, no device plugin on the node). A story alone is the reporter's words: a warning under the cause's
check; beside a machine symptom that cause leads; a control story (fixed, supposed, asked, working) raises nothing.
The sentences are written for these tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms


def findings_of(text: str):
    snapshot, _ = analyze_texts([("notes.txt", text)])
    return run_checks(snapshot).findings


@pytest.mark.parametrize(("story", "cause", "code"), [
    ("We never set up the nvidia container toolkit on the new build host.", "container-toolkit-missing", "GH802"),
    ("The docker run line was missing --gpus all.", "container-toolkit-missing", "GH802"),
    ("Our base image bundles its own libnvidia-ml.so.1 from an old driver.", "image-ships-driver-libs", "GH802"),
    ("The kubelet shows no nvidia.com/gpu resource because the gpu-operator was never deployed.",
     "device-plugin-missing", "GH802"),
    ("CUDA_VISIBLE_DEVICES was exported in my .profile and masks the second card.", "cuda-visible-devices-hides",
     "GH608"),
    ("Conda picked the cpuonly variant of pytorch for this environment.", "torch-cpu-build", "GH605"),
    ("The container's CUDA 12.8 is newer than the host's driver.", "cuda-newer-than-driver", "GH601"),
    ("LD_LIBRARY_PATH pointed at the old CUDA 11.2 toolkit while torch wanted 12.1 libraries.",
     "several-cuda-libraries", "GH602"),
    ("libnvrtc is not installed in this slim image.", "cuda-library-missing", "GH612"),
    ("The detectron2 build was compiled against an older pytorch than the one in the venv.",
     "torch-extension-mismatch", "GH627"),
    ("The H200 is fine but the old tensorflow wheel has no kernels for this architecture.",
     "torch-arch-unsupported", "GH606"),
])
def test_a_story_alone_is_the_causes_warning_in_the_reporters_words(story, cause, code):
    assert cause in [t.cause for t in told_symptoms(story)]
    first = findings_of(story + "\n")[0]
    assert first.code == code, first
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"


@pytest.mark.parametrize(("story", "machine", "code"), [
    ("The NVIDIA Container Toolkit is not installed on this host.",
     "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].\n",
     "GH802"),
    ("CUDA_VISIBLE_DEVICES was set to an empty string in my .bashrc.", "RuntimeError: No CUDA GPUs are available\n",
     "GH608"),
    ("The driver is too old for CUDA 12.4.",
     "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n", "GH601"),
    ("My RTX 5090 (sm_120) is too new for the installed torch.",
     "RuntimeError: CUDA error: no kernel image is available for execution on the device\n", "GH606"),
    ("The node doesn't advertise nvidia.com/gpu at all.",
     "  Warning  FailedScheduling  default-scheduler  0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n",
     "GH802"),
])
def test_a_story_beside_a_machine_symptom_leads_with_the_cause(story, machine, code):
    findings = findings_of(story + "\n" + machine)
    assert findings[0].code == code, [(f.code, f.message) for f in findings]
    assert "reporter" in findings[0].message  # the cause the words name, beside the symptom the machine shows


def test_a_reported_extension_is_named_from_the_sentence_not_its_last_word():
    first = findings_of("flash-attn was built for a different torch version than the one installed.\n")[0]
    assert first.code == "GH627" and first.message.startswith("flash-attn cannot load"), first.message


@pytest.mark.parametrize("words", [
    "I installed the NVIDIA Container Toolkit and the container runs with --gpus all.",
    "If CUDA_VISIBLE_DEVICES is set to an empty string, no GPU is visible to CUDA.",
    "torch was the CPU build at first, but after reinstalling from the cu121 index it works.",
    "Should I install the nvidia driver inside the image?",
    "The device plugin is deployed and the node lists nvidia.com/gpu: 8.",
    "Is libcudnn missing from the image?",
    "LD_LIBRARY_PATH pointed to the old CUDA, but after fixing .bashrc the right libcudart loads.",
    "Two CUDA versions side by side are fine.",
    "The driver is new enough for CUDA 12.4 and torch uses 12.1.",
    "Build xformers against the same torch you run it with.",
])
def test_a_control_story_raises_nothing(words):
    assert not [t for t in told_symptoms(words) if t.cause]
    assert not [f for f in findings_of(words + "\n") if f.severity in (Severity.WARNING, Severity.CRITICAL)]


def test_the_told_rows_of_this_share_cite_their_sources():
    from gpuhealth.knowledge.symptom_phrases import phrases

    share = {"container-toolkit-missing", "image-ships-driver-libs", "cuda-visible-devices-hides", "torch-cpu-build",
             "cuda-newer-than-driver", "several-cuda-libraries", "cuda-library-missing", "torch-extension-mismatch",
             "torch-arch-unsupported", "device-plugin-missing"}
    rows = [row for row in phrases() if row.cause in share]
    assert {row.cause for row in rows} == share
    for row in rows:
        assert row.source_url.startswith("https://") and row.source_title
        assert len(row.examples) >= 5 and len(row.counterexamples) >= 5


@pytest.mark.parametrize(("words", "cause"), [
    ("I didn't configure docker for the nvidia runtime.", "container-toolkit-missing"),
    ("The default runtime is not nvidia in daemon.json.", "container-toolkit-missing"),
    ("The Docker image already contains the NVIDIA driver.", "image-ships-driver-libs"),
    ("Someone exported CUDA_VISIBLE_DEVICES=\"\" in /etc/environment.", "cuda-visible-devices-hides"),
    ("The notebook sets CUDA_VISIBLE_DEVICES to a GPU that does not exist.", "cuda-visible-devices-hides"),
    ("torch was installed without CUDA support.", "torch-cpu-build"),
    ("The system libcudart shadows the conda one.", "several-cuda-libraries"),
    ("The old CUDA 9 libraries are still found first.", "several-cuda-libraries"),
    ("libcudnn.so.8 can't be found.", "cuda-library-missing"),
    ("PyTorch does not support my GTX 760 anymore.", "torch-arch-unsupported"),
    ("Torch has no kernel image for my card's architecture.", "torch-arch-unsupported"),
    ("We don't run the GPU operator.", "device-plugin-missing"),
    ("No nvidia.com/gpu shows up on the node.", "device-plugin-missing"),
])
def test_wordings_beyond_the_rows_examples_are_read(words, cause):
    assert cause in [t.cause for t in told_symptoms(words)]


@pytest.mark.parametrize("words", [
    "The toolkit installed CUDA 12.4 under /usr/local.",
    "Docker's default runtime is nvidia.",
    "The image contains the CUDA toolkit and cuDNN.",
    "My job script sets CUDA_VISIBLE_DEVICES to 0 and it trains.",
    "The CPU version is slower than the GPU one, as expected.",
    "The driver supports CUDA 12.4, newer than torch needs.",
    "The driver does not support my GTX 760 anymore.",
    "torch 2.5 no longer supports my GPU after the kernel update.",
    "nvidia.com/gpu: 8 shows up on the node.",
])
def test_neighbouring_wordings_name_none_of_these_causes(words):
    share = {"container-toolkit-missing", "image-ships-driver-libs", "cuda-visible-devices-hides", "torch-cpu-build",
             "cuda-newer-than-driver", "several-cuda-libraries", "cuda-library-missing", "torch-extension-mismatch",
             "torch-arch-unsupported", "device-plugin-missing"}
    assert not share & {t.cause for t in told_symptoms(words)}
