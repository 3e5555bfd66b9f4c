"""A failure a program printed is never outweighed by a check that judged without it (issue 21 review).

Hand-written evidence (the nvcc banner, /proc/driver/nvidia/version and CUDA's runtime message are the texts those
programs print; the versions are chosen to sit inside CUDA 12's minor-version compatibility).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from gpuhealth.cli import main

NVCC_12_9 = """$ nvcc --version
nvcc: NVIDIA (R) Cuda compiler driver
Cuda compilation tools, release 12.9, V12.9.86
$ cat /proc/driver/nvidia/version
NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Fri Mar 14 11:27:47 UTC 2025
"""
FAILED = "$ ./app\nCUDA error: CUDA driver version is insufficient for CUDA runtime version\n"


def _report(tmp_path, text: str) -> dict:
    path = tmp_path / "session.txt"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", "--format", "json", str(path)])
    return json.loads(result.stdout)


def _severity(report: dict, code: str) -> str:
    return next(f["severity"] for f in report["findings"] if f["code"] == code)


def test_minor_version_compatibility_alone_is_information(tmp_path):
    assert _severity(_report(tmp_path, NVCC_12_9), "GH601") == "info"


def test_a_program_that_failed_makes_the_same_finding_grave(tmp_path):
    report = _report(tmp_path, NVCC_12_9 + FAILED)
    assert _severity(report, "GH601") in ("warning", "critical")
    assert report["verdict"] != "HEALTHY"


def test_an_error_line_beside_stated_versions_is_more_than_the_setup(tmp_path):
    """Versions in words alone only list the setup (GH005); an error named in the same sentence is evidence of state."""
    words = "I have NVIDIA driver 550.54.14 with CUDA 12.4 installed.\n"
    assert any(f["code"] == "GH005" for f in _report(tmp_path, words)["findings"])
    report = _report(tmp_path, words.replace(".\n", ", and my job fails with CUDAError InsufficientDriver.\n"))
    assert not any(f["code"] == "GH005" for f in report["findings"])


def test_a_piece_read_through_the_mined_table_is_not_called_unrecognised(tmp_path):
    """A line only the mined table names (a CUDA error by its number, tied to a cu* call) was read: no GH002 saying
    "nothing in it was analysed" beside the finding it raised."""
    codes = {f["code"] for f in _report(tmp_path, "cuInit returned 802\n")["findings"]}
    assert "GH210" in codes and "GH002" not in codes


def test_an_error_beside_a_quoted_kernel_line_is_not_dropped(tmp_path):
    """An issue body quoting one NVRM line is taken for the driver's version file (or an untimed kernel log); its other
    lines are still read, so the error beside it is reported and the report is not HEALTHY."""
    body = ("Building the miner fails at start with:\n"
            "FATAL: the GPU runtime refused to start, error 12\n"
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.54  Tue Aug 14 22:37:35 PDT 2018\n"
            "Thanks for any help.\n")
    report = _report(tmp_path, body)
    assert report["verdict"] != "HEALTHY"
    assert any("refused to start" in line for f in report["findings"] for e in f["evidence"] for line in e["lines"])


def test_an_error_in_an_untimed_kernel_log_paste_is_not_dropped(tmp_path):
    body = ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
            "my trainer then stops with: FATAL: the GPU runtime refused to start, error 12\n")
    report = _report(tmp_path, body)
    assert report["verdict"] != "HEALTHY"
    assert any("refused to start" in line for f in report["findings"] for e in f["evidence"] for line in e["lines"])


def test_the_drivers_version_file_alone_is_not_healthy(tmp_path):
    """/proc/driver/nvidia/version shows the module loaded, not a GPU working: only the setup (GH005), NO DIAGNOSIS."""
    report = _report(tmp_path, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC "
                               "2023\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
    assert report["verdict"] == "NO DIAGNOSIS" and any(f["code"] == "GH005" for f in report["findings"])


# TensorFlow's own hedge (tensorflow/stream_executor/cuda/cudart_stub.cc, logged at INFO after a failed dlopen of
# libcudart): its catalogue row is a warning, milder than its symptom (a CUDA library cannot be loaded, critical).
# Alone it names the symptom without showing it at that severity; the dlerror line itself does.
CUDART_HEDGE = ("2021-04-09 19:52:41.024341: I tensorflow/stream_executor/cuda/cudart_stub.cc:29] Ignore above cudart "
                "dlerror if you do not have a GPU set up on your machine.\n")
CUDART_DLERROR = ("2021-04-09 19:52:41.024: W tensorflow/stream_executor/platform/default/dso_loader.cc:60] Could not "
                  "load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object "
                  "file: No such file or directory\n")


def test_a_line_its_row_calls_milder_than_its_symptom_keeps_the_rows_severity(tmp_path):
    report = _report(tmp_path, CUDART_HEDGE)
    assert _severity(report, "GH612") == "warning" and report["verdict"] == "DEGRADED"


def test_the_line_that_shows_the_symptom_still_makes_it_grave(tmp_path):
    report = _report(tmp_path, CUDART_DLERROR + CUDART_HEDGE)
    assert _severity(report, "GH612") == "critical"
