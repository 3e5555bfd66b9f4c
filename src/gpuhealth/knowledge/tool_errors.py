"""What nvidia-smi and NVML failures mean, decoded with the signature catalogue (``signatures.csv``).

The messages, what they mean and their sources live in the catalogue, once. This module adds only what a
message does not carry: the numbers. nvidia-smi's exit codes (nvidia-smi manual, "RETURN VALUE") and
NVML's return codes (``nvmlReturn_t`` in nvml.h) each name the catalogue row of the same failure, so a
failure known only by its number decodes to the same row as its message.
"""

from __future__ import annotations

from gpuhealth.knowledge.signatures import Signature, match_line, rank, signature
from gpuhealth.records import record

__all__ = ["NVML_RETURN_CODES", "SMI_EXIT_CODES", "ToolError", "decode"]

# nvmlReturn_t -> the catalogue row whose message is that code's nvmlErrorString (nvml.h, pynvml).
NVML_RETURN_CODES: dict[int, str] = {
    1: "nvml-uninitialized", 2: "nvml-invalid-argument", 3: "nvml-not-supported", 4: "nvml-insufficient-permissions",
    5: "nvml-already-initialized", 6: "nvml-not-found", 7: "nvml-insufficient-size", 8: "nvml-insufficient-power",
    9: "nvml-driver-not-loaded", 10: "nvml-timeout", 11: "nvml-irq-issue", 12: "nvml-library-not-found",
    13: "nvml-function-not-found", 14: "nvml-corrupted-inforom", 15: "nvml-gpu-is-lost", 16: "nvml-reset-required",
    17: "nvml-operating-system", 18: "nvml-rm-version-mismatch", 19: "nvml-in-use", 20: "nvml-insufficient-memory",
    21: "nvml-no-data", 22: "nvml-vgpu-ecc-not-supported", 23: "nvml-insufficient-resources",
    24: "nvml-freq-not-supported", 25: "nvml-argument-version-mismatch", 26: "nvml-deprecated", 27: "nvml-not-ready",
    28: "nvml-gpu-not-found", 29: "nvml-invalid-state", 999: "nvml-unknown",
}

# nvidia-smi's exit codes (nvidia-smi manual). They are NVML's return codes where the manual lists one
# (4 no permission, 6 not found, 8 power, 9 driver not loaded, 10 IRQ, 12 library, 13 function, 14 infoROM,
# 15 GPU lost); 18 (library version mismatch) is not in the manual but nvidia-smi exits with it (public logs,
# e.g. mozilla/translations#1167). 255 is "other or internal driver error".
SMI_EXIT_CODES: dict[int, str] = {
    3: "nvml-not-supported", 4: "nvml-insufficient-permissions", 6: "nvml-not-found", 8: "nvml-insufficient-power",
    9: "nvml-driver-not-loaded", 10: "nvml-irq-issue", 12: "nvml-library-not-found", 13: "nvml-function-not-found",
    14: "nvml-corrupted-inforom", 15: "nvml-gpu-is-lost", 18: "nvml-rm-version-mismatch", 255: "nvml-unknown",
}


@record
class ToolError:
    kind: str  # the catalogue row's id: checks pick fixes by it
    meaning: str  # the row's summary, for the user
    signature: Signature


def _of(sig: Signature) -> ToolError:
    return ToolError(sig.id, sig.summary.rstrip("."), sig)


def decode(text: str = "", exit_code: int | None = None, nvml_code: int | None = None) -> ToolError | None:
    """The failure a message, an nvidia-smi exit code or an NVML return code stands for.

    The message decides when a line of it is in the catalogue: the most specific row over all its lines,
    by the catalogue's own ranking (``signatures.rank``: a decided cause before a symptom, then priority,
    then the longer pattern); otherwise the number does.
    """
    found = [sig for line in (text or "").splitlines()[:50] if (sig := match_line(line)) is not None]
    if found:
        return _of(max(found, key=rank))
    if nvml_code is not None and nvml_code in NVML_RETURN_CODES:
        return _of(signature(NVML_RETURN_CODES[nvml_code]))
    if exit_code is not None and exit_code in SMI_EXIT_CODES:
        return _of(signature(SMI_EXIT_CODES[exit_code]))
    return None
