"""Lines that rule causes out (knowledge/rules_out.csv): each rule fires on its row's real line and stays quiet on a
near miss; the ranking and the JSON differential follow it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import rank
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.knowledge import causes as causes_mod
from gpuhealth.knowledge.causes import exclusions, symptoms
from gpuhealth.knowledge.signatures import match_line, signature
from gpuhealth.model import MessageLine

# Real lines, as the tools printed them.
FOUND_NO_DRIVER = ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                   "installed a driver from http://www.nvidia.com/Download/index.aspx")  # princeton-nlp/SimCSE#244
NO_DEVICE = "RuntimeError: CUDA error: no CUDA-capable device is detected"  # tests/test_environment_checks.py's line
TOO_OLD = ("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
           "Please update your GPU driver")  # the torch-driver-too-old row's example
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"  # facebookresearch/detectron2#460
INSUFFICIENT = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"
# a lab's runbook quoting nvidia-smi on a GPU lost at runtime
GPU_LOST = ("Unable to determine the device handle for GPU 0000:8C:00.0: GPU is lost.  Reboot the system to recover "
            "this GPU.")
# NVIDIA/open-gpu-kernel-modules#387
HANDLE_UNKNOWN = "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"


def differential(*lines: str) -> dict[str, object]:
    """cause id -> Candidate, over every finding's differential, for a paste of ``lines``."""
    snapshot, _ = analyze_texts([("paste.txt", "\n".join(lines) + "\n")])
    report = run_checks(snapshot)
    return {c.cause: c for f in report.findings for c in f.differential}


def leading(*lines: str):
    snapshot, _ = analyze_texts([("paste.txt", "\n".join(lines) + "\n")])
    report = run_checks(snapshot)
    return next(f for f in report.findings if f.differential)


# a real line for a row whose own example another, more specific row reads first
OTHER_REAL_LINE = {
    # NVIDIA/open-gpu-kernel-modules#259
    "smi-device-handle": "Unable to determine the device handle for GPU 0000:D8:00.0: Not Found",
    # Zeleni9/pytorch-wgan#36 (an error number no more specific row names)
    "torch-cuda-init-unexpected-device-count": "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run "
    "some cuda functions before calling NumCudaDevices() that might have already set an error? Error 2: out of memory",
}
RULES = [(rule.signature, rule.cause) for rules in exclusions().values() for rule in rules]


def test_the_table_is_sourced_and_every_rule_names_a_cause_of_its_lines_symptom():
    assert len(RULES) >= 10
    for rules in exclusions().values():
        for rule in rules:
            sig = signature(rule.signature)
            assert rule.cause in {c.id for c in symptoms()[sig.symptom].causes}
            assert rule.cause != sig.cause
            assert rule.why.strip() and rule.source_title.strip() and rule.source_url.startswith("https://")


@pytest.mark.parametrize(("signature_id", "cause_id"), RULES)
def test_each_rule_fires_on_its_rows_real_line(signature_id: str, cause_id: str):
    example = OTHER_REAL_LINE.get(signature_id, signature(signature_id).example)
    row = match_line(example)
    assert row.id == signature_id  # the row's own real line is read as that row
    # ranked under the row's symptom: a line whose own check confirms its cause (the driver core's failed-probe
    # line is GH305's event) shows no differential in a report, yet its rules apply wherever the symptom is open
    line = MessageLine(example, "paste.txt", row.id, row.symptom or None)
    candidate = next(c for c in rank(symptoms()[row.symptom], [], [line], set(), {}) if c.cause == cause_id)
    assert candidate.status == "ruled out"
    assert "ruled out by the line: " in candidate.why and candidate.source and "https://" in candidate.source


@pytest.mark.parametrize(("line", "cause_id", "lead"), [
    # a driver too old for the wheel is its own message: it confirms what "Found no NVIDIA driver" rules out
    (TOO_OLD, "cuda-newer-than-driver", "GH601"),
    (INSUFFICIENT, "cuda-newer-than-driver", "GH601"),
    (NOT_COMPILED, "torch-cpu-build", "GH605"),
    # "GPU is lost" names its cause; the device-handle rules are about the other NVML errors and leave it alone
    (GPU_LOST, "probe-failed", "GH302"),
])
def test_a_near_miss_does_not_rule_out(line: str, cause_id: str, lead: str):
    snapshot, _ = analyze_texts([("paste.txt", line + "\n")])
    report = run_checks(snapshot)
    assert report.findings[0].code == lead
    assert all(c.status != "ruled out" for f in report.findings for c in f.differential if c.cause == cause_id)


def test_found_no_driver_rules_out_a_cpu_only_build_and_the_driver_leads():
    top = leading(FOUND_NO_DRIVER)
    assert top.code == "GH605"
    assert top.differential[0].cause == "driver-not-loaded"
    assert "most likely the NVIDIA kernel module is not loaded" in top.message
    ranked = {c.cause: c for c in top.differential}
    assert ranked["torch-cpu-build"].status == "ruled out"
    assert "only a CUDA build" in ranked["torch-cpu-build"].why
    # the ruled-out causes rank last
    statuses = [c.status for c in top.differential]
    assert statuses == sorted(statuses, key=lambda s: {"confirmed": 0, "open": 1, "ruled out": 2}[s])


def test_no_cuda_capable_device_is_not_led_by_cuda_newer_than_the_driver():
    top = leading(NO_DEVICE)
    assert top.code == "GH610"
    assert top.differential[0].cause != "cuda-newer-than-driver"
    assert {c.cause: c for c in top.differential}["cuda-newer-than-driver"].status == "ruled out"


def test_a_line_that_confirms_a_cause_beats_a_line_that_would_rule_it_out():
    snapshot, _ = analyze_texts([("paste.txt", f"{FOUND_NO_DRIVER}\n{NOT_COMPILED}\n")])
    ranked = rank(symptoms()["torch-no-gpu"], [], snapshot.messages, set(), {})
    assert (ranked[0].cause, ranked[0].status) == ("torch-cpu-build", "confirmed")
    assert {c.cause: c.status for c in ranked}["cuda-newer-than-driver"] == "ruled out"
    report = run_checks(snapshot)
    assert report.findings[0].code == "GH605" and not report.findings[0].differential  # decided: no differential


def test_device_handle_unknown_error_rules_out_causes_that_keep_the_gpu_from_the_driver():
    ranked = differential(HANDLE_UNKNOWN)
    assert {ranked[c].status for c in ("probe-failed", "nouveau-bound", "driver-gpu-unsupported")} == {"ruled out"}
    assert ranked["gpu-fallen-off-bus"].status == "open" and ranked["rminit-failed"].status == "open"


def test_json_differential_says_why_and_cites_the_rule():
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=FOUND_NO_DRIVER + "\n")
    document = json.loads(result.stdout)
    entries = [c for f in document["findings"] for c in f.get("differential", [])]
    ruled = next(c for c in entries if c["cause"] == "torch-cpu-build")
    assert ruled["status"] == "ruled out"
    assert ruled["why"].endswith(f"(ruled out by the line: {FOUND_NO_DRIVER[:100]})")
    assert ruled["source"].startswith("PyTorch c10/cuda/CUDAFunctions.cpp")
    assert all("source" not in c for c in entries if c["status"] == "open")


def test_text_report_gives_the_rules_reason():
    result = CliRunner().invoke(main, ["analyze", "-"], input=FOUND_NO_DRIVER + "\n")
    assert "ruled out: the installed PyTorch is a CPU-only build" in result.output
    assert "(only a CUDA build of PyTorch prints it" in result.output  # the reason, on the next line when long


def test_a_bad_rule_is_refused(monkeypatch):
    header = "signature,cause,why,source_title,source_url\n"
    for row, message in [
        ("no-such-row,torch-cpu-build,x,t,https://x", "unknown signature"),
        ("torch-found-no-driver,no-such-cause,x,t,https://x", "unknown cause"),
        ("torch-found-no-driver,gpu-fallen-off-bus,x,t,https://x", "is not a cause of"),
        ("torch-found-no-driver,torch-cpu-build,,t,https://x", "why is empty"),
    ]:
        monkeypatch.setattr(causes_mod, "_read", _reader(header + row + "\n"))
        causes_mod._exclusions.cache_clear()
        with pytest.raises(ValueError, match=message):
            causes_mod.exclusions()
    monkeypatch.undo()
    causes_mod._exclusions.cache_clear()


def _reader(text: str):
    real = causes_mod._read

    def read(name: str) -> list[dict[str, str]]:
        if name != "rules_out.csv":
            return real(name)
        import csv
        import io
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]
    return read


def test_cuda_unknown_error_is_not_led_by_a_cpu_only_build():
    """PyTorch's 'CUDA initialization: CUDA unknown error' comes from a CUDA build (field report walkthrough, F3)."""
    top = leading(signature("torch-cuda-unknown-error").example)
    assert top.code == "GH605"
    ranked = {c.cause: c for c in top.differential}
    assert ranked["torch-cpu-build"].status == "ruled out"
    assert ranked["cuda-newer-than-driver"].status == "ruled out"
    assert top.differential[0].cause not in ("torch-cpu-build", "cuda-newer-than-driver")
    assert "CPU-only" not in top.message


def test_several_ruled_out_causes_are_listed_one_per_line():
    """The line "Unable to determine the device handle ...: Unknown Error" rules out three causes; the text report
    lists them one per line, aligned, instead of one line of several hundred characters."""
    result = CliRunner().invoke(main, ["analyze", "-"], input=HANDLE_UNKNOWN + "\n", env={"COLUMNS": "80"})
    lines = result.output.splitlines()
    lead = "    ruled out: "
    first = next(i for i, line in enumerate(lines) if line.startswith(lead))
    block = [lines[first]]
    for line in lines[first + 1:]:
        if not line.startswith(" " * len(lead)):
            break
        block.append(line)
    # a cause starts at the lead's column; its wrapped words and its reason are indented further
    causes = [line[len(lead):] for line in block if not line[len(lead)].isspace()]
    assert {c.split(" (", 1)[0] for c in causes} >= {"the driver probed no GPU", "the nouveau driver owns the GPU"}
    assert len(causes) == 3 and max(len(line) for line in block) <= 80
    joined = " ".join(" ".join(block).split())
    assert "(nvidia-smi names only GPUs the nvidia module attached" in joined  # every reason is kept


def test_pytorchs_device_count_warning_rules_out_a_cpu_only_build():
    # only a CUDA build calls cudaGetDeviceCount (c10/cuda/CUDAFunctions.cpp); the line is PyTorch's format
    line = ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
            "functions before calling NumCudaDevices() that might have already set an error?\n")
    report = run_checks(analyze_texts([("log.txt", line)])[0])
    gh605 = next(f for f in report.findings if f.code == "GH605")
    assert ("torch-cpu-build", "ruled out") in {(c.cause, c.status) for c in gh605.differential}
