"""GH5xx: is this host ready for the NVIDIA driver to be installed, rebuilt, or to survive the next boot?

The rules follow the install runbook of field report 001 and the installer messages in the tools' own messages:
nouveau blacklisted and out of the initramfs, kernel headers and a matching gcc for DKMS builds,
Secure Boot module signing, and an nvidia module for every kernel the host may boot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from gpuhealth.checks.driver import REBOOT, driver_package_versions, module_loaded
from gpuhealth.checks.registry import Draft, Expectations, Skip, check, fixes_for, line_evidence, table_fixes
from gpuhealth.commands import fix as slotted
from gpuhealth.knowledge.signatures import Signature, signature
from gpuhealth.lazyre import guarded_re, has, has_folded, lazy_re
from gpuhealth.model import (
    Evidence,
    Finding,
    Fix,
    InstalledKernel,
    InstallState,
    MessageLine,
    NvidiaPackage,
    ReportedFact,
    Severity,
    Snapshot,
)

BLACKLIST_FILE = "/etc/modprobe.d/blacklist-nouveau.conf"
# Refusals only: "module verification failed ... tainting kernel" means the unsigned module DID load
# (the tools' own messages: informational), so it is not evidence of a Secure Boot problem.
SIGNATURE_REJECTED = ("Key was rejected by service", "Required key not available",
                      "unsigned module loading is restricted")
UNTRUSTED_SIGNER = "PKCS#7 signature not signed with a trusted key"
MODULE_LOADED_UNSIGNED = "module verification failed"
# Lines of the catalogue (knowledge/signatures.csv) that say the module did not load, or that the driver cannot be
# reached because of it: with Secure Boot enabled, a refused signature is the first suspect.
LOAD_FAILED_SYMPTOMS = frozenset({"module-refuses-to-load", "driver-unreachable"})
LOAD_FAILED_SIGNATURES = frozenset({"installer-unable-to-load-module", "installer-kernel-module-load-error",
                                    "installer-signed-module-failed"})


# What a driver that cannot load causes: the module not loaded, queries failing, modules and nodes missing.
DRIVER_DOWN = ("GH201", "GH203", "GH205", "GH207")

# --------------------------------------------------------------------------- shared judgements


def _target(snapshot: Snapshot) -> Skip | None:
    """Why the install checks have nothing to judge here (no NVIDIA GPU, GPUs passed through), or None."""
    gpus = snapshot.nvidia_pci_gpus
    if not gpus:
        return Skip("no NVIDIA GPU on the PCI bus")
    if all(d.kernel_driver in ("vfio-pci", "pci-stub") for d in gpus):
        return Skip("every NVIDIA GPU is bound to vfio-pci/pci-stub (passed through to a VM)")
    return None


def _install(snapshot: Snapshot) -> InstallState:
    assert snapshot.install is not None  # guaranteed by requires=("install", ...)
    return snapshot.install


def _dkms_nvidia(install: InstallState) -> bool:
    return any(e.module == "nvidia" for e in install.dkms)


def _build_expected(snapshot: Snapshot) -> bool | None:
    """Will a kernel module be compiled on this host: now (driver not loaded), or by DKMS at the next
    kernel update? None when unknown."""
    install = _install(snapshot)
    loaded = module_loaded(snapshot)
    if loaded is False or _dkms_nvidia(install):
        return True
    return None if loaded is None else False


def _nouveau_loaded(snapshot: Snapshot) -> bool:
    return "nouveau" in (snapshot.kernel_modules or ()) or any(
        d.kernel_driver == "nouveau" for d in snapshot.nvidia_pci_gpus)


def _unavailable(snapshot: Snapshot, *names: str) -> str:
    return "; ".join(snapshot.unavailable[n] for n in names if n in snapshot.unavailable) or "not collected"


def _version_key(release: str) -> tuple[int, ...]:
    """``5.15.0-105-generic`` -> (5, 15, 0, 105); ``5.14.0-362.8.1.el9_3.x86_64`` -> (5, 14, 0, 362, 8, 1)."""
    numeric = re.split(r"[A-Za-z]", release, maxsplit=1)[0]
    return tuple(int(n) for n in re.findall(r"\d+", numeric))


def _major(version: str | None) -> int | None:
    match = re.match(r"\d+", version or "")
    return int(match[0]) if match else None


# --------------------------------------------------------------------------- GH501


@check("GH501", "nouveau-not-blacklisted", "nouveau is not blacklisted before the NVIDIA driver install",
       requires=("install", "pci_devices"))
def nouveau_not_blacklisted(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    An NVIDIA GPU is present, the nvidia module is not loaded (or nouveau is), and no modprobe.d file
    (`/etc/modprobe.d`, `/usr/lib/modprobe.d`, `/lib/modprobe.d`) or kernel command line both
    blacklists nouveau (`blacklist nouveau`) and turns its mode setting off (`options nouveau
    modeset=0`).

    Why it matters:
    nouveau takes the GPU at boot; the NVIDIA installer then stops with "The Nouveau kernel driver is
    currently in use by your system" and the nvidia module cannot bind the GPU. `blacklist` alone only
    stops loading by alias: without `modeset=0`, a nouveau pulled in another way still drives the
    display.

    How to fix:
    Write both lines to `/etc/modprobe.d/blacklist-nouveau.conf`, back up and rebuild the initramfs
    (`update-initramfs -u` on Debian/Ubuntu, `dracut --force` on RHEL/Rocky), reboot, and check that
    nouveau is no longer in `lsmod`.

    Exceptions:
    Hosts with the NVIDIA driver loaded and nouveau not loaded (nothing to do); GPUs passed through to
    VMs; desktops that deliberately use nouveau. Distribution driver packages usually install their own
    blacklist file, which counts.
    """
    skip = _target(snapshot)
    if skip:
        yield skip
        return
    install = _install(snapshot)
    loaded = module_loaded(snapshot)
    nouveau = _nouveau_loaded(snapshot)
    if loaded and not nouveau:
        return
    if loaded is None and not nouveau:
        yield Skip(_unavailable(snapshot, "kernel_modules", "driver"))
        return
    if not install.modprobe_dirs:
        yield Skip(_unavailable(snapshot, "install_modprobe"))
        return
    blacklisting = [f for f in install.modprobe_files if "nouveau" in f.blacklisted]
    modeset = [f for f in install.modprobe_files if "modeset=0" in (f.nouveau_options or "").split()]
    by_cmdline = "nouveau" in install.kernel_cmdline_blacklisted
    modeset_cmdline = "modeset=0" in (install.kernel_cmdline_nouveau_options or "").split()
    if (blacklisting or by_cmdline) and (modeset or modeset_cmdline):
        return
    missing = [text for text, present in (("blacklist nouveau", blacklisting or by_cmdline),
                                          ("options nouveau modeset=0", modeset or modeset_cmdline)) if not present]
    state = "nouveau is loaded" if nouveau else "the nvidia module is not loaded"
    lines = [f"{f.path}: blacklists {', '.join(f.blacklisted) or 'nothing'}"
             + (f"; options nouveau {f.nouveau_options}" if f.nouveau_options else "")
             for f in install.modprobe_files if "nouveau" in f.blacklisted or f.nouveau_options]
    yield Draft(
        Severity.WARNING, f"nouveau is not fully disabled ({state}): no modprobe.d file has "
                          f"{' and '.join(repr(m) for m in missing)}",
        evidence=(Evidence(", ".join(install.modprobe_dirs),
                           tuple(lines) or ("no modprobe.d file mentions nouveau",)),
                  Evidence(snapshot.sources.get("kernel_modules", "/proc/modules"),
                           ("nouveau loaded" if nouveau else "nouveau not loaded",
                            "nvidia loaded" if loaded else "nvidia not loaded"))),
        fixes=table_fixes("GH501"),
    )


# --------------------------------------------------------------------------- GH502


@check("GH502", "initramfs-stale", "The initramfs still loads nouveau although it is blacklisted",
       requires=("install", "pci_devices"))
def initramfs_stale(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A modprobe.d file blacklists nouveau, but the running kernel's initramfs
    (`/boot/initrd.img-<release>` or `/boot/initramfs-<release>.img`) packs `nouveau.ko` without that
    blacklist file (from `lsinitramfs`/`lsinitrd`), or, when the initramfs cannot be listed, it is
    older than the blacklist file. Judged while nouveau is loaded or the nvidia module is not.

    Why it matters:
    The initramfs loads its modules before the root file system, and with it `/etc/modprobe.d`, is
    mounted: a blacklist written after the initramfs was built does not apply there, so nouveau keeps
    the GPU at every boot. The NVIDIA installer warns about exactly this ("blacklist files exist but
    nouveau is still loaded").

    How to fix:
    Back up the initramfs, rebuild it (`update-initramfs -u` on Debian/Ubuntu, `dracut --force` on
    RHEL/Rocky; the new one packs the blacklist), and reboot.

    Exceptions:
    An initramfs that packs `nouveau.ko` together with the blacklist file is fine (initramfs-tools and
    dracut copy modprobe.d in). With the nvidia driver loaded and nouveau not loaded nothing is judged.
    """
    skip = _target(snapshot)
    if skip:
        yield skip
        return
    install = _install(snapshot)
    blacklists = [f for f in install.modprobe_files if "nouveau" in f.blacklisted]
    if not blacklists:
        return  # GH501
    nouveau = _nouveau_loaded(snapshot)
    if module_loaded(snapshot) and not nouveau:
        return
    if install.initramfs_path is None:
        yield Skip(_unavailable(snapshot, "install_initramfs"))
        return
    names = {f.path.rsplit("/", 1)[-1] for f in blacklists}
    evidence = [Evidence(f.path, ("blacklist nouveau",)) for f in blacklists]
    if install.initramfs_has_nouveau is not None:
        if not install.initramfs_has_nouveau or names & set(install.initramfs_modprobe_files):
            return
        packed = ", ".join(install.initramfs_modprobe_files) or "none"
        evidence.append(Evidence(install.initramfs_path, (
            "nouveau.ko is packed", f"modprobe.d files packed: {packed}")))
        message = f"{install.initramfs_path} packs nouveau.ko but not the blacklist: rebuild it"
    else:
        newest = max((f.mtime for f in blacklists if f.mtime is not None), default=None)
        if newest is None or install.initramfs_mtime is None:
            yield Skip(_unavailable(snapshot, "install_initramfs_listing") + "; file times unknown")
            return
        if install.initramfs_mtime >= newest:
            return
        evidence.append(Evidence(install.initramfs_path, (
            f"built {newest - install.initramfs_mtime:.0f} s before the newest nouveau blacklist file",
            _unavailable(snapshot, "install_initramfs_listing"))))
        message = f"{install.initramfs_path} is older than the nouveau blacklist: rebuild it"
    if nouveau:
        message += " (nouveau is still loaded)"
    yield Draft(
        Severity.WARNING, message, evidence=tuple(evidence),
        fixes=table_fixes("GH502"),
    )


# --------------------------------------------------------------------------- GH503


@check("GH503", "kernel-headers-missing", "No kernel headers for the running kernel",
       requires=("install",))
def kernel_headers_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `/lib/modules/<release>/build` does not resolve to a directory (and there is no
    `/usr/src/kernels/<release>`), while a kernel module has to be built: the nvidia module is not
    loaded, or DKMS manages it and will rebuild it for the next kernel.

    A pasted package listing (`dpkg -l`, `apt list --installed`, `rpm -qa`, `yum`/`dnf list installed`)
    is judged too, without the PCI listing: it shows headers (`linux-headers-<release>`,
    `kernel-devel-<version>`) for some kernel but none for the running one (`uname -r` in the paste,
    else the only kernel image the listing holds).

    Why it matters:
    The driver's kernel module is compiled against the running kernel's headers: NVIDIA's installation
    guide asks for "the kernel headers and development packages for the currently running kernel"
    before the install, and DKMS builds against `/lib/modules/$(uname -r)/build`. Without them the
    `.run` installer stops with "Unable to find the kernel source tree for the currently running
    kernel" and DKMS silently builds nothing. `kernel-headers` on RHEL is not enough: the build needs
    `kernel-devel` of exactly `uname -r` (a plain `dnf install kernel-devel` fetches the newest one,
    which is for another kernel when the host has not been updated and rebooted).

    How to fix:
    Install the headers of exactly the running kernel: `sudo apt-get install linux-headers-$(uname -r)`
    (Debian/Ubuntu) or `sudo dnf install kernel-devel-$(uname -r)` (RHEL/Rocky; `yum` on CentOS 7); if the
    repository no longer has that version, boot the newest kernel first and install its headers.

    Exceptions:
    Hosts whose driver is loaded from precompiled modules (no DKMS) do not need headers: not reported.
    Critical when the driver is not loaded, a warning when only a future DKMS rebuild needs them (or,
    from a package listing alone, when whether the module is loaded is unknown). A listing with several
    kernels and no `uname -r` is skipped (the running kernel is unknown), as is one that shows no
    headers package at all (it may have been filtered). A package tool's log (apt's history.log, dpkg.log, dnf's, yum's,
    zypper's or pacman's) is read the same way, for the kernel it installed last (the next boot's) where `uname -r` is
    not given: a kernel an update installed without the headers of its release, while the log shows headers installed
    for another. The reporter's words ("no kernel headers installed",
    "linux-headers-$(uname -r) is missing") answer the headers' absence where no program's output looked at them;
    the finding then quotes them and stays a warning. So do words saying the headers lag behind the kernel an update
    installed ("kernel-devel is still for the old kernel", "the headers do not match the running kernel"), and a package
    tool saying it has no headers package for this kernel ("No package kernel-devel-<release> available.", apt's
    "Unable to locate package linux-headers-<release>"); beside nvidia-smi's failure to reach the driver, this cause
    leads and the failure folds under it.
    """
    install = _install(snapshot)
    if install.headers_present is None and install.kernel_packages_source:
        yield from _headers_per_listing(snapshot, install)
        return
    if snapshot.pci_devices is None:
        yield Skip(_unavailable(snapshot, "pci_devices"))
        return
    skip = _target(snapshot)
    if skip:
        yield skip
        return
    if _build_expected(snapshot) is not True:
        return
    if install.headers_present is None:
        yield Skip(_unavailable(snapshot, "install_headers", "install_kernel"))
        return
    if install.headers_present:
        return
    loaded = module_loaded(snapshot)
    release = install.kernel_release or "$(uname -r)"
    link = (f"-> {install.headers_target} (does not exist)" if install.headers_target
            else "missing")
    # a path looked at, or (analyze) the words that say the headers are missing: then no path was looked at
    looked = install.headers_path is None or install.headers_path.startswith("/")
    yield Draft(
        Severity.CRITICAL if loaded is False else Severity.WARNING,
        f"No kernel headers for the running kernel {release}: the nvidia module cannot be "
        + ("built" if loaded is False else "rebuilt by DKMS"),
        evidence=(Evidence(install.headers_path or f"/lib/modules/{release}/build", (link,)),
                  Evidence(f"/usr/src/kernels/{release}", ("not present",))) if looked else (
                      Evidence(install.headers_path or "", ("no kernel headers for the running kernel",)),),
        fixes=table_fixes("GH503"),
    )


_ARCH_SUFFIXES = (".x86_64", ".aarch64", ".ppc64le", ".s390x", ".i686", ".noarch")


def _without_arch(release: str) -> str:
    """``3.10.0-957.el7.x86_64`` (uname -r on RHEL) -> ``3.10.0-957.el7`` (the kernel package's version-release)."""
    for suffix in _ARCH_SUFFIXES:
        if release.endswith(suffix):
            return release[: -len(suffix)]
    return release


def _headers_per_listing(snapshot: Snapshot, install: InstallState) -> Iterator[Draft | Skip]:
    """GH503 from a pasted package listing: the running kernel has no headers package while another kernel has."""
    source = install.kernel_packages_source or "the package listing"
    if snapshot.pci_devices is not None and (skip := _target(snapshot)) is not None:
        yield skip
        return
    loaded = module_loaded(snapshot)
    if loaded and not _dkms_nvidia(install):
        return  # a loaded driver without DKMS: nothing has to be built (precompiled modules)
    if not install.headers_packages:
        yield Skip(f"{source} shows no kernel headers package for any kernel (it may have been filtered)")
        return
    running, how = install.kernel_release, "uname -r or /proc/version in the evidence"
    subject = "the running kernel"
    if running is None and install.kernel_installed_last:
        # a package log: the kernel it installed last is the one the next boot runs (and DKMS builds for)
        running, how = install.kernel_installed_last, "the kernel the package log installed last"
        subject = "the kernel installed last"
    if running is None:
        images = install.kernel_packages
        if len(images) != 1:
            yield Skip(f"{source} holds {len(images)} kernel image packages and the running kernel is unknown "
                       "(uname -r)")
            return
        running, how = images[0], "the only kernel image package listed"
    if "debug" in running:
        yield Skip(f"the running kernel {running} is a debug kernel: its headers package is not read")
        return
    if _without_arch(running) in {_without_arch(h) for h in install.headers_packages}:
        return
    headers = ", ".join(install.headers_packages[:6])
    yield Draft(
        Severity.CRITICAL if loaded is False else Severity.WARNING,
        f"No kernel headers for {subject} {running} (headers are installed for {headers}): the nvidia "
        "module cannot be built for it",
        evidence=(Evidence(source, (f"{subject.removeprefix('the ')}: {running} ({how})",
                                    f"kernel headers packages for: {headers}",
                                    f"none for {running}")),),
        fixes=table_fixes("GH503"),
    )


# --------------------------------------------------------------------------- GH504 / GH505


@check("GH504", "build-tools-missing", "gcc or make is missing for building the nvidia module",
       requires=("install", "pci_devices"))
def build_tools_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `gcc` or `make` is not installed while a kernel module has to be built: the nvidia module is not
    loaded, or DKMS manages it.

    Why it matters:
    The `.run` installer and DKMS compile the kernel module on the host; without a compiler and make
    the install fails at the build step, or a kernel update leaves the host without a driver.

    How to fix:
    Install them: `build-essential` on Debian/Ubuntu, `gcc gcc-c++ make` on RHEL/Rocky/Fedora (the open
    kernel modules compile C++ too; with `kernel-devel-$(uname -r)`, see GH503).

    Exceptions:
    Hosts whose driver is loaded from precompiled modules (no DKMS) need no compiler: not reported.
    """
    skip = _target(snapshot)
    if skip:
        yield skip
        return
    install = _install(snapshot)
    if _build_expected(snapshot) is not True:
        return
    missing = [tool for tool, present in (("gcc", install.gcc_present), ("make", install.make_present))
               if present is False]
    if not missing:
        if install.gcc_present is None and install.make_present is None:
            yield Skip(_unavailable(snapshot, "install_gcc", "install_make"))
        return
    yield Draft(
        Severity.WARNING, f"{' and '.join(missing)} not installed: the nvidia kernel module cannot be built",
        evidence=tuple(Evidence(f"{tool} --version", ("command not found",)) for tool in missing),
        fixes=table_fixes("GH504"),
    )


@check("GH505", "gcc-mismatch", "gcc differs from the compiler that built the kernel",
       requires=("install",), reads=("messages",))
def gcc_mismatch(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `gcc` (`gcc --version`) is another major.minor version than the gcc that built the running kernel
    (`/proc/version`), while a kernel module has to be built (the nvidia module is not loaded, DKMS
    manages it, or the evidence does not say). Judged the way the driver's own build judges it: NVIDIA's
    `conftest.sh` (`cc_version_check`, run before every module build) compares the major and minor
    numbers and ignores the patch level.

    Why it matters:
    A different **major** version is a warning: the kernel's build configuration (`include/config/auto.conf`
    in the headers) holds flags chosen for the kernel's compiler, and another major gcc typically fails
    the module build with unknown options (`gcc: error: unrecognized command-line option`), or builds a
    module the kernel warns about. Typical: an Ubuntu HWE kernel built with gcc-12 on a release whose
    default gcc is 11.
    A different **minor** version (same major) is information: the driver's build prints "Warning:
    Compiler version check failed" (conftest.sh) and goes on; the kernel prints "warning: the compiler
    differs from the one used to build the kernel" and goes on. NVIDIA's text warns that mixing versions
    "can result in subtle bugs"; installers before the 2.6-era check was relaxed refused instead ("does
    not exactly match the current compiler", overridable with `IGNORE_CC_MISMATCH=1`).

    How to fix:
    Install the kernel's gcc version (`gcc-<major>` on Debian/Ubuntu; on RHEL/Rocky the distribution
    gcc matches its kernels, so a mismatch means a third-party kernel or a gcc-toolset on PATH) and
    rebuild with it (DKMS's `autoinstall`, or `CC=gcc-<major>` for a `.run` install).

    Exceptions:
    Patch levels may differ. Kernels built with clang are not compared. Hosts whose driver is loaded
    from precompiled modules (no DKMS) are not judged. No GPU evidence is needed: the toolchain is
    judged from `/proc/version` and `gcc --version` alone, unless the PCI listing shows no NVIDIA GPU.
    A minor difference is a warning when the evidence also says the build refused it: an older installer's
    "does not exactly match the current compiler", or the reporter's words ("DKMS refuses to build because the
    compiler differs"); the installers' override is then `IGNORE_CC_MISMATCH=1`. Where the versions agree, the
    words do not make a mismatch: the versions win.
    """
    skip = _target(snapshot) if snapshot.pci_devices is not None else None
    if skip:
        yield skip
        return
    install = _install(snapshot)
    lines = _compiler_lines(snapshot)
    if _build_expected(snapshot) is False:
        yield from _lines_alone(lines)
        return
    if install.gcc_present is False:
        yield Skip("gcc is not installed (see GH504)")
        return
    compiler = install.kernel_compiler or ""
    if not compiler.startswith("gcc ") or install.gcc_version is None:
        if compiler.startswith("clang "):
            yield from _lines_alone(lines)
            return
        yield Skip("the gcc version or the kernel's compiler is unknown")
        return
    kernel, current = _major_minor(compiler.split()[1]), _major_minor(install.gcc_version)
    if kernel is None or current is None or kernel == current:
        yield from _lines_alone(lines)  # the versions agree: the words that say otherwise are overruled
        return
    major_differs = kernel[0] != current[0]
    # lines that say the build refused the compiler: an installer's "does not exactly match the current compiler", the
    # build's "Failed CC version check", a person's "DKMS refuses to build because the compiler differs"
    refused = [m for m in lines if signature(m.signature).severity != "info"]
    consequence = ("the nvidia module build typically fails (unknown compiler options)" if major_differs
                   else "the build refused it (the lines given say so)" if refused
                   else "the driver's build warns (major.minor differ) and goes on")
    # a minor difference within one major has no package to install (Debian/Ubuntu ship one gcc-<major>); a build that
    # refuses it takes the installers' own override (conftest.sh, the installer's cc_version_check message)
    fixes = (fixes_for(debian=["sudo apt-get install gcc-{major:number}"], rhel=["sudo dnf install gcc"],
                       anywhere=["export CC=gcc-{major:number}  # before a .run install or dkms autoinstall"],
                       major=kernel[0]) if major_differs
             else (Fix("export IGNORE_CC_MISMATCH=1  # before a .run install or dkms autoinstall", "any",
                       note=_CC_OVERRIDE),) if refused
             else ())
    yield Draft(
        max(Severity.WARNING if major_differs or refused else Severity.INFO, _worst(lines), key=lambda s: s.rank),
        f"gcc {install.gcc_version} differs from the kernel's compiler ({compiler}): {consequence}",
        evidence=(Evidence("gcc --version", (install.gcc_banner or install.gcc_version,)),
                  Evidence("/proc/version", (f"built with {compiler}",)), *line_evidence(lines)),
        fixes=fixes,
    )


# The override skips the check that refused the build: a choice with its reason, never a step run unread (NVIDIA's
# conftest.sh: mixing compiler versions "can result in subtle bugs")
_CC_OVERRIDE = ("only if you accept a module built with another gcc minor version than the kernel's: it skips the "
                "compiler check, and NVIDIA warns this can result in subtle bugs")


def _compiler_lines(snapshot: Snapshot) -> list[MessageLine]:
    """Lines the catalogue files under the compiler mismatch (the build's, the installer's), or that name it in a
    person's words (knowledge/cause_phrases.csv): GH505 judges them with the two versions."""
    return [m for m in snapshot.messages or () if m.signature and signature(m.signature).cause == "gcc-mismatch"][:6]


def _worst(lines: list[MessageLine]) -> Severity:
    return max((Severity(signature(m.signature).severity) for m in lines), default=Severity.INFO,
               key=lambda s: s.rank)


def _lines_alone(lines: list[MessageLine]) -> Iterator[Draft]:
    """Where the versions do not decide (a module that needs no build, a clang kernel) or agree, the build's own lines
    are reported as the catalogue reports them, at their row's severity with its summary; a person's words alone are
    not (the versions, or the loaded module, overrule them)."""
    machine = [m for m in lines if not m.reported]
    if not machine:
        return
    worst = max(machine, key=lambda m: Severity(signature(m.signature).severity).rank)
    severity = Severity(signature(worst.signature).severity)
    yield Draft(severity, signature(worst.signature).summary, evidence=line_evidence(machine),
                fixes=table_fixes("GH505") if severity is not Severity.INFO else ())


def _major_minor(version: str) -> tuple[int, int] | None:
    """``"5.3.1"`` -> (5, 3): what conftest.sh compares (``__GNUC__``, ``__GNUC_MINOR__``); ``"12"`` -> (12, 0)."""
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    return (int(match[1]), int(match[2] or 0)) if match else None


# --------------------------------------------------------------------------- GH506


@check("GH506", "secure-boot-unsigned-module", "Secure Boot may reject the nvidia module",
       reads=("install", "pci_devices", "kernel_log", "kernel_modules", "messages"))
def secure_boot_unsigned_module(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Secure Boot is enabled (`mokutil --sb-state`, or the SecureBoot EFI variable) and the nvidia
    module is not loaded; or the kernel log shows a rejected module signature ("Key was rejected by
    service", "Required key not available", lockdown refusing unsigned modules). "module verification
    failed ... tainting kernel" alone is not a refusal: the module loaded. `modinfo nvidia` tells
    whether the module on disk is signed at all.
    Pasted evidence counts in parts: the Secure Boot state in any tool's words (mokutil's "SecureBoot
    enabled", nvidia-installer's "This system also has UEFI Secure Boot enabled", the kernel's "Kernel is
    locked down from EFI Secure Boot mode") with a line saying the module did not load or the driver
    cannot be reached; "Operation not permitted" on loading the module under Secure Boot is the
    locked-down kernel's refusal. modprobe's "Key was rejected by service" or "Required key not available" for
    nvidia is a refusal on its own, the Secure Boot state unknown. "PKCS#7 signature not signed with a
    trusted key" (a module signed by a key the kernel does not trust) is a warning when the Secure Boot
    state is not known.
    `mokutil --test-key KEY` (DKMS's /var/lib/dkms/mok.pub, a MOK.der) says whether shim trusts the key the
    modules are signed with: "is not enrolled", "already in the enrollment request" (imported, not yet
    confirmed at boot) or blocked, with Secure Boot on and nvidia not loaded, is a refusal. Live `check`
    runs it itself under Secure Boot, for each signing certificate on disk (DKMS's /var/lib/dkms/mok.pub,
    Ubuntu's /var/lib/shim-signed/mok/MOK.der, akmods' /etc/pki/akmods/certs/public_key.der).
    The same answers come from `mokutil --import KEY` ("SKIP: KEY is already enrolled", "... is already in the
    enrollment request"; its "input password:" puts KEY in the request), `mokutil --list-new` (keys imported and
    waiting for the MOK manager, not enrolled keys; --dbx, --db, --kek, --list-delete list no MOK) and Debian's
    `update-secureboot-policy` ("E: System's DKMS key is NOT installed in MOK."). DKMS's "Binary ... not found,
    modules won't be signed" means the module it built is unsigned. update-secureboot-policy checks DKMS's key only
    once it read the SecureBoot EFI variable at 1: its "Checking status of DKMS module signing:" and the lines after
    it say Secure Boot is on; its "E: <module> is not signed with the DKMS key" for an nvidia module (the key enrolled)
    asks for the module to be rebuilt with DKMS. mokutil's "SecureBoot validation is disabled in shim" and "Platform
    is in Setup Mode" mean nothing is enforced; "Cannot determine secure boot state." and "EFI variables are not
    supported on this system" mean mokutil could not read the state, which then stays unknown. Ubuntu's
    "Generating a new Secure Boot signing key:" (update-secureboot-policy --new-key) and shim-signed's note "a new
    Machine-Owner Key (MOK) has been generated. This key now needs to be enrolled" name /var/lib/shim-signed/mok/MOK.der
    as not enrolled yet, unless mokutil says otherwise; so does DKMS's "Certificate or key are missing, generating
    ..." for the certificate it makes for the build.

    Why it matters:
    With Secure Boot the kernel loads only modules signed by a key it trusts: `modprobe nvidia` fails
    with "Key was rejected by service", nvidia-smi cannot talk to the driver, and it looks like a
    broken install. Every module must be signed (nvidia, nvidia-uvm, nvidia-modeset, nvidia-drm):
    one left unsigned disables its function (CUDA unified memory, display).

    How to fix:
    Use distribution-signed driver packages, or sign the modules with a Machine Owner Key: create the
    key with openssl, enroll it with `mokutil --import MOK.der` (set a one-time password, confirm it in
    the MOK manager at the next boot), sign every module with the kernel's `scripts/sign-file`, and
    keep the key to sign again after each rebuild (DKMS can sign automatically with it). Where mokutil
    (or update-secureboot-policy) named the key the modules are signed with and shim does not trust it yet, the
    fix is that key alone: imported with `mokutil --import`, or, waiting in the request, confirmed at the next
    boot; a new key would leave the modules' own key untrusted. Where the evidence shows which tool built the
    module, the steps enroll that tool's key: akmods' /etc/pki/akmods/certs/public_key.der (made by
    akmods' kmodgenca where none exists), Ubuntu's DKMS /var/lib/shim-signed/mok/MOK.der (made by
    update-secureboot-policy's --new-key), DKMS 3.0.4 and later elsewhere /var/lib/dkms/mok.pub (made at its
    first signed build); with DKMS on a distribution not known, each import is a choice for the reader. akmods signs
    each kmod when it builds it, so its route rebuilds the kmod after the key is made and imported (with akmods'
    rebuild option; its force option rebuilds nothing up to date). Where only the reporter's words raised the
    finding and they name the tool (akmods, DKMS, Ubuntu's ubuntu-drivers), the route is that tool's too; words
    saying akmods' key is enrolled and the kmod still refused get the causes akmods' signing leaves (built before the
    key was made, or with a key made again since, or a kernel that does not take MOKs in) and the steps that tell
    them apart before the rebuild.
    Disabling Secure Boot in the firmware also works where that is allowed. Secure Boot enabled with the module
    not loaded does not show a refusal (the module may be missing for this kernel): until a refusal is
    shown (modprobe's "Key was rejected by service", the kernel log's line, an unsigned module), the
    finding gives only the steps that decide it, never a new key, its enrolment and a reboot.

    A module signed by a key that is not among the enrolled ones (its `modinfo` signer against the names
    `mokutil --list-enrolled` shows, or those the kernel says it loaded at boot from UEFI:MokListRT, "integrity:
    Loaded X.509 cert 'NAME: ...'") is refused however many keys are enrolled: it was built before the key was made,
    or signed by another tool's key; it must be rebuilt or signed again with the enrolled key.
    Kernel lockdown refuses such a module as Secure Boot does, with or without it (`lockdown=integrity` on the
    command line, a kernel configured to lock down): "Kernel is locked down from ..." at boot, or
    /sys/kernel/security/lockdown with its level in brackets, makes modprobe's "Operation not permitted" for nvidia
    the refusal (security/lockdown/lockdown.c; kernel/module/signing.c asks it for LOCKDOWN_MODULE_SIGNATURE).

    Exceptions:
    Secure Boot with the nvidia module loaded is fine (it is signed by a trusted key). Critical when
    the module on disk is unsigned, the kernel log shows a rejection, or Secure Boot is enabled and the
    load failed with "Operation not permitted", an untrusted signer or a signing key shim does not trust
    (mokutil --test-key); a warning otherwise (an enrolled key: the module loads if signed with it). Secure Boot
    disabled: PKCS#7 lines are harmless (the module loads and taints the kernel); with nvidia loaded, or NVRM
    lines in the same log (the nvidia module ran, so its signature was accepted), they concern another module.
    The reporter's words ("Secure Boot is enabled", "cannot load because of Secure Boot", "the MOK is not
    enrolled", "the module is not signed") count where no program's output gives the state; the finding then
    quotes them and stays a warning. So does lockdown in words ("with kernel lockdown set to integrity", "the kernel
    is locked down", "lockdown=confidentiality in our AMI"; "lockdown is none" and the past "disabled lockdown and it
    works" lock nothing): beside a program's "Operation not permitted" for nvidia, which is what it explains, it is
    as grave as that line.
    """
    if snapshot.pci_devices is not None:
        skip = _target(snapshot)
        if skip:
            yield skip
            return
    install = snapshot.install or InstallState()
    loaded = module_loaded(snapshot)
    # catalogue refusals of a parsed log: about nvidia, or naming no module while nvidia is not known loaded
    log_lines = _log_lines(snapshot, SIGNATURE_REJECTED) + (_logged(snapshot, lambda sig: (
        sig.cause == "secure-boot-refused" and sig.severity == "critical")) if loaded is not True else ())
    # "PKCS#7 signature not signed with a trusted key": a module's signer is not trusted. Only an enforcing
    # kernel (Secure Boot) refuses it; elsewhere it loads and taints the kernel ("module verification failed").
    loaded_unsigned = _log_lines(snapshot, (MODULE_LOADED_UNSIGNED,)) + _logged(
        snapshot, lambda sig: sig.id == "kernel-module-verification-taint")
    # the line names no module: with nvidia loaded it concerns another one
    untrusted = () if loaded_unsigned or loaded is True or _nvidia_ran(snapshot) else _log_lines(
        snapshot, (UNTRUSTED_SIGNER,)) + _logged(
        snapshot, lambda sig: sig.id == "kernel-pkcs7-untrusted-signer")
    failures = _load_failures(snapshot) if loaded is not True else []
    # a pasted modprobe refusal the catalogue decodes as Secure Boot's ("Key was rejected by service"): the kernel
    # enforced signatures, so the state need not be known for the finding (and its signing fixes)
    refusals = [m for m in failures if m.signature and signature(m.signature).cause == "secure-boot-refused"
                and "nvidia" in m.line.lower()]
    # lockdown (lockdown= on the command line, the kernel's configuration, or Secure Boot) refuses a module without a
    # trusted signature as Secure Boot does: modprobe's "Operation not permitted"
    locked = install.lockdown in ("integrity", "confidentiality")
    if install.secure_boot is None and not locked and not log_lines and not untrusted and not refusals:
        if _logged(snapshot, lambda sig: sig.cause == "secure-boot-refused", other_modules=True):
            return  # the log's refusals were judged: another module's, or nvidia is loaded
        yield Skip(_unavailable(snapshot, "install_secure_boot") if snapshot.install is not None
                   else "the Secure Boot state (mokutil --sb-state) is not in the evidence given")
        return
    enabled = install.secure_boot == "enabled"
    not_loaded = loaded is False or bool(failures)
    unknown_state = install.secure_boot is None
    # mokutil --test-key: shim does not trust the signing key (yet): modules signed with it are refused
    key_refused = install.signing_key_state in ("not-enrolled", "pending", "blocked") and loaded is not True
    eperm = [m for m in failures if "Operation not permitted" in m.line]
    # Debian's update-secureboot-policy: DKMS's key is enrolled, this nvidia module is not signed with it
    resign = [m for m in snapshot.messages or () if m.signature == POLICY_NOT_SIGNED] if loaded is not True else []
    if not log_lines and not refusals and not (enabled and (not_loaded or untrusted or key_refused or resign)) and not (
            untrusted and unknown_state) and not (locked and eperm):
        if loaded is None and not failures and _words_only(install):
            # nothing of the machine's was read, only the reporter's sentences: no verdict of the machine's to set
            # against their words (a cause they name stays their words, not overruled by them)
            yield Skip("the Secure Boot state is known only from the reporter's words; the module's state (lsmod, "
                       "modprobe nvidia) is not in the evidence given")
        return
    evidence = []
    if install.secure_boot:
        evidence.append(Evidence(install.secure_boot_source or "mokutil --sb-state",
                                 (f"SecureBoot {install.secure_boot}",)))
    if locked and install.lockdown_source:
        evidence.append(Evidence(install.lockdown_source, (f"lockdown: {install.lockdown}",)))
    if log_lines or untrusted:
        evidence.append(Evidence(snapshot.kernel_log.source if snapshot.kernel_log else "kernel log",
                                 tuple(dict.fromkeys(log_lines + untrusted))[:3]))
    evidence.extend(Evidence(m.source, (m.line[:300],)) for m in (failures[:2] or resign[:2]))
    if install.signing_key_line:
        evidence.append(Evidence(install.signing_key_source or "mokutil --test-key", (install.signing_key_line,)))
    if install.module_file is not None:
        evidence.append(Evidence("modinfo nvidia", (
            f"filename: {install.module_file}",
            f"signer: {install.module_signer}" if install.module_signer else "no signature")))
    unsigned = install.module_signer == ""
    # the module's signer against the enrolled MOKs (modinfo's signer, mokutil --list-enrolled): signed by none of
    # them, it is refused under Secure Boot (signed with another key than the one enrolled)
    enrolled = install.enrolled_keys
    foreign = bool(install.module_signer and enrolled is not None
                   and install.module_signer.casefold() not in {name.casefold() for name in enrolled})
    if install.module_signer and enrolled is not None:
        evidence.append(Evidence(install.enrolled_keys_source or "mokutil --list-enrolled", (
            f"signer: {install.module_signer}", *(f"enrolled: {name}" for name in enrolled[:4]))))
    refused = bool(log_lines or refusals or unsigned or (locked and eperm)
                   or (enabled and (eperm or untrusted or (key_refused and not_loaded) or (foreign and not_loaded))))
    if foreign and (refusals or log_lines or (enabled and not_loaded)):
        message = (f"The nvidia module is signed by '{install.module_signer}', which is none of the enrolled keys "
                   f"({_enrolled_teller(install)}): Secure Boot refuses it. It was signed with another key than "
                   "the one enrolled (built before that key was made, or signed by another tool's key): rebuild or "
                   "sign it again with the enrolled key")
    elif enrolled and install.module_signer and (refusals or log_lines):
        message = (f"The nvidia module is signed by '{install.module_signer}', an enrolled key, and is still refused: "
                   "the kernel has not taken that key in (enrolment not confirmed at boot, or another certificate of "
                   "the same name); mokutil --test-key on the key's certificate tells")
    elif log_lines:
        message = "The kernel rejected an unsigned or untrusted module signature"
    elif refusals and unknown_state:
        message = ("The kernel refused to load the nvidia module: it is not signed with a key the kernel trusts "
                   "(Secure Boot or lockdown enforces module signatures)")
    elif refusals and not key_refused:  # the refusal is shown: it is named, not the guess that the module needs a key
        message = (f"Secure Boot is {install.secure_boot} and the kernel refused to load the nvidia module: it is not "
                   "signed with a key the kernel trusts" + ("" if enabled else " (lockdown or the kernel's "
                                                            "configuration enforces module signatures)"))
    elif enabled and key_refused:
        message = _key_message(install.signing_key or "the signing key", install.signing_key_state or "",
                               _key_teller(install))
    elif enabled and eperm:
        message = ("Secure Boot is enabled and loading the module failed with 'Operation not permitted': the "
                   "locked-down kernel refuses modules not signed by an enrolled key")
    elif locked and eperm:
        told = ", in the reporter's words" if (install.lockdown_source or "").endswith("(the reporter's words)") else ""
        message = (f"The kernel is locked down ({install.lockdown}{told}) "
                   "and loading the module failed with 'Operation not permitted': lockdown refuses modules without a "
                   "signature the kernel trusts")
    elif enabled and resign:
        message = ("Secure Boot is enabled and update-secureboot-policy says the nvidia module is not signed with "
                   "DKMS's key, the one enrolled: the kernel refuses it unless another enrolled key signed it (built "
                   "before the key was made, or signed by another tool); rebuild it with DKMS, which signs it with "
                   "that key")
    elif enabled and untrusted:
        message = "Secure Boot is enabled and the kernel does not trust the module's signer: it refuses to load it"
    elif untrusted:
        message = ("The kernel does not trust a module's signer (PKCS#7): with Secure Boot enabled it refuses to load "
                   "it; mokutil --sb-state tells")
    elif unsigned:
        message = "Secure Boot is enabled and the nvidia module is unsigned: the kernel will refuse to load it"
    elif install.module_signer:
        message = (f"Secure Boot is enabled and the nvidia module is not loaded: it is signed by "
                   f"'{install.module_signer}', which loads only if that key is enrolled")
    elif install.signing_key_state == "enrolled":
        message = (f"Secure Boot is enabled and the nvidia module is not loaded; {install.signing_key} is enrolled, "
                   "so the module loads only if it is signed with that key (modinfo -F signer nvidia)")
    else:
        message = ("Secure Boot is enabled and the nvidia module is not loaded: Secure Boot refuses a module not "
                   "signed with an enrolled key (not confirmed: `sudo modprobe nvidia` says 'Key was rejected by "
                   "service' if so)")
    enrol = _certificate_fixes(snapshot, install) if refused and not foreign else ()
    if enrol:
        message = (f"Secure Boot refuses the nvidia module, which DKMS signed with {install.signing_certificate}: "
                   "the kernel does not trust that key yet; it must be enrolled as a MOK (mokutil --import, confirmed "
                   "in the MOK manager at the next boot, on the console)")
    if enrol and install.signing_certificate_source:
        evidence.append(Evidence(install.signing_certificate_source,
                                 (f"Public certificate (MOK): {install.signing_certificate}",)))
    yield Draft(
        Severity.CRITICAL if refused else Severity.WARNING, message, evidence=tuple(evidence),
        fixes=enrol or _key_route(install, enabled and key_refused) or (
            _builder_route(snapshot) if refused else ()) or (
            (_SIGNER, *table_fixes("GH506", kind=POLICY_NOT_SIGNED)) if enabled and resign and not refused else ()) or (
            # the modprobe that would confirm it, unless its refusal is already in the evidence
            *(() if refusals or eperm else (Fix("sudo modprobe nvidia", "any",
                                       note="'Key was rejected by service' confirms it"),)),
            # a new key, its enrollment, the signing loop, the load (knowledge/fixes.csv); the Secure Boot state is
            # not asked for when the evidence already shows it enforced. Until a refusal is shown (Secure Boot on and
            # the module not loaded: it may as well be missing for this kernel), only the steps that decide it: a
            # new key, its enrolment and a reboot are a procedure for a refusal, not for a guess.
            *(fix for fix in table_fixes("GH506", without=("mokutil --sb-state",) if enabled or refused else ())
              if refused or fix.command.startswith(_DECIDES)),
            *(() if refused or install.module_signer is not None else (_SIGNER,)),
        ),
        # a refused module is why the driver is not loaded: it leads GH201 and what GH201 explains
        explains=DRIVER_DOWN if refused else (),
    )


_TOLD = "(the reporter's words)"
# signatures.csv: update-secureboot-policy's "E: <nvidia module> is not signed with the DKMS key"
POLICY_NOT_SIGNED = "shim-policy-nvidia-not-signed-with-dkms-key"


def _words_only(install: InstallState) -> bool:
    """Whether every Secure Boot fact GH506 holds came from a person's sentences, none from a program's output."""
    sources = [source for value, source in ((install.secure_boot, install.secure_boot_source),
                                            (install.lockdown, install.lockdown_source),
                                            (install.signing_key_state, install.signing_key_source))
               if value is not None]
    return bool(sources) and all((source or "").endswith(_TOLD) for source in sources) and (
        install.module_signer is None and install.enrolled_keys is None and install.signing_certificate is None)


# GH506's read-only steps, the ones shown before a refusal is: the Secure Boot state, the keys enrolled, the signer
_DECIDES = ("mokutil --sb-state", "mokutil --list-enrolled")
_SIGNER = Fix("modinfo -F signer nvidia", "any",
              note="empty: the module is unsigned, and Secure Boot refuses it; a name: it must be an enrolled key's")


# shim's MOK manager asks for the import's password on the machine's console at the next boot (no keyboard there, a
# remote server: its BMC's remote console); a fix script cannot do that step, so every enrolment says so
CONSOLE = "at the next boot, on the machine's console (a remote server: its BMC's remote console)"
_UNSIGNED_BUILD = frozenset({"dkms-sign-module-failed", "dkms-mok-not-generated", "dkms-signing-tool-missing"})


def _certificate_fixes(snapshot: Snapshot, install: InstallState) -> tuple[Fix, ...]:
    """DKMS's build named the certificate it signs modules with ("Public certificate (MOK): PATH") and mokutil was not
    asked about it: the refused module is signed with that key, so enrolling it is the fix (no new key, no signing by
    hand). Not when DKMS said it could not sign: then the module is unsigned and the generic route stands."""
    if install.signing_certificate is None or install.signing_key_state is not None:
        return ()
    if any(m.signature in _UNSIGNED_BUILD for m in snapshot.messages or ()):
        return ()
    return (
        slotted("mokutil --test-key {keyfile}", note="says whether the key DKMS signs with is enrolled",
                keyfile=install.signing_certificate),
        slotted("sudo mokutil --import {keyfile}", keyfile=install.signing_certificate,
                note=f"DKMS signs the modules it builds with this key; set a one-time password, then {CONSOLE} "
                     "choose 'Enroll MOK' and type it (mokutil says so if the key is already enrolled)"),
        replace(REBOOT, note=f"enroll the key in the MOK manager {CONSOLE}; the modules DKMS signed load after it"),
    )


def _key_route(install: InstallState, decided: bool) -> tuple[Fix, ...]:
    """Where mokutil (or update-secureboot-policy) named the key the modules are signed with and shim does not trust
    it yet, the fix is that key's enrolment (imported, or confirmed at the next boot): no new key, no signing by hand,
    which would leave the modules' own key untrusted and sign them with another."""
    if not decided or install.signing_key_state not in ("not-enrolled", "pending"):
        return ()
    steps = _key_fixes(install)
    if install.signing_key_state == "pending" or not steps:
        return steps
    return (*steps, replace(REBOOT, note=f"enroll the key in the MOK manager {CONSOLE}; the modules signed with it "
                                         "load after it"))


# The key each module-building tool signs with, and how it makes one (each valid for the tool's versions named):
# - akmods (RPM Fusion's akmod-nvidia): kmodgenca makes /etc/pki/akmods/{private/private_key.priv,certs/public_key.der}
#   (-a: without asking; an existing pair is kept), and akmods signs the kmods it builds with it (RPM Fusion, Howto:
#   Secure Boot, https://rpmfusion.org/Howto/Secure%20Boot).
# - DKMS on Ubuntu and its derivatives: update-secureboot-policy --new-key makes /var/lib/shim-signed/mok/MOK.der (none
#   is made where it exists); Ubuntu's dkms signs with it (2.8.x's sign_build, and dell/dkms dkms.in >= 3.0.11
#   prepare_mok for "ubuntu*"; Ubuntu wiki UEFI/SecureBoot).
# - DKMS 3.0.4 and later elsewhere: /var/lib/dkms/mok.pub (and mok.key), made at its first signed build (3.1.0 adds
#   `dkms generate_mok`); it prints "Public certificate (MOK): PATH" on each build (dell/dkms dkms.in prepare_mok).
_AKMODS_KEY = "/etc/pki/akmods/certs/public_key.der"
_UBUNTU_KEY = "/var/lib/shim-signed/mok/MOK.der"
_DKMS_KEY = "/var/lib/dkms/mok.pub"
_AKMODS_WORDS = ("akmod-nvidia", "akmods", "/etc/pki/akmods", "kmodgenca")


def _module_builder(snapshot: Snapshot) -> str | None:
    """Which tool built (and signs) the nvidia module, as the machine's output shows it: "akmods", "dkms", or None
    (neither, or both)."""
    install = snapshot.install or InstallState()
    packages = snapshot.host_env.packages if snapshot.host_env else ()
    lines = [m.line.lower() for m in snapshot.messages or () if not m.reported]
    ids = [m.signature or "" for m in snapshot.messages or () if not m.reported]
    typed = [command.lower() for command in snapshot.commands_given]
    # RPM Fusion's akmod-nvidia, not ELRepo's prebuilt kmod-nvidia (signed with ELRepo's own key)
    akmods = (any(p.name.startswith("akmod-nvidia") for p in packages)
              or any(i.startswith("akmods-") for i in ids)
              or any(word in text for text in (*lines, *typed) for word in _AKMODS_WORDS))
    dkms = (bool(install.dkms) or install.signing_certificate is not None
            or any(p.name.startswith("nvidia-dkms") or p.name == "dkms" for p in packages)
            or any(i.startswith("dkms-") for i in ids)
            or any(text.startswith(("dkms ", "sudo dkms ")) for text in typed))
    if akmods == dkms:
        return None
    return "akmods" if akmods else "dkms"


def _builder_route(snapshot: Snapshot, builder: str | None = None, enrolled: bool = False) -> tuple[Fix, ...]:
    """GH506's steps for a refused module built by akmods or DKMS, which sign every build with their own key: enroll
    that key (made first where it does not exist), not a new one signed in by hand, which the next rebuild drops.
    Empty where the evidence shows neither tool (the general route: a key of one's own and sign-file). ``builder``:
    the tool the reporter's words name ("akmods", "dkms", or "ubuntu" for Ubuntu's ubuntu-drivers, which builds with
    DKMS), where the machine's output shows none; ``enrolled``: the words say the key is enrolled already."""
    if any(m.signature in _UNSIGNED_BUILD for m in snapshot.messages or ()):
        return ()  # DKMS said it did not sign: the module is unsigned whatever key is enrolled (the general route)
    builder = builder or _module_builder(snapshot)
    confirm = f"set a one-time password, then {CONSOLE} choose 'Enroll MOK' and type it"
    unsigned = "a module built before the key existed carries no signature: rebuild it with the key in place"
    if builder == "akmods":
        return _akmods_route(enrolled, confirm)
    if builder not in ("dkms", "ubuntu"):
        return ()
    os_info = snapshot.os
    names = {os_info.id or "", *os_info.id_like} if os_info else set()
    ubuntu = "ubuntu" in names or builder == "ubuntu"
    known = (bool(os_info and os_info.id) and os_info.family_from is None) or builder == "ubuntu"
    steps = [slotted("mokutil --test-key {keyfile}", keyfile=key, note=f"says whether shim trusts {who}")
             for key, who in ((_UBUNTU_KEY, "the key Ubuntu's DKMS signs with"),
                              (_DKMS_KEY, "the key DKMS 3 signs with elsewhere"))
             if ((ubuntu or not known) if key == _UBUNTU_KEY else not ubuntu)]
    if ubuntu or not known:
        steps.append(Fix("sudo update-secureboot-policy --new-key", "any",
                         note=("" if ubuntu else "only if this is Ubuntu or a derivative: ")
                         + "makes the MOK Ubuntu's DKMS signs with where none exists"))
        steps.append(slotted("sudo mokutil --import {keyfile}", keyfile=_UBUNTU_KEY,
                             note=("" if ubuntu else "only if this is Ubuntu or a derivative: ")
                             + f"{confirm}; {unsigned} (dkms)"))
    if not ubuntu:
        steps.append(slotted("sudo mokutil --import {keyfile}", keyfile=_DKMS_KEY,
                             note=("" if known else "only if this is not Ubuntu (DKMS 3.0.4 or later): ")
                             + f"{confirm}; DKMS makes this key at its first signed build; {unsigned} (dkms)"))
    steps.append(replace(REBOOT, note=f"enroll DKMS's key in the MOK manager {CONSOLE}"))
    return tuple(steps)


# akmods (0.5.7 and later: Fedora's akmods package, "Add local akmods CA signing keys and support tools to sign modules
# for Secure boot") signs each kmod when it builds it, with the pair in /etc/pki/akmods that kmodgenca makes. A kmod
# built before that key existed is unsigned, and one built with a key since made again (kmodgenca -f) is signed by a
# key no longer enrolled: enrolling the key fixes neither, the kmod must be built again. `akmods --force` rebuilds
# nothing that is up to date ("--force won't rebuild the Nvidia kernel modules unless there's a kernel change",
# asus-linux's Fedora guide, MR 85); `akmods --rebuild` does (openzfs/zfs PR 19099 shows it on Alma 10). And the kernel
# must take MOKs in at all: it lists those it loaded at boot ("Loading X.509 certificate: UEFI:MokListRT", then one
# "Loaded X.509 cert" per key: security/integrity/platform_certs/load_uefi.c).
_AKMODS_REBUILD = Fix("sudo akmods --rebuild", "any",
                      note="builds the nvidia kmod again for the running kernel, signed with the key now in "
                           "/etc/pki/akmods: one built before that key was made is unsigned, one built with a key made "
                           "again since is signed by a key not enrolled (akmods --force rebuilds nothing up to date)")


def _akmods_route(enrolled: bool, confirm: str) -> tuple[Fix, ...]:
    """akmods' route: its key enrolled (made first where none exists), the kmod rebuilt with it; where the key is
    enrolled already and the kmod still refused, the steps that tell why (its signer, the MOKs this kernel loaded)
    before the rebuild."""
    test = slotted("mokutil --test-key {keyfile}", keyfile=_AKMODS_KEY,
                   note="says whether shim already trusts the key akmods signs the nvidia kmod with")
    if enrolled:
        return (
            test,
            replace(_SIGNER, note="the kmod's signer: akmods' key's name; none, or another name, and the kmod was "
                                  "built before the key was made or with a key made again since: rebuild it"),
            Fix("sudo dmesg | grep -i x.509", "any",
                note="the MOKs this kernel loaded at boot (UEFI:MokListRT): akmods' key must be among them, else this "
                     "kernel does not take MOKs in and no enrolment helps"),
            _AKMODS_REBUILD,
            replace(REBOOT, note="boots with the rebuilt kmod"),
        )
    return (
        test,
        Fix("sudo kmodgenca -a", "any", note="makes akmods' signing key pair in /etc/pki/akmods where none exists "
                                             "(an existing pair is kept)"),
        slotted("sudo mokutil --import {keyfile}", keyfile=_AKMODS_KEY, note=f"{confirm} (akmods)"),
        _AKMODS_REBUILD,
        replace(REBOOT, note=f"enroll akmods' key in the MOK manager {CONSOLE}; the rebuilt kmod loads after it"),
    )


# The tool the reporter's words name as the one that builds (and signs) the module: RPM Fusion's akmods, DKMS, or
# Ubuntu's driver tool (ubuntu-drivers installs the driver's DKMS packages; update-secureboot-policy makes its key)
_TOLD_BUILDER = guarded_re(r"(?P<akmods>\bakmods?\b|\bakmod-nvidia\b|\bkmodgenca\b|/etc/pki/akmods|\brpm ?fusion\b)|"
                           r"(?P<ubuntu>\bubuntu-drivers\b|\bupdate-secureboot-policy\b)|(?P<dkms>\bdkms\b)",
                           re.IGNORECASE, may=has_folded("akmod", "kmodgenca", "rpm", "ubuntu-drivers",
                                                         "update-secureboot-policy", "dkms"))
TOLD_STILL_REFUSED = "told:told-enrolled-key-still-refused"  # cause_phrases.csv: "the key is enrolled, still rejected"


def named_builder(lines: Iterable[str]) -> str | None:
    """"akmods", "dkms" or "ubuntu" where the lines name one tool that builds the module (Ubuntu's, which builds with
    DKMS, counts as Ubuntu's), None where they name none or more than one."""
    found: set[str] = set()
    for line in lines:
        found.update(m.lastgroup or "" for m in _TOLD_BUILDER.finditer(line[:2000]))
    if "ubuntu" in found:
        found.discard("dkms")
    return found.pop() if len(found) == 1 else None


def told_builder_route(findings: list[Finding], snapshot: Snapshot) -> list[Finding]:
    """GH506 raised by the reporter's words alone takes the general route (a key of one's own, signed in by hand).
    Where the evidence names the tool that builds the module (the machine's output, else the words: "akmods", "dkms",
    "ubuntu-drivers"), it takes that tool's own route, as a finding of the machine's output does: the tool signs every
    build with its key, which a key of one's own leaves untrusted."""
    told = [f for f in findings if f.code == "GH506" and f.labels.get("reported") == "words"]
    if not told:
        return findings
    messages = snapshot.messages or ()
    builder = _module_builder(snapshot) or named_builder(m.line for m in messages)
    enrolled = any(m.signature == TOLD_STILL_REFUSED for m in messages)
    route = _builder_route(snapshot, builder, enrolled) if builder else ()
    if not route:
        return findings
    why = {}
    if builder == "akmods" and enrolled:  # akmods signs at build time: the source's causes, in the order they tell
        why = {"message": "The reporter's words say akmods' key is enrolled and the nvidia kmod is still refused: it "
                          "was built before the key was made, or with a key made again since (akmods signs each kmod "
                          "when it builds it), or this kernel does not take MOKs in; the kmod's signer and the MOKs "
                          "the kernel loaded tell which, and a rebuild fixes the first two"}
    return [replace(f, fixes=route, **why) if f in told else f for f in findings]


def _key_fixes(install: InstallState) -> tuple[Fix, ...]:
    """The key mokutil --test-key named: import it (not enrolled) or confirm it at boot (pending)."""
    if install.signing_key is None or install.signing_key_state not in ("not-enrolled", "pending"):
        return ()
    confirm = f"choose 'Enroll MOK' in the blue MOK manager {CONSOLE} and type the password set at import"
    if install.signing_key_state == "pending":
        return (replace(REBOOT, note=confirm),)
    return (slotted("sudo mokutil --import {keyfile}", note=f"set a one-time password; {confirm}",
                    keyfile=install.signing_key),)


def _enrolled_teller(install: InstallState) -> str:
    """What listed the enrolled keys: mokutil, or the kernel's own lines at boot."""
    return "the kernel's MOK list at boot" if (install.enrolled_keys_source or "").endswith("(UEFI:MokListRT)") \
        else "mokutil --list-enrolled"


def _key_teller(install: InstallState) -> str:
    """Who said what shim thinks of the signing key: the reporter, or the command whose line it is."""
    line = install.signing_key_line or ""
    if (install.signing_key_source or "").endswith("(the reporter's words)"):
        return "in the reporter's words"
    if line.startswith("mokutil --list-new"):
        return "mokutil --list-new"
    if "System's DKMS key" in line or "System DKMS key" in line:
        return "update-secureboot-policy"
    if "Secure Boot signing key" in line:
        return "update-secureboot-policy --new-key made it"
    if line.startswith("Certificate or key are missing"):
        return "DKMS made it for this build"
    if "Machine-Owner Key" in line:
        return "shim-signed's note asked for its enrolment"
    if line.startswith(("SKIP: ", "Already in kernel trusted keyring", "mokutil --import")):
        return "mokutil --import"
    return "mokutil --test-key"


def _key_message(key: str, state: str, teller: str = "mokutil --test-key") -> str:
    """GH506's message when ``mokutil`` (or the reporter) says shim does not trust the key modules are signed with."""
    if state == "pending":
        return (f"Secure Boot is enabled and {key} waits in the enrollment request ({teller}): until it is "
                "confirmed in the MOK manager at the next boot, the kernel refuses modules signed with it")
    if state == "blocked":
        return (f"Secure Boot is enabled and {key} is blocked (dbx or MokListX, {teller}): modules signed "
                "with it never load; sign them with another key")
    return (f"Secure Boot is enabled and {key} is not enrolled ({teller}): the kernel refuses modules "
            "signed with it until it is imported with mokutil and confirmed at the next boot")


def _nvidia_ran(snapshot: Snapshot) -> bool:
    """The kernel log shows code of the nvidia module running (its banner, or any NVRM line): the kernel accepted
    the module's signature then, so an untrusted-signer line in the same log refused nothing of nvidia's."""
    log = snapshot.kernel_log
    return log is not None and (bool(log.module_banners) or any(e.line.lstrip().startswith("NVRM") or "NVRM:" in e.line
                                                                 for e in log.events))


def _log_lines(snapshot: Snapshot, needles: tuple[str, ...]) -> tuple[str, ...]:
    if snapshot.kernel_log is None:
        return ()
    lowered = tuple(n.lower() for n in needles)
    return tuple(e.line for e in snapshot.kernel_log.events if any(n in e.line.lower() for n in lowered))[:3]


# "vboxdrv: Loading of unsigned module is rejected": a line that names its module, and not an nvidia one
_OTHER_MODULE = guarded_re(r"\b(?!nvidia)[\w-]{1,40}: (?:Loading of|module verification)",
                           may=has(": Loading of", ": module verification"))


def _logged(snapshot: Snapshot, wanted: Callable[[Signature], bool], other_modules: bool = False) -> tuple[str, ...]:
    """Catalogue lines of a parsed kernel log that ``wanted`` picks: the log parser keeps only the signature lines
    that name nvidia, and older kernels' "PKCS#7 ..." and "Loading of unsigned module is rejected" name no module."""
    return tuple(m.line for m in snapshot.messages or () if m.signature and "kernel_log" in m.read_into
                 and wanted(signature(m.signature)) and (other_modules or not _OTHER_MODULE.search(m.line)))[:3]


def _load_failures(snapshot: Snapshot) -> list[MessageLine]:
    """Pasted lines that say the nvidia module did not load (modprobe, the installer) or that the driver cannot be
    reached; the installer's "Kernel module load error: Operation not permitted" is the locked-down kernel's answer."""
    found = []
    for message in snapshot.messages or ():
        sig = signature(message.signature) if message.signature else None
        cause = sig.cause if sig else ""
        if sig and sig.severity == "info":
            continue  # "tainting kernel", PKCS#7: the line alone says nothing failed
        if message.signature in LOAD_FAILED_SIGNATURES or (
                message.symptom in LOAD_FAILED_SYMPTOMS and cause in ("", "secure-boot-refused", "driver-not-loaded")):
            found.append(message)
    return found


# --------------------------------------------------------------------------- GH507


@check("GH507", "dkms-not-built-for-kernel", "No nvidia module for the running or the next kernel",
       requires=("install",), reads=("messages",))
def dkms_not_built_for_kernel(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Looks for an nvidia module for every installed kernel (`/lib/modules/<k>/updates/dkms`,
    `kernel/drivers/video`, `extra`, `weak-updates`, the folder `modinfo` names for the running
    kernel, and `dkms status` "installed" lines). Critical when the nvidia module is not loaded and
    the running kernel has none although the driver is installed for another kernel (or registered
    with DKMS). A warning when a kernel newer than the running one has none: the next boot loses the
    driver.
    Pasted listings count too: `uname -r` with `find /lib/modules -name '*nvidia*'` showing nvidia.ko
    only under another kernel; `modinfo nvidia` saying "Module nvidia not found" (it looks in
    `/lib/modules/$(uname -r)`) when DKMS, a package or another kernel shows the driver was installed.

    Why it matters:
    A kernel update installs a new kernel; unless DKMS (or a precompiled module package) provides an
    nvidia module for it, the host boots into a kernel without the driver, and every GPU job fails
    with "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver". This check
    says so before the reboot, while the fix is still cheap. OS upgrades install a new kernel too: each
    RHEL (Alma, Rocky) minor release, `dnf update`/`yum update` (kernels are install-only packages,
    installed beside the old one), Ubuntu's `do-release-upgrade` and HWE kernel series, Debian point
    releases, unattended-upgrades and cloud images that update themselves on boot.

    How to fix:
    Install the headers for that kernel and let DKMS build the module
    (`sudo dkms autoinstall -k <kernel>`), then confirm with `dkms status`. For the running kernel,
    `sudo modprobe nvidia` afterwards. Until it is built, keep booting the current kernel (set it as
    the GRUB default).

    Exceptions:
    Leftover `/lib/modules` folders of removed kernels (no `/boot/vmlinuz-<k>`) are ignored. When the
    running kernel's module cannot be found on disk the newer kernels are not judged. The reporter's words
    ("the module was built for 5.13 but I boot 5.14", "dkms did not build the module for 5.14" beside the running
    kernel) are judged as such a listing where no program's output lists the modules; the finding then quotes them
    and stays a warning. An OS upgrade or automatic update the reporter tells ("we moved the nodes from Rocky 9.4 to
    9.5", "unattended-upgrades ran overnight") names this cause only beside a failure it explains (nvidia-smi cannot
    reach the driver, the module does not load) and where nothing names the kernel headers missing (then GH503), Secure
    Boot or a library mismatch; told with no failure it names nothing, and `dkms status` showing the module installed
    for the running kernel overrules the words. A package tool's own output showing an update that installed a kernel
    (apt's history.log or terminal lines, unattended-upgrades' log, `dnf history`/`yum history`, their rpm logs) is
    read the same way, as machine output.
    """
    install = _install(snapshot)
    loaded = module_loaded(snapshot)
    # kernels from a pasted `find /lib/modules` carry no "booted" flag: the running one is `uname`'s release
    pasted_kernels = bool(install.kernels and install.kernel_release) and not any(k.booted for k in install.kernels)
    # a pasted `dkms status` next to `uname -r` says which kernels DKMS installed the module for
    pasted_dkms = bool(install.kernel_release and _dkms_nvidia(install)) and not install.kernels
    if snapshot.pci_devices is not None:
        skip = _target(snapshot)
        if skip:
            yield skip
            return
    elif install.module_found is not False and not pasted_kernels and not pasted_dkms:
        # pasted evidence without lspci: only the listings that speak for themselves are judged
        yield Skip(_unavailable(snapshot, "pci_devices"))
        return
    if install.module_found is False and not loaded:
        yield from _no_module_per_modinfo(snapshot, install)
        return
    if pasted_dkms and not pasted_kernels:
        if not loaded:  # pasted `dkms status` and `uname -r`, nothing listing the module files
            yield from _no_module_per_dkms(snapshot, install)
        return
    if pasted_kernels:
        if not loaded:  # pasted listings: `find /lib/modules -name '*nvidia*'` and `uname -r`
            yield from _no_module_per_listing(install, snapshot.reported_fact("install", "kernels"))
        return
    if "install_kernels" in snapshot.unavailable or install.kernel_release is None:
        yield Skip(_unavailable(snapshot, "install_kernels", "install_kernel"))
        return
    running = next((k for k in install.kernels if k.booted),
                   InstalledKernel(install.kernel_release, None, True))
    others = [k for k in install.kernels if not k.booted]
    dkms_lines = tuple(f"{e.module}/{e.version}, {e.kernel or '-'}: {e.state}"
                       for e in install.dkms if e.module == "nvidia")
    if loaded is False and running.nvidia_module is None:
        elsewhere = [k.release for k in others if k.nvidia_module]
        if not elsewhere and not dkms_lines:
            return  # the driver was never installed: GH201 says so
        yield Draft(
            Severity.CRITICAL,
            f"No nvidia module for the running kernel {running.release}"
            + (f" (built for {', '.join(elsewhere)})" if elsewhere else "") + ": the driver cannot load",
            evidence=(Evidence(f"/lib/modules/{running.release}", ("no nvidia.ko",)),
                      *((Evidence("dkms status", dkms_lines),) if dkms_lines else ())),
            fixes=table_fixes("GH507"),
            explains=DRIVER_DOWN,
        )
        return
    if running.nvidia_module is None:
        if loaded:
            yield Skip("the running kernel's nvidia module was not found on disk; newer kernels not judged")
        return
    current = _version_key(running.release)
    newer = sorted((k for k in others if _version_key(k.release) > current and not k.nvidia_module),
                   key=lambda k: _version_key(k.release))
    if not newer:
        return
    names = [k.release for k in newer]
    yield Draft(
        Severity.WARNING,
        f"Kernel {', '.join(names)} is installed without an nvidia module: the next boot loses the driver",
        evidence=(Evidence("/lib/modules", (f"{running.release} (running): {running.nvidia_module}",
                                            *(f"{k}: no nvidia module" for k in names))),
                  *((Evidence("dkms status", dkms_lines),) if dkms_lines else ())),
        fixes=(*(f for k in names for f in fixes_for(debian=["sudo apt-get install linux-headers-{kernel}"],
                                                     rhel=["sudo dnf install kernel-devel-{kernel}"], kernel=k)),
               *(slotted("sudo dkms autoinstall -k {kernel}", kernel=k) for k in names),
               Fix("dkms status nvidia", "any", note="every installed kernel should show 'installed'")),
    )


def _no_module_per_modinfo(snapshot: Snapshot, install: InstallState) -> Iterator[Draft]:
    """GH507 from a pasted ``modinfo nvidia``: it looks in /lib/modules/$(uname -r), so "Module nvidia not
    found" means no module for the running kernel. Critical when the driver was installed (DKMS knows it, a
    package or another kernel has it); with no sign of an install, GH201 says the driver is missing."""
    dkms_lines = tuple(f"{e.module}/{e.version}, {e.kernel or '-'}: {e.state}" for e in install.dkms
                       if e.module == "nvidia")
    elsewhere = [k.release for k in install.kernels if k.nvidia_module and not k.booted]
    packages = snapshot.host_env.packages if snapshot.host_env else ()
    if not dkms_lines and not elsewhere and not packages:
        return
    yield Draft(
        Severity.CRITICAL,
        "No nvidia module for the running kernel (modinfo: Module nvidia not found)"
        + (f"; built for {', '.join(elsewhere)}" if elsewhere else "") + ": the driver cannot load",
        evidence=(Evidence(snapshot.sources.get("install", "modinfo nvidia"),
                           ("modinfo: ERROR: Module nvidia not found.",)),
                  *((Evidence("dkms status", dkms_lines),) if dkms_lines else ()),
                  *((Evidence(snapshot.host_env.package_source or "packages",
                              tuple(f"{p.name} {p.version or ''}" for p in packages[:4])),)
                    if packages and snapshot.host_env else ())),
        fixes=table_fixes("GH507"),
        explains=DRIVER_DOWN,
    )


def _no_module_per_dkms(snapshot: Snapshot, install: InstallState) -> Iterator[Draft]:
    """GH507 from a pasted ``dkms status`` and ``uname -r``: DKMS installed the nvidia module for other kernels
    only. Critical when the evidence also shows the driver not loaded or unreachable; a warning otherwise (a
    precompiled module package may serve the running kernel without DKMS)."""
    release = install.kernel_release
    entries = [e for e in install.dkms if e.module == "nvidia"]
    if any(e.kernel == release and e.installed for e in entries):
        return
    elsewhere = sorted({e.kernel for e in entries if e.kernel and e.installed})
    down = module_loaded(snapshot) is False or bool(_driver_down_lines(snapshot))
    built = f"installed for {', '.join(elsewhere)} only" if elsewhere else "not installed for any kernel"
    yield Draft(
        Severity.CRITICAL if down else Severity.WARNING,
        f"No nvidia module for the running kernel {release}: DKMS has it {built}"
        + (": the driver cannot load" if down else "; unless a precompiled module package serves this kernel, "
           "the driver cannot load"),
        evidence=(Evidence("uname -r", (release or "",)),
                  Evidence("dkms status", tuple(f"{e.module}/{e.version}, {e.kernel or '-'}: {e.state}"
                                                for e in entries)[:6]),
                  *(Evidence(m.source, (m.line[:300],)) for m in _driver_down_lines(snapshot)[:1])),
        fixes=table_fixes("GH507"),
        explains=DRIVER_DOWN if down else (),
    )


def _driver_down_lines(snapshot: Snapshot) -> list[MessageLine]:
    """Pasted lines saying the module did not load or the driver cannot be reached, without naming another cause."""
    return [m for m in _load_failures(snapshot) if not m.signature or not signature(m.signature).cause
            or signature(m.signature).cause in ("module-not-built", "driver-not-loaded")]


def _no_module_per_listing(install: InstallState, told: ReportedFact | None = None) -> Iterator[Draft]:
    """GH507 from pasted listings: the running kernel (``uname``) has no nvidia.ko among the module files
    listed (``find /lib/modules -name '*nvidia*'``) while another kernel has one. Critical when the listing
    shows the running kernel's own nvidia files without nvidia.ko; a warning when it does not name the
    running kernel at all (the search may have been narrower). ``told``: the reporter's words gave the kernels (then
    no listing was pasted: the evidence names the words)."""
    release = install.kernel_release
    running = next((k for k in install.kernels if k.release == release), None)
    built = [k for k in install.kernels if k.nvidia_module and k.release != release]
    if (running is not None and running.nvidia_module) or not built:
        return
    severity = Severity.CRITICAL if running is not None else Severity.WARNING
    yield Draft(
        severity, f"No nvidia module for the running kernel {release} (built for "
                  f"{', '.join(k.release for k in built)}): the driver cannot load",
        evidence=(Evidence("uname -r", (release or "",)),
                  Evidence("/lib/modules", tuple(f"{k.release}: {k.nvidia_module or 'no nvidia.ko'}"
                                                 for k in install.kernels)[:8])) if told is None else (
            Evidence(f"{told.source} (the reporter's words)", (f"running kernel: {release}", *[
                f"{k.release}: {'nvidia module' if k.nvidia_module else 'no nvidia module'}"
                for k in install.kernels][:8])),),
        fixes=table_fixes("GH507"),
    )


# --------------------------------------------------------------------------- GH508 / GH509 (host environment)

DISPLAY_SERVERS = {"x", "xorg", "xwayland", "gnome-shell", "kwin", "kwin_x11", "kwin_wayland", "compiz", "mutter",
                   "sddm-greeter", "gdm-x-session", "plasmashell", "cinnamon", "xfwm4", "marco"}
_PACKAGE_ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("CUDA repository (cuda-drivers)", lazy_re(r"^cuda-drivers(?:-\d+)?$")),
    ("ELRepo (kmod-nvidia)", lazy_re(r"^(?:kmod-nvidia(?:-\d+\.\d+\S*)?|nvidia-x11-drv(?:-libs)?(?:-\d+\S*)?)$")),
    ("RPM Fusion (akmod-nvidia)", lazy_re(r"^(?:akmod-nvidia\S*|xorg-x11-drv-nvidia\S*)$")),
    ("driver packages", lazy_re(
        r"^(?:nvidia-driver(?:-\d+)?(?:-server|-open)?(?:-cuda)?|nvidia-dkms-\d+\S*|nvidia-kernel-(?:dkms|common-\d+\S*"
        r"|source-\d+\S*|open-\d+\S*)|libnvidia-compute-\d+\S*|nvidia-utils-\d+\S*|linux-modules-nvidia-\S+"
        r"|nvidia-headless-\S+|kmod-nvidia-(?:latest|open)-dkms|nvidia-kmod\S*)$")),
)
# Removing a route is the person's choice of which route to keep: each removal says so ("only if ..."), so
# `gpuhealth fix` writes it as a comment. Run live, the script removed every route it found and rebooted into no driver.
_KEEP_ANOTHER = "only if you keep another route: this removes the {route} route"


def _removal(route: str, *fixes: Fix) -> tuple[Fix, ...]:
    note = _KEEP_ANOTHER.format(route=route)
    return tuple(replace(fix, note=f"{note}; {fix.note}" if fix.note else note) for fix in fixes)


# The change the reboot completes: a person's, with the commands `gpuhealth recommend` prints (without it the script's
# reboot followed only a read-only step and restarted the host for nothing)
_REINSTALL = Fix("Reinstall one driver version, by the route you keep, with the commands gpuhealth recommend prints",
                 "any", kind="step")

_ROUTE_REMOVAL = {
    "run-file installer": _removal("run-file installer", Fix(
        "sudo /usr/bin/nvidia-uninstall", "any", disruptive=True, note="or: sudo sh NVIDIA-Linux-*.run --uninstall")),
    "CUDA repository (cuda-drivers)": _removal("CUDA repository (cuda-drivers)", *fixes_for(
        debian=["sudo apt-get remove --purge cuda-drivers '^nvidia-.*' '^libnvidia-.*'"],
        rhel=["sudo dnf remove cuda-drivers 'nvidia-driver*' 'kmod-nvidia-*-dkms'"], disruptive=True)),
    "ELRepo (kmod-nvidia)": _removal("ELRepo (kmod-nvidia)",
                                     Fix("sudo dnf remove 'kmod-nvidia*' 'nvidia-x11-drv*'", "rhel", disruptive=True)),
    "RPM Fusion (akmod-nvidia)": _removal("RPM Fusion (akmod-nvidia)", Fix(
        "sudo dnf remove 'akmod-nvidia*' 'xorg-x11-drv-nvidia*'", "rhel", disruptive=True)),
    "driver packages": _removal("driver packages", *fixes_for(
        debian=["sudo apt-get remove --purge '^nvidia-.*' '^libnvidia-.*' && sudo apt-get autoremove"],
        rhel=["sudo dnf remove 'nvidia-driver*' 'kmod-nvidia-*-dkms' 'nvidia-kmod*'"], disruptive=True)),
}


def _driver_package(name: str) -> bool:
    """A package of the driver (``libnvidia-common-495``, ``cuda-drivers``, ``libcuda1``); tools with their own
    versions (the container toolkit) fall out later, their versions being no driver version."""
    return "nvidia" in name or name.startswith(("cuda-drivers", "libcuda"))


# A driver package named for its branch (Ubuntu's nvidia-304, nvidia-experimental-310, nvidia-driver-535).
_BRANCH_PACKAGE = lazy_re(r"^nvidia-(?:experimental-|driver-)?(?P<branch>\d{3})(?:-updates|-server|-open)?$")


def _driver_branches(packages: tuple[NvidiaPackage, ...]) -> dict[str, list[str]]:
    """Branch -> driver packages of a listing that gives no versions (``jockey-text --list``: the enabled
    drivers). Listings with versions are judged by version: a transitional package keeps an old branch's name."""
    branches: dict[str, list[str]] = {}
    for package in packages:
        match = _BRANCH_PACKAGE.match(package.name)
        if package.version is None and match:
            branches.setdefault(match["branch"], []).append(package.name)
    return dict(sorted(branches.items()))


def _display_processes(snapshot: Snapshot) -> list[str]:
    """``GPU <i>: <name> (pid, type, memory)`` for every display client nvidia-smi lists as a GPU process:
    a known display server by name, or any process of Type G or C+G (a graphics context)."""
    found = []
    for gpu in (snapshot.smi.gpus if snapshot.smi else ()) or snapshot.gpus:
        for process in gpu.processes:
            command = (process.name or "").split()
            by_name = bool(command) and command[0].rsplit("/", 1)[-1].lower() in DISPLAY_SERVERS
            if by_name or "G" in (process.type or "").upper():
                kind = f", type {process.type}" if process.type else ""
                memory = f", {process.used_memory_mib:.0f} MiB" if process.used_memory_mib is not None else ""
                found.append(f"GPU {gpu.index if gpu.index is not None else '?'}: "
                             f"{command[0] if command else 'unnamed process'} (pid {process.pid}{kind}{memory})")
    return found


def _compute_server(snapshot: Snapshot) -> bool:
    from gpuhealth.checks.cuda import is_datacenter

    names = [g.name for g in snapshot.gpus if g.name]
    return bool(names) and all(is_datacenter(n) for n in names)


@check("GH508", "display-server-on-gpu", "A desktop or display setting gets in the way of the GPU driver",
       requires=("host_env",))
def display_server_on_gpu(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Three display settings around the driver. (1) On a compute server (every GPU a data-center
    model) the default systemd target is `graphical.target` (`systemctl get-default`) and a display
    server or other graphics client (Xorg, Xwayland, gnome-shell ..., or any process nvidia-smi lists
    with Type `G` or `C+G`) holds a GPU (nvidia-smi's process list): a warning; the
    graphical target alone is info. (2) `nomodeset` on the kernel command line (`/proc/cmdline`)
    with the nvidia driver installed: a warning. (3) NVIDIA's GL libraries (`libGLX_nvidia.so.0`,
    `libEGL_nvidia.so.0`) installed: info, with the login-loop risk on a desktop and the
    `--no-opengl-files` advice on a compute server.

    Why it matters:
    A display server on a compute GPU takes memory and a context, stops `nvidia-smi --gpu-reset`
    and MIG changes ("GPU is in use"), and the run-file installer refuses to run while X is up ("You
    appear to be running an X server"). `nomodeset`, usually left from booting in "safe graphics"
    mode, turns kernel mode setting off for every display driver, nvidia-drm included: desktops fall
    back to low resolution or fail to start. With NVIDIA's GL libraries installed, a kernel module
    that fails to load after an update leaves the display manager crashing at every login (the login
    loop); compute servers need none of them.

    How to fix:
    On compute servers boot to `multi-user.target` (`sudo systemctl set-default multi-user.target`,
    then reboot or `isolate` it now). Remove `nomodeset` from `GRUB_CMDLINE_LINUX_DEFAULT` and
    regenerate the GRUB configuration (`update-grub`; grubby's `--remove-args` on RHEL). Install the
    driver on compute servers without OpenGL files (`--no-opengl-files` for the run-file,
    `nvidia-headless-<branch>-server` packages on Ubuntu); on desktops keep a text console to repair a
    login loop (`Ctrl+Alt+F3`, then reinstall the driver for the running kernel).

    Exceptions:
    Workstations and desktops are meant to run a display server on their GPU (GeForce, RTX and Quadro
    names are not judged by (1)). A BMC's own VGA adapter running the console is not an NVIDIA GPU
    and not counted.
    """
    env = snapshot.host_env
    assert env is not None
    if not snapshot.nvidia_pci_gpus and not snapshot.gpus:
        yield Skip("no NVIDIA GPU on the PCI bus")
        return
    compute = _compute_server(snapshot)
    displays = _display_processes(snapshot)
    graphical = env.default_target == "graphical.target"
    target_line = (f"default target: {env.default_target}" if env.default_target
                   else _unavailable(snapshot, "env_default_target"))
    if compute and displays:
        yield Draft(
            Severity.WARNING, f"A display server holds a compute GPU ({displays[0]}"
                              + (f" and {len(displays) - 1} more" if len(displays) > 1 else "") + ")"
                              + (": the host boots to graphical.target" if graphical else ""),
            evidence=(Evidence(snapshot.sources.get("smi", "nvidia-smi -q"), tuple(displays[:8])),
                      Evidence("systemctl get-default", (target_line,))),
            fixes=table_fixes("GH508"),
        )
    elif compute and graphical:
        yield Draft(
            Severity.INFO, "This GPU compute server boots to a graphical desktop (graphical.target)",
            evidence=(Evidence("systemctl get-default", (target_line,)),
                      Evidence("systemctl is-active display-manager", (env.display_manager or "unknown",))),
            fixes=tuple(f for f in table_fixes("GH508") if not f.disruptive),  # the boot target; nothing stops now
        )
    cmdline = (env.kernel_cmdline or "").split()
    installed = module_loaded(snapshot) or bool(env.packages) or env.runfile_result == "installed"
    if "nomodeset" in cmdline and installed:
        yield Draft(
            Severity.WARNING, "nomodeset is on the kernel command line with the NVIDIA driver installed: kernel mode "
                              "setting is off for nvidia-drm too",
            evidence=(Evidence("/proc/cmdline", (env.kernel_cmdline or "",)),),
            fixes=(*fixes_for(debian=["sudo sed -i 's/ *nomodeset//' /etc/default/grub && sudo update-grub"],
                              rhel=["sudo grubby --update-kernel=ALL --remove-args=nomodeset"]), REBOOT),
        )
    if env.nvidia_gl_libraries:
        evidence = (Evidence(", ".join(env.nvidia_gl_libraries[:2]), ("present",)),)
        if compute and not graphical and not displays:
            yield Draft(Severity.INFO, "NVIDIA's OpenGL libraries are installed on a compute server that needs none: "
                                       "install the driver without them next time",
                        evidence=evidence,
                        fixes=(Fix("sudo sh NVIDIA-Linux-*.run --no-opengl-files", "any",
                                   note="run-file installs; the next reinstall"),
                               Fix("sudo apt-get install nvidia-headless-<branch>-server nvidia-utils-<branch>-server",
                                   "debian", note="Ubuntu's compute-only packages")))
        elif graphical or displays or env.display_manager == "active":
            yield Draft(Severity.INFO, "NVIDIA's OpenGL libraries drive this desktop: if the kernel module fails to "
                                       "load after a kernel or driver update, the graphical login loops",
                        evidence=evidence,
                        fixes=(Fix("keep a text console to repair it: Ctrl+Alt+F3, then reinstall the driver for "
                                   "the running kernel", "any"),))


@check("GH509", "install-routes-mixed", "The driver was installed in more than one way", requires=("host_env",))
def install_routes_mixed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Which ways of installing the driver left files on this host: the run-file installer
    (`/usr/bin/nvidia-uninstall`, or `/var/log/nvidia-installer.log` ending in a completed install),
    driver packages (`dpkg-query -W '*nvidia*'` / `rpm -qa '*nvidia*'`: `nvidia-driver-*`,
    `nvidia-dkms-*`, `libnvidia-compute-*`, `linux-modules-nvidia-*` ...), ELRepo's `kmod-nvidia`,
    RPM Fusion's `akmod-nvidia`, and the CUDA repository's `cuda-drivers` (whose `nvidia-*`
    dependencies count with it). More than one: a warning. Also a warning: installed driver packages of
    two driver versions (`libnvidia-common-495 495.29.05` left next to the 510 packages; transitional
    packages, which ship no files, are not counted), from any package listing (`dpkg -l`, `rpm -qa`,
    `apt list --installed`, `dnf list installed`), or driver packages of two branches enabled at once in
    a listing without versions (`jockey-text --list`: nvidia-experimental-304 next to -310). Packages and a
    run-file install the reporter's words name ("I have nvidia-driver-535 installed", "I installed the 550.54.15
    runfile") are judged the same way, where no listing is given, and at most as a warning.

    Why it matters:
    Each route owns the same files (libcuda, libnvidia-ml, nvidia.ko, nvidia-smi) without knowing
    about the others: a package upgrade replaces half of a run-file install, DKMS builds a module the
    other route's libraries do not match, and the result is the classic broken upgrade: "Driver/
    library version mismatch", a module for the wrong version after reboot, or no driver at all.

    How to fix:
    Pick one route. Remove the others (the run-file with `nvidia-uninstall`; packages with `apt-get
    remove --purge` / `dnf remove`), then reinstall the driver with the chosen route
    (`gpuhealth recommend` prints the commands) and reboot.

    Exceptions:
    `nvidia-container-toolkit`, `nvidia-fabricmanager` and other tools are not driver routes and are
    not counted. An installer log of a failed run-file install counts only with its uninstaller
    present.
    """
    env = snapshot.host_env
    assert env is not None
    routes: dict[str, list[str]] = {}
    told = snapshot.reported_fact("host_env", "runfile_result")  # "I installed the 550.54.15 runfile"
    if env.runfile_uninstaller or env.runfile_result == "installed":
        lines = [f"{env.runfile_uninstaller} present"] if env.runfile_uninstaller else []
        if told is not None:
            lines.append(f"run-file installer {env.runfile_version or ''}: installed".replace("  ", " "))
        if env.runfile_log:
            lines.append(f"{env.runfile_log}: installer {env.runfile_version or '?'}, {env.runfile_result}")
            lines.extend(env.runfile_lines[-1:])
        routes["run-file installer"] = lines
    for package in env.packages:
        for route, pattern in _PACKAGE_ROUTES:
            if pattern.match(package.name):
                routes.setdefault(route, []).append(f"{package.name} {package.version or ''}".strip())
                break
    if "CUDA repository (cuda-drivers)" in routes and "driver packages" in routes:
        routes["CUDA repository (cuda-drivers)"] += routes.pop("driver packages")  # its own dependencies
    if "env_packages" in snapshot.unavailable and not routes and not env.packages:
        yield Skip(_unavailable(snapshot, "env_packages", "env_runfile"))
        return
    versions = {version: [f"{p.name} {p.version}" for p in found]
                for version, found in driver_package_versions(env.packages, _driver_package).items()}
    versions = versions or _driver_branches(env.packages)
    if len(routes) < 2 and len(versions) < 2:
        return
    if len(routes) < 2:
        yield Draft(
            Severity.WARNING, f"Driver packages of {len(versions)} versions are installed ({', '.join(versions)}): "
                              "their libraries and module overwrite each other",
            evidence=tuple(Evidence(f"{v}: {env.package_source or 'packages'}", tuple(names[:6]))
                           for v, names in versions.items()),
            fixes=(*(fix for route in routes for fix in _ROUTE_REMOVAL.get(route, ())),
                   Fix("gpuhealth recommend", "any", note="then reinstall one driver version"), _REINSTALL, REBOOT))
        return
    evidence = []
    for route, lines in routes.items():
        source = (("the reporter's words" if told is not None else "/usr/bin/nvidia-uninstall")
                  if route == "run-file installer" else (env.package_source or "packages"))
        evidence.append(Evidence(f"{route}: {source}", tuple(lines[:6]) + (
            (f"... {len(lines) - 6} more packages",) if len(lines) > 6 else ())))
    yield Draft(
        Severity.WARNING, f"The driver was installed in {len(routes)} ways ({', '.join(routes)}): they overwrite "
                          "each other's files, the classic cause of broken upgrades",
        evidence=tuple(evidence),
        fixes=(*(fix for route in routes for fix in _ROUTE_REMOVAL.get(route, ())),
               Fix("gpuhealth recommend", "any", note="then reinstall the driver with one route only"),
               _REINSTALL, REBOOT),
    )
