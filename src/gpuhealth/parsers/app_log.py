"""CUDA, NCCL and driver errors in a training log or Python traceback.

Each line is matched against :data:`APP_ERROR_PATTERNS` in order; the first kind that matches names
the line, so the more specific kinds (a driver/library mismatch reported through NVML) come before
the general ones (any NVML initialisation failure).
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import AppError, ParseError


def _any(*alternatives: str, flags: int = 0) -> re.Pattern[str]:
    return lazy_re("|".join(alternatives), flags)


# (kind, pattern), checked in this order; the first match names the line. A gap between two words is
# bounded (``[^\n]{0,80}?``, never ``.*``): ``cuInit\b.*\b(?:failed|error)`` is quadratic on a long line of
# "cuInit x " (400 KB took 220 s).
APP_ERROR_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("driver-mismatch", _any(r"Driver/library version mismatch", r"NVML_ERROR_LIB_RM_VERSION_MISMATCH",
                             flags=re.IGNORECASE)),
    ("cuda-oom", _any(r"CUDA out of memory", r"CUDA error: out of memory",
                      r"torch\.(?:cuda\.)?OutOfMemoryError", r"CUDA_ERROR_OUT_OF_MEMORY",
                      r"cudaErrorMemoryAllocation")),
    ("no-device", _any(r"no CUDA-capable device is detected", r"CUDA_ERROR_NO_DEVICE", r"cudaErrorNoDevice")),
    ("insufficient-driver", _any(r"CUDA driver version is insufficient for CUDA runtime version",
                                 r"The NVIDIA driver on your system is too old \(found version \d+\)",
                                 r"CUDA_ERROR_INSUFFICIENT_DRIVER", r"cudaErrorInsufficientDriver")),
    ("arch-unsupported", _any(r"with CUDA capability sm_\d+[a-z]? is not compatible with the current PyTorch "
                              r"installation", r"no kernel image is available for execution on the device",
                              r"cudaErrorNoKernelImageForDevice", r"CUDA_ERROR_NO_BINARY_FOR_GPU")),
    ("ecc", _any(r"uncorrectable ECC error encountered", r"CUDA_ERROR_ECC_UNCORRECTABLE",
                 r"cudaErrorECCUncorrectable")),
    ("illegal-address", _any(r"an illegal memory access was encountered", r"CUDA_ERROR_ILLEGAL_ADDRESS",
                             r"cudaErrorIllegalAddress")),
    ("device-assert", _any(r"device-side assert triggered", r"CUDA_ERROR_ASSERT", r"cudaErrorAssert\b")),
    ("launch-failure", _any(r"unspecified launch failure", r"CUDA_ERROR_LAUNCH_FAILED",
                            r"cudaErrorLaunchFailure")),
    # "GPU has fallen off the bus" is left to the kernel-log parser (Xid 79), so a dmesg is not an app log
    ("gpu-lost", _any(r"GPU is lost", r"NVML_ERROR_GPU_IS_LOST",
                      r"CUDA_ERROR_[A-Z_]*LOST\b", flags=re.IGNORECASE)),
    ("cuda-unknown", _any(r"CUDA error: unknown error", r"CUDA_ERROR_UNKNOWN", r"cudaErrorUnknown")),
    ("nvml-init", _any(r"Failed to initialize NVML\b", r"NVML_ERROR_UNINITIALIZED")),
    ("cuda-init", _any(r"CUDA initialization:", r"cudaGetDeviceCount", r"CUDA_ERROR_NOT_INITIALIZED",
                       r"cuInit\b[^\n]{0,80}?\b(?:failed|error)", flags=re.IGNORECASE)),
    ("nccl", _any(r"NCCL error", r"ncclUnhandledCudaError", r"ncclSystemError", r"ncclInternalError",
                  r"ncclInvalidUsage", r"ncclRemoteError", r"NCCL WARN\b", r"NCCL communicator was aborted",
                  r"DistBackendError[^\n]{0,200}?NCCL")),
]

_TRACEBACK = lazy_re(r"^Traceback \(most recent call last\):", re.MULTILINE)
_MAX_MESSAGE = 500


def parse_app_log(text: str) -> tuple[AppError, ...]:
    """Every line that shows a known CUDA/NCCL/driver error: its kind, the line (trimmed) and its
    1-based line number. An ordinary log with no such errors gives ``()``; ParseError only for
    input that is not text."""
    if not isinstance(text, str):
        raise ParseError("application log must be text")
    errors: list[AppError] = []
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        if not line.strip():
            continue
        for kind, pattern in APP_ERROR_PATTERNS:
            if pattern.search(line):
                errors.append(AppError(kind=kind, message=line.strip()[:_MAX_MESSAGE], line_number=number))
                break
    return tuple(errors)


def looks_like_app_log(text: str) -> bool:
    """True for a Python traceback or text containing any of the known error messages."""
    if not isinstance(text, str):
        return False
    if _TRACEBACK.search(text):
        return True
    return any(pattern.search(text) for _kind, pattern in APP_ERROR_PATTERNS)
