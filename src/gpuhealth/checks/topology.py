"""GH7xx: how the GPUs connect (NVLink, PCIe, sockets), PCIe AER errors, Xid storms, and active tests.

Expectations (active NVLinks, PCIe width) come from the config file, per model or for every GPU, or
from the per-model defaults in ``knowledge/gpu_expectations.csv``; see docs/configuration.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpuhealth.checks.expected import expected as host_expected
from gpuhealth.checks.gpu_state import REBOOT, seen_gpus
from gpuhealth.checks.kernel_log import Tally, last_seen, samples, tallies
from gpuhealth.checks.registry import Draft, Expectations, Skip, check
from gpuhealth.commands import filled
from gpuhealth.commands import fix as slotted
from gpuhealth.knowledge import gpu_expectations
from gpuhealth.knowledge import xid as xid_catalogue
from gpuhealth.model import (
    ActiveGpuResult,
    EventGroup,
    Evidence,
    Fix,
    Gpu,
    KernelEvent,
    KernelLog,
    NvlinkState,
    Severity,
    Snapshot,
    Subject,
)
from gpuhealth.parsers.kernel_log import timestamp_seconds

AER_CORRECTED_WARNING = 10  # corrected AER errors on one GPU from which it is a warning
XID_RATE_DEFAULT = 10  # GH704: more than this many Xids of one code per GPU in any hour
XID_WINDOW_S = 3600.0
BANDWIDTH_LOW_FRACTION = 0.5  # GH710: below this share of the link's theoretical rate
MATMUL_TOLERANCE = 1e-2  # as GH607: healthy GPUs differ from the CPU by about 1e-4
# Usable bytes per second per lane after line coding (GB/s): Gen1/2 8b/10b, Gen3-5 128b/130b, Gen6 FLIT.
# Gen3 x16 = 15.75, Gen4 x16 = 31.5, Gen5 x16 = 63 GB/s (Linux drivers/pci: 8, 16, 32 GT/s per lane).
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.984625, 4: 1.96925, 5: 3.9385, 6: 7.563}
NVLINK_FIXES = (Fix("nvidia-smi nvlink -e -i {index}", "any", note="error counters per link"),
                Fix("systemctl status nvidia-fabricmanager", "any", note="NVSwitch systems"),
                REBOOT)
ACTIVE_SOURCE = "python3 -c <gpuhealth active tests>"


# --------------------------------------------------------------------------- expectations


def expected_value(snapshot: Snapshot, expect: Expectations, name: str | None, key: str) -> tuple[int | None, str]:
    """(value, where it comes from): the config's [check.models."<name>"], its [check] key, the platform the
    machine is (knowledge/platforms.csv), the model default."""
    wanted = (name or "").strip().lower()
    for model, values in expect.models.items():
        if wanted and model.strip().lower() == wanted and values.get(key) is not None:
            return values[key], f'config [check.models."{model}"] {key}'
    value, origin = host_expected(snapshot, expect, key)
    if value is not None:
        return value, origin
    defaults = gpu_expectations.lookup(name)
    if defaults is not None and defaults.get(key) is not None:
        return defaults.get(key), f"default for {name} (knowledge/gpu_expectations.csv)"
    return None, ""


def _gpu_for(snapshot: Snapshot, state: NvlinkState) -> Gpu | None:
    return next((g for g in snapshot.gpus if state.uuid and g.uuid == state.uuid), None) or next(
        (g for g in snapshot.gpus if g.index == state.gpu_index), None)


# --------------------------------------------------------------------------- GH701


@check("GH701", "nvlink-count-below-expected", "Fewer active NVLinks than expected", requires=("nvlink",))
def nvlink_count_below_expected(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Per GPU, the links `nvidia-smi nvlink -s` shows with a speed (active), compared with the expected
    count: `[check.models."<name>"] nvlink_count` or `nvlink_count` in the config file, else the NVLinks per
    GPU of the platform the machine is (`knowledge/platforms.csv`: a DGX model by its firmware's product name,
    from NVIDIA's user guide), else the model's default in `knowledge/gpu_expectations.csv` (H100 SXM 18, A100
    SXM4 12, V100 SXM2 6). Fewer active links than expected is a warning.

    Why it matters:
    Every missing link takes its share of GPU-to-GPU bandwidth away: NCCL all-reduce and tensor
    parallelism slow down on that GPU, and through it the whole job. A GPU can also come up with
    links not even listed (a baseboard or NVSwitch fault), which GH408 cannot see.

    How to fix:
    Read the link error counters (`nvidia-smi nvlink -e -i <index>`) and the kernel log for Xid 74 or
    SXid; on NVSwitch systems check `systemctl status nvidia-fabricmanager`. A reboot retrains the
    links; links that stay down need service.

    Exceptions:
    GPUs in MIG mode do not report NVLink and are not judged. A model without a default and without
    a configured count is not judged; when no GPU has an expectation the check is skipped.
    """
    states: tuple[NvlinkState, ...] = snapshot.nvlink or ()
    source = snapshot.sources.get("nvlink") or "nvidia-smi nvlink -s"
    judged = False
    if not states:
        count, origin = host_expected(snapshot, expect, "nvlink_count")
        if count:
            yield Draft(Severity.WARNING, f"nvidia-smi reports no NVLink, {count} active links per GPU expected "
                                          f"({origin})",
                        evidence=(Evidence(source, ("(no GPU with NVLink listed)",)),),
                        fixes=tuple(filled(f, index=0) for f in NVLINK_FIXES))
            return
        yield Skip("nvidia-smi nvlink -s listed no GPU with NVLink")
        return
    for state in states:
        gpu = _gpu_for(snapshot, state)
        name = state.gpu_name or (gpu.name if gpu else None)
        expected, origin = expected_value(snapshot, expect, name, "nvlink_count")
        if not expected or state.error == "not supported in MIG mode":
            continue
        judged = True
        active = sum(1 for speed in state.link_speeds_gbps if speed is not None)
        if active >= expected:
            continue
        index = state.gpu_index if state.gpu_index is not None else "<index>"
        down = [f"Link {i}: <inactive>" for i, speed in enumerate(state.link_speeds_gbps) if speed is None]
        listed = state.error or f"{len(state.link_speeds_gbps)} links listed"
        lines = (f"GPU {index}: {name or ''}", *(down or [listed]))
        yield Draft(Severity.WARNING, f"{active} of {expected} expected NVLinks active ({origin})",
                    subject=Subject(state.gpu_index, gpu.pci_address if gpu else None),
                    evidence=(Evidence(source, lines),),
                    fixes=tuple(filled(f, index=state.gpu_index) for f in NVLINK_FIXES),
                    explains=("GH408",))
    if not judged:
        yield Skip("no NVLink count expected for these GPUs: set nvlink_count in the config file "
                   "(docs/configuration.md)")


# --------------------------------------------------------------------------- GH702


def _is_gpu(device: str) -> bool:
    return device.startswith("GPU") and device[3:].isdigit()


@check("GH702", "p2p-crosses-sockets", "GPU pairs talk through the CPU interconnect", requires=("topology",))
def p2p_crosses_sockets(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    In `nvidia-smi topo -m`, GPU pairs connected only by `SYS` (the path crosses the interconnect
    between CPU sockets) on a host where other GPU pairs have NVLink (`NV#`) or a PCIe switch (`PIX`,
    `PXB`); and, on a multi-socket host, GPUs whose NUMA affinity is `N/A`. Both are info.

    Why it matters:
    Peer-to-peer traffic between GPUs on different sockets goes through the CPUs (UPI/Infinity
    Fabric): several times slower than NVLink, often without P2P at all, so a collective that spans
    such a pair runs at its speed. A GPU without NUMA affinity cannot be paired with its local CPU
    cores and memory, so data loading and pinned copies may cross sockets too.

    How to fix:
    Place tightly coupled ranks (tensor parallel groups) on GPUs that share NVLink or a PCIe switch
    (`CUDA_VISIBLE_DEVICES`, the scheduler's GPU binding); pin processes to the GPU's CPUs
    (`numactl --cpunodebind=<node> --membind=<node>`). For `N/A` NUMA affinity check the BIOS NUMA
    settings (NPS, sub-NUMA clustering) and, in a VM, the hypervisor's NUMA topology.

    Exceptions:
    Hosts whose GPUs all connect through `SYS` (no faster pair exists) are a design, not reported.
    A driver whose `topo -m` has no NUMA Affinity column reads as N/A for every GPU.
    """
    topology = snapshot.topology
    source = snapshot.sources.get("topology") or "nvidia-smi topo -m"
    gpus = [d for d in topology.devices if _is_gpu(d)]
    pairs = {(link.a, link.b): link.kind for link in topology.links
             if _is_gpu(link.a) and _is_gpu(link.b) and link.a < link.b}
    slow = sorted((p for p, kind in pairs.items() if kind == "SYS"), key=lambda p: (int(p[0][3:]), int(p[1][3:])))
    fast = sorted(p for p, kind in pairs.items() if re.fullmatch(r"NV\d+|PIX|PXB", kind))
    if slow and fast:
        shown = [f"{a} <-> {b}: SYS" for a, b in slow[:8]] + (
            [f"... {len(slow) - 8} more SYS pairs ..."] if len(slow) > 8 else [])
        shown += [f"{a} <-> {b}: {pairs[(a, b)]}" for a, b in fast[:2]]
        yield Draft(Severity.INFO,
                    f"{len(slow)} GPU pair(s) connect only through the CPU interconnect (SYS) while "
                    f"{len(fast)} pair(s) have NVLink or a PCIe switch: "
                    + ", ".join(f"{a}-{b}" for a, b in slow[:8]) + ("..." if len(slow) > 8 else ""),
                    evidence=(Evidence(source, tuple(shown)),),
                    fixes=(Fix("nvidia-smi topo -m", "any", note="group ranks on GPUs sharing NV#/PIX links"),))
    sockets = {topology.cpu_affinity[g] for g in gpus if g in topology.cpu_affinity}
    nodes = {topology.numa_affinity[g] for g in gpus if g in topology.numa_affinity}
    multi_socket = bool(slow) or len(sockets) > 1 or len(nodes) > 1
    missing = [g for g in gpus if g not in topology.numa_affinity]
    if multi_socket and missing:
        for device in missing:
            index = int(device[3:])
            gpu = next((g for g in snapshot.gpus if g.index == index), None)
            cpus = topology.cpu_affinity.get(device, "N/A")
            yield Draft(Severity.INFO, f"{device} has no NUMA affinity (N/A) on a multi-socket host",
                        subject=Subject(index, gpu.pci_address if gpu else None),
                        evidence=(Evidence(source, (f"{device}: CPU Affinity {cpus}, NUMA Affinity N/A",)),),
                        fixes=(Fix("numactl --hardware", "any", note="the NUMA nodes the kernel sees"),
                               Fix("check the BIOS NUMA settings (NPS / sub-NUMA clustering)", "any")))


# --------------------------------------------------------------------------- GH703


def _gpu_addresses(snapshot: Snapshot, events: list[KernelEvent]) -> set[str]:
    addresses = {g.pci_address for g in snapshot.gpus if g.pci_address}
    addresses |= {d.address for d in snapshot.nvidia_pci_gpus}
    addresses |= {e.pci_address for e in events if e.pci_address and f"nvidia {e.pci_address}:" in e.line}
    return addresses


@check("GH703", "pcie-aer-errors", "PCIe AER errors on a GPU", requires=("kernel_log",))
def pcie_aer_errors(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    PCIe Advanced Error Reporting lines in the kernel log (`AER: Corrected error received: <address>`,
    `<driver> <address>: AER: PCIe Bus Error: severity=...`) naming a GPU's PCI address, counted per
    GPU and severity. Any uncorrected error (Non-Fatal or Fatal) is critical; 10 or more corrected
    errors on one GPU are a warning.

    Why it matters:
    Corrected errors are retried by the link layer: a few are harmless, a steady stream means a
    marginal link (riser, cable, slot, signal integrity) that costs bandwidth and often precedes a
    link retraining to a narrower width or a GPU falling off the bus. An uncorrected error loses or
    corrupts a transaction: the driver may report Xid 79 and the GPU need a reset or reboot.

    How to fix:
    `sudo lspci -vvv -s <address>` shows the AER status registers (`CESta`, `UESta`). Reseat the GPU,
    check or replace its riser and cable, update the BIOS and the GPU's firmware; if errors follow the
    GPU to another slot, send it for service.

    Exceptions:
    AER lines about a bridge or root port above the GPU (rather than the GPU itself) are not counted.
    Kernels older than 4.x print the source as a requester ID (`id=3b00`, domain 0 assumed). Fewer than
    10 corrected errors per GPU are not reported.
    """
    gpus = _gpu_addresses(snapshot, [e for e in snapshot.kernel_log.events if e.kind == "aer"])
    found = tallies(snapshot, {"aer"}, key=lambda g: (g.pci_address, g.first.detail or ""),
                    keep=lambda g: g.pci_address in gpus)
    for address in sorted({a for a, _ in found}):
        uncorrected = [(d, t) for (a, d), t in found.items() if a == address and d.startswith("Uncorrected")]
        corrected = found.get((address, "Corrected"))
        corrected_count = corrected.count if corrected else 0
        shown = Tally()
        if uncorrected:
            for _, tally in uncorrected:
                shown.merge(tally)
            kinds = sorted(d for d, _ in uncorrected)
            severity = Severity.CRITICAL
            message = (f"{shown.count} uncorrected PCIe AER error(s) ({', '.join(kinds)})"
                       + (f" and {corrected_count} corrected" if corrected_count else "") + f" on GPU {address}")
        elif corrected is not None and corrected_count >= AER_CORRECTED_WARNING:
            severity, shown = Severity.WARNING, corrected
            message = f"{corrected_count} corrected PCIe AER errors on GPU {address}"
        else:
            continue
        first = shown.first.timestamp if shown.first else None
        last = shown.last.timestamp if shown.last else None
        if first and last:
            message += f", first {first}, last {last}" if shown.count > 1 else f" at {first}"
        yield Draft(severity, message, subject=snapshot.gpu_subject(address),
                    evidence=(Evidence(snapshot.kernel_log.source, samples(shown)),),
                    fixes=(slotted("sudo lspci -vvv -s {pci} | grep -E 'CESta|UESta|LnkSta'", pci=address),
                           Fix("reseat the GPU and check or replace its riser and cable", "any", disruptive=True)),
                    explains=("GH407",))


# --------------------------------------------------------------------------- GH704


def log_seconds(timestamp: str | None) -> float | None:
    """A kernel log timestamp as seconds (absolute or since boot; only differences are used)."""
    return timestamp_seconds(timestamp)


@check("GH704", "xid-rate-high", "An Xid storm: the same Xid many times an hour", requires=("kernel_log",))
def xid_rate_high(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Per GPU and Xid code, the most Xid lines within any one hour, measured with the log's own
    timestamps. More than `xid_rate_per_hour` (config file, default 10) of one code that is not
    informational in NVIDIA's catalogue is a warning: a storm, summarised with its count and span.

    Why it matters:
    GH301 reports each Xid code once with its total; a storm says the error is ongoing rather than a
    single past event: an application crash-looping on a bad GPU, a GPU that keeps faulting, or a
    link that keeps failing. Storms also flood the kernel log and slow the driver down.

    How to fix:
    Find what runs on that GPU (`nvidia-smi --query-compute-apps=pid,name --format=csv`) and stop it;
    act on the Xid as GH301 says (reset the GPU, drain the node); if the storm returns after a reset,
    send the GPU for service.

    Exceptions:
    Informational Xids (such as 63, a successful row remapping) and Xid 79 (GH302) are not counted.
    Lines without a timestamp cannot be placed in time and are left out; a plain paste of NVRM lines
    has none.
    """
    limit = expect.xid_rate_per_hour or XID_RATE_DEFAULT
    storms: dict[tuple[str | None, int], tuple[int, str | None, str | None]] = {}
    for group in snapshot.kernel_log.tallies({"xid"}):
        if group.xid is None or group.xid == 79:
            continue
        info = xid_catalogue.lookup(group.xid)
        if info is not None and info.severity is Severity.INFO:
            continue
        peak = _peak(group, snapshot.kernel_log)
        key = (group.pci_address, group.xid)
        if peak[0] > storms.get(key, (0, None, None))[0]:
            storms[key] = peak
    found = tallies(snapshot, {"xid"})
    for (address, code), (peak, start, end) in sorted(storms.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        if peak <= limit:
            continue
        info = xid_catalogue.lookup(code)
        name = f" ({info.mnemonic})" if info else ""
        total = found[(address, code)]
        yield Draft(Severity.WARNING,
                    f"Xid {code}{name} storm on GPU {address or '(address not logged)'}: {peak} within one hour "
                    f"(more than {limit}), from {start} to {end}; {total.count} in the log",
                    subject=snapshot.gpu_subject(address),
                    evidence=(Evidence(snapshot.kernel_log.source, samples(total)),),
                    fixes=(Fix("nvidia-smi --query-compute-apps=pid,name,gpu_bus_id --format=csv", "any",
                               note="what runs on the GPU; stop it, then act on the Xid (GH301)"),),
                    labels={"xid": str(code)}, last_seen=last_seen(total))


def _peak(group: EventGroup, log: KernelLog) -> tuple[int, str | None, str | None]:
    """Most lines within an hour: the scanner's figure, or (a log built from events alone) computed here."""
    if log.groups:
        return group.peak_hour, group.peak_from, group.peak_to
    timed = sorted((seconds, e.timestamp) for e in log.events
                   if e.kind == "xid" and (e.pci_address, e.xid) == (group.pci_address, group.xid)
                   and (seconds := log_seconds(e.timestamp)) is not None)
    if not timed:
        return 0, None, None
    peak, start = _densest_hour([t for t, _ in timed])
    return peak, timed[start][1], timed[start + peak - 1][1]


def _densest_hour(times: list[float]) -> tuple[int, int]:
    """(most events within any XID_WINDOW_S, index of the window's first event)."""
    best, best_start, start = 0, 0, 0
    for end, moment in enumerate(times):
        while moment - times[start] > XID_WINDOW_S:
            start += 1
        if end - start + 1 > best:
            best, best_start = end - start + 1, start
    return best, best_start


# --------------------------------------------------------------------------- GH705


@check("GH705", "pcie-width-below-expected", "A GPU's PCIe link is narrower than expected")
def pcie_width_below_expected(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The GPU's current PCIe link width (nvidia-smi/NVML, else sysfs) below the expected width:
    `[check.models."<name>"] pcie_width` or `pcie_width` in the config file, else the model's default in
    `knowledge/gpu_expectations.csv` (x16 for the data-centre boards listed there). A warning.

    Why it matters:
    GH407 compares the link with the maximum the GPU reports, which is the GPU's own capability: a
    x16 card in a slot wired or trained at x8 can look normal there. An expectation says what this
    server should have, so a narrow link is reported even when every GPU is alike.

    How to fix:
    Compare `sudo lspci -vvv -s <address> | grep -E 'LnkCap|LnkSta'` with the slot's specification,
    check the BIOS slot settings (bifurcation), then reseat the GPU or replace its riser.

    Exceptions:
    A GPU may narrow its link while idle to save power; check a reported GPU again under load. A
    model without a default and without a configured width is not judged.
    """
    gpus = seen_gpus(snapshot)
    pci = {d.address: d for d in snapshot.nvidia_pci_gpus}
    judged = False
    for seen in gpus:
        gpu = seen.gpu
        expected, origin = expected_value(snapshot, expect, gpu.name, "pcie_width")
        device = pci.get(gpu.pci_address or "")
        width = gpu.pcie_width_current or (device.link_width_current if device else None)
        if not expected or not width:
            continue
        judged = True
        if width >= expected:
            continue
        address = gpu.pci_address or "<address>"
        where = seen.source("pcie_width_current") if gpu.pcie_width_current else f"/sys/bus/pci/devices/{address}"
        yield Draft(Severity.WARNING, f"PCIe link x{width}, x{expected} expected ({origin})", subject=seen.subject,
                    evidence=(Evidence(where, (f"Link Width Current: {width}x",)),),
                    fixes=(slotted("sudo lspci -vvv -s {pci} | grep -E 'LnkCap|LnkSta'", pci=gpu.pci_address),
                           Fix("reseat the GPU and check its riser or cable", "any", disruptive=True)),
                    explains=("GH407",))
    if not judged:
        yield Skip("no PCIe width expected for these GPUs (or none reported): set pcie_width in the config file "
                   "(docs/configuration.md)")


# --------------------------------------------------------------------------- GH710, GH711 (active tests)


def _active(snapshot: Snapshot) -> Skip | None:
    active = snapshot.active
    if active is None:
        return Skip("active tests not run: they are opt-in (gpuhealth check --level 2)")
    if not active.ran:
        return Skip(f"active tests did not run: {active.skipped_reason or active.error or 'no reason given'}")
    return None


_DCGM_SEVERITY = {"fail": Severity.CRITICAL, "failure": Severity.CRITICAL, "error": Severity.CRITICAL,
                  "warn": Severity.WARNING, "warning": Severity.WARNING}


def _dcgm_failures(snapshot: Snapshot) -> Iterator[Draft]:
    """One finding per failing or warning row of a pasted dcgmi diag/health table (rows named "Error" or
    "Warning" carry their text in the result column)."""
    assert snapshot.dcgm is not None
    source = snapshot.dcgm.source or snapshot.sources.get("dcgm", "dcgmi diag")
    for row in snapshot.dcgm.results:
        severity = _DCGM_SEVERITY.get(row.result.lower()) or _DCGM_SEVERITY.get(row.name.lower())
        if severity is None or row.name.lower() == "overall health":
            continue
        text = row.detail if row.result.lower() in _DCGM_SEVERITY else row.result
        line = f"{row.name}: {row.result}" + (f" - {row.detail}" if row.detail else "")
        yield Draft(severity, f"DCGM {row.name}: {text or row.result}"[:300], evidence=(Evidence(source, (line,)),),
                    fixes=(Fix("dcgmi diag -r 3", "any", note="repeat on the drained node; service the GPU on failure"),
                           Fix("sudo dmesg -T | grep -iE 'Xid|NVRM'", "any")))


def link_rate_gbps(gen: int | None, width: int | None) -> float | None:
    """The theoretical one-way rate of a PCIe link in GB/s (Gen4 x16: 31.5)."""
    if not gen or not width or gen not in LANE_GBPS:
        return None
    return LANE_GBPS[gen] * width


def _gpu_of(snapshot: Snapshot, result: ActiveGpuResult) -> Gpu | None:
    gpus = [s.gpu for s in seen_gpus(snapshot)]
    if result.pci_address:
        match = next((g for g in gpus if g.pci_address == result.pci_address), None)
        if match is not None:
            return match
    return next((g for g in gpus if g.index == result.index), None)


@check("GH710", "bandwidth-low", "Host-to-GPU copy bandwidth far below the PCIe link's rate")
def bandwidth_low(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Opt-in (`gpuhealth check --level 2`): copies between pinned host memory and each GPU, timed in
    both directions, compared with the link's theoretical rate from its PCIe generation and width
    (Gen3 x16 about 15.75 GB/s, Gen4 x16 31.5, Gen5 x16 63). Below 50 % in either direction is a
    warning.

    Why it matters:
    Data loading, checkpointing and CPU offload move data over this link. Half the expected bandwidth
    means a link that trained lower under load, a GPU behind a switch shared with busy devices, a
    misconfigured IOMMU or ACS setting, or the copies crossing sockets (GH702).

    How to fix:
    Check the link (`sudo lspci -vvv -s <address> | grep -E 'LnkCap|LnkSta'`, GH407, GH705), the
    kernel's IOMMU mode (`iommu=pt` for bare-metal GPU servers), PCIe AER errors (GH703), and that no
    other job was using the GPU or the switch during the test.

    Exceptions:
    Copies from pageable memory (when pinning was refused) are not judged. The generation used is the
    link's maximum (GPUs idle at a lower one), the width its current one: a narrow link is GH407's.
    """
    skip = _active(snapshot)
    if skip is not None:
        yield skip
        return
    for result in snapshot.active.gpus:
        if result.pinned is False or (result.h2d_gbps is None and result.d2h_gbps is None):
            continue
        gpu = _gpu_of(snapshot, result)
        if gpu is None:
            continue
        gen = gpu.pcie_gen_max or gpu.pcie_gen_current
        width = gpu.pcie_width_current or gpu.pcie_width_max
        rate = link_rate_gbps(gen, width)
        if rate is None:
            continue
        low = [(label, value) for label, value in (("host-to-device", result.h2d_gbps),
                                                   ("device-to-host", result.d2h_gbps))
               if value is not None and value < BANDWIDTH_LOW_FRACTION * rate]
        if not low:
            continue
        yield Draft(Severity.WARNING,
                    "copy bandwidth low: " + ", ".join(f"{label} {value:.1f} GB/s" for label, value in low)
                    + f" of {rate:.1f} GB/s theoretical (PCIe Gen{gen} x{width})",
                    subject=Subject(gpu.index, gpu.pci_address),
                    evidence=(Evidence(snapshot.sources.get("active", ACTIVE_SOURCE), (
                        f"cuda:{result.index} {result.name or ''}: host-to-device {result.h2d_gbps} GB/s, "
                        f"device-to-host {result.d2h_gbps} GB/s (pinned)",
                        f"PCIe Generation Max: {gen}, Link Width Current: {width}x")),),
                    fixes=(slotted("sudo lspci -vvv -s {pci} | grep -E 'LnkCap|LnkSta'", pci=gpu.pci_address),
                           Fix("cat /proc/cmdline", "any", note="look for the iommu= setting")))


@check("GH711", "active-test-failed", "A GPU failed an active test (matmul or memory pattern)")
def active_test_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Opt-in (`gpuhealth check --level 2`): on each GPU a float32 matmul (TF32 off) compared with the
    CPU, and GPU memory written with patterns (zeros, ones, 0x55/0xAA, an index ramp) and read back.
    A wrong result (difference above 0.01, NaN/Inf) or any word read back different is critical; a
    test that raised an error on the GPU is a warning.
    A pasted `dcgmi diag` or `dcgmi health` table is read too: a test or GPU marked Fail/Failure or an
    Error row is critical, Warn/Warning a warning.

    Why it matters:
    A GPU that computes or stores wrong numbers corrupts training silently; ECC does not catch every
    fault (logic errors, SRAM outside ECC, a failing memory controller).

    How to fix:
    Drain the GPU, read the kernel log for Xid errors (GH3xx), reset it (`sudo nvidia-smi --gpu-reset
    -i <index>`), run NVIDIA's diagnostics (`dcgmi diag -r 3`) and send it for service if it fails again.

    Exceptions:
    "out of memory" or "busy" errors mean another process holds the GPU (the tests refuse to run on
    busy GPUs unless forced): they are warnings, not a faulty GPU.
    """
    if snapshot.dcgm is not None:
        yield from _dcgm_failures(snapshot)
    skip = _active(snapshot)
    if skip is not None:
        if snapshot.dcgm is None:
            yield skip
        return
    for result in snapshot.active.gpus:
        gpu = _gpu_of(snapshot, result)
        subject = Subject(gpu.index if gpu else result.index, gpu.pci_address if gpu else result.pci_address)
        label = f"cuda:{result.index} {result.name or ''}".rstrip()
        wrong = []
        if result.matmul_nonfinite:
            wrong.append(f"{label}: the matmul result holds NaN/Inf")
        elif result.matmul_max_error is not None and result.matmul_max_error > MATMUL_TOLERANCE:
            wrong.append(f"{label}: matmul max |GPU - CPU| = {result.matmul_max_error:g} "
                         f"(tolerance {MATMUL_TOLERANCE:g})")
        if result.memory_mismatches:
            wrong.append(f"{label}: {result.memory_mismatches} memory element(s) read back wrong in "
                         f"{result.memory_tested_mib:g} MiB tested")
        fixes = (slotted("sudo nvidia-smi --gpu-reset -i {index}", disruptive=True, note="drain the GPU first",
                         index=subject.gpu_index),
                 Fix("dcgmi diag -r 3", "any", note="NVIDIA's diagnostics; service the GPU if it fails"))
        source = snapshot.sources.get("active", ACTIVE_SOURCE)
        if wrong:
            what = "; ".join(w.split(": ", 1)[1] for w in wrong)
            yield Draft(Severity.CRITICAL, f"GPU failed an active test: {what}", subject=subject,
                        evidence=(Evidence(source, tuple(wrong)),), fixes=fixes)
        elif result.error:
            yield Draft(Severity.WARNING, f"an active test raised an error on the GPU: {result.error[:200]}",
                        subject=subject, evidence=(Evidence(source, (f"{label}: {result.error}",)),), fixes=fixes)
    if snapshot.active.error:
        yield Draft(Severity.WARNING, f"the active tests failed: {snapshot.active.error[:200]}",
                    evidence=(Evidence(snapshot.sources.get("active", ACTIVE_SOURCE), (snapshot.active.error,)),))
