"""``lspci`` output to :class:`PciDevice` records.

Handles the one-line listings (``lspci``, ``-n``, ``-nn``, ``-D``, multi-domain Grace/GB200 hosts), the
verbose blocks (``-v``/``-vv``/``-vvv``, ``-k``, any mix with ``-nn``), the machine-readable forms
(``-m``, ``-mm``, ``-vmm``, with or without ``-nn``) and ``-xxx`` config-space dumps (the hex lines
are read only to fill IDs the text left out). ``lspci -t`` is a tree without device IDs: a ParseError.

Without numeric IDs a vendor ID comes from a short table of vendor names and a device ID only from
an unnamed ``Device 2330``; what cannot be known is left as ``""`` (vendor/device) or None.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError, PciDevice, normalize_pci_address

_ADDR = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

# "0000:01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [...] [10de:2330] (rev a1)"
_HEADER = lazy_re(rf"^(?P<addr>{_ADDR})\s+(?P<cls>[^\s:\"][^:\"]*?):\s*(?P<rest>.*?)\s*$")
# "01:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GH100 [2330]" -ra1 "..." "..."" (-m)
_MACHINE = lazy_re(rf"^(?P<addr>{_ADDR})\s+\"(?P<rest>.*)$")
_HEX_LINE = lazy_re(r"^(?P<offset>[0-9a-fA-F]{2,3}):(?P<bytes>(?: [0-9a-fA-F]{2}){1,16})\s*$")
_TREE_LINE = lazy_re(r"^[\s|`\\+-]*[-+]\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]")
_TREE_ANY = lazy_re(r"[-+]\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]-|^\s*[|\\`+]-[0-9a-fA-F]{2}\.[0-7]")

_PROG_IF = lazy_re(r"(?<!\s)\s*\(prog-if [0-9a-fA-F]{2}(?: \[[^\]]*\])?\)\s*$")
_REV = lazy_re(r"(?<!\s)\s*\(rev [0-9a-fA-F]{2}\)\s*$")
_IDS = lazy_re(r"(?<!\s)\s*\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]\s*$")
_BRACKET_ID = lazy_re(r"^(?P<name>.*?)(?<!\s)\s*\[(?P<id>[0-9a-fA-F]{4})\]\s*$")
_CLASS_CODE = lazy_re(r"^(?:Class\s+)?(?P<code>[0-9a-fA-F]{4})$")
_UNKNOWN_BOTH = lazy_re(r"^Device\s+(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})$")
_NUMERIC_ONLY = lazy_re(r"^(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})$")
_UNNAMED_DEVICE = lazy_re(r"^Device\s+(?P<device>[0-9a-fA-F]{4})$")

_LNK = lazy_re(r"^\s*(?P<which>LnkCap|LnkSta):\s*(?P<rest>.*)$")
_SPEED = lazy_re(r"Speed\s+(?P<speed>\d+(?:\.\d+)?)\s*GT/s")
_WIDTH = lazy_re(r"Width\s+x(?P<width>\d+)")
_FIELD = lazy_re(r"^\s*(?P<key>Subsystem|Kernel driver in use|Kernel modules):\s*(?P<value>.*?)\s*$")
# pciutils lspci.c show_bases(): "Memory at <address>" or, with no address, "<unassigned>" (the BAR and the kernel's
# resource both zero) or "<ignored>" (the BAR holds an address the kernel did not take); -vv prefixes "Region N: "
_MEMORY_REGION = lazy_re(
    r"^\s+(?P<line>(?:Region \d: )?(?:\[virtual\] )?Memory at \S{1,24} \([^)\n]{0,40}\)[^\n]{0,60})$")
_BUS = lazy_re(r"^\s*Bus:\s*primary=[0-9a-fA-F]{2},\s*secondary=(?P<bus>[0-9a-fA-F]{2})\b")
_VMM_FIELD = lazy_re(r"^(?P<key>[A-Za-z]+):\s*(?P<value>.*?)\s*$")

# Class names lspci prints (pci.ids subclass names) -> class code.
CLASS_CODES: dict[str, str] = {
    "non-vga unclassified device": "0000",
    "vga compatible unclassified device": "0001",
    "scsi storage controller": "0100",
    "ide interface": "0101",
    "raid bus controller": "0104",
    "sata controller": "0106",
    "serial attached scsi controller": "0107",
    "non-volatile memory controller": "0108",
    "mass storage controller": "0180",
    "ethernet controller": "0200",
    "infiniband controller": "0207",
    "fabric controller": "0208",
    "network controller": "0280",
    "vga compatible controller": "0300",
    "xga compatible controller": "0301",
    "3d controller": "0302",
    "display controller": "0380",
    "multimedia video controller": "0400",
    "multimedia audio controller": "0401",
    "computer telephony device": "0402",
    "audio device": "0403",
    "multimedia controller": "0480",
    "ram memory": "0500",
    "flash memory": "0501",
    "cxl": "0502",
    "memory controller": "0580",
    "host bridge": "0600",
    "isa bridge": "0601",
    "eisa bridge": "0602",
    "microchannel bridge": "0603",
    "pci bridge": "0604",
    "pcmcia bridge": "0605",
    "nubus bridge": "0606",
    "cardbus bridge": "0607",
    "raceway bridge": "0608",
    "semi-transparent pci-to-pci bridge": "0609",
    "infiniband to pci host bridge": "060a",
    "bridge": "0680",
    "serial controller": "0700",
    "parallel controller": "0701",
    "communication controller": "0780",
    "pic": "0800",
    "dma controller": "0801",
    "timer": "0802",
    "rtc": "0803",
    "sd host controller": "0805",
    "iommu": "0806",
    "system peripheral": "0880",
    "usb controller": "0c03",
    "fibre channel": "0c04",
    "smbus": "0c05",
    "ipmi interface": "0c07",
    "performance counters": "1101",
    "signal processing controller": "1180",
    "processing accelerators": "1200",
    "unassigned class": "ff00",
}

# Vendor names as pci.ids spells them -> vendor ID, for listings printed without numeric IDs.
# Only names that map to one ID (Red Hat and AMD have several, so they are left out).
VENDOR_IDS: dict[str, str] = {
    "NVIDIA Corporation": "10de",
    "Mellanox Technologies": "15b3",
    "Intel Corporation": "8086",
    "ASPEED Technology, Inc.": "1a03",
    "Samsung Electronics Co Ltd": "144d",
    "Microsoft Corporation": "1414",
    "Dell": "1028",
    "Pericom Semiconductor": "12d8",
    "Renesas Technology Corp.": "1912",
    "Broadcom / LSI": "1000",
    "Broadcom Inc. and subsidiaries": "14e4",
    "Matrox Electronics Systems Ltd.": "102b",
    "Micron Technology Inc": "1344",
    "PMC-Sierra Inc.": "11f8",
    "PLDA": "1556",
    "Super Micro Computer Inc": "15d9",
    "Hewlett Packard Enterprise": "1590",
    "Lenovo": "17aa",
}


def normalize_link_speed(text: str | None) -> str | None:
    """``16GT/s``, ``16 GT/s``, ``2.5GT/s`` -> ``16.0 GT/s``, ``2.5 GT/s``; None when no speed is given."""
    if not text:
        return None
    match = re.search(r"(?<![\d.])(\d{1,4}(?:\.\d{1,3})?)\s*GT/s", text)
    if not match:
        return None
    return f"{float(match.group(1)):.1f} GT/s"


def _strip_tail(rest: str) -> str:
    """Drop ``(prog-if ...)`` and ``(rev xx)`` from the end of a device description."""
    previous = None
    while previous != rest:
        previous = rest
        rest = _PROG_IF.sub("", rest)
        rest = _REV.sub("", rest)
    return rest.strip()


def _ids_from_name(name: str) -> tuple[str, str]:
    """Vendor and device IDs from a description printed without numeric IDs ("" when unknown)."""
    name = name.strip()
    match = _UNKNOWN_BOTH.match(name) or _NUMERIC_ONLY.match(name)
    if match:
        return match["vendor"].lower(), match["device"].lower()
    for vendor_name, vendor_id in VENDOR_IDS.items():
        if name == vendor_name:
            return vendor_id, ""
        if name.startswith(vendor_name + " "):
            device = _UNNAMED_DEVICE.match(name[len(vendor_name) + 1 :].strip())
            return vendor_id, device["device"].lower() if device else ""
    return "", ""


def _class_code(cls: str, code: str | None) -> str | None:
    if code:
        return code.lower()
    cls = cls.strip()
    numeric = _CLASS_CODE.match(cls)
    if numeric:
        return numeric["code"].lower()
    return CLASS_CODES.get(cls.lower())


def _description(rest: str) -> tuple[str | None, str, str]:
    """(name, vendor_id, device_id) from what follows ``CLASS:`` on a header or ``Subsystem:`` line."""
    rest = _strip_tail(rest)
    ids = _IDS.search(rest)
    if ids:
        name = rest[: ids.start()].strip() or None
        return name, ids["vendor"].lower(), ids["device"].lower()
    vendor, device = _ids_from_name(rest)
    if _NUMERIC_ONLY.match(rest):
        return None, vendor, device
    return rest or None, vendor, device


@dataclasses.dataclass
class _Builder:
    """One device's fields while its lines are read."""  # (a docstring also spares dataclass a slow signature)

    address: str
    vendor_id: str = ""
    device_id: str = ""
    class_code: str | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    name: str | None = None
    kernel_driver: str | None = None
    link_speed_current: str | None = None
    link_speed_max: str | None = None
    link_width_current: int | None = None
    link_width_max: int | None = None
    secondary_bus: str | None = None
    kernel_modules: tuple[str, ...] | None = None
    memory_regions: list[str] | None = None
    config: dict[int, int] = dataclasses.field(default_factory=dict)

    def set_subsystem(self, text: str) -> None:
        if self.subsystem_vendor_id is not None:
            return
        _name, vendor, device = _description(text)
        if vendor:
            self.subsystem_vendor_id = vendor
            self.subsystem_device_id = device or None

    def set_link(self, which: str, text: str) -> None:
        speed = _SPEED.search(text)
        width = _WIDTH.search(text)
        if which == "LnkCap" and self.link_speed_max is None and self.link_width_max is None:
            self.link_speed_max = normalize_link_speed(speed.group()) if speed else None
            self.link_width_max = int(width["width"]) if width else None
        elif which == "LnkSta" and self.link_speed_current is None and self.link_width_current is None:
            self.link_speed_current = normalize_link_speed(speed.group()) if speed else None
            self.link_width_current = int(width["width"]) if width else None

    def apply_config_space(self) -> None:
        """Fill what the text left out from a ``-x``/``-xxx`` dump of the config-space header."""
        cfg = self.config

        def word(offset: int) -> str | None:
            if offset in cfg and offset + 1 in cfg:
                return f"{cfg[offset + 1]:02x}{cfg[offset]:02x}"
            return None

        vendor, device = word(0x00), word(0x02)
        if vendor and vendor != "ffff" and self.vendor_id in ("", vendor):
            self.vendor_id = vendor
            if device and not self.device_id:
                self.device_id = device
        if self.class_code is None and 0x0A in cfg and 0x0B in cfg:
            self.class_code = f"{cfg[0x0B]:02x}{cfg[0x0A]:02x}"
        header_type = cfg.get(0x0E)
        sub_vendor, sub_device = word(0x2C), word(0x2E)
        if (
            header_type is not None
            and header_type & 0x7F == 0
            and self.subsystem_vendor_id is None
            and sub_vendor
            and sub_vendor not in ("0000", "ffff")
        ):
            self.subsystem_vendor_id = sub_vendor
            self.subsystem_device_id = sub_device

    def build(self) -> PciDevice:
        self.apply_config_space()
        return PciDevice(
            address=self.address,
            vendor_id=self.vendor_id,
            device_id=self.device_id,
            class_code=self.class_code,
            subsystem_vendor_id=self.subsystem_vendor_id,
            subsystem_device_id=self.subsystem_device_id,
            name=self.name,
            kernel_driver=self.kernel_driver,
            link_speed_current=self.link_speed_current,
            link_speed_max=self.link_speed_max,
            link_width_current=self.link_width_current,
            link_width_max=self.link_width_max,
            secondary_bus=self.secondary_bus,
            kernel_modules=self.kernel_modules,
            memory_regions=tuple(self.memory_regions) if self.memory_regions is not None else None,
        )


def _address(text: str) -> str:
    address = normalize_pci_address(text)
    if address is None:  # the regexes only let valid addresses through; kept as a guard
        raise ParseError(f"bad PCI address {text!r}")
    return address


def _from_header(match: re.Match[str]) -> _Builder:
    cls = match["cls"].strip()
    code = None
    bracket = re.match(r"^(?P<name>.*?)\s*\[(?P<code>[0-9a-fA-F]{4})\]$", cls)
    if bracket:
        cls, code = bracket["name"], bracket["code"]
    name, vendor, device = _description(match["rest"])
    return _Builder(
        address=_address(match["addr"]),
        vendor_id=vendor,
        device_id=device,
        class_code=_class_code(cls, code),
        name=name,
    )


def _split_machine_fields(rest: str) -> tuple[list[str], list[str]]:
    """The quoted fields and the ``-rXX``/``-pXX`` options of an ``lspci -m`` line (after the address)."""
    quoted: list[str] = []
    options: list[str] = []
    for token in re.finditer(r"\"(?P<q>[^\"]*)\"|(?P<o>-\S+)", '"' + rest):
        if token["q"] is not None:
            quoted.append(token["q"])
        else:
            options.append(token["o"])
    return quoted, options


def _name_and_id(text: str) -> tuple[str, str | None]:
    """``NVIDIA Corporation [10de]`` -> (name, "10de"); ``10de`` -> ("", "10de"); else (text, None)."""
    text = text.strip()
    bracket = _BRACKET_ID.match(text)
    if bracket:
        return bracket["name"].strip(), bracket["id"].lower()
    if re.fullmatch(r"[0-9a-fA-F]{4}", text):
        return "", text.lower()
    return text, None


def _from_fields(address: str, fields: dict[str, str]) -> _Builder:
    """One device from the ``-m`` / ``-vmm`` fields: Class, Vendor, Device, SVendor, SDevice, Driver."""
    cls_name, cls_code = _name_and_id(fields.get("Class", ""))
    vendor_name, vendor_id = _name_and_id(fields.get("Vendor", ""))
    device_name, device_id = _name_and_id(fields.get("Device", ""))
    if vendor_id is None:
        vendor_id = VENDOR_IDS.get(vendor_name, "")
    if device_id is None:
        unnamed = _UNNAMED_DEVICE.match(device_name)
        device_id = unnamed["device"].lower() if unnamed and vendor_id else ""
    name = " ".join(part for part in (vendor_name, device_name) if part) or None
    builder = _Builder(
        address=address,
        vendor_id=vendor_id,
        device_id=device_id,
        class_code=_class_code(cls_name, cls_code),
        name=name,
        kernel_driver=fields.get("Driver") or None,
    )
    sub_vendor_name, sub_vendor = _name_and_id(fields.get("SVendor", ""))
    sub_device_name, sub_device = _name_and_id(fields.get("SDevice", ""))
    if sub_vendor is None and sub_vendor_name:
        sub_vendor = VENDOR_IDS.get(sub_vendor_name)
    if sub_device is None and sub_vendor:
        unnamed = _UNNAMED_DEVICE.match(sub_device_name)
        sub_device = unnamed["device"].lower() if unnamed else None
    if sub_vendor:
        builder.subsystem_vendor_id = sub_vendor
        builder.subsystem_device_id = sub_device
    return builder


def _from_machine_line(match: re.Match[str]) -> _Builder | None:
    quoted, _options = _split_machine_fields(match["rest"])
    if len(quoted) < 3:
        return None
    keys = ("Class", "Vendor", "Device", "SVendor", "SDevice")
    fields = {key: value for key, value in zip(keys, quoted[:5], strict=False) if value}
    return _from_fields(_address(match["addr"]), fields)


def _parse_vmm(lines: list[str]) -> list[_Builder]:
    """``lspci -vmm``: blank-line separated records of ``Key:\\tvalue`` lines, each opening with Slot."""
    builders: list[_Builder] = []
    fields: dict[str, str] = {}

    def flush() -> None:
        slot = normalize_pci_address(fields.get("Slot", ""))
        if slot and ("Vendor" in fields or "Device" in fields):
            builders.append(_from_fields(slot, fields))
        fields.clear()

    for line in lines:
        match = _VMM_FIELD.match(line)
        if not match:
            if not line.strip():
                flush()
            continue
        if match["key"] == "Slot" and "Slot" in fields:
            flush()
        fields.setdefault(match["key"], match["value"])
    flush()
    return builders


def merge_devices(devices: Iterable[PciDevice]) -> tuple[PciDevice, ...]:
    """One device per address, in first-seen order; a later listing fills what an earlier lacked."""
    merged: dict[str, PciDevice] = {}
    for device in devices:
        old = merged.get(device.address)
        if old is None:
            merged[device.address] = device
            continue
        updates = {
            f.name: getattr(device, f.name)
            for f in dataclasses.fields(PciDevice)
            if getattr(old, f.name) in (None, "") and getattr(device, f.name) not in (None, "")
        }
        merged[device.address] = dataclasses.replace(old, **updates) if updates else old
    return tuple(merged.values())


def parse_lspci(text: str) -> tuple[PciDevice, ...]:
    """Parse any common ``lspci`` listing into devices, in the order printed.

    Raises ParseError for empty input, ``lspci -t`` trees and text with no lspci device lines.
    """
    if not isinstance(text, str):
        raise ParseError("lspci output must be text")
    if not text.strip():
        raise ParseError("empty lspci output")
    import textwrap  # here, not at import: `check --from` and `analyze` may parse no lspci text

    # textwrap.dedent: a listing pasted indented keeps its blocks' relative indentation
    lines = textwrap.dedent(text.replace("\r\n", "\n").replace("\r", "\n")).split("\n")

    builders: list[_Builder] = []
    current: _Builder | None = None
    for line in lines:
        if not line.strip():
            continue
        hex_line = _HEX_LINE.match(line)
        if hex_line:
            if current is not None:
                offset = int(hex_line["offset"], 16)
                for i, byte in enumerate(hex_line["bytes"].split()):
                    current.config.setdefault(offset + i, int(byte, 16))
            continue
        header = _HEADER.match(line)
        if header:
            current = _from_header(header)
            builders.append(current)
            continue
        machine = _MACHINE.match(line)
        if machine:
            current = _from_machine_line(machine)
            if current is not None:
                builders.append(current)
            continue
        if current is None:
            continue
        field = _FIELD.match(line)
        if field:
            if field["key"] == "Subsystem":
                current.set_subsystem(field["value"])
            elif field["key"] == "Kernel modules":
                if current.kernel_modules is None:
                    current.kernel_modules = tuple(m.strip() for m in field["value"].split(",") if m.strip())[:16]
            elif current.kernel_driver is None and field["value"]:
                current.kernel_driver = field["value"]
            continue
        link = _LNK.match(line)
        if link:
            current.set_link(link["which"], link["rest"])
            continue
        region = _MEMORY_REGION.match(line) if "Memory at " in line else None
        if region:
            if current.memory_regions is None:
                current.memory_regions = []
            if len(current.memory_regions) < 8:
                current.memory_regions.append(region["line"].strip())
            continue
        bus = _BUS.match(line)
        if bus and current.secondary_bus is None:  # a bridge: the bus below it, in its own PCI domain
            current.secondary_bus = f"{current.address[:4]}:{bus['bus'].lower()}"

    if not builders:
        builders = _parse_vmm(lines)
    if not builders:
        if any(_TREE_LINE.match(line) or _TREE_ANY.search(line) for line in lines):
            raise ParseError("lspci -t tree has no device IDs")
        raise ParseError("no lspci device lines")
    return merge_devices(builder.build() for builder in builders)
