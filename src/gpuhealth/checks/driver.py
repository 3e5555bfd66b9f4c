"""GH2xx: the NVIDIA driver, its kernel modules and device nodes, and the tools that talk to it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace

from gpuhealth.checks.registry import Draft, Expectations, Skip, check, line_evidence, table_fixes
from gpuhealth.commands import fix as slotted
from gpuhealth.knowledge.cuda_drivers import version_key
from gpuhealth.knowledge.signatures import signature
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import (
    DEVICE_NODES_NAMED,
    STUCK_MARKER,
    Evidence,
    Fix,
    MessageLine,
    NvidiaPackage,
    PackageChange,
    PciDevice,
    Severity,
    Snapshot,
)
from gpuhealth.records import record

PROC_VERSION = "/proc/driver/nvidia/version"
REBOOT = Fix("sudo reboot", "any", disruptive=True)
LIBRARY_VERSION = lazy_re(r"NVML library version:\s*(\S+)")


def gpu_expected(snapshot: Snapshot) -> bool | None:
    """True/False when the PCI bus was read, None when unknown (loose evidence)."""
    if snapshot.pci_devices is None:
        return None
    return bool(snapshot.nvidia_pci_gpus)


def module_loaded(snapshot: Snapshot) -> bool | None:
    """Is the nvidia module loaded: the driver's own version file says so, else the module list. A driver version
    only a person's words give ("I installed driver 535") is the installed one, not a loaded module."""
    if snapshot.driver is not None and snapshot.reported_fact("driver") is None:
        return True
    return snapshot.module_listed("nvidia")


def user_space_version(snapshot: Snapshot) -> tuple[str | None, str]:
    """The driver version the user-space library reports, and where it came from: NVML, nvidia-smi, else
    the installed driver library packages when they agree on one version (``dpkg -l``, ``rpm -qa``)."""
    if snapshot.nvml is not None and snapshot.nvml.ok and snapshot.nvml.driver_version:
        return snapshot.nvml.driver_version, "NVML (libnvidia-ml)"
    if snapshot.smi is not None and snapshot.smi.driver_version:
        return snapshot.smi.driver_version, snapshot.sources.get("smi", "nvidia-smi")
    if snapshot.host_env is not None:
        versions = library_package_versions(snapshot.host_env.packages)
        if len(versions) == 1:
            version, names = next(iter(versions.items()))
            source = snapshot.host_env.package_source or "installed packages"
            return version, f"{source}: {', '.join(names[:3])}"
    return None, ""


# Packages that hold the user-space driver libraries (libcuda, libnvidia-ml): their version is the library's.
LIBRARY_PACKAGE = lazy_re(
    r"^(?:libnvidia-compute-\d+\S*|nvidia-utils-\d+\S*|nvidia-compute-utils-\d+\S*|libnvidia-gl-\d+\S*|libcuda1\S*|"
    r"nvidia-driver-(?:cuda-)?libs|nvidia-driver-NVML|nvidia-driver-cuda|xorg-x11-drv-nvidia(?:-cuda)?-libs|"
    r"nvidia-x11-drv(?:-libs)?|nvidia-libs|"
    # Debian's own packaging: libnvidia-ml1 holds libnvidia-ml; nvidia-smi is built from the same driver release
    r"libnvidia-ml1|nvidia-smi)$")
_DRIVER_VERSION = lazy_re(r"^(?:\d+:)?(?P<version>\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?:[-~+]|$)")


def driver_version_of(package_version: str | None) -> str | None:
    """``535.161.08-0ubuntu0.22.04.1`` / ``3:550.54.15-1.el8`` -> the driver version; None for other versions."""
    match = _DRIVER_VERSION.match(package_version or "")
    return match["version"] if match else None


def driver_package_versions(packages: tuple[NvidiaPackage, ...],
                            wanted: Callable[[str], object]) -> dict[str, list[NvidiaPackage]]:
    """Driver version -> the installed packages of that version whose name is ``wanted`` (one per name), the
    versions in order. A package whose version is no driver version (a tool's own) is left out."""
    versions: dict[str, list[NvidiaPackage]] = {}
    for package in packages:
        version = driver_version_of(package.version)
        if version and wanted(package.name):
            same = versions.setdefault(version, [])
            if all(p.name != package.name for p in same):
                same.append(package)
    return dict(sorted(versions.items(), key=lambda item: version_key(item[0])))


def library_package_versions(packages: tuple[NvidiaPackage, ...]) -> dict[str, list[str]]:
    """Driver version -> names of the installed library packages of that version."""
    return {version: [p.name for p in found]
            for version, found in driver_package_versions(packages, LIBRARY_PACKAGE.match).items()}


@check("GH201", "driver-not-loaded", "NVIDIA GPU present but the kernel module is not loaded",
       reads=("pci_devices", "driver", "kernel_modules", "smi_run", "nvml", "messages", "install", "host_env"))
def driver_not_loaded(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    An NVIDIA GPU is on the PCI bus, but `/proc/driver/nvidia/version` does not exist and `nvidia` is
    not among the loaded kernel modules.

    Why it matters:
    Without the kernel module no CUDA program, nvidia-smi or container can use the GPU. Common causes:
    the driver is not installed, a kernel update without a rebuilt DKMS module, Secure Boot rejecting
    the unsigned module, or nouveau holding the GPU.

    How to fix:
    Try `sudo modprobe nvidia` and read the error: "Key was rejected by service" means Secure Boot
    (sign the module or use signed packages); "Module nvidia not found" means no module for this
    kernel (`dkms status`, then install the headers for `uname -r` and rebuild). The kernel log
    (`sudo dmesg | grep -iE 'NVRM|nvidia'`) names other causes.

    Without the PCI bus (pasted evidence): the module list (`lsmod`, with no nvidia line) shows no
    nvidia module while nvidia-smi or NVML says it cannot reach the driver. That failure shows a
    driver was installed for a GPU; the module not being loaded is why it fails. A program's output that
    shows the module loaded (a pasted `/proc/driver/nvidia/version`, which the module creates when it
    loads, or `lsmod` listing nvidia) rules "the module is not loaded" out of a symptom's causes
    (knowledge/states_rule_out.csv), and a "the nvidia module is not loaded" told only in the reporter's
    words yields to it. Without the PCI bus the check itself is still not run: a line of another module
    failing to load (modprobe refusing nvidia-uvm) is not judged by it.

    Without the module list: a pasted lspci -k listing (or -nnk, -vk) prints "Kernel modules:" for the
    GPU and no "Kernel driver in use:" line, so no driver is bound to it. The nvidia module binds every
    GPU it supports when it loads: it is not loaded, or it refused the GPU (its NVRM lines in the kernel
    log say why). When the modules lspci names as able to drive the GPU include no nvidia module, none
    is installed for the running kernel. Plain lspci prints neither line and says nothing of this.

    The configuration that keeps it out: a modprobe.d file (`blacklist nvidia`, `install nvidia
    /bin/false`, `alias nvidia off`, modprobe.d(5)) or the kernel command line (`module_blacklist=`,
    `modprobe.blacklist=`, the kernel's parameters) that blacklists the nvidia module is named as the
    cause, with the file. The fix is to take those lines out, rebuild the initramfs, which packs
    modprobe.d (update-initramfs, dracut or mkinitcpio, as GH502 does it), and reboot. A graphics
    switcher that writes the file (supergfxd, system76-power: knowledge/modprobe_writers.csv) writes
    it again: it is stopped or switched first. A file read with the module state unknown (a pasted
    modprobe.d file alone) is a warning: the module stays out at boot, nobody saw it missing. One that
    blacklists only nvidia-drm, nvidia-modeset or nvidia-uvm is no cause here (a compute-only setup:
    nvidia itself loads), and a blacklist while the module is shown loaded is none either.

    A package tool's log (apt's history.log, dpkg.log, dnf's, yum's, zypper's or pacman's) that shows the
    driver's own packages removed, with no driver package installed after them, is named as the cause, with
    the command that removed them (apt's autoremove, dnf's remove), and the fix installs the removed
    package again. Beside nvidia-smi failing to reach the driver it is critical; from the log alone a
    warning (the module loaded before stays until the next boot, and a driver may have come back by another
    route, a .run install, that the log does not show).

    Exceptions:
    A GPU passed through to a VM (bound to vfio-pci) is not meant to have the driver on the host.
    """
    if snapshot.pci_devices is None:
        yield from _not_loaded_without_pci(snapshot)
        return
    if not snapshot.nvidia_pci_gpus:
        yield Skip("no NVIDIA GPU on the PCI bus")
        return
    loaded = module_loaded(snapshot)
    if loaded is None:
        unbound = _no_driver_bound(snapshot)
        blacklists = nvidia_blacklists(snapshot)
        if unbound:
            yield _unbound_draft(snapshot, unbound, blacklists)
        elif blacklists:
            yield _blacklisted_draft(snapshot, blacklists, _driver_failures(snapshot))
        else:
            yield Skip(snapshot.unavailable.get("kernel_modules", "loaded modules unknown"))
        return
    if loaded:
        return
    if all(d.kernel_driver in ("vfio-pci", "pci-stub") for d in snapshot.nvidia_pci_gpus):
        return
    blacklists = nvidia_blacklists(snapshot)
    removals = driver_removals(snapshot) if not blacklists else []
    yield Draft(
        Severity.CRITICAL, "The NVIDIA kernel module is not loaded, so no GPU is usable" + _because(blacklists)
        + (f": the driver packages were removed{_when_by(removals)}" if removals else ""),
        evidence=(
            # a driver version only words gave: the file was not looked at
            Evidence(PROC_VERSION, (snapshot.unavailable.get("driver", "not present" if snapshot.driver is None
                                                             else "not in the evidence given"),)),
            Evidence(snapshot.sources.get("kernel_modules", "/proc/modules"), ("no 'nvidia' module loaded",)),
            Evidence("/sys/bus/pci/devices", tuple(f"{d.address} bound to: {d.kernel_driver or 'no driver'}"
                                                   for d in snapshot.nvidia_pci_gpus)),
            *_blacklist_evidence(blacklists),
            *((removal_evidence(snapshot, removals),) if removals else ()),
        ),
        fixes=blacklist_fixes(blacklists) or ((*_reinstall_fix(removals), REBOOT) if removals else ())
        or table_fixes("GH201"), labels=_decided(blacklists) or ({"decided": DRIVER_REMOVED} if removals else {}),
        explains=("GH102", "GH203", "GH205", "GH207"),
    )


def _no_driver_bound(snapshot: Snapshot) -> list[PciDevice]:
    """The NVIDIA GPUs when the bus shows that no driver is bound to any of them (sysfs, or a pasted ``lspci -k``
    that prints "Kernel modules:" and no "Kernel driver in use:" for them); empty when one is bound or it is not
    shown. A GPU held for passthrough (vfio-pci) is meant to be without the nvidia driver: it does not count."""
    from gpuhealth.checks.inventory import binding_known  # here: only a module list that is unknown comes here

    gpus = [d for d in snapshot.nvidia_pci_gpus if d.kernel_driver not in ("vfio-pci", "pci-stub")]
    if not gpus or not binding_known(snapshot) or any(d.kernel_driver for d in gpus):
        return []
    return gpus


def _unbound_draft(snapshot: Snapshot, gpus: list[PciDevice], blacklists: list[Blacklist]) -> Draft:
    """GH201 from the bus alone: the GPUs are there and no driver took them. The nvidia module binds every GPU
    it supports when it loads, so it is not loaded, or it refused them (its NVRM lines in the kernel log say why).
    When ``lspci -k`` names the modules able to drive the GPU and none is NVIDIA's, none is installed for the
    running kernel."""
    lines = []
    for d in gpus[:8]:
        modules = d.kernel_modules
        able = f"; modules able to drive it: {', '.join(modules)}" if modules else ""
        lines.append(f"{d.address} {d.name or 'NVIDIA GPU'}: no 'Kernel driver in use'{able}")
    missing = [d for d in gpus if d.kernel_modules is not None
               and not any(m.startswith("nvidia") and m != "nvidiafb" for m in d.kernel_modules)]
    if missing and len(missing) == len(gpus):
        lines.append("no nvidia module is installed for the running kernel (lspci -k lists none able to drive it)")
    if blacklists:
        message = "No driver is bound to the NVIDIA GPU: the nvidia kernel module is not loaded" + _because(blacklists)
    else:
        message = ("No driver is bound to the NVIDIA GPU: the nvidia kernel module is not loaded (or it refused the "
                   "GPU), so no GPU is usable")
    return Draft(
        Severity.CRITICAL, message,
        evidence=(Evidence(snapshot.sources.get("pci_devices", "/sys/bus/pci/devices"), tuple(lines)),
                  *_blacklist_evidence(blacklists)),
        fixes=blacklist_fixes(blacklists) or table_fixes("GH201"), labels=_decided(blacklists),
        explains=("GH102", "GH203", "GH205", "GH207"),
    )


# Symptoms (knowledge/symptoms.csv) whose lines say the driver was expected to answer and did not.
DRIVER_EXPECTED_SYMPTOMS = frozenset({"driver-unreachable"})


def _driver_failures(snapshot: Snapshot) -> list[MessageLine]:
    """nvidia-smi or NVML failing to reach the driver: a line of the catalogue, or the tool's own failure."""
    failures = [m for m in snapshot.messages or () if m.symptom in DRIVER_EXPECTED_SYMPTOMS]
    run = snapshot.smi_run
    if run is not None and not run.ok and run.error != "not installed" and run.text.strip() and not run.timed_out:
        failures.append(MessageLine(run.text.strip().splitlines()[0], " ".join(run.argv) or "nvidia-smi"))
    return failures


def _not_loaded_without_pci(snapshot: Snapshot) -> Iterator[Draft | Skip]:
    """GH201 from pasted evidence without lspci: the nvidia module is not in the module list, and nvidia-smi or
    NVML failed to reach the driver (a line of the catalogue, or the tool's own failure). With the module list
    unknown, a configuration that blacklists the module is the cause of such a failure, and a warning alone."""
    loaded = module_loaded(snapshot)
    failures = _driver_failures(snapshot)
    blacklists = nvidia_blacklists(snapshot) if loaded is not True else []  # shown loaded: no blacklist is a cause
    if blacklists and (loaded is None or not failures):
        yield _blacklisted_draft(snapshot, blacklists, failures)
        return
    removals = driver_removals(snapshot) if not blacklists and loaded is not True else []
    if removals and (loaded is None or not failures):
        yield _removed_draft(snapshot, removals, failures)
        return
    if loaded is not False:
        yield Skip(snapshot.unavailable.get("pci_devices", "the PCI bus is not known"))
        return
    if removals:
        yield _removed_draft(snapshot, removals, failures)
        return
    if not failures:
        yield Skip("the nvidia module is not loaded, but nothing in the evidence given shows an NVIDIA GPU or "
                   "a driver that should be loaded")
        return
    filters = snapshot.kernel_module_filters
    listing = (f"lsmod | grep {' / '.join(filters)}" if filters and not snapshot.reported_fact("kernel_modules")
               else snapshot.sources.get("kernel_modules", "lsmod"))
    yield Draft(
        Severity.CRITICAL, "The NVIDIA kernel module is not loaded, so nvidia-smi cannot reach the driver"
        + _because(blacklists),
        evidence=(Evidence(listing, (f"loaded: {', '.join(snapshot.kernel_modules or ()) or 'no nvidia module'}",)),
                  *(Evidence(m.source, (m.line,)) for m in failures[:2]), *_blacklist_evidence(blacklists)),
        fixes=blacklist_fixes(blacklists) or table_fixes("GH201"), labels=_decided(blacklists),
        explains=("GH102", "GH203", "GH205", "GH207"),
    )


# --------------------------------------------------------------------------- the configuration that keeps it out

# The NVIDIA driver's modules. Only ``nvidia`` binds the GPU: a configuration that keeps out nvidia-drm and
# nvidia-modeset alone is a compute-only setup (system76-power's compute mode writes exactly that), CUDA works there.
NVIDIA_MODULES = ("nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm")
MODPROBE_FOLDERS = "/etc/modprobe.d /usr/lib/modprobe.d /lib/modprobe.d /run/modprobe.d"
# A path a fix may name: a .conf file in a modprobe.d folder (what live collection reads, or a pasted listing names)
_CONF_PATH = lazy_re(r"/(?:etc|lib|usr/lib|usr/local/lib|run)/modprobe\.d/[\w.@+-]{1,200}\.conf")
# The lines that keep an NVIDIA module from loading, as modprobe.d(5) writes them (parsers/system.py reads the same):
# "blacklist M", "alias M off", "install M /bin/false" (or true, exit N). Deleted by the fix, the file kept as .bak
# (modprobe reads only files ending in .conf).
_S = "[[:space:]]"
_M = "nvidia([-_](drm|modeset|uvm))?"
_DISABLING = (f"^{_S}*(blacklist{_S}+{_M}|alias{_S}+{_M}{_S}+off|install{_S}+{_M}{_S}+"
              f"((/usr)?(/s?bin/)?(false|true){_S}*;?|exit({_S}+[0-9]+)?)){_S}*$")
# The two commands, written from constants only: the one value from the evidence (a file's path) enters through its
# slot (gpuhealth.commands: checked as an absolute path, then quoted)
_DELETE_DISABLING = "sudo sed -i.bak -E '\\," + _DISABLING + ",d' {conf:path}"
_FIND_DISABLING = "grep -rsnE '" + _DISABLING + "' " + MODPROBE_FOLDERS


@record
class Blacklist:
    """Where the nvidia module is kept from loading: a modprobe.d file or the kernel command line."""

    where: str  # the file's path (or how the paste was named), or "/proc/cmdline"
    lines: tuple[str, ...]  # what it says, for the evidence
    path: str | None = None  # a file a fix may edit
    tool: dict[str, str] | None = None  # the row of knowledge/modprobe_writers.csv whose tool writes the file
    cmdline: bool = False


def nvidia_blacklists(snapshot: Snapshot) -> list[Blacklist]:
    """The modprobe.d files and kernel parameters that blacklist the nvidia module itself, as live collection and a
    pasted modprobe.d listing or /proc/cmdline fill them (``install.modprobe_files``, ``host_env.kernel_cmdline``).
    None while a program's output shows the driver at work (the module list, the driver's version file, nvidia-smi
    or NVML listing a GPU): the machine wins over the configuration (loaded by hand, or the file written since)."""
    if _driver_shown_working(snapshot):
        return []
    found = []
    for f in snapshot.install.modprobe_files if snapshot.install else ():
        if "nvidia" in f.blacklisted:
            modules = [m for m in NVIDIA_MODULES if m in f.blacklisted]
            path = f.path if _CONF_PATH.fullmatch(f.path) else None
            found.append(Blacklist(f.path, (f"blacklists {', '.join(modules)}",), path, _writer(f.path)))
    cmdline = snapshot.host_env.kernel_cmdline if snapshot.host_env else None
    if cmdline:
        from gpuhealth.parsers.install import kernel_cmdline_blacklist

        keys = kernel_cmdline_blacklist(cmdline)
        if "nvidia" in keys:
            found.append(Blacklist("/proc/cmdline", tuple(f"{keys[m]}={m}" for m in NVIDIA_MODULES if m in keys),
                                   cmdline=True))
    return found


def _driver_shown_working(snapshot: Snapshot) -> bool:
    if module_loaded(snapshot):
        return True
    smi = snapshot.smi is not None and bool(snapshot.smi.gpus) and snapshot.reported_fact("smi") is None
    nvml = snapshot.nvml is not None and snapshot.nvml.ok and bool(snapshot.nvml.gpus) \
        and snapshot.reported_fact("nvml") is None
    return smi or nvml


def _writer(path: str) -> dict[str, str] | None:
    """The graphics switcher that writes a modprobe.d file of this name (knowledge/modprobe_writers.csv)."""
    from gpuhealth.knowledge import table_rows

    name = path.split(" ", 1)[0].rsplit("/", 1)[-1]
    return next((row for row in table_rows("modprobe_writers.csv") if row["file"] == name), None)


def _removed_draft(snapshot: Snapshot, removals: list[PackageChange], failures: list[MessageLine]) -> Draft:
    """The package log shows the driver's packages removed and none installed again: that is why the module does not
    load (critical beside nvidia-smi failing to reach the driver; a warning from the log alone: the loaded module
    stays until the next boot, and another route, a .run install, may have put a driver back)."""
    return Draft(
        Severity.CRITICAL if failures else Severity.WARNING,
        f"The NVIDIA driver packages were removed{_when_by(removals)} and none installed again: "
        + ("the nvidia module is gone, so nvidia-smi cannot reach the driver" if failures
           else "the host has no NVIDIA driver from its package manager once the loaded module is gone (the next "
                "boot)"),
        evidence=(removal_evidence(snapshot, removals), *(Evidence(m.source, (m.line,)) for m in failures[:2])),
        fixes=(*_reinstall_fix(removals), REBOOT), labels={"decided": DRIVER_REMOVED},
        explains=("GH102", "GH203", "GH205", "GH207", "GH208"),
    )


DRIVER_REMOVED = "driver-removed"  # knowledge/causes.csv
_INSTALL_COMMANDS = {"apt": ("sudo apt-get install {package:package}", "debian"),
                     "dpkg": ("sudo apt-get install {package:package}", "debian"),
                     "dnf": ("sudo dnf install {package:package}", "rhel"),
                     "yum": ("sudo yum install {package:package}", "rhel"),
                     "zypper": ("sudo zypper install {package:package}", "any"),
                     "pacman": ("sudo pacman -S {package:package}", "any")}


def _reinstall_fix(removals: list[PackageChange]) -> tuple[Fix, ...]:
    """Install again the driver package the log removed (its metapackage when it names one)."""
    main = next((c for c in removals if c.name.startswith(("nvidia-driver", "cuda-drivers"))), removals[0])
    template, family = _INSTALL_COMMANDS.get(main.tool, _INSTALL_COMMANDS["apt"])
    return (slotted(template, family, note="the driver package the log shows removed", package=main.name),)


def _because(blacklists: list[Blacklist]) -> str:
    if not blacklists:
        return ""
    named = ", ".join(b.where for b in blacklists[:2])
    tools = [b.tool["tool"] for b in blacklists if b.tool]
    wrote = f" ({tools[0]} wrote it and writes it again)" if tools else ""
    return f": the configuration blacklists it ({named}){wrote}"


def _decided(blacklists: list[Blacklist]) -> dict[str, str]:
    """The cause the configuration decides (causes.csv): the differential of "module not loaded" is closed."""
    return {"decided": "driver-blacklisted"} if blacklists else {}


def _blacklist_evidence(blacklists: list[Blacklist]) -> tuple[Evidence, ...]:
    return tuple(Evidence(b.where, b.lines + ((f"written by {b.tool['tool']}",) if b.tool else ()))
                 for b in blacklists[:3])


def _blacklisted_draft(snapshot: Snapshot, blacklists: list[Blacklist], failures: list[MessageLine]) -> Draft:
    """GH201 where the module list is unknown but the configuration keeps nvidia out. With nvidia-smi or NVML failing
    to reach the driver, that failure is the module missing and the configuration why (critical); alone, the module
    stays out at boot but nobody saw it missing (a warning)."""
    if failures:
        severity = Severity.CRITICAL
        message = "The NVIDIA kernel module is kept from loading, so nvidia-smi cannot reach the driver"
    else:
        severity = Severity.WARNING
        message = "The NVIDIA kernel module is kept from loading at boot, so no GPU will be usable"
    listed = (Evidence(snapshot.sources.get("kernel_modules", "lsmod"), ("no 'nvidia' module loaded",)),) \
        if snapshot.module_listed("nvidia") is False else ()
    return Draft(
        severity, message + _because(blacklists),
        evidence=(*_blacklist_evidence(blacklists), *listed, *(Evidence(m.source, (m.line,)) for m in failures[:2])),
        fixes=blacklist_fixes(blacklists), labels=_decided(blacklists),
        explains=("GH102", "GH203", "GH205", "GH207"),
    )


def blacklist_fixes(blacklists: list[Blacklist]) -> tuple[Fix, ...]:
    """Stop the tool that writes the file, take the lines out (or find the file that holds them), rebuild the
    initramfs (it packs modprobe.d), reboot."""
    if not blacklists:
        return ()
    from gpuhealth import commands

    fixes: list[Fix] = []
    for b in blacklists:
        if b.tool:
            fixes.append(Fix(b.tool["stop"], "any", note=f"{b.tool['tool']} writes {b.where} again: "
                             f"{b.tool['note']}"))
    for b in blacklists:
        if b.cmdline:
            step = (f"take {' '.join(b.lines)} out of the kernel command line (GRUB_CMDLINE_LINUX in "
                    "/etc/default/grub, then regenerate the GRUB configuration)")
            fixes.append(Fix(step, "any", kind="step"))
        elif b.path:
            fixes.append(commands.fix(_DELETE_DISABLING, "any", conf=b.path,
                                      note="delete the lines that keep the NVIDIA modules out (the file is kept as "
                                           ".bak, which modprobe does not read)"))
    if not any(b.path or b.cmdline for b in blacklists):
        fixes.append(Fix(_FIND_DISABLING, "any",
                         note="the files that keep the NVIDIA modules out: delete those lines (or comment them out "
                              "with #)"))
    # the initramfs packs modprobe.d: rebuilt as GH502 rebuilds it (knowledge/fixes.csv), then the reboot (a kernel
    # command line alone needs only the reboot)
    rebuild = table_fixes("GH502")
    if not all(b.cmdline for b in blacklists):
        by_hand = not any(b.path or b.cmdline for b in blacklists)  # the search finds the lines; a person deletes them
        fixes += [replace(f, note=_AFTER_BY_HAND) if by_hand else f for f in rebuild if not f.disruptive]
        fixes.append(Fix("on Arch Linux (mkinitcpio) rebuild the initramfs with: sudo mkinitcpio -P", "any"))
    fixes += [f for f in rebuild if f.disruptive]
    return tuple(fixes)


# a rebuild before the person deleted the lines packs them again, and the reboot after it completes nothing: a choice
# (fixscript writes it as a comment, and the reboot with it)
_AFTER_BY_HAND = "only if you deleted the lines the search above prints: the initramfs packs modprobe.d"


@check("GH202", "driver-library-mismatch", "Kernel module and user-space library versions differ",
       reads=("kernel_log", "messages"))
def driver_library_mismatch(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The version of the loaded kernel module (`/proc/driver/nvidia/version`) differs from the version
    of the user-space driver libraries (NVML, nvidia-smi; without them, the installed library packages
    of `dpkg -l` / `rpm -qa` when they agree on one version), or a tool or the kernel log says so
    ("Driver/library version mismatch", "NVRM: API mismatch"). A package tool's log (apt's history.log,
    dpkg.log, dnf's, yum's, zypper's or pacman's) that shows the driver packages upgraded from one driver
    version to another gives the library version, and its lines say when and by what (an automatic
    update: unattended-upgrades, dnf-automatic).

    Why it matters:
    Every CUDA program and nvidia-smi fail until the two agree. It almost always follows a driver
    package upgrade (often unattended-upgrades) while the old module stays loaded.

    How to fix:
    Reboot, which loads the new module. Without a reboot, stop everything using the GPU and reload
    the modules. To stop it happening again, hold the driver packages so that upgrades happen only
    in a maintenance window.

    Exceptions:
    None: the versions must match exactly. A driver upgrade in a package log with nothing that says which
    module is loaded now (no /proc/driver/nvidia/version, nvidia-smi or NVML) is a warning: the host
    may have rebooted since. A kernel log that shows the new version's module loading ("NVRM: loading
    NVIDIA UNIX ... Kernel Module <version>") says it did: nothing is reported. Where a program's output shows the
    loaded module (/proc/driver/nvidia/version, else the driver version nvidia-smi or NVML report) still at the
    version the last upgrade replaced, the new libraries (libcuda among them) are on disk under the old module:
    critical beside CUDA's error 803 (a program's "system has unsupported display driver / cuda driver
    combination"), else a warning, since that output may predate the upgrade and a reboot since.
    """
    evidence: list[Evidence] = []
    kernel = snapshot.driver.version if snapshot.driver else None
    user, user_source = user_space_version(snapshot)
    for text, _ in _tool_messages(snapshot, first_line_only=False):
        match = LIBRARY_VERSION.search(text)
        user = user or (match[1] if match else None)
    if kernel and user and kernel != user:
        evidence.append(Evidence(PROC_VERSION, (f"kernel module {kernel}",)))
        evidence.append(Evidence(user_source, (f"user-space library {user}",)))
    for text, source in _tool_messages(snapshot):
        if "version mismatch" in text.lower():
            evidence.append(Evidence(source, (text,)))
    # a pasted "Driver/library version mismatch" (no smi run, no parsed log) is this check's to judge, so that the
    # finding carries the reboot and reload fixes and not only the catalogue's sentence
    known = {line for e in evidence for line in e.lines}
    pasted = [m for m in _pasted_mismatch_lines(snapshot) if m.line not in known]
    for message in pasted:
        match = LIBRARY_VERSION.search(message.line)
        user = user or (match[1] if match else None)
    evidence.extend(Evidence(m.source, (m.line,)) for m in pasted[:3])
    if snapshot.kernel_log is not None:
        events = [e for e in snapshot.kernel_log.events if e.kind == "api_mismatch"]
        if events:
            evidence.append(Evidence(snapshot.kernel_log.source, tuple(e.line for e in events[:3])))
        # NVRM's "the client has the version X, but this kernel module has the version Y" (its versions sit on
        # the message's continuation lines, which the parser joined into the event's detail)
        found = next((m for e in events if (m := _API_VERSIONS.match(e.detail or ""))), None)
        if found:
            user, kernel = user or found["client"], kernel or found["module"]
    upgrades = driver_upgrades(snapshot)
    if not evidence:
        rebooted = bool(upgrades) and upgrades[-1].new in _loaded_versions(snapshot)  # the new module was loaded
        if upgrades and not kernel and _no_library_answer(snapshot) and not rebooted:
            yield _upgrade_not_loaded(snapshot, upgrades)
            return
        if upgrades and not rebooted and _replaced_module_runs(snapshot, upgrades[-1]):
            yield _replaced_module_loaded(snapshot, upgrades)
            return
        if not kernel and not user and snapshot.kernel_log is None:
            yield Skip("neither the kernel module version nor the library version is known")
        return
    if upgrades:  # the package tool's own line saying when the libraries changed under the loaded module
        evidence.append(Evidence(_log_source(snapshot), _upgrade_lines(upgrades)))
    yield Draft(
        Severity.CRITICAL,
        f"Driver/library version mismatch: kernel module {kernel or 'not shown'}, user space {user or 'not shown'}"
        if kernel or user
        else "Driver/library version mismatch: the loaded kernel module and the user-space libraries differ",
        evidence=tuple(evidence),
        fixes=table_fixes("GH202"),
        explains=("GH203", "GH204"),
    )


_API_VERSIONS = lazy_re(r"client (?P<client>\S{1,32}), module (?P<module>\S{1,32})$")
# an automatic updater's command line in a package log: unattended-upgrades (apt history.log's "Commandline:
# /usr/bin/unattended-upgrade"), dnf-automatic, yum-cron, PackageKit
_AUTOMATIC = lazy_re(r"unattended-upgrade|dnf-automatic|dnf5? automatic|yum-cron|packagekit", re.I)


@record
class DriverChange:
    """A driver package a package log shows moved from one driver version to another."""

    change: PackageChange
    old: str  # driver versions ("535.171.04")
    new: str


def _package_changes(snapshot: Snapshot) -> tuple[PackageChange, ...]:
    return snapshot.host_env.package_changes if snapshot.host_env is not None else ()


def _is_driver(change: PackageChange) -> bool:
    from gpuhealth.parsers.package_log import category

    return category(change.name, change.tool) == "driver"


def driver_upgrades(snapshot: Snapshot) -> list[DriverChange]:
    """A package log's driver packages upgraded (or downgraded) from one driver version to another, or installed at
    another version than the one removed before them or in the same transaction (a branch switch: apt removes
    nvidia-utils-535 and installs nvidia-utils-550)."""
    changes = [c for c in _package_changes(snapshot) if _is_driver(c)]
    removed_in: dict[tuple[str, str | None, str | None], str] = {}  # (tool, date, command) -> a version removed
    for c in changes:
        if c.action == "remove" and (version := driver_version_of(c.version)):
            removed_in.setdefault((c.tool, c.date, c.command), version)
    found: list[DriverChange] = []
    removed: str | None = None  # the driver version the last removal took away
    for c in changes:
        new = driver_version_of(c.version)
        if c.action == "remove":
            removed = new or removed
            continue
        if c.action in ("upgrade", "downgrade"):
            old = driver_version_of(c.old_version)
        elif c.action == "install":
            old = removed_in.get((c.tool, c.date, c.command)) or removed
        else:
            continue
        if new and old and new != old:
            found.append(DriverChange(c, old, new))
    return found


# the packages whose removal takes the driver away (its kernel module or its libraries): Ubuntu's and Debian's,
# NVIDIA's CUDA repository's, RPM Fusion's and negativo17's, openSUSE's, Arch's
_DRIVER_CORE = lazy_re(r"^(?:nvidia-driver(?:-\d+|-latest-dkms|-cuda|-libs)?(?:-open|-server)?|nvidia-dkms(?:-\d+)?\S*|"
                       r"nvidia-kernel-(?:source|open|common)?-?\d*\S*|nvidia-utils(?:-\d+)?\S*|"
                       r"libnvidia-compute-\d+\S*|kmod-nvidia\S*|akmod-nvidia\S*|cuda-drivers\S*|nvidia(?:-open)?|"
                       r"nvidia-(?:compute|driver|gl)-G0\d\S*|xorg-x11-drv-nvidia\S*)$")


def driver_removals(snapshot: Snapshot) -> list[PackageChange]:
    """A package log's removals of the driver's own packages, where the log installs no driver package after them nor
    in their own transaction (apt switching branches installs 550's packages and removes 535's in one entry): the
    host is left with no driver from this package tool."""
    removals: list[PackageChange] = []
    installed_in: set[tuple[str, str | None, str | None]] = set()  # transactions that installed a driver package
    for c in _package_changes(snapshot):
        if not _is_driver(c) or not _DRIVER_CORE.match(c.name):
            continue
        if c.action == "remove":
            removals.append(c)
        else:
            installed_in.add((c.tool, c.date, c.command))
            removals = []  # installed again after the removals (or before them, in their transaction: below)
    return [c for c in removals if (c.tool, c.date, c.command) not in installed_in]


def _when_by(changes: list[PackageChange]) -> str:
    """" on <date> by <command>" (an automatic update named as such) of the last change, as far as the log says."""
    last = changes[-1]
    when = f" on {last.date}" if last.date else ""
    if any(c.command and _AUTOMATIC.search(c.command) for c in changes):
        return f"{when} by an automatic update" + (f" ({last.command})" if last.command else "")
    return f"{when} by `{last.command}`" if last.command else when


def removal_evidence(snapshot: Snapshot, removals: list[PackageChange]) -> Evidence:
    return Evidence(_log_source(snapshot), tuple(dict.fromkeys(c.line for c in removals))[:3])


_BANNER_VERSION = lazy_re(r"Kernel Module\s{1,8}(\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\b")


def _loaded_versions(snapshot: Snapshot) -> set[str]:
    """The driver versions the kernel log shows loaded ("NVRM: loading NVIDIA UNIX ... Kernel Module 535.183.01"): a
    load of the upgrade's version means the host rebooted (or reloaded the modules) since."""
    banners = snapshot.kernel_log.module_banners if snapshot.kernel_log is not None else ()
    return {m[1] for line in banners[-50:] if (m := _BANNER_VERSION.search(line))}


def _no_library_answer(snapshot: Snapshot) -> bool:
    """Neither nvidia-smi nor NVML showed a driver version (either would say which driver runs now)."""
    return ((snapshot.smi is None or not snapshot.smi.driver_version)
            and (snapshot.nvml is None or not snapshot.nvml.driver_version))


def _log_source(snapshot: Snapshot) -> str:
    return (snapshot.host_env.package_log_source if snapshot.host_env else None) or "package log"


def _upgrade_lines(upgrades: list[DriverChange]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(u.change.line for u in upgrades))[:3]


def _upgrade_not_loaded(snapshot: Snapshot, upgrades: list[DriverChange]) -> Draft:
    """A driver upgrade a package log shows, with nothing saying which module runs now: until a reboot (or a
    reload of the modules) the old module stays loaded under the new libraries. A warning: the host may have been
    rebooted since."""
    old, new = upgrades[-1].old, upgrades[-1].new
    return Draft(
        Severity.WARNING,
        f"The NVIDIA driver packages were upgraded from {old} to {new}{_when_by([u.change for u in upgrades])}: "
        "until the host reboots, the "
        f"loaded module stays {old} and CUDA programs and nvidia-smi fail with 'Driver/library version mismatch'",
        evidence=(Evidence(_log_source(snapshot), _upgrade_lines(upgrades)),
                  Evidence(PROC_VERSION, ("not in the evidence given: whether the host rebooted since is unknown",))),
        fixes=table_fixes("GH202"),
        explains=("GH203", "GH204"),
    )


# CUDA's error 803 (cudaErrorSystemDriverMismatch) a program printed: the libcuda it loaded is another driver version
# than the kernel module (knowledge/signatures.csv)
_CUDA_803 = "cuda-system-driver-mismatch"


def _replaced_module_runs(snapshot: Snapshot, last: DriverChange) -> bool:
    """Whether the module a program's output shows loaded (/proc/driver/nvidia/version, else the driver version
    nvidia-smi or NVML reported) is the version the last upgrade replaced: the packages put the new libraries (libcuda
    among them) on disk under the old module."""
    loaded = snapshot.driver.version if snapshot.driver and snapshot.driver.version else None
    if loaded is None and snapshot.nvml is not None and snapshot.nvml.ok:
        loaded = snapshot.nvml.driver_version
    if loaded is None and snapshot.smi is not None:
        loaded = snapshot.smi.driver_version
    return loaded is not None and loaded == last.old and loaded != last.new


def _replaced_module_loaded(snapshot: Snapshot, upgrades: list[DriverChange]) -> Draft:
    """A driver upgrade a package log shows, and the module a program's output shows loaded is the version it
    replaced: until a reboot (or a reload of the modules) the new libcuda runs under the old module, and CUDA fails
    with error 803 (nvidia-smi, from the same output, may predate the upgrade). Critical beside a program's 803, which
    shows the failure; else a warning (that output may predate the upgrade and a reboot since)."""
    old, new = upgrades[-1].old, upgrades[-1].new
    failed = [m for m in snapshot.messages or () if m.signature == _CUDA_803 and not m.reported]
    return Draft(
        Severity.CRITICAL if failed else Severity.WARNING,
        f"The NVIDIA driver packages were upgraded from {old} to {new}{_when_by([u.change for u in upgrades])}, but "
        f"the loaded module is still {old}: the new libcuda runs under the old module until the host reboots"
        + (" (CUDA error 803)" if failed else ""),
        evidence=(Evidence(_log_source(snapshot), _upgrade_lines(upgrades)),
                  Evidence(PROC_VERSION if snapshot.driver and snapshot.driver.version
                           else snapshot.sources.get("smi", "nvidia-smi"), (f"loaded module {old}",)),
                  *(Evidence(m.source, (m.line[:300],)) for m in failed[:1])),
        fixes=table_fixes("GH202"),
        explains=("GH203", "GH204", "GH901") if failed else ("GH203", "GH204"),
    )


def _pasted_mismatch_lines(snapshot: Snapshot) -> list[MessageLine]:
    """Catalogue lines that confirm the mismatch, outside a parsed kernel log (whose events are read above)."""
    return [m for m in snapshot.messages or () if m.signature and "kernel_log" not in m.read_into
            and signature(m.signature).cause == "driver-library-mismatch"]


def _tool_messages(snapshot: Snapshot, first_line_only: bool = True) -> Iterator[tuple[str, str]]:
    """What nvidia-smi and NVML said when they failed (by default only the first line)."""
    run = snapshot.smi_run
    if run is not None and not run.ok and (run.stdout or run.stderr):
        text = run.stdout.strip() or run.stderr.strip()
        yield (text.splitlines()[0] if first_line_only else text), " ".join(run.argv)
    if snapshot.nvml is not None and not snapshot.nvml.ok and snapshot.nvml.error:
        yield snapshot.nvml.error, "NVML (nvidia-ml-py)"


@check("GH203", "driver-query-failed", "nvidia-smi or NVML failed")
def driver_query_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `nvidia-smi` exited with an error, or NVML could not initialise. The message and exit code are
    decoded: driver not loaded, could not communicate with the driver, library not found, GPU fallen
    off the bus, insufficient permissions, unknown error inside a container, no devices found.

    Why it matters:
    What nvidia-smi cannot do, CUDA programs cannot do either. The decoded reason points at the root
    cause, which is usually reported as its own finding above this one.

    How to fix:
    Follow the fix for the decoded reason. A hung nvidia-smi is reported separately (GH204).

    Exceptions:
    On a machine with no NVIDIA GPU, a missing nvidia-smi or NVML library is expected and not reported.
    """
    if gpu_expected(snapshot) is False:
        yield Skip("no NVIDIA GPU on the PCI bus")
        return
    run = snapshot.smi_run
    failures: list[tuple[str, str, int | None, int | None]] = []
    if run is not None and not run.ok and not run.timed_out and run.error != "not captured in this bundle":
        failures.append((run.text.strip() or run.error or "", " ".join(run.argv), run.exit_code, None))
    nvml = snapshot.nvml
    if nvml is not None and not nvml.ok and "did not answer" not in (nvml.error or ""):
        failures.append((nvml.error or "", "NVML (nvidia-ml-py)", None, nvml.error_code))
    if run is None and nvml is None:
        yield Skip("neither nvidia-smi nor NVML was run")
        return
    merged: dict[str, tuple[list[str], list[Evidence], tuple[Fix, ...]]] = {}
    from gpuhealth.knowledge.tool_errors import decode  # (only when a tool failed)

    for text, source, exit_code, nvml_code in failures:
        if source.startswith("nvidia-smi") and run is not None and run.error == "not installed":
            continue  # GH208
        decoded = decode(text, exit_code, nvml_code)
        meaning = decoded.meaning if decoded else "unrecognised failure"
        # a number only where the tool gave one: an NVML message read from another tool's output has none
        code = f"exit {exit_code}" if exit_code is not None else f"NVML error {nvml_code}" if nvml_code is not None \
            else ""
        # the fixes for the decoded error: GH203's rows keyed by its catalogue row (knowledge/fixes.csv, GH203:<kind>)
        fixes = table_fixes("GH203", kind=decoded.kind) if decoded else ()
        tools, evidence, _ = merged.setdefault(meaning, ([], [], fixes))
        tools.append(f"{source.split(' ')[0]} ({code})" if code else source.split(" ")[0])
        evidence.append(Evidence(source, tuple(line for line in text.splitlines() if line.strip())[:4]))
    for meaning, (tools, evidence, fixes) in merged.items():
        yield Draft(Severity.CRITICAL, f"{' and '.join(tools)} failed: {meaning}", evidence=tuple(evidence),
                    fixes=fixes)


@check("GH204", "driver-query-hung", "nvidia-smi or NVML did not answer in time")
def driver_query_hung(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `nvidia-smi` was killed after the timeout (10 s by default), or NVML did not answer in time.

    Why it matters:
    A healthy driver answers in well under a second with persistence mode on, a few seconds without.
    A hang means the driver is stuck waiting for a GPU: a GPU fallen off the bus, a GSP firmware
    timeout (Xid 119), or a GPU stuck in reset. Jobs on that host will hang too.

    How to fix:
    Read the kernel log for Xid 79, 119 or "fallen off the bus" (listed above this finding when
    present). If nothing is there, enable persistence mode (`sudo systemctl enable --now
    nvidia-persistenced`) and re-run; if it still hangs, drain the host and reboot.

    When even SIGKILL cannot end nvidia-smi (process state D, inside a driver call), gpuhealth abandons
    it and says "nvidia-smi is stuck in the driver": only a reboot (or a GPU reset) frees it.

    Exceptions:
    The first nvidia-smi after boot on a host without persistence mode can take several seconds on
    many-GPU machines; raise `--timeout` if that is what you see.
    """
    hung = []
    run = snapshot.smi_run
    stuck = run is not None and STUCK_MARKER in (run.error or "")
    if run is not None and run.timed_out:
        hung.append(Evidence(" ".join(run.argv), (run.error if stuck else
                                                  f"killed after {run.duration_s:g} s without an answer",)))
    if snapshot.nvml is not None and "did not answer" in (snapshot.nvml.error or ""):
        hung.append(Evidence("NVML (nvidia-ml-py)", (snapshot.nvml.error or "",)))
    if run is None and snapshot.nvml is None:
        yield Skip("neither nvidia-smi nor NVML was run")
        return
    if hung:
        yield Draft(Severity.CRITICAL, "nvidia-smi is stuck in the driver: it could not be killed and was abandoned"
                    if stuck else "nvidia-smi/NVML hung: the driver did not answer in time",
                    evidence=tuple(hung),
                    fixes=table_fixes("GH204"))


# The first driver branch that shipped each module: nvidia-modeset.ko arrived with 358.x (NVIDIA's 358.09
# release notes, forums.developer.nvidia.com), nvidia-drm.ko with 364.x (NVIDIA, "NVIDIA 364.12 release:
# Vulkan, GLVND, DRM KMS, and EGLStreams", https://forums.developer.nvidia.com/t/41927). An older driver
# (a 352.63 bug report) never has them, so they are not "missing" there.
MODULE_FIRST_BRANCH = {"nvidia_modeset": 358, "nvidia_drm": 364}


def _module_exists(module: str, snapshot: Snapshot) -> bool:
    first = MODULE_FIRST_BRANCH.get(module)
    version = snapshot.driver.version if snapshot.driver else None
    if first is None or not version or not version.split(".")[0].isdigit():
        return True
    return int(version.split(".")[0]) >= first


@check("GH205", "kernel-modules-missing", "NVIDIA kernel modules not loaded", requires=("kernel_modules",))
def kernel_modules_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    With `nvidia` loaded, checks for `nvidia_uvm` (CUDA's unified memory; CUDA needs it),
    `nvidia_modeset` and `nvidia_drm` (display and DRM; not needed for compute). Drivers older than
    358.x had no `nvidia_modeset` and older than 364.x no `nvidia_drm`; they are not asked for there.

    Why it matters:
    Without `nvidia_uvm` CUDA initialisation fails with "CUDA error: unknown error" or "no
    CUDA-capable device". It is normally loaded on first CUDA use by the setuid helper
    `nvidia-modprobe`; when that helper is missing or blocked (containers, hardened hosts), it never is.
    After a suspend or hibernation through the driver's default kernel callbacks, `nvidia_uvm` may stay loaded but
    unusable (cuInit returns 999 until it is reloaded): NVIDIA's README ("Configuring Power Management Support")
    supports CUDA's unified memory across a suspend only through its systemd suspend services. A person saying CUDA
    failed after a suspend names that cause (uvm-broken-by-suspend); lsmod then still lists the module.

    How to fix:
    `sudo modprobe nvidia_uvm` now, and make it permanent with
    `echo nvidia_uvm | sudo tee /etc/modules-load.d/nvidia-uvm.conf`. The display modules (nvidia_drm,
    nvidia_modeset) are loaded by modprobe when a display or DRM client needs them. After a suspend, once no
    process holds it: `grep -q '^nvidia_uvm ' /proc/modules && sudo modprobe -r nvidia_uvm; sudo modprobe nvidia_uvm`
    (unloads it where it is loaded, then loads it), and for good
    `NVreg_PreserveVideoMemoryAllocations=1` with `nvidia-suspend.service`, `nvidia-resume.service` and
    `nvidia-hibernate.service` enabled (driver 430 or newer).

    Exceptions:
    Right after boot, before any CUDA program ran, `nvidia_uvm` may legitimately not be loaded yet:
    this is why it is reported as info, not as a fault.
    """
    modules = snapshot.kernel_modules or ()
    if "nvidia" not in modules:
        yield Skip("the nvidia module is not loaded (see GH201)")
        return
    # a module a filtered listing (`lsmod | grep nvidia_uvm`) would not have shown is unknown, not missing
    missing = [m for m in ("nvidia_uvm", "nvidia_modeset", "nvidia_drm")
               if snapshot.module_listed(m) is False and _module_exists(m, snapshot)]
    if not missing:
        return
    loaded = tuple(sorted(m for m in modules if m.startswith("nvidia")))
    yield Draft(
        Severity.INFO, f"Kernel module(s) not loaded: {', '.join(missing)}",
        evidence=(Evidence(snapshot.sources.get("kernel_modules", "/proc/modules"),
                           (f"loaded: {', '.join(loaded)}",)),),
        fixes=tuple(slotted("sudo modprobe {module}", module=m) for m in missing),
    )


@check("GH206", "nouveau-loaded", "The nouveau driver is loaded", reads=("kernel_log", "messages", "install"))
def nouveau_loaded(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The open-source `nouveau` module is loaded, or bound to an NVIDIA GPU (`lspci -k`: "Kernel driver
    in use: nouveau").

    Why it matters:
    nouveau and the NVIDIA driver cannot share a GPU: the NVIDIA installer refuses to run and the
    nvidia module cannot bind a GPU nouveau holds ("The NVIDIA probe routine was not called").

    How to fix:
    Blacklist nouveau with both `blacklist nouveau` and `options nouveau modeset=0`, back up and
    rebuild the initramfs (which otherwise still loads nouveau at boot), then reboot.

    When a modprobe.d file already blacklists nouveau and nouveau is loaded all the same, the initramfs was
    most likely built before the blacklist (or the host was not rebooted since): the finding says so, and
    the fix is to rebuild the initramfs and reboot, without writing the blacklist again.

    Exceptions:
    Desktops that deliberately use nouveau for display and no CUDA. Pasted lines that say nouveau held
    the GPU while the module list (or `lspci -k`) shows it not loaded are a warning: when they were
    written is unknown.
    """
    # without the module list or lspci -k, the kernel log's own words (NVRM: probe routine not called,
    # GPU already bound to NovaCore, nouveau taking the GPU) are the only view of who owns the GPU
    # A module list filtered by a pattern that would not show nouveau (`lsmod | grep nvidia`) says nothing
    # about it: the check then judges as if no list was given.
    listed = snapshot.module_listed("nouveau")
    lines = _nouveau_lines(snapshot)
    log_lines = lines if listed is None and snapshot.pci_devices is None else []
    if listed is None and snapshot.pci_devices is None and not log_lines:
        yield Skip(snapshot.unavailable.get("kernel_modules", "neither the loaded modules nor lspci -k is known")
                   if snapshot.kernel_modules is None else
                   f"the module list given was filtered ({' / '.join(snapshot.kernel_module_filters)}) and would "
                   "not show nouveau; lspci -k is not known")
        return
    # lspci -k's "Kernel driver in use: nouveau" shows nouveau loaded even without the module list
    bound = [d for d in snapshot.nvidia_pci_gpus if d.kernel_driver == "nouveau"]
    if not listed and not bound and not log_lines:
        # The module list or lspci -k shows nouveau not holding the GPU now. A kernel log of the same capture
        # agrees with them (nouveau unloaded since); a pasted line has no time and still says it held the GPU.
        pasted = [m for m in lines if not m.read_into]
        if pasted:
            yield _nouveau_earlier(snapshot, pasted, "lspci -k" if listed is None else "the module list")
        return
    severity = Severity.INFO if gpu_expected(snapshot) is False else Severity.CRITICAL
    files = [f for f in (snapshot.install.modprobe_files if snapshot.install else ()) if "nouveau" in f.blacklisted]
    complete = any("modeset=0" in (f.nouveau_options or "").split()
                   for f in (snapshot.install.modprobe_files if snapshot.install else ()))
    message = "nouveau is loaded: the NVIDIA driver cannot use the GPU"
    if files:
        # The initramfs loads modules before /etc is mounted and keeps the modprobe.d it was built with: a blacklist
        # written after it was built (or before the reboot) does not apply (initramfs-tools and dracut pack modprobe.d)
        message = ("nouveau is loaded although modprobe.d blacklists it: the initramfs was most likely not rebuilt "
                   "since the blacklist was written (or the host not rebooted); the NVIDIA driver cannot use the GPU")
    fixes = table_fixes("GH206")
    if files and complete:  # the blacklist is written: only the initramfs and the reboot are left
        fixes = tuple(f for f in fixes if "/etc/modprobe.d/" not in f.command)
    yield Draft(
        severity, message,
        evidence=(*((Evidence(snapshot.sources.get("kernel_modules", "/proc/modules"), ("nouveau",)),)
                    if "nouveau" in (snapshot.kernel_modules or ()) else ()),
                  *((Evidence(snapshot.sources.get("pci_devices", "/sys/bus/pci/devices"),
                              tuple(f"{d.address} bound to nouveau" for d in bound)),)
                    if bound else ()),
                  *(Evidence(f.path, ("blacklist nouveau",) + ((f"options nouveau {f.nouveau_options}",)
                                                              if f.nouveau_options else ())) for f in files[:2]),
                  *line_evidence(log_lines)),
        fixes=fixes,
        # nouveau holding the GPU is why the nvidia module probed nothing
        explains=("GH201", "GH102", "GH305"),
    )


def _nouveau_earlier(snapshot: Snapshot, pasted: list[MessageLine], shown_by: str) -> Draft:
    """Pasted lines say nouveau held the GPU, the current state says it does not: when they were written is
    unknown, so a warning (never a pass: the lines are errors) that asks to confirm nouveau stays off."""
    return Draft(
        Severity.INFO if gpu_expected(snapshot) is False else Severity.WARNING,
        f"the lines given say nouveau held the GPU, but {shown_by} shows it not loaded now: if they are older, "
        "make sure nouveau stays blacklisted (and out of the initramfs) and install or load the NVIDIA driver",
        evidence=line_evidence(pasted),
        fixes=(Fix("lsmod | grep -E '^(nouveau|nova_core|nvidia) '", "any"),
               Fix("grep -rs 'blacklist nouveau' /etc/modprobe.d /usr/lib/modprobe.d", "any")),
    )


def _nouveau_lines(snapshot: Snapshot) -> list[MessageLine]:
    """Lines of the evidence that the catalogue files under "nouveau (or nova_core) owns the GPU"."""
    return [m for m in snapshot.messages or ()
            if m.signature and signature(m.signature).cause == "nouveau-bound"]





# the drivers that hold a GPU for a virtual machine (lspci -k "Kernel driver in use"; NVRM "already bound to <driver>")
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")
# symptoms whose lines show the host failing to use its GPU
_HOST_WANTS_GPU = frozenset({"gpu-missing", "gpu-taken-by-other-driver", "module-refuses-to-load",
                             "driver-unreachable"})


@check("GH628", "gpu-bound-to-vfio", "An NVIDIA GPU is bound to vfio-pci or pci-stub",
       reads=("pci_devices", "messages", "kernel_modules"))
def gpu_bound_to_vfio(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    An NVIDIA GPU is held by `vfio-pci` or `pci-stub`: `lspci -k` shows "Kernel driver in use: vfio-pci" for it,
    or the nvidia module says "NVRM: GPU 0000:01:00.0 is already bound to vfio-pci." when it loads (followed by
    "The NVIDIA probe routine was not called for 1 device(s)" and, with no other GPU, nvidia-smi's "No devices
    were found").

    Why it matters:
    A GPU bound to vfio-pci is reserved for a virtual machine (PCI passthrough): the nvidia module cannot take
    it, so the host has no such GPU. When the host is meant to use it, this is the whole fault; nouveau is
    not involved, and blacklisting it changes nothing.

    How to fix:
    Read `lspci -nnk -d 10de:` (the driver in use per device), `cat /proc/cmdline` and
    `grep -rsE 'vfio|pci-stub' /etc/modprobe.d /etc/modules-load.d` to find what binds the GPU to vfio-pci.
    Only if this host, not a VM, should use it: remove its ids from `vfio-pci.ids=` and from
    `options vfio-pci ids=`, rebuild the initramfs and reboot.

    Exceptions:
    A host that passes the GPU through to a VM on purpose: with nothing else in the evidence (no nvidia module
    loaded, no NVIDIA tool failing) the binding is reported as info. It is critical when the evidence shows the
    host failing to use a GPU: a pasted failure line, or a live host whose nvidia module is loaded while
    nvidia-smi or NVML fails.
    """
    lines = [m for m in snapshot.messages or () if m.signature and signature(m.signature).cause == "gpu-bound-to-vfio"]
    if snapshot.pci_devices is None and not lines:
        yield Skip(snapshot.unavailable.get("pci_devices", "neither lspci -k nor a kernel log line names the driver "
                                                           "that holds the GPU"))
        return
    bound = [d for d in snapshot.nvidia_pci_gpus if d.kernel_driver in PASSTHROUGH_DRIVERS]
    if not bound and not lines:
        return
    held = ", ".join(f"{d.address} ({d.kernel_driver})" for d in bound[:4]) or "the GPU"
    # the evidence shows the host failing to use a GPU (no GPU probed, nvidia-smi finds none): the binding is why
    # (a pasted line, or live: the nvidia module is loaded and nvidia-smi or NVML failed, "No devices were found")
    failing = any(m.symptom in _HOST_WANTS_GPU and not (m.signature and signature(m.signature).cause ==
                                                          "gpu-bound-to-vfio") for m in snapshot.messages or ()) or (
        bool(bound) and snapshot.module_listed("nvidia") is True and any(True for _ in _tool_messages(snapshot)))
    # the nvidia module looked for the GPU (it printed the line, or it is loaded), or an NVIDIA tool ran
    wanted = bool(lines) or snapshot.module_listed("nvidia") is True or snapshot.smi is not None
    severity = Severity.CRITICAL if failing else Severity.WARNING if wanted else Severity.INFO
    message = (f"{held} is bound to a passthrough driver (vfio-pci / pci-stub holds it for a virtual machine): "
               "the NVIDIA driver cannot use it")
    if not (wanted or failing):
        message += "; fine if it is passed through on purpose"
    yield Draft(
        severity, message,
        evidence=(*((Evidence(snapshot.sources.get("pci_devices", "/sys/bus/pci/devices"),
                              tuple(f"{d.address} bound to {d.kernel_driver}" for d in bound)),) if bound else ()),
                  *line_evidence(lines)),
        fixes=table_fixes("GH628"),
        # the passthrough driver holding the GPU is why the nvidia module probed nothing and nvidia-smi lists nothing
        explains=("GH102", "GH201", "GH203", "GH305"),
    )


@check("GH207", "device-nodes-missing", "/dev/nvidia* device nodes missing", requires=("device_nodes",))
def device_nodes_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    With the driver loaded, checks for `/dev/nvidiactl`, one `/dev/nvidiaN` per GPU, and
    `/dev/nvidia-uvm` when `nvidia_uvm` is loaded.

    Why it matters:
    CUDA and nvidia-smi open these files. They are created by `nvidia-modprobe` or by udev rules; on
    hosts where `nvidia-modprobe` ran before the driver was installed, or in containers started
    without the devices, they are missing and every GPU program fails although the driver is fine.

    How to fix:
    `sudo nvidia-modprobe -c 0 -u` creates the control, first GPU and UVM nodes (repeat `-c N` per
    GPU); running nvidia-smi once as root also creates them. Enable nvidia-persistenced so they
    exist from boot. In a container, start it with the GPUs (`--gpus all` or the device plugin).

    A pasted listing of /dev/nvidia* without the module list: the driver's own nodes (`nvidiactl`,
    `nvidiaN`) show the nvidia module made them; no `/dev/nvidia-uvm` beside them means the
    nvidia_uvm module is not loaded or nothing created its node, and no CUDA program can start until
    nvidia-modprobe (the fix below, which does both) has run: a warning. A listing of named files
    (the files named one by one, no glob) proves no other node missing.

    Exceptions:
    A GPU that another driver holds (vfio-pci, nouveau: GH628, GH206) gets no node, so none is expected for it.
    Right after boot, before any CUDA program ran, `/dev/nvidia-uvm` may not exist yet where
    `nvidia-modprobe` creates it on first use (bvaisvil/zenith#79): this is why its absence alone is a
    warning, not critical.
    """
    if gpu_expected(snapshot) is False:
        # no NVIDIA GPU on the bus: no nodes is what such a host has, whether or not its module list was read
        yield Skip("no NVIDIA GPU on the PCI bus")
        return
    loaded = module_loaded(snapshot)
    if loaded is None and snapshot.device_nodes is not None and not snapshot.device_nodes:
        # `ls /dev/nvidia*` found none and nothing says whether the module is loaded: no program can reach a GPU
        # either way (a module not loaded, or nodes never created), so this is not left at "skipped"
        yield Draft(
            Severity.CRITICAL, "No /dev/nvidia* device files: no program can reach the GPU (the nvidia module is "
            "not loaded, or nothing created the nodes)",
            evidence=(Evidence(snapshot.sources.get("device_nodes", "/dev"), ("present: no nvidia* nodes",)),),
            fixes=table_fixes("GH207"),
        )
        return
    if loaded is None and _uvm_node_lacking(snapshot):
        yield _uvm_node_draft(snapshot)
        return
    if loaded is not True:
        yield Skip("the nvidia module is not loaded (see GH201)" if loaded is False
                   else "whether the nvidia module is loaded is not in the evidence given")
        return
    nodes = set(snapshot.device_nodes or ())
    gpu_nodes = sorted(n for n in nodes if n.removeprefix("nvidia").isdigit())
    # the module makes a node per GPU it took: without the driver's own list, a GPU another driver holds (vfio-pci,
    # nouveau) has none to expect (GH628, GH206 report that binding)
    expected_gpus = snapshot.gpu_count if snapshot.gpus else sum(
        1 for d in snapshot.nvidia_pci_gpus if d.kernel_driver in (None, "", "nvidia"))
    problems = []
    if "nvidiactl" not in nodes:
        problems.append("/dev/nvidiactl is missing")
    if len(gpu_nodes) < expected_gpus:
        problems.append(f"{len(gpu_nodes)} /dev/nvidiaN node(s) for {expected_gpus} GPU(s)")
    uvm_missing = "nvidia_uvm" in (snapshot.kernel_modules or ()) and "nvidia-uvm" not in nodes
    if uvm_missing:
        problems.append("/dev/nvidia-uvm is missing although nvidia_uvm is loaded")
    if not problems:
        return
    severity = Severity.CRITICAL if len(problems) > 1 or not uvm_missing else Severity.WARNING
    yield Draft(
        severity, "; ".join(problems),
        evidence=(Evidence("/dev", (f"present: {', '.join(sorted(nodes)) or 'no nvidia* nodes'}",)),),
        fixes=table_fixes("GH207", without=("lsmod | grep nvidia",)),  # the module is loaded
    )


def _uvm_node_lacking(snapshot: Snapshot) -> bool:
    """A listing of /dev (the module list unknown) holds the driver's own nodes, so the nvidia module made them, and no
    /dev/nvidia-uvm: the unified-memory module CUDA needs is not loaded, or nothing created its node."""
    nodes = set(snapshot.device_nodes or ())
    driver_made = "nvidiactl" in nodes or any(n.removeprefix("nvidia").isdigit() for n in nodes)
    return driver_made and "nvidia-uvm" not in nodes and DEVICE_NODES_NAMED not in snapshot.unavailable


def _uvm_node_draft(snapshot: Snapshot) -> Draft:
    nodes = sorted(snapshot.device_nodes or ())
    return Draft(
        Severity.WARNING, "/dev/nvidia-uvm is missing: no CUDA program can start (the nvidia_uvm module is not loaded, "
        "or nothing created its node); the driver's own nodes are there",
        evidence=(Evidence(snapshot.sources.get("device_nodes", "/dev"), (f"present: {', '.join(nodes)}",
                                                                         "absent: nvidia-uvm")),),
        fixes=table_fixes("GH207", without=("lsmod | grep nvidia",)),
        # the listing shows the cause of a CUDA start that fails beside it (checks/diagnosis.py, CONFIRMS_LABEL)
        labels={"confirms": "uvm-missing"},
    )


@check("GH208", "nvidia-smi-missing", "nvidia-smi is not installed", requires=("smi_run",))
def nvidia_smi_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    An NVIDIA GPU is present (or the driver is loaded) but the `nvidia-smi` command is not on PATH.

    Why it matters:
    nvidia-smi ships with every driver package; without it the operators' first diagnostic tool is
    missing, and its absence often means an incomplete or half-removed driver installation (a
    container image without the driver utilities, a run-file install removed by a package manager).

    How to fix:
    Install the driver's utilities package: `nvidia-utils-<branch>` on Ubuntu, `nvidia-driver-cuda`
    on RHEL/Rocky with NVIDIA's repository. In a container, start it with the NVIDIA container
    toolkit so the host's utilities are mounted (`--gpus all`).

    Exceptions:
    Minimal containers that use NVML directly.
    """
    run = snapshot.smi_run
    if run is None or run.error != "not installed":
        return
    if gpu_expected(snapshot) is False or (gpu_expected(snapshot) is None and not module_loaded(snapshot)):
        yield Skip("no NVIDIA GPU on the PCI bus")
        return
    utils = _utils_package(snapshot)
    fixes = tuple(utils if utils is not None and "nvidia-utils-<branch>" in f.command else f
                  for f in table_fixes("GH208"))
    yield Draft(
        Severity.WARNING, "nvidia-smi is not installed although an NVIDIA GPU is present",
        evidence=(Evidence("PATH", ("nvidia-smi: command not found",)),),
        fixes=fixes,
    )


def _utils_package(snapshot: Snapshot) -> Fix | None:
    """Ubuntu's utilities package for the loaded driver, when the evidence names both the driver's version and its
    installed packages: ``nvidia-utils-<branch>``, or ``nvidia-utils-<branch>-server`` beside the server build
    (Ubuntu builds the -server packages from their own source, nvidia-graphics-drivers-<branch>-server
    <https://packages.ubuntu.com/noble/nvidia-utils-565-server>; the other package does not match the driver). None
    when either is unknown: the row's step, with its placeholder, stays."""
    version = snapshot.driver.version if snapshot.driver else None
    packages = snapshot.host_env.packages if snapshot.host_env else ()
    branch = version.split(".")[0] if version else ""
    ours = [p.name for p in packages if p.manager == "dpkg" and f"-{branch}" in p.name] if branch.isdigit() else []
    if not ours:
        return None
    server = any(f"-{branch}-server" in name for name in ours)
    template = ("sudo apt-get install nvidia-utils-{branch}-server" if server
                else "sudo apt-get install nvidia-utils-{branch}")
    return slotted(template, "debian", note="the utilities of the installed driver package "
                                            f"({', '.join(ours[:2])})", branch=branch)
