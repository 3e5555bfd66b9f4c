"""The host around the driver (GH8xx, GH508/GH509): systemd targets, the run-file installer's log,
package lists, Docker's runtimes, nvidia-ctk, container detection, driver parameters, mounts and df.

Every function is pure: text in, values out; input that is not the format raises ``ParseError``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuhealth.lazyre import guarded_re, has, lazy_re
from gpuhealth.model import DiskSpace, HostEnvironment, MountEntry, NvidiaPackage, ParseError
from gpuhealth.parsers.packages import DPKG_STATUS, dpkg_installed, dpkg_package_name

MAX_LINES = 5000  # package lists, mounts and df output are cut here (a host with thousands of mounts)
MAX_PACKAGES = 300

# --------------------------------------------------------------------------- systemd

_TARGET = guarded_re(r"^\s*([A-Za-z0-9@_.:-]+\.target)\s*$", re.MULTILINE, may=has(".target"))


def parse_default_target(text: str) -> str:
    """``systemctl get-default`` -> ``graphical.target``."""
    if not isinstance(text, str):
        raise ParseError("systemctl output must be text")
    match = _TARGET.search(text)
    if match is None:
        raise ParseError("no systemd target in the output")
    return match[1]


# --------------------------------------------------------------------------- the .run installer's log

_INSTALLER_VERSION = lazy_re(r"^\s*installer version:\s*(\S+)", re.MULTILINE | re.IGNORECASE)
_INSTALLER_HEAD = lazy_re(r"nvidia-installer log file|nvidia-installer command line", re.IGNORECASE)
_INSTALL_DONE = lazy_re(r"Installation of the NVIDIA .*? is now complete", re.IGNORECASE)
_UNINSTALL_DONE = lazy_re(r"Uninstallation of existing driver: .*? is complete|uninstallation is complete",
                             re.IGNORECASE)
_INSTALL_FAILED = lazy_re(r"^ERROR: Installation has failed", re.MULTILINE)


def parse_installer_log(text: str) -> tuple[str | None, str, tuple[str, ...]]:
    """``/var/log/nvidia-installer.log``: the installer version, the result ("installed", "failed",
    "uninstalled" or "unknown") and the lines that show it (at most 4)."""
    if not isinstance(text, str):
        raise ParseError("installer log must be text")
    if not _INSTALLER_HEAD.search(text[:20000]):
        raise ParseError("not an nvidia-installer log")
    version = _INSTALLER_VERSION.search(text)
    lines = [line.strip()[:300] for line in text.splitlines()
             if _INSTALL_DONE.search(line) or _INSTALL_FAILED.search(line) or _UNINSTALL_DONE.search(line)]
    last = lines[-1] if lines else ""
    if _INSTALL_DONE.search(last):
        result = "installed"
    elif _INSTALL_FAILED.search(last):
        result = "failed"
    elif _UNINSTALL_DONE.search(last):
        result = "uninstalled"
    else:
        result = "unknown"
    return (version[1] if version else None), result, tuple(lines[-4:])


# --------------------------------------------------------------------------- package lists

_DPKG_STATUS = lazy_re(DPKG_STATUS + "R?")  # ${db:Status-Abbrev}
_PACKAGE_NAME = lazy_re(r"^[A-Za-z0-9][A-Za-z0-9+._:-]*$")


def parse_package_list(text: str, manager: str) -> tuple[NvidiaPackage, ...]:
    """``dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\\n'`` (also without the status
    column) or ``rpm -qa --qf '%{NAME} %{VERSION}-%{RELEASE}\\n'`` lines: the installed packages.

    dpkg lists removed packages whose configuration remains (``rc``) and names with no version (never
    installed): both are left out. ``dpkg-query: no packages found matching ...`` lines are ignored;
    text with no package line and no such message raises ParseError.
    """
    if not isinstance(text, str):
        raise ParseError("package list must be text")
    packages: list[NvidiaPackage] = []
    recognised = False
    for raw in text.splitlines()[:MAX_LINES]:
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("dpkg-query:", "package ", "warning:")):
            recognised = True  # "no packages found matching", "package x is not installed"
            continue
        fields = line.split()
        status = None
        if manager == "dpkg" and len(fields) in (2, 3) and _DPKG_STATUS.fullmatch(fields[0]):
            status, fields = fields[0], fields[1:]
        if not fields or not _PACKAGE_NAME.match(fields[0]) or len(fields) > 2:
            raise ParseError(f"not a package line: {line[:80]!r}")
        recognised = True
        if status is not None and not dpkg_installed(status):
            continue  # rc, un, pn, iH: not installed
        if len(fields) < 2:
            continue  # dpkg: known but not installed
        name = dpkg_package_name(fields[0]) if manager == "dpkg" else fields[0]
        packages.append(NvidiaPackage(name, fields[1], manager))
        if len(packages) >= MAX_PACKAGES:
            break
    if not recognised:
        raise ParseError("no package lines")
    return tuple(packages)


# --------------------------------------------------------------------------- Docker and the toolkit


def parse_docker_runtimes(text: str) -> tuple[str, ...]:
    """``docker info --format '{{json .Runtimes}}'``: ``{"nvidia": {...}, "runc": {...}}`` -> the names."""
    if not isinstance(text, str):
        raise ParseError("docker info output must be text")
    try:
        data = json.loads(text.strip() or "null")
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"docker info: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ParseError("docker info: .Runtimes is not an object")
    return tuple(sorted(str(name) for name in data))


def parse_daemon_json(text: str) -> tuple[tuple[str, ...], str | None]:
    """``/etc/docker/daemon.json``: the runtimes it adds and its ``default-runtime``."""
    if not isinstance(text, str):
        raise ParseError("daemon.json must be text")
    try:
        data = json.loads(text.strip() or "{}")
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"daemon.json: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ParseError("daemon.json is not an object")
    runtimes = data.get("runtimes", {})
    if not isinstance(runtimes, dict):
        raise ParseError("daemon.json: runtimes is not an object")
    default = data.get("default-runtime")
    return tuple(sorted(str(name) for name in runtimes)), (default if isinstance(default, str) else None)


# `docker info`'s text form (https://docs.docker.com/reference/cli/docker/system/info/): "Key: value" lines under
# "Server:", indented by one blank since Docker 17.06 and flush before it; "WARNING: ..." lines on their own. No check
# judges those warnings (swap limits, seccomp, bridge-nf-call): the parser does not keep them, so analyze reads them as
# any pasted line (a warning a catalogue row knows is its row's), never as read by the docker-info parser.
_DOCKER_INFO_KEYS = {"Runtimes": "docker_runtimes", "Default Runtime": "docker_default_runtime",
                     "Server Version": "docker_server_version", "Cgroup Driver": "docker_cgroup_driver",
                     "Cgroup Version": "docker_cgroup_version"}


def parse_docker_info(text: str) -> HostEnvironment:
    """``docker info`` (the whole report or ``| grep -i runtime``): the daemon's runtimes, default runtime, server
    version, cgroup driver and version. The JSON of ``--format '{{json .Runtimes}}'`` too."""
    if not isinstance(text, str):
        raise ParseError("docker info output must be text")
    if text.lstrip().startswith("{"):
        return HostEnvironment(docker=True, docker_runtimes=parse_docker_runtimes(text),
                               docker_runtimes_source="docker info")
    values: dict[str, Any] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("WARNING:"):
            continue
        key, colon, value = line.partition(":")
        name = _DOCKER_INFO_KEYS.get(key.strip()) if colon else None
        if name is None or name in values:
            continue  # the first value wins: a client section or a second paste does not overwrite the server's
        values[name] = tuple(sorted(set(value.split()))) if name == "docker_runtimes" else (value.strip() or None)
    if not values:
        raise ParseError("no Runtimes, Default Runtime or Server Version line")
    if "docker_runtimes" in values:
        values["docker_runtimes_source"] = "docker info"
    return HostEnvironment(docker=True, **values)


_CTK_VERSION = lazy_re(r"NVIDIA Container (?:Toolkit|Runtime)(?: CLI| Hook)? version\s+v?(\d+(?:\.\d+)+\S*)",
                          re.IGNORECASE)


def parse_nvidia_ctk_version(text: str) -> str:
    """``nvidia-ctk --version`` -> ``1.14.3`` (from "NVIDIA Container Toolkit CLI version 1.14.3")."""
    if not isinstance(text, str):
        raise ParseError("nvidia-ctk output must be text")
    match = _CTK_VERSION.search(text)
    if match is None:
        raise ParseError("no NVIDIA Container Toolkit version")
    return match[1]


_CGROUP_RUNTIMES = (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                    ("containerd", "containerd"), ("lxc", "lxc"))


def container_from_cgroup(text: str) -> str | None:
    """``/proc/1/cgroup`` (cgroup v1, or v2 without a cgroup namespace): which container runtime runs
    PID 1, or None. Each line is ``id:controllers:path``; anything else raises ParseError."""
    if not isinstance(text, str):
        raise ParseError("cgroup file must be text")
    lines = [line for line in text.splitlines()[:MAX_LINES] if line.strip()]
    if not lines or not all(re.match(r"^\d+:[^:]*:", line) for line in lines):
        raise ParseError("not a /proc/<pid>/cgroup file")
    for line in lines:
        path = line.split(":", 2)[2]
        for marker, runtime in _CGROUP_RUNTIMES:
            if marker in path:
                return runtime
    return None


# --------------------------------------------------------------------------- driver parameters

_PARAM = lazy_re(r"^(?P<key>[A-Za-z][A-Za-z0-9_]*):\s*(?P<value>.*?)\s*$")


def parse_driver_params(text: str) -> dict[str, str]:
    """``/proc/driver/nvidia/params``: ``EnableMSI: 1`` lines -> {"EnableMSI": "1"}; string values lose
    their quotes (``RegistryDwords: ""`` -> ""). ParseError when no line has that form."""
    if not isinstance(text, str):
        raise ParseError("driver parameters must be text")
    params: dict[str, str] = {}
    for line in text.splitlines()[:MAX_LINES]:
        match = _PARAM.match(line.strip())
        if match and match["key"] not in params:
            value = match["value"]
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            params[match["key"]] = value
    if not params:
        raise ParseError("no 'Name: value' driver parameter lines")
    return params


# --------------------------------------------------------------------------- storage


def _unescape_mount(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def parse_mounts(text: str) -> tuple[MountEntry, ...]:
    """``/proc/self/mounts``: device, mount point, type and options of each line."""
    if not isinstance(text, str):
        raise ParseError("mounts must be text")
    entries = []
    for line in text.splitlines()[:MAX_LINES]:
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) < 4 or not fields[1].startswith("/"):
            raise ParseError(f"not a mounts line: {line[:80]!r}")
        entries.append(MountEntry(_unescape_mount(fields[0]), _unescape_mount(fields[1]), fields[2],
                                  tuple(o for o in fields[3].split(",") if o)))
    if not entries:
        raise ParseError("no mounts")
    return tuple(entries)


_DF_HEADER = lazy_re(r"^Filesystem\s+(?:1024|1K|512)-blocks\s+Used\s+Avail", re.IGNORECASE)
_DF_LINE = lazy_re(r"^(?P<fs>\S.*?)\s+(?P<size>\d{1,20})\s+(?P<used>\d{1,20})\s+(?P<avail>-?\d{1,20})\s+"
                      r"(?P<pct>\d+%|-)\s+(?P<mount>/.*)$")


def parse_df(text: str) -> tuple[DiskSpace, ...]:
    """``df -P`` (POSIX format, 1024-byte blocks): size and available KiB per mount point."""
    if not isinstance(text, str):
        raise ParseError("df output must be text")
    lines = text.splitlines()[:MAX_LINES]
    start = next((i for i, line in enumerate(lines) if _DF_HEADER.match(line)), None)
    if start is None:
        raise ParseError("no df -P header")
    factor = 0.5 if re.match(r"^Filesystem\s+512-blocks", lines[start], re.IGNORECASE) else 1.0
    found = []
    for line in lines[start + 1:]:
        match = _DF_LINE.match(line.strip())
        if match is None:
            continue  # df: '/mnt/x': Transport endpoint is not connected
        found.append(DiskSpace(match["fs"], match["mount"], int(int(match["size"]) * factor),
                               max(0, int(int(match["avail"]) * factor))))
    return tuple(found)
