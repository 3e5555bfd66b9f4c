"""Value helpers shared by the nvidia-smi parsers: placeholders, units, numbers.

nvidia-smi prints unknowns as ``N/A``, ``[N/A]``, ``[Not Supported]``, ``Unknown Error``,
``[Requested functionality has been deprecated]`` and more; every such value becomes None.
"""

from __future__ import annotations

import math

from gpuhealth.lazyre import lazy_re

_NUMBER = lazy_re(r"[-+]?\d+(?:\.\d+)?")
_PLACEHOLDER_WORDS = ("n/a", "not supported", "unknown error", "not available", "err!",
                      "insufficient permissions", "no data", "gpu requires reset")


# What nvidia-smi prints where the driver failed to read a value (NVML returned an error other than "not
# supported", which it prints as N/A): the table's ERR!, the error string of nvmlErrorString elsewhere
# (nvml.h: NVML_ERROR_UNKNOWN "Unknown Error", NVML_ERROR_RESET_REQUIRED "GPU requires reset",
# NVML_ERROR_GPU_IS_LOST "GPU is lost")
_ERROR_VALUES = frozenset({"err!", "unknown error", "gpu requires reset", "gpu is lost"})
MAX_FIELD_ERRORS = 16


def is_error_value(value: str | None) -> bool:
    """True when nvidia-smi printed an error for this value instead of a reading."""
    if not value:
        return False
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text.lower() in _ERROR_VALUES


def clean(value: str | None) -> str | None:
    """Strip whitespace and brackets; None for empty or placeholder values."""
    if value is None:
        return None
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    if not text:
        return None
    lowered = text.lower()
    if "deprecated" in lowered or lowered.startswith(_PLACEHOLDER_WORDS):
        return None
    return text


def number(value: str | None) -> float | None:
    """The first number in a value such as ``35 C``, ``69.79 W``, ``81559 MiB``, ``16x``; else None."""
    text = clean(value)
    if text is None:
        return None
    match = _NUMBER.search(text)
    return float(match.group()) if match else None


def integer(value: str | None) -> int | None:
    result = number(value)
    return int(result) if result is not None and math.isfinite(result) else None


def flag(value: str | None) -> bool | None:
    """``Yes``/``No``, ``Enabled``/``Disabled``, ``Active``/``Not Active`` as a bool; else None."""
    text = clean(value)
    if text is None:
        return None
    lowered = text.lower()
    if lowered in ("yes", "enabled", "active", "true", "on", "1"):
        return True
    if lowered in ("no", "disabled", "not active", "false", "off", "0", "none"):
        return False
    return None
