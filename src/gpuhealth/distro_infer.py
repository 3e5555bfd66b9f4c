"""The distribution family from evidence other than os-release: a pasted ``dpkg -l`` is from a Debian-family host.

``gpuhealth fix`` writes a distribution's lines live only for the host's family (``snapshot.os.family``). Pasted
evidence rarely holds ``/etc/os-release``, yet it often shows the family beyond doubt: a package listing (``dpkg -l``,
``apt list`` are dpkg's; ``rpm -qa``, ``dnf list`` are rpm's), a command the user ran (``apt-get install``, ``dnf
install``), the output of one (apt's "Reading package lists...", dnf's "Last metadata expiration check"), a package
version's distribution suffix (``0ubuntu1``, ``~deb12u1``, ``.el9``, ``.fc39``), or the kernel's (``5.14.0-362.el9``)
or ``/proc/version``'s ("Ubuntu", "Red Hat"). Without the family the Ubuntu lines of a fix are comments while the
steps after them stay live and fail (issue 22).

:func:`inferred_family` names the family and the evidence it came from ("the dpkg listing"); analyze fills
``snapshot.os`` with it (``OsInfo.id_like`` and ``family_from``), the field live collection fills from os-release, so
every reader sees the same family and the fix script's header says how it was known. Evidence of both families (a
Debian container on a RHEL host) decides nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import OsInfo, Snapshot

# a version's distribution suffix: Ubuntu's "0ubuntu1", Debian's "~deb12u1"/"+deb11u2", RHEL's ".el9", Fedora's ".fc39"
_DEBIAN_VERSION = lazy_re(r"[0-9]ubuntu[0-9]|[~+]deb[0-9]{1,2}u?[0-9]*|[~+]ubuntu[0-9]{2}\.[0-9]{2}")
_RHEL_VERSION = lazy_re(r"\.el[0-9]{1,2}(?:_[0-9]+)?(?:\.|$)|\.fc[0-9]{2}(?:\.|$)|\.amzn[0-9](?:\.|$)")
# the kernel's own release: "5.14.0-362.8.1.el9_3.x86_64", "6.5.0-1017-aws" says nothing
_RHEL_KERNEL = lazy_re(r"\.el[0-9]{1,2}(?:_[0-9]+)?\.(?:x86_64|aarch64|ppc64le)$|\.fc[0-9]{2}\.(?:x86_64|aarch64)$")
_PROC_VERSION = lazy_re(r"\((?:Ubuntu|Debian)\b|\bUbuntu\b|\(Red Hat\b|\bRed Hat [0-9]")
# the program a command runs, after sudo and env assignments
_COMMAND = lazy_re(r"^(?:sudo\s+(?:-\S+\s+)*)?(?:\w+=\S*\s+)*(\S+)")
_DEBIAN_PROGRAMS = {"apt": "apt", "apt-get": "apt-get", "dpkg": "dpkg", "dpkg-query": "dpkg-query",
                    "ubuntu-drivers": "ubuntu-drivers", "aptitude": "aptitude"}
_RHEL_PROGRAMS = {"dnf": "dnf", "yum": "yum", "rpm": "rpm"}
# lines only those tools print, at a line's start
_DEBIAN_OUTPUT = lazy_re(r"^(?:Reading package lists\.\.\.|Building dependency tree|Reading state information\.\.\.|"
                         r"Selecting previously unselected package |Unpacking \S+ \(|Setting up \S+ \()", re.M)
_RHEL_OUTPUT = lazy_re(r"^(?:Last metadata expiration check:|Dependencies resolved\.|"
                       r"Updating Subscription Management repositories\.|Loaded plugins: )", re.M)
# a version with a distribution's suffix anywhere in a text (a gcc banner "11.4.0-1ubuntu1~22.04", an rpm name);
# every run is bounded (a version is short): unbounded, a line of "1.1.1..." cost quadratic time
_DEBIAN_TOKEN = lazy_re(r"\b[0-9][0-9.:]{0,40}-[0-9.]{0,40}[0-9]ubuntu[0-9][\w.~+]{0,40}"
                        r"|\b[0-9][0-9.:]{0,40}-[\w.]{0,80}~deb[0-9]{1,2}u[0-9]+\b")
_RHEL_TOKEN = lazy_re(r"\b[0-9][0-9.]{0,40}-[\w.]{0,80}\.(?:el[0-9]{1,2}(?:_[0-9]+)?|fc[0-9]{2})"
                      r"\.(?:x86_64|aarch64|noarch)\b")
# a package manager's command line in a pasted terminal text ("$ sudo apt-get install ...")
_COMMAND_LINE = lazy_re(r"^\s*(?:[\w@.:~/-]*[$#]\s*)?(?:sudo\s+)?(apt-get|apt|dnf|yum)\s+(?:-\S+\s+)*"
                        r"(?:install|update|upgrade|remove|purge|reinstall)\b", re.M)
_HEAD = 20_000  # of each text: enough for any of those lines, cheap for a large log


def inferred_family(snapshot: Snapshot, commands: Iterable[str] = (),
                    texts: Iterable[str] = ()) -> tuple[str, str] | None:
    """``(family, how)``: ``("debian", "the dpkg package listing")``; None when the evidence shows neither family,
    or both. ``commands``: the shell commands the evidence shows were run; ``texts``: the evidence's raw texts."""
    seen: dict[str, list[str]] = {"debian": [], "rhel": []}
    for family, how in _signals(snapshot, commands, texts):
        if how not in seen[family]:
            seen[family].append(how)
    found = [family for family, hows in seen.items() if hows]
    if len(found) != 1:
        return None
    return found[0], ", ".join(seen[found[0]][:2])


def _signals(snapshot: Snapshot, commands: Iterable[str], texts: Iterable[str]) -> Iterable[tuple[str, str]]:
    env = snapshot.host_env
    for package in env.packages if env else ():
        if package.manager == "dpkg":
            yield "debian", "the dpkg package listing"
        elif package.manager == "rpm":
            yield "rhel", "the rpm package listing"
        elif package.manager == "jockey":
            yield "debian", "the jockey-text listing (Ubuntu's driver manager)"
        version = package.version or ""
        if _DEBIAN_VERSION.search(version):
            yield "debian", f"the package version {version}"
        elif _RHEL_VERSION.search(version):
            yield "rhel", f"the package version {version}"
    os_info = snapshot.os
    if os_info and os_info.kernel_release and _RHEL_KERNEL.search(os_info.kernel_release):
        yield "rhel", f"the kernel release {os_info.kernel_release}"
    if os_info and os_info.kernel_version:
        match = _PROC_VERSION.search(os_info.kernel_version)
        if match:
            yield ("rhel" if "Red Hat" in match[0] else "debian"), "the kernel's build line (/proc/version)"
    for command in commands:
        program = _COMMAND.match(command.strip())
        name = program[1].rsplit("/", 1)[-1] if program else ""
        if name in _DEBIAN_PROGRAMS:
            yield "debian", f"the {name} command in the evidence"
        elif name in _RHEL_PROGRAMS:
            yield "rhel", f"the {name} command in the evidence"
    for text in texts:
        head = text[:_HEAD]
        if _DEBIAN_OUTPUT.search(head):
            yield "debian", "apt's output"
        if _RHEL_OUTPUT.search(head):
            yield "rhel", "dnf's output"
        token = _DEBIAN_TOKEN.search(head)
        if token:
            yield "debian", f"the version {token[0]}"
        token = _RHEL_TOKEN.search(head)
        if token:
            yield "rhel", f"the package {token[0]}"
        line = _COMMAND_LINE.search(head)
        if line:
            yield ("debian" if line[1].startswith("apt") else "rhel"), f"the {line[1]} command in the evidence"


def with_inferred_family(snapshot: Snapshot, commands: Iterable[str] = (), texts: Iterable[str] = ()) -> Snapshot:
    """``snapshot`` with ``os`` naming the family the evidence shows, when os-release did not say it (kept as it is
    when it did, or when the evidence shows no single family)."""
    if snapshot.os is not None and (snapshot.os.id or snapshot.os.id_like):
        return snapshot
    found = inferred_family(snapshot, commands, texts)
    if found is None:
        return snapshot
    family, how = found
    return replace(snapshot, os=replace(snapshot.os or OsInfo(), id_like=(family,), family_from=how))


def family_note(os_info: OsInfo | None) -> str:
    """The words a report or script header says about an inferred family: "distribution inferred from the dpkg
    package listing (debian family)"; empty when os-release named it."""
    if os_info is None or not os_info.family_from:
        return ""
    return f"distribution inferred from {os_info.family_from} ({os_info.family} family)"


__all__ = ["family_note", "inferred_family", "with_inferred_family"]
