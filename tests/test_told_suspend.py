"""CUDA failing with an unknown error (999) after a suspend or hibernation, and a bare cuInit unknown error.

A bare cuInit CUDA_ERROR_UNKNOWN is the symptom cuda-init-unknown (knowledge/symptoms.csv): its differential starts
with nvidia_uvm not loaded and the device files missing (the CUDA installation guide's device node verification), then
a suspend that left nvidia_uvm unusable, then a driver/library mismatch; "CUDA newer than the driver" (error 35, not
999) is last, so it never leads without a version fact. A person saying the failure came after a suspend, resume or
hibernation (knowledge/cause_phrases.csv told-cuda-lost-after-suspend, -zh, -ja; NVIDIA's driver README, "Configuring
Power Management Support") names the cause uvm-broken-by-suspend: GH205 leads with its own fixes (reload nvidia_uvm;
the driver's suspend services with NVreg_PreserveVideoMemoryAllocations=1), not GH205's modprobe of a module that is
loaded. A suspend that is not the cause (a loud fan), a question and a suggested fix name nothing. The sentences are
written for these tests (hand-written, no case's text); the error lines follow the formats of XLA's cuda_driver.cc
("failed call to cuInit: <CUresult name>: <string>") and the CUDA Runtime API's error names.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity

CUINIT_999 = ("2026-12-08 10:00:00.000000: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] "
              "failed call to cuInit: CUDA_ERROR_UNKNOWN: unknown error\n")
JAX_FALLBACK = "No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)\n"
RUNTIME_999 = 'CUDA error at main.cu:42 code=999(cudaErrorUnknown) "cudaGetDeviceCount(&count)"\n'
LSMOD_UVM_LOADED = ("$ lsmod | grep nvidia\nnvidia_uvm           1384448  0\nnvidia_drm             77824  3\n"
                    "nvidia_modeset       1208320  4 nvidia_drm\n"
                    "nvidia              56102912  95 nvidia_uvm,nvidia_modeset\n")
RELOAD = "grep -q '^nvidia_uvm ' /proc/modules && sudo modprobe -r nvidia_uvm; sudo modprobe nvidia_uvm"


def findings_of(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", text) for i, text in enumerate(texts)])
    return run_checks(snapshot).findings


def _shown(findings) -> list[tuple[str, str]]:
    return [(f.code, f.message) for f in findings]


@pytest.mark.parametrize("error", [
    CUINIT_999, CUINIT_999 + JAX_FALLBACK, RUNTIME_999,
    "cudaGetDeviceCount returned 999\n-> unknown error\n",  # cuda-samples deviceQuery's format
    "[12/08/2026-10:00:00] [W] [TRT] CUDA initialization failure with error: 999.\n",  # TensorRT's
])
def test_a_bare_unknown_error_ranks_uvm_first_and_never_leads_with_a_too_new_cuda(error):
    findings = findings_of(error)
    first = findings[0]
    assert first.code == "GH610", _shown(findings)
    ranked = [c.cause for c in first.differential]
    assert ranked[:3] == ["uvm-missing", "device-nodes-missing", "uvm-broken-by-suspend"], ranked
    assert ranked.index("cuda-newer-than-driver") > ranked.index("driver-library-mismatch")
    assert "newer than the driver" not in first.message


@pytest.mark.parametrize("story", [
    "After resuming from suspend, cuInit fails with CUDA_ERROR_UNKNOWN.",
    "Every time after suspend the GPU is not available any more, only a reboot brings it back.",
    "After waking the laptop up from sleep, TensorFlow cannot find the GPU.",
    "CUDA stops working after the laptop went to sleep.",
    "After hibernation every CUDA script fails with an unknown error.",
    "I keep notebooks open that hold GPU memory, and after resuming I get this error:",
    "笔记本挂起后 CUDA 就报错 unknown error。",
    "サスペンドから復帰した後、CUDAがエラーになります。",
])
def test_a_failure_told_after_a_suspend_leads_with_gh205_and_the_reload(story):
    findings = findings_of(story + "\n", CUINIT_999)
    first = findings[0]
    assert first.code == "GH205", _shown(findings)
    assert "suspend" in first.message and "GH610" in first.explains
    commands = [f.command for f in first.fixes]
    assert RELOAD in commands and "sudo modprobe nvidia_uvm" not in commands
    assert any("NVreg_PreserveVideoMemoryAllocations=1" in c for c in commands)
    assert any("nvidia-suspend.service" in c for c in commands)
    assert any(e.source.endswith("(the reporter's words)") for e in first.evidence)


def test_nvidia_uvm_shown_loaded_does_not_overrule_a_suspend_it_survives():
    # after a suspend the module is still loaded (that is the trouble): lsmod cannot rule the words out
    findings = findings_of("CUDA stops working after the laptop went to sleep.\n", LSMOD_UVM_LOADED + CUINIT_999)
    assert findings[0].code == "GH205", _shown(findings)
    assert "suspend" in findings[0].message


def test_the_words_alone_are_a_warning_naming_the_cause():
    findings = findings_of("CUDA stops working after the laptop went to sleep.\n")
    first = findings[0]
    assert first.code == "GH205" and first.severity is Severity.WARNING, _shown(findings)
    assert first.labels.get("reported") == "words"


@pytest.mark.parametrize("words", [
    "After suspend the fan is loud.",  # a suspend, but not what broke CUDA
    "Does CUDA fail after suspend for anyone else?",  # a question
    "If CUDA fails after suspend, reload nvidia_uvm.",  # a suggested fix
    "It fails even after a fresh reboot, not only after suspend.",  # the suspend ruled out
])
def test_a_suspend_that_is_not_the_cause_leaves_the_differential(words):
    findings = findings_of(words + "\n", CUINIT_999)
    assert findings[0].code == "GH610", _shown(findings)
    assert not any("suspend" in f.message for f in findings if f.code == "GH205")


def test_a_modprobe_of_nvidia_uvm_that_fixed_it_confirms_the_module_was_not_loaded():
    findings = findings_of(CUINIT_999, "Running sudo modprobe nvidia-uvm fixed it.\n")
    first = findings[0]
    assert first.code == "GH205" and "not loaded" in first.message, _shown(findings)


def test_end_to_end_through_analyze_stdin():
    done = subprocess.run([sys.executable, "-m", "gpuhealth", "analyze", "-"], capture_output=True, text=True,
                          input="CUDA stops working after the laptop went to sleep.\n" + CUINIT_999, timeout=120)
    assert done.returncode == 2, done.stderr
    lead = done.stdout.split("\n\n")[1]
    assert lead.lstrip().startswith("CRITICAL GH205") and RELOAD in lead, done.stdout


# --------------------------------------------------------------------------- the suspend path's own lines

# formats from the driver's source (kernel-open/nvidia/nv.c, os-interface.c), systemd's (src/core/service.c, job.c)
# for NVIDIA's units, and bash's echo error in nvidia-sleep.sh; timestamps and host names written for these tests
PROCFS_BYPASSED = ("[  363.611590] NVRM: GPU 0000:02:00.0: PreserveVideoMemoryAllocations module parameter is set. "
                   "System Power Management attempted without driver procfs suspend interface. Please refer to the "
                   "'Configuring Power Management Support' section in the driver README.\n")
TMPFILE_MISSING = ("[   50.100000] NVRM: The temporary file path specified via the NVreg_TemporaryFilePath\n"
                   "[   50.100001] NVRM: module parameter does not exist. Defaulting to /tmp.\n")
SYSTEMD = "Dec 08 10:00:01 gpubox systemd[1]: "
UNIT_FAILED = ("Dec 08 10:00:01 gpubox nvidia-sleep.sh[4321]: /usr/bin/nvidia-sleep.sh: line 20: echo: write error: "
               "Input/output error\n"
               f"{SYSTEMD}nvidia-resume.service: Main process exited, code=exited, status=1/FAILURE\n"
               f"{SYSTEMD}nvidia-resume.service: Failed with result 'exit-code'.\n"
               f"{SYSTEMD}Failed to start nvidia-resume.service - NVIDIA system resume actions.\n")
UNIT_FINISHED = (f"{SYSTEMD}nvidia-suspend.service: Deactivated successfully.\n"
                 f"{SYSTEMD}Finished nvidia-suspend.service - NVIDIA system suspend actions.\n")


@pytest.mark.parametrize("lines, cause", [
    (PROCFS_BYPASSED, "NVreg_PreserveVideoMemoryAllocations=1 is set"),
    (TMPFILE_MISSING, "NVreg_TemporaryFilePath names a directory that does not exist"),
    (UNIT_FAILED, "nvidia-sleep.sh"),
])
def test_a_suspend_path_line_alone_names_its_cause_under_gh804(lines, cause):
    findings = findings_of(lines)
    first = findings[0]
    assert first.code == "GH804" and first.severity is Severity.WARNING, _shown(findings)
    assert first.message.startswith(cause), first.message
    assert not any(f.code in ("GH308", "GH003") for f in findings), _shown(findings)  # not a generic driver error
    assert {line.strip() for e in first.evidence for line in e.lines} >= {line.strip() for line in lines.splitlines()}
    assert first.fixes


def test_a_service_that_finished_is_no_failure():
    assert not any(f.code == "GH804" for f in findings_of(UNIT_FINISHED))


def test_a_failed_resume_service_beside_cuinit_999_explains_it():
    findings = findings_of(UNIT_FAILED + CUINIT_999)
    first = findings[0]
    assert first.code == "GH804" and "GH610" in first.explains, _shown(findings)
    assert RELOAD in [f.command for f in first.fixes]


# the driver's own suspend/resume messages (knowledge/mined/nvrm.csv, family suspend-resume of mined_families.csv), in
# the formats of src/nvidia/src/kernel/gpu/gpu_suspend.c and mem_mgr_pwr_mgmt.c
GSP_RESUME_FAILED = "[ 9000.100000] NVRM: _kgspBootGspRm: GSP boot failed at resume (bootMode 0x1): 0x55\n"
RESUME_ON_ACTIVE = ("[ 9000.100000] NVRM: GPU 0000:01:00.0: !!!!! Calling Resume on an active GPU or the previous "
                    "Suspend call might have failed !!!!!!\n")


@pytest.mark.parametrize("line", [GSP_RESUME_FAILED, RESUME_ON_ACTIVE])
def test_a_driver_line_of_a_failed_resume_means_the_suspend_path(line):
    findings = findings_of(line)
    mined = [f for f in findings if f.code == "GH308"]
    assert mined and mined[0].labels["family"] == "suspend-resume", _shown(findings)
    assert "suspending, hibernating or resuming the GPU failed" in mined[0].message


def test_a_failed_resume_in_the_kernel_log_puts_the_suspend_first_among_cuinit_999s_causes():
    snapshot, _ = analyze_texts([("dmesg.txt", GSP_RESUME_FAILED), ("error.txt", CUINIT_999)])
    findings = run_checks(snapshot).findings
    gh610 = next(f for f in findings if f.code == "GH610")
    top = gh610.differential[0]
    assert top.cause == "uvm-broken-by-suspend" and top.status == "open", gh610.differential[:3]
    assert "GSP boot failed at resume" in top.why


def test_a_listing_without_nvidia_uvm_beside_the_words_still_gets_a_fix_that_loads_it():
    # the machine shows the module not loaded: the words' reload must load it too, not stop at a failed unload
    listing = ("$ ls -l /dev/nvidia*\ncrw-rw-rw- 1 root root 195,   0 Dec  8 10:00 /dev/nvidia0\n"
               "crw-rw-rw- 1 root root 195, 255 Dec  8 10:00 /dev/nvidiactl\n")
    findings = findings_of("CUDA stops working after the laptop went to sleep.\n", listing, CUINIT_999)
    assert findings[0].code == "GH205", _shown(findings)
    assert RELOAD in [f.command for f in findings[0].fixes]
    assert RELOAD.endswith("; sudo modprobe nvidia_uvm")  # the load runs whether or not an unload ran
