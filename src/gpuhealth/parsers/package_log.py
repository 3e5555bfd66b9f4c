"""Package tools' logs: what apt, dpkg, dnf, yum, zypper and pacman wrote down about the packages they changed.

Each format is the tool's own (cited per pattern below); the reader keeps the changes to the packages gpuhealth's
checks care about (kernel images and their headers, the NVIDIA driver, CUDA, the container toolkit), each with its
action, versions, date and the transaction's command line where the log gives them:

- apt's ``/var/log/apt/history.log``: written by apt-pkg/deb/dpkgpm.cc (``Start-Date:``, ``Commandline:``,
  ``Requested-By:``, then ``Install:``/``Upgrade:``/``Downgrade:``/``Reinstall:``/``Remove:``/``Purge:`` with
  ``name:arch (version[, automatic])`` or ``name:arch (old, new)`` entries, ``End-Date:``);
- apt's ``/var/log/apt/term.log``: ``Log started: <date>``, then dpkg's terminal lines (dpkg src/main/unpack.c
  "Unpacking %s (%s) over (%s) ...", "Unpacking %s (%s) ..."; src/main/remove.c "Removing %s (%s) ...",
  "Purging configuration files for %s (%s) ...");
- ``/var/log/dpkg.log``: dpkg(1) FILES/--log, ``YYYY-MM-DD HH:MM:SS <action> <package> <installed-version>
  <available-version>`` for install, upgrade, remove and purge (``<none>`` where there is no version);
- ``dnf history info`` / ``yum history info``: ``Begin time :``, ``Command Line :``, then ``Packages Altered:`` rows
  ``    Upgrade  name-[epoch:]version-release.arch  @repo`` (libdnf's transaction item actions Install, Upgrade,
  Upgraded, Downgrade, Downgraded, Reinstall, Reinstalled, Removed, Obsoleted; yum's Install, Update, Updated,
  Erase, Dep-Install);
- ``/var/log/dnf.rpm.log``: ``<ISO time> SUBDEBUG <action>: <nevra>`` with dnf/transaction.py FILE_ACTIONS
  (Installed, Upgrade, Upgraded, Downgrade, Downgraded, Reinstall, Reinstalled, Erase, Obsoleted);
  ``/var/log/yum.log``: ``Mon DD HH:MM:SS Installed|Updated|Erased: [epoch:]nevra`` (yum's rpmtrans.py fileaction);
- zypper's ``/var/log/zypp/history``: libzypp's history file (doc "Libzypp History File", zypp/HistoryLogData.cc),
  ``|``-separated, ``date|install|name|edition|arch|...`` and ``date|remove |name|edition|arch|...``, the
  transaction's ``date|command|user@host|'zypper' 'up'|``; ``#`` lines are comments;
- ``/var/log/pacman.log``: libalpm's alpm_logaction (lib/libalpm/add.c "installed %s (%s)", "upgraded %s (%s -> %s)",
  "downgraded %s (%s -> %s)", "reinstalled %s (%s)"; remove.c "removed %s (%s)") after ``[<date>] [ALPM] ``, and
  pacman's ``[PACMAN] Running '<command>'``.

Pure and bounded: at most ``MAX_LINES`` lines, each cut at ``MAX_LINE`` characters; every pattern is linear-time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gpuhealth.lazyre import guarded_re, has, lazy_re, starts
from gpuhealth.model import PackageChange, ParseError
from gpuhealth.parsers._text import text_lines
from gpuhealth.parsers.packages import dpkg_package_name, split_rpm_name

__all__ = ["MAX_CHANGES", "category", "is_log_line", "looks_like_package_log", "parse_package_log"]

MAX_LINES = 50_000
MAX_LINE = 200_000  # one history.log "Upgrade:" line of a release upgrade names thousands of packages
MAX_CHANGES = 2000  # relevant changes kept
_LINE_KEPT = 300  # characters of a line kept as evidence

_DATE = r"\d{4}-\d\d-\d\d"
# apt history.log
_APT_FIELD = lazy_re(r"^(Start-Date|End-Date|Commandline|Requested-By|Install|Upgrade|Downgrade|Reinstall|Remove|"
                     r"Purge|Error): ?(.*)$")
_APT_ENTRY = lazy_re(r"([^\s,()]+) \(([^()]{0,400})\)")
# a history.log line cut out of its entry (grep nvidia /var/log/apt/history.log): a field with its first package entry
_APT_ROW = guarded_re(r"^(?:(?:Install|Upgrade|Downgrade|Reinstall|Remove|Purge): [^\s,()]{1,200} \(|"
                      r"(?:Start-Date|End-Date|Commandline|Requested-By): )",
                      may=starts("Install", "Upgrade", "Downgrade", "Reinstall", "Remove", "Purge", "Start-Date",
                                 "End-Date", "Commandline", "Requested-By"))
_APT_ACTIONS = {"Install": "install", "Upgrade": "upgrade", "Downgrade": "downgrade", "Reinstall": "reinstall",
                "Remove": "remove", "Purge": "remove"}
# apt term.log and dpkg's terminal lines
_TERM_STARTED = lazy_re(r"^Log started: (.{1,40})$")
_DPKG_TERMINAL = lazy_re(r"^(?:(Unpacking) (\S{1,200}) \(([^()\s]{1,100})\)(?: over \(([^()\s]{1,100})\))? \.\.\.|"
                         r"(Removing|Purging configuration files for) (\S{1,200}) \(([^()\s]{1,100})\) \.\.\.)")
# dpkg.log
_DPKG_LOG = lazy_re(rf"^({_DATE} \d\d:\d\d:\d\d) (install|upgrade|remove|purge) (\S{{1,200}}) (\S{{1,100}}) "
                    r"(\S{1,100})\s*$")
# (the patterns every text is sniffed with are guarded: most evidence is no package log, and is not searched)
_DPKG_LOG_ANY = guarded_re(rf"^{_DATE} \d\d:\d\d:\d\d (?:startup|status|configure|trigproc|conffile|install|upgrade|"
                           r"remove|purge|disappear) ", may=lambda line: line[:1].isdigit())
# dnf / yum history info
_HISTORY_FIELD = lazy_re(r"^(Transaction ID|Begin time|Command Line|Cmdline)\s{0,20}: ?(.*)$")
_HISTORY_ROW = lazy_re(r"^\s{1,12}(Install|Dep-Install|Upgrade|Upgraded|Update|Updated|Downgrade|Downgraded|Reinstall|"
                       r"Reinstalled|Removed|Erase|Obsoleted|Obsoleting)\s{1,30}(\S{1,300})(?:\s|$)")
_HISTORY_ACTIONS = {"Install": "install", "Dep-Install": "install", "Upgrade": "upgrade", "Update": "upgrade",
                    "Downgrade": "downgrade", "Reinstall": "reinstall", "Removed": "remove", "Erase": "remove",
                    "Upgraded": "old", "Updated": "old", "Downgraded": "old", "Reinstalled": "old",
                    "Obsoleted": "remove", "Obsoleting": "install"}
# dnf.rpm.log and yum.log
_RPM_LOG = guarded_re(r"^(\S{10,40}) (?:SUBDEBUG|INFO|DEBUG) (Installed|Upgrade|Upgraded|Downgrade|Downgraded|"
                      r"Reinstall|Reinstalled|Erase|Obsoleted): (\S{1,300})\s*$",
                      may=has(" SUBDEBUG ", " INFO ", " DEBUG "))
_RPM_LOG_ACTIONS = {"Installed": "install", "Upgrade": "upgrade", "Downgrade": "downgrade", "Reinstall": "reinstall",
                    "Erase": "remove", "Obsoleted": "remove", "Upgraded": "old", "Downgraded": "old",
                    "Reinstalled": "old"}
_YUM_LOG = guarded_re(r"^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (Installed|Updated|Erased|Obsoleted): (\S{1,300})\s*$",
                      may=has("Installed: ", "Updated: ", "Erased: ", "Obsoleted: "))
_YUM_LOG_ACTIONS = {"Installed": "install", "Updated": "upgrade", "Erased": "remove", "Obsoleted": "remove"}
# zypper's history
_ZYPP = guarded_re(rf"^({_DATE} \d\d:\d\d:\d\d)\|(install|remove) ?\|([^|]{{0,2000}})\|([^|]{{0,300}})\|",
                   may=has("|install", "|remove"))
_ZYPP_COMMAND = guarded_re(rf"^{_DATE} \d\d:\d\d:\d\d\|command\|[^|]{{0,300}}\|([^|]{{0,2000}})\|",
                           may=has("|command|"))
# pacman.log
_PACMAN = lazy_re(r"^\[([^\]]{1,40})\] \[ALPM\] (installed|upgraded|downgraded|reinstalled|removed) (\S{1,200}) "
                  r"\(([^()]{0,200})\)\s*$")
_PACMAN_COMMAND = lazy_re(r"^\[([^\]]{1,40})\] \[PACMAN\] Running '(.{0,2000})'\s*$")
_PACMAN_ANY = guarded_re(r"^\[[^\]]{1,40}\] \[(?:ALPM|PACMAN|ALPM-SCRIPTLET)\] ", may=has("] [ALPM", "] [PACMAN"))

# Which packages are kept, and as what. Kernels: Debian's and Ubuntu's linux-image-<release> and
# linux-headers-<release>, the RHEL family's kernel/kernel-core and kernel-devel, SUSE's kernel-<flavour> and
# kernel-<flavour>-devel, Arch's linux[-lts|-zen|-hardened|-rt] and their -headers.
_DEB_IMAGE = lazy_re(r"^linux-image-(?:unsigned-)?(\d+\.\d+[\w.+~-]*?)(?:-signed|-unsigned)?$")
_DEB_HEADERS = lazy_re(r"^linux-headers-(\d+\.\d+[\w.+~-]*)$")
_RPM_IMAGES = frozenset({"kernel", "kernel-core", "kernel-uek", "kernel-uek-core", "kernel-rt", "kernel-rt-core",
                         "kernel-ml", "kernel-lt", "kernel-default", "kernel-64kb"})
_RPM_HEADERS = frozenset({"kernel-devel", "kernel-uek-devel", "kernel-rt-devel", "kernel-ml-devel", "kernel-lt-devel",
                          "kernel-default-devel", "kernel-64kb-devel"})
_ARCH_IMAGES = frozenset({"linux", "linux-lts", "linux-zen", "linux-hardened", "linux-rt", "linux-rt-lts"})
_CUDA = lazy_re(r"^(?:cuda(?:-toolkit|-runtime|-libraries|-compiler|-nvcc|-cudart|-compat|-\d)?|nvidia-cuda-toolkit|"
                r"nvidia-cuda-dev|libcudnn\d*|cudnn\d*|cuda-toolkit-\S*)(?:[-_.]\S*)?$")
_CONTAINER_TOOLKIT = lazy_re(r"^(?:nvidia-container-toolkit\S*|libnvidia-container\S*|nvidia-container-runtime|"
                             r"nvidia-docker2?)$")
_DRIVER = lazy_re(r"nvidia|^cuda-drivers|^libcuda1?\b|^xorg-x11-drv-nvidia")


def category(name: str, tool: str) -> str | None:
    """What a package is to the checks: "kernel", "headers", "driver", "cuda", "container-toolkit", or None."""
    if tool in ("apt", "dpkg"):
        if _DEB_IMAGE.match(name):
            return "kernel"
        if _DEB_HEADERS.match(name):
            return "headers"
    elif tool == "pacman":
        if name in _ARCH_IMAGES:
            return "kernel"
        if name.endswith("-headers") and name[: -len("-headers")] in _ARCH_IMAGES:
            return "headers"
    elif name in _RPM_IMAGES:
        return "kernel"
    elif name in _RPM_HEADERS:
        return "headers"
    if _CONTAINER_TOOLKIT.match(name):
        return "container-toolkit"
    if _CUDA.match(name) and not name.startswith("cuda-drivers"):
        return "cuda"
    if _DRIVER.search(name):
        return "driver"
    return None


def looks_like_package_log(text: str) -> bool:
    """Whether the first lines of ``text`` are a package tool's log (cheap; never raises)."""
    head = [line for line in text[:16384].splitlines()[:40] if line.strip() and not line.startswith("#")]
    if not head:
        return False
    first = head[0]
    if first.startswith(("Start-Date: ", "Log started: ")) or (
            first.startswith("Commandline: ") and any(h.startswith(("Start-Date: ", "End-Date: ")) for h in head)):
        return True  # apt's history.log, term.log
    if first.startswith("Transaction ID") and any(h.startswith("Begin time") for h in head[:4]):
        return True  # dnf/yum history info
    for patterns in ((_APT_ROW,), (_DPKG_LOG_ANY,), (_PACMAN_ANY,), (_RPM_LOG,), (_YUM_LOG,), (_ZYPP, _ZYPP_COMMAND)):
        hits = sum(1 for line in head if any(p.match(line) for p in patterns))
        if hits and hits * 4 >= len(head) * 3:  # three in four lines: a log, not a line quoted in prose
            return True
    return False


# lines of those logs that change no package: dpkg's other terminal lines, the logs' headers and trailers
_OTHER_LINE = lazy_re(r"^(?:Log ended: |\(Reading database \.\.\.|Preparing to unpack |Selecting previously unselected "
                      r"package |Setting up |Processing triggers for |Begin rpmdb|End rpmdb|End time|User\s{0,20}:|"
                      r"Return-Code|Releasever|Comment\s{0,20}:|Packages Altered:|Scriptlet output:|Begin time|"
                      r"Transaction ID)")


def is_log_line(line: str) -> bool:
    """Whether ``line`` is one a package tool's log writes (not a person's sentence beside it)."""
    line = line[:MAX_LINE].rstrip()
    patterns = (_APT_FIELD, _TERM_STARTED, _DPKG_TERMINAL, _DPKG_LOG_ANY, _HISTORY_FIELD, _HISTORY_ROW, _RPM_LOG,
                _YUM_LOG, _ZYPP, _ZYPP_COMMAND, _PACMAN_ANY, _OTHER_LINE)
    return line.startswith("#") or any(p.match(line) for p in patterns)


def parse_package_log(text: str) -> tuple[tuple[PackageChange, ...], int]:
    """The relevant package changes of a package tool's log, oldest first, and how many changes it shows in all.
    ParseError when no line is a package change of any of the formats."""
    lines = text_lines(text, "package log", max_lines=MAX_LINES, max_line=MAX_LINE, strip=str.rstrip)
    changes: list[PackageChange] = []
    total = 0
    replaced: dict[str, str] = {}  # dnf/yum: the version an upgrade replaced (its "Upgraded" row), by name
    for change in _changes(lines):
        if change.action == "old":  # before or after the new version's row, whichever the tool printed first
            _pair(changes, replaced, change)
            continue
        total += 1
        if len(changes) < MAX_CHANGES and category(change.name, change.tool) is not None:
            if change.action in ("upgrade", "downgrade") and change.old_version is None and change.name in replaced:
                change = replace(change, old_version=replaced.pop(change.name))
            changes.append(change)
    if total == 0:
        raise ParseError("no package installed, upgraded or removed in any package tool's log format")
    return tuple(changes), total


def _changes(lines: list[str]) -> Iterator[PackageChange]:
    date: str | None = None
    command: str | None = None
    editions: dict[str, str | None] = {}  # zypper: the edition each package was last installed at
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if (m := _APT_FIELD.match(line)) is not None:
            field, value = m[1], m[2]
            if field == "Start-Date":
                date, command = " ".join(value.split()), None
            elif field in ("Commandline", "Requested-By"):
                command = value.strip()[:300] if field == "Commandline" else command
            elif field in _APT_ACTIONS:
                yield from _apt_entries(_APT_ACTIONS[field], value, date, command, line)
            continue
        if (m := _TERM_STARTED.match(line)) is not None:
            date, command = " ".join(m[1].split()), None
            continue
        if (m := _DPKG_TERMINAL.match(line)) is not None:
            if m[1]:
                action = "upgrade" if m[4] else "install"
                yield _change("dpkg", action, dpkg_package_name(m[2]), m[3], m[4], date, command, line)
            else:
                yield _change("dpkg", "remove", dpkg_package_name(m[6]), m[7], None, date, command, line)
            continue
        if (m := _DPKG_LOG.match(line)) is not None:
            installed, available = _none(m[4]), _none(m[5])
            action = "remove" if m[2] in ("remove", "purge") else m[2]
            version = installed if action == "remove" else available
            yield _change("dpkg", action, dpkg_package_name(m[3]), version,
                          installed if action == "upgrade" else None, m[1], None, line)
            continue
        if (m := _HISTORY_FIELD.match(line)) is not None:
            if m[1] == "Begin time":
                date = m[2].strip()[:60]
            elif m[1] in ("Command Line", "Cmdline"):
                command = m[2].strip()[:300]
            elif m[1] == "Transaction ID":
                date, command = None, None
            continue
        if (m := _HISTORY_ROW.match(line)) is not None:
            yield from _rpm_change("dnf", _HISTORY_ACTIONS[m[1]], m[2], date, command, line)
            continue
        if (m := _RPM_LOG.match(line)) is not None:
            yield from _rpm_change("dnf", _RPM_LOG_ACTIONS[m[2]], m[3], m[1], None, line)
            continue
        if (m := _YUM_LOG.match(line)) is not None:
            yield from _rpm_change("yum", _YUM_LOG_ACTIONS[m[2]], m[3], m[1], None, line)
            continue
        if (m := _ZYPP_COMMAND.match(line)) is not None:
            command = m[1].replace("'", "").strip()[:300]
            continue
        if (m := _ZYPP.match(line)) is not None:
            # libzypp logs an update as the new edition's "install" (the old one's removal is not logged): a
            # package installed again at another edition was upgraded
            name, version = m[3].strip(), m[4].strip() or None
            before = editions.get(name)
            action = "remove" if m[2] == "remove" else "upgrade" if before and before != version else "install"
            if action != "remove" and len(editions) < MAX_CHANGES:
                editions[name] = version
            yield _change("zypper", action, name, version, before if action == "upgrade" else None, m[1], command,
                          line)
            continue
        if (m := _PACMAN_COMMAND.match(line)) is not None:
            command = m[2].strip()[:300]
            continue
        if (m := _PACMAN.match(line)) is not None:
            versions = [v.strip() for v in m[4].split(" -> ", 1)]
            action = {"installed": "install", "upgraded": "upgrade", "downgraded": "downgrade",
                      "reinstalled": "reinstall", "removed": "remove"}[m[2]]
            new, before = versions[-1] or None, versions[0] if len(versions) == 2 else None
            yield _change("pacman", action, m[3], new, before, m[1], command, line)


def _pair(changes: list[PackageChange], replaced: dict[str, str], old: PackageChange) -> None:
    """Give the upgrade just read the version it replaced, or keep that version for the upgrade's row to come."""
    for index in range(len(changes) - 1, max(-1, len(changes) - 50), -1):
        change = changes[index]
        if change.name == old.name and change.action in ("upgrade", "downgrade") and change.old_version is None:
            changes[index] = replace(change, old_version=old.version)
            return
    if len(replaced) < MAX_CHANGES:
        replaced[old.name] = old.version or ""


def _none(version: str) -> str | None:
    return None if version == "<none>" else version


def _change(tool: str, action: str, name: str, version: str | None, old_version: str | None, date: str | None,
            command: str | None, line: str) -> PackageChange:
    return PackageChange(tool, action, name, version, old_version, date, command, line.strip()[:_LINE_KEPT])


def _apt_entries(action: str, value: str, date: str | None, command: str | None,
                 line: str) -> Iterator[PackageChange]:
    for m in _APT_ENTRY.finditer(value):
        name = dpkg_package_name(m[1])
        parts = [p.strip() for p in m[2].split(",")]
        versions = [p for p in parts if p and p != "automatic"]
        if action in ("upgrade", "downgrade") and len(versions) >= 2:
            new, before = versions[1], versions[0]
        else:
            new, before = (versions[0] if versions else None), None
        shown = f"{field_name(action)}: {m[0]}"
        yield _change("apt", action, name, new, before, date, command, shown if len(line) > _LINE_KEPT else line)


def field_name(action: str) -> str:
    """history.log's field for an action (a long line is shown as the field and the one entry)."""
    return {"install": "Install", "upgrade": "Upgrade", "downgrade": "Downgrade", "reinstall": "Reinstall",
            "remove": "Remove"}.get(action, action)


def _rpm_change(tool: str, action: str, nevra: str, date: str | None, command: str | None,
                line: str) -> Iterator[PackageChange]:
    """One rpm tool's row (action "old": the version an upgrade replaced, paired by parse_package_log)."""
    word = nevra.split(":", 1)[1] if nevra[:1].isdigit() and ":" in nevra.split("-", 1)[0] else nevra
    split = split_rpm_name(word)
    if split is not None:
        yield _change(tool, action, split[0], split[1], None, date, command, line)
