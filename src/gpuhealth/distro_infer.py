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

from gpuhealth.lazyre import guarded_re, has, lazy_re
from gpuhealth.model import OsInfo, Snapshot

# a version's distribution suffix: Ubuntu's "0ubuntu1", Debian's "~deb12u1"/"+deb11u2"
_DEBIAN_VERSION = lazy_re(r"[0-9]ubuntu[0-9]|[~+]deb[0-9]{1,2}u?[0-9]*|[~+]ubuntu[0-9]{2}\.[0-9]{2}")
# an rpm release's distribution tag (Fedora's packaging guidelines, %{?dist}): RHEL and its rebuilds ".el7", ".el9_3",
# Fedora ".fc39", Amazon Linux ".amzn2", ".amzn2023"; in a package version ("1160.71.1.el7"), a kernel release
# ("5.14.0-362.8.1.el9_3.x86_64") or an rpm name. "6.5.0-1017-aws" says nothing.
_RPM_TAG = lazy_re(r"\.(el|fc|amzn)([0-9]{1,4})(?:_[0-9]{1,3})?(?=[.+~]|$)")
# the os-release IDs a tag stands for: "el" is RHEL or a rebuild of it (CentOS, Rocky, Alma, Oracle), all RHEL-like
TAG_IDS = {"el": ("rhel",), "fc": ("fedora",), "amzn": ("amzn",)}
_PROC_VERSION = lazy_re(r"\((?:Ubuntu|Debian)\b|\bUbuntu\b|\(Red Hat\b|\bRed Hat [0-9]")
# the program a command runs, after sudo and env assignments
_COMMAND = lazy_re(r"^(?:sudo\s+(?:-\S+\s+)*)?(?:\w+=\S*\s+)*(\S+)")
_DEBIAN_PROGRAMS = {"apt": "apt", "apt-get": "apt-get", "dpkg": "dpkg", "dpkg-query": "dpkg-query",
                    "ubuntu-drivers": "ubuntu-drivers", "aptitude": "aptitude"}
_RHEL_PROGRAMS = {"dnf": "dnf", "yum": "yum", "rpm": "rpm"}
# lines only those tools print, at a line's start
# (each pattern is guarded by the literal text every match holds: a text without it, most evidence, is not searched,
# and the pattern is not compiled; searching these five over a 20 KB head was a tenth of an analysis's work)
_DEBIAN_OUTPUT = guarded_re(r"^(?:Reading package lists\.\.\.|Building dependency tree|Reading state information\.\.\.|"
                            r"Selecting previously unselected package |Unpacking \S+ \(|Setting up \S+ \()", re.M,
                            may=has("Reading ", "Building dependency tree", "Selecting previously", "Unpacking ",
                                    "Setting up "))
_RHEL_OUTPUT = guarded_re(r"^(?:Last metadata expiration check:|Dependencies resolved\.|"
                          r"Updating Subscription Management repositories\.|Loaded plugins: )", re.M,
                          may=has("Last metadata", "Dependencies resolved", "Updating Subscription", "Loaded plugins"))
# a version with a distribution's suffix anywhere in a text (a gcc banner "11.4.0-1ubuntu1~22.04", an rpm name);
# every run is bounded (a version is short): unbounded, a line of "1.1.1..." cost quadratic time
_DEBIAN_TOKEN = guarded_re(r"\b[0-9][0-9.:]{0,40}-[0-9.]{0,40}[0-9]ubuntu[0-9][\w.~+]{0,40}"
                           r"|\b[0-9][0-9.:]{0,40}-[\w.]{0,80}~deb[0-9]{1,2}u[0-9]+\b", may=has("ubuntu", "~deb"))
_RHEL_TOKEN = guarded_re(r"\b[0-9][0-9.]{0,40}-[\w.]{0,80}\.(?:el[0-9]{1,2}(?:_[0-9]+)?|fc[0-9]{2}|amzn[0-9]{1,4})"
                         r"\.(?:x86_64|aarch64|noarch)\b", may=has(".x86_64", ".aarch64", ".noarch"))
# a package manager's command line in a pasted terminal text ("$ sudo apt-get install ...")
_COMMAND_LINE = guarded_re(r"^\s*(?:[\w@.:~/-]*[$#]\s*)?(?:sudo\s+)?(apt-get|apt|dnf|yum)\s+(?:-\S+\s+)*"
                           r"(?:install|update|upgrade|remove|purge|reinstall)\b", re.M, may=has("apt", "dnf", "yum"))
_HEAD = 20_000  # of each text: enough for any of those lines, cheap for a large log


def inferred_family(snapshot: Snapshot, commands: Iterable[str] = (),
                    texts: Iterable[str] = ()) -> tuple[str, str] | None:
    """``(family, how)``: ``("debian", "the dpkg package listing")``; None when the evidence shows neither family,
    or both. ``commands``: the shell commands the evidence shows were run; ``texts``: the evidence's raw texts."""
    seen: dict[str, list[str]] = {"debian": [], "rhel": []}
    for family, how in _signals(snapshot, commands, list(texts)):
        if how not in seen[family]:
            seen[family].append(how)
    found = [family for family, hows in seen.items() if hows]
    if len(found) != 1:
        return None
    return found[0], ", ".join(seen[found[0]][:2])


def _signals(snapshot: Snapshot, commands: Iterable[str], texts: list[str]) -> Iterable[tuple[str, str]]:
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
    for _, how in _rpm_tags(snapshot, texts):
        yield "rhel", how
    os_info = snapshot.os
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
        line = _COMMAND_LINE.search(head)
        if line:
            yield ("debian" if line[1].startswith("apt") else "rhel"), f"the {line[1]} command in the evidence"


def _rpm_tags(snapshot: Snapshot, texts: Iterable[str]) -> Iterable[tuple[tuple[str, str], str]]:
    """((tag, release), how) for every rpm distribution tag the evidence shows: (("el", "7"), "the kernel package
    3.10.0-1160.el7"). Read from package versions, the kernel packages a listing shows, the kernel release, and
    rpm names in the texts."""
    env, install, os_info = snapshot.host_env, snapshot.install, snapshot.os
    named: list[tuple[str, str]] = [(p.version or "", f"the package version {p.version}") for p in
                                    (env.packages if env else ()) if p.manager != "dpkg"]
    if install is not None:
        named += [(v, f"the kernel package {v}") for v in (*install.kernel_packages, *install.headers_packages)]
    if os_info and os_info.kernel_release:
        named.append((os_info.kernel_release, f"the kernel release {os_info.kernel_release}"))
    for text in texts:
        token = _RHEL_TOKEN.search(text[:_HEAD])
        if token:
            named.append((token[0], f"the package {token[0]}"))
    for version, how in named:
        match = _RPM_TAG.search(version[:200])
        if match:
            yield (match[1], match[2]), how


def inferred_release(snapshot: Snapshot, texts: Iterable[str] = ()) -> tuple[tuple[str, ...], str] | None:
    """``(os-release IDs, release)`` the rpm distribution tags show: ``(("rhel",), "7")`` for ``.el7``,
    ``(("fedora",), "39")`` for ``.fc39``, ``(("amzn",), "2023")``; None when there is none, or tags disagree."""
    tags = {tag for tag, _ in _rpm_tags(snapshot, texts)}
    if len(tags) != 1:
        return None
    ((tag, release),) = tags
    return TAG_IDS[tag], release


def with_inferred_family(snapshot: Snapshot, commands: Iterable[str] = (), texts: Iterable[str] = ()) -> Snapshot:
    """``snapshot`` with ``os`` naming the family the evidence shows, when os-release did not say it (kept as it is
    when it did, or when the evidence shows no single family). An rpm distribution tag (``.el7``) also gives the
    distribution's kind and release (``id_like`` rhel, ``version_id`` 7), so a command that release lacks (dnf on
    EL7) is judged as on a host whose os-release said so."""
    if snapshot.os is not None and (snapshot.os.id or snapshot.os.id_like):
        return snapshot
    texts = list(texts)
    found = inferred_family(snapshot, commands, texts)
    if found is None:
        return snapshot
    family, how = found
    os_info = replace(snapshot.os or OsInfo(), id_like=(family,), family_from=how)
    release = inferred_release(snapshot, texts) if family == "rhel" else None
    if release is not None and not (snapshot.os and snapshot.os.version_id):
        ids, version = release
        os_info = replace(os_info, id_like=ids, version_id=version)
    return replace(snapshot, os=os_info)


def family_note(os_info: OsInfo | None) -> str:
    """The words a report or script header says about an inferred family: "distribution inferred from the dpkg
    package listing (debian family)"; empty when os-release named it."""
    if os_info is None or not os_info.family_from:
        return ""
    return f"distribution inferred from {os_info.family_from} ({os_info.family} family)"


__all__ = ["family_note", "inferred_family", "inferred_release", "with_inferred_family"]
