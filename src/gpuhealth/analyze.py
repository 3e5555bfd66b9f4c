"""Loose evidence: recognise what each pasted or attached file is, and build one partial snapshot.

Container formats (``nvidia-bug-report.log``, nvidia_gpu_exporter capture files) are split into
their sections first; every piece is then sniffed on its own. A piece nobody recognises is named in
``Snapshot.unrecognized_files``, never a crash.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpuhealth.model import (
    HostEnvironment,
    InstallState,
    KernelLog,
    ParseError,
    SmiReport,
    Snapshot,
)
from gpuhealth.parsers.app_log import looks_like_app_log, parse_app_log
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.host_env import parse_driver_params, parse_installer_log
from gpuhealth.parsers.install import parse_dkms_status, parse_kernel_cmdline_modules, parse_mokutil_sb_state
from gpuhealth.parsers.kernel_log import detect_log_format, parse_kernel_log
from gpuhealth.parsers.lspci import parse_lspci
from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version
from gpuhealth.parsers.smi_csv import parse_smi_csv
from gpuhealth.parsers.smi_list import parse_smi_list
from gpuhealth.parsers.smi_nvlink import parse_smi_nvlink
from gpuhealth.parsers.smi_query import parse_smi_query
from gpuhealth.parsers.smi_table import parse_smi_table
from gpuhealth.parsers.smi_topo import parse_smi_topo, parse_smi_topo_p2p
from gpuhealth.parsers.smi_xml import parse_smi_xml
from gpuhealth.parsers.system import parse_os_release, parse_proc_modules
from gpuhealth.parsers.torch_env import parse_collect_env

MAX_DECOMPRESSED = 512 * 1024 * 1024  # a gzip bomb stops here
BUG_REPORT_RULE = re.compile(r"^_{20,}\s*$", re.M)
# The richer an nvidia-smi format, the more the checks can say: keep the richest one given.
SMI_RANK = {"xml": 5, "query": 4, "csv": 3, "table": 2, "list": 1}


class EvidenceError(Exception):
    """A file that could not be read at all (missing, unreadable, corrupt gzip)."""


@dataclass(frozen=True)
class Piece:
    name: str  # file name, with the section inside it when split ("bug-report.log: dmesg")
    text: str


def decode_bytes(name: str, data: bytes) -> str:
    """Bytes of an evidence file as text, un-gzipped when it is gzip (bounded against bombs)."""
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
                data = handle.read(MAX_DECOMPRESSED + 1)
        except (OSError, EOFError) as exc:
            raise EvidenceError(f"{name}: corrupt gzip file ({exc})") from exc
        if len(data) > MAX_DECOMPRESSED:
            raise EvidenceError(f"{name}: decompresses to more than {MAX_DECOMPRESSED} bytes; refused")
    return data.decode("utf-8", errors="replace")


def split_pieces(name: str, text: str) -> list[Piece]:
    """A bug report or capture file becomes its sections; anything else stays one piece."""
    head = text[:4096]
    if "nvidia-bug-report" in head or "NVIDIA bug report log" in head:
        return [Piece(f"{name}: {title}", body) for title, body in split_bug_report(text)]
    if head.startswith("#" * 40):
        try:
            return [Piece(f"{name}: {command}", body) for command, body in split_capture_bundle(text).items()]
        except ParseError:
            pass
    return [Piece(name, text)]


def split_bug_report(text: str) -> list[tuple[str, str]]:
    """Sections of ``nvidia-bug-report.log``: a rule of underscores, a title line, then the output."""
    sections = []
    for block in BUG_REPORT_RULE.split(text):
        stripped = block.strip("\n")
        if not stripped.strip():
            continue
        title, _, body = stripped.partition("\n")
        sections.append((title.strip().lstrip("*").strip()[:120], body))
    return sections


# --------------------------------------------------------------------------- sniffing

_LSPCI_LINE = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] \S", re.M)
_SMI_LIST_LINE = re.compile(r"^GPU \d+: .+\(UUID: ", re.M)
_CSV_HEADER = re.compile(r"^\s*[a-z_]+(?:\.[a-z_]+)*(?: \[[^\]]*\])?(?:, *[a-z_]+(?:\.[a-z_]+)*(?: \[[^\]]*\])?)+\s*$")
_PROC_MODULES_LINE = re.compile(r"^\w+ \d+ \d+ \S+ (?:Live|Loading|Unloading) 0x", re.M)
_NVLINK_LINE = re.compile(r"^\s*Link \d+: ", re.M)
_KERNEL_HINT = re.compile(r"NVRM|\bkernel: |^\[\s*\d+\.\d+\]|^<\d>\[|^\d,\d+,\d+,", re.M)


# /proc/driver/nvidia/params names every driver carries one of (352.63's file has all of these).
_PARAM_NAMES = {"EnableMSI", "ModifyDeviceFiles", "DeviceFileUID", "DeviceFileGID", "DeviceFileMode",
                "RegistryDwords", "ResmanDebugLevel", "RmLogonRC", "InitializeSystemMemoryAllocations",
                "UsePageAttributeTable", "EnableGpuFirmware", "AssignGpus", "RmMsg"}
_PARAM_LINE = re.compile(r"^(?P<key>[A-Z][A-Za-z0-9_]*): ?\S*")
# One comma-separated field is ``,[^,:]*`` (no separate ``\s*``: that ambiguity backtracks exponentially
# over a long CSV line that has no colon).
_DKMS_LINE = re.compile(r"^[\w.+-]+(?:/|,\s*)[\w.+~-]+(?:,[^,:]*)*:\s*(?:added|built|installed|broken)\b")
_MOKUTIL = re.compile(r"^\s*SecureBoot (?:enabled|disabled)\s*$|This system doesn't support Secure Boot|"
                      r"EFI variables are not supported on this system", re.M)
_CMDLINE_KEYS = ("BOOT_IMAGE=", "root=", "initrd=")


def _content_lines(text: str, limit: int = 200) -> list[str]:
    """The non-empty lines of a piece, without the ``*** ls: ...`` lines a bug report puts before a file."""
    return [line for line in text[:65536].splitlines()[:limit] if line.strip() and not line.startswith("*** ")]


def _looks_like_params(text: str) -> bool:
    lines = _content_lines(text)
    keys = [m["key"] for m in map(_PARAM_LINE.match, lines) if m]
    return len(keys) == len(lines) >= 3 and len(_PARAM_NAMES & set(keys)) >= 2


def _looks_like_cmdline(text: str) -> bool:
    lines = _content_lines(text, 3)
    if len(lines) != 1 or "\x00" in lines[0]:
        return False
    words = lines[0].split()
    return any(w.startswith(_CMDLINE_KEYS) for w in words) and all("=" in w or w.isprintable() for w in words) \
        and not lines[0].lstrip().startswith(("[", "<"))


def _looks_like_dkms(text: str) -> bool:
    lines = _content_lines(text)
    hits = sum(1 for line in lines if _DKMS_LINE.match(line.strip()))
    return hits >= 1 and hits * 2 >= len(lines)


def identify(text: str) -> str | None:
    """The kind of evidence ``text`` is, or None. Order matters: the most specific test first."""
    head = text[:8192]
    if "<nvidia_smi_log" in head:
        return "smi-xml"
    if any(line.startswith(("nvidia-installer log file", "nvidia-installer command line:"))
           for line in _content_lines(head, 12)):
        return "installer-log"
    if "PyTorch version:" in head and "CUDA" in head:
        return "collect-env"
    if "NVRM version:" in head and len(head.splitlines()) <= 4:
        return "proc-version"
    if "NVIDIA-SMI" in head and ("+----" in head or "|====" in head or "|" in head):
        return "smi-table"
    if "==============NVSMI LOG==============" in head or re.search(r"^\s*Product Name\s+:", head, re.M):
        return "smi-query"
    if _NVLINK_LINE.search(head) or re.search(r"NVLink information|Nvlink queries", head, re.I):
        return "smi-nvlink"
    if _SMI_LIST_LINE.search(head):
        return "smi-list"
    if "GPU0" in head and "CPU Affinity" in head:
        return "smi-topo"
    if "GPU0" in head and re.search(r"\bCNS\b|X\s*=\s*Self", text):
        return "smi-topo-p2p"
    first = head.lstrip().split("\n", 1)[0]
    if _CSV_HEADER.match(first) and ("name" in first or "index" in first or "pci.bus_id" in first):
        return "smi-csv"
    if re.search(r"^Module\s+Size\s+Used by", head, re.M) or _PROC_MODULES_LINE.search(head):
        return "lsmod"
    if re.search(r"^ID=", head, re.M) and re.search(r"^(?:PRETTY_)?NAME=", head, re.M):
        return "os-release"
    if _LSPCI_LINE.search(head) and re.search(r"controller|bridge|Device", head, re.I):
        return "lspci"
    if len(head) < 4096 and _MOKUTIL.search(head) and len(_content_lines(head)) <= 4:
        return "mokutil"
    if _looks_like_params(head):
        return "driver-params"
    if _looks_like_cmdline(head):
        return "kernel-cmdline"
    if _looks_like_dkms(head):
        return "dkms-status"
    if _KERNEL_HINT.search(text[:200_000]) or "NVRM" in text or _timestamped_log(head):
        return "kernel-log"
    if re.search(r"^\s*(?:Pending Page Blacklist|Remapped Rows|Retired Pages|SRAM Uncorrectable)", head, re.M):
        return "smi-query"
    if looks_like_app_log(text):
        return "app-log"
    return None


def _timestamped_log(head: str) -> bool:
    try:
        return detect_log_format(head) != "plain"
    except ParseError:
        return False


PARSERS: dict[str, Callable[[Piece], dict[str, Any]]] = {
    "smi-xml": lambda p: {"smi": parse_smi_xml(p.text)},
    "smi-query": lambda p: {"smi": parse_smi_query(p.text)},
    "smi-table": lambda p: {"smi": parse_smi_table(p.text)},
    "smi-csv": lambda p: {"smi": parse_smi_csv(p.text)},
    "smi-list": lambda p: {"smi": parse_smi_list(p.text)},
    "smi-topo": lambda p: {"topology": parse_smi_topo(p.text)},
    "smi-topo-p2p": lambda p: {"topology": parse_smi_topo_p2p(p.text)},
    "smi-nvlink": lambda p: {"nvlink": parse_smi_nvlink(p.text)},
    "collect-env": lambda p: {"torch": parse_collect_env(p.text)},
    "proc-version": lambda p: {"driver": parse_proc_driver_version(p.text)},
    "lspci": lambda p: {"pci_devices": parse_lspci(p.text)},
    "lsmod": lambda p: {"kernel_modules": parse_proc_modules(p.text)},
    "os-release": lambda p: {"os": parse_os_release(p.text)},
    "kernel-log": lambda p: {"kernel_log": parse_kernel_log(p.text, p.name)},
    "app-log": lambda p: {"app_errors": parse_app_log(p.text)},
    "driver-params": lambda p: {"host_env": HostEnvironment(driver_params=parse_driver_params(_body(p.text)))},
    "installer-log": lambda p: _installer_log(p),
    "kernel-cmdline": lambda p: _kernel_cmdline(p),
    "dkms-status": lambda p: {"install": InstallState(dkms=parse_dkms_status(_dkms_lines(p.text)))},
    "mokutil": lambda p: {"install": InstallState(secure_boot=parse_mokutil_sb_state(_body(p.text)),
                                                  secure_boot_source="mokutil --sb-state")},
}
INSTALLER_LOG = "/var/log/nvidia-installer.log"


def _body(text: str) -> str:
    """A piece without the ``*** ls: ...`` lines a bug report puts before each file it copies."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("*** "))


def _dkms_lines(text: str) -> str:
    """Only the status lines: parse_dkms_status's pattern backtracks badly on long lines without a colon."""
    return "\n".join(line.strip() for line in _content_lines(text, 1000) if _DKMS_LINE.match(line.strip()))


def _installer_log(piece: Piece) -> dict[str, Any]:
    version, result, lines = parse_installer_log(_body(piece.text))
    return {"host_env": HostEnvironment(runfile_log=INSTALLER_LOG, runfile_version=version, runfile_result=result,
                                        runfile_lines=lines)}


def _kernel_cmdline(piece: Piece) -> dict[str, Any]:
    line = _content_lines(piece.text, 3)[0].strip()
    blacklisted, options = parse_kernel_cmdline_modules(line)
    return {"host_env": HostEnvironment(kernel_cmdline=line),
            "install": InstallState(kernel_cmdline_blacklisted=blacklisted,
                                    kernel_cmdline_nouveau_options=options.get("nouveau"))}


@dataclass(frozen=True)
class Recognised:
    piece: str
    kind: str | None
    note: str = ""  # why a recognised piece could not be parsed


def analyze_texts(named_texts: Iterable[tuple[str, str]]) -> tuple[Snapshot, list[Recognised]]:
    """Build one partial snapshot from evidence texts; also say what each piece was taken for."""
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}
    log: list[Recognised] = []
    unrecognized: list[str] = []
    for name, text in named_texts:
        pieces = split_pieces(name, text)
        container = len(pieces) > 1
        for piece in pieces:
            kind = identify(piece.text)
            if kind is None:
                if not container:  # a bug report has many sections we do not read; that is fine
                    unrecognized.append(piece.name)
                log.append(Recognised(piece.name, None))
                continue
            try:
                found = PARSERS[kind](piece)
            except ParseError as exc:
                log.append(Recognised(piece.name, kind, f"could not parse {kind}: {exc}"))
                if not container:
                    unrecognized.append(f"{piece.name} (looked like {kind}, but: {exc})")
                continue
            for key, value in found.items():
                if _merge(fields, key, value):
                    combined = key in ("host_env", "install") and key in sources
                    sources[key] = f"{sources[key]}, {piece.name}" if combined else piece.name
            log.append(Recognised(piece.name, kind))
    snapshot = Snapshot(origin="evidence", sources=sources, unrecognized_files=tuple(unrecognized),
                        unavailable=_unavailable(fields), **fields)
    return snapshot, log


def _merge(fields: dict[str, Any], key: str, value: Any) -> bool:
    """Combine a parsed value into the snapshot fields; True when it became (part of) the value."""
    current = fields.get(key)
    if current is None:
        fields[key] = value
        return True
    if key == "smi" and isinstance(value, SmiReport) and SMI_RANK.get(value.format, 0) > SMI_RANK.get(
            current.format, 0):
        fields[key] = value
        return True
    if key == "kernel_log" and isinstance(value, KernelLog):
        fields[key] = replace(current, source=f"{current.source}, {value.source}",
                              lines_scanned=current.lines_scanned + value.lines_scanned,
                              events=current.events + value.events,
                              module_banners=current.module_banners + value.module_banners)
        return True
    if key in ("app_errors", "nvlink"):
        fields[key] = tuple(current) + tuple(value)
        return True
    if key in ("host_env", "install") and isinstance(value, (HostEnvironment, InstallState)):
        fields[key] = _overlay(current, value)
        return True
    return False


def _overlay(current: Any, value: Any) -> Any:
    """``current`` with every field ``value`` knows (not its default) taken from ``value``."""
    changes = {}
    for f in dataclasses.fields(value):
        new = getattr(value, f.name)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if new != default:
            changes[f.name] = new
    return replace(current, **changes)


# Parts of ``install`` and ``host_env`` pasted evidence may lack: (attribute that holds it, what is missing).
_INSTALL_PARTS = {
    "install_modprobe": (None, "the modprobe.d files"), "install_initramfs": (None, "the initramfs"),
    "install_initramfs_listing": (None, "the initramfs listing"), "install_headers": (None, "the kernel headers"),
    "install_kernel": (None, "the running kernel's release"), "install_kernels": (None, "the installed kernels"),
    "install_gcc": (None, "gcc --version"), "install_make": (None, "make --version"),
    "install_secure_boot": ("secure_boot", "mokutil --sb-state"), "install_dkms": ("dkms", "dkms status")}
_ENV_PARTS = {
    "env_default_target": ("default_target", "systemctl get-default"),
    "env_kernel_cmdline": ("kernel_cmdline", "/proc/cmdline"),
    "env_runfile": ("runfile_log", "/var/log/nvidia-installer.log"),
    "env_packages": (None, "the installed nvidia packages (dpkg-query / rpm -qa)"),
    "env_nvidia_ctk": (None, "nvidia-ctk --version"), "env_docker_info": (None, "docker info"),
    "env_driver_params": ("driver_params", "/proc/driver/nvidia/params"),
    "env_mounts": (None, "/proc/self/mounts"), "env_disk_space": (None, "df -P -l")}


def _unavailable(fields: dict[str, Any]) -> dict[str, str]:
    """Loose evidence only covers what was given; say so for everything else."""
    names = ("pci_devices", "driver", "kernel_modules", "device_nodes", "smi", "smi_run", "nvml",
             "kernel_log", "os")
    missing = {name: "not in the evidence given" for name in names if name not in fields}
    for key, parts in (("install", _INSTALL_PARTS), ("host_env", _ENV_PARTS)):
        given = fields.get(key)
        if given is None:
            continue
        for name, (attribute, what) in parts.items():
            if attribute is None or not getattr(given, attribute):
                missing[name] = f"{what}: not in the evidence given"
    return missing
