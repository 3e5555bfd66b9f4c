"""An OS upgrade or automatic update told in words, read beside a driver failure shown anywhere in the evidence.

A distribution's minor release or dist-upgrade (RHEL and its rebuilds 9.x -> 9.y, ``dnf update``, Ubuntu's
``do-release-upgrade`` and HWE kernel series, Debian point releases), unattended-upgrades and cloud images that update
themselves all install a new kernel (yum.conf(5)/dnf.conf(5) ``installonlypkgs``: a kernel is installed beside the
old one, never updated in place; Red Hat's release dates name a new kernel for each minor release). A driver installed
without DKMS or a precompiled package for that kernel (or whose DKMS build failed, or whose headers for the new kernel
were never installed) then has no module after the reboot (NVIDIA Driver Installation Guide, Kernel Modules). People
tell the upgrade, not the kernel: "we upgraded the servers from Ubuntu 22.04 to 24.04", then paste nvidia-smi's
"couldn't communicate with the NVIDIA driver".

Package tools show the same event as machine output: apt's history.log ("Install: linux-image-6.8.0-45-generic..."),
dpkg's log and terminal lines ("Setting up linux-image-..."), unattended-upgrades' log ("Packages that will be
upgraded: ... linux-image-generic"), dnf's and yum's history ("Install kernel-5.14.0-503...", or a list row whose
command is a whole-system update that installed packages: kernels are install-only, so an update that installs one
shows "I") and their rpm logs ("Installed: kernel-core-..."). Such a line is filed under the family's ``shown:``
stand-in row (a package tool's output, not words) on the same conditions; an upgrade of other packages only is no
such line.

The wordings are the subject of the cause family ``told-os-upgrade-broke-module`` (knowledge/cause_phrases.csv, where
its sources are cited); that family reads an upgrade and a failure told in one sentence. Here the upgrade is read on
its own (``told_alone``) and kept only where the evidence also shows a failure the module not built explains (a symptom
whose differential lists ``module-not-built``: nvidia-smi cannot reach the driver, the module does not load), and where
no line names a cause the family yields to (the kernel headers missing, Secure Boot refusing the module, a
Driver/library version mismatch after a driver package upgrade, ...): then it is the reporter's statement of GH507's
cause, filed under the family's stand-in catalogue row (reported, at most a warning). An upgrade told with a working
GPU, or with no failure at all, is no fault and names nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import MessageLine

__all__ = ["FAMILY", "MAX_EVENTS", "kernel_install_lines", "mentions_kernel_package", "upgrade_events",
           "with_upgrade_cause"]

MAX_LINES = 20_000  # lines of one text looked at for a package tool's kernel install
_MAX_LINE = 4096
# a kernel package's name in apt's and dpkg's words (linux-image-<release> or a flavour's meta package) and in dnf's
# and yum's (kernel, kernel-core, kernel-modules, Oracle's kernel-uek, followed by its version)
_DEB_KERNEL = (r"\blinux-image-(?:\d|generic\b|virtual\b|lowlatency\b|aws\b|gcp\b|azure\b|oracle\b|kvm\b|cloud|"
               r"amd64\b|arm64\b)")
_RPM_KERNEL = r"\bkernel(?:-core|-modules|-uek)?-\d"
# the lines, each a package tool's own: apt's history.log (Install:/Upgrade: entries), dpkg's log and its terminal
# lines, unattended-upgrades' log, dnf's and yum's "history info" rows, their rpm logs (dnf.rpm.log, yum.log)
_KERNEL_INSTALLED = lazy_re(
    rf"^(?:Install|Upgrade): .{{0,4000}}?{_DEB_KERNEL}"
    rf"|^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d (?:install|upgrade) {_DEB_KERNEL}"
    rf"|^(?:Setting up|Unpacking) {_DEB_KERNEL}"
    rf"|Packages that will be upgraded: .{{0,4000}}?\blinux-(?:image|generic|virtual|modules|aws|gcp|azure|oracle)\b"
    rf"|^\s{{1,12}}(?:Install|Installed|Upgrade|Upgraded|Update|Updated)\s{{1,30}}{_RPM_KERNEL}"
    rf"|\b(?:Installed|Upgraded|Installing|Upgrading): {_RPM_KERNEL}")
# a "dnf history" or "yum history" list row: ID | command line | date | action(s) | altered, whose command is a whole
# system's update (no package named) and whose actions include I (installed: kernels are install-only packages)
_HISTORY_ROW = lazy_re(r"^\s{0,8}\d{1,7}\s{0,4}\|\s{0,4}(?:-y\s{1,4})?(?:update|upgrade|distro-sync|up)(?:\s{1,4}-y)?"
                       r"\s{0,40}\|[^|]{0,60}\|[^|]{0,40}\bI\b[^|]{0,40}\|")
# the heading of a section of dnf's or yum's transaction ("Installing:", "Upgrading:", "Installed:", "Removing:",
# "Installing dependencies:") or of apt's ("The following NEW packages will be installed:", "... will be upgraded:",
# "... will be REMOVED:"); the sections that install: a kernel row in them is a kernel the update installs
_SECTION = lazy_re(r"^(?:(?:Installing|Upgrading|Updating|Installed|Upgraded|Updated|Removing|Removed|Erasing|"
                   r"Downgrading|Reinstalling|Skipping)(?: [a-z ]{1,40})?:\s*$|"
                   r"The following (?:[A-Za-z ]{1,40} )?packages? (?:will|have been) [A-Za-z ]{1,40}:\s*$)")
_INSTALL_SECTION = lazy_re(r"^(?:(?:Installing|Upgrading|Updating|Installed|Upgraded|Updated)(?: [a-z ]{1,40})?:|"
                           r"The following (?:NEW |additional )?packages? (?:will be|have been) "
                           r"(?:installed|upgraded))")
# a kernel in such a section: dnf's row ("kernel   x86_64   5.14.0-570.12.1.el9_6   baseos   1.8 M"), dnf's
# "Installed:" list ("kernel-core-5.14.0-570.12.1.el9_6.x86_64"), apt's list ("linux-image-6.8.0-57-generic")
_SECTION_KERNEL = lazy_re(r"^\s{1,12}kernel(?:-core|-modules|-uek)?\s{1,40}(?:x86_64|aarch64|ppc64le|s390x|noarch)\s"
                          rf"|{_RPM_KERNEL}|{_DEB_KERNEL}")
# a field of a package tool's history ("Commandline: /usr/bin/unattended-upgrade", "Command Line   : update"): the
# tool's, not the reporter's words; what it installed is judged by the lines above
_TOOL_FIELD = lazy_re(r"^\s{0,8}(?:Commandline|Command Line|Start-Date|End-Date|Requested-By|Install|Upgrade|Remove|"
                      r"Purge|Transaction ID|Begin time|End time|User|Return-Code|Releasever)\s{0,8}:")
# the texts worth reading for those lines: one search of each whole text
_KERNEL_PACKAGE = lazy_re(r"linux-image-|linux-generic|linux-modules|kernel-\d|kernel-core-\d|kernel-modules-\d|"
                          r"kernel-uek-\d|\|\s{0,4}(?:-y\s{1,4})?(?:update|upgrade|distro-sync)\b|"
                          r"\n {1,12}kernel(?:-core|-modules|-uek)? ")

FAMILY = "told-os-upgrade-broke-module"  # the cause_phrases.csv row whose subject is an OS upgrade told
MAX_EVENTS = 2  # sentences kept as the evidence of one upgrade story


def upgrade_events(lines: Sequence[str], source: str) -> list[MessageLine]:
    """The sentences of ``lines`` (a person's, not a program's) that tell an OS upgrade or an automatic update, as
    reported lines of the family's stand-in row; not yet evidence of anything (:func:`with_upgrade_cause` decides)."""
    from gpuhealth.knowledge.symptom_phrases import TOLD_PREFIX
    from gpuhealth.parsers.prose_symptoms import told_alone

    words = [line for line in lines if not _TOOL_FIELD.match(line)]
    return [MessageLine(found.sentence[:500], source, f"{TOLD_PREFIX}{FAMILY}", None, reported=True)
            for found in told_alone("\n".join(words), FAMILY)[:MAX_EVENTS]]


def mentions_kernel_package(text: str) -> bool:
    """Whether ``text`` could hold a package tool's line installing a kernel (one search)."""
    return _KERNEL_PACKAGE.search(text) is not None


def kernel_install_lines(lines: Iterable[str], source: str) -> list[MessageLine]:
    """The lines of a package tool's output or log that show an update installing a new kernel, as lines of the
    family's ``shown:`` stand-in row (machine output); at most ``MAX_EVENTS``."""
    from gpuhealth.knowledge.symptom_phrases import SHOWN_PREFIX

    found: list[MessageLine] = []
    installing = False  # inside a section of packages installed or upgraded (dnf's "Installing:", apt's "NEW ...")
    for number, line in enumerate(lines):
        if number >= MAX_LINES or len(found) >= MAX_EVENTS:
            break
        line = line[:_MAX_LINE]
        if _SECTION.match(line):
            installing = _INSTALL_SECTION.match(line) is not None
            continue
        if installing and not line[:1].isspace():  # a section's rows are indented: an unindented line ends it
            installing = False
        if (_KERNEL_INSTALLED.search(line) or _HISTORY_ROW.search(line)
                or (installing and _SECTION_KERNEL.search(line))):
            found.append(MessageLine(line.strip()[:500], source, f"{SHOWN_PREFIX}{FAMILY}", None))
    return found


def with_upgrade_cause(messages: list[MessageLine], events: Iterable[MessageLine],
                       install: Any = None) -> list[MessageLine]:
    """``messages`` with the first upgrade ``events`` added as lines naming the module not built, where the messages
    show a failure that cause explains and name neither it already nor a cause its family yields to, and where
    ``install`` (the evidence's InstallState, if any) does not show DKMS's nvidia module installed for the running
    kernel (then the new kernel has its module: the machine output wins)."""
    events = list(events)
    if not events or _built_for_running_kernel(install):
        return messages
    from gpuhealth.knowledge.causes import symptoms
    from gpuhealth.knowledge.signatures import signature
    from gpuhealth.knowledge.symptom_phrases import phrases

    family = next(row for row in phrases() if row.id == FAMILY)
    failures = {sid for sid, symptom in symptoms().items() if any(c.id == family.cause for c in symptom.causes)}
    named: set[str] = set()
    shown: set[str] = set()
    for m in messages:
        row = _row(signature, m.signature)
        if row is not None and row.cause:
            named.add(row.cause)
        for sid in (m.symptom, row.symptom if row is not None else None):
            if sid:
                shown.add(sid)
    if not shown & failures or family.cause in named or named & set(family.yields_to):
        return messages
    machine = [m for m in events if not m.reported]  # a package tool's line before the reporter's words
    return [*messages, *(machine or events)[:MAX_EVENTS]]


def _built_for_running_kernel(install: Any) -> bool:
    """Whether a pasted ``dkms status`` shows the nvidia module installed for the running kernel (``uname -r``)."""
    release = getattr(install, "kernel_release", None)
    return bool(release) and any(e.module == "nvidia" and e.kernel == release and e.installed
                                 for e in getattr(install, "dkms", ()))


def _row(signature, signature_id: str | None):
    """The catalogue (or stand-in) row of a line, None for a line no row matched."""
    if not signature_id:
        return None
    try:
        return signature(signature_id)
    except KeyError:
        return None
