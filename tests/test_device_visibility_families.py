"""General families behind sealed-split misses (tests/cases/README.md, rule 2): each test feeds real lines, the
cases' own only after the case moved to dev/.

- cudaErrorInvalidDevice ("invalid device ordinal", CUDA Runtime API, enum cudaError: the device ordinal supplied
  does not correspond to a valid CUDA device) is the GH608 symptom, with its two causes in the differential;
- a program that sees no GPU while CUDA_VISIBLE_DEVICES begins with an index N > 0 (CUDA C++ Programming Guide,
  "CUDA Environment Variables": CUDA stops at the first listed index that does not exist) is GH608;
- cudaErrorStubLibrary ("CUDA driver is a stub library") names the stub libcuda cause, which GH603 reports.
"""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.report.common import fold
from repo_paths import REPO

DEV = REPO / "tests" / "cases" / "dev"


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def lead(report):
    return fold(report.findings)[0].finding


def case_files(name: str) -> list[tuple[str, str]]:
    folder = DEV / name
    return [(p.name, p.read_text()) for p in sorted(folder.iterdir()) if p.suffix != ".toml"]


# --------------------------------------------------------------------------- invalid device ordinal

def test_invalid_device_ordinal_alone_is_the_visibility_symptom_with_both_causes_open():
    report = report_of(*case_files("cuda-visible-devices-wrong-gpu-number-pydeepfakedet-1"))
    top = lead(report)
    assert top.code == "GH608" and top.severity is Severity.WARNING
    causes = {c.cause: c.status for c in top.differential}
    assert causes == {"device-index-beyond-count": "open", "cuda-visible-devices-hides": "open",
                      "more-ranks-than-gpus": "open"}


def test_cuda_samples_wording_of_the_same_error_leads_the_same_way():
    line = 'CUDA error at main.cu:42 code=101(cudaErrorInvalidDevice) "cudaSetDevice(1)"\n'
    assert lead(report_of(("run.log", line))).code == "GH608"


def test_the_index_in_the_code_is_left_open_without_a_gpu_count():
    report = report_of(*case_files("cuda-visible-devices-cuda1-hardcoded-tab-ddpm-20"))
    assert lead(report).code == "GH608"
    assert any(s.code == "GH608" and "GPU 1 (cuda:1)" in s.reason for s in report.skipped)


def test_the_index_in_the_code_is_judged_against_nvidia_smi_l():
    files = case_files("cuda-visible-devices-cuda1-hardcoded-tab-ddpm-20") + [
        ("nvidia-smi-L.txt", "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6)\n")]
    top = lead(report_of(*files))
    assert top.code == "GH608" and "asks for GPU 1" in top.message


# --------------------------------------------------------------------------- the first listed index hides every GPU

def test_no_gpu_seen_with_a_nonzero_first_index_set_in_code_leads_with_the_variable():
    top = lead(report_of(*case_files("cuda-visible-devices-7-in-code-ptqd-13")))
    assert top.code == "GH608" and "CUDA_VISIBLE_DEVICES=7 begins with GPU 7" in top.message
    assert "GH605" in top.explains


def test_a_command_line_prefix_in_a_traceback_paste_is_read_as_the_setting():
    top = lead(report_of(*case_files("cuda-visible-devices-absent-ids-laptop-dask-cuda-171")))
    assert top.code == "GH608" and "CUDA_VISIBLE_DEVICES=2,3,7,8" in top.message


def test_a_list_that_begins_with_gpu_0_cannot_hide_every_gpu():
    # the same failure with GPU 0 listed first: the variable is not what hides the GPUs (GPU 0 exists if any does)
    text = ('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n'
            "RuntimeError: No CUDA GPUs are available\n")
    report = report_of(("notes.txt", text))
    assert lead(report).code == "GH605"
    assert not any(f.code == "GH608" for f in report.findings)


def test_a_nonzero_index_without_a_failure_line_is_not_judged():
    report = report_of(("run.sh", 'os.environ["CUDA_VISIBLE_DEVICES"] = "1"\npython train.py\n'))
    assert not any(f.code == "GH608" for f in report.findings)


# --------------------------------------------------------------------------- the stub libcuda

def test_stub_library_error_leads_with_the_libcuda_check():
    top = lead(report_of(*case_files("stale-libcuda-stubs-on-ld-library-path-xmake-4686")))
    assert top.code == "GH603" and "stub" in top.message


def test_stub_library_is_a_cause_of_the_framework_symptom():
    from gpuhealth.knowledge.causes import symptoms

    listed = [c.id for c in symptoms()["framework-no-gpu"].causes]
    assert "stub-libcuda" in listed


# --------------------------------------------------------------------------- torch.load without CUDA

def test_a_checkpoint_loaded_where_torch_cannot_use_cuda_is_the_torch_symptom():
    # torch/serialization.py (validate_cuda_device): the wording when torch.cuda.is_available() is False
    top = lead(report_of(*case_files("cpu-only-pytorch-deserialize-deforum-132")))
    assert top.code == "GH605" and top.severity is Severity.CRITICAL
    assert top.differential[0].cause == "torch-cpu-build"


def test_a_checkpoint_device_against_a_count_of_zero_is_the_torch_symptom_not_an_index():
    line = ("RuntimeError: Attempting to deserialize object on CUDA device 0 but torch.cuda.device_count() is 0. "
            "Please use torch.load with map_location to map your storages to an existing device.\n")
    report = report_of(("traceback.txt", line))
    assert lead(report).code == "GH605"
    assert not any(f.code == "GH608" for f in report.findings)


# --------------------------------------------------------------------------- nvidia-smi not found by a program

def test_python_not_finding_nvidia_smi_is_the_missing_utilities():
    # Python's subprocess raises FileNotFoundError (errno 2) when the program to run does not exist
    top = lead(report_of(*case_files("nvidia-smi-missing-nouveau-9300gs-proxmox-nvidia-htop-23")))
    assert top.code == "GH208"


def test_go_not_finding_nvidia_smi_is_the_missing_utilities():
    # os/exec's ErrNotFound, as a Go exporter logs it
    line = 'error: failed to run nvidia-smi: exec: "nvidia-smi": executable file not found in $PATH\n'
    assert lead(report_of(("exporter.log", line))).code == "GH208"


def test_another_file_not_found_is_not_nvidia_smi():
    line = "FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi.log'\n"
    assert not any(f.code == "GH208" for f in report_of(("traceback.txt", line)).findings)


def test_a_shell_not_finding_nvidia_smi_is_a_warning_not_a_drain():
    """The shell's "nvidia-smi: command not found" says the utilities are not on PATH: an incomplete driver install, or
    a container started without the NVIDIA runtime that mounts them, or a host without a GPU. It says nothing about
    the GPUs' health, so it never drains a node (GH208's own check is a warning too). Written for this test."""
    report = report_of(("session.txt", "$ nvidia-smi\nbash: nvidia-smi: command not found\n"))
    found = [f for f in report.findings if f.code == "GH208"]
    assert found and all(f.severity is Severity.WARNING for f in found)
    assert report.verdict != "HEALTHY"
