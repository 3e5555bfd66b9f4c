"""``/proc/driver/nvidia/version`` and ``/proc/driver/nvidia/gpus/<bdf>/information``.

The version file's first line is the kernel module's banner, the same text the module logs when it
loads (``NVRM: loading NVIDIA UNIX ...``), so that line is accepted too:

    NVRM version: NVIDIA UNIX x86_64 Kernel Module  352.63  Sat Nov  7 21:25:42 PST 2015
    NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  (dvs-builder@...)  ...
    GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import DriverInfo, ParseError

_BANNER = lazy_re(
    r"(?:NVRM version:|NVRM: loading)\s*(?P<banner>NVIDIA UNIX\s+"
    r"(?:(?P<open>Open\s+)Kernel Module(?:\s+for\s+\S+)?|\S+\s+Kernel Module)"
    r"\s+(?P<version>\d+\.\d+(?:\.\d+)*)\b.*?)\s*$",
    re.MULTILINE,
)
_COMPILER = lazy_re(r"^\s*GCC version:\s*(?P<compiler>\S.*?)\s*$", re.MULTILINE)
_INFO_LINE = lazy_re(r"^(?P<key>[A-Za-z][A-Za-z0-9 ./()_-]*?)\s*:\s*(?P<value>.*?)\s*$")
_INFO_KEYS = {"model", "irq", "gpu uuid", "video bios", "bus type", "bus location", "device minor",
              "dma size", "dma mask", "gpu excluded", "gpu firmware"}


def parse_proc_driver_version(text: str) -> DriverInfo:
    """The driver version, its flavour (``open`` or ``proprietary``), banner and compiler line."""
    if not isinstance(text, str):
        raise ParseError("driver version must be text")
    match = _BANNER.search(text)
    if match is None:
        raise ParseError("no NVRM version banner")
    compiler = _COMPILER.search(text)
    return DriverInfo(
        version=match["version"],
        flavour="open" if match["open"] else "proprietary",
        banner=match["banner"].strip(),
        compiler=compiler["compiler"] if compiler else None,
    )


def parse_proc_gpu_information(text: str) -> dict[str, str]:
    """``Key: value`` pairs of a GPU's information file, values stripped (``Model`` -> ``GeForce ...``).

    Raises ParseError unless at least one key the driver writes there (Model, IRQ, GPU UUID, Bus
    Location ...) is present.
    """
    if not isinstance(text, str):
        raise ParseError("GPU information must be text")
    info: dict[str, str] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        match = _INFO_LINE.match(line.strip())
        if match and match["key"] not in info:
            info[match["key"]] = match["value"]
    if not any(key.lower() in _INFO_KEYS for key in info):
        raise ParseError("no /proc/driver/nvidia GPU information keys")
    return info
