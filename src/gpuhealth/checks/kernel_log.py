"""GH3xx: what the kernel log says about the GPUs: Xid errors and NVRM failures, per GPU."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import replace
from typing import Any

from gpuhealth.checks.registry import Draft, Expectations, Skip, check, table_fixes
from gpuhealth.commands import filled
from gpuhealth.knowledge import xid as xid_catalogue
from gpuhealth.knowledge.drivers import branch_of, supports
from gpuhealth.knowledge.gpus import lookup as gpu_lookup
from gpuhealth.lazyre import guarded_re, has_folded, lazy_re
from gpuhealth.model import (
    DEVICE_PLUGIN,
    DRAINING_IMPACTS,
    EventGroup,
    Evidence,
    Fix,
    KernelEvent,
    PciDevice,
    Severity,
    Snapshot,
)
from gpuhealth.parsers.kernel_log import wall_clock_seconds

SAMPLE_LINES = 3  # a storm of identical lines is summarised: first, last, count
REBOOT = Fix("sudo reboot", "any", disruptive=True)

# How NVIDIA's immediate-action buckets (NVIDIA's Xid catalogue, "Guidance Class") translate into commands.
ACTION_FIXES: dict[str, tuple[Fix, ...]] = {
    "RESET_GPU": (Fix("sudo nvidia-smi --gpu-reset -i {index}", "any", disruptive=True,
                      note="stop every process on that GPU first; reboot if the reset is refused"),),
    "RESTART_BM": (REBOOT,),
    "RESTART_VM": (Fix("restart the VM that owns the GPU", "any", disruptive=True),),
    "RESTART_APP": (Fix("restart the application; if it recurs, run it under compute-sanitizer", "any",
                        kind="step"),),
    "CHECK_MECHANICALS": (Fix("check the GPU's seating and auxiliary power connectors", "any",
                              disruptive=True),),
    "RESTART_FM": (Fix("sudo systemctl restart nvidia-fabricmanager", "any", disruptive=True),),
    "CONTACT_SUPPORT": (Fix("collect `sudo nvidia-bug-report.sh` and contact your GPU vendor", "any"),),
    "WORKFLOW_XID_48": (Fix("sudo nvidia-smi --gpu-reset -i {index}", "any", disruptive=True,
                            note="with Xid 63/64 too: drain the node first; if it recurs, run field diagnostics"),),
    "WORKFLOW_XID_13": (Fix("restart the application; if it repeats on the same GPU, run `dcgmi diag -r 3`",
                            "any"),),
    "WORKFLOW_XID_31": (Fix("restart the application; if it repeats on the same GPU, run `dcgmi diag -r 3`",
                            "any"),),
    "WORKFLOW_XID_45": (Fix("act on the other Xids; seen alone on an NVSwitch system: "
                            "sudo systemctl restart nvidia-fabricmanager", "any", disruptive=True),),
    "WORKFLOW_NVLINK_ERR": (Fix("nvidia-smi nvlink -e -i {index}", "any",
                                note="error counters per link; a reset or reboot clears the fault"),),
}


class Tally:
    """Kernel log lines counted together (one GPU and Xid, say): how many, first, last, and a few samples. (A plain
    class: a dataclass's generated methods are compiled as the module is imported, on every start-up.)"""

    def __init__(self) -> None:
        self.count = 0
        self.first: KernelEvent | None = None
        self.last: KernelEvent | None = None
        self.samples: list[KernelEvent] = []

    def add(self, group: EventGroup | Tally) -> None:
        if group.first is None or group.last is None:
            return
        self.count += group.count
        if self.first is None or (group.first.line_number or 0) < (self.first.line_number or 0):
            self.first = group.first
        if self.last is None or (group.last.line_number or 0) >= (self.last.line_number or 0):
            self.last = group.last
        self.samples = sorted([*self.samples, *group.samples], key=lambda e: e.line_number or 0)

    merge = add


def tallies(snapshot: Snapshot, kinds: set[str], key: Callable[[EventGroup], Hashable] | None = None,
            keep: Callable[[EventGroup], bool] | None = None) -> dict[Any, Tally]:
    """The kernel log's groups of ``kinds`` summed per ``key`` (default: GPU address and Xid)."""
    found: dict[Any, Tally] = defaultdict(Tally)
    if snapshot.kernel_log is None:
        return found
    for group in snapshot.kernel_log.tallies(kinds):
        if keep is None or keep(group):
            found[key(group) if key else (group.pci_address, group.xid)].add(group)
    return found


def samples(tally: Tally, keep: int = SAMPLE_LINES) -> tuple[str, ...]:
    """First lines and the last one; the count and span are in the message."""
    chosen = tally.samples if tally.count <= keep else [*tally.samples[:keep - 1], tally.last]
    lines = [f"{e.line_number}: {e.line}" if e.line_number else e.line for e in chosen if e is not None]
    if tally.count > keep:
        lines.insert(keep - 1, f"... {tally.count - keep} more like these ...")
    return tuple(lines)


def last_seen(tally: Tally) -> float | None:
    """When the tally's newest line was logged (Finding.last_seen): None without a wall-clock timestamp."""
    return wall_clock_seconds(tally.last.timestamp) if tally.last is not None else None


def _span(tally: Tally) -> str:
    first = tally.first.timestamp if tally.first else None
    last = tally.last.timestamp if tally.last else None
    if tally.count == 1:
        return f" at {first}" if first else ""
    return f" x{tally.count}" + (f", first {first}, last {last}" if first and last else "")


REPORTED_WORDS = "reported in words, not logged"


def as_reported(snapshot: Snapshot, severity: Severity) -> Severity:
    """Xids a person named (a kernel log of format REPORTED) are judged as logged ones but stay below critical:
    nobody saw the machine say it, and a finding may drain a node."""
    if snapshot.kernel_log is not None and snapshot.kernel_log.reported and severity is Severity.CRITICAL:
        return Severity.WARNING
    return severity


def _when(snapshot: Snapshot, tally: Tally) -> str:
    """A logged tally's count and span; for a reported one, that it was only said."""
    reported = snapshot.kernel_log is not None and snapshot.kernel_log.reported
    if _from_plugin(snapshot):
        return f"{_span(tally)} ({PLUGIN_WORDS})"
    return f" ({REPORTED_WORDS})" if reported else _span(tally)


# The NVIDIA device plugin logged the Xid from NVML's event (parsers/device_plugin_xids.py): it stopped advertising the
# GPU to the kubelet, so pods are refused it (causes.csv device-plugin-gpu-unhealthy) until the plugin restarts
PLUGIN_UNHEALTHY = "device-plugin-gpu-unhealthy"
PLUGIN_WORDS = "the NVIDIA device plugin's NVML event; the plugin marks the GPU unhealthy"


def _from_plugin(snapshot: Snapshot) -> bool:
    return snapshot.kernel_log is not None and snapshot.kernel_log.format == DEVICE_PLUGIN


def _plugin_labels(snapshot: Snapshot) -> dict[str, str]:
    """A device plugin's Xid decides the cause the node shows: the plugin took the GPU out of its allocatable set."""
    return {"decided": PLUGIN_UNHEALTHY} if _from_plugin(snapshot) else {}


def _plugin_skips(snapshot: Snapshot, code: int) -> bool:
    """Whether the device plugin logged an Xid its health check skips by default as an application error (13, 31,
    43, 45, 68, 109): logged only because its skip list was changed, and no fault of the GPU by its own account."""
    if not _from_plugin(snapshot):
        return False
    from gpuhealth.parsers.device_plugin_xids import SKIPPED_BY_DEFAULT

    return code in SKIPPED_BY_DEFAULT


def _unaddressed(tally: Tally) -> str:
    """How a GPU whose PCI address no line gives is named: by the UUID the device plugin logged, where it did."""
    # the plugin's lines, also where they were joined with a kernel log's
    devices = sorted({e.detail.removeprefix("device ") for e in tally.samples if e.pci_address is None and e.detail
                      and e.detail.startswith("device ") and "CriticalError: Xid=" in e.line})
    return ", ".join(devices) if devices else "(address not logged)"


@check("GH301", "xid-errors", "Xid errors in the kernel log", requires=("kernel_log",))
def xid_errors(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    `NVRM: Xid` lines in the kernel log, grouped per GPU (by PCI address) and Xid code, with count,
    first and last time, and NVIDIA's meaning and recommended action from the Xid catalogue.
    Xid 79 (fallen off the bus) is reported by GH302. A detail Xid, whose catalogue row gives no action but
    "see Xid N" (171 and 172: the DRAM or SRAM of an Xid 48), is told in Xid N's finding on the same GPU.

    Why it matters:
    An Xid is the driver reporting a GPU error. Some are the application's fault (13, 31, 43, 45), some
    are informational (63: a memory row was remapped successfully), and some mean the GPU needs a
    reset or service (48 double-bit ECC, 64, 74 NVLink, 95, 119 GSP timeout). Severity follows
    NVIDIA's recommended action; application-class Xids never make the host critical on their own.

    How to fix:
    Follow the action listed with each Xid: restart the application, reset the GPU, reboot, or
    collect `nvidia-bug-report.sh` for the vendor. Repeated hardware-class Xids on one GPU mean it
    should be drained.

    An Xid a person names in words ("the kernel log shows Xid 48 / 171", in a note or an issue title) and
    no kernel log in the evidence shows is judged by the same catalogue, said to be reported, not logged,
    and kept below critical.

    The NVIDIA Kubernetes device plugin's own line for an Xid it saw in NVML's events (`XidCriticalError: Xid=79 on
    Device=GPU-...; marking device as unhealthy.`) is machine output: judged as a logged Xid of that GPU (named by
    its UUID), and it decides that the plugin stopped advertising the GPU (device-plugin-gpu-unhealthy). An Xid the
    plugin skips by default as an application error (13, 31, 43, 45, 68, 109) stays below critical there; any other
    is at least a warning there, even one the catalogue calls information (63): pods can no longer be given the GPU.

    Exceptions:
    Xids from before the last GPU reset or driver reload may already be resolved; the live check
    reads only the current boot. A kernel log given with the words wins over them.
    """
    from gpuhealth.knowledge.actions import of_xid

    found = tallies(snapshot, {"xid"})
    codes_by_gpu: dict[str | None, frozenset[int]] = defaultdict(frozenset)
    for address, code in found:
        if code is not None:
            codes_by_gpu[address] |= {code}
    for (address, code), events in sorted(found.items(), key=lambda item: (item[0][0] or "", item[0][1] or 0)):
        if code == 79 or code is None or _detail_of(code) in codes_by_gpu[address] - {code}:
            continue  # a detail Xid ("see Xid 48") is told in its Xid's finding on the same GPU: one fault, one finding
        info = xid_catalogue.lookup(code)
        details = sorted(c for c in codes_by_gpu[address] if c != code and _detail_of(c) == code)
        shown = list(samples(events))
        shown += [line for detail in details for line in samples(found[(address, detail)]) if line not in shown]
        # what to do and what it does to the node: the Xid's row (xid_actions.csv), told the other Xids of this GPU
        repair, impact = of_xid(info, codes_by_gpu[address] - {code})
        subject = snapshot.gpu_subject(address)
        meaning = info.meaning if info else "not in the Xid catalogue"
        severity = Severity(info.severity) if info else Severity.WARNING
        if info and info.application_class and severity is Severity.CRITICAL:
            severity = Severity.WARNING
        if _plugin_skips(snapshot, code):  # an application error by the plugin's own account: it never drains
            severity = min(severity, Severity.WARNING, key=lambda s: s.rank)
            impact = "degraded" if impact in DRAINING_IMPACTS else impact
        if _from_plugin(snapshot):  # whatever the Xid, the plugin took the GPU out of what pods can be given
            severity = max(severity, Severity.WARNING, key=lambda s: s.rank)
            impact = "degraded" if impact == "none" else impact
        action = info.immediate_action if info else "CONTACT_SUPPORT"
        fixes = tuple(filled(f, index=subject.gpu_index) for f in ACTION_FIXES.get(action, ()))
        yield Draft(
            as_reported(snapshot, severity),
            f"Xid {code}{f' ({info.mnemonic})' if info else ''}: {meaning}{_detail_words(details)}"
            f"{_when(snapshot, events)} - next: {xid_catalogue.action_in_words(action)}",
            subject=subject, evidence=(Evidence(snapshot.kernel_log.source, tuple(shown)),),
            fixes=fixes, labels={"xid": str(code), **_plugin_labels(snapshot)}, last_seen=last_seen(events),
            action=repair, impact=impact,
        )


# NVIDIA's Xid catalogue gives a detail Xid no action of its own, only "see Xid N" (171 and 172: the DRAM or SRAM of an
# Xid 48's uncorrectable error)
_SEE_XID = guarded_re(r"(?i)^see Xid (\d{1,3})$", may=has_folded("see xid"))


def _detail_of(code: int) -> int | None:
    """The Xid whose detail Xid ``code`` is (its catalogue row's investigation says "see Xid N"), or None."""
    info = xid_catalogue.lookup(code)
    found = _SEE_XID.match(info.investigatory_action.strip()) if info else None
    return int(found[1]) if found else None


def _detail_words(details: list[int]) -> str:
    """The detail Xids told in their Xid's finding: ' (with Xid 171: the uncorrectable error is in DRAM)'."""
    said = []
    for code in details:
        info = xid_catalogue.lookup(code)
        said.append(f"Xid {code}: {info.meaning.split(': ', 1)[-1]}" if info else f"Xid {code}")
    return f" (with {'; '.join(said)})" if said else ""


@check("GH302", "gpu-fallen-off-bus", "A GPU has fallen off the bus", requires=("kernel_log",))
def gpu_fallen_off_bus(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    Xid 79, or the driver's "has fallen off the bus" message (printed without an Xid by some drivers),
    for a GPU. An Xid 79 a person names in words, with no kernel log to show it, is a warning that says
    it was reported, not logged.

    Why it matters:
    The driver can no longer reach the GPU over PCIe. Every job on it has failed, nvidia-smi hangs or
    reports "GPU is lost", and only a reboot brings it back. Causes: power delivery, overheating,
    a bad riser or slot, or a failing GPU.

    How to fix:
    Drain the node and reboot. Before that, look for PCIe AER errors and power events
    (`sudo dmesg | grep -iE 'AER|PCIe Bus Error'`, `sudo ipmitool sel list`). If the same GPU falls off again, reseat
    it, check its power cables, then send it for service.

    Exceptions:
    None.
    """
    by_gpu = tallies(snapshot, {"fallen_off_bus", "xid"}, key=lambda g: g.pci_address,
                     keep=lambda g: g.kind == "fallen_off_bus" or g.xid == 79)
    for address, found in sorted(by_gpu.items(), key=lambda item: item[0] or ""):
        yield Draft(
            as_reported(snapshot, Severity.CRITICAL),
            f"GPU {address or _unaddressed(found)} has fallen off the bus{_when(snapshot, found)}",
            subject=snapshot.gpu_subject(address),
            evidence=(Evidence(snapshot.kernel_log.source, samples(found)),),
            fixes=table_fixes("GH302"),
            # GH308: the driver's own errors after a GPU is lost (RC all channels, sanity checks failed) follow from it
            # GH608: a program's GPU index that is gone because the GPU is (invalid device ordinal)
            explains=("GH102", "GH203", "GH204", "GH301", "GH305", "GH308", "GH608"),
            # the Xid it stands on when the driver logged one (some drivers print only "fallen off the bus"); each
            # group of the tally gives at least its first line to the samples
            labels={**({"xid": "79"} if any(e.xid == 79 for e in found.samples) else {}), **_plugin_labels(snapshot)},
            last_seen=last_seen(found),
        )


def _event_check(snapshot: Snapshot, kinds: set[str], severity: Severity, message: str,
                 fixes: tuple[Fix, ...] | str, explains: tuple[str, ...] = (),
                 keep: Callable[[EventGroup], bool] | None = None) -> Iterator[Draft]:
    """One finding per GPU for events of ``kinds`` (those ``keep`` keeps); ``message`` may use {address} and {detail}.
    ``fixes`` given as a check code are that check's table rows (``registry.table_fixes``), read only when an event
    is found."""
    by_gpu = tallies(snapshot, kinds, key=lambda g: g.pci_address, keep=keep)
    for address, found in sorted(by_gpu.items(), key=lambda item: item[0] or ""):
        details = sorted({e.detail for e in found.samples if e.detail})
        yield Draft(
            as_reported(snapshot, severity),
            message.format(address=address or "(address not logged)", detail=", ".join(details) or "-")
            + _when(snapshot, found),
            subject=snapshot.gpu_subject(address),
            evidence=(Evidence(snapshot.kernel_log.source, samples(found)),),
            fixes=table_fixes(fixes) if isinstance(fixes, str) else fixes, explains=explains,
        )


@check("GH303", "rminit-adapter-failed", "The driver failed to initialise a GPU", requires=("kernel_log",))
def rminit_adapter_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    `NVRM: GPU <address>: RmInitAdapter failed! (<code>)` in the kernel log: the driver found the GPU
    but could not bring it up.

    Why it matters:
    That GPU is missing from nvidia-smi ("No devices were found" when it is the only one). Causes
    include GSP firmware missing or mismatched with the driver, a GPU in a bad state after an error,
    resource (BAR) problems and hardware faults.

    How to fix:
    Look first, changing nothing: the GSP firmware for the loaded driver
    (`ls /lib/firmware/nvidia/$(cat /sys/module/nvidia/version)/`) and the kernel log lines before the
    failure (`sudo dmesg | grep -iE 'NVRM|RmInitAdapter|GSP|BAR'`), which name a missing firmware or a BAR
    problem. Then reboot (a cold power cycle clears a GPU stuck in a bad state). If it persists: reinstall
    the driver so the kernel module and its GSP firmware match, check the BAR findings, and collect
    `nvidia-bug-report.sh` for the vendor with the code shown.

    Exceptions:
    None.
    """
    from gpuhealth.checks.driver_messages import why_before  # lazily: the mined table, only for this failure

    for draft in _event_check(
        snapshot, {"rminit_failed"}, Severity.CRITICAL,
        "GPU {address}: RmInitAdapter failed ({detail}), the driver could not initialise it",
        "GH303",  # knowledge/fixes.csv: the read-only looks before the reboot (they can name a cause it does not cure)
        explains=("GH102", "GH203"),
    ):
        first = min((g.first for g in tallies(snapshot, {"rminit_failed"}, key=lambda g: g.pci_address).values()
                     if g.first is not None and g.first.pci_address == draft.subject.pci_address),
                    key=lambda e: e.line_number or 0, default=None)
        why = why_before(snapshot, draft.subject.pci_address, first.line_number if first else None)
        # the driver's own reason, printed just above (GH308 reads it from the driver's source): it leads the message
        yield replace(draft, message=f"{draft.message}; the driver said why just before: {why}") if why else draft


@check("GH304", "pci-bar-failure", "A GPU's PCI memory (BAR) could not be assigned",
       reads=("kernel_log", "pci_devices"))
def pci_bar_failure(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The NVIDIA driver's "This PCI I/O region assigned to your NVIDIA device is invalid" (a BAR of 0M),
    "request_mem_region failed" or a BAR reservation failure; or the Linux PCI core's own lines, printed
    at boot before any driver loads, for a memory BAR of an NVIDIA device: "BAR 1: no space for
    [mem size ...]", "BAR 1: failed to assign", "can't claim BAR 1 ...: no compatible bridge window"
    (since Linux 6.8 "BAR 1 [mem size ...]: can't assign; no space", "...: failed to assign",
    "...: can't claim; ..."), "not assigned; can't enable device", "can't handle BAR larger than 4GB"
    and "not enough MMIO resources for SR-IOV" (drivers/pci setup-res.c, probe.c, iov.c). The kernel's
    enumeration line ("[10de:xxxx] type 00 class 0x0302..") says which device an address is; a BAR that
    gets its address later in the log (a second pass, the firmware's own address) is no failure. The
    same lines for another vendor's display controller, or for a device the evidence does not
    identify, are a warning; for any other device (a NIC, a disk) they are not this check's. An I/O
    BAR, an expansion ROM or a bridge window alone is not judged here. `lspci -v`'s "Memory at
    <unassigned>" or "<ignored>" for a display controller's memory BAR (pciutils lspci.c) is the
    same finding, and so, on the live host, is such a BAR in sysfs (`/sys/bus/pci/devices/*/resource`).
    Skipped when the evidence holds neither a kernel log nor a display controller's BAR lines.

    Why it matters:
    The firmware (or hypervisor) left the GPU no window in the host's PCI address space for its
    memory (BAR1 alone is 16 to 128 GiB on data-centre GPUs), so the driver cannot use it:
    RmInitAdapter fails, nvidia-smi says "No devices were found". Typical with "Above 4G decoding"
    off, too little 64-bit MMIO in a virtual machine, Thunderbolt or riser setups, and small boards
    whose root port has a small fixed window.

    How to fix:
    Enable "Above 4G decoding" (and "Resizable BAR" / "MMIO high" / "MMIO above 4G" where offered)
    in the BIOS/UEFI. In a virtual machine, give it 64-bit MMIO large enough for every GPU's BAR1
    (the hypervisor's setting). `pci=realloc` on the kernel command line lets Linux redo the
    firmware's assignment: it helps only where the host bridge's windows are large enough and the
    firmware merely split them badly. Where the windows are fixed by the hardware (an SoC's root
    complex with a small outbound window), no setting helps: the GPU needs a host whose window holds
    its BARs. If another driver (nouveau, nvidiafb, vfio-pci) owns the memory region, release it.

    Exceptions:
    A display controller of another vendor (a server's BMC graphics) is only a warning.
    """
    listed = [d for d in snapshot.pci_devices or () if (d.class_code or "").startswith("03")
              and d.memory_regions is not None]
    if snapshot.kernel_log is None and not listed:
        yield Skip("the kernel log (sudo dmesg) and lspci -vv of the GPUs: not in the evidence given")
        return
    yield from _unassigned_regions(snapshot, listed)
    gpus = {d.address for d in snapshot.nvidia_pci_gpus} | {g.pci_address for g in snapshot.gpus or () if g.pci_address}
    for kind in ("bar", "pci_resource"):
        for draft in _event_check(
            snapshot, {kind}, Severity.CRITICAL if kind == "bar" else Severity.WARNING,
            "GPU {address}: PCI BAR could not be assigned" if kind == "bar"
            else "PCI device {address}: a memory BAR could not be assigned",
            "GH304",  # knowledge/fixes.csv: the firmware setting, else pci=realloc on the kernel command line
            explains=("GH102", "GH303", "GH305"),  # the driver's probe fails on a GPU without its BAR
        ):
            address = draft.subject.pci_address
            if kind == "pci_resource" and address in gpus:  # lspci or nvidia-smi beside the log: an NVIDIA GPU
                draft = replace(draft, severity=as_reported(snapshot, Severity.CRITICAL),
                                message=draft.message.replace("PCI device", "GPU", 1))
            said = _bar_words(tallies(snapshot, {kind}, key=lambda g: g.pci_address).get(address))
            head, _, tail = draft.message.partition(" assigned")
            yield replace(draft, message=f"{head} assigned ({said}){tail}" if said else draft.message)


def _unassigned_regions(snapshot: Snapshot, listed: list[PciDevice]) -> Iterator[Draft]:
    """A display controller whose memory BAR lspci prints without an address: "Memory at <unassigned>" (the BAR and
    the kernel's resource are both zero) or "<ignored>" (the BAR holds an address the kernel did not take), pciutils
    lspci.c show_bases(). An NVIDIA GPU's is critical, another vendor's a warning (as in the kernel log). "[disabled]"
    alone only says memory decoding is off (no driver enabled the device)."""
    logged = ({g.pci_address for g in snapshot.kernel_log.tallies({"bar", "pci_resource"})} if snapshot.kernel_log
              else set())
    for device in listed:
        empty = [line for line in device.memory_regions or () if "<unassigned>" in line or "<ignored>" in line]
        if not empty or device.address in logged:
            continue  # the kernel log's finding names the same device, with the kernel's own words
        nvidia = device.is_nvidia_gpu
        who = (f"GPU {device.address}" if nvidia else
               f"display controller {device.address} ({device.vendor_id or '?'}:{device.device_id or '?'})")
        yield Draft(Severity.CRITICAL if nvidia else Severity.WARNING,
                    f"{who}: {len(empty)} memory BAR(s) without an address (lspci)",
                    subject=snapshot.gpu_subject(device.address),
                    evidence=(Evidence(snapshot.sources.get("pci_devices", "lspci"), tuple(empty)),),
                    fixes=table_fixes("GH304"), explains=("GH102", "GH303", "GH305"))


# the driver's own lines say which BAR (size, address) and the PCI core's which outcome ("BAR 1 (32 GiB): no space")
_DISPLAY_ID = " (display controller "


def _bar_words(found: Tally | None) -> str:
    """What the lines say per BAR, in the order logged: "BAR 1 (32 GiB): no space, failed to assign"; a display
    controller's vendor:device once at the end."""
    said: dict[str, list[str]] = {}
    ids: list[str] = []
    for event in found.samples if found else ():
        detail, _, ident = (event.detail or "").partition(_DISPLAY_ID)
        if ident and ident.rstrip(")") not in ids:
            ids.append(ident.rstrip(")"))
        what, _, outcome = detail.rpartition(": ") if ": " in detail else ("", "", detail)
        outcomes = said.setdefault(what, [])
        if outcome and outcome not in outcomes:
            outcomes.append(outcome)
    words = "; ".join(f"{what}: {', '.join(outcomes)}" if what else ", ".join(outcomes)
                      for what, outcomes in said.items() if outcomes)
    return f"{words}; display controller {', '.join(ids)}" if ids else words


@check("GH305", "driver-probe-failed", "The driver probed no GPU", requires=("kernel_log",))
def driver_probe_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    "The NVIDIA probe routine was not called", "The NVIDIA probe routine failed for N device(s)", "No NVIDIA
    devices probed", "No NVIDIA GPU found" or a GPU the driver release refuses by name ("is not supported by the
    NVIDIA <version> driver release") in the kernel log. The finding quotes which of these it saw. One failed
    probe is one finding: the driver's count lines that name no GPU ("failed for 1 device(s)", "None of the
    NVIDIA devices were initialized") are the summary of the GPUs it named, and are quoted with them.

    Why it matters:
    The nvidia module did not attach to the GPU (or to any): another driver (usually nouveau, or vfio-pci)
    owns the devices, or the GPU is not supported by this driver branch or flavour (open modules
    need Turing or newer). When the driver took the other GPUs and still refuses one whose model its own
    support table lists for that release, the GPU itself is at fault: that is GH102's finding (a GPU on the bus
    the driver does not see), with this one folded under it (NVIDIA/aicr#1858).

    How to fix:
    Blacklist nouveau and rebuild the initramfs (see GH206); remove the GPU from vfio-pci; check that
    the driver branch supports the GPU.

    Exceptions:
    A BAR that could not be assigned (GH304) or a GPU that fell off the bus during the probe (GH302) makes the
    probe fail too: those findings explain this one.
    """
    # the event's own words: "probed no GPU" is wrong for one device of eight that failed ("probe routine failed for
    # 1 device(s)") or for a GPU the driver release refuses by name
    named, summary = probe_events(snapshot)
    source = snapshot.kernel_log.source if snapshot.kernel_log else ""
    refused = faulty_gpu_refusals(snapshot)
    if not named:
        if summary.count:
            yield _probe_draft(snapshot, None, summary, None, source, ("GH102", "GH201", "GH203"))
        return
    for address, found in sorted(named.items()):
        # a refusal GH102 reads as a fault of this GPU is its evidence there, not the cause of GH102's finding
        explains = ("GH201", "GH203") if address in refused else ("GH102", "GH201", "GH203")
        yield _probe_draft(snapshot, address, found, summary if summary.count else None, source, explains)


def probe_events(snapshot: Snapshot) -> tuple[dict[str, Tally], Tally]:
    """The probe failures per GPU the driver named, and its count lines that name none (the summary of those)."""
    by_gpu = tallies(snapshot, {"probe"}, key=lambda g: g.pci_address)
    summary = by_gpu.pop(None, None) or Tally()
    return by_gpu, summary


def _probe_draft(snapshot: Snapshot, address: str | None, found: Tally, summary: Tally | None, source: str,
                 explains: tuple[str, ...]) -> Draft:
    events = [*found.samples, *(summary.samples if summary else ())]
    details = list(dict.fromkeys(e.detail for e in events if e.detail))
    evidence = (Evidence(source, samples(found)),) + ((Evidence(source, samples(summary)),) if summary else ())
    return Draft(Severity.CRITICAL, f"The NVIDIA driver's probe failed: {', '.join(details) or '-'}{_span(found)}",
                 subject=snapshot.gpu_subject(address), evidence=evidence, fixes=table_fixes("GH305"),
                 explains=explains)


# kernel-open/nvidia/nv.c (nvidia_init_module) prints "The NVIDIA probe routine failed for N device(s)" when some GPUs
# failed their probe, and right after it "None of the NVIDIA devices were initialized." only when no device was
# initialised; the other lines here are printed when the driver took no GPU at all.
_FAILED_FOR = "probe routine failed for"
_NONE_TAKEN = ("no NVIDIA device initialised", "no NVIDIA devices probed", "no NVIDIA GPU found")
_REFUSED_BY_RELEASE = lazy_re(r"^GPU not supported by the (\S{1,32}) driver release$")
_PROBE_PCI_ID = lazy_re(r"\(PCI ID: 10de:([0-9a-fA-F]{4})\)")


def faulty_gpu_refusals(snapshot: Snapshot) -> dict[str, tuple[Tally, str]]:
    """GPUs the driver refused while it took others, for a reason its own support table contradicts.

    Address -> (the probe lines, why). Both must hold: the driver's count line says the probe failed for some
    devices and no line says it initialised none (so it drives the GPU's siblings, and the driver, its options and
    the kernel are fine), and the GPU's PCI ID names an architecture that the refusing release's branch supports
    (``knowledge/gpus.csv``, ``knowledge/drivers.csv``). A GPU that then reads as "not supported" fails its own
    checks: a fault of that GPU or its slot (NVIDIA/aicr#1858: one H100 of eight, the same IDs as its siblings).
    A GPU held by another driver ("already bound to vfio-pci") or refused by the open module's flavour rule is
    not one of these, nor is a refusal that agrees with the table (an old GPU beside a new one: GH209).
    """
    named, summary = probe_events(snapshot)
    details = {e.detail or "" for e in summary.samples} | {e.detail or "" for t in named.values() for e in t.samples}
    if not any(d.startswith(_FAILED_FOR) for d in details) or details & set(_NONE_TAKEN):
        return {}
    found: dict[str, tuple[Tally, str]] = {}
    for address, tally in named.items():
        for event in tally.samples:
            why = _contradicted_refusal(event)
            if why:
                found[address] = (tally, why)
                break
    return found


def refusals_read_as_faulty_gpus(snapshot: Snapshot) -> bool:
    """Whether every GPU the kernel log shows refused by its driver release is one :func:`faulty_gpu_refusals` reads
    as a faulty GPU (GH102's), so that the release's "not supported" is not GH209's evidence."""
    refused = faulty_gpu_refusals(snapshot)
    if not refused:
        return False
    named, _ = probe_events(snapshot)
    by_release = {address for address, tally in named.items()
                  if any(_REFUSED_BY_RELEASE.match(e.detail or "") for e in tally.samples)}
    return by_release <= refused.keys()


def _contradicted_refusal(event: KernelEvent) -> str | None:
    """'release R refuses 10de:XXXX (ARCH), which branch B supports' when the table says the release drives the GPU."""
    release = _REFUSED_BY_RELEASE.match(event.detail or "")
    pci_id = _PROBE_PCI_ID.search(event.message)
    number = branch_of(release[1]) if release else None
    model = gpu_lookup(pci_id[1]) if pci_id else None
    if number is None or model is None or not supports(number, model.architecture):
        return None
    return (f"the {release[1]} driver calls it not supported, yet branch {number} supports {model.architecture} "
            f"[10de:{pci_id[1].lower()}], and the driver took the other GPUs")


@check("GH306", "nvrm-errors", "Other NVRM driver errors (GSP, firmware)", requires=("kernel_log",))
def nvrm_errors(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    NVRM error lines that are not Xids: GSP firmware timeouts or load failures and other driver
    errors, per GPU.

    Why it matters:
    They often precede a GPU becoming unusable (Xid 119/120) and point at firmware/driver problems.

    How to fix:
    Check that the driver's GSP firmware matches the module, update to the current release of the
    driver branch, and reboot if the GPU misbehaves.

    Exceptions:
    Isolated messages during driver load can be harmless. A line the driver's source names (GH308) is reported
    there, with its meaning, not here.
    """
    from gpuhealth.checks.driver_messages import explained_groups, group_key  # lazily: the mined table

    mined = explained_groups(snapshot)
    yield from _event_check(snapshot, {"gsp", "nvrm"}, Severity.WARNING,
                            "GPU {address}: NVRM driver errors", (REBOOT,), keep=lambda g: group_key(g) not in mined)


@check("GH307", "nvswitch-sxid", "NVSwitch SXid errors", requires=("kernel_log",))
def nvswitch_sxid(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    `SXid` lines from NVSwitch devices (HGX/DGX systems).

    Why it matters:
    NVSwitch errors degrade or break NVLink traffic between GPUs; fatal ones need the fabric reset.

    How to fix:
    Check `nvidia-smi nvlink -s` and the Fabric Manager log; fatal SXids need a reset of the GPUs
    and switches (usually a reboot) and, if they recur, vendor service.

    Exceptions:
    Non-fatal SXids that do not recur. An SXid a person names in words, with no kernel log to show it, is
    said to be reported, not logged.
    """
    yield from _event_check(snapshot, {"sxid"}, Severity.WARNING,
                            "NVSwitch {address}: SXid errors", (Fix("nvidia-smi nvlink -s", "any"),))


# --------------------------------------------------------------------------- GH403's reading of the kernel log

MEMORY_FIXES = (  # NVIDIA's procedure for failing GPU memory: drain, reset, field diagnostic, then the RMA
    Fix("drain the node in the scheduler so no new job lands on this GPU", "any", disruptive=True),
    Fix("sudo nvidia-smi --gpu-reset -i {index}", "any", disruptive=True,
        note="applies a pending page retirement or row remap; reboot if the reset is refused"),
    Fix("nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i {index}", "any",
        note="Remapping Failure Occurred, Pending and the retired pages: what the RMA request asks for"),
    Fix("dcgmi diag -r 3", "any", note="when DCGM is installed; NVIDIA's field diagnostic decides the RMA"),
    Fix("sudo nvidia-bug-report.sh", "any", note="attach it to the RMA request to the GPU or server vendor"),
)


def memory_faults(snapshot: Snapshot) -> Iterator[Draft]:
    """Per GPU (PCI address), a memory fault the kernel log shows to persist (``knowledge/memory_faults.csv``): an Xid
    of role "failure" (64: the retirement or remap failed; 140: an error escaped them), or an uncorrectable error
    (48, 94, 95) logged both before and after a driver load (a boot or a reload, which resets the GPU and applies
    the pending retirement or remap). A DBE with its recorded repair (48 then 63) in one boot is neither: a
    one-off, GH301's. Faults on different GPUs are each their own GPU's, never one GPU's recurrence."""
    from gpuhealth.knowledge.xid import memory_roles  # lazily: only a kernel log with Xids asks

    log = snapshot.kernel_log
    if log is None:
        return
    roles = memory_roles()

    def of_role(wanted: str) -> dict[Any, Tally]:
        return tallies(snapshot, {"xid"}, key=lambda g: g.pci_address,
                       keep=lambda g: g.xid in roles and roles[g.xid].role == wanted)

    failed, uncorrectable = of_role("failure"), of_role("uncorrectable")
    told = _told_memory(log, failed, uncorrectable, _remap_failure_shown(snapshot))
    for address in sorted(failed.keys() | uncorrectable.keys() | told.keys(), key=lambda a: a or ""):
        failure = failed.get(address)
        # words show no driver load between two errors: only a failure Xid, or the fault told in words, counts there
        recurred = None if log.reported else _after_reload(log, address, uncorrectable.get(address), roles)
        if address in told:
            yield _told_draft(snapshot, address, told[address], roles, (failure, uncorrectable.get(address)))
            continue
        if failure is None and recurred is None:
            continue
        codes = sorted({e.xid for e in failure.samples if e.xid is not None}) if failure else []
        reasons = [f"Xid {code}: {roles[code].why.split(':')[0]}" for code in codes]
        lines = list(samples(failure)) if failure else []
        if recurred is not None:
            before, load, after = recurred
            codes.append(after.xid)
            reasons.append(f"uncorrectable errors came back after the driver loaded again at line {load} (a reboot "
                           "or driver reload resets the GPU and applies its memory repair)")
            lines += [shown for e in (before, after) if (shown := f"{e.line_number}: {e.line}") not in lines]
        found = (failure, uncorrectable.get(address))
        yield _memory_draft(snapshot, address, codes, reasons, lines, found, roles)


def _memory_draft(snapshot: Snapshot, address: str | None, codes: list[int], reasons: list[str], lines: list[str],
                  found: tuple[Tally | None, ...], roles: dict) -> Draft:
    """GH403's finding for one GPU whose memory is failing: the documented procedure, its Xids folded under it."""
    tally = Tally()
    for part in found:
        if part is not None:
            tally.merge(part)
    subject = snapshot.gpu_subject(address)
    sources = sorted({roles[c].source_url for c in codes if c in roles})
    return Draft(
        as_reported(snapshot, Severity.CRITICAL),
        f"GPU {address or '(address not logged)'}: its memory is failing: {'; '.join(reasons)}"
        f"{_when(snapshot, tally) if snapshot.kernel_log.reported else ''} - next: drain it, reset it, run the"
        " field diagnostic and replace it (RMA) when the diagnostic confirms",
        subject=subject,
        evidence=(Evidence(snapshot.kernel_log.source, tuple(lines)), Evidence("NVIDIA", tuple(sources))),
        fixes=tuple(filled(f, index=subject.gpu_index) for f in MEMORY_FIXES),
        explains=("GH301",),  # the Xids of that GPU are its symptoms: one cause, not a list of Xids
        labels={"xid": str(codes[0])}, last_seen=last_seen(tally),
        action="contact_support", impact="gpu_unusable",
    )


_TOLD_WHY = {  # what each told fact means, after NVIDIA's documents (knowledge/memory_faults.csv's sources)
    "remap-failed": "a row remapping failure (no spare row left for the failed memory): NVIDIA's RMA criterion",
    "grew": "its remapped rows or retired pages keep growing: each one is another uncorrectable error in its memory",
    "recurred": "the memory error came back after the reset or reboot that applies the GPU's memory repair: memory "
                "the repair did not cure",
}
_TOLD_SOURCE = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"


def _remap_failure_shown(snapshot: Snapshot) -> bool | None:
    """Whether the GPUs' own row remapper (nvidia-smi -q, NVML) shows a remapping failure; None where none says."""
    known = [g.remapped_rows_failure for g in snapshot.gpus if g.remapped_rows_failure is not None]
    return any(known) if known else None


def _told_memory(log: Any, failed: dict[Any, Tally], uncorrectable: dict[Any, Tally],
                 remap_failure: bool | None) -> dict[Any, list[KernelEvent]]:
    """The memory faults the reporter tells in words (parsers/reported_xids.memory_told), per GPU address: with Xids
    named in words, of the GPU they name (reported Xids name none); beside a machine's log, of the one GPU whose
    memory Xids it shows (none where it shows none, or several: the words then decide nothing). A recurrence after a
    reset counts where its sentence names memory or a memory Xid is in the evidence, and names no other Xid."""
    from gpuhealth.parsers.reported_xids import MEMORY_TOLD, RECURRED, REMAP_FAILED, names_memory

    # the GPUs' own "Remapping Failure Occurred: No" wins over a failure told in words
    events = [e for e in log.events if e.kind == MEMORY_TOLD and not (e.detail == REMAP_FAILED
                                                                      and remap_failure is False)]
    shown = failed.keys() | uncorrectable.keys()
    if not events or len(shown) > 1 or (not log.reported and not shown):
        return {}  # words that tell no GPU decide nothing between two, nor against a log of no memory Xid
    memory = {e.xid for tally in (*failed.values(), *uncorrectable.values()) for e in tally.samples}
    others = {e.line_number for e in log.events if e.kind == "xid" and e.xid not in memory}  # "Xid 79 came back"

    def memory_recurred(event: KernelEvent) -> bool:
        return names_memory(event.message) or (bool(memory) and event.line_number not in others)

    kept = [e for e in events if e.detail != RECURRED or memory_recurred(e)]
    if not kept:
        return {}
    address = next(iter(shown)) if shown else None
    return {address: kept}


def _told_draft(snapshot: Snapshot, address: str | None, told: list[KernelEvent], roles: dict,
                found: tuple[Tally | None, ...]) -> Draft:
    """GH403's finding for a GPU whose failing memory the reporter tells (a recurrence after a reset, a growing count
    of remapped rows or retired pages, a remap failure): the documented consequence, the GPU's Xids folded under it.
    Words alone stay a warning (as_reported); beside a log that shows the GPU's memory Xids it is machine-shown."""
    tally = Tally()
    for part in found:
        if part is not None:
            tally.merge(part)
    xids = [e for e in snapshot.kernel_log.events if e.kind == "xid" and e.xid in roles
            and (e.pci_address == address or snapshot.kernel_log.reported)]
    codes = sorted({e.xid for e in xids if e.xid is not None})
    details = list(dict.fromkeys(e.detail for e in told if e.detail in _TOLD_WHY))
    said = "named" if snapshot.kernel_log.reported else "logged"
    failures = [f"Xid {c}: {roles[c].why.split(':')[0]}" for c in codes if roles[c].role == "failure"]
    reasons = ([f"Xid {', '.join(map(str, codes))} {said}"] if codes else []) + failures + [_TOLD_WHY[d]
                                                                                           for d in details]
    lines = list(dict.fromkeys([f"{e.line_number}: {e.line}" if e.line_number else e.line
                                for e in sorted((*told, *xids), key=lambda e: e.line_number or 0)]))[:6]
    subject = snapshot.gpu_subject(address)
    sources = sorted({*(roles[c].source_url for c in codes), _TOLD_SOURCE})
    return Draft(
        as_reported(snapshot, Severity.CRITICAL),
        f"GPU {address or '(address not named)'}: its memory is failing: {'; '.join(reasons)}"
        f" ({REPORTED_WORDS if snapshot.kernel_log.reported else 'told in words beside the logged Xids'})"
        " - next: drain it, reset it, run the field diagnostic and replace the board (RMA) when it confirms",
        subject=subject,
        evidence=(Evidence(snapshot.kernel_log.source if snapshot.kernel_log.reported
                           else f"{snapshot.kernel_log.source} and the reporter's words", tuple(lines)),
                  Evidence("NVIDIA", tuple(sources))),
        fixes=tuple(filled(f, index=subject.gpu_index) for f in MEMORY_FIXES),
        explains=("GH301",),
        labels={"xid": str(codes[0])} if codes else {}, last_seen=last_seen(tally),
        action="contact_support", impact="gpu_unusable",
    )


def _after_reload(log: Any, address: str | None, found: Tally | None,
                  roles: dict) -> tuple[KernelEvent, int, KernelEvent] | None:
    """An uncorrectable memory Xid of this GPU before a driver load and one after it (the first after), or None."""
    if found is None or found.first is None or found.last is None or not log.driver_loads:
        return None
    first, last = found.first.line_number or 0, found.last.line_number or 0
    load = next((n for n in log.driver_loads if first < n < last), None)
    if load is None:
        return None
    candidates = [e for e in (*found.samples, found.last, *log.xids)
                  if e is not None and e.pci_address == address and e.xid in roles
                  and roles[e.xid].role == "uncorrectable" and (e.line_number or 0) > load]
    return found.first, load, min(candidates, key=lambda e: e.line_number or 0)
