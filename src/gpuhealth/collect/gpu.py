"""Probes of the GPUs and their driver: the PCI bus, /proc/driver/nvidia, nvidia-smi, NVML, topology."""

from __future__ import annotations

from gpuhealth.collect.base import Probed, read_text
from gpuhealth.host import Host
from gpuhealth.model import (
    CommandRun,
    NvmlReport,
    ParseError,
    PciDevice,
    from_jsonable,
    normalize_pci_address,
)
from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version
from gpuhealth.parsers.smi_nvlink import parse_smi_nvlink
from gpuhealth.parsers.smi_query import parse_smi_query
from gpuhealth.parsers.smi_topo import parse_smi_topo

NVIDIA_SMI_QUERY = ["nvidia-smi", "-q"]
NVIDIA_SMI_TOPO = ["nvidia-smi", "topo", "-m"]
NVIDIA_SMI_NVLINK = ["nvidia-smi", "nvlink", "-s"]


SYS_PCI = "/sys/bus/pci/devices"


def probe_pci(host: Host, timeout: float) -> Probed:
    """NVIDIA devices from sysfs (always there on Linux), named by lspci when it is installed."""
    found = Probed()
    listing = host.listdir(SYS_PCI)
    if listing.names is None:
        found.unavailable["pci_devices"] = f"{SYS_PCI}: {listing.error}"
        return found
    devices = []
    for address in listing.names:
        vendor, _ = read_text(host, f"{SYS_PCI}/{address}/vendor")
        if vendor and vendor.strip().lower() == "0x10de":
            devices.append(_sysfs_device(host, address))
    names = _lspci_names(host, timeout) if devices else {}
    devices = [PciDevice(**{**vars(d), "name": names.get(d.address)}) for d in devices]
    found.fields["pci_devices"] = tuple(_with_ports(host, devices))
    found.sources["pci_devices"] = SYS_PCI
    return found


def _with_ports(host: Host, devices: list[PciDevice]) -> list[PciDevice]:
    """The NVIDIA devices and the PCIe port above each GPU, with the bus below it (``secondary_bus``) and its link
    widths: GH407 weighs a narrow GPU link against what its port can do (as from a full ``lspci -vv``). The port is
    the parent of the GPU's directory in sysfs (``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0``); a GPU on
    the root complex itself (many VMs) has none."""
    by_address = {d.address: d for d in devices}
    for gpu in [d for d in devices if d.is_nvidia_gpu]:
        parts = (host.readlink(f"{SYS_PCI}/{gpu.address}") or "").rstrip("/").split("/")
        parent = normalize_pci_address(parts[-2]) if len(parts) >= 2 else None
        if parent is None or normalize_pci_address(parts[-1]) != gpu.address:
            continue
        port = by_address.get(parent) or _sysfs_port(host, parent)
        if port is not None and port.link_width_max:
            by_address[parent] = PciDevice(**{**vars(port), "secondary_bus": gpu.address[:7]})
    return list(by_address.values())


def _sysfs_port(host: Host, address: str) -> PciDevice | None:
    vendor, _ = read_text(host, f"{SYS_PCI}/{address}/vendor")
    if not vendor:
        return None
    port = _sysfs_device(host, address)
    return PciDevice(**{**vars(port), "vendor_id": vendor.strip().lower().removeprefix("0x")[:4] or None})


def _sysfs_device(host: Host, address: str) -> PciDevice:
    base = f"{SYS_PCI}/{address}"

    def attr(name: str) -> str | None:
        text, _ = read_text(host, f"{base}/{name}")
        return text.strip() if text and text.strip() else None

    def hex4(value: str | None) -> str | None:
        return value.lower().removeprefix("0x")[:4] if value else None

    def width(value: str | None) -> int | None:
        return int(value) if value and value.isdigit() else None

    driver_link = host.readlink(f"{base}/driver")
    return PciDevice(
        address=normalize_pci_address(address) or address,
        vendor_id="10de",
        device_id=hex4(attr("device")) or "",
        class_code=hex4(attr("class")),
        subsystem_vendor_id=hex4(attr("subsystem_vendor")),
        subsystem_device_id=hex4(attr("subsystem_device")),
        kernel_driver=driver_link.rsplit("/", 1)[-1] if driver_link else None,
        link_speed_current=_speed(attr("current_link_speed")),
        link_speed_max=_speed(attr("max_link_speed")),
        link_width_current=width(attr("current_link_width")),
        link_width_max=width(attr("max_link_width")),
        memory_regions=_sysfs_regions(read_text(host, f"{base}/resource")[0]),
    )


# include/linux/ioport.h: the resource flags pci-sysfs.c's "resource" file prints beside each range
_IORESOURCE_MEM = 0x00000200
_IORESOURCE_UNSET = 0x20000000  # "No address assigned yet" (since Linux 3.15)


def _sysfs_regions(text: str | None) -> tuple[str, ...] | None:
    """The memory BARs (resources 0-5) of /sys/bus/pci/devices/<address>/resource ("start end flags" per line,
    drivers/pci/pci-sysfs.c resource_show) as lspci -v prints them: "Region 2: Memory at <unassigned> [size=128G]"
    for one the kernel left without an address (the UNSET flag, or a start of 0 on kernels before the flag), so
    GH304 judges the live host as it judges a pasted lspci. A BAR whose failed assignment the kernel reset to "0 0 0"
    (setup-bus.c reset_resource) reads as no BAR here: the kernel log's lines say that one. None when the file is
    missing or unreadable."""
    if not text:
        return None
    regions = []
    for number, line in enumerate(text.splitlines()[:6]):
        try:
            start, end, flags = (int(word, 16) for word in line.split()[:3])
        except ValueError:
            return None
        if not flags & _IORESOURCE_MEM or end <= start and not flags & _IORESOURCE_UNSET:
            continue  # an I/O BAR, or none (the upper half of a 64-bit BAR reads 0 0 0)
        size = end - start + 1
        where = "<unassigned>" if flags & _IORESOURCE_UNSET or start == 0 else f"{start:x}"
        regions.append(f"Region {number}: Memory at {where} [size={_size_words(size)}] (sysfs)")
    return tuple(regions)


def _size_words(size: int) -> str:
    """A BAR's size as lspci writes it: 16M, 128G."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def _speed(value: str | None) -> str | None:
    """``16.0 GT/s PCIe`` (new kernels) and ``16 GT/s`` (old) both become ``16.0 GT/s``."""
    if not value or "GT/s" not in value:
        return None
    number = value.split("GT/s")[0].strip()
    try:
        return f"{float(number):.1f} GT/s"
    except ValueError:
        return None


def _lspci_names(host: Host, timeout: float) -> dict[str, str]:
    run = host.run(["lspci", "-nn", "-D", "-d", "10de:"], timeout)
    if not run.ok:
        return {}
    from gpuhealth.parsers.lspci import parse_lspci  # here: only when lspci ran (a bundle may hold none)

    try:
        return {d.address: d.name for d in parse_lspci(run.stdout) if d.name}
    except ParseError:
        return {}


def probe_driver(host: Host, timeout: float) -> Probed:
    path = "/proc/driver/nvidia/version"
    found = Probed()
    text, error = read_text(host, path)
    if text is None:
        reason = ("not present: the nvidia kernel module is not loaded" if error == "not present"
                  else error)
        found.unavailable["driver"] = f"{path}: {reason}"
        return found
    try:
        found.fields["driver"] = parse_proc_driver_version(text)
        found.sources["driver"] = path
    except ParseError as exc:
        found.unavailable["driver"] = f"could not parse {path}: {exc}"
    return found


def probe_nvidia_smi(host: Host, timeout: float) -> Probed:
    found = Probed()
    run = host.run(NVIDIA_SMI_QUERY, timeout)
    found.fields["smi_run"] = _trimmed(run)
    source = " ".join(NVIDIA_SMI_QUERY)
    if run.error == "not installed":
        found.unavailable["smi"] = "nvidia-smi is not installed (it comes with the NVIDIA driver)"
    elif run.timed_out:
        found.unavailable["smi"] = f"{source} {run.error}"
    elif run.exit_code != 0:
        first = (run.stdout.strip() or run.stderr.strip()).splitlines()[:1]
        found.unavailable["smi"] = f"{source} failed (exit {run.exit_code}): {first[0] if first else ''}"
    else:
        try:
            found.fields["smi"] = parse_smi_query(run.stdout)
            found.sources["smi"] = source
        except ParseError as exc:
            found.unavailable["smi"] = f"could not parse {source} output: {exc}"
    return found


def _trimmed(run: CommandRun) -> CommandRun:
    """The snapshot keeps a failed command's output (the message matters), not a long healthy one."""
    if run.ok:
        return CommandRun(run.argv, run.exit_code, "", run.stderr[:4000], run.duration_s, False, None)
    return CommandRun(run.argv, run.exit_code, run.stdout[:4000], run.stderr[:4000], run.duration_s,
                      run.timed_out, run.error)


def probe_nvml(host: Host, timeout: float) -> Probed:
    found = Probed()
    try:
        report = from_jsonable(NvmlReport, host.nvml())
    except ParseError as exc:
        found.unavailable["nvml"] = f"NVML answer unreadable: {exc}"
        return found
    found.fields["nvml"] = report
    found.sources["nvml"] = "NVML (nvidia-ml-py)"
    return found


def probe_topology(host: Host, timeout: float) -> Probed:
    """``nvidia-smi topo -m`` (how GPUs connect, CPU/NUMA affinity) and ``nvidia-smi nvlink -s``.

    What nvidia-smi prints instead of links ("all links are inactive", "not supported", MIG mode) is an
    answer: ``nvlink -s`` keeps it per GPU (``NvlinkState.error``), whatever the exit code. A GPU-less
    or NVLink-less system whose ``nvlink -s`` prints only a "not supported" line has no NVLink: ``()``.
    """
    found = Probed()
    for name, argv, parse in (("topology", NVIDIA_SMI_TOPO, parse_smi_topo),
                              ("nvlink", NVIDIA_SMI_NVLINK, parse_smi_nvlink)):
        source = " ".join(argv)
        run = host.run(argv, timeout)
        if run.error == "not installed":
            found.unavailable[name] = f"{source}: nvidia-smi is not installed (it comes with the NVIDIA driver)"
            continue
        if run.timed_out or run.exit_code is None:
            found.unavailable[name] = f"{source} {run.error or 'did not run'}"
            continue
        try:
            found.fields[name] = parse(run.stdout)
            found.sources[name] = source
            continue
        except ParseError as exc:
            problem = str(exc)
        first = next((line.strip() for line in run.text.splitlines() if line.strip()), "")
        if name == "nvlink" and "not supported" in run.text.lower():
            found.fields[name] = ()  # an answer: this system has no NVLink to report
            found.sources[name] = source
        elif run.exit_code != 0:
            found.unavailable[name] = f"{source} failed (exit {run.exit_code}): {first}"
        elif "not supported" in run.text.lower():
            found.unavailable[name] = f"{source}: {first}"
        else:
            found.unavailable[name] = f"could not parse {source} output: {problem}"
    return found
