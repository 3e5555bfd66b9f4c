"""Package listings as people paste them: ``dpkg -l``, ``apt list --installed``, ``rpm -qa``,
``dnf``/``yum list installed``, ``pip list``, ``pip freeze`` and ``conda list``.

Each parser returns every installed package as ``(name, version)`` (or :class:`NvidiaPackage` for the
system package managers); what a check needs from them (the driver packages, torch, conda's
cudatoolkit) is picked by the mapping in :mod:`gpuhealth.listings`. Lines that are not package lines
(headers, ``grep`` noise, prompts) are skipped; text with no package line at all is a ParseError.
Every loop is bounded and every pattern is linear-time.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import NvidiaPackage, ParseError
from gpuhealth.parsers._text import text_lines

MAX_LINES = 20000  # a full ``dpkg -l`` of a desktop has ~3000 lines
MAX_LINE = 2000  # longer lines are not package lines; cut before matching

# A dpkg status abbreviation: selection (want), state, and "R" when a reinstall is required.
DPKG_STATUS = r"[uihrpn][ncHUFWti]"
# ``ii  libnvidia-compute-535:amd64  535.161.08-0ubuntu1  amd64  NVIDIA libcompute package``
_DPKG_LINE = lazy_re(r"^(?P<status>" + DPKG_STATUS + r"[R ]?)\s+(?P<name>[A-Za-z0-9][A-Za-z0-9+._-]*(?::[a-z0-9_-]+)?)"
                        r"\s+(?P<version>\S+)(?:\s+(?P<arch>\S+))?(?:\s+(?P<description>.*))?$")
_DPKG_ARCH = lazy_re(r"[a-z0-9][a-z0-9_-]*")  # a Debian architecture name: amd64, i386, arm64, armhf, all
_DPKG_HEADER = lazy_re(r"^(?:Desired=Unknown|\|\s*Status=|\|/ Err\?|\|\|/ Name|\+\+\+-)")
# ``libnvidia-compute-535/jammy-updates,now 535.161.08-0ubuntu0.22.04.1 amd64 [installed,automatic]``
_APT_LINE = lazy_re(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9+._-]*)/(?P<suites>\S*)\s+(?P<version>\S+)\s+(?P<arch>\S+)"
                       r"(?:\s+\[(?P<state>[^\]]*)\])?\s*$")
# rpm -qa prints ``name-version-release.arch``; the name itself may contain "-" and digits
# (``kmod-nvidia-550.90.12-4.18.0-553.22.1``), so it is split from the right, without a regex.
_RPM_ARCHES = ("x86_64", "aarch64", "noarch", "i686", "i386", "ppc64le", "s390x", "src")
_RPM_PART = lazy_re(r"[A-Za-z0-9_.+~^:]+")
# ``nvidia-driver-cuda.x86_64      3:550.54.15-1.el8      @cuda-rhel8-x86_64``
_DNF_LINE = lazy_re(r"^(?P<name>[A-Za-z0-9_+.-]+)\.(?P<arch>x86_64|aarch64|noarch|i686|i386|ppc64le|s390x)\s+"
                       r"(?P<version>\S+)\s+(?P<repo>@?\S+)\s*$")
_DNF_HEADER = lazy_re(r"^(?:Installed Packages|Available Packages|Last metadata expiration check|"
                         r"Loaded plugins|Updating Subscription|Installed packages)", re.IGNORECASE)
# ``torch        2.1.0+cpu`` / ``torch (1.0.0)`` / ``torch==2.1.0+cu118`` / ``torch @ file:///...``
_PIP_COLUMNS = lazy_re(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+\(?(?P<version>\d[A-Za-z0-9.+!_-]*)\)?"
                          r"(?:\s+\S.*)?$")
_PIP_FREEZE = lazy_re(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[A-Za-z0-9,._-]*\])?\s*===?\s*"
                         r"(?P<version>[A-Za-z0-9.+!_*-]+)\s*(?:;.*)?$")
_PIP_URL = lazy_re(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+@\s+\S+")
_PIP_HEADER = lazy_re(r"^(?:Package\s+Version|-{3,}\s+-{3,}|WARNING: |DEPRECATION: |\[notice\])")
# ``pytorch   2.1.0   py3.10_cuda11.8_cudnn8.7.0_0   pytorch`` / ``cudatoolkit  11.3.1  h2bc3f7f_2``
_CONDA_LINE = lazy_re(r"^(?P<name>[A-Za-z0-9_][A-Za-z0-9._-]*)\s+(?P<version>[A-Za-z0-9][A-Za-z0-9._+!-]*)"
                         r"(?:\s+(?P<build>[A-Za-z0-9_.+!<>-]+))?(?:\s+(?P<channel>\S+))?\s*$")
# Prefixes pytorch's collect_env puts before its package lines: "[pip3] torch==1.10.0", "[conda] pytorch ..."
_COLLECT_ENV_PREFIX = lazy_re(r"^\[(?:pip3?|conda)\]\s+")


# dpkg's package states, the second letter of ``dpkg -l``'s status column and of ``${db:Status-Abbrev}``
# (dpkg-query(1) --list: "Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend";
# dpkg(1) "INFORMATION ABOUT PACKAGES"). From "unpacked" on the package's files are on disk at the listed
# version: U unpacked, F half-configured, W triggers-awaited ("awaits trigger processing by another
# package"), t triggers-pending ("has been triggered"), i installed. Not installed: n not-installed,
# c config-files (only its configuration files remain), H half-installed ("the installation ... has been
# started, but not completed"): its files are partial. The first letter is the selection (what the user
# wants: u, i, h, r, p), not what is on disk, so it does not decide.
DPKG_INSTALLED_STATES = frozenset("UFWti")


def dpkg_installed(status: str) -> bool:
    """Whether a dpkg status abbreviation (``ii``, ``hi``, ``iW``, ``iUR``, ``rc``, ``un`` ...) says the
    package's files are installed: its second letter is one of :data:`DPKG_INSTALLED_STATES`."""
    return len(status) >= 2 and status[1] in DPKG_INSTALLED_STATES


def dpkg_package_name(word: str) -> str:
    """A dpkg package name without its architecture qualifier: ``nvidia-driver-550:amd64`` ->
    ``nvidia-driver-550``. ``dpkg -l`` and ``dpkg-query -W -f='${binary:Package}'`` print the qualifier on
    Multi-Arch packages, ``${Package}`` does not; every dpkg reader names a package the same way through this."""
    name, colon, arch = word.partition(":")
    return name if colon and _DPKG_ARCH.fullmatch(arch) else word


def _lines(text: str, what: str) -> list[str]:
    return text_lines(text, what, max_lines=MAX_LINES, max_line=MAX_LINE, strip=str.strip)


def parse_dpkg_list(text: str) -> tuple[NvidiaPackage, ...]:
    """``dpkg -l [pattern]`` (also piped through grep): the installed packages (status ``ii``/``hi``...).

    Removed packages that kept their configuration (``rc``), never-installed names (``un`` with
    ``<none>``) and transitional packages (which ship no files: Ubuntu's ``libnvidia-common-455``
    pointing at 460) are left out. ``:amd64`` is dropped from the name.
    """
    packages: list[NvidiaPackage] = []
    seen = False
    for line in _lines(text, "dpkg -l output"):
        if _DPKG_HEADER.match(line) or line.startswith("dpkg-query: no packages found"):
            seen = True
            continue
        match = _DPKG_LINE.match(line)
        if not match or match["version"] == "<none>" and match["status"][0] == "u":
            if match:
                seen = True
            continue
        seen = True
        if not dpkg_installed(match["status"]):
            continue  # rc (config files only), pn, un, iH: not installed
        if (match["description"] or "").lower().startswith("transitional package"):
            continue
        packages.append(NvidiaPackage(dpkg_package_name(match["name"]), match["version"], "dpkg"))
    if not seen:
        raise ParseError("no dpkg -l package lines ('ii  name  version  arch  description')")
    return tuple(packages)


def parse_apt_list(text: str) -> tuple[NvidiaPackage, ...]:
    """``apt list --installed`` (or ``apt list`` with a pattern): lines ``name/suite version arch [state]``.

    Without ``--installed`` apt also lists candidates; only lines whose state says ``installed`` count (a line
    without a state is a candidate), and ``[upgradable from: X]`` (``--upgradable``) counts with version X.
    """
    packages: list[NvidiaPackage] = []
    seen = False
    for line in _lines(text, "apt list output"):
        if line.startswith(("Listing...", "WARNING: apt does not have a stable CLI")) or not line:
            seen = seen or line.startswith("Listing...")
            continue
        match = _APT_LINE.match(line)
        if not match:
            continue
        seen = True
        state = match["state"] or ""
        upgradable = re.match(r"upgradable from: (\S+)$", state)
        if upgradable:  # apt list --upgradable: the version shown is the candidate; "from" is what is installed
            packages.append(NvidiaPackage(match["name"], upgradable[1], "dpkg"))
        elif "installed" in state.split(",") or state.startswith("installed"):
            packages.append(NvidiaPackage(match["name"], match["version"], "dpkg"))
    if not seen:
        raise ParseError("no apt list lines ('name/suite version arch [installed]')")
    return tuple(packages)


def split_rpm_name(word: str) -> tuple[str, str] | None:
    """``nvidia-driver-cuda-libs-550.54.15-1.el8.x86_64`` -> ("nvidia-driver-cuda-libs", "550.54.15-1.el8")."""
    stem, dot, arch = word.rpartition(".")
    if not dot or arch not in _RPM_ARCHES:
        stem = word  # rpm -qa --qf '%{NAME}-%{VERSION}-%{RELEASE}\n' prints no arch
    parts = stem.rsplit("-", 2)
    if len(parts) != 3 or not all(parts) or not _RPM_PART.fullmatch(parts[1] + parts[2]):
        return None
    name, version, release = parts
    version = version.split(":", 1)[-1]  # an epoch ("3:550.54.15") is not part of the driver version
    if not version[:1].isdigit() or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name):
        return None
    return name, f"{version}-{release}"


def parse_rpm_qa(text: str) -> tuple[NvidiaPackage, ...]:
    """``rpm -qa [pattern]``: one ``name-version-release.arch`` per line."""
    packages: list[NvidiaPackage] = []
    for line in _lines(text, "rpm -qa output"):
        if not line or " " in line:
            continue
        split = split_rpm_name(line)
        if split:
            packages.append(NvidiaPackage(split[0], split[1], "rpm"))
    if not packages:
        raise ParseError("no rpm -qa lines ('name-version-release.arch')")
    return tuple(packages)


def parse_dnf_list(text: str) -> tuple[NvidiaPackage, ...]:
    """``dnf list installed`` / ``yum list installed``: ``name.arch  [epoch:]version-release  @repo``.

    Only the "Installed Packages" section counts when the listing also has "Available Packages". The
    epoch is dropped from the version (``3:550.54.15-1.el8`` -> ``550.54.15-1.el8``). A name too long for
    its column makes dnf wrap the rest onto the next line; the two halves are joined.
    """
    packages: list[NvidiaPackage] = []
    section = "installed"
    seen = False
    pending = ""
    for line in _lines(text, "dnf list output"):
        if _DNF_HEADER.match(line):
            seen = True
            lowered = line.lower()
            section = "available" if lowered.startswith("available") else (
                "installed" if lowered.startswith("installed") else section)
            continue
        if pending:
            line, pending = f"{pending} {line}", ""
        match = _DNF_LINE.match(line)
        if not match:
            if re.fullmatch(r"[A-Za-z0-9_+.-]+\.(?:x86_64|aarch64|noarch|i686|i386|ppc64le|s390x)", line):
                pending = line  # the name filled its column: version and repo follow on the next line
            continue
        seen = True
        if section != "installed":
            continue
        version = match["version"].split(":", 1)[-1]
        packages.append(NvidiaPackage(match["name"], version, "rpm"))
    if not seen:
        raise ParseError("no dnf/yum list lines ('name.arch  version  @repo')")
    return tuple(packages)


def parse_pip_list(text: str) -> tuple[tuple[str, str], ...]:
    """``pip list`` (columns), ``pip freeze`` (``name==version``, ``name @ url``) and the legacy
    ``name (version)`` form, also with collect_env's ``[pip3]`` prefixes: ``(name, version)`` pairs, names
    lower-cased with ``_`` as ``-`` (pip's normalisation). ``name @ url`` gives version ``""``.
    """
    packages: list[tuple[str, str]] = []
    seen_header = False
    for raw in _lines(text, "pip output"):
        line = _COLLECT_ENV_PREFIX.sub("", raw)
        if not line or line.startswith("#"):
            continue
        if _PIP_HEADER.match(line):
            seen_header = True
            continue
        match = _PIP_FREEZE.match(line) or _PIP_COLUMNS.match(line)
        if match:
            packages.append((_pip_name(match["name"]), match["version"]))
            continue
        url = _PIP_URL.match(line)
        if url:
            packages.append((_pip_name(url["name"]), ""))
    if not packages and not seen_header:
        raise ParseError("no pip package lines ('name  version' or 'name==version')")
    return tuple(packages)


def jockey_row(line: str) -> tuple[str, bool, bool] | None:
    """One ``jockey-text --list`` line (Ubuntu's driver manager before ubuntu-drivers):
    ``xorg:nvidia_current - NVIDIA accelerated graphics driver (Proprietary, Enabled, In use)`` ->
    ("xorg:nvidia_current", True, True); None for any other line. Read from the right, without a regex."""
    text = line.strip()[:400]
    handler, dash, rest = text.partition(" - ")
    if not dash or not text.endswith(")") or "(" not in rest or " " in handler or not handler:
        return None
    fields = [f.strip() for f in rest[rest.rfind("(") + 1:-1].split(",")]
    if len(fields) != 3 or fields[1] not in ("Enabled", "Disabled") or fields[2] not in ("In use", "Not in use"):
        return None
    return handler, fields[1] == "Enabled", fields[2] == "In use"


def parse_jockey_list(text: str) -> tuple[tuple[str, bool, bool], ...]:
    """``jockey-text --list``: (handler id, enabled, in use) per driver."""
    rows = tuple(row for line in _lines(text, "jockey-text output") if (row := jockey_row(line)) is not None)
    if not rows:
        raise ParseError("no jockey-text --list lines ('id - description (License, Enabled, In use)')")
    return rows


def _pip_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_conda_list(text: str) -> tuple[tuple[str, str, str, str], ...]:
    """``conda list`` (also collect_env's ``[conda]`` lines): ``(name, version, build, channel)``.

    Comment lines (``# packages in environment at ...``, ``# Name  Version  Build  Channel``) are
    skipped; a ParseError when no line has the conda columns.
    """
    packages: list[tuple[str, str, str, str]] = []
    header = False
    for raw in _lines(text, "conda list output"):
        line = _COLLECT_ENV_PREFIX.sub("", raw)
        if not line:
            continue
        if line.startswith("#"):
            header = header or "packages in environment" in line or line.replace(" ", "").startswith("#Name")
            continue
        match = _CONDA_LINE.match(line)
        if match:
            packages.append((match["name"].lower(), match["version"], match["build"] or "", match["channel"] or ""))
    if not packages and not header:
        raise ParseError("no conda list lines ('name  version  build  channel')")
    return tuple(packages)
