"""``gpuhealth recommend``: which driver branch, kernel-module flavour, install route, CUDA toolkits and
PyTorch wheel suit the GPUs of a snapshot.

``recommend(snapshot)`` is pure: it reads the PCI bus (or the driver's GPU list) and the OS of the
snapshot and the tables in ``knowledge/gpus.csv``, ``knowledge/drivers.csv`` and ``knowledge/cuda_drivers.csv``;
nothing else.

Rules (docs/recommend-and-fix.md):

- Per GPU model: architecture and compute capability by PCI device ID; the driver branches that support
  it (current LTS/production/new-feature branches, and the legacy branch that is its last).
- Preferred branch: the architecture's legacy branch when it has one (470 for Kepler, 580 for Maxwell,
  Pascal and Volta); otherwise the Long Term Support branch with the latest end of life that is not past
  it and whose CUDA version is confirmed; then a production branch; then the newest that supports it.
- A GPU whose own last branch (NVIDIA's list per device ID, ``knowledge/legacy.py``) ends before its
  architecture's (GRID K1: 367.xx), or that is older than every architecture of the table (a GeForce 9800: 340.xx),
  is named in a note with that branch.
- One driver serves every GPU of a host: the host's branch is chosen among the branches that support all
  of its models. Open kernel modules when every GPU supports them and the branch is 560 or newer (the open
  flavour is the default from R560); required when any GPU is Blackwell.
- CUDA toolkits: native (backward compatibility) and minor-version compatibility, limited to toolkits that
  can target every architecture present. PyTorch wheel: the newest variant whose CUDA version runs
  natively, else through minor-version compatibility, and whose kernels (its ``TORCH_CUDA_ARCH_LIST``,
  drivers.csv ``wheel ... archs``) cover every GPU's compute capability; none when no variant has them.
- Verdict: "nothing-to-change" when the installed driver's branch supports every GPU and is not past its
  end of life (then no install commands; CUDA and PyTorch advice for the installed branch);
  "upgrade-advised" when it supports them but is past its end of life; "change-required" when it does not
  support them; "install" when no driver is installed.
- Fabric Manager on NVSwitch systems (a Fabric state in ``nvidia-smi -q``, NVSwitches on the PCI bus, or
  eight SXM GPUs): every install route installs the Fabric Manager of the new branch with it (it must be
  exactly the driver's version; without it CUDA fails with error 802).
- The ``.run`` installer's options by installer version (drivers.csv ``installer`` rows).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from gpuhealth.commands import fill
from gpuhealth.knowledge import drivers, gpus
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Snapshot, to_jsonable
from gpuhealth.records import record

RECOMMEND_SCHEMA_VERSION = 1
OPEN_DEFAULT_FROM = 560  # NVIDIA Driver Installation Guide, kernel modules: open is the default from R560
WHEEL_INDEX = "https://download.pytorch.org/whl"
RHEL_LIKE = ("rhel", "rocky", "almalinux", "centos", "ol")
EPEL_DISTROS = ("rocky", "almalinux", "centos")
DNF5_FEDORA_FROM = 41  # Fedora 41 switched to dnf5 (knowledge/command_ranges.csv)
_REPO_FILE = "https://developer.download.nvidia.com/compute/cuda/repos/{repo:file}/{machine:file}/cuda-{repo:file}.repo"
DNF_ADD_REPO = "sudo dnf config-manager --add-repo " + _REPO_FILE
DNF5_ADD_REPO = "sudo dnf config-manager addrepo --from-repofile=" + _REPO_FILE  # dnf5 has no --add-repo

UBUNTU_SOURCE = ("not confirmed: package names from the Ubuntu archive <https://packages.ubuntu.com> (source package "
                 "nvidia-graphics-drivers-<branch>-server builds nvidia-driver-<branch>-server and the "
                 "-server-open variant); ubuntu-drivers from ubuntu-drivers-common")
RHEL_SOURCE = ("not confirmed: NVIDIA, Driver Installation Guide <https://docs.nvidia.com/datacenter/tesla/"
               "driver-installation-guide/> (620 edition: module streams nvidia-driver:<branch>-open on RHEL 8/9, "
               "versionlock on RHEL 10); NVIDIA yum-packaging-dkms-nvidia README <https://github.com/NVIDIA/"
               "yum-packaging-dkms-nvidia> (streams <branch>-dkms, and <branch>-open from 515)")
FEDORA_SOURCE = ("NVIDIA CUDA Installation Guide for Linux, Fedora: kernel-devel-matched kernel-headers "
                 "<https://docs.nvidia.com/cuda/cuda-installation-guide-linux/>; Fedora 41 ChangeSet, Switch to dnf5 "
                 "<https://fedoraproject.org/wiki/Releases/41/ChangeSet#Switch_to_dnf5>; dnf5-config-manager(8), "
                 "addrepo --from-repofile <https://github.com/rpm-software-management/dnf5/blob/main/doc/dnf5_plugins/"
                 "config-manager.8.rst>")
DEBIAN_SOURCE = ("not confirmed: Debian's nvidia-detect <https://packages.debian.org/nvidia-detect> names the "
                 "package; its data was not read")
RUNFILE_SOURCE = ("NVIDIA, Driver Installation Guide: kernel modules <https://docs.nvidia.com/datacenter/tesla/"
                  "driver-installation-guide/kernel-modules.html>: the .run installer chooses the flavour with "
                  "--kernel-module-type")


@record
class Command:
    text: str
    note: str = ""
    fabric_package: str | None = None  # the Fabric Manager package this command installs


@record
class InstallRoute:
    distro: str  # "Ubuntu 22.04", "Rocky Linux 9.3", "unknown Linux"
    family: str  # "debian", "rhel", "other"
    branch: int
    flavour: str  # "open" or "proprietary"
    commands: tuple[Command, ...]
    source: str


@record
class BranchOption:
    number: int
    designation: str  # "Long Term Support Branch", "Production Branch", "New Feature Branch", "legacy"
    end_of_life: str | None = None
    past_end_of_life: bool | None = None  # None when the snapshot's date is unknown
    cuda: str | None = None  # what the branch reports natively
    source: str = ""


@record
class CudaAdvice:
    native: tuple[str, ...] = ()
    minor_compat: tuple[str, ...] = ()
    pytorch_wheel: str | None = None  # "cu128"
    pytorch_wheel_via: str | None = None  # "native" or "minor-version compatibility"
    pytorch_source: str = ""
    pytorch_spec: str = "torch"  # what pip installs: "torch", or "torch<2.6" where the wheel's archs are bounded


@record
class GpuAdvice:
    device_id: str
    count: int
    addresses: tuple[str, ...]
    name: str | None = None
    architecture: str | None = None  # None: the device ID is in no range of gpus.csv
    compute_capability: str | None = None
    compute_capability_source: str = ""
    chips: tuple[str, ...] = ()
    open_modules: str | None = None  # "unsupported", "supported", "required"
    branches: tuple[BranchOption, ...] = ()
    preferred_branch: int | None = None
    flavour: str | None = None
    cuda: CudaAdvice | None = None
    source: str = ""


@record
class FabricManager:
    """Fabric Manager on an NVSwitch system: why the host is taken for one, and what goes with a branch."""

    reason: str  # "nvidia-smi -q: Fabric State Completed" ...
    package: str | None = None  # the package of the branch to install, when the route has one
    note: str = ""
    source: str = ""


@record
class Recommendation:
    schema_version: int = RECOMMEND_SCHEMA_VERSION
    hostname: str | None = None
    os_family: str = "other"
    distro: str = "unknown Linux"
    installed_driver: str | None = None
    installed_branch: int | None = None
    installed_supports_all: bool | None = None
    gpus: tuple[GpuAdvice, ...] = ()
    branch: BranchOption | None = None  # the one driver for this host
    flavour: str | None = None
    install: InstallRoute | None = None
    cuda: CudaAdvice | None = None
    notes: tuple[str, ...] = ()
    cuda_max: str | None = None  # the newest CUDA toolkit the branch runs natively
    wheel_index: str | None = None  # pip's --index-url for the PyTorch wheel
    verdict: str = "unknown"  # "nothing-to-change", "upgrade-advised", "change-required", "install", "unknown"
    verdict_reason: str = ""
    fabric_manager: FabricManager | None = None  # set on NVSwitch systems


# --------------------------------------------------------------------------- the pure function


def recommend(snapshot: Snapshot) -> Recommendation:
    """What to install on the host the snapshot describes."""
    os_info = snapshot.os
    family = os_info.family if os_info else "other"
    distro = _distro(snapshot)
    installed = _installed_driver(snapshot)
    installed_branch = drivers.branch_of(installed)
    month = _month(snapshot.captured_at)
    notes: list[str] = []

    models = _models(snapshot)
    advice = tuple(_advise(device_id, entries, month) for device_id, entries in models.items())
    known = [a for a in advice if a.architecture]
    for item in advice:
        legacy = _legacy_note(item)
        if legacy:
            notes.append(legacy)
        elif item.architecture is None:
            notes.append(f"PCI device 10de:{item.device_id} is not in the GPU table (gpus.csv): "
                         "its architecture is unknown, so it is left out of the choice")
    if not advice:
        notes.append("no NVIDIA GPU found on the PCI bus or in the driver's GPU list")
    archs = sorted({a.architecture for a in known if a.architecture}, key=gpus.ARCHITECTURES.index)

    host_branch = flavour = route = cuda = None
    supports_all = None
    ccs = [a.compute_capability for a in known]
    fabric = _fabric(snapshot, known)
    if archs:
        common = [b for b in _options(archs[0], month) if all(drivers.supports(b.number, a) for a in archs)]
        host_branch = _prefer(common, archs)
        if host_branch is None:
            notes.append(f"no single driver branch supports every GPU here ({', '.join(archs)}): "
                         "split them across hosts")
        else:
            flavour = _flavour(archs, host_branch.number)
            if flavour is None:
                notes.append("Blackwell needs the open kernel modules, which pre-Turing GPUs cannot use: "
                             "no flavour serves both")
            else:
                route = install_route(snapshot, host_branch.number, flavour, fabric=fabric is not None)
            cuda = _cuda(host_branch.number, archs, ccs)
        if installed_branch is not None:
            supports_all = all(drivers.supports(installed_branch, a) for a in archs)
            if not supports_all:
                notes.append(f"the installed driver {installed} (branch {installed_branch}) does not support "
                             f"every GPU here ({', '.join(archs)})")
    if host_branch is not None and host_branch.past_end_of_life:
        notes.append(f"branch {host_branch.number} is past its end of life ({host_branch.end_of_life})")
    verdict, reason = _verdict(installed, installed_branch, supports_all, month, bool(archs))
    if verdict == "nothing-to-change" and installed_branch is not None:
        route = None  # nothing to install: the CUDA and PyTorch advice is for the driver in place
        cuda = _cuda(installed_branch, archs, ccs)
    if fabric is not None:
        fabric = _fabric_advice(fabric, verdict, installed, route)
        notes.append(f"NVSwitch system ({fabric.reason}): {fabric.note}")
    if any(a.open_modules == "required" for a in known):
        notes.append("Blackwell GPUs work only with the open kernel modules (NVIDIA, Driver Installation Guide: "
                     "kernel modules)")
    return Recommendation(
        hostname=snapshot.hostname, os_family=family, distro=distro, installed_driver=installed,
        installed_branch=installed_branch, installed_supports_all=supports_all, gpus=advice,
        branch=host_branch, flavour=flavour, install=route, cuda=cuda, notes=tuple(notes),
        cuda_max=cuda.native[-1] if cuda and cuda.native else None,
        wheel_index=f"{WHEEL_INDEX}/{cuda.pytorch_wheel}" if cuda and cuda.pytorch_wheel else None,
        verdict=verdict, verdict_reason=reason, fabric_manager=fabric)


def _legacy_note(item: GpuAdvice) -> str | None:
    """A GPU whose own last branch (NVIDIA's list per device ID, knowledge/legacy.py) ends before its architecture's,
    or that has no architecture here (older than Fermi): that branch is the most its driver can be."""
    from gpuhealth.knowledge.legacy import last_branch
    from gpuhealth.knowledge.sources import cite

    last = last_branch(item.device_id)
    if last is None or last.basis != "device":
        return None
    arch = drivers.architecture(item.architecture) if item.architecture else None
    if arch is not None and (arch.last_branch is None or arch.last_branch <= last.number):
        return None  # the architecture's own legacy branch says the same: the choice above already holds it
    name = item.name or last.name or f"10de:{item.device_id}"
    left = ("; a newer branch, chosen here for its architecture, does not drive it" if arch is not None
            else "; it is left out of the choice")
    return (f"{name} (PCI device 10de:{item.device_id}) is supported only up to the {last.label} legacy driver "
            f"branch ({cite(last.source, addresses=False)}){left}")


def _verdict(installed: str | None, branch: int | None, supports_all: bool | None, month: str | None,
             known: bool) -> tuple[str, str]:
    """Whether the driver in place should change, and why."""
    if not known:
        return "unknown", "no GPU of a known architecture: nothing to decide on"
    if installed is None or branch is None:
        return "install", "no NVIDIA driver is installed (or none was seen in the evidence)"
    if supports_all is False:
        return "change-required", f"the installed driver {installed} (branch {branch}) does not support every GPU here"
    info = drivers.branch(branch)
    if info is not None and info.end_of_life and month and month > info.end_of_life:
        return "upgrade-advised", (f"the installed driver {installed} supports every GPU here, but branch {branch} "
                                   f"is past its end of life ({info.end_of_life}): no more fixes")
    return "nothing-to-change", f"the installed driver {installed} (branch {branch}) supports every GPU here"


_SXM = lazy_re(r"SXM|HGX|HBM3|\b[BH]200\b|\bGB?[23]00\b|\bB300\b")
_NOT_SXM = lazy_re(r"PCIe|NVL\b", re.IGNORECASE)
HGX_GPUS = 8  # an HGX/DGX baseboard with NVSwitches carries 8 GPUs (4-GPU boards link GPUs directly)


def _fabric(snapshot: Snapshot, known: list[GpuAdvice]) -> str | None:
    """Why the host is an NVSwitch system, or None when nothing says it is."""
    smi = snapshot.smi.gpus if snapshot.smi is not None else ()
    states = {g.fabric_state for g in (*snapshot.gpus, *smi) if g.fabric_state}
    active = sorted(s for s in states if s.upper() not in ("N/A", "NOT SUPPORTED"))  # "Not Supported": no fabric
    if active:
        return f"nvidia-smi -q: Fabric State {', '.join(active)}"
    if states:
        return None  # "N/A" on every GPU: not on an NVSwitch fabric
    if any(d.vendor_id == "10de" and "NVSwitch" in (d.name or "") for d in snapshot.pci_devices or ()):
        return "NVSwitches on the PCI bus"
    sxm = sum(a.count for a in known if a.name and _SXM.search(a.name) and not _NOT_SXM.search(a.name))
    if sxm >= HGX_GPUS:
        return f"{sxm} SXM GPUs: an HGX/DGX baseboard, whose GPUs talk through NVSwitches"
    return None


def _fabric_advice(reason: str, verdict: str, installed: str | None, route: InstallRoute | None) -> FabricManager:
    version = drivers.fact("fabric", "manager", "version")
    without = drivers.fact("fabric", "manager", "without")
    source = version.source if version else ""
    package = None
    if route is not None:
        package = next((c.fabric_package for c in route.commands if c.fabric_package), None)
        note = (f"a branch change installs Fabric Manager {package or 'of the new branch'} with the driver: "
                f"{version.value if version else ''}; without it {without.value if without else 'CUDA fails'}")
    else:
        have = f" ({installed})" if installed else ""
        note = (f"keep Fabric Manager at exactly the driver's version{have} and running "
                "(`systemctl status nvidia-fabricmanager`); change both together")
    return FabricManager(reason, package, note, source)


def _models(snapshot: Snapshot) -> dict[str, list[tuple[str | None, str | None]]]:
    """Device ID -> [(address, name)], from the PCI bus, then GPUs only the driver reported."""
    found: dict[str, list[tuple[str | None, str | None]]] = {}
    addresses = set()
    names = {g.pci_address: g.name for g in snapshot.gpus if g.pci_address}
    for device in snapshot.nvidia_pci_gpus:
        key = gpus.normalize_device_id(device.device_id)
        if key is None:
            continue
        found.setdefault(key, []).append((device.address, names.get(device.address) or device.name))
        addresses.add(device.address)
    for gpu in snapshot.gpus:
        key = gpus.normalize_device_id(gpu.pci_device_id)
        if key is None or (gpu.pci_address and gpu.pci_address in addresses):
            continue
        found.setdefault(key, []).append((gpu.pci_address, gpu.name))
    return found


def _advise(device_id: str, entries: list[tuple[str | None, str | None]], month: str | None) -> GpuAdvice:
    addresses = tuple(a for a, _ in entries if a)
    name = next((n for _, n in entries if n and not re.fullmatch(r"(?i)device [0-9a-f]{4}", n)), None)
    name = name or gpus.name_for(device_id)  # the model, from the name table, where the evidence gave none
    model = gpus.lookup(device_id)
    if model is None:
        return GpuAdvice(device_id, len(entries), addresses, name)
    arch = drivers.architecture(model.architecture)
    options = tuple(_options(model.architecture, month))
    preferred = _prefer(list(options), [model.architecture])
    flavour = _flavour([model.architecture], preferred.number) if preferred else None
    return GpuAdvice(
        device_id, len(entries), addresses, name, model.architecture, model.compute_capability,
        model.cc_source, model.chips, arch.open_modules if arch else None, options,
        preferred.number if preferred else None, flavour,
        _cuda(preferred.number, [model.architecture], [model.compute_capability]) if preferred else None,
        model.source)


def _options(architecture: str, month: str | None) -> list[BranchOption]:
    """Current branches that support the architecture, and its legacy branch; newest first."""
    arch = drivers.architecture(architecture)
    out = []
    for branch in reversed(drivers.branches()):
        if not drivers.supports(branch.number, architecture):
            continue
        if not (branch.current or (arch is not None and branch.number == arch.last_branch)):
            continue
        past = None
        if branch.end_of_life and month:
            past = month > branch.end_of_life
        designation = branch.designation or "end of life"
        sources = _sources(branch.sources.values())
        out.append(BranchOption(branch.number, designation, branch.end_of_life, past, branch.cuda, sources))
    return out


def _sources(texts: Any) -> str:
    """The branch's sources once each: a document named again keeps only its extra detail."""
    parts: list[str] = []
    named: dict[str, int] = {}  # document -> its place in parts
    for part in (p.strip() for text in texts for p in text.split("; ")):
        document = re.match(r"(.+? <https?://[^>]+>)\s*(.*)$", part)
        if document and document[1] in named:
            detail = document[2].strip(" :")
            at = named[document[1]]
            if detail and detail not in parts[at]:
                parts[at] += f" {detail}"
            continue
        if document:
            named[document[1]] = len(parts)
        if part and part not in parts:
            parts.append(part)
    return "; ".join(parts)


def _prefer(options: list[BranchOption], archs: list[str]) -> BranchOption | None:
    if not options:
        return None
    legacy = [drivers.architecture(a).last_branch for a in archs if drivers.architecture(a)]
    legacy = [b for b in legacy if b is not None]
    if legacy:
        oldest = min(legacy)
        match = [o for o in options if o.number == oldest]
        if match:
            return match[0]

    def confirmed(option: BranchOption) -> bool:
        branch = drivers.branch(option.number)
        return bool(option.cuda) and branch is not None and not branch.sources.get("cuda", "").startswith(
            "not confirmed")

    for designation in ("Long Term Support Branch", "Production Branch"):
        pool = [o for o in options if o.designation == designation and o.past_end_of_life is not True
                and confirmed(o)]
        if pool:
            return max(pool, key=lambda o: (o.end_of_life or "", o.number))
    return options[0]


def _flavour(archs: list[str], branch: int) -> str | None:
    values = [drivers.architecture(a).open_modules for a in archs if drivers.architecture(a)]
    if "required" in values:
        return None if "unsupported" in values else "open"
    if "unsupported" in values or branch < OPEN_DEFAULT_FROM:
        return "proprietary"
    return "open"


def _cuda(branch: int, archs: list[str], ccs: list[str | None] | None = None) -> CudaAdvice:
    native: list[str] | None = None
    minor: list[str] | None = None
    for arch in archs:  # toolkits that every architecture can use
        support = drivers.cuda_support(branch, arch)
        native = list(support.native) if native is None else [v for v in native if v in support.native]
        minor = list(support.minor_compat) if minor is None else [v for v in minor if v in support.minor_compat]
    native, minor = native or [], minor or []
    wheel = via = None
    source = ""
    spec = "torch"
    known_ccs = [c for c in (ccs or []) if c]
    lacking: list[str] = []
    for label, pool in (("native", native), ("minor-version compatibility", minor)):
        runnable = [w for w in drivers.wheels() if w.cuda in pool]
        # a wheel without kernels for a GPU's compute capability is never offered
        fitting = [w for w in runnable if all(w.runs_on(c) is not False for c in known_ccs)]
        lacking += [w.variant for w in runnable if w not in fitting]
        if fitting:
            chosen = fitting[-1]
            wheel, via = chosen.variant, label
            source = "; ".join(p for p in (chosen.source, chosen.archs_source) if p)
            if chosen.torch_below and any(chosen.runs_on(c) for c in known_ccs) and _needs_bound(chosen, known_ccs):
                spec = f"torch<{chosen.torch_below}"
            break
    if wheel is None:
        caps = ", ".join(sorted(set(known_ccs))) or "?"
        source = (f"no PyTorch wheel variant has kernels for compute capability {caps} and runs with this driver"
                  + (f" ({', '.join(dict.fromkeys(lacking))} lack them)" if lacking else "")
                  + ": build PyTorch from source for this GPU, or use other hardware")
    return CudaAdvice(tuple(native), tuple(minor), wheel, via, source, spec)


def _needs_bound(wheel: drivers.Wheel, ccs: list[str]) -> bool:
    """Whether a GPU here relies on an arch that only the bounded releases are known to have (sm_37 in cu118)."""
    later = [w for w in drivers.wheels() if w.archs and w.torch_below is None]
    return any(not any(w.runs_on(c) for w in later) for c in ccs)


# --------------------------------------------------------------------------- install routes


def install_route(snapshot: Snapshot, branch: int, flavour: str, fabric: bool = False) -> InstallRoute:
    """The commands that install ``branch`` in ``flavour`` on the snapshot's distribution; with ``fabric`` (an
    NVSwitch system) the Fabric Manager of the same branch with it, enabled to start at the next boot."""
    os_info = snapshot.os
    family = os_info.family if os_info else "other"
    distro = _distro(snapshot)
    os_id = (os_info.id or "") if os_info else ""
    ids = {os_id, *(os_info.id_like if os_info else ())}
    if family == "debian" and "ubuntu" in ids:
        install = ("sudo apt-get install -y nvidia-driver-{branch}-server-open" if flavour == "open"
                   else "sudo apt-get install -y nvidia-driver-{branch}-server")
        commands = [
            Command("sudo apt-get update"),
            Command("sudo ubuntu-drivers list --gpgpu",
                    note="the server drivers this release packages for these GPUs; pick the one below if listed"),
            _command(install, branch=branch)]
        if fabric:
            package = drivers.fact("fabric", "manager", "package_debian")
            name = package.value.format(branch=branch) if package else f"nvidia-fabricmanager-{branch}"
            commands += [_command("sudo apt-get install -y nvidia-fabricmanager-{branch}", branch=branch,
                                  note="NVSwitch system: Fabric Manager of exactly the driver's version",
                                  fabric_package=name),
                         Command("sudo systemctl enable nvidia-fabricmanager", note="starts it at the next boot")]
        commands += _reboot_and_verify(fabric)
        return InstallRoute(distro, family, branch, flavour, tuple(commands), UBUNTU_SOURCE)
    if family == "debian":
        commands = [
            Command("sudo apt-get install -y nvidia-detect", note="needs the contrib and non-free components"),
            Command("nvidia-detect", note="names the Debian driver package for these GPUs; install that one")]
        if fabric:
            commands.append(Command("cat /sys/module/nvidia/version", note=(
                "NVSwitch system: after installing, Fabric Manager of exactly this version is needed too "
                f"(NVIDIA's CUDA repository: nvidia-fabricmanager-{branch}); without it CUDA fails with error 802")))
        return InstallRoute(distro, family, branch, flavour, tuple(commands), DEBIAN_SOURCE)
    # dnf and NVIDIA's module streams start with RHEL 8 (knowledge/command_ranges.csv): RHEL/CentOS 7 (yum) takes the
    # .run installer below, like any distribution without a package route
    if (family == "rhel" or ids & set(RHEL_LIKE)) and (_major(os_info.version_id if os_info else None) or 9) >= 8:
        major = _major(os_info.version_id if os_info else None) or 9
        machine = "sbsa" if (os_info and os_info.architecture in ("aarch64", "arm64")) else "x86_64"
        repository = cuda_repository(os_info, major, machine)
        if isinstance(repository, str):  # NVIDIA publishes no repository for this release: the .run installer
            return _runfile_route(distro, family, branch, flavour, fabric, note=repository)
        fedora = repository.directory.startswith("fedora")
        commands = []
        if os_id in EPEL_DISTROS:
            commands.append(Command("sudo dnf install -y epel-release", note="DKMS comes from EPEL"))
        # Fedora's kernel-headers do not follow the kernel's release: NVIDIA's guide installs kernel-devel-matched
        commands.append(Command("sudo dnf install -y kernel-devel-matched kernel-headers" if fedora
                                else "sudo dnf install -y kernel-devel-$(uname -r) kernel-headers-$(uname -r)"))
        # dnf5 (Fedora 41 on) has no --add-repo but `config-manager addrepo --from-repofile=` (command_ranges.csv)
        add = DNF5_ADD_REPO if fedora and major >= DNF5_FEDORA_FROM else DNF_ADD_REPO
        commands.append(_command(add, note="NVIDIA's CUDA repository", repo=repository.directory, machine=machine))
        if major >= 10:
            commands += [_command("sudo dnf versionlock add '*nvidia*'{branch}'*'", branch=branch,
                                  note="keeps updates on this branch (python3-dnf-plugin-versionlock); undo it before"
                                       " upgrading the branch: sudo dnf versionlock delete '*nvidia*'"),
                         Command("sudo dnf install -y nvidia-open" if flavour == "open"
                                 else "sudo dnf install -y nvidia-driver",
                                 note="" if flavour == "open" else "proprietary package name not confirmed")]
            if fabric:
                commands.append(Command(
                    "sudo dnf install -y nvidia-fabric-manager", fabric_package="nvidia-fabric-manager",
                    note="NVSwitch system: Fabric Manager of the locked branch (name not confirmed)"))
        else:
            module = ("sudo dnf module install -y nvidia-driver:{branch}-open" if flavour == "open"
                      else "sudo dnf module install -y nvidia-driver:{branch}-dkms")
            if fabric:  # the stream's fm profile: the driver, Fabric Manager and NSCQ of the same release
                profile = ("sudo dnf module install -y nvidia-driver:{branch}-open/fm" if flavour == "open"
                           else "sudo dnf module install -y nvidia-driver:{branch}-dkms/fm")
                commands.append(_command(
                    profile, branch=branch, fabric_package=f"nvidia-driver:{branch}/fm",
                    note="NVSwitch system: the fm profile adds Fabric Manager of the same version"))
            else:
                commands.append(_command(module, branch=branch))
        if fabric:
            commands.append(Command("sudo systemctl enable nvidia-fabricmanager", note="starts it at the next boot"))
        commands += _reboot_and_verify(fabric)
        source = "; ".join((RHEL_SOURCE, repository.source, *((FEDORA_SOURCE,) if fedora else ())))
        return InstallRoute(distro, "rhel", branch, flavour, tuple(commands), source)
    return _runfile_route(distro, family, branch, flavour, fabric)


def _runfile_route(distro: str, family: str, branch: int, flavour: str, fabric: bool, note: str = "") -> InstallRoute:
    """The .run installer: for a distribution without a package route, or whose release NVIDIA's CUDA repository
    does not serve (``note`` says so)."""
    commands = [_runfile_command(branch, flavour, note)]
    source = RUNFILE_SOURCE + "; " + "; ".join(r.source for r in _installer_rows())
    if fabric:
        redist = drivers.fact("fabric", "manager", "redist")
        commands.append(Command("cat /sys/module/nvidia/version", note=(
            "NVSwitch system: install Fabric Manager of exactly this version too, from "
            f"{redist.value if redist else 'NVIDIA'} (fabricmanager-linux-<arch>-<version>-archive); "
            "without it CUDA fails with error 802")))
    return InstallRoute(distro, family, branch, flavour, tuple(commands), source)


@record
class CudaRepository:
    directory: str  # "rhel9", "fedora40": the directory under developer.download.nvidia.com/compute/cuda/repos/
    os_ids: tuple[str, ...]
    release: int
    machines: tuple[str, ...]  # "x86_64", "sbsa"
    source: str


@functools.cache
def cuda_repositories() -> tuple[CudaRepository, ...]:
    """NVIDIA's CUDA repository directories that a dnf route may name (knowledge/cuda_repos.csv, each row cited)."""
    from gpuhealth.knowledge import table_rows

    return tuple(CudaRepository(row["directory"], tuple(row["os_ids"].split(";")), int(row["release"]),
                                tuple(row["machines"].split(";")), row["source"])
                 for row in table_rows("cuda_repos.csv"))


def cuda_repository(os_info: Any, major: int, machine: str) -> CudaRepository | str:
    """The CUDA repository directory for this distribution's release and machine, looked up by its os-release ID
    first, then by the IDs it is like (a Fedora remix numbers its releases as Fedora does); else why there is none,
    in words. A directory is never built from a release number alone: rhel40 or fedora38 does not exist."""
    names = [os_info.id or "", *os_info.id_like] if os_info else []
    for name in names:
        rows = [r for r in cuda_repositories() if name in r.os_ids]
        if not rows:
            continue
        row = next((r for r in rows if r.release == major), None)
        if row is None:
            listed = ", ".join(r.directory for r in rows)
            return (f"NVIDIA's CUDA repository has no directory for {name} {major} (it serves {listed}: "
                    "knowledge/cuda_repos.csv)")
        if machine not in row.machines:
            return f"NVIDIA's CUDA repository has no {row.directory}/{machine} directory (knowledge/cuda_repos.csv)"
        return row
    return "NVIDIA's CUDA repository serves no directory for this distribution (knowledge/cuda_repos.csv)"


def _installer_rows() -> list[drivers.Row]:
    keys = (("kernel-module-type", "first_version"), ("kernel-module-build-directory", "first_version"),
            ("kernel-open", "first_branch"))
    return [row for row in (drivers.fact("installer", k, f) for k, f in keys) if row is not None]


def _runfile_command(branch: int, flavour: str, why: str = "") -> Command:
    """The .run installer line with only the options an installer of ``branch`` has: --kernel-module-type from
    555, -m=kernel-open (the open modules' directory) from 515 to 554, no flavour option before (proprietary
    only) or for the proprietary flavour before 555, where it is the default."""
    typed = drivers.fact("installer", "kernel-module-type", "first_version")
    open_from = drivers.fact("installer", "kernel-open", "first_branch")
    typed_from = drivers.branch_of(typed.value) if typed else 555
    template = "sudo sh NVIDIA-Linux-$(uname -m)-<{branch}.x version>.run"
    if branch >= (typed_from or 555):
        template = "sudo sh NVIDIA-Linux-$(uname -m)-<{branch}.x version>.run --kernel-module-type={flavour:file}"
    elif flavour == "open" and branch >= int(open_from.value if open_from else 515):
        template = "sudo sh NVIDIA-Linux-$(uname -m)-<{branch}.x version>.run -m=kernel-open"
    note = (f"the .run installer of a {branch} release from nvidia.com; "
            + (why or "no package route is known for this distribution"))
    return _command(template, branch=branch, flavour=flavour, note=note)


def _reboot_and_verify(fabric: bool) -> list[Command]:
    commands = [Command("sudo reboot", note="loads the new kernel module"),
                Command("nvidia-smi", note="after the reboot: lists every GPU")]
    if fabric:
        commands.append(Command("systemctl status nvidia-fabricmanager",
                                note="after the reboot: active (running); CUDA fails with error 802 until it is"))
    return commands


# --------------------------------------------------------------------------- helpers


def _installed_driver(snapshot: Snapshot) -> str | None:
    if snapshot.driver is not None and snapshot.driver.version:
        return snapshot.driver.version
    if snapshot.nvml is not None and snapshot.nvml.ok and snapshot.nvml.driver_version:
        return snapshot.nvml.driver_version
    if snapshot.smi is not None and snapshot.smi.driver_version:
        return snapshot.smi.driver_version
    return None


def _command(template: str, note: str = "", fabric_package: str | None = None, **values: object) -> Command:
    """A command from a template: its values go in through ``gpuhealth.commands`` (checked, quoted)."""
    return Command(fill(template, **values)[0], note=note, fabric_package=fabric_package)


def _distro(snapshot: Snapshot) -> str:
    os_info = snapshot.os
    if os_info is None:
        return "unknown Linux"
    if os_info.pretty_name:
        return os_info.pretty_name
    return " ".join(p for p in (os_info.id, os_info.version_id) if p) or "unknown Linux"


def _major(version: str | None) -> int | None:
    match = re.match(r"\d+", version or "")
    return int(match[0]) if match else None


def _month(timestamp: str | None) -> str | None:
    match = re.match(r"(\d{4}-\d{2})", timestamp or "")
    return match[1] if match else None


# --------------------------------------------------------------------------- renderers


def to_json(recommendation: Recommendation) -> str:
    return json.dumps(to_jsonable(recommendation), indent=2) + "\n"


def _span(versions: tuple[str, ...]) -> str:
    if not versions:
        return "none"
    return versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"


def render_text(recommendation: Recommendation, console: Any) -> None:
    """Print the recommendation to a rich console: words and the table at the console's width (a label's text
    wrapped under its own start), commands never wrapped (``soft_wrap``), so they stay pasteable."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    r = recommendation
    say = functools.partial(_said, console)
    say("[bold]Host[/bold]", f"{escape(r.hostname or '?')}  ({escape(r.distro)}, family {r.os_family})")
    if r.installed_driver:
        state = {True: "supports every GPU here", False: "does NOT support every GPU here", None: ""}
        say("[bold]Installed[/bold]", f"driver {escape(r.installed_driver)} (branch {r.installed_branch}) "
                                      f"{state[r.installed_supports_all]}")
    if r.verdict_reason:
        lead = {"nothing-to-change": "[green]Nothing to change[/green]", "upgrade-advised": "[yellow]Upgrade "
                "advised[/yellow]", "change-required": "[red]Change required[/red]", "install": "[bold]Install[/bold]"}
        say(f"{lead.get(r.verdict, '[bold]Verdict[/bold]')}:", escape(r.verdict_reason), indent=0)
    if r.gpus:  # the model by name (the PCI ID is in the JSON)
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for column in ("GPU", "x", "architecture", "CC", "open modules", "branches (preferred first)"):
            table.add_column(column)
        for gpu in r.gpus:
            cc = gpu.compute_capability or "?"
            if gpu.compute_capability and "not confirmed" in gpu.compute_capability_source:
                cc += " (not confirmed)"
            others = [str(b.number) for b in gpu.branches if b.number != gpu.preferred_branch]
            branches = (f"{gpu.preferred_branch}" + (f" ({', '.join(others)})" if others else "")
                        if gpu.preferred_branch else "-")
            table.add_row(escape(gpu.name or f"10de:{gpu.device_id}"), str(gpu.count),
                          gpu.architecture or "unknown", cc, gpu.open_modules or "?", branches)
        console.print(table)
    if r.branch is not None and r.verdict == "nothing-to-change":
        console.print()
        say("[bold]Driver[/bold]", f"keep branch {r.installed_branch}; for a new install: branch {r.branch.number} "
                                   f"({r.branch.designation})")
    elif r.branch is not None:
        eol = f", end of life {r.branch.end_of_life}" if r.branch.end_of_life else ""
        past = " (past)" if r.branch.past_end_of_life else ""
        console.print()
        say("[bold]Driver[/bold]", f"branch {r.branch.number} ({r.branch.designation}{eol}{past}), "
                                   f"{r.flavour or '?'} kernel modules")
        say("", f"source: {escape(r.branch.source)}", style="dim")
    if r.install is not None:
        console.print(f"\n[bold]Install on {escape(r.install.distro)}[/bold]")
        for command in r.install.commands:  # a comment on its own line above its command; never wrapped
            for line in _comment_lines(command.note, console.width):  # wrapped, each line a comment
                console.print(Text(line, style="dim"), soft_wrap=True)
            console.print(f"  {escape(command.text)}", highlight=False, soft_wrap=True)
        say("", f"source: {escape(r.install.source)}", indent=2, style="dim")
    if r.cuda is not None:
        console.print()
        say("[bold]CUDA[/bold]", f"toolkits natively: {_span(r.cuda.native)}; through minor-version "
                                 f"compatibility (limited features): {_span(r.cuda.minor_compat)}")
        if r.cuda.pytorch_wheel:
            say("[bold]PyTorch[/bold]", f"wheel variant {r.cuda.pytorch_wheel} ({r.cuda.pytorch_wheel_via}):")
            spec = r.cuda.pytorch_spec if r.cuda.pytorch_spec == "torch" else f"'{r.cuda.pytorch_spec}'"
            # with its companions from the same index, as PyTorch's install commands (pytorch.org/get-started)
            wheels = f"{spec} torchvision torchaudio"
            console.print(f"  pip install {wheels} --index-url {WHEEL_INDEX}/{r.cuda.pytorch_wheel}", soft_wrap=True)
        else:
            say("[bold]PyTorch[/bold]", "no wheel fits these GPUs:")
        say("", escape(r.cuda.pytorch_source), style="dim")
    if r.fabric_manager is not None:
        fabric = r.fabric_manager
        say("[bold]Fabric Manager[/bold]", f"{escape(fabric.reason)}: {escape(fabric.note)}")
        say("", f"source: {escape(r.fabric_manager.source)}", style="dim")
    for note in r.notes:
        if not note.startswith("NVSwitch system ("):  # shown above
            say("[yellow]note[/yellow]:", escape(note), indent=0)

def _said(console: Any, label: str, text: str, indent: int = 10, style: str = "") -> None:
    """``label`` (markup) padded to ``indent`` columns, then ``text`` (markup) wrapped at the console's width under
    its own first column: "Driver    branch 580 (...)" continues under "branch"."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(min_width=max(indent - 1, 0), no_wrap=True)
    grid.add_column(style=style, overflow="fold")  # a word longer than the line (an address) folds, never cut
    grid.add_row(label, text)
    console.print(grid)


def _comment_lines(note: str, width: int) -> list[str]:
    """A command's note as ``  # `` lines at most ``width`` wide (one line when it fits or the output is piped)."""
    import textwrap

    if not note:
        return []
    return textwrap.wrap(note, max(width, 24), initial_indent="  # ", subsequent_indent="  # ",
                         break_long_words=False, break_on_hyphens=False) or [f"  # {note}"]

