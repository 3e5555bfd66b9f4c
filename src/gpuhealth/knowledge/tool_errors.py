"""What nvidia-smi and NVML failures mean: message patterns and exit codes, each with its source.

Sources (see tests/data/reference/facts.md): SMIDOC = nvidia-smi manual, exit codes; NVML = nvml.h
return codes; CTK = NVIDIA/nvidia-container-toolkit issue #48 (NVIDIA's notice on "Unknown Error").
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolError:
    kind: str  # stable name used by checks to pick fixes
    meaning: str
    pattern: re.Pattern[str] | None
    exit_code: int | None  # nvidia-smi exit code (SMIDOC)
    nvml_code: int | None  # nvmlReturn_t (NVML)
    source: str


TOOL_ERRORS: tuple[ToolError, ...] = (
    ToolError("driver-library-mismatch", "the loaded kernel module and the user-space libraries differ "
              "in version", re.compile(r"Driver/library version mismatch", re.I), 18, 18, "NVML"),
    ToolError("driver-not-loaded", "the NVIDIA kernel module is not loaded",
              re.compile(r"couldn't communicate with the NVIDIA driver|Driver Not Loaded", re.I), 9, 9,
              "SMIDOC; NVML"),
    ToolError("library-not-found", "libnvidia-ml.so (the NVML library) could not be found or loaded",
              re.compile(r"NVML Shared Library Not Found|libnvidia-ml\.so", re.I), 12, 12, "SMIDOC; NVML"),
    ToolError("gpu-lost", "a GPU has fallen off the bus or is otherwise inaccessible",
              re.compile(r"GPU is lost|fallen off the bus", re.I), 15, 15, "SMIDOC; NVML"),
    ToolError("no-permission", "the user may not open the GPU device files",
              re.compile(r"Insufficient Permissions|No permission", re.I), 4, 4, "SMIDOC; NVML"),
    ToolError("no-devices", "the driver is loaded but initialised no GPU",
              re.compile(r"No devices were found", re.I), 6, 6, "SMIDOC"),
    ToolError("inforom-corrupted", "the GPU's infoROM is corrupted",
              re.compile(r"infoROM is corrupted", re.I), 14, 14, "SMIDOC; NVML"),
    ToolError("irq-issue", "the kernel detected an interrupt problem with a GPU", None, 10, 11,
              "SMIDOC; NVML"),
    ToolError("power-cables", "external power cables are not properly attached",
              re.compile(r"power cables?", re.I), 8, 8, "SMIDOC; NVML"),
    ToolError("reset-required", "a GPU requires a reset", re.compile(r"GPU requires reset", re.I), None,
              16, "NVML"),
    ToolError("blocked-by-os", "the GPU device is blocked by the operating system or cgroups "
              "(in a container: device access lost after a systemd reload)",
              re.compile(r"Failed to initialize NVML: Unknown Error", re.I), None, 17, "CTK; NVML"),
    ToolError("unknown", "an internal or unknown driver error", None, 255, 999, "SMIDOC; NVML"),
)


def decode(text: str = "", exit_code: int | None = None, nvml_code: int | None = None) -> ToolError | None:
    """The failure a message, an nvidia-smi exit code or an NVML return code stands for."""
    for error in TOOL_ERRORS:
        if error.pattern is not None and error.pattern.search(text or ""):
            return error
    for error in TOOL_ERRORS:
        if (exit_code is not None and error.exit_code == exit_code) or (
                nvml_code is not None and error.nvml_code == nvml_code):
            return error
    return None
