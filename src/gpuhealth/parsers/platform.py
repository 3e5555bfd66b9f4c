"""The NVSwitch platform the evidence names (knowledge/nvswitch_platforms.csv): ``Snapshot.platform``.

Read from three kinds of program output and from a person's words:

- nvidia-smi's GPU list: eight (or more) SXM GPUs of one HGX board's kind (``snapshot.gpus``);
- ``nvidia-smi topo -m``: every pair of three or more GPUs bonded by NV12 or NV18 (``snapshot.topology``);
- the kernel log: the NVSwitch driver's probe of each NVSwitch ("nvidia-nvswitch: Probing device ...");
- a system's firmware name: dmidecode's ``Product Name:``/``Family:`` lines, ``/sys/class/dmi/id/product_name``
  (a line that is the name alone), or the live host's DMI product name (``os.machine_product``);
- a cloud's answer about the instance: EC2's ``instance-type`` (the name alone), its identity document's
  ``"instanceType"``, Azure's ``vmSize``, Google Cloud's ``machineType``.

Any other place a name stands (a sentence: "on our p4d.24xlarge CUDA fails") is the reporter's words: the platform
is marked ``reported``. It ranks a cause of a symptom (checks/diagnosis.py): where CUDA fails to initialise and
nothing else names a cause, Fabric Manager leads under GH210, unconfirmed (at most a warning when the platform is only
named in words).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuhealth.lazyre import guarded_re, has_folded
from gpuhealth.model import NamedGpu, NvswitchPlatform, Snapshot

# a line of a program that names the system or the instance: dmidecode's fields, the metadata services' keys
_MACHINE_FIELD = guarded_re(
    r"""^\s*(?:Product Name|Family|SKU Number|Version)\s*:"""
    r"""|["']?(?:instance[-_]?type|vmSize|machine[-_]?type|shape)["']?\s*[:=]""", re.IGNORECASE,
    may=has_folded("product name", "family", "sku number", "version", "type", "vmsize", "shape"))


# The NVSwitch driver's probe of each NVSwitch, in the kernel log (open-gpu-kernel-modules kernel-open/nvidia/
# linux_nvswitch.c, nvswitch_probe: it prints the line once the device id is an NVSwitch's)
_NVSWITCH_PROBE = guarded_re(r"nvidia-nvswitch: Probing device ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)",
                             may=lambda line: "nvidia-nvswitch: Probing" in line)


def _probed_nvswitches(source: str, text: str) -> NvswitchPlatform | None:
    """The NVSwitches the kernel log shows the NVSwitch driver probing, if any: the system has them."""
    if "nvidia-nvswitch: Probing" not in text:
        return None
    found = {m[1].lower() for m in _NVSWITCH_PROBE.finditer(text[:2_000_000])}
    if not found:
        return None
    return NvswitchPlatform("an NVSwitch system (the kernel's NVSwitch driver probed its NVSwitches)",
                            f"{len(found)} NVSwitch device(s) probed by nvidia-nvswitch", source)


def platform_in_texts(texts: Iterable[tuple[str, str]]) -> NvswitchPlatform | None:
    """The first NVSwitch system or instance named in ``texts`` (name, text) in a program's output, or NVSwitches the
    kernel log shows probed; else the first named in words, marked reported; None when no text names one."""
    from gpuhealth.knowledge.nvswitch import named_nvswitch_platform

    worded: NvswitchPlatform | None = None
    for source, text in texts:
        probed = _probed_nvswitches(source, text)
        if probed is not None:
            return probed
        found = named_nvswitch_platform(text)
        if found is None:
            continue
        for line in text.splitlines():  # the lines that name one: a program's or a person's?
            named = named_nvswitch_platform(line)
            if named is None:
                continue
            row, name = named
            if _printed(line, name):
                return NvswitchPlatform(row.platform, name, source)
            worded = worded or NvswitchPlatform(row.platform, name, source, reported=True)
    return worded


def platform_of_named(named: Iterable[NamedGpu]) -> NvswitchPlatform | None:
    """The NVSwitch baseboard that GPUs named in words make (parsers/gpu_mentions.named_gpus): eight or more SXM
    data-center GPUs of a model whose 8-GPU baseboard has NVSwitches ("8x H100 SXM", "8 H20s"); a PCIe card, a
    GeForce or a bare "8x A100" (SXM or PCIe) makes none. Reported: the reporter's words."""
    for gpu in named:
        if gpu.board and gpu.form == "sxm" and (gpu.count or 0) >= 8:
            return NvswitchPlatform(gpu.board, f"{gpu.count} x {gpu.named}", gpu.source, reported=True)
    return None


def _printed(line: str, name: str) -> bool:
    """Whether the line holding ``name`` is a program's: the name alone (a DMI file, a metadata answer; a DGX's
    product name carries a part number after it) or a field of dmidecode or of a metadata document."""
    rest = line.strip().removeprefix(name).split()
    return (line.strip().startswith(name) and len(rest) <= 1) or bool(_MACHINE_FIELD.search(line[:500]))


def nvswitch_platform(snapshot: Snapshot) -> NvswitchPlatform | None:
    """The snapshot's NVSwitch platform: the one analyze read (``snapshot.platform``), else the one its nvidia-smi GPU
    list, NVSwitches on its PCI bus, a GPU's Fabric State (nvidia-smi -q) or its DMI product name (a live host's)
    shows. Each of those is a program's output and wins over words."""
    from gpuhealth.knowledge.nvswitch import gpus_on_nvswitch, named_nvswitch_platform

    read = snapshot.platform
    if read is not None and not read.reported:
        return read
    board = gpus_on_nvswitch([g.name or "" for g in snapshot.gpus])
    if board is not None:
        return NvswitchPlatform(board[0].platform, board[1], snapshot.sources.get("smi", "nvidia-smi"))
    switches = [d for d in snapshot.pci_devices or () if d.vendor_id == "10de"
                and ("NVSwitch" in (d.name or "") or (d.class_code or "").startswith("0680"))]
    if switches:  # the NVSwitches themselves on the bus (lspci: NVIDIA's "Bridge" devices, class 0680)
        return NvswitchPlatform("an NVSwitch system (NVSwitches on the PCI bus)", f"{len(switches)} NVSwitch device(s)",
                                snapshot.sources.get("pci_devices", "lspci"))
    meshed = _switched_topology(snapshot)
    if meshed is not None:  # nvidia-smi topo -m: every pair of three or more GPUs bonded by 12 or 18 NVLinks
        return NvswitchPlatform("an NVSwitch system (every GPU pair joined by NVLink in nvidia-smi topo -m)", meshed,
                                snapshot.sources.get("topology", "nvidia-smi topo -m"))
    joined = [g for g in snapshot.gpus if (g.fabric_state or "N/A").strip().lower() not in _OUTSIDE_FABRIC]
    if joined:  # nvidia-smi -q shows a Fabric State only for GPUs of an NVSwitch fabric ("N/A" elsewhere)
        return NvswitchPlatform("an NVSwitch system (its GPUs have a fabric state)",
                                f"Fabric State: {joined[0].fabric_state}", snapshot.sources.get("smi", "nvidia-smi -q"))
    product = snapshot.os.machine_product if snapshot.os is not None else None
    named = named_nvswitch_platform(product) if product else None
    if named is not None:
        return NvswitchPlatform(named[0].platform, named[1], "/sys/class/dmi/id/product_name")
    return read


# nvidia-smi -q Fabric States of a GPU outside any NVSwitch fabric: "N/A", or NVML_GPU_FABRIC_STATE_NOT_SUPPORTED's
# "Not Supported" (NVML API Reference, Fabric definitions)
_OUTSIDE_FABRIC = ("n/a", "not supported", "")


# nvidia-smi topo -m's "NV#": a bonded set of # NVLinks. An A100 has 12 NVLinks, an H100/H200/H800/H20 18 (NVIDIA Fabric
# Manager User Guide, GPU Baseboard Topologies: each A100 has two links to each of six NVSwitches, each H100 its 18 to
# four), so NV12 or NV18 between every pair of three or more GPUs is more links than any GPU has without a switch
# (direct NVLink bridges join pairs: an H100 NVL pair shows NV12, and no third GPU)
_SWITCHED_BONDS = ("NV12", "NV18")


def _switched_topology(snapshot: Snapshot) -> str | None:
    """``"GPU0-GPU1 NV18 (8 GPUs)"`` when nvidia-smi topo -m shows every pair of its three or more GPUs joined by NV12
    or NV18; else None."""
    topology = snapshot.topology
    if topology is None:
        return None
    gpus = [d for d in topology.devices if d.startswith("GPU")]
    links = {(link.a, link.b): link.kind for link in topology.links
             if link.a.startswith("GPU") and link.b.startswith("GPU")}
    if len(gpus) < 3 or len(links) < len(gpus) * (len(gpus) - 1):
        return None
    if not all(kind in _SWITCHED_BONDS for kind in links.values()):
        return None
    return f"{gpus[0]}-{gpus[1]} {links.get((gpus[0], gpus[1]))} ({len(gpus)} GPUs)"


def off_nvswitch(snapshot: Snapshot) -> str | None:
    """What shows the GPUs are not on an NVSwitch board, in words ("nvidia-smi lists NVIDIA GeForce RTX 4090"): the
    GPUs listed are none of an NVSwitch board's SXM parts (a PCIe card, a GeForce, a DGX-1's SXM2), with no NVSwitch on
    the bus and no Fabric State. None when that is not known (no GPU list, or an SXM part of such a board, however
    many: a VM may be given part of the board). Fabric Manager is needed only on NVSwitch systems."""
    from gpuhealth.knowledge.nvswitch import rows

    names = [g.name or "" for g in snapshot.gpus]
    if not names or not all(names) or nvswitch_platform(snapshot) is not None:
        return None
    boards = [row for row in rows() if row.kind == "gpu"]
    if any(row.pattern.search(name[:200]) for row in boards for name in names):  # type: ignore[attr-defined]
        return None
    shown = ", ".join(dict.fromkeys(name.strip() for name in names))
    return f"{snapshot.sources.get('smi', 'nvidia-smi')} lists {shown[:120]}"
