"""What CUDA's peer-to-peer samples measured (p2pBandwidthLatencyTest, simpleP2P), as GH706 reads it.

The reading is NVIDIA's: with PCIe ACS redirection or the IOMMU in the way, peer traffic is sent up to the
root complex, "causing a significant performance reduction or even a hang" (NCCL User Guide, Troubleshooting,
PCI Access Control Services <https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html>).
p2pBandwidthLatencyTest measures each pair twice: with P2P disabled the copy is staged through host memory
(two PCIe crossings), with P2P enabled it goes straight from GPU to GPU, so a healthy direct path is at least
as fast as the staged one; NCCL's maintainers read "the bandwidth in the P2P-enabled case is very low" as ACS
(NVIDIA/nccl#199 <https://github.com/NVIDIA/nccl/issues/199>). A pair is judged slow when its P2P-enabled
bandwidth is below half of its P2P-disabled bandwidth: the sample itself warns that its numbers vary ("not
meant for performance measurements"), and a factor of two is far outside that variation while a redirected
path typically loses far more.

Pairs joined by NVLink (``topo -m`` NV#, ``topo -p2p n`` OK) are not PCIe pairs and are not judged here, nor
pairs whose connectivity says P2P is not possible (their "enabled" copies are the same staged fallback).
"""

from __future__ import annotations

from gpuhealth.commands import fix as slotted
from gpuhealth.model import Fix, P2pPair, P2pTest, Snapshot

P2P_SLOW_FRACTION = 0.5  # P2P-enabled below this share of P2P-disabled bandwidth on a PCIe pair: redirected
MAX_SHOWN = 8


def _gpu_number(name: str) -> int | None:
    return int(name[3:]) if name.startswith("GPU") and name[3:].isdecimal() else None


def _nvlink_pairs(snapshot: Snapshot) -> set[frozenset[int]]:
    """nvidia-smi's GPU numbers of the pairs joined by NVLink: ``topo -m`` NV#, ``topo -p2p n`` OK."""
    found: set[frozenset[int]] = set()
    links = [(link.a, link.b) for link in (snapshot.topology.links if snapshot.topology else ())
             if link.kind.startswith("NV") and link.kind[2:].isdecimal()]
    p2p = snapshot.p2p
    if p2p is not None and p2p.topo_p2p_capability == "nvlink":
        links += [(link.a, link.b) for link in p2p.topo_p2p if link.kind == "OK"]
    for a, b in links:
        first, second = _gpu_number(a), _gpu_number(b)
        if first is not None and second is not None and first != second:
            found.add(frozenset((first, second)))
    return found


def _smi_index(snapshot: Snapshot, test: P2pTest, cuda_index: int) -> int:
    """nvidia-smi's number of a CUDA device: by its PCI address where both sides know it (CUDA may number GPUs
    fastest first, nvidia-smi by PCI bus), else the same number."""
    device = next((d for d in test.devices if d.index == cuda_index), None)
    if device is None or device.pci_bus is None:
        return cuda_index
    for gpu in snapshot.gpus:
        parts = (gpu.pci_address or "").split(":")  # "00000000:3B:00.0" (nvidia-smi), "0000:3b:00.0" (lspci)
        if len(parts) != 3 or gpu.index is None:
            continue
        try:
            domain, bus = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        if bus == device.pci_bus and domain == (device.pci_domain or 0):
            return gpu.index
    return cuda_index


def _ratios(pair: P2pPair) -> list[tuple[str, float, float]]:
    """(direction, enabled, disabled) for each direction the sample measured both ways."""
    return [(direction, enabled, disabled) for direction, enabled, disabled in (
        ("unidirectional", pair.uni_enabled, pair.uni_disabled), ("bidirectional", pair.bi_enabled, pair.bi_disabled))
        if enabled is not None and disabled is not None and disabled > 0]


def slow_pairs(snapshot: Snapshot) -> list[tuple[frozenset[int], str]]:
    """One line per PCIe GPU pair whose P2P-enabled bandwidth is below ``P2P_SLOW_FRACTION`` of its P2P-disabled
    bandwidth, worst first, with the pair (CUDA's numbers): "GPU0 -> GPU1: P2P=Enabled 0.81 GB/s, P2P=Disabled 11.55
    GB/s (unidirectional, 7%)"."""
    p2p = snapshot.p2p
    if p2p is None:
        return []
    nvlink = _nvlink_pairs(snapshot)
    found: list[tuple[float, frozenset[int], str]] = []
    for test in p2p.tests:
        for pair in test.pairs:
            if pair.access is False:
                continue
            if frozenset((_smi_index(snapshot, test, pair.src), _smi_index(snapshot, test, pair.dst))) in nvlink:
                continue
            slow = [(e / d, direction, e, d) for direction, e, d in _ratios(pair) if e < P2P_SLOW_FRACTION * d]
            if not slow:
                continue
            ratio, direction, enabled, disabled = min(slow)
            line = (f"GPU{pair.src} -> GPU{pair.dst}: P2P=Enabled {enabled:.2f} GB/s, P2P=Disabled {disabled:.2f} GB/s "
                    f"({direction}, {ratio:.0%})")
            found.append((ratio, frozenset((pair.src, pair.dst)), line))
    found.sort(key=lambda item: item[0])
    return [(pair, line) for _, pair, line in found]


def wrong_data(snapshot: Snapshot) -> list[str]:
    """simpleP2P's data check after a direct copy between two GPUs with peer access: its error lines and result."""
    p2p = snapshot.p2p
    lines: list[str] = []
    for test in p2p.tests if p2p else ():
        if test.verification_errors or test.result == "failed" and any(p.access for p in test.pairs):
            lines += [*test.lines[:2], *test.verification_errors[:4]] + (["Test failed!"] if test.result == "failed"
                                                                          else [])
    return lines[:MAX_SHOWN]


def tests_source(snapshot: Snapshot) -> str:
    """The evidence header for the samples' lines."""
    p2p = snapshot.p2p
    programs = sorted({t.program for t in p2p.tests}) if p2p else []
    return snapshot.sources.get("p2p") or ", ".join(programs) or "CUDA samples"


def acs_fixes(snapshot: Snapshot, fixes: tuple[Fix, ...]) -> tuple[Fix, ...]:
    """GH706's fixes with the table's ``setpci -s <bridge>`` step written out for each bridge that lspci -vvv shows
    redirecting (the NCCL guide's command, nothing else changed); the step stays as it is when none is known."""
    bridges = snapshot.p2p.acs_bridges[:MAX_SHOWN] if snapshot.p2p else ()
    if not bridges:
        return fixes
    out: list[Fix] = []
    for row in fixes:
        if "setpci" not in row.command or "<bridge>" not in row.command:
            out.append(row)
            continue
        template = row.command.replace("<bridge>", "{pci}")
        out += [slotted(template, disruptive=True, pci=bridge,
                        note=f"bridge {bridge}: its ACSCtl redirects (lspci -vvv); bare metal, as root, with no GPU "
                             "job running; it does not persist across reboots (repeat it at each boot, or disable "
                             "ACS in the BIOS)") for bridge in bridges]
    return tuple(out)
