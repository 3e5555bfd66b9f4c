"""The documents gpuhealth's tables come from, by the short key the tables use (``XIDCAT``, ``DCDRV`` ...).

User-facing text names a document by its title and address, never by the key: ``cite`` turns a table's
source column ("FACTS 3.3 (DCDRV kernel-modules)") into words a reader can follow up.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re

# key -> (title, address). Titles and addresses as the reference fact base lists them.
DOCUMENTS: dict[str, tuple[str, str]] = {
    "XIDCAT": ('NVIDIA, "Analyzing Xid Errors with the Xid Catalog"',
               "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"),
    "XIDARCH": ("NVIDIA, Xid catalog for Volta and older", "https://docs.nvidia.com/deploy/xid-errors/archive/index.html"),
    "GPUD": ("leptonai/gpud, the Xid catalogue in machine-readable form",
             "https://github.com/leptonai/gpud/tree/main/components/accelerator/nvidia/xid"),
    "MODAL": ('Modal, "GPU Health"', "https://modal.com/docs/guide/gpu-health"),
    "OGKM": ("NVIDIA open GPU kernel modules (source)", "https://github.com/NVIDIA/open-gpu-kernel-modules"),
    "NVML": ("NVML header (NVIDIA/go-nvml)", "https://github.com/NVIDIA/go-nvml/blob/main/gen/nvml/nvml.h"),
    "NVMLDOC": ("NVIDIA, NVML API reference", "https://docs.nvidia.com/deploy/nvml-api/"),
    "INST": ("NVIDIA, nvidia-installer (source)", "https://github.com/NVIDIA/nvidia-installer"),
    "CUDARN": ("NVIDIA, CUDA Toolkit release notes",
               "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"),
    "CUDACOMPAT": ("NVIDIA, CUDA Compatibility guide", "https://docs.nvidia.com/deploy/cuda-compatibility/"),
    "DCDRV": ("NVIDIA, Driver Installation Guide: kernel modules",
              "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html"),
    "SMIDOC": ("NVIDIA, nvidia-smi documentation", "https://docs.nvidia.com/deploy/nvidia-smi/index.html"),
    "README580": ('NVIDIA Linux driver README 580.65.06, "GSP Firmware"',
                  "https://download.nvidia.com/XFree86/Linux-x86_64/580.65.06/README/gsp.html"),
    "SGJ": ("NVIDIA driver package, supported-gpus/supported-gpus.json", "https://www.nvidia.com/en-us/drivers/unix/"),
    "LINUX": ("Linux kernel, drivers/pci (probe.c, pci-sysfs.c)",
              "https://github.com/torvalds/linux/tree/master/drivers/pci"),
    "LEGACY": ("NVIDIA, Unix drivers (current and legacy branches)", "https://www.nvidia.com/en-us/drivers/unix/"),
    "SGJ525": ("NVIDIA Linux driver 525 package, supported-gpus/supported-gpus.json (the README's \"Appendix A."
               " Supported NVIDIA GPU Products\" as data), from Ubuntu's nvidia-graphics-drivers-525",
               "https://github.com/alex-tu-cc/get-nvidia-supported-gpus-json/blob/gh-pages/"
               "focal-nvidia-driver-525-supported-gpus.json"),
    "LEGACYGPU": ("NVIDIA, Unix Legacy GPU drivers (the GPUs each legacy branch supports)",
                  "https://www.nvidia.com/en-us/drivers/unix/legacy-gpu/"),
    "DEPRECATION": ("NVIDIA developer forum, Unix Graphics Feature Deprecation Schedule",
                    "https://forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588"),
}
# Where DCDRV is cited for the supported drivers and CUDA versions rather than the kernel modules.
DCDRV_SUPPORT = ("NVIDIA, Supported Drivers and CUDA Toolkit Versions",
                 "https://docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html")

_KEY = lazy_re(r"\b(" + "|".join(sorted(DOCUMENTS, key=len, reverse=True)) + r")\b")
_FACTS = lazy_re(r"\b(?:FACTS|facts\.md)(?:\s+(?:section\s+)?\d+(?:\.\d+)*(?:-\d+(?:\.\d+)*)?)?(?:\s*\((?=[A-Z]))?")


def document(key: str, address: bool = True) -> str:
    """``Title <address>`` for a source key (the title alone with ``address=False``); the key when unknown."""
    title, where = DOCUMENTS.get(key, (key, ""))
    return f"{title} <{where}>" if where and address else title


def keys_in(text: str) -> list[str]:
    """The source keys a table's source column names, in order, once each."""
    seen: list[str] = []
    for key in _KEY.findall(text):
        if key not in seen:
            seen.append(key)
    return seen


def cite(text: str, addresses: bool = True) -> str:
    """A source column in words: keys become titles, references to the internal fact base go away.

    "FACTS 3.3 (DCDRV kernel-modules)" -> "NVIDIA, Driver Installation Guide: kernel modules <https://...>".
    Text that names no document ("not confirmed (common knowledge ...)") is kept as written.
    """
    keys = keys_in(text)
    if not keys:
        cleaned = _FACTS.sub("", text).replace("not confirmed by the fact base", "not confirmed")
        return re.sub(r"\s{2,}", " ", _balanced(cleaned)).strip(" ;,") or text
    caveat = "not confirmed: " if text.lower().startswith("not confirmed") else ""
    return caveat + "; ".join(document(k, addresses) for k in keys)


def _balanced(text: str) -> str:
    """``text`` without the parentheses that have no partner.

    Removing "FACTS 3.3 (" leaves its ")" behind; a blanket strip of parentheses also cut the closing one
    of a title such as "Debian wiki (NvidiaGraphicsDrivers)", so only unpaired ones go.
    """
    unpaired: set[int] = set()
    opened: list[int] = []
    for i, char in enumerate(text):
        if char == "(":
            opened.append(i)
        elif char == ")":
            if opened:
                opened.pop()
            else:
                unpaired.add(i)
    unpaired.update(opened)
    return "".join(char for i, char in enumerate(text) if i not in unpaired)
