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
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpuhealth.evidence import identify, route
from gpuhealth.model import KernelLog, ParseError, SmiReport, Snapshot
from gpuhealth.parsers.capture_bundle import split_capture_bundle

__all__ = ["EvidenceError", "Piece", "Recognised", "analyze_texts", "decode_bytes", "identify", "split_pieces"]

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


@dataclass(frozen=True)
class Recognised:
    piece: str
    kind: str | None
    note: str = ""  # why a recognised piece could not be parsed


def analyze_texts(named_texts: Iterable[tuple[str, str | KernelLog]]) -> tuple[Snapshot, list[Recognised]]:
    """Build one partial snapshot from evidence texts; also say what each piece was taken for."""
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}
    log: list[Recognised] = []
    unrecognized: list[str] = []
    for name, text in named_texts:
        if isinstance(text, KernelLog):  # a large input, already scanned as a stream (evidence_input.py)
            if _merge(fields, "kernel_log", text):
                sources["kernel_log"] = name
            log.append(Recognised(name, "kernel-log", "scanned as a stream"))
            continue
        pieces = split_pieces(name, text)
        container = len(pieces) > 1
        for piece in pieces:
            found_kind = route(None, piece.text)
            if found_kind is None:
                if not container:  # a bug report has many sections we do not read; that is fine
                    unrecognized.append(piece.name)
                log.append(Recognised(piece.name, None))
                continue
            kind = found_kind.name
            try:
                found = found_kind.parse(piece.text, piece.name)
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
    """Combine a parsed value into the snapshot fields; True when it became (part of) the value.

    The richest nvidia-smi report wins; kernel logs are joined; tuples are concatenated (duplicates
    dropped), dicts updated, and a dataclass (install, host_env, cuda...) gets every field the new
    piece knows laid over it. Anything else: the first piece that gave it keeps it.
    """
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
                              module_banners=current.module_banners + value.module_banners,
                              groups=current.groups + value.groups,
                              bytes_scanned=current.bytes_scanned + value.bytes_scanned)
        return True
    if isinstance(current, tuple) and isinstance(value, tuple):
        known = {getattr(v, "address", v) for v in current}  # PCI devices: one per address, first wins
        new = tuple(v for v in value if getattr(v, "address", v) not in known)
        fields[key] = current + new
        return bool(new)
    if isinstance(current, dict) and isinstance(value, dict):
        fields[key] = {**current, **value}
        return True
    if dataclasses.is_dataclass(current) and type(current) is type(value) and key != "smi":
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
             "kernel_log", "os", "cuda")
    missing = {name: "not in the evidence given" for name in names if name not in fields}
    for key, parts in (("install", _INSTALL_PARTS), ("host_env", _ENV_PARTS)):
        given = fields.get(key)
        if given is None:
            continue
        for name, (attribute, what) in parts.items():
            if attribute is None or not getattr(given, attribute):
                missing[name] = f"{what}: not in the evidence given"
    return missing
