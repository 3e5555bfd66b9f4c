"""Package tools' logs as evidence: apt's history.log and term.log, dpkg.log, ``dnf``/``yum history info``,
dnf.rpm.log and yum.log, zypper's /var/log/zypp/history and pacman.log (parsers/package_log.py reads them).

A log is machine output: the tool wrote down what it changed. Its changes fill the fields the checks already read:

- ``host_env.package_changes``: every change to the driver's, CUDA's, the container toolkit's and the kernels'
  packages (GH202: a driver upgrade, with its date and whether an automatic updater ran it; GH201/GH208: the driver
  removed);
- ``host_env.packages``: the driver packages the log leaves installed, at their last version (GH202 compares them
  with the loaded module's version, as it does a ``dpkg -l``);
- ``install.kernel_packages``/``headers_packages``/``kernel_installed_last``: the kernels and headers the log leaves
  installed (GH503: a kernel installed without its headers).

A log of other packages only (security updates of libc or openssl) is read and shows nothing about the GPU stack.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.evidence.registry import evidence_kind
from gpuhealth.model import HostEnvironment, InstallState, NvidiaPackage, PackageChange

_SHOW = r"(?:cat|less|more|head|tail|zcat|zless|grep|zgrep)\b.*?\s"
_LOG_FILES = (r"\S*/(?:apt/(?:history|term)\.log|dpkg\.log|dnf\.rpm\.log|dnf\.log|yum\.log|zypp/history|"
              r"pacman\.log)")
_MANAGERS = {"apt": "dpkg", "dpkg": "dpkg", "dnf": "rpm", "yum": "rpm", "zypper": "rpm", "pacman": "pacman"}


# a literal every format's lines hold (parsers/package_log.py): a piece with none of them in its head is turned away
# without importing the parser or compiling its patterns (most pieces reach this sniff: it ranks above the logs)
_LITERALS = ("Start-Date: ", "End-Date: ", "Log started: ", "Commandline: ", "Requested-By: ", "Install: ",
             "Upgrade: ", "Downgrade: ", "Reinstall: ", "Remove: ", "Purge: ", "Transaction ID", " startup ",
             " status ", " install ", " upgrade ", " remove ", " purge ", " configure ", " trigproc ", " conffile ",
             " disappear ", "[ALPM", "[PACMAN]", "Installed: ", "Upgraded: ", "Downgraded: ", "Reinstalled: ",
             "Erase: ", "Obsoleted: ", "Updated: ", "Erased: ", "|install|", "|remove |", "|command|")


def _looks_like_package_log(text: str) -> bool:
    head = text[:16384]
    if not any(literal in head for literal in _LITERALS):
        return False
    from gpuhealth.parsers.package_log import looks_like_package_log  # here: most pieces are sniffed before

    return looks_like_package_log(text)


@evidence_kind("package-log", commands=(_SHOW + _LOG_FILES, r"(?:dnf|yum)\s+history\s+info\b"), priority=465,
               recognise=_looks_like_package_log)
def _package_log(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.package_log import parse_package_log

    changes, _ = parse_package_log(text)
    installed = final_state(changes)
    packages = tuple(NvidiaPackage(c.name, c.version, _MANAGERS.get(c.tool, "")) for c in installed
                     if _category(c) in ("driver", "container-toolkit"))
    toolkit = next((c.version for c in installed if c.name == "nvidia-container-toolkit" and c.version), None)
    found: dict[str, Any] = {"host_env": HostEnvironment(
        packages=packages, package_source=f"{source} (package log)" if packages else None, package_changes=changes,
        package_log_source=source,
        nvidia_ctk_version=toolkit.split(":")[-1].split("-")[0] if toolkit else None)}
    kernels = _kernels(changes, installed, source)
    if kernels is not None:
        found["install"] = kernels
    return found


def _category(change: PackageChange) -> str | None:
    from gpuhealth.parsers.package_log import category

    return category(change.name, change.tool)


def final_state(changes: tuple[PackageChange, ...]) -> list[PackageChange]:
    """The last change of each package the log leaves installed (a removal ends its package), in log order."""
    last: dict[tuple[str, str | None], PackageChange] = {}
    for change in changes:
        # kernels are installed beside each other (installonlypkgs, yum.conf(5)): one per version; other packages
        # have one version, and the removal of another version than the one installed (zypper's old edition)
        # leaves the package in place
        key = (change.name, change.version if _category(change) in ("kernel", "headers") else None)
        held = last.pop(key, None)  # re-inserted below: the order is that of each package's last change
        if change.action != "remove":
            last[key] = change
        elif held is not None and change.version and held.version and change.version != held.version:
            last[key] = held
    return list(last.values())


def _kernels(changes: tuple[PackageChange, ...], installed: list[PackageChange], source: str) -> InstallState | None:
    """The kernels and headers the log leaves installed. Debian's and the RHEL family's versions are the ones
    ``uname -r`` and the listings give (GH503 compares them with the running kernel); SUSE's and Arch's only with
    each other, through the kernel installed last."""
    images: list[str] = []
    headers: list[str] = []
    for change in installed:
        kind = _category(change)
        if kind == "headers" and (release := _release(change)):
            headers.append(release)
        elif kind == "kernel" and (release := _release(change)) and change.tool in ("apt", "dpkg", "dnf", "yum"):
            images.append(release)
    last = next((r for c in reversed(changes) if c.action != "remove" and _category(c) == "kernel"
                 and (r := _release(c))), None)
    if last is not None and last not in {_release(c) for c in installed}:
        last = None  # installed, then removed again
    if changes and changes[-1].tool in ("zypper", "pacman") and last in headers:
        # their versions are not uname -r's (6.9.1.arch1-1, 6.4.0-150600.23.7.3): compared only with each other,
        # and here the kernel installed last has its headers
        headers, last = [], None
    if not images and not headers and last is None:
        return None
    return InstallState(kernel_packages=tuple(dict.fromkeys(images))[:64],
                        headers_packages=tuple(dict.fromkeys(headers))[:64],
                        kernel_packages_source=f"{source} (package log)", kernel_installed_last=last)


def _release(change: PackageChange) -> str | None:
    """A kernel package's release: in a Debian name (linux-image-6.8.0-45-generic), else its version."""
    if change.tool in ("apt", "dpkg"):
        for prefix in ("linux-image-unsigned-", "linux-image-", "linux-headers-"):
            if change.name.startswith(prefix):
                return change.name[len(prefix):].removesuffix("-signed").removesuffix("-unsigned")
        return None
    return change.version
