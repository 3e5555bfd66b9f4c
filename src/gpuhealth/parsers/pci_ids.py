"""The pci.ids database (``/usr/share/misc/pci.ids``, ``/usr/share/hwdata/pci.ids``): device names.

Format: ``vvvv  Vendor name`` at column 0, ``\\tdddd  Device name`` under it, ``\\t\\tssss dddd  Subsystem``
under a device (ignored here), ``C cc  Class`` blocks at the end, ``#`` comments.
"""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError

_VENDOR = lazy_re(r"^(?P<id>[0-9a-fA-F]{4})\s+(?P<name>\S.*?)\s*$")
_DEVICE = lazy_re(r"^\t(?P<id>[0-9a-fA-F]{4})\s+(?P<name>\S.*?)\s*$")
_VENDOR_ARG = lazy_re(r"^(?:0x)?(?P<id>[0-9a-fA-F]{4})$")


def parse_pci_ids(text: str, vendor: str = "10de") -> dict[str, str]:
    """Device ID (4 lower-case hex digits) -> name, for one vendor of a pci.ids file.

    Returns ``{}`` when the file is pci.ids but does not list the vendor. Raises ParseError when the
    text has no vendor lines at all, or ``vendor`` is not a 4-digit hex ID.
    """
    if not isinstance(text, str):
        raise ParseError("pci.ids must be text")
    wanted = _VENDOR_ARG.match(vendor.strip()) if isinstance(vendor, str) else None
    if wanted is None:
        raise ParseError(f"vendor must be 4 hex digits, not {vendor!r}")
    vendor_id = wanted["id"].lower()

    devices: dict[str, str] = {}
    saw_vendor = False
    in_vendor = False
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("\t\t"):
            continue  # subsystem of the device above, or a class's programming interface
        if line.startswith("\t"):
            if in_vendor:
                device = _DEVICE.match(line)
                if device:
                    devices.setdefault(device["id"].lower(), device["name"])
            continue
        match = _VENDOR.match(line)
        if match:
            saw_vendor = True
            in_vendor = match["id"].lower() == vendor_id
        else:
            in_vendor = False  # "C 03  Display controller" and anything else at column 0
    if not saw_vendor:
        raise ParseError("no pci.ids vendor lines")
    return devices
