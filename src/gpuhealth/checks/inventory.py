"""GH1xx: NVIDIA GPUs on the PCI bus, and whether the driver sees all of them."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.expected import expected, platform_of
from gpuhealth.checks.kernel_log import Tally, faulty_gpu_refusals, samples
from gpuhealth.checks.registry import Draft, Expectations, Skip, check, table_fixes
from gpuhealth.model import Evidence, Fix, PciDevice, Severity, Snapshot, Subject

SYSFS = "/sys/bus/pci/devices"
# A GPU the driver refuses beside working siblings: what is left once the kernel log rules the driver out.
SERVICE = Fix("drain the node, then power-cycle the host (a cold boot); if the GPU stays missing, send it for service "
              "(on a cloud instance, report the host to the provider)", "any", disruptive=True, kind="step")


def describe(device: PciDevice, binding_known: bool = True) -> str:
    name = device.name or f"NVIDIA device [10de:{device.device_id}]"
    if device.kernel_driver:
        driver = f", driver {device.kernel_driver}"
    else:
        driver = ", no driver bound" if binding_known else ", driver binding not shown (lspci without -k)"
    return f"{device.address} {name}{driver}"


def binding_known(snapshot: Snapshot) -> bool:
    """Whether a PCI device without a driver is known to have none: sysfs always says; pasted ``lspci``
    says only with ``-k`` ("Kernel driver in use", "Kernel modules"), so a paste where no device shows either line
    proves nothing."""
    return snapshot.origin != "evidence" or any(d.kernel_driver or d.kernel_modules is not None
                                                for d in snapshot.pci_devices or ())


def driver_view_missing(snapshot: Snapshot) -> str | None:
    """Why the driver's list of GPUs is unknown, or None when nvidia-smi or NVML answered."""
    if snapshot.smi is not None or (snapshot.nvml is not None and snapshot.nvml.ok):
        return None
    return snapshot.unavailable.get("smi") or snapshot.unavailable.get("nvml") or "no nvidia-smi or NVML"


@check("GH101", "no-nvidia-gpu", "No NVIDIA GPU on the PCI bus", requires=("pci_devices",))
def no_nvidia_gpu(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    No PCI device with vendor ID 10de and a display class (VGA 0300 or 3D controller 0302) exists.

    Why it matters:
    Without a GPU on the bus nothing else can work: no driver, no CUDA. On a GPU server it means the
    card is not seated, not powered, disabled in the firmware, or passed through to a VM; on a
    laptop or CI runner it is simply the truth.

    How to fix:
    Check that the card is seated and its auxiliary power connected, that the slot is enabled in the
    BIOS/UEFI, and that `lspci -nn | grep -i nvidia` lists it after a cold boot. In a VM, attach the
    GPU to the instance.

    On a host known to have had GPUs, it is critical and makes the node unusable (a scheduler drains it): the
    configuration expects GPUs (`gpu_count`), or the count gpuhealth last saw on this host's bus says it had
    some (`check --gpu-state FILE`, which the Slurm wrapper passes), or the machine is a platform built with
    GPUs (`knowledge/platforms.csv`: a DGX model, a cloud GPU instance type), or its firmware (DMI) names a
    model built with NVIDIA GPUs (an NVIDIA DGX). Otherwise it is a warning that drains nothing: on a CPU-only
    machine it is the truth.

    Exceptions:
    Machines that are not meant to have a GPU. A listing that names no device's vendor (the link lines
    of `lspci -vv -s <address> | grep Lnk`) cannot say whether an NVIDIA GPU is there: not judged.
    """
    gpus = snapshot.nvidia_pci_gpus
    if gpus:
        return
    listed = snapshot.pci_devices or ()
    if listed and not any(d.vendor_id for d in listed):
        yield Skip("the PCI listing names no device's vendor: it cannot show whether an NVIDIA GPU is there")
        return
    others = [d for d in snapshot.pci_devices or () if d.vendor_id == "10de"]
    lines = tuple(f"{describe(d, binding_known(snapshot))} (class {d.class_code}, not a GPU)" for d in others)
    evidence = (Evidence(snapshot.sources.get("pci_devices", SYSFS), lines or ("no device with vendor 10de",)),)
    had = _gpus_it_had(snapshot, expect)
    if had is None:
        yield Draft(Severity.WARNING, "No NVIDIA GPU on this machine: no PCI device 10de with a display class",
                    evidence=evidence)
        return
    # GPUs that were there have left the bus: the node cannot run GPU jobs (it stays drained until they are back)
    yield Draft(Severity.CRITICAL, f"No NVIDIA GPU on the PCI bus, where {had}", evidence=evidence,
                explains=("GH103",))


def _gpus_it_had(snapshot: Snapshot, expect: Expectations) -> str | None:
    """What says this host had GPUs, in words, or None: the configured count, else the count last seen, else a
    platform the machine is (knowledge/platforms.csv), else a firmware name of a machine built with NVIDIA GPUs
    (knowledge/gpu_servers.csv)."""
    if expect.gpu_count:
        return f"the configuration expects {expect.gpu_count} (gpu_count)"
    if expect.gpus_last_seen:
        when = f" at {expect.gpus_last_seen_at}" if expect.gpus_last_seen_at else ""
        where = f" ({expect.gpus_last_seen_in})" if expect.gpus_last_seen_in else ""
        return f"{expect.gpus_last_seen} were seen{when}{where}"
    platform = platform_of(snapshot, expect)
    if platform is not None and platform.gpu_count:
        return f"this machine, {platform.name}, is built with {platform.gpu_count} ({platform.document})"
    machine = snapshot.os
    if machine is not None and machine.machine_vendor:
        from gpuhealth.knowledge.gpu_servers import gpu_server

        server = gpu_server(machine.machine_vendor, machine.machine_product, machine.machine_family)
        if server:
            return f"this machine is an {server} (its firmware's name), built with NVIDIA GPUs"
    return None


@check("GH102", "gpus-missing-from-driver", "GPUs on the PCI bus that the driver does not see",
       reads=("pci_devices", "kernel_log"))
def gpus_missing_from_driver(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Compares the NVIDIA GPUs on the PCI bus with the GPUs nvidia-smi or NVML report, by PCI address.
    The kernel log shows such a GPU too: one the driver refused at its probe while it took the others, for a
    reason its own support table contradicts (a release that "does not support" a GPU whose architecture its
    branch supports, GH305's lines).

    Why it matters:
    A GPU the driver does not list is unusable: jobs see fewer devices, and schedulers that count
    GPUs from PCI place work on a GPU that is not there. The usual causes are a GPU that failed to
    initialise (RmInitAdapter), fell off the bus, has an invalid BAR, or is bound to another driver
    (vfio-pci for passthrough, nouveau). A GPU refused at the probe beside working siblings, for a reason the
    driver's support table contradicts, is faulty itself: the driver, its options and the kernel drive the
    others (NVIDIA/aicr#1858: one H100 of eight, the same IDs as its siblings, "not supported" by 580).

    How to fix:
    Read the kernel log (`sudo dmesg | grep -iE 'NVRM|Xid|RmInitAdapter|fallen off|BAR'`); the findings about
    Xid 79, RmInitAdapter or BAR errors listed under this one name the cause. A GPU bound to another
    driver must be released from it (remove it from the vfio-pci ids, blacklist nouveau). A GPU lost
    at runtime needs a reboot; one that stays missing after a cold boot needs service (drain the node, and on a
    cloud instance report the host to the provider).

    Exceptions:
    GPUs deliberately passed through to VMs (bound to vfio-pci) are reported as info. A piece of
    `nvidia-smi -q` (`nvidia-smi -q | grep -A8 "GPU Link Info"`, the output without its `GPU <bus id>`
    lines, or `-q -i 0` on a host with more GPUs) is not the driver's whole list: not judged. On an NVSwitch
    system the driver does not print "None of the NVIDIA devices were initialized" even when it took no GPU, so
    a kernel log alone can read as if it took others.
    """
    refused = faulty_gpu_refusals(snapshot)
    reported: set[str] = set()
    for draft in _missing_on_bus(snapshot, refused):
        if isinstance(draft, Draft) and draft.subject.pci_address:
            reported.add(draft.subject.pci_address)
        yield draft
    known_list = not driver_view_missing(snapshot) and not snapshot.gpu_list_partial
    listed = {g.pci_address for g in snapshot.gpus} if known_list else None
    for address, (tally, why) in sorted(refused.items()):
        if address in reported or (listed is not None and address in listed):
            continue  # reported from the PCI listing, or the driver lists it now (a later load took it)
        yield Draft(
            Severity.CRITICAL,
            f"GPU {address} is on the PCI bus but the driver refused it at its probe: {why}; the GPU or its slot "
            "is at fault, not the driver",
            subject=Subject(None, address),
            evidence=(Evidence(snapshot.kernel_log.source if snapshot.kernel_log else "kernel log", samples(tally)),),
            fixes=(*table_fixes("GH102"), SERVICE), explains=("GH305",))


def _missing_on_bus(snapshot: Snapshot, refused: dict[str, tuple[Tally, str]]) -> Iterator[Draft | Skip]:
    """GH102 from the PCI listing: GPUs on the bus that the driver's list leaves out."""
    pci = snapshot.nvidia_pci_gpus
    if not pci:
        if not refused:
            yield Skip("no NVIDIA GPU on the PCI bus" if snapshot.pci_devices is not None
                       else "needs the PCI listing (lspci -nn) and the driver's list of GPUs (nvidia-smi)")
        return
    why = driver_view_missing(snapshot)
    if why:
        if not refused:
            yield Skip(f"the driver's list of GPUs is unknown: {why}")
        return
    if snapshot.gpu_list_partial:  # `nvidia-smi -q | grep ...`, `-q -i 0`: GPUs it leaves out are not missing
        yield Skip("the nvidia-smi output given is an excerpt (no GPU header lines, or one GPU of several): "
                   "it does not list every GPU the driver sees")
        return
    seen = {g.pci_address for g in snapshot.gpus}
    known = binding_known(snapshot)
    source = snapshot.sources.get("smi") or snapshot.sources.get("nvml") or "driver"
    if None in seen:  # `nvidia-smi -L` names no PCI address: only the counts can be compared
        if len(snapshot.gpus) < len(pci):
            yield Draft(
                Severity.CRITICAL,
                f"{len(pci)} NVIDIA GPUs on the PCI bus, the driver lists {len(snapshot.gpus)}: which one is "
                "missing is unknown (the driver's list gives no PCI addresses)",
                evidence=(Evidence(snapshot.sources.get("pci_devices", SYSFS),
                                   tuple(describe(d, known) for d in pci)),
                          Evidence(source, tuple(f"GPU {g.index}: {g.name or '?'}" for g in snapshot.gpus))),
                fixes=table_fixes("GH102"))
        return
    for device in pci:
        if device.address in seen:
            continue
        passthrough = device.kernel_driver in ("vfio-pci", "pci-stub")
        probe = refused.get(device.address)
        yield Draft(
            Severity.INFO if passthrough else Severity.CRITICAL,
            f"GPU {device.address} is on the PCI bus but the driver does not report it"
            + (f" (bound to {device.kernel_driver} for passthrough)" if passthrough else "")
            + (f"; refused at its probe: {probe[1]}" if probe else ""),
            subject=Subject(None, device.address),
            evidence=(Evidence(snapshot.sources.get("pci_devices", SYSFS), (describe(device, known),)),
                      Evidence(source, (f"driver reports {len(seen)} GPU(s): {', '.join(sorted(seen))}",)))
            + ((Evidence(snapshot.kernel_log.source if snapshot.kernel_log else "kernel log", samples(probe[0])),)
               if probe else ()),
            fixes=(*table_fixes("GH102"), SERVICE) if probe else (), explains=("GH305",) if probe else (),
        )


@check("GH103", "gpu-count-below-expected", "Fewer GPUs than the configuration expects",
       requires=("pci_devices",))
def gpu_count_below_expected(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Compares the number of NVIDIA GPUs on the PCI bus with `gpu_count` from the configuration file, else
    with the GPU count of the platform the machine is (`knowledge/platforms.csv`: an NVIDIA DGX by its
    firmware's product name, a cloud GPU instance type by the firmware's product name on AWS or by
    `[check] instance_type`), each row from the vendor's document. The finding says which applied.

    Why it matters:
    A GPU that vanished from the bus entirely (dead, unpowered, link never trained) leaves no other
    trace: only the expected count reveals it.

    How to fix:
    Power-cycle the host (a cold boot, not a reboot) and check again; check seating, risers, power
    cables and the BMC event log (`ipmitool sel list`). If the GPU stays missing, it needs service.

    Exceptions:
    Skipped when no `gpu_count` is configured and the machine is no platform the table lists (an unknown
    product name changes nothing).
    """
    count, origin = expected(snapshot, expect, "gpu_count")
    if count is None:
        yield Skip("no expected GPU count configured (gpu_count in the config file), and the machine is no "
                   "platform knowledge/platforms.csv lists")
        return
    found = len(snapshot.nvidia_pci_gpus)
    if found < count:
        yield Draft(Severity.CRITICAL, f"{found} NVIDIA GPU(s) on the PCI bus, {count} expected: {origin}",
                    evidence=(Evidence(snapshot.sources.get("pci_devices", SYSFS),
                                       tuple(describe(d, binding_known(snapshot)) for d in snapshot.nvidia_pci_gpus)),))
