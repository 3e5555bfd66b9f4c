"""A refused `nvidia-smi --gpu-reset` ("is currently in use by another process"): a warning under GH901 whose
differential names what may hold the GPU and the commands that tell which. Lines: the catalogue's real examples
(cupy/cupy#1930, NVIDIA/gpu-operator#118) and the gpu-operator#118 case of tests/cases/."""

from __future__ import annotations

from pathlib import Path

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import next_commands
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import match_line, signature
from gpuhealth.model import Severity

CASE = Path(__file__).parent / "cases" / "dev" / "mig-change-pending-disable-persistenced-holds-gpu-operator-118"


def report_of(text: str):
    snapshot, _ = analyze_texts([("session.txt", text)])
    return run_checks(snapshot)


def test_both_lines_of_a_refused_reset_are_known():
    for row in ("smi-reset-gpu-in-use", "smi-reset-devices-in-use"):
        found = match_line(signature(row).example)
        assert found is not None and found.id == row
        assert found.symptom == "gpu-reset-refused" and found.severity == "warning"
    # the MIG mode warning's own "is currently being used" line is not a refused reset
    assert match_line("00000000:C1:00.0 is currently being used by one or more other processes (e.g. CUDA application "
                 "or a monitoring application such as another instance of nvidia-smi).") is None


def test_a_refused_reset_is_a_warning_with_the_holders_and_the_commands_that_tell():
    paste = ("$ sudo nvidia-smi --gpu-reset -i 1\n" + signature("smi-reset-gpu-in-use").example + "\n\n"
             + signature("smi-reset-devices-in-use").example + "\n")
    report = report_of(paste)
    [finding] = [f for f in report.findings if f.code == "GH901"]
    assert finding.severity is Severity.WARNING
    assert [c.cause for c in finding.differential] == [
        "compute-process-holds-gpu", "persistenced-holds-gpu", "gpu-service-holds-gpu", "display-holds-gpu"]
    assert all(c.status == "open" for c in finding.differential)
    commands = next_commands(report.findings)
    assert commands[:2] == ["nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv",
                            "sudo fuser -v /dev/nvidia*"]
    assert "systemctl status nvidia-persistenced" in commands
    assert any("nv-hostengine" in c for c in commands)
    assert not any(f.severity is Severity.CRITICAL for f in report.findings)


def test_the_mig_session_keeps_the_pending_change_in_the_lead_and_names_the_reset_refusal():
    report = report_of((CASE / "session.txt").read_text())
    assert [f.code for f in report.findings] == ["GH409", "GH901"]
    assert "refused to reset" in report.findings[1].message


def test_the_multi_gpu_wording_of_a_refused_reset_is_the_same_symptom_not_a_runtime_error():
    # nvidia-smi's reset of several GPUs lists each with NVML_ERROR_IN_USE's string ("In use by another client"),
    # the catalogue's real examples (NVIDIA/NVSentinel#1690): a refused reset (GH901), not a failed GPU job (GH806)
    for row in ("smi-reset-in-use", "nvml-in-use"):
        found = match_line(signature(row).example)
        assert found is not None and found.id == row and found.symptom == "gpu-reset-refused"
    text = "The following GPUs could not be reset:\n  GPU 00000000:1A:00.0: In use by another client\n"
    report = report_of(text)
    codes = [f.code for f in report.findings if f.severity is not Severity.INFO]
    assert codes == ["GH901"]
    (gh901,) = [f for f in report.findings if f.code == "GH901"]
    assert any("nvidia_drm" in c.title for c in gh901.differential)
