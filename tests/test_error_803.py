"""CUDA error 803 (cudaErrorSystemDriverMismatch): a symptom with a differential, decided only by evidence.

NVIDIA's meaning (CUDA Runtime API, cudaErrorSystemDriverMismatch): "a mismatch between the versions of the display
driver and the CUDA driver". Its causes: a forward-compat libcuda ahead of the driver's (GH603), a driver upgraded
without reloading the module (GH202), an old libcuda left on the loader path (GH603). Evidence: lines and files of
tests/cases/ (vllm-project/vllm#33116, NVIDIA/nvidia-container-toolkit#1679, driver-library-mismatch-ci-runner).
"""

from __future__ import annotations

from pathlib import Path

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import CONFIRMED, OPEN, RULED_OUT, narrowed_to_one_check, next_commands
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.causes import symptoms
from gpuhealth.knowledge.signatures import signature
from gpuhealth.model import Candidate
from gpuhealth.report.common import fold

CASES = Path(__file__).parent / "cases" / "dev"
VLLM = CASES / "stale-libcuda-compat-ldconf-vllm-image-33116" / "session.txt"
THOR = CASES / "stale-libcuda-compat-ldconfig-thor-container-toolkit-1679"
ERROR_803 = next(line for line in VLLM.read_text().splitlines() if "Error 803" in line)
NVML_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"  # driver-library-mismatch-ci-runner


def report(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def lead(result):
    return fold(result.findings)[0].finding


def statuses(finding) -> dict[str, str]:
    return {c.cause: c.status for c in finding.differential}


def test_803_alone_is_a_symptom_with_the_three_causes_open():
    result = report(("paste.txt", ERROR_803 + "\n"))
    top = lead(result)
    assert top.code == "GH901" and "803" in top.message and "most likely a CUDA forward-compatibility" in top.message
    assert statuses(top) == {"compat-libcuda": OPEN, "driver-library-mismatch": OPEN, "stale-libcuda": OPEN}
    assert "GH603" not in [f.code for f in result.findings]  # nothing shows a stale or compat libcuda
    commands = next_commands(result.findings)
    assert {"ldconfig -p | grep libcuda", "cat /proc/driver/nvidia/version", "nvidia-smi"} <= set(commands)
    assert not any(f.disruptive for f in top.fixes)  # a prior-only lead gets the commands that decide, no reboot


def test_803_beside_an_nvml_version_mismatch_is_the_driver_upgraded_without_a_reload():
    result = report(("paste.txt", f"{ERROR_803}\n$ nvidia-smi\n{NVML_MISMATCH}\n"))
    top = lead(result)
    assert top.code == "GH202" and "GH901" in top.explains
    assert "GH603" not in [f.code for f in result.findings]


def test_xla_kernel_dso_mismatch_is_the_same_differential_not_a_stale_libcuda():
    # XLA's "kernel version 550.120.0 does not match DSO version 560.35.5": a newer DSO is as often a driver upgraded
    # without a reload as a compat or stale libcuda; the line alone decides none of them
    xla = signature("xla-kernel-dso-version-mismatch").example
    result = report(("tf.log", xla + "\n"))
    top = lead(result)
    assert top.code == "GH901" and "different versions" in top.message
    assert set(statuses(top).values()) == {OPEN}
    assert "GH603" not in [f.code for f in result.findings]
    top = lead(report(("paste.txt", f"{xla}\n$ nvidia-smi\n{NVML_MISMATCH}\n")))
    assert top.code == "GH202"


def test_803_with_a_working_nvidia_smi_leaves_only_gh603():
    # vllm#33116: nvidia-smi on the host answers (driver 580.105.08), so module and user space agree: GH202 is ruled
    # out, and both causes left are GH603's (the image's compat libcuda, or a stale copy): GH603 leads, still open
    result = report(("session.txt", VLLM.read_text()))
    top = lead(result)
    assert top.code == "GH603" and "GH901" in top.explains
    assert statuses(top) == {"compat-libcuda": OPEN, "stale-libcuda": OPEN, "driver-library-mismatch": RULED_OUT}
    assert "ldconfig -p | grep libcuda" in next_commands(result.findings)


def test_803_with_the_compat_libcuda_first_on_the_loader_path_is_decided():
    result = report(*[(p.name, p.read_text()) for p in sorted(THOR.iterdir()) if p.name != "case.toml"])
    top = lead(result)
    assert top.code == "GH603" and "compatibility libcuda /usr/local/cuda-13.0/compat/libcuda.so.1" in top.message
    assert top.severity.name == "CRITICAL"  # the copy alone is a warning; the 803 beside it shows the failure


def test_the_compat_copy_alone_is_a_warning_that_says_when_it_is_right():
    result = report(("ldconfig.txt", (THOR / "ldconfig.txt").read_text()))
    found = [f for f in result.findings if f.code == "GH603"]
    assert len(found) == 1 and found[0].severity.name == "WARNING" and "data-center GPU" in found[0].message


def test_a_bare_ldconfig_command_line_heads_its_rows():
    # #1679 pasted the command without a prompt, with a leading space, above the rows
    snapshot, _ = analyze_texts([("ldconfig.txt", (THOR / "ldconfig.txt").read_text())])
    assert snapshot.cuda is not None and snapshot.cuda.libcuda_path == "/usr/local/cuda-13.0/compat/libcuda.so.1"


def test_gh603_does_not_rule_out_what_it_could_not_compare():
    # a libcuda.so.1 that is the driver's (no compat path) with no module version: nothing to compare, so skipped
    text = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    result = report(("ldconfig.txt", text))
    assert "GH603" in {s.code for s in result.skipped}


def candidate(cause: str, code: str, status: str) -> Candidate:
    return Candidate(cause, cause, code, status, "", "")


def test_elimination_needs_a_ruled_out_cause_and_one_check_left():
    symptom = symptoms()["cuda-driver-mismatch"]
    left = [candidate("compat-libcuda", "GH603", OPEN), candidate("stale-libcuda", "GH603", OPEN),
            candidate("driver-library-mismatch", "GH202", RULED_OUT)]
    assert narrowed_to_one_check(symptom, left).cause == "compat-libcuda"
    nothing_ruled_out = [candidate("compat-libcuda", "GH603", OPEN), candidate("stale-libcuda", "GH603", OPEN)]
    assert narrowed_to_one_check(symptom, nothing_ruled_out) is None
    two_checks = [*left[:2], candidate("driver-library-mismatch", "GH202", OPEN)]
    assert narrowed_to_one_check(symptom, two_checks) is None
    confirmed = [candidate("compat-libcuda", "GH603", CONFIRMED), *left[1:]]
    assert narrowed_to_one_check(symptom, confirmed) is None
