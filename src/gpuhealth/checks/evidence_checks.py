"""Checks added with the diagnosis of pasted evidence: a driver branch that does not support the GPU
(GH209), Fabric Manager down on an NVSwitch system (GH210), GPU memory held at 0 % utilisation (GH414),
a CUDA library the loader cannot find (GH612), and NCCL/P2P failures with the IOMMU or PCIe ACS in the way
(GH706). Each reads snapshot fields like every other check; the catalogue's matched lines
(``snapshot.messages``) are one of those fields."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.kernel_log import refusals_read_as_faulty_gpus
from gpuhealth.checks.registry import (
    MAX_LINE_EVIDENCE,
    Draft,
    Expectations,
    Skip,
    check,
    line_evidence,
    table_fixes,
)
from gpuhealth.commands import fix as slotted
from gpuhealth.knowledge.drivers import architecture, branch_of, supports
from gpuhealth.knowledge.gpus import lookup
from gpuhealth.knowledge.signatures import signature
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import REPORTED_WORDS, Evidence, Fix, MessageLine, Severity, Snapshot

MAX_LINES = MAX_LINE_EVIDENCE


def lines_for(snapshot: Snapshot, code: str) -> list[MessageLine]:
    """The lines of the evidence that the signature catalogue files under ``code``."""
    return [m for m in snapshot.messages or () if m.signature and signature(m.signature).code == code]


def _severity(messages: list[MessageLine]) -> Severity:
    ranks = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}
    return max((ranks[signature(m.signature).severity] for m in messages if m.signature), key=lambda s: s.rank,
               default=Severity.WARNING)


# --------------------------------------------------------------------------- GH209

_BANNER_VERSION = lazy_re(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d{3}\.\d+(?:\.\d+)?)")


def driver_versions(snapshot: Snapshot) -> list[tuple[str, str]]:
    """(version, where it was seen): the loaded module, nvidia-smi, the installer, DKMS, the load banner."""
    found: list[tuple[str, str]] = []
    if snapshot.driver and snapshot.driver.version:
        found.append((snapshot.driver.version, "/proc/driver/nvidia/version"))
    if snapshot.smi and snapshot.smi.driver_version:
        found.append((snapshot.smi.driver_version, snapshot.sources.get("smi", "nvidia-smi")))
    if snapshot.host_env and snapshot.host_env.runfile_version:
        found.append((snapshot.host_env.runfile_version, "/var/log/nvidia-installer.log"))
    for entry in snapshot.install.dkms if snapshot.install else ():
        if entry.module == "nvidia":
            found.append((entry.version, "dkms status"))
    for banner in snapshot.kernel_log.module_banners if snapshot.kernel_log else ():
        m = _BANNER_VERSION.search(banner)
        if m:
            found.append((m[1], "kernel log"))
    return found


@check("GH209", "driver-gpu-unsupported", "The driver branch does not support this GPU",
       reads=("kernel_log", "messages"))
def driver_gpu_unsupported(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The installed or loaded driver branch cannot drive a GPU on the PCI bus: the branch is older than
    the GPU's architecture (a Blackwell GPU needs 570 or newer, Hopper and Ada 520, Ampere 455), or newer
    than the architecture's last legacy branch (Kepler ends with 470, Maxwell, Pascal and Volta with
    580), or a Blackwell GPU runs the proprietary kernel module, which does not support it. The PCI
    device ID gives the architecture (`knowledge/gpus.csv`); the branch tables are in
    `knowledge/drivers.csv`. The driver's own message ("NVRM: The NVIDIA GPU ... installed in this system
    is not supported by the ... NVIDIA driver release") also raises it.

    Why it matters:
    The module loads but probes no GPU, or refuses to load; nvidia-smi says "No devices were found" or
    cannot talk to the driver. Reinstalling the same branch changes nothing.

    How to fix:
    Install a branch that supports the GPU: for a new GPU the current production branch (for
    Blackwell with the open kernel modules, `nvidia-driver-570-open` or newer); for a legacy GPU its
    last legacy branch (`nvidia-driver-470` for Kepler). Then reboot and check that nvidia-smi lists it. When the
    open module itself refuses the GPU ("is not supported by open nvidia.ko", a GPU without GSP:
    Maxwell, Pascal, Volta; or R515-R525's "Open nvidia.ko is only ready for use on Data Center GPUs"),
    install the proprietary flavour of the branch (`nvidia-driver-<branch>`, no `-open`); on those
    early releases `options nvidia NVreg_OpenRmEnableUnsupportedGpus=1` also lets the open module run.

    Exceptions:
    A GPU passed through to a virtual machine (bound to vfio-pci) is not driven on the host. A GPU the release
    refuses while the driver took its siblings, when the support table says the release's branch drives that GPU's
    architecture, is a faulty GPU (GH102, NVIDIA/aicr#1858), not an unsupported one.
    """
    lines = lines_for(snapshot, "GH209")
    faulty = refusals_read_as_faulty_gpus(snapshot)
    if faulty:
        # the driver took the refused GPU's siblings and its own table supports the model: the refusal is the faulty
        # GPU's (GH102), whether the log tags the message's continuation lines with NVRM or not (NVIDIA/aicr#1858)
        lines = [m for m in lines if m.signature != "nvrm-gpu-not-supported"]
    versions = driver_versions(snapshot)
    gpus = [d for d in snapshot.nvidia_pci_gpus if d.kernel_driver not in ("vfio-pci", "pci-stub")]
    problems: list[str] = []
    evidence: list[Evidence] = []
    legacy = _legacy_branch(lines)  # "supported through the NVIDIA 580.xx Legacy drivers": that branch
    if versions and gpus:
        version, where = versions[0]
        number = branch_of(version)
        for device in gpus:
            model = lookup(device.device_id)
            if number is None or model is None:
                continue
            arch = architecture(model.architecture)
            if arch is None:
                continue
            name = device.name or f"[10de:{device.device_id}]"
            if not supports(number, model.architecture):
                if arch.first_branch is not None and number < arch.first_branch:
                    need = f"{model.architecture} needs branch {arch.first_branch} or newer"
                else:
                    need = f"{model.architecture}'s last branch is {arch.last_branch}"
                    legacy = legacy or arch.last_branch
                problems.append(f"{name} ({model.architecture}) is not supported by driver {version}: {need}")
                evidence.append(Evidence(where, (f"driver {version}",)))
                evidence.append(Evidence(snapshot.sources.get("pci_devices", "lspci"),
                                         (f"{device.address} {name} [10de:{device.device_id}]",)))
            elif (arch.open_modules == "required" and snapshot.driver is not None
                  and snapshot.driver.flavour == "proprietary"):
                problems.append(f"{name} ({model.architecture}) needs the open kernel modules; the proprietary "
                                f"module {version} is loaded")
                evidence.append(Evidence("/proc/driver/nvidia/version", (snapshot.driver.banner or version,)))
    if not problems and not lines:
        if (not versions or not gpus) and not faulty:  # a refusal read as a faulty GPU was judged here: not a skip
            yield Skip("needs the driver version and the GPUs' PCI IDs (lspci -nn), or the driver's message")
        return
    open_refused = not problems and bool(lines) and all(m.signature in _OPEN_FLAVOUR_REFUSED for m in lines)
    with_gsp = _refused_with_gsp(snapshot) if open_refused else None
    if with_gsp:
        # the row says "no GSP: Maxwell, Pascal, Volta"; the PCI ID names an architecture that has one
        message = (f"The open kernel module refused {with_gsp}, saying it has no usable GSP, yet that architecture "
                   "has one (not the pre-Turing case); the proprietary flavour runs it without the GSP")
    elif open_refused:
        message = signature(lines[0].signature).summary
    elif problems:
        message = problems[0]
    elif legacy:
        message = f"The GPU is supported only by the {legacy}.xx legacy driver branch; this driver ignores it"
    else:
        message = "The driver says it does not support a GPU in this system"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more)"
    if open_refused:
        fixes = _proprietary_fixes(lines)
    elif legacy:
        fixes = _legacy_fixes(legacy)
    else:
        fixes = table_fixes("GH209")
    yield Draft(Severity.CRITICAL, message, evidence=tuple(dict.fromkeys(evidence)) + line_evidence(lines),
                fixes=fixes,
                explains=("GH201", "GH203", "GH102", "GH305", "GH303"))


# The open kernel module's own refusals: the GPU is supported by the driver, not by this flavour of it.
_OPEN_FLAVOUR_REFUSED = frozenset({"nvrm-gpu-not-supported-by-open", "nvrm-open-datacenter-only"})


_PCI_ID = lazy_re(r"\(PCI ID: 10de:([0-9a-fA-F]{4})\)")


def _refused_with_gsp(snapshot: Snapshot) -> str | None:
    """'GPU at ADDR (ARCH)' for the first GPU the open module refused whose architecture has a GSP (Turing on)."""
    for event in snapshot.kernel_log.events if snapshot.kernel_log else ():
        m = _PCI_ID.search(event.line)
        model = lookup(m[1]) if m else None
        arch = architecture(model.architecture) if model else None
        if arch is not None and arch.open_modules != "unsupported":
            return f"the GPU at {event.pci_address or 'an unnamed address'} [10de:{m[1].lower()}, {model.architecture}]"
    return None


_LEGACY_BRANCH = lazy_re(r"NVIDIA (\d{3})\.xx Legacy")


def _legacy_branch(lines: list[MessageLine]) -> int | None:
    for message in lines:
        m = _LEGACY_BRANCH.search(message.line)
        if m:
            return int(m[1])
    return None


def _legacy_fixes(branch: int) -> tuple[Fix, ...]:
    """A GPU past its last branch: that legacy branch, proprietary (the open modules never ran pre-Turing GPUs)."""
    return (*_gh209_looks(),
            slotted("sudo apt-get install nvidia-driver-{branch}", "debian", disruptive=True,
                    note=f"the {branch} legacy branch (proprietary; no -open), then reboot", branch=branch),
            slotted("sudo dnf module install nvidia-driver:{branch}-dkms", "rhel", disruptive=True,
                    note=f"NVIDIA's repository; RPM Fusion names it akmod-nvidia-{branch}xx", branch=branch))


def _gh209_looks() -> tuple[Fix, ...]:
    """The table's read-only GH209 commands (the device ID, the branches on offer); its installs name -open."""
    return tuple(f for f in table_fixes("GH209") if not f.disruptive)


def _proprietary_fixes(lines: list[MessageLine]) -> tuple[Fix, ...]:
    """The open module refused the GPU: installing an -open package again changes nothing."""
    fixes = [*_gh209_looks(),
             Fix("sudo apt-get install nvidia-driver-<branch>", "debian", disruptive=True,
                 note="the proprietary flavour (no -open), then reboot"),
             Fix("sudo dnf module install nvidia-driver:<branch>-dkms", "rhel", disruptive=True,
                 note="the proprietary flavour, then reboot")]
    if any(m.signature == "nvrm-open-datacenter-only" for m in lines):
        # R515-R525 open modules ran GeForce/workstation GPUs only when asked (NVIDIA README, kernel_open).
        fixes.append(Fix("echo 'options nvidia NVreg_OpenRmEnableUnsupportedGpus=1' | sudo tee "
                         "/etc/modprobe.d/nvidia-open.conf", "any",
                         note="or keep the open module (alpha on this GPU in that release), then reload it"))
    return tuple(fixes)


# --------------------------------------------------------------------------- GH210

_NOT_RUNNING = ("failed", "inactive", "dead", "not-found", "activating")
_SXM = lazy_re(r"SXM|HGX|HBM3|\b[BH]200\b|\bGB200\b")


def nvswitch_present(snapshot: Snapshot) -> bool | None:
    if snapshot.pci_devices is None:
        return None
    return any(d.vendor_id == "10de" and ("NVSwitch" in (d.name or "") or (d.class_code or "").startswith("0680"))
               for d in snapshot.pci_devices)


@check("GH210", "fabric-manager-failed", "Fabric Manager is not running on an NVSwitch system", reads=("messages",))
def fabric_manager_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    On a system whose GPUs talk through NVSwitch (HGX/DGX A100, H100, H200, B200), the
    `nvidia-fabricmanager` service is failed or inactive, logged errors, or a program reports CUDA
    error 802 "system not yet initialized" (`cudaErrorSystemNotReady`), which is what CUDA says until
    Fabric Manager has set the fabric up.

    Why it matters:
    Without Fabric Manager no CUDA context can be created on those GPUs: every job fails at start,
    although nvidia-smi lists the GPUs.

    How to fix:
    Install the Fabric Manager package of exactly the driver's version (`nvidia-fabricmanager-<branch>`,
    the same full version as `cat /sys/module/nvidia/version`), then
    `sudo systemctl enable --now nvidia-fabricmanager` and read `journalctl -u nvidia-fabricmanager`.

    A pasted status of the nvidia-fabricmanager unit alone ("Unit nvidia-fabricmanager.service could
    not be found", inactive or failed) with nothing that says which GPUs the host has: a warning that
    names the condition (Fabric Manager is needed on NVSwitch systems); with NVSwitches on the bus or
    SXM GPUs it is critical, with PCIe GPUs shown it is quiet. The reporter's words ("nvidia-fabricmanager
    is not installed", "the fabric manager isn't running") give the same unit state where no listing of
    the unit does; a finding that rests on the words alone is at most a warning, and quotes them.

    Exceptions:
    PCIe GPUs and NVLink bridges between pairs of GPUs need no Fabric Manager.
    """
    lines = lines_for(snapshot, "GH210")
    cuda = snapshot.cuda
    state = cuda.fabricmanager_active if cuda else None
    errors = cuda.fabricmanager_errors if cuda else ()
    switch = nvswitch_present(snapshot) or any(_SXM.search(g.name or "") for g in snapshot.gpus) or None
    if any("NOTHING_TO_DO" in e for e in errors) or any("NOTHING_TO_DO" in m.line for m in lines):
        return  # Fabric Manager's own word that this system has no NVSwitch: nothing to manage
    evidence: list[Evidence] = []
    if state and state.split()[0] in _NOT_RUNNING and switch:
        missing = cuda is not None and cuda.fabricmanager_enabled == "not-found"
        stated = snapshot.reported_fact("cuda", "fabricmanager_active")
        evidence.append(Evidence(REPORTED_WORDS if stated else "systemctl status nvidia-fabricmanager",
                                 ("nvidia-fabricmanager.service: not found (not installed)" if missing
                                  else f"Active: {state}",)))
    if errors and switch is not False:
        evidence.append(Evidence("journalctl -u nvidia-fabricmanager", errors[:MAX_LINES]))
    if not evidence and not lines:
        if state is None and not lines:
            yield Skip("needs `systemctl status nvidia-fabricmanager`, or a program's error 802")
        elif state.split()[0] in _NOT_RUNNING and snapshot.pci_devices is None and not snapshot.gpus:
            yield _fabric_manager_down_unknown_system(snapshot, state, cuda.fabricmanager_enabled if cuda else None)
        return
    message = ("Fabric Manager is not running on an NVSwitch system: CUDA cannot start on its GPUs"
               if state else "CUDA reports the system not initialised (error 802): Fabric Manager is not running")
    yield Draft(Severity.CRITICAL, message, evidence=tuple(evidence) + line_evidence(lines),
                fixes=table_fixes("GH210"),
                explains=("GH610", "GH605", "GH408", "GH806"))


def _fabric_manager_down_unknown_system(snapshot: Snapshot, state: str, enabled: str | None) -> Draft:
    """The unit is missing, inactive or failed and nothing in the evidence says what GPUs the host has: a person
    asks about Fabric Manager on an NVSwitch system, where this is why CUDA cannot start, so it is a warning that
    names the condition, not a fault the evidence proves."""
    missing = enabled == "not-found"
    what = ("is not installed (its unit could not be found)" if missing else "failed" if state.startswith("failed")
            else f"is not running ({state})")
    shown = "nvidia-fabricmanager.service: not found (not installed)" if missing else f"Active: {state}"
    return Draft(Severity.WARNING, f"Fabric Manager {what}: on an NVSwitch system (HGX/DGX) CUDA cannot start on "
                 "its GPUs until it runs; whether this host has NVSwitches is not in the evidence given",
                 evidence=(Evidence(snapshot.sources.get("cuda", "systemctl status nvidia-fabricmanager"), (shown,)),),
                 fixes=table_fixes("GH210"), explains=("GH610", "GH605", "GH408", "GH806"))


# --------------------------------------------------------------------------- GH414

HELD_SHARE = 0.5  # of the GPU's memory
HELD_MIN_MIB = 1024


@check("GH414", "memory-held-idle", "GPU memory held by processes at 0 % utilisation", requires=("gpus",))
def memory_held_idle(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A GPU has at least half of its memory (and at least 1 GiB) in use while its utilisation is 0 %,
    in nvidia-smi's output. The processes listed on it are named; when none is listed, the memory is
    held by processes nvidia-smi cannot see (another container's, or leftovers of a crashed job).

    Why it matters:
    The next job on that GPU fails with "CUDA out of memory" although nothing seems to run. Leftover
    DataLoader workers or zombie processes of a killed job are the usual holders.

    How to fix:
    Find the holders with `sudo fuser -v /dev/nvidia*` (or lsof on the same files) and end them;
    `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv` lists those the driver
    sees. If the memory stays held with no process, reset the GPU (`sudo nvidia-smi -r -i <index>`) or
    reboot.

    Exceptions:
    A job between steps, a notebook holding a model, or an inference server waiting for requests
    holds memory at 0 % on purpose: the finding is a warning to look, not a fault. Display
    processes are not counted.
    """
    for gpu in snapshot.gpus:
        used, total, util = gpu.memory_used_mib, gpu.memory_total_mib, gpu.utilization_gpu_pct
        if used is None or total is None or util is None or total <= 0:
            continue
        if util > 0 or used < max(HELD_MIN_MIB, HELD_SHARE * total):
            continue
        compute = [p for p in gpu.processes if (p.type or "C") != "G"]
        if gpu.processes and not compute:
            continue  # only display clients
        holders = ", ".join(f"{p.name or '?'} (pid {p.pid}, {p.used_memory_mib or '?'} MiB)" for p in compute[:4])
        who = f"held by {holders}" if holders else "no process listed: held by processes nvidia-smi does not see"
        yield Draft(Severity.WARNING, f"GPU {gpu.index} holds {used:.0f} of {total:.0f} MiB at 0 % utilisation; {who}",
                    subject=snapshot.gpu_subject(gpu.pci_address),
                    evidence=(Evidence(snapshot.sources.get("smi", "nvidia-smi"),
                                       (f"GPU {gpu.index}: {used:.0f}MiB / {total:.0f}MiB, GPU-Util {util:.0f}%",)),),
                    fixes=table_fixes("GH414"))


# --------------------------------------------------------------------------- GH612

_LIBRARY = lazy_re(r"\b(lib[\w+-]+\.so(?:\.\d+)*)|\b(GLIBCXX_[\d.]+)|\b(cuSPARSE|cuDNN|cuBLAS|cuFFT)\b")


@check("GH612", "cuda-library-missing", "The dynamic loader cannot find a CUDA library", requires=("messages",))
def cuda_library_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A program could not load a CUDA library: "libcudnn.so.8: cannot open shared object file",
    TensorFlow's "Could not load dynamic library 'libcublas.so.11'", an undefined symbol in
    libcublasLt or libnvJitLink, or "version `GLIBCXX_3.4.30' not found". The lines come from pasted
    evidence matched by the signature catalogue (`gpuhealth analyze`).

    Why it matters:
    The framework then falls back to the CPU or stops. The library is either not installed, another
    CUDA version's copy is found first, or it is installed where the loader does not look.

    How to fix:
    Look for it: `ldconfig -p | grep -E 'libcudnn|libcublas|libnvJitLink|libcudart'` and
    `echo "${LD_LIBRARY_PATH-}"`. Install the version the framework was built for (pip wheels: the
    `nvidia-cudnn-cu12` package and friends; system: the `libcudnn` package of the CUDA major
    version), or remove the other CUDA from `LD_LIBRARY_PATH`. For GLIBCXX, use a newer libstdc++
    (conda's `libstdcxx-ng`) or the system one.

    Exceptions:
    TensorFlow's optional TensorRT libraries (libnvinfer) only cost speed. `gpuhealth check` reads
    no program output, so there it is skipped.
    """
    if snapshot.messages is None:
        yield Skip("only with a program's output (gpuhealth analyze)")
        return
    lines = lines_for(snapshot, "GH612")
    harmless = [m for m in lines if _not_a_fault(m)]
    lines = [m for m in lines if not _not_a_fault(m)]
    if harmless and not lines:
        # WSL's ldconfig warning: the loader still finds libcuda; say so instead of "cannot load".
        yield Draft(Severity.INFO, signature(harmless[0].signature).summary, evidence=line_evidence(harmless))
        return
    if not lines:
        return
    names = []
    for message in lines:
        for m in _LIBRARY.finditer(message.line):
            name = next(g for g in m.groups() if g)
            if name not in names and "stub" not in name:
                names.append(name)
    what = ", ".join(names[:4]) if names else "a CUDA library"
    optional = names and all(n.startswith("libnvinfer") for n in names)
    severity = Severity.WARNING if optional else _severity(lines)
    if names and all(n in _UNVERSIONED_DRIVER_LIBS for n in names):
        yield Draft(severity, f"The program asks for {what}, the driver library's development name without a "
                              "version; the driver installs the versioned name (.so.1)",
                    evidence=line_evidence(lines), fixes=_unversioned_fixes(names[0]), explains=("GH203",))
        return
    yield Draft(severity, f"The dynamic loader cannot load {what}", evidence=line_evidence(lines),
                fixes=table_fixes("GH612"),
                explains=("GH610", "GH605", "GH806"))


# The driver's libraries a program may dlopen by their unversioned development name; the driver's
# packages (and NVIDIA's NVML documentation) use the .so.1 name, and a distribution often ships no link.
_UNVERSIONED_DRIVER_LIBS = ("libnvidia-ml.so",)


def _not_a_fault(message: MessageLine) -> bool:
    row = signature(message.signature) if message.signature else None
    return row is not None and row.severity == "info" and row.summary.startswith("Not a fault")


def _unversioned_fixes(name: str) -> tuple[Fix, ...]:
    return (slotted("ldconfig -p | grep {file}", note=f"{name}.1 listed without {name}: only the link is missing",
                    file=name),
            slotted("sudo ln -s /usr/lib/x86_64-linux-gnu/{file}.1 /usr/lib/x86_64-linux-gnu/{file}",
                    "debian", note="or make the program load the .so.1 name", file=name),
            slotted("sudo ln -s /usr/lib64/{file}.1 /usr/lib64/{file}", "rhel",
                    note="or make the program load the .so.1 name", file=name))


# --------------------------------------------------------------------------- GH706


@check("GH706", "p2p-blocked-iommu-acs", "NCCL/P2P fails with the IOMMU or PCIe ACS in the way",
       reads=("messages",))
def p2p_blocked_iommu_acs(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A multi-GPU job hangs or NCCL/peer-to-peer transfers fail ("NCCL WARN", an all-reduce that never
    finishes, a hang that `NCCL_P2P_DISABLE=1` works around) on a host where PCIe ACS redirects
    peer traffic (`ACSCtl: ... ReqRedir+ CmpltRedir+` on the bridges above the GPUs) or the IOMMU
    is on (`intel_iommu=on`, `amd_iommu=on`, "DMAR: IOMMU enabled").
    What CUDA's peer-to-peer samples measured decides first (checks/peer.py): a PCIe GPU pair whose
    `p2pBandwidthLatencyTest` "P2P=Enabled" bandwidth is below half of its "P2P=Disabled" bandwidth
    (the copy staged through host memory, which a working direct path never trails; NCCL's maintainers
    read "very low" P2P-enabled bandwidth as ACS, NVIDIA/nccl#199) is a warning, critical with ACS
    redirection or the IOMMU shown beside it; `simpleP2P` reading data back wrong after a peer copy is
    critical. Pairs joined by NVLink (`topo -m` NV#, `topo -p2p n` OK) and pairs without peer access
    are not judged.

    Why it matters:
    With ACS redirection or the IOMMU translating, GPU peer-to-peer writes are sent up to the root
    complex, where they are blocked or crawl: NCCL hangs or reads garbage. It is a host setting, not
    a GPU or NCCL fault.

    How to fix:
    On bare metal, disable ACS on the PCIe switches/bridges above the GPUs (`setpci` on each bridge,
    or a BIOS option such as "ACS Control: Disabled"), and boot with `iommu=pt` or the IOMMU off
    (VT-d / AMD-Vi disabled) unless a VM needs it. The guide's command,
    `sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000`, does not persist across reboots. Check with
    `nvidia-smi topo -p2p r`, `p2pBandwidthLatencyTest` and NCCL's `all_reduce_perf`.
    `NCCL_P2P_DISABLE=1` is a slow workaround.

    Exceptions:
    Virtual machines with GPU passthrough need the IOMMU on the hypervisor; inside the VM,
    peer-to-peer then depends on the hypervisor's ACS setup.
    """
    p2p = snapshot.p2p
    if p2p is None:
        yield Skip("needs NCCL/P2P output together with lspci -vvv (ACSCtl) or the kernel command line")
        return
    failures = p2p.failures + tuple(e.message for e in snapshot.app_errors or () if e.kind == "nccl")
    cmdline = snapshot.host_env.kernel_cmdline if snapshot.host_env else None
    iommu = p2p.iommu + tuple(w for w in (cmdline or "").split() if w in ("intel_iommu=on", "amd_iommu=on"))
    blockers = p2p.acs_redirect + iommu
    if p2p.tests:  # what CUDA's P2P samples measured decides before any setting does (checks/peer.py)
        measured = _measured_p2p(snapshot, failures, blockers)
        if measured is not None:
            yield measured
            return
    if not blockers and not p2p.acs_read and cmdline is None:
        # a failure alone (a hang told in words, an NCCL WARN) says nothing of the setting: the cause stays open
        yield Skip("the evidence shows no PCIe ACS setting (lspci -vvv's ACSCtl) and no kernel command line")
        return
    if not blockers or not (failures or p2p.acs_redirect):
        return  # the IOMMU alone is a common default; it matters once peer-to-peer fails
    what = "PCIe ACS redirects peer traffic" if p2p.acs_redirect else "the IOMMU is on"
    if failures:
        severity = Severity.CRITICAL
        message = f"NCCL/P2P fails and {what}: GPU peer-to-peer goes through the root complex"
    else:
        severity = Severity.WARNING
        message = f"{what}: GPU peer-to-peer will go through the root complex (NCCL hangs)"
    yield Draft(severity, message,
                evidence=tuple(e for e in (Evidence("NCCL / P2P", failures[:4]),
                                           Evidence("lspci -vvv / kernel", blockers[:MAX_LINES])) if e.lines),
                fixes=table_fixes("GH706"),
                explains=("GH806", "GH702"))


def _measured_p2p(snapshot: Snapshot, failures: tuple[str, ...], blockers: tuple[str, ...]) -> Draft | None:
    """GH706's finding from p2pBandwidthLatencyTest or simpleP2P: P2P-enabled copies far slower than staged ones on
    PCIe pairs (warning; critical with ACS redirection or the IOMMU shown), or wrong data after a peer copy
    (critical). None when the samples measured nothing wrong."""
    from gpuhealth.checks.peer import P2P_SLOW_FRACTION, slow_pairs, tests_source, wrong_data

    found, wrong = slow_pairs(snapshot), wrong_data(snapshot)
    slow = [line for _, line in found]
    if not slow and not wrong:
        return None
    what = "PCIe ACS redirects peer traffic" if snapshot.p2p and snapshot.p2p.acs_redirect else "the IOMMU is on"
    if wrong:
        message = "GPU peer-to-peer copies return wrong data (simpleP2P's check failed)"
    else:
        message = (f"P2P-enabled copies are below {P2P_SLOW_FRACTION:.0%} of the bandwidth staged through the host "
                   f"between {len({pair for pair, _ in found})} GPU pair(s) (p2pBandwidthLatencyTest): {slow[0]}")
    message += (f", and {what}: peer traffic goes through the root complex" if blockers else
                "; the documented cause is PCIe ACS or the IOMMU sending peer traffic through the root complex")
    severity = Severity.CRITICAL if wrong or blockers else Severity.WARNING
    return Draft(severity, message,
                 evidence=tuple(e for e in (Evidence(tests_source(snapshot), tuple(wrong + slow)[:MAX_LINES]),
                                            Evidence("NCCL / P2P", failures[:4]),
                                            Evidence("lspci -vvv / kernel", blockers[:MAX_LINES])) if e.lines),
                 fixes=table_fixes("GH706"), explains=("GH806", "GH702"))
