"""Loose evidence: recognise what each pasted or attached file is, and build one partial snapshot.

Container formats (``nvidia-bug-report.log``, nvidia_gpu_exporter capture files) are split into
their sections first; every piece is then sniffed on its own. A piece nobody recognises is named in
``Snapshot.unrecognized_files``, never a crash.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpuhealth.model import (
    KernelLog,
    ParseError,
    SmiReport,
    Snapshot,
)
from gpuhealth.parsers.app_log import looks_like_app_log, parse_app_log
from gpuhealth.parsers.capture_bundle import split_capture_bundle
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


def identify(text: str) -> str | None:
    """The kind of evidence ``text`` is, or None. Order matters: the most specific test first."""
    head = text[:8192]
    if "<nvidia_smi_log" in head:
        return "smi-xml"
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
}


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
                    sources[key] = piece.name
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
    return False


def _unavailable(fields: dict[str, Any]) -> dict[str, str]:
    """Loose evidence only covers what was given; say so for everything else."""
    names = ("pci_devices", "driver", "kernel_modules", "device_nodes", "smi", "smi_run", "nvml",
             "kernel_log", "os")
    return {name: "not in the evidence given" for name in names if name not in fields}
