"""Kernel log (dmesg, journalctl -k, syslog, /dev/kmsg, pstore) -> the NVIDIA-relevant events in it.

Line forms are from NVIDIA's Xid catalogue (sources OGKM, GPUD, XIDCAT) and the corpus under
``tests/data/corpus`` (gpud, ml-engineering, nvidia-bug-report-352.63).

Speed: a production kernel log can be gigabytes, and almost none of it is about the GPU. The scan
never runs a regular expression per line. It works on bytes: ``bytes.find`` locates the few keywords
(``NVRM``, ``nvidia-nvswitch``), each hit is widened to its line, ``count(b"\\n")`` between hits gives line
numbers, and only those lines are decoded and parsed. Files are read in reusable chunks (no copy of
the whole file) and, when they are large, split between forked worker processes.

Event kinds (``KernelEvent.kind``) and what each carries besides timestamp, raw line and line number:

``xid``
    ``xid``, ``pci_address``, ``pid``, ``process``; ``message`` is the driver's text after the
    code; ``detail`` holds MIG instance tags (``GPU-I:05 GPU-CI:01``) and/or
    ``caused by previous Xid <n>`` (Xid 45).
``sxid``
    NVSwitch SXid: ``xid`` is the SXid code, ``pci_address`` the switch, ``detail`` the switch device
    (``nvidia-nvswitch3``). The "Severity ..." and "Data {...}" lines that follow an SXid are folded
    into it.
``fallen_off_bus``
    One event per GPU (the first report; repeats and multi-line blocks are folded), ``xid`` = 79
    because NVIDIA says to treat it as Xid 79; ``detail`` is the PCI ID (``10de:26b5``) when printed.
``rminit_failed``
    ``detail`` is the code in parentheses (``0x26:0xfffff90a:983``) or ``minor <n>`` on old drivers.
``api_mismatch``
    ``detail`` is ``client <version>, module <version>``; ``process``/``pid`` name the client.
``bar``
    Invalid BAR / ``request_mem_region failed`` / 64-bit BAR above 4 GB without a bridge window, and
    the PCI core's "BAR n: can't assign/reserve" lines for a GPU the driver also complained about;
    ``detail`` says which BAR and how.
``probe``
    The driver attached to no GPU ("probe routine was not called", "No NVIDIA devices probed", "No
    NVIDIA GPU found", a GPU not supported by this release or flavour, a GPU owned by another
    driver); ``detail`` says which.
``gsp``
    GSP firmware errors that are not an Xid line (RPC timeouts, firmware load or boot failures).
``module_signature``
    The kernel refused an unsigned nvidia module, or tainted for it ("module verification failed",
    "Key was rejected", "Required key not available"); only in logs up to 64 MiB (second pass).
``nvrm``
    Other NVRM lines that clearly report an error (the words error/failed/fatal/timeout or an
    ``NV_ERR_`` status); assertions and informational lines are left out.
``aer``
    A PCIe Advanced Error Reporting error (the PCI core's ``AER:`` lines): ``pci_address`` is the
    device that reported it (the source named in ``... error received: <address>``, or the device
    prefix of ``<driver> <address>: AER: PCIe Bus Error: severity=...``), ``detail`` the severity:
    ``Corrected``, ``Uncorrected (Non-Fatal)`` or ``Uncorrected (Fatal)`` (the 6.x kernels' spelling
    ``Correctable``/``Uncorrectable`` is mapped to these). A "received" line and the "PCIe Bus Error"
    line right after it for the same device and severity are one event (the error's type joins the
    message). AER lines about bridges are kept too: the checks decide which addresses are GPUs.

For every kind ``message`` is the text (multi-line blocks joined, ``NVRM:`` tags removed) and
``line`` the first raw line of the event.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pickle
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from gpuhealth.model import KernelEvent, KernelLog, ParseError, normalize_pci_address

__all__ = [
    "FORMATS",
    "detect_log_format",
    "module_banner_version",
    "parse_kernel_log",
    "parse_kernel_log_file",
]

FORMATS = ("dmesg", "dmesg-iso", "dmesg-ctime", "journal", "syslog", "kmsg", "pstore", "plain")

# The keywords the scan looks for; every event of interest is on a line holding one of them. SXid
# lines always start "nvidia-nvswitchN: SXid (PCI:" (OGKM common_nvswitch.h); the longer keyword is
# found faster (bytes.find skips further) than "SXid", and its extra lines are few.
# ": AER: " finds the PCI core's Advanced Error Reporting lines (pci_name(dev) + ": AER: ..."); the longer
# needle is found faster than "AER:".
_NEEDLES = (b"NVRM", b"nvidia-nvswitch", b": AER: ")
# Module-signature refusals carry no NVRM tag (the module never loaded). They are looked for in a second
# pass, only in logs small enough that it costs nothing (a live dmesg buffer, a pasted log).
_SIGNATURE_NEEDLES = (b"module verification failed", b"Key was rejected", b"Required key not available",
                      b"not signed with a trusted key", b"unsigned module loading is restricted")
_SIGNATURE_SCAN_MAX_BYTES = 64 * 1024 * 1024
_HEAD_BYTES = 64 * 1024  # format detection and binary check look at this much text
_HEAD_LINES = 400
_CHUNK = 16 * 1024 * 1024  # file read size: big enough to amortise, small enough to stay cheap
_PARALLEL_MIN_BYTES = 64 * 1024 * 1024  # below this, one process is faster than forking
_PARALLEL_SEGMENT = 32 * 1024 * 1024  # at least this much work per worker
_MAX_WORKERS = 8
_MAX_LINE = 64 * 1024  # a "line" longer than this is cut (raw line and parsing)
_LOOKAHEAD_LINES = 3  # lines kept after a hit that may continue without an NVRM tag

# --------------------------------------------------------------------------- line prefixes

_FACILITY = re.compile(r"[a-z][a-z0-9]{1,7}\s*:\s*[a-z]{3,6}\s*:\s?")  # dmesg --decode: "kern  :warn  : "
_P_KMSG = re.compile(r"(?P<prio>\d{1,4}),(?P<seq>\d{1,20}),(?P<usec>\d{1,20}),[^;\n]{0,16};")
_P_PSTORE = re.compile(r"<(?P<lvl>\d{1,4})>\[\s*(?P<ts>\d{1,12}\.\d{1,9})\]\s?")
_P_DMESG = re.compile(r"\[\s*(?P<ts>[+-]?\d{1,12}\.\d{1,9})\]\s?")
_P_DMESG_CTIME = re.compile(r"\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?")
_P_DMESG_ISO = re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}(?:[+-]\d\d:?\d\d|Z)?)\s")
_P_JOURNAL_MONO = re.compile(r"\[\s*(?P<ts>\d{1,12}\.\d{1,9})\]\s+\S+\s+kernel:\s?")
_P_SYSLOG = re.compile(
    r"(?P<ts>[A-Z][a-z]{2} (?P<day>[ \d]\d) \d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?P<tz>Z|[+-]\d\d:?\d\d)?)"
    r"\s+(?P<host>[^\s:]\S{0,254})\s+(?P<tag>[^\s:\[]{1,64})(?:\[\d{1,10}\])?:\s?"
)
_JOURNAL_MARKER = re.compile(r"-- (?:Logs begin|Journal begins|Boot [0-9a-f]|No entries|Reboot)")
_CALLER_ID = re.compile(r"\[\s*[TC]\d{1,10}\]\s?")  # CONFIG_PRINTK_CALLER: "[ T1234] "
_KMSG_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")

# --------------------------------------------------------------------------- event patterns

_ADDR = r"(?:PCI:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = re.compile(r"NVRM: Xid \((?P<dev>[^)\n]{0,160})\):?\s*(?P<code>\d{1,6})\b,?\s*(?P<rest>.*)", re.S)
_SXID = re.compile(
    r"(?:(?P<switch>nvidia-nvswitch\d{0,4}):\s*)?SXid \((?P<dev>[^)\n]{0,80})\):?\s*(?P<code>\d{1,6})\b,?\s*"
    r"(?P<rest>.*)", re.S)
_SXID_MORE = re.compile(r"Severity \d|Data \{")
_PID_NAME = re.compile(
    r"pid=(?P<pid>'?<unknown>'?|'?\d{1,10}'?)(?:,\s*name=(?P<name>[^,]*?))?(?:,\s*|\s*$)(?P<msg>.*)", re.S)
_MIG = re.compile(r"\bGPU-C?I:\s?\w{1,8}")
_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,6})")
_BANNER = re.compile(r"NVRM: loading NVIDIA UNIX\b.*")
_BANNER_VERSION = re.compile(
    r"NVIDIA UNIX (?:(?P<open>Open )?Kernel Module for \S+|\S+ Kernel Module)\s+(?P<version>\d+(?:\.\d+)+)")
_ANY_ADDR = re.compile(r"(?:PCI:)?(?P<addr>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
_THE_GPU = re.compile(r"The NVIDIA GPU (?P<addr>" + _ADDR + r")")
_GPU_AT = re.compile(r"\bGPU (?:at )?(?P<addr>" + _ADDR + r")")
_PCI_ID = re.compile(r"PCI ID: (?P<id>[0-9a-fA-F]{4}:[0-9a-fA-F]{4})")
_FALLEN = re.compile(r"(?:fallen off|lost from) the bus", re.I)
_RMINIT = re.compile(r"RmInitAdapter failed!?(?:\s*\((?P<code>[^)\n]{1,64})\))?")
_RM_INIT_MINOR = re.compile(r"rm_init_adapter failed(?:,| for)? (?:for )?device (?:bearing )?minor number (\d{1,4})")
_API_MISMATCH = re.compile(
    r"API mismatch: the client(?: '(?P<client>[^'\n]{0,64})')?(?: \(pid (?P<pid>\d{1,10})\))? has the version "
    r"(?P<client_version>[^\s,]{1,32}?),? but this kernel module has the version (?P<module_version>[^\s,]{1,32}?)"
    r"\.?(?=\s|$)")
_BAR_INVALID = re.compile(r"PCI I/O region assigned to your NVIDIA device is invalid")
_BAR_SIZE = re.compile(r"\bBAR(?P<n>\d) is (?P<size>\d{1,9}[MKG]) @ (?P<at>0x[0-9a-fA-F]{1,16})")
_REQUEST_MEM = re.compile(r"request_mem_region failed for (?P<size>\d{1,9}[MKG]?) @ (?P<at>0x[0-9a-fA-F]{1,16})")
_BAR_64 = re.compile(r"64-bit BAR mapped above 4GB")
_PCI_BAR_FAIL = re.compile(
    r"(?P<addr>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): (?:BAR ?(?P<n>\d{1,2})\b[^\n]{0,200}?"
    r"(?:can't assign|cannot assign|failed to assign|no space|can't reserve|cannot reserve|failed to reserve"
    r"|can't claim|no compatible bridge window)|[^\n]{0,120}(?:can't|cannot|unable to) reserve BAR ?(?P<n2>\d{1,2}))",
    re.I)
_PROBE = (
    (re.compile(r"probe routine was not called for (\d{1,4}) device"), "probe routine not called for {0} device(s)"),
    (re.compile(r"probe routine failed for (\d{1,4}) device"), "probe routine failed for {0} device(s)"),
    (re.compile(r"No NVIDIA devices probed"), "no NVIDIA devices probed"),
    (re.compile(r"None of the NVIDIA devices were initialized"), "no NVIDIA device initialised"),
    (re.compile(r"No NVIDIA (?:GPU|graphics adapter) found"), "no NVIDIA GPU found"),
    (re.compile(r"ignoring the legacy GPU"), "legacy GPU ignored by this driver"),
    (re.compile(r"is already bound to (\S{1,32}?)\.?(?:\s|$)"), "GPU already bound to {0}"),
)
_UNSUPPORTED_OPEN = re.compile(r"not supported by open nvidia\.ko")
_UNSUPPORTED_RELEASE = re.compile(r"not supported by the\s+NVIDIA (\S{1,32}) driver release")
_GSP = re.compile(r"gsp", re.I)
_GSP_ERROR = re.compile(
    r"\b(?:time ?out|timed out|fail(?:s|ed|ure)?|errors?|cannot|can't|unable|not found|no firmware|unexpected"
    r"|needs to be reset|halt(?:ed)?|crash(?:ed)?)\b", re.I)
_NVRM_ERROR = re.compile(r"\b(?:errors?|failed|failure|fatal|timed out|timeout)\b|\bNV_ERR_[A-Z_]{3,}", re.I)
_NVRM_NOISE = re.compile(r"nvAssert|nvCheck|Assertion failed|assert(?:ion)? fail", re.I)
_AER_SEVERITY = r"Corrected|Correctable|Uncorrected \((?:Non-Fatal|Fatal)\)|Uncorrectable \((?:Non-Fatal|Fatal)\)"
_AER_RECEIVED = re.compile(
    r"AER: (?P<multi>Multiple )?(?P<sev>" + _AER_SEVERITY + r") error (?:message )?received(?: from)?:?\s*"
    r"(?:(?P<addr>" + _ADDR + r")|id=(?P<id>[0-9a-fA-F]{4}))")
_AER_BUS_ERROR = re.compile(
    r"(?P<dev>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):\s*AER: PCIe Bus Error: "
    r"severity=(?P<sev>" + _AER_SEVERITY + r")(?:,\s*type=(?P<type>[^,\n]{1,40}))?")
_AER_FOLD_LINES = 3  # a "PCIe Bus Error" line this close after a "received" line continues it
# Messages the driver prints over several lines ("NVRM: " on each); other lines are events on their own.
_JOINABLE = re.compile(r"The NVIDIA GPU|API mismatch|PCI I/O region assigned|64-bit BAR|request_mem_region"
                       r"|probe routine")
_BLOCK_START = re.compile(
    r"NVRM: (?:Xid|SXid|loading|The NVIDIA|GPU |GPU\d|API mismatch|This PCI|This is a 64-bit|RmInit|"
    r"request_mem_region|No NVIDIA|None of the|Rate limiting|rm_init_adapter)")
_SENTENCE_END = re.compile(r"[.!]\s*$")
_NVRM_TAG = re.compile(r"\s*NVRM:\s?")
_SPACES = re.compile(r"\s+")
_TEXT_BYTES = bytes([9, 10, 11, 12, 13, 27, *range(32, 127), *range(128, 256)])  # everything but controls
_MEANINGFUL = re.compile(rb"[^\x00\s]")

# A log names few distinct devices, many times (an Xid storm repeats one address).
_normalize = functools.lru_cache(maxsize=1024)(normalize_pci_address)


# --------------------------------------------------------------------------- public API


def detect_log_format(text: str | bytes) -> str:
    """Which kernel-log format ``text`` is: one of ``FORMATS``.

    Looks at the first lines only. "plain" means lines without a recognised timestamp prefix (a paste
    of NVRM lines is still a log). Raises ParseError when the text is empty or binary.
    """
    if isinstance(text, str) and len(text) > 4 * _HEAD_BYTES:
        first = re.search(r"[^\x00\s]", text)
        start = text.rfind("\n", 0, first.start()) + 1 if first else 0
        text = text[start:start + 4 * _HEAD_BYTES]  # only the head is looked at: do not encode the rest
    return _detect(_head(_as_bytes(text)))


def parse_kernel_log(data: str | bytes, source: str = "", *, workers: int | None = None) -> KernelLog:
    """Find the NVIDIA-relevant events in a kernel log held in memory.

    ``workers``: processes to split a large buffer between (Linux, fork); None picks a number from
    the size and the CPUs, 1 disables it. Raises ParseError when ``data`` is empty or binary.
    """
    buf = _as_bytes(data)
    fmt = _detect(_head(buf))
    return _scan_and_build(
        source, fmt, len(buf), buf[-1:], workers,
        scan=lambda start, end, needles: _scan_buffer(buf, start, end, needles),
        bounds=lambda n: _line_bounds(len(buf), n, lambda pos: buf.find(b"\n", pos)),
    )


def parse_kernel_log_file(path: str | os.PathLike[str], source: str | None = None, *,
                          workers: int | None = None) -> KernelLog:
    """Like ``parse_kernel_log`` for a file, read in chunks (never the whole file at once).

    ``source`` defaults to the path. OSError propagates; ParseError when the file is empty or binary.
    """
    path = os.fspath(path)
    source = path if source is None else source
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        head = _file_head(handle.fileno())
        last = os.pread(handle.fileno(), 1, size - 1) if size else b""
        if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16: decode it whole, then scan in memory
            handle.seek(0)
            return parse_kernel_log(handle.read(), source, workers=workers)
    return _scan_and_build(
        source, _detect(head), size, last, workers,
        scan=lambda start, end, needles: _scan_file(path, start, end, needles),
        bounds=lambda n: _file_line_bounds(path, size, n),
    )


def _scan_and_build(source: str, fmt: str, size: int, last_byte: bytes, workers: int | None,
                    scan: Callable[[int, int, Sequence[bytes]], tuple[int, list[_Hit]]],
                    bounds: Callable[[int], list[int]]) -> KernelLog:
    """Scan ``size`` bytes for the needles (split between forked workers when large), then parse the hits.

    ``scan(start, end, needles)`` and ``bounds(n)`` hide whether the log is in memory or in a file.
    """
    n = _worker_count(size, workers)
    parts = None
    if n > 1:
        edges = bounds(n)
        try:
            parts = _fork_map(lambda i: scan(edges[i], edges[i + 1], _NEEDLES), len(edges) - 1)
        except _ParallelFailed:
            parts = None
    if parts is None:
        parts = [scan(0, size, _NEEDLES)]
    newlines, hits = _merge(parts)
    return _build(source, fmt, _line_total(newlines, last_byte), hits,
                  lambda needles: scan(0, size, needles)[1], size)


def module_banner_version(banner: str) -> tuple[str | None, str | None]:
    """(version, "proprietary" | "open") from an NVRM load banner or /proc/driver/nvidia/version line.

    ``NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  ...`` -> ("550.90.07", "proprietary");
    ``NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build ...`` ->
    ("570.158.01", "open"); anything else -> (None, None).
    """
    match = _BANNER_VERSION.search(banner or "")
    if not match:
        return None, None
    return match["version"], "open" if match["open"] else "proprietary"


# --------------------------------------------------------------------------- input checks


def _as_bytes(data: str | bytes) -> bytes:
    if isinstance(data, str):
        buf = data.encode("utf-8", "replace")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        buf = bytes(data) if not isinstance(data, bytes) else data
    else:
        raise TypeError(f"kernel log must be str or bytes, not {type(data).__name__}")
    if buf[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a UTF-16 export (Windows editors, some tools)
        try:
            buf = buf.decode("utf-16").encode("utf-8", "replace")
        except UnicodeDecodeError as exc:
            raise ParseError(f"not a kernel log: undecodable UTF-16 text ({exc.reason})") from None
    return buf


def _head(buf: bytes | bytearray) -> bytes:
    """The first _HEAD_BYTES of text, from the first byte that is not NUL or whitespace."""
    match = _MEANINGFUL.search(buf)
    if match is None:
        raise ParseError("not a kernel log: empty" if not buf.strip(b"\x00") else
                         "not a kernel log: only whitespace")
    start = buf.rfind(b"\n", 0, match.start()) + 1
    return bytes(buf[start:start + _HEAD_BYTES])


def _file_head(fd: int) -> bytes:
    """The file's first meaningful _HEAD_BYTES (skipping NUL padding and blank space)."""
    offset = 0
    while True:
        block = os.pread(fd, _HEAD_BYTES, offset)
        if not block:
            raise ParseError("not a kernel log: empty" if offset == 0 else "not a kernel log: only whitespace")
        match = _MEANINGFUL.search(block)
        if match is not None:
            start = offset + block.rfind(b"\n", 0, match.start()) + 1
            return os.pread(fd, _HEAD_BYTES, start)
        offset += len(block)


def _check_text(head: bytes) -> None:
    """Raise ParseError when the head is binary: control bytes or invalid UTF-8 over 10%."""
    sample = head.replace(b"\x00", b"")
    if not sample.strip():
        raise ParseError("not a kernel log: no text")
    controls = len(sample.translate(None, _TEXT_BYTES))
    invalid = 0 if sample.isascii() else sample.decode("utf-8", "replace").count("\ufffd")
    if (controls + invalid) * 10 > len(sample):
        raise ParseError(f"not a kernel log: binary data ({controls} control bytes, {invalid} invalid UTF-8 "
                         f"sequences in the first {len(sample)} bytes)")


# --------------------------------------------------------------------------- format detection


def _classify(line: str) -> str | None:
    """The format one line is written in, "bsd"/"rfc" for syslog-like lines that could be journalctl."""
    if _P_KMSG.match(line):
        return "kmsg"
    if _P_PSTORE.match(line):
        return "pstore"
    facility = _FACILITY.match(line)
    rest = line[facility.end():] if facility else line
    if _P_DMESG_ISO.match(rest):
        return "dmesg-iso"
    if _P_DMESG_CTIME.match(rest):
        return "dmesg-ctime"
    if _P_JOURNAL_MONO.match(line):
        return "journal"
    if _P_DMESG.match(rest):
        return "dmesg"
    match = _P_SYSLOG.match(line)
    if match:
        day, tz = match["day"], match["tz"]
        if day is not None:
            return "syslog" if day[0] == " " else "journal" if day[0] == "0" else "bsd"
        if tz and ":" in tz:
            return "syslog"
        return "journal" if tz else "rfc"
    if _JOURNAL_MARKER.match(line):
        return "journal-marker"
    return None


def _detect(head: bytes) -> str:
    _check_text(head)
    votes: dict[str, int] = {}
    tags: set[str] = set()
    lines = head.decode("utf-8", "replace").splitlines()[:_HEAD_LINES]
    if len(head) == _HEAD_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    for line in lines:
        kind = _classify(line)
        if kind is None:
            continue
        votes[kind] = votes.get(kind, 0) + 1
        if kind in ("syslog", "journal", "bsd", "rfc"):
            match = _P_SYSLOG.match(line)
            if match:
                tags.add(match["tag"])
    ambiguous = votes.pop("bsd", 0) + votes.pop("rfc", 0)
    marker = votes.pop("journal-marker", 0)
    if ambiguous or marker:
        if votes.get("syslog", 0) > votes.get("journal", 0):
            votes["syslog"] += ambiguous
        elif votes.get("journal", 0) or marker or tags <= {"kernel"}:
            votes["journal"] = votes.get("journal", 0) + ambiguous + marker
        else:
            votes["syslog"] = votes.get("syslog", 0) + ambiguous
    if not votes:
        return "plain"
    order = {name: i for i, name in enumerate(FORMATS)}
    return max(votes, key=lambda name: (votes[name], -order[name]))


# --------------------------------------------------------------------------- scanning (bytes level)


class _Hit(NamedTuple):
    """One line holding a keyword: where it is and what follows it (for untagged continuations)."""

    line_index: int  # 0-based
    raw: bytes
    after: bytes | None = None


def _scan_buffer(buf: bytes | bytearray, start: int, end: int, needles: Sequence[bytes]
                 ) -> tuple[int, list[_Hit]]:
    """Newlines in buf[start:end] and the lines there holding a needle (line_index relative to start)."""
    spans: dict[int, int] = {}
    find, rfind = buf.find, buf.rfind
    for needle in needles:
        pos = find(needle, start, end)
        while pos != -1:
            line_start = rfind(b"\n", start, pos) + 1 or start
            line_end = find(b"\n", pos, end)
            if line_end == -1:
                line_end = end
            spans[line_start] = line_end
            pos = find(needle, line_end, end)
    hits: list[_Hit] = []
    count = buf.count
    newlines = 0
    previous = start
    for line_start in sorted(spans):
        newlines += count(b"\n", previous, line_start)
        previous = line_start
        line_end = spans[line_start]
        raw = bytes(buf[line_start:min(line_end, line_start + _MAX_LINE)])
        after = None
        if b"The NVIDIA GPU" in raw:
            stop = line_end
            for _ in range(_LOOKAHEAD_LINES):
                if stop >= end:
                    break
                nxt = find(b"\n", stop + 1, end)
                stop = end if nxt == -1 else nxt
            after = bytes(buf[line_end + 1:min(stop, line_end + 1 + _MAX_LINE)])
        hits.append(_Hit(newlines, raw, after))
    newlines += count(b"\n", previous, end)
    return newlines, hits


def _scan_file(path: str, start: int, end: int, needles: Sequence[bytes]) -> tuple[int, list[_Hit]]:
    """_scan_buffer over the file's bytes [start, end), read in _CHUNK pieces into one reused buffer."""
    hits: list[_Hit] = []
    newlines = 0
    buf = bytearray(_CHUNK)
    filled = 0
    offset = start
    with open(path, "rb", buffering=0) as handle:
        handle.seek(start)
        while True:
            eof = offset >= end
            if not eof:
                if filled == len(buf):  # a line longer than the buffer: grow it
                    buf.extend(bytes(len(buf)))
                want = min(len(buf) - filled, end - offset)
                with memoryview(buf) as view:
                    got = handle.readinto(view[filled:filled + want]) or 0
                if got == 0:  # the file shrank while being read
                    end = offset
                offset += got
                filled += got
                eof = offset >= end
            cut = filled if eof else buf.rfind(b"\n", 0, filled) + 1
            if cut:
                part_newlines, part_hits = _scan_buffer(buf, 0, cut, needles)
                hits.extend(_Hit(newlines + h.line_index, h.raw, h.after) for h in part_hits)
                newlines += part_newlines
                buf[:filled - cut] = buf[cut:filled]
                filled -= cut
            if eof:
                return newlines, hits


def _merge(parts: Iterable[tuple[int, list[_Hit]]]) -> tuple[int, list[_Hit]]:
    newlines = 0
    hits: list[_Hit] = []
    for part_newlines, part_hits in parts:
        hits.extend(_Hit(newlines + h.line_index, h.raw, h.after) for h in part_hits)
        newlines += part_newlines
    return newlines, hits


def _line_total(newlines: int, last_byte: bytes) -> int:
    return newlines + (1 if last_byte and last_byte != b"\n" else 0)


# --------------------------------------------------------------------------- parallel scanning


class _ParallelFailed(Exception):
    pass


def _worker_count(size: int, workers: int | None) -> int:
    if not hasattr(os, "fork") or not sys.platform.startswith("linux") or threading.active_count() > 1:
        return 1  # forking a threaded process is unsafe
    if workers is not None:
        return max(1, min(workers, _MAX_WORKERS))
    if size < _PARALLEL_MIN_BYTES:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _MAX_WORKERS, size // _PARALLEL_SEGMENT))


def _line_bounds(size: int, n: int, find_newline: Callable[[int], int]) -> list[int]:
    """n+1 offsets 0 = b0 <= b1 ... <= bn = size, each at a line start."""
    bounds = [0]
    for i in range(1, n):
        guess = max(size * i // n, bounds[-1])
        nl = find_newline(max(guess - 1, 0))
        bounds.append(size if nl == -1 else nl + 1)
    bounds.append(size)
    return bounds


def _file_line_bounds(path: str, size: int, n: int) -> list[int]:
    with open(path, "rb", buffering=0) as handle:
        fd = handle.fileno()

        def find_newline(pos: int) -> int:
            while pos < size:
                block = os.pread(fd, 65536, pos)
                if not block:
                    return -1
                at = block.find(b"\n")
                if at != -1:
                    return pos + at
                pos += len(block)
            return -1

        return _line_bounds(size, n, find_newline)


def _fork_map(job: Callable[[int], tuple[int, list[_Hit]]], count: int) -> list[tuple[int, list[_Hit]]]:
    """job(0..count-1), job 0 in this process and the others in forked children; results in order.

    Children send their pickled result through a pipe and leave with os._exit. Any failure raises
    _ParallelFailed (the caller then scans in one process).
    """
    children: list[tuple[int, int]] = []
    try:
        for index in range(1, count):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # child
                status = 1
                try:
                    os.close(read_fd)
                    payload = pickle.dumps(job(index), protocol=pickle.HIGHEST_PROTOCOL)
                    with open(write_fd, "wb") as pipe:
                        pipe.write(payload)
                    status = 0
                finally:
                    os._exit(status)
            os.close(write_fd)
            children.append((pid, read_fd))
        results = [job(0)]
        failed = False
        for pid, read_fd in children:
            with open(read_fd, "rb") as pipe:
                payload = pipe.read()
            _, status = os.waitpid(pid, 0)
            if status != 0 or not payload:
                failed = True
                continue
            results.append(pickle.loads(payload))
        children.clear()
        if failed:
            raise _ParallelFailed
        return results
    except _ParallelFailed:
        raise
    except Exception as exc:  # any trouble in the parallel path means: scan in one process
        raise _ParallelFailed from exc
    finally:
        for pid, read_fd in children:  # only on error: reap what is left
            try:
                os.close(read_fd)
                os.waitpid(pid, 0)
            except OSError:
                pass


# --------------------------------------------------------------------------- parsing the hit lines


@dataclass
class _Line:
    number: int  # 1-based
    raw: str
    timestamp: str | None
    message: str  # after the timestamp/host prefix
    after: str | None = None


def _split_prefix(raw: str) -> tuple[str | None, str]:
    """(timestamp as printed, message) for one line in any supported format."""
    match = _P_KMSG.match(raw)
    if match:
        message = raw[match.end():]
        if "\\x" in message:
            message = _KMSG_ESCAPE.sub(lambda m: chr(int(m[1], 16)), message)
        return f"{int(match['usec']) / 1e6:.6f}", message
    match = _P_PSTORE.match(raw)
    if match:
        return match["ts"], _strip_caller(raw[match.end():])
    facility = _FACILITY.match(raw)
    rest = raw[facility.end():] if facility else raw
    for pattern in (_P_DMESG_ISO, _P_DMESG_CTIME):
        match = pattern.match(rest)
        if match:
            return match["ts"], _strip_caller(rest[match.end():])
    match = _P_JOURNAL_MONO.match(raw)
    if match:
        return match["ts"], raw[match.end():]
    match = _P_DMESG.match(rest)
    if match:
        return match["ts"], _strip_caller(rest[match.end():])
    match = _P_SYSLOG.match(raw)
    if match:
        message = raw[match.end():]
        inner = _P_DMESG.match(message)  # rsyslog can keep the kernel's own "[  12.345678] "
        return match["ts"], _strip_caller(message[inner.end():] if inner else message)
    return None, rest.lstrip()


def _strip_caller(message: str) -> str:
    match = _CALLER_ID.match(message)
    return message[match.end():] if match else message


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")


def _clean(*parts: str) -> str:
    """Join message parts: drop NVRM: tags, collapse whitespace."""
    return _SPACES.sub(" ", " ".join(_NVRM_TAG.sub(" ", part) for part in parts)).strip()


def _address(text: str) -> str | None:
    match = _ANY_ADDR.search(text)
    return _normalize(match["addr"]) if match else None


def _build(source: str, fmt: str, lines_scanned: int, hits: list[_Hit],
           rescan: Callable[[Sequence[bytes]], list[_Hit]], size: int = 0) -> KernelLog:
    lines = []
    for hit in hits:
        raw = _decode(hit.raw)
        timestamp, message = _split_prefix(raw)
        after = _decode(hit.after) if hit.after else None
        lines.append(_Line(hit.line_index + 1, raw, timestamp, message, after))
    events, banners = _events(lines)
    failing = {e.pci_address for e in events if e.kind in ("bar", "rminit_failed", "probe") and e.pci_address}
    if failing:
        events.extend(_pci_bar_events(rescan, failing, {e.line_number for e in events}))
        events.sort(key=lambda e: e.line_number or 0)
    if size <= _SIGNATURE_SCAN_MAX_BYTES:
        events.extend(_signature_events(rescan(_SIGNATURE_NEEDLES)))
        events.sort(key=lambda e: e.line_number or 0)
    return KernelLog(source=source, format=fmt, lines_scanned=lines_scanned, events=tuple(events),
                     module_banners=tuple(banners))


def _signature_events(hits: list[_Hit]) -> list[KernelEvent]:
    """``module_signature`` events: the kernel refused (or tainted for) an unsigned NVIDIA module."""
    events = []
    for hit in hits:
        raw = _decode(hit.raw)
        timestamp, message = _split_prefix(raw)
        if "nvidia" not in message.lower():  # another vendor's module (a Wi-Fi or VirtualBox driver, say)
            continue
        events.append(KernelEvent(kind="module_signature", message=message.strip(), line=raw,
                                  line_number=hit.line_index + 1, timestamp=timestamp))
    return events


def _events(lines: list[_Line]) -> tuple[list[KernelEvent], list[str]]:
    events: list[KernelEvent] = []
    banners: list[str] = []
    fallen: set[str | None] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        consumed = 1
        message = line.message
        event: KernelEvent | None = None
        if "NVRM" not in message and "SXid" not in message and "AER:" in message:
            event = _aer(line)
            previous = events[-1] if events else None
            if (event is not None and previous is not None and previous.kind == "aer"
                    and "PCIe Bus Error" in event.message and "received" in previous.message
                    and "PCIe Bus Error" not in previous.message
                    and (previous.pci_address, previous.detail) == (event.pci_address, event.detail)
                    and 0 < line.number - (previous.line_number or 0) <= _AER_FOLD_LINES):
                events[-1] = dataclasses.replace(previous, message=f"{previous.message}; {event.message}")
                event = None  # the same error, as the device's own line
        elif "NVRM" not in message:
            event = _sxid(line) if "SXid" in message else None
            if event is not None and _SXID_MORE.match(event.message) and events and (
                    events[-1].kind, events[-1].pci_address, events[-1].xid) == ("sxid", event.pci_address,
                                                                                 event.xid):
                event = None  # "Severity 0 Engine instance ..." / "Data {...}" lines continue the first one
        elif "Xid (" in message and (xid_match := _XID.search(message)):
            event = _xid(line, xid_match)
        elif banner := _BANNER.search(message):
            banners.append(banner.group(0).rstrip())
        else:
            block = _block(lines, i)
            consumed = len(block)
            event = _nvrm_event(block)
            if event is not None and event.kind == "fallen_off_bus":
                if event.pci_address in fallen:
                    event = None
                else:
                    fallen.add(event.pci_address)
        if event is not None:
            events.append(event)
        i += consumed
    return events, banners


def _block(lines: list[_Line], i: int) -> list[_Line]:
    """Line i and the NVRM lines right after it that continue the same message (up to 8)."""
    block = [lines[i]]
    if not _JOINABLE.search(lines[i].message) or (
            _SENTENCE_END.search(lines[i].message) and not _wants_more(lines[i].message)):
        return block
    j = i + 1
    while j < len(lines) and len(block) < 8:
        nxt = lines[j]
        if nxt.number != block[-1].number + 1 or "NVRM" not in nxt.message or _BLOCK_START.search(nxt.message):
            break
        block.append(nxt)
        j += 1
        if _SENTENCE_END.search(nxt.message) and not _wants_more(_clean(*(b.message for b in block))):
            break
    return block


def _wants_more(text: str) -> bool:
    """A block whose first sentence ends early but continues (probe / invalid BAR explanations)."""
    return bool(_BAR_INVALID.search(text) and not _BAR_SIZE.search(text))


def _xid(line: _Line, match: re.Match[str]) -> KernelEvent:
    tokens = match["dev"].split()
    address = _normalize(tokens[0]) if tokens else None
    details = [t.replace(": ", ":") for t in _MIG.findall(match["dev"])]
    rest = match["rest"].strip()
    pid = process = None
    who = _PID_NAME.match(rest)
    if who:
        pid_text = who["pid"].strip("'")
        pid = int(pid_text) if pid_text.isdigit() else None
        name = (who["name"] or "").strip()
        process = name if name and name != "<unknown>" else None
        rest = who["msg"].strip()
    parts = [" ".join(details)] if details else []
    caused = _CAUSED_BY.search(rest)
    if caused:
        parts.append(f"caused by previous Xid {caused[1]}")
    return KernelEvent(kind="xid", message=rest, line=line.raw, line_number=line.number,
                       timestamp=line.timestamp, pci_address=address, xid=int(match["code"]), pid=pid,
                       process=process, detail="; ".join(parts) or None)


def _aer_severity(text: str) -> str:
    """The kernel's severity words, in the pre-6.x spelling the report uses."""
    return text.replace("Correctable", "Corrected").replace("Uncorrectable", "Uncorrected")


def _aer(line: _Line) -> KernelEvent | None:
    """A PCIe AER report: the root port's "error received" line or the device's "PCIe Bus Error" line."""
    message = line.message
    at = message.find("AER:")
    text = _clean(message[at + 4:]) if at != -1 else _clean(message)
    received = _AER_RECEIVED.search(message)
    if received:
        if received["addr"]:
            address = _normalize(received["addr"])
        else:  # old kernels: the requester ID, bus << 8 | device << 3 | function (domain not printed)
            rid = int(received["id"], 16)
            address = f"0000:{rid >> 8:02x}:{(rid >> 3) & 0x1f:02x}.{rid & 7}"
        return KernelEvent(kind="aer", message=text, line=line.raw, line_number=line.number,
                           timestamp=line.timestamp, pci_address=address, detail=_aer_severity(received["sev"]))
    bus_error = _AER_BUS_ERROR.search(message)
    if bus_error:
        return KernelEvent(kind="aer", message=text, line=line.raw, line_number=line.number,
                           timestamp=line.timestamp, pci_address=_normalize(bus_error["dev"]),
                           detail=_aer_severity(bus_error["sev"]))
    return None  # the status, mask, header and per-bit lines that follow an error


def _sxid(line: _Line) -> KernelEvent | None:
    match = _SXID.search(line.message)
    if match is None:
        return None
    tokens = match["dev"].split()
    return KernelEvent(kind="sxid", message=match["rest"].strip(), line=line.raw, line_number=line.number,
                       timestamp=line.timestamp, pci_address=_normalize(tokens[0]) if tokens else None,
                       xid=int(match["code"]), detail=match["switch"])


def _nvrm_event(block: list[_Line]) -> KernelEvent | None:
    first = block[0]
    parts = [b.message for b in block]
    if len(block) == 1 and first.after and _THE_GPU.search(first.message) and not _SENTENCE_END.search(
            first.message):
        for following in first.after.splitlines():  # continuation printed without an NVRM tag
            parts.append(_split_prefix(following)[1])
            if _SENTENCE_END.search(following):
                break
    text = _clean(*parts)

    def make(kind: str, address: str | None = None, detail: str | None = None, **extra) -> KernelEvent:
        return KernelEvent(kind=kind, message=text, line=first.raw, line_number=first.number,
                           timestamp=first.timestamp, pci_address=address, detail=detail, **extra)

    the_gpu = _THE_GPU.search(text)
    if the_gpu:
        address = _normalize(the_gpu["addr"])
        if _FALLEN.search(text):
            pci_id = _PCI_ID.search(text)
            return make("fallen_off_bus", address, pci_id["id"].lower() if pci_id else None, xid=79)
        unsupported = _UNSUPPORTED_RELEASE.search(text)
        if _UNSUPPORTED_OPEN.search(text):
            return make("probe", address, "GPU not supported by the open kernel module (no GSP)")
        if unsupported:
            return make("probe", address, f"GPU not supported by the {unsupported[1]} driver release")
    if _FALLEN.search(text):
        gpu_at = _GPU_AT.search(text)
        return make("fallen_off_bus", _normalize(gpu_at["addr"]) if gpu_at else None, None, xid=79)
    rminit = _RMINIT.search(text)
    if rminit:
        gpu_at = _GPU_AT.search(text)
        return make("rminit_failed", _normalize(gpu_at["addr"]) if gpu_at else _address(text),
                    rminit["code"].strip() if rminit["code"] else None)
    minor = _RM_INIT_MINOR.search(text)
    if minor:
        return make("rminit_failed", _address(text), f"minor {minor[1]}")
    mismatch = _API_MISMATCH.search(text)
    if mismatch:
        pid = int(mismatch["pid"]) if mismatch["pid"] else None
        return make("api_mismatch", None,
                    f"client {mismatch['client_version']}, module {mismatch['module_version']}",
                    pid=pid, process=mismatch["client"] or None)
    if "API mismatch" in text:
        return make("api_mismatch", None, None)
    if _BAR_INVALID.search(text) or _BAR_64.search(text) or _REQUEST_MEM.search(text) or _BAR_SIZE.search(text):
        size = _BAR_SIZE.search(text)
        request = _REQUEST_MEM.search(text)
        if request:
            detail = f"request_mem_region failed for {request['size']} @ {request['at']}"
        elif _BAR_64.search(text):
            detail = "64-bit BAR above 4 GB without a matching prefetchable bridge window"
        elif size:
            detail = f"BAR{size['n']} is {size['size']} @ {size['at']}"
        else:
            detail = "PCI I/O region invalid"
        if size and not _BAR_INVALID.search(text) and not size["size"].startswith("0"):
            return None  # a BAR description on its own is not a failure
        return make("bar", _address(text), detail)
    for pattern, template in _PROBE:
        probe = pattern.search(text)
        if probe:
            return make("probe", _address(text), template.format(*probe.groups()))
    if _GSP.search(text) and _GSP_ERROR.search(text):
        return make("gsp", _address(text))
    if _NVRM_ERROR.search(text) and not _NVRM_NOISE.search(text):
        return make("nvrm", _address(text))
    return None


def _pci_bar_events(rescan: Callable[[Sequence[bytes]], list[_Hit]], addresses: set[str],
                    known_lines: set[int | None]) -> list[KernelEvent]:
    """The PCI core's BAR failure lines for GPUs the driver already reported as failing (second pass)."""
    needles = sorted(f"{addr}: ".encode() for addr in addresses)
    events = []
    for hit in rescan(needles):
        number = hit.line_index + 1
        raw = _decode(hit.raw)
        match = _PCI_BAR_FAIL.search(raw)
        if number in known_lines or match is None or "NVRM" in raw:
            continue
        address = _normalize(match["addr"])
        if address not in addresses:
            continue
        timestamp, message = _split_prefix(raw)
        bar = match["n"] or match["n2"]
        events.append(KernelEvent(kind="bar", message=_clean(message), line=raw, line_number=number,
                                  timestamp=timestamp, pci_address=address,
                                  detail=f"BAR {bar}: assignment failed" if bar else "BAR assignment failed"))
    return events
