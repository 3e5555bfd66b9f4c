"""parse_app_log / looks_like_app_log on hand-written training logs and tracebacks, plus fuzzing.

The corpus holds no real training-log tracebacks, so every sample here is HAND-WRITTEN. The key
messages are quoted exactly from tests/data/reference/facts.md section 4 where that table has them
(NVML mismatch, insufficient driver, no device, unknown error, driver too old, NVML Unknown Error);
the others are the messages named in the task brief, in the form PyTorch/NCCL print them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import corpus_files, corpus_id
from fuzzing import FUZZ
from gpuhealth.knowledge.app_errors import meanings
from gpuhealth.model import AppError, ParseError
from gpuhealth.parsers.app_log import looks_like_app_log, parse_app_log

KINDS = {
    "cuda-oom", "no-device", "insufficient-driver", "cuda-unknown", "illegal-address", "ecc",
    "device-assert", "nccl", "driver-mismatch", "nvml-init", "cuda-init", "launch-failure", "gpu-lost",
    "arch-unsupported", "nvml-unknown", "insufficient-permissions",
}

# Hand-written lines, one or more per kind.
SAMPLES = [
    # facts.md section 4, quoted
    ("driver-mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
    ("driver-mismatch", "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch"),
    ("insufficient-driver", "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"),
    ("no-device", "RuntimeError: cuda runtime error (100) : no CUDA-capable device is detected at "
                  "/pytorch/aten/src/THC/THCGeneral.cpp:47"),
    ("cuda-unknown", "RuntimeError: CUDA error: unknown error"),
    ("cuda-unknown", "cuInit(0) failed: CUDA_ERROR_UNKNOWN"),
    ("insufficient-driver", "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:138: UserWarning: CUDA "
                            "initialization: The NVIDIA driver on your system is too old (found version 12080)."),
    ("nvml-unknown", "Failed to initialize NVML: Unknown Error"),
    ("insufficient-permissions", "Failed to initialize NVML: Insufficient Permissions"),
    ("nvml-init", "Failed to initialize NVML: Driver Not Loaded"),
    # named in the brief
    ("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                 "capacity of 79.11 GiB of which 1.06 GiB is free."),
    ("cuda-oom", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"),
    ("cuda-oom", "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    ("no-device", "cuInit failed: CUDA_ERROR_NO_DEVICE"),
    ("illegal-address", "RuntimeError: CUDA error: an illegal memory access was encountered"),
    ("illegal-address", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("ecc", "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    ("device-assert", "RuntimeError: CUDA error: device-side assert triggered"),
    ("nccl", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
             "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details)"),
    ("nccl", "ncclUnhandledCudaError: Call to CUDA function failed."),
    ("nccl", "ncclSystemError: System call (e.g. socket, malloc) or external library call failed"),
    ("nccl", "node-1:12345:12390 [3] NCCL WARN Connect to 10.0.0.2<43017> failed : Connection refused"),
    ("cuda-init", "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
                  "some cuda functions before calling NumCudaDevices() that might have already set an error? "
                  "Error 804: forward compatibility was attempted on non supported HW"),
    ("cuda-init", "UserWarning: CUDA initialization: Found no NVIDIA driver on your system."),
    ("launch-failure", "RuntimeError: CUDA error: unspecified launch failure"),
    # hand-written in the form PyTorch prints them (added with GH806)
    ("arch-unsupported", "UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with "
                         "the current PyTorch installation."),
    ("arch-unsupported", "RuntimeError: CUDA error: no kernel image is available for execution on the device"),
    ("gpu-lost", "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system "
                 "to recover this GPU"),
]

# Hand-written: a two-rank training log ending in a traceback.
TRAINING_LOG = """\
[2024-05-01 10:00:00] epoch 1 step 100 loss 2.31
[2024-05-01 10:00:05] epoch 1 step 200 loss 2.02
Traceback (most recent call last):
  File "/workspace/train.py", line 212, in <module>
    main()
  File "/workspace/train.py", line 180, in main
    loss.backward()
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error
"""


def test_table_covers_every_kind():
    assert set(meanings()) == KINDS


@pytest.mark.parametrize(("kind", "line"), SAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(SAMPLES)])
def test_sample_line(kind: str, line: str):
    errors = parse_app_log("some preamble\n" + line + "\n")
    assert errors == (AppError(kind=kind, message=line.strip(), line_number=2),)
    assert looks_like_app_log(line)


def test_every_kind_has_a_sample():
    assert {kind for kind, _ in SAMPLES} == KINDS


def test_training_log():
    errors = parse_app_log(TRAINING_LOG)
    assert [(e.kind, e.line_number) for e in errors] == [("illegal-address", 8), ("nccl", 11)]
    assert errors[0].message == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert looks_like_app_log(TRAINING_LOG)


def test_traceback_without_gpu_error():
    text = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nKeyError: 1\n'
    assert looks_like_app_log(text)
    assert parse_app_log(text) == ()


@pytest.mark.parametrize("text", ["", "epoch 1 loss 0.3\n", "NCCL INFO Bootstrap : Using eth0\n"])
def test_ordinary_text(text: str):
    assert parse_app_log(text) == ()
    assert not looks_like_app_log(text)


def test_crlf_and_long_lines():
    line = "RuntimeError: CUDA out of memory. " + "x" * 2000
    (error,) = parse_app_log("ok\r\n" + line + "\r\n")
    assert error.kind == "cuda-oom" and error.line_number == 2 and len(error.message) <= 500


def test_not_text_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_app_log(b"CUDA out of memory")  # type: ignore[arg-type]
    assert looks_like_app_log(None) is False  # type: ignore[arg-type]


# Every corpus text (nvidia-smi, kernel logs, lspci ...) goes through without an exception.
ALL_CORPUS = corpus_files("**/*")


@pytest.mark.parametrize("path", ALL_CORPUS, ids=corpus_id)
def test_corpus_file_never_raises(path: Path):
    text = path.read_text(errors="replace")
    for error in parse_app_log(text):
        assert error.kind in KINDS and error.message and error.line_number
    assert looks_like_app_log(text) in (True, False)


# --------------------------------------------------------------------------- fuzzing

_LINES = [line for _, line in SAMPLES] + TRAINING_LOG.splitlines()


@FUZZ
@given(st.text())
def test_fuzz_random_text(text: str):
    errors = parse_app_log(text)
    assert all(e.kind in KINDS for e in errors)
    looks_like_app_log(text)


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(_LINES), st.text(max_size=60)), max_size=30))
def test_fuzz_mixed_lines(lines: list[str]):
    text = "\n".join(lines)
    errors = parse_app_log(text)
    assert all(e.kind in KINDS for e in errors)
    if errors:
        assert looks_like_app_log(text)
