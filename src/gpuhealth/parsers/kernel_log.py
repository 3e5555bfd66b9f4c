"""Kernel log (dmesg, journalctl -k, syslog, /dev/kmsg, pstore) -> the NVIDIA-relevant events in it.

Line forms are from NVIDIA's Xid catalogue (sources OGKM, GPUD, XIDCAT) and the corpus under
``tests/data/corpus`` (gpud, ml-engineering, nvidia-bug-report-352.63).

Speed: a production kernel log can be gigabytes, and almost none of it is about the GPU. The scan
never runs a regular expression per line. It works on bytes: one pattern anchored on the letter R finds
the lines holding ``NVRM`` or ``: AER: ``, ``bytes.find`` those holding ``nvidia-nvswitch``, ``count(b"\n")``
between hits gives line numbers, and only those lines are decoded and parsed (three passes over the bytes,
see ``_R_LINES``). Files are read in reusable chunks (no copy of the whole file) and, when they are large,
split between forked worker processes; a stream (a pipe, a gzip file, the live ``dmesg``) is read the same
way, in one process (``parse_kernel_log_stream``). A piece dense with driver spam is handled in bulk
(``_Dense``): the known lines are counted per message in C.

Memory: events are aggregated while scanning, never kept per line. Each (kind, device, Xid, message
template) is one ``EventGroup``: a count, the first and last occurrence and up to 8 samples; the template is
the message with numbers, hex values and PCI addresses replaced by ``#``. ``KernelLog.events`` is the
samples. NVRM lines that are no event (the assertion spam of a wedged driver, millions of lines) are
counted as kind "other": a message seen before is recognised by its exact text (or, when digits do not
change its meaning, its digit-normalised text) and not parsed again; in a piece dense with such lines the
known ones are counted in C, per message, without a Python statement per line.

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
    driver), or the driver core's "nvidia: probe of <dev> failed with error -N" for one GPU (second pass, as
    below); ``detail`` says which.
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

import bisect
import collections
import dataclasses
import datetime
import functools
import itertools
import operator
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from gpuhealth.decoding import SNIFF_BYTES, Transcoder, convert, sniff
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import EventGroup, KernelEvent, KernelLog, ParseError, normalize_pci_address

__all__ = [
    "FORMATS",
    "detect_log_format",
    "module_banner_version",
    "parse_kernel_log",
    "parse_kernel_log_file",
    "parse_kernel_log_stream",
    "parse_xid_line",
    "timestamp_seconds",
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
# The driver core's line for a probe that ran and failed carries no NVRM tag either (drivers/base/dd.c: "nvidia: probe
# of <dev> failed with error -N", since Linux 6.x "nvidia <dev>: probe with driver nvidia failed with error -N"); the
# same second pass finds it. Other drivers' probe lines match the needles and are left out by the pattern.
_CORE_PROBE_NEEDLES = (b"probe of ", b"probe with driver nvidia")
# The host beside the GPUs, in the kernel's own words (no NVRM tag), found by the same second pass:
#   kernel/watchdog.c    "watchdog: BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]",
#                        "Watchdog detected hard LOCKUP on cpu %d"
#   kernel/hung_task.c   "INFO: task %s:%d blocked for more than %ld seconds."
#   mm/oom_kill.c        "Out of memory: Killed process %d (%s) ..." (before 4.19 "Kill process %d (%s) score"),
#                        "Memory cgroup out of memory: Killed process ..." for a cgroup's limit
#   drivers/net/ethernet/mellanox/mlx5/core/health.c  "device's health compromised - reached miss count",
#                        "Fatal error %u detected" (mlx5_core_err: "mlx5_core <PCI address>: ..." before it)
_HOST_NEEDLES = (b"soft lockup", b"hard LOCKUP", b"blocked for more than", b"out of memory: Kill",
                 b"Out of memory: Kill", b"health compromised", b"Fatal error")
# The PCI core's own lines about a device's memory windows (BARs), printed before any driver loads and without an
# NVRM tag (Linux drivers/pci): setup-res.c pci_assign_resource ("BAR %d: no space for %pR", "BAR %d: failed to assign
# %pR"; since 6.8 "%s %pR: can't assign; no space", "%s %pR: failed to assign", %s being "BAR 1", "VF BAR 0", "ROM" or
# "bridge window"), pci_claim_resource ("can't claim BAR %d %pR: no compatible bridge window" / "address conflict
# with ..."; since 6.8 "%s %pR: can't claim; ..."), pci_enable_resources ("can't enable device: BAR %d %pR not
# assigned"; since 6.8 "%s %pR: not assigned; can't enable device"), probe.c __pci_read_base ("can't handle BAR larger
# than 4GB", "[Firmware Bug]: reg 0x10: invalid BAR (can't size)"; "can't handle BAR above 4GB" is only followed by a
# reassignment, no failure), iov.c sriov_enable ("not enough MMIO resources for SR-IOV"); probe.c's
# enumeration line "[%04x:%04x] type %02x class %#08x" says which device an address is, and the "assigned" and
# "trying firmware assignment" lines say a failure was overcome (a second pass, pci=realloc, the firmware's address).
_PCI_RESOURCE_NEEDLES = (b"] type 0", b"assign", b"no space for", b"can't claim", b"not claimed", b"can't handle BAR",
                         b"not enough MMIO", b"can't size")
_SECOND_PASS_NEEDLES = _SIGNATURE_NEEDLES + _CORE_PROBE_NEEDLES + _HOST_NEEDLES + _PCI_RESOURCE_NEEDLES
_SIGNATURE_SCAN_MAX_BYTES = 64 * 1024 * 1024
_HEAD_BYTES = 64 * 1024  # format detection and binary check look at this much text
_HEAD_LINES = 400
# a file that needs converting (UTF-16, CR-only line ends) up to this size is converted in memory, larger is streamed
_CONVERT_IN_MEMORY_BYTES = 16 * 1024 * 1024
_CHUNK = 16 * 1024 * 1024  # file read size: big enough to amortise, small enough to stay cheap
_PARALLEL_MIN_BYTES = 64 * 1024 * 1024  # below this, one process is faster than forking
_PARALLEL_SEGMENT = 32 * 1024 * 1024  # at least this much work per worker
_MAX_WORKERS = 8
_MAX_LINE = 64 * 1024  # a "line" longer than this is cut (raw line and parsing)
_LOOKAHEAD_LINES = 3  # lines kept after a hit that may continue without an NVRM tag
# A piece where a needle is found _DENSE_PROBE times within _DENSE_PROBE * _DENSE_BYTES_PER_HIT bytes is
# driver spam: it is split into lines once and each line tested (cheaper than a find per hit).
_DENSE_PROBE = 256
_DENSE_BYTES_PER_HIT = 2048
# Aggregation bounds: memory stays the same whatever the log's length or variety.
_SAMPLES = 8  # events kept per template: the first 7 and the last
_MAX_GROUPS = 4096  # templates; past this, new ones of a kind and device share one "(other messages)" group
_OVERFLOW = "(other messages)"
_TEMPLATE_CHARS = 400
_QUIET_MAX = 65536  # exact NVRM messages known to be no event (the fast path)
_QUIET_NORM_MAX = 4096
_MAX_BANNERS = 64
_MAX_RATES = 1024  # (GPU, Xid) series followed for the hourly peak
# Xid occurrences kept each with its own time and text, the last ones per (GPU, Xid): what the monitor's
# correlation rules count (a repeat on one GPU, Xid 154's recovery action). Bounded: an Xid flood keeps these.
XID_RECENT = 16
_RATE_WINDOW_S = 3600.0
_RATE_MAX = 65536  # lines held in one hour's window; a peak this high is reported as this
_RESCAN_MAX_HITS = 10000  # second-pass hits kept (signature refusals, BAR lines)

# --------------------------------------------------------------------------- line prefixes

_FACILITY = lazy_re(r"[a-z][a-z0-9]{1,7}\s*:\s*[a-z]{3,6}\s*:\s?")  # dmesg --decode: "kern  :warn  : "
_P_KMSG = lazy_re(r"(?P<prio>\d{1,4}),(?P<seq>\d{1,20}),(?P<usec>\d{1,20}),[^;\n]{0,16};")
_P_PSTORE = lazy_re(r"<(?P<lvl>\d{1,4})>\[\s*(?P<ts>\d{1,12}\.\d{1,9})\]\s?")
_P_DMESG = lazy_re(r"\[\s*(?P<ts>[+-]?\d{1,12}\.\d{1,9})\]\s?")
_P_DMESG_CTIME = lazy_re(r"\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?")
_P_DMESG_ISO = lazy_re(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}(?:[+-]\d\d:?\d\d|Z)?)\s")
_P_JOURNAL_MONO = lazy_re(r"\[\s*(?P<ts>\d{1,12}\.\d{1,9})\]\s+\S+\s+kernel:\s?")
_P_SYSLOG = lazy_re(
    r"(?P<ts>[A-Z][a-z]{2} (?P<day>[ \d]\d) \d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?P<tz>Z|[+-]\d\d:?\d\d)?)"
    r"\s+(?P<host>[^\s:]\S{0,254})\s+(?P<tag>[^\s:\[]{1,64})(?:\[\d{1,10}\])?:\s?"
)
_JOURNAL_MARKER = lazy_re(r"-- (?:Logs begin|Journal begins|Boot [0-9a-f]|No entries|Reboot)")


# Necessary tests for the line forms: a line one of these refuses cannot match that form's pattern, which is
# then neither compiled nor run (detection tries every form on a head; parsing tries them on each hit line).
def _may_kmsg(line: str) -> bool:
    return "," in line[1:5] and ";" in line  # "6,1234,..." : 1 to 4 digits, then a comma


def _may_facility(line: str) -> bool:
    return "a" <= line[:1] <= "z" and ":" in line


def _may_iso(text: str) -> bool:
    return text[4:5] == "-" and text[10:11] == "T"  # where "2024-11-15T" has them


def _may_journal_mono(line: str) -> bool:
    return line[:1] == "[" and "kernel:" in line


def _may_syslog(line: str) -> bool:
    return line[3:4] == " " or _may_iso(line)  # "Nov 15 ..." or an ISO date


def _may_bracket(line: str) -> bool:
    return line[:1] == "["


def _may_pstore(line: str) -> bool:
    return line[:1] == "<"


def _may_marker(line: str) -> bool:
    return line[:3] == "-- "


# Each line form's pattern (matched at a line's start) with its guard: tests/test_startup.py checks every guard
# against the lines of the corpus and strings the pattern matches.
LINE_GUARDS = ((_may_kmsg, "_P_KMSG"), (_may_pstore, "_P_PSTORE"), (_may_facility, "_FACILITY"),
               (_may_iso, "_P_DMESG_ISO"), (_may_bracket, "_P_DMESG_CTIME"), (_may_journal_mono, "_P_JOURNAL_MONO"),
               (_may_bracket, "_P_DMESG"), (_may_syslog, "_P_SYSLOG"), (_may_marker, "_JOURNAL_MARKER"),
               (_may_bracket, "_CALLER_ID"))
_CALLER_ID = lazy_re(r"\[\s*[TC]\d{1,10}\]\s?")  # CONFIG_PRINTK_CALLER: "[ T1234] "
_KMSG_ESCAPE = lazy_re(r"\\x([0-9a-fA-F]{2})")

# --------------------------------------------------------------------------- event patterns

_ADDR = r"(?:PCI:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = lazy_re(r"NVRM: Xid \((?P<dev>[^)\n]{0,160})\):?\s*(?P<code>\d{1,6})\b,?\s*(?P<rest>.*)", re.S)
_SXID = lazy_re(
    r"(?:(?P<switch>nvidia-nvswitch\d{0,4}):\s*)?SXid \((?P<dev>[^)\n]{0,80})\):?\s*(?P<code>\d{1,6})\b,?\s*"
    r"(?P<rest>.*)", re.S)
_SXID_MORE = lazy_re(r"Severity \d|Data \{")
_PID_NAME = lazy_re(
    r"pid=(?P<pid>'?<unknown>'?|'?\d{1,10}'?)(?:,\s*name=(?P<name>[^,]*?))?(?:,\s*|(?<!\s)\s*$)(?P<msg>.*)", re.S)
_MIG = lazy_re(r"\bGPU-C?I:\s?\w{1,8}")
_CAUSED_BY = lazy_re(r"caused by previous Xid (\d{1,6})")
_BANNER = lazy_re(r"NVRM: loading NVIDIA UNIX\b.*")
_BANNER_VERSION = lazy_re(
    r"NVIDIA UNIX (?:(?P<open>Open )?Kernel Module for \S+|\S+ Kernel Module)\s+(?P<version>\d+(?:\.\d+)+)")
_ANY_ADDR = lazy_re(r"(?:PCI:)?(?P<addr>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
_THE_GPU = lazy_re(r"The NVIDIA GPU (?P<addr>" + _ADDR + r")")
_GPU_AT = lazy_re(r"\bGPU (?:at )?(?P<addr>" + _ADDR + r")")
_PCI_ID = lazy_re(r"PCI ID: (?P<id>[0-9a-fA-F]{4}:[0-9a-fA-F]{4})")
_FALLEN = lazy_re(r"(?:fallen off|lost from) the bus", re.I)
_RMINIT = lazy_re(r"RmInitAdapter failed!?(?:\s*\((?P<code>[^)\n]{1,64})\))?")
_RM_INIT_MINOR = lazy_re(r"rm_init_adapter failed(?:,| for)? (?:for )?device (?:bearing )?minor number (\d{1,4})")
_API_MISMATCH = lazy_re(
    r"API mismatch: the client(?: '(?P<client>[^'\n]{0,64})')?(?: \(pid (?P<pid>\d{1,10})\))? has the version "
    r"(?P<client_version>[^\s,]{1,32}?),? but this kernel module has the version (?P<module_version>[^\s,]{1,32}?)"
    r"\.?(?=\s|$)")
_BAR_INVALID = lazy_re(r"PCI I/O region assigned to your NVIDIA device is invalid")
_BAR_SIZE = lazy_re(r"\bBAR(?P<n>\d) is (?P<size>\d{1,9}[MKG]) @ (?P<at>0x[0-9a-fA-F]{1,16})")
_REQUEST_MEM = lazy_re(r"request_mem_region failed for (?P<size>\d{1,9}[MKG]?) @ (?P<at>0x[0-9a-fA-F]{1,16})")
_BAR_64 = lazy_re(r"64-bit BAR mapped above 4GB")
_PCI_BAR_FAIL = lazy_re(
    r"(?P<addr>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): (?:BAR ?(?P<n>\d{1,2})\b[^\n]{0,200}?"
    r"(?:can't assign|cannot assign|failed to assign|no space|can't reserve|cannot reserve|failed to reserve"
    r"|can't claim|no compatible bridge window)|[^\n]{0,120}(?:can't|cannot|unable to) reserve BAR ?(?P<n2>\d{1,2}))",
    re.I)
_PROBE = (
    (lazy_re(r"probe routine was not called for (\d{1,4}) device"), "probe routine not called for {0} device(s)"),
    (lazy_re(r"probe routine failed for (\d{1,4}) device"), "probe routine failed for {0} device(s)"),
    (lazy_re(r"No NVIDIA devices probed"), "no NVIDIA devices probed"),
    (lazy_re(r"None of the NVIDIA devices were initialized"), "no NVIDIA device initialised"),
    (lazy_re(r"No NVIDIA (?:GPU|graphics adapter) found"), "no NVIDIA GPU found"),
    (lazy_re(r"ignoring the legacy GPU"), "legacy GPU ignored by this driver"),
    (lazy_re(r"is already bound to (\S{1,32}?)\.?(?:\s|$)"), "GPU already bound to {0}"),
)
_PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")
_CORE_PROBE = lazy_re(r"\bnvidia(?: (?P<dev>" + _ADDR + r"))?: probe (?:of (?P<of>" + _ADDR
                      + r") failed|with driver nvidia failed) with error (?P<err>-?\d{1,6})")
_SIGNATURE_TEXTS = tuple(needle.decode() for needle in _SIGNATURE_NEEDLES)
_UNSUPPORTED_OPEN = lazy_re(r"not supported by open nvidia\.ko")
_UNSUPPORTED_RELEASE = lazy_re(r"not supported by the\s+NVIDIA (\S{1,32}) driver release")
_GSP = lazy_re(r"gsp", re.I)
_GSP_ERROR = lazy_re(
    r"\b(?:time ?out|timed out|fail(?:s|ed|ure)?|errors?|cannot|can't|unable|not found|no firmware|unexpected"
    r"|needs to be reset|halt(?:ed)?|crash(?:ed)?)\b", re.I)
_NVRM_ERROR = lazy_re(r"\b(?:errors?|failed|failure|fatal|timed out|timeout)\b|\bNV_ERR_[A-Z_]{3,}", re.I)
_NVRM_NOISE = lazy_re(r"nvAssert|nvCheck|Assertion failed|assert(?:ion)? fail", re.I)
_AER_SEVERITY = r"Corrected|Correctable|Uncorrected \((?:Non-Fatal|Fatal)\)|Uncorrectable \((?:Non-Fatal|Fatal)\)"
_AER_RECEIVED = lazy_re(
    r"AER: (?P<multi>Multiple )?(?P<sev>" + _AER_SEVERITY + r") error (?:message )?received(?: from)?:?\s*"
    r"(?:(?P<addr>" + _ADDR + r")|id=(?P<id>[0-9a-fA-F]{4}))")
_AER_BUS_ERROR = lazy_re(
    r"(?P<dev>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):\s*AER: PCIe Bus Error: "
    r"severity=(?P<sev>" + _AER_SEVERITY + r")(?:,\s*type=(?P<type>[^,\n]{1,40}))?")
_AER_FOLD_LINES = 3  # a "PCIe Bus Error" line this close after a "received" line continues it
# Messages the driver prints over several lines ("NVRM: " on each); other lines are events on their own.
_JOINABLE = lazy_re(r"The NVIDIA GPU|API mismatch|PCI I/O region assigned|64-bit BAR|request_mem_region"
                       r"|probe routine")
_BLOCK_START = lazy_re(
    r"NVRM: (?:Xid|SXid|loading|The NVIDIA|GPU |GPU\d|API mismatch|This PCI|This is a 64-bit|RmInit|"
    r"request_mem_region|No NVIDIA|None of the|Rate limiting|rm_init_adapter)")
_SENTENCE_END = lazy_re(r"[.!]\s*$")
_NVRM_TAG = lazy_re(r"(?<!\s)\s*NVRM:\s?")
_SPACES = lazy_re(r"\s+")
_TEXT_BYTES = bytes([9, 10, 11, 12, 13, 27, *range(32, 127), *range(128, 256)])  # everything but controls
_MEANINGFUL = lazy_re(rb"[^\x00\s]")
_BLANK = b"\x00 \t\n\r\x0b\x0c"  # what _MEANINGFUL skips: NUL and the bytes \s matches


def _first_meaningful(buf: bytes | bytearray) -> int | None:
    """Where the first byte that is not NUL or whitespace is (None: there is none). The head is looked at
    with a plain strip, so the pattern is compiled only for a piece that starts with 4 KiB of blank."""
    head = bytes(buf[:4096])
    rest = head.lstrip(_BLANK)
    if rest:
        return len(head) - len(rest)
    match = _MEANINGFUL.search(buf, len(head))
    return match.start() if match else None
_NUMBERS = lazy_re(r"0x[0-9a-fA-F]+|\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?|\d+")
_NUMBERS_BYTES = lazy_re(rb"0x[0-9a-fA-F]+|\d+")
# Messages whose meaning depends on a number (a zero-sized BAR, a probe count, a device minor): the fast
# path only counts them by their exact text.
_DIGITS_MATTER = lazy_re(r"BAR|probe|minor|Xid|RmInit|rm_init", re.I)

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
        scan=lambda start, end: _collect_buffer(buf, start, end),
        bounds=lambda n: _line_bounds(len(buf), n, lambda pos: buf.find(b"\n", pos)),
        rescan=lambda needles: _hit_list(_scan_buffer(buf, 0, len(buf), needles)[1])[:_RESCAN_MAX_HITS],
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
        conversion = sniff(os.pread(handle.fileno(), SNIFF_BYTES, 0))
        if conversion is not None:  # UTF-16/32, a byte-order mark, CR-only line ends: converted first
            if size <= _CONVERT_IN_MEMORY_BYTES:  # small: in memory, with the second pass
                return parse_kernel_log(convert(handle.read(), conversion), source, workers=workers)
            return parse_kernel_log_stream(Transcoder(handle, conversion), source)
        head = _file_head(handle.fileno())
        last = os.pread(handle.fileno(), 1, size - 1) if size else b""
    return _scan_and_build(
        source, _detect(head), size, last, workers,
        scan=lambda start, end: _collect_file(path, start, end),
        bounds=lambda n: _file_line_bounds(path, size, n),
        rescan=lambda needles: _scan_file(path, 0, size, needles)[1],
    )


def parse_kernel_log_stream(stream: BinaryIO, source: str, head: bytes | bytearray = b"") -> KernelLog:
    """Like ``parse_kernel_log_file`` for a stream that can be read once (a pipe, standard input, a gzip file).

    ``head``: bytes already read from the stream, scanned first. Memory stays bounded whatever the length;
    the limit on the length is the caller's (a stream whose ``readinto`` raises stops the scan). The PCI
    core's BAR lines are not looked for (that needs a second pass), and module-signature refusals only in
    the first 64 MiB.
    """
    reader = _Prefixed(head, stream)
    first = reader.peek_head(max(_HEAD_BYTES * 2, SNIFF_BYTES))
    conversion = sniff(first)
    if conversion is not None:  # UTF-16/32, a byte-order mark, CR-only line ends: converted as it is read
        reader = _Prefixed(b"", Transcoder(reader, conversion))
        first = reader.peek_head(_HEAD_BYTES * 2)
    fmt = _detect(_head(first))
    newlines, collector, size, last = _collect_reader(reader, None, signature_bytes=_SIGNATURE_SCAN_MAX_BYTES)
    log = collector.result(source, fmt, _line_total(newlines, last), None, size)
    return dataclasses.replace(log, bytes_scanned=size)


def _scan_and_build(source: str, fmt: str, size: int, last_byte: bytes, workers: int | None,
                    scan: Callable[[int, int], tuple[int, _Collector]],
                    bounds: Callable[[int], list[int]],
                    rescan: Callable[[Sequence[bytes]], list[_Hit]]) -> KernelLog:
    """Scan ``size`` bytes, aggregating events as they are found (split between forked workers when large).

    ``scan(start, end)``, ``bounds(n)`` and ``rescan(needles)`` hide whether the log is in memory or in a file.
    """
    n = _worker_count(size, workers)
    parts = None
    if n > 1:
        edges = bounds(n)
        try:
            parts = _fork_map(lambda i: _portable(scan(edges[i], edges[i + 1])), len(edges) - 1)
        except _ParallelFailed:
            parts = None
    if parts is None:
        parts = [scan(0, size)]
    newlines, collector = _merge(parts)
    log = collector.result(source, fmt, _line_total(newlines, last_byte), rescan, size)
    return dataclasses.replace(log, bytes_scanned=size)


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


# --------------------------------------------------------------------------- lines that are no log line

# A line after a newline that cannot start a log line of any format: not blank, not indented (dmesg and journalctl
# indent a record's second line), and not opening as one of the prefixes above (a bracketed timestamp, a pstore
# level, a kmsg record, an ISO or syslog date, dmesg --decode's facility, a journal marker or journalctl -x's "-- "
# catalogue lines). Each alternative is bounded, so the scan is one linear pass that sre runs from newline to
# newline; the few lines it yields are then classified exactly (_classify).
_UNLOGGED = lazy_re(r"\n(?![ \t\r\n]|\[[ \t]{0,12}[+-]?\d|\[[A-Z][a-z]{2} [A-Z]|<\d|\d{1,4},\d|\d{4}-\d\d-\d\dT"
                    r"|[A-Z][a-z]{2} [ \d]\d \d\d:|[a-z][a-z0-9]{1,7}[ \t]{0,8}:[ \t]{0,8}[a-z]{3,6}[ \t]{0,8}:"
                    r"|--(?: |\r?$))([^\n]*)", re.M)
_NON_BLANK = lazy_re(r"\S")
_LETTER = lazy_re(r"[^\W\d_]")
# journalctl's own notice to a user outside the adm/systemd-journal groups (systemd's journalctl.c): no one's words
_JOURNALCTL_HINT = "Hint: "
MAX_UNLOGGED_LINES = 2000  # a "log" with more lines than this outside its records is read no further


def unlogged_runs(text: str) -> list[list[str]]:
    """The lines of a timestamped kernel log that are no log line, in runs: the lines between two log lines (blank
    lines do not part a run). A person's comments between the records of a pasted ``dmesg`` are such lines; so is
    a line of another program's. Not counted: blank and indented lines (a record's continuation), journal markers,
    journalctl's notice, and lines without a letter ("...", "[...]", "-----": marks of a cut, not words). At most
    ``MAX_UNLOGGED_LINES`` lines."""
    runs: list[list[str]] = []
    last_end = -1  # where the last line taken ended
    taken = 0
    for start, stop, raw in _candidates(text):
        line = raw.rstrip("\r")[:_MAX_LINE]
        if _classify(line) is not None or _LETTER.search(line) is None or line.startswith(_JOURNALCTL_HINT):
            continue
        if runs and _NON_BLANK.search(text, last_end, start) is None:
            runs[-1].append(line)  # only blank lines since the last one: the same comment goes on
        else:
            runs.append([line])
        last_end, taken = stop, taken + 1
        if taken >= MAX_UNLOGGED_LINES:
            break
    return runs


# A person's note on a log line, after an arrow pointing back at it ("... Xid 79 ...  <-- here the job died"): no
# kernel message writes one
_ARROWS = ("<--", "<==", "\u2190")
_ANNOTATION = lazy_re(r"(?:<-{2,}|<={2,}|\u2190)[ \t]*(?P<words>[^\n]{1,2000})")


def annotations(text: str) -> list[str]:
    """The notes a person wrote at the end of log lines after an arrow ("<-- this is when it froze"), with a letter in
    them, at most ``MAX_UNLOGGED_LINES``."""
    if not any(arrow in text for arrow in _ARROWS):
        return []
    found = []
    for match in _ANNOTATION.finditer(text):
        words = match["words"].strip()
        if _LETTER.search(words):
            found.append(words)
            if len(found) >= MAX_UNLOGGED_LINES:
                break
    return found


def _candidates(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, line) of each line _UNLOGGED lets through, the first line included (no newline before it)."""
    head_end = text.find("\n")
    head_end = len(text) if head_end < 0 else head_end
    if _UNLOGGED.fullmatch("\n" + text[:min(head_end, _MAX_LINE)]):
        yield 0, head_end, text[:head_end]
    for match in _UNLOGGED.finditer(text):
        yield match.start(1), match.end(1), match[1]


# --------------------------------------------------------------------------- input checks


def _as_bytes(data: str | bytes) -> bytes:
    if isinstance(data, str):
        buf = data.encode("utf-8", "replace")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        buf = bytes(data) if not isinstance(data, bytes) else data
    else:
        raise TypeError(f"kernel log must be str or bytes, not {type(data).__name__}")
    conversion = sniff(buf[:SNIFF_BYTES])  # a UTF-16 export (Windows tools), CR-only line ends
    return buf if conversion is None else convert(buf, conversion)


def _head(buf: bytes | bytearray) -> bytes:
    """The first _HEAD_BYTES of text, from the first byte that is not NUL or whitespace."""
    first = _first_meaningful(buf)
    if first is None:
        raise ParseError("not a kernel log: empty" if not buf.strip(b"\x00") else
                         "not a kernel log: only whitespace")
    start = buf.rfind(b"\n", 0, first) + 1
    return bytes(buf[start:start + _HEAD_BYTES])


def _file_head(fd: int) -> bytes:
    """The file's first meaningful _HEAD_BYTES (skipping NUL padding and blank space)."""
    offset = 0
    while True:
        block = os.pread(fd, _HEAD_BYTES, offset)
        if not block:
            raise ParseError("not a kernel log: empty" if offset == 0 else "not a kernel log: only whitespace")
        first = _first_meaningful(block)
        if first is not None:
            start = offset + block.rfind(b"\n", 0, first) + 1
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
    first = line[:1]
    if _may_kmsg(line) and _P_KMSG.match(line):
        return "kmsg"
    if first == "<" and _P_PSTORE.match(line):
        return "pstore"
    facility = _FACILITY.match(line) if _may_facility(line) else None
    rest = line[facility.end():] if facility else line
    if _may_iso(rest) and _P_DMESG_ISO.match(rest):
        return "dmesg-iso"
    if rest[:1] == "[" and _P_DMESG_CTIME.match(rest):
        return "dmesg-ctime"
    if _may_journal_mono(line) and _P_JOURNAL_MONO.match(line):
        return "journal"
    if rest[:1] == "[" and _P_DMESG.match(rest):
        return "dmesg"
    match = _P_SYSLOG.match(line) if _may_syslog(line) else None
    if match:
        day, tz = match["day"], match["tz"]
        if day is not None:
            return "syslog" if day[0] == " " else "journal" if day[0] == "0" else "bsd"
        if tz and ":" in tz:
            return "syslog"
        return "journal" if tz else "rfc"
    if first == "-" and _may_marker(line) and _JOURNAL_MARKER.match(line):
        return "journal-marker"
    return None


@functools.lru_cache(maxsize=4)
def _detect(head: bytes) -> str:
    """The head's format (cached: an analysis asks for the same head's format up to three times)."""
    return _detect_format(head)


def _detect_format(head: bytes) -> str:
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


# One line holding a keyword: (0-based line index, raw line, what follows it for untagged continuations).
# A plain tuple: a NamedTuple's constructor costs microseconds, and driver spam makes millions of hits.
_Hit = tuple[int, bytes, "bytes | None"]

# Every pass over the bytes costs about as much as another (0.2-0.5 s per GB for bytes.find, 0.33 for the
# newline count), and Python has no multi-keyword search in C: an alternation ("NVRM|...") is ten times
# slower, because sre then tests every byte against a set of first characters. But "NVRM" and ": AER: "
# share the letter R: a pattern that starts with the literal R is scanned by sre's single-character loop
# (as fast as one find), and the lookbehinds check the rest only where an R is. One pass finds both, and
# `[^\n]*` carries each match to the end of its line, so every line is found once. "nvidia-nvswitch" (no R,
# long, so bytes.find skips fast) and any other needle are found with find.
_R_NEEDLES = (b"NVRM", b": AER: ")
_R_LINES = lazy_re(rb"R(?:(?<=NVR)M|(?<=: AER): )[^\n]*")
_MATCH_END = re.Match.end
_MATCH_GROUP = re.Match.group
_DENSE_SUB = 1024 * 1024  # a dense piece is turned into hits this much at a time (bounded lists)


def _line_finders(needles: Sequence[bytes]) -> tuple[bool, list[bytes]]:
    """(whether the R pattern covers NVRM and ": AER: ", the needles left for bytes.find)."""
    regex = all(needle in needles for needle in _R_NEEDLES)
    return regex, [needle for needle in needles if not (regex and needle in _R_NEEDLES)]


def _is_dense(found: int, pos: int, start: int) -> bool:
    """Hits this frequent are driver spam: turning them into lines in bulk is cheaper than one by one."""
    return found >= _DENSE_PROBE and found % _DENSE_PROBE == 0 and pos - start < found * _DENSE_BYTES_PER_HIT


def _scan_buffer(buf: bytes | bytearray, start: int, end: int, needles: Sequence[bytes], ahead: int | None = None
                 ) -> tuple[int | None, Any]:
    """Newlines in buf[start:end] and the lines there holding a needle (line_index relative to start).

    ``ahead``: how far the lines after a hit may be looked at (default ``end``). In a piece dense with hits
    the answer is a ``_Dense`` and the newline count None: the count is made while its hits are used
    (``_Dense.newlines()`` afterwards).
    """
    ahead = end if ahead is None else ahead
    spans: dict[int, int] = {}
    find, rfind = buf.find, buf.rfind
    regex, others = _line_finders(needles)
    if regex:
        found = 0
        for match in _R_LINES.finditer(buf, start, end):
            pos = match.start()
            spans[rfind(b"\n", start, pos) + 1 or start] = match.end()
            found += 1
            if _is_dense(found, pos, start):
                return None, _Dense(bytes(buf[start:ahead]), end - start, needles)
    for needle in others:
        pos = find(needle, start, end)
        found = 0
        while pos != -1:
            line_start = rfind(b"\n", start, pos) + 1 or start
            line_end = find(b"\n", pos, end)
            if line_end == -1:
                line_end = end
            spans[line_start] = line_end
            pos = find(needle, line_end, end)
            found += 1
            if pos != -1 and _is_dense(found, pos, start):
                return None, _Dense(bytes(buf[start:ahead]), end - start, needles)
    hits: list[_Hit] = []
    count = buf.count
    newlines = 0
    previous = start
    for line_start in sorted(spans):
        newlines += count(b"\n", previous, line_start)
        previous = line_start
        line_end = spans[line_start]
        raw = bytes(buf[line_start:min(line_end, line_start + _MAX_LINE)])
        hits.append((newlines, raw, _after(buf, raw, line_end, ahead)))
    newlines += count(b"\n", previous, end)
    return newlines, hits


def _after(buf: bytes | bytearray, raw: bytes, line_end: int, ahead: int) -> bytes | None:
    """The lines after a hit when it may continue without an NVRM tag ("The NVIDIA GPU ..."), else None."""
    if b"The NVIDIA GPU" not in raw:
        return None
    stop = line_end
    for _ in range(_LOOKAHEAD_LINES):
        if stop >= ahead:
            break
        nxt = buf.find(b"\n", stop + 1, ahead)
        stop = ahead if nxt == -1 else nxt
    return bytes(buf[line_end + 1:min(stop, line_end + 1 + _MAX_LINE)])


class _Batch:
    """The hit lines of about _DENSE_SUB bytes of a dense piece.

    ``matches`` are the R pattern's (one per line, each to its line's end); ``keys`` their text, the fast
    path's key when the line's first keyword is NVRM (``"RM..."``, see ``_Collector.feed``); ``ends`` the line
    ends. ``extras``: (line start, line end) of the lines only the other needles found, sorted.
    """

    __slots__ = ("matches", "keys", "ends", "long", "extras")

    def __init__(self, matches: list[re.Match[bytes]], extras: list[tuple[int, int]], start: int) -> None:
        self.matches = matches
        self.keys: list[bytes] = list(map(_MATCH_GROUP, matches))
        self.ends: list[int] = list(map(_MATCH_END, matches))
        # A line that may be longer than _MAX_LINE has a cut raw line, so maybe another key: never counted in
        # bulk. Its length is at most the distance from the end of the line before.
        previous = itertools.chain((start - 1,), self.ends)
        self.long = set(itertools.compress(range(len(self.ends)), map(
            operator.lt, itertools.repeat(_MAX_LINE + 1), map(operator.sub, self.ends, previous))))
        self.extras = extras


class _Dense:
    """The hits of a piece full of driver spam, found in bulk: lists built in C (match objects mapped to
    their text and end), never a Python statement per line. Only the lines that need it (handed on one by
    one, or the last occurrence of a counted message) get their start, raw line and line number; line
    numbers are counted in one forward pass.
    """

    __slots__ = ("data", "end", "regex", "others", "counted_at", "counted")

    def __init__(self, data: bytes, end: int, needles: Sequence[bytes]) -> None:
        self.data, self.end = data, end  # data[:end] is the piece; the rest is only looked at by _after
        self.regex, self.others = _line_finders(needles)
        self.counted_at = self.counted = 0

    def index(self, pos: int) -> int:
        """Newlines before ``pos`` (the 0-based index of the line starting there)."""
        if pos >= self.counted_at:
            self.counted += self.data.count(b"\n", self.counted_at, pos)
        else:  # not expected (positions are asked in order), but never wrong
            self.counted -= self.data.count(b"\n", pos, self.counted_at)
        self.counted_at = pos
        return self.counted

    def newlines(self) -> int:
        return self.index(self.end)

    def batches(self) -> Iterator[_Batch]:
        data, end = self.data, self.end
        pos = 0
        while pos < end:
            stop = data.find(b"\n", min(pos + _DENSE_SUB, end) - 1, end)
            stop = end if stop == -1 else stop + 1
            yield self._batch(pos, stop)
            pos = stop

    def _batch(self, start: int, stop: int) -> _Batch:
        data = self.data
        matches = list(_R_LINES.finditer(data, start, stop)) if self.regex else []
        spans: dict[int, int] = {}
        for needle in self.others:
            pos = data.find(needle, start, stop)
            while pos != -1:
                line_end = data.find(b"\n", pos, stop)
                line_end = stop if line_end == -1 else line_end
                spans[data.rfind(b"\n", 0, pos) + 1] = line_end  # data[start - 1] is a newline
                pos = data.find(needle, line_end, stop)
        batch = _Batch(matches, [], start)
        if spans:  # rare: lines the pattern found too are its
            found = set(batch.ends)
            batch.extras = sorted(item for item in spans.items() if item[1] not in found)
        return batch

    def match_hit(self, batch: _Batch, j: int) -> _Hit:
        """Hit ``j`` of the pattern's, as a line (positions must be asked in order)."""
        line_start = self.data.rfind(b"\n", 0, batch.matches[j].start()) + 1
        return self.span_hit(line_start, batch.ends[j])

    def span_hit(self, line_start: int, line_end: int) -> _Hit:
        raw = self.data[line_start:min(line_end, line_start + _MAX_LINE)]
        return (self.index(line_start), raw, _after(self.data, raw, line_end, len(self.data)))

    def ordered(self, batch: _Batch) -> list[tuple[int, int, tuple[int, int] | None]]:
        """Where the extras go among the pattern's hits: (pattern hits before it, 0, span), sorted."""
        return [(bisect.bisect_left(batch.ends, span[0]), 0, span) for span in batch.extras]

    def hits(self) -> list[_Hit]:
        out: list[_Hit] = []
        for batch in self.batches():
            items = [(j, 1, None) for j in range(len(batch.ends))] + self.ordered(batch)
            for j, _, span in sorted(items, key=operator.itemgetter(0, 1)):
                out.append(self.span_hit(*span) if span is not None else self.match_hit(batch, j))
        return out


def _hit_list(hits: Any) -> list[_Hit]:
    return hits.hits() if isinstance(hits, _Dense) else hits


def _piece_newlines(newlines: int | None, hits: Any) -> int:
    """A piece's newline count, once its hits have been used (a dense piece counts them as it goes)."""
    return hits.newlines() if newlines is None else newlines


def _scan_file(path: str, start: int, end: int, needles: Sequence[bytes]) -> tuple[int, list[_Hit]]:
    """The hits of a second, rare pass (signature refusals, BAR lines), at most _RESCAN_MAX_HITS of them."""
    hits: list[_Hit] = []

    def keep(part: list[_Hit]) -> None:
        hits.extend(part[:_RESCAN_MAX_HITS - len(hits)])

    with open(path, "rb", buffering=0) as handle:
        handle.seek(start)
        newlines, _, _, _ = _read_chunks(handle, end - start, needles, (), 0, keep)
    return newlines, hits


def _collect_buffer(buf: bytes | bytearray, start: int, end: int) -> tuple[int, _Collector]:
    """Newlines and the aggregated events of buf[start:end], fed chunk by chunk (hits never pile up).

    A hit near ``end`` sees the lines after it in the next worker's range too (``_after`` reads at most
    _MAX_LINE bytes past a line), as the one-process scan does: a message is joined wherever the split falls.
    """
    collector = _Collector()
    newlines = 0
    pos = start
    while pos < end:
        stop = buf.find(b"\n", min(pos + _CHUNK, end) - 1, end)
        stop = end if stop == -1 else stop + 1
        # _after reads at most _MAX_LINE bytes past a hit's line: no further (a dense piece copies this much)
        ahead = min(len(buf), stop + _MAX_LINE + 1)
        part_newlines, hits = _scan_buffer(buf, pos, stop, _NEEDLES, ahead=ahead)
        collector.feed(hits, newlines)
        newlines += _piece_newlines(part_newlines, hits)
        pos = stop
    return newlines, collector


def _collect_file(path: str, start: int, end: int) -> tuple[int, _Collector]:
    """Like ``_collect_buffer`` for a file's bytes [start, end): read in chunks, and the _MAX_LINE bytes after
    ``end`` (the next worker's) only looked at for the lines that continue a hit."""
    with open(path, "rb", buffering=0) as handle:
        tail = os.pread(handle.fileno(), _MAX_LINE, end)
        handle.seek(start)
        newlines, collector, _, _ = _collect_reader(handle, end - start, tail=tail)
    return newlines, collector


def _collect_reader(reader: Any, limit: int | None, signature_bytes: int = 0, tail: bytes = b""
                    ) -> tuple[int, _Collector, int, bytes]:
    """(newlines, collector, bytes read, last byte) for ``limit`` bytes of ``reader`` (None: to its end).
    ``tail``: the bytes after the limit, for the look-ahead of hits on the last lines only."""
    collector = _Collector()
    newlines, size, last, _ = _read_chunks(reader, limit, _NEEDLES, _SECOND_PASS_NEEDLES, signature_bytes,
                                           lambda hits: None, collector, tail)
    return newlines, collector, size, last


def _read_chunks(reader: Any, limit: int | None, needles: Sequence[bytes], early: Sequence[bytes],
                 early_bytes: int, sink: Callable[[list[_Hit]], None], collector: _Collector | None = None,
                 tail: bytes = b"") -> tuple[int, int, bytes, None]:
    """Read ``reader`` in _CHUNK pieces into one reused buffer; hand each piece's hits on.

    Hits go to ``collector`` (line indices made global) or, without one, to ``sink``. ``early`` needles
    are looked for too while fewer than ``early_bytes`` have been read. Returns (newlines, bytes read,
    last byte, None). ``tail``: bytes after the last ones read, seen only by the last piece's look-ahead.
    """
    newlines = 0
    # No bigger than the input: a 16 MiB buffer per small log would stay in the heap of a long-lived process.
    buf = bytearray(_CHUNK if limit is None else max(1, min(_CHUNK, limit)))
    filled = 0
    total = 0
    last = b""
    eof = False
    while not eof:
        if filled == len(buf) and len(buf) < max(2 * _CHUNK, 1 << 20):
            buf.extend(bytes(len(buf)))  # a line longer than the buffer: grow it, up to a bound
        want = len(buf) - filled if limit is None else min(len(buf) - filled, limit - total)
        got = 0
        if want > 0:
            with memoryview(buf) as view:
                got = reader.readinto(view[filled:filled + want]) or 0
        eof = got == 0
        if got:
            total += got
            filled += got
            last = bytes(buf[filled - 1:filled])
        if not eof and filled < len(buf):
            continue  # fill the buffer first (a pipe gives 64 KiB a read): fewer, larger pieces
        full = filled == len(buf) and len(buf) >= max(2 * _CHUNK, 1 << 20)
        cut = filled if eof else _cut(buf, filled, full)
        if not cut and full:
            cut = filled  # a line longer than that is scanned in pieces: memory stays bounded
        if cut:
            use = tuple(needles) + tuple(early) if total - filled < early_bytes else needles
            ahead = filled
            if eof and tail:  # the last piece: the next range's first lines may continue a hit here
                buf[filled:] = tail
                ahead += len(tail)
            part_newlines, hits = _scan_buffer(buf, 0, cut, use, ahead=ahead)
            if collector is not None:
                collector.feed(hits, newlines)
            else:
                sink([(newlines + index, raw, after) for index, raw, after in _hit_list(hits)])
            newlines += _piece_newlines(part_newlines, hits)
            buf[:filled - cut] = buf[cut:filled]
            filled -= cut
    return newlines, total, last, None


def _cut(buf: bytearray, filled: int, full: bool) -> int:
    """Where to end the piece scanned now (0: read more first).

    A hit sees the lines after it as a line-by-line scan would (``_after``: up to _LOOKAHEAD_LINES lines, at
    most _MAX_LINE bytes): the piece ends after the last line followed by that much in the buffer; the rest
    is carried over to the next piece. When no line is (lines as long as the buffer), after the last newline
    if the buffer is ``full`` (it cannot grow), else nothing yet.
    """
    newlines = []
    at = filled
    while len(newlines) <= _LOOKAHEAD_LINES:
        at = buf.rfind(b"\n", 0, at)
        if at == -1:
            break
        newlines.append(at)
        if len(newlines) > _LOOKAHEAD_LINES or filled - at - 1 >= _MAX_LINE:
            return at + 1
    return newlines[0] + 1 if newlines and full else 0


class _Prefixed:
    """A stream with bytes already read from it put back in front."""

    def __init__(self, head: bytes | bytearray, stream: Any) -> None:
        self._head = memoryview(head)  # slices of a view copy nothing: the head may be tens of MB
        self._stream = stream

    def peek_head(self, size: int) -> bytes:
        if len(self._head) < size:
            more = bytearray(self._head)
            while len(more) < size:
                data = self._stream.read(size - len(more))
                if not data:
                    break
                more += data
            self._head = memoryview(more)
        return bytes(self._head[:size])

    def read(self, size: int) -> bytes:  # for a Transcoder reading through it
        buf = bytearray(size)
        with memoryview(buf) as view:
            got = self.readinto(view)
        return bytes(buf[:got])

    def readinto(self, view: memoryview) -> int:
        if len(self._head):
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._stream.readinto(view) or 0


def _merge(parts: Iterable[tuple[int, _Collector]]) -> tuple[int, _Collector]:
    newlines = 0
    merged: _Collector | None = None
    for part_newlines, collector in parts:
        if merged is None:
            merged = collector
        else:
            merged.absorb(collector, newlines)
        newlines += part_newlines
    return newlines, merged if merged is not None else _Collector()


def _portable(part: tuple[int, _Collector]) -> tuple[int, _Collector]:
    """A worker's result made small for the pipe: the caches stay behind."""
    part[1].close()
    part[1].drop_caches()
    return part


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


def _fork_map(job: Callable[[int], Any], count: int) -> list[Any]:
    """job(0..count-1), job 0 in this process and the others in forked children; results in order.

    Children send their pickled result through a pipe and leave with os._exit. Any failure raises
    _ParallelFailed (the caller then scans in one process).
    """
    import pickle

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


class _Line:
    """One kernel log line, split. (A plain class: a dataclass's generated methods are compiled as the module is
    imported, on every start-up.)"""

    __slots__ = ("after", "message", "number", "raw", "timestamp")

    def __init__(self, number: int, raw: str, timestamp: str | None, message: str, after: str | None = None) -> None:
        self.number = number  # 1-based
        self.raw = raw
        self.timestamp = timestamp
        self.message = message  # after the timestamp/host prefix
        self.after = after


def _split_prefix(raw: str) -> tuple[str | None, str]:
    """(timestamp as printed, message) for one line in any supported format."""
    # each form's guard first (see _may_kmsg): a form the line cannot be is neither compiled nor run
    match = _P_KMSG.match(raw) if _may_kmsg(raw) else None
    if match:
        message = raw[match.end():]
        if "\\x" in message:
            message = _KMSG_ESCAPE.sub(lambda m: chr(int(m[1], 16)), message)
        return f"{int(match['usec']) / 1e6:.6f}", message
    match = _P_PSTORE.match(raw) if raw[:1] == "<" else None
    if match:
        return match["ts"], _strip_caller(raw[match.end():])
    facility = _FACILITY.match(raw) if _may_facility(raw) else None
    rest = raw[facility.end():] if facility else raw
    match = _P_DMESG_ISO.match(rest) if _may_iso(rest) else None
    if match is None and rest[:1] == "[":
        match = _P_DMESG_CTIME.match(rest)
    if match:
        return match["ts"], _strip_caller(rest[match.end():])
    match = _P_JOURNAL_MONO.match(raw) if _may_journal_mono(raw) else None
    if match:
        return match["ts"], raw[match.end():]
    match = _P_DMESG.match(rest) if rest[:1] == "[" else None
    if match:
        return match["ts"], _strip_caller(rest[match.end():])
    match = _P_SYSLOG.match(raw) if _may_syslog(raw) else None
    if match:
        message = raw[match.end():]
        inner = _P_DMESG.match(message) if message[:1] == "[" else None  # rsyslog can keep the kernel's "[ 12.3] "
        return match["ts"], _strip_caller(message[inner.end():] if inner else message)
    return None, rest.lstrip()


def _strip_caller(message: str) -> str:
    match = _CALLER_ID.match(message) if message.startswith("[") else None
    return message[match.end():] if match else message


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")


def _clean(*parts: str) -> str:
    """Join message parts: drop NVRM: tags, collapse whitespace."""
    return _SPACES.sub(" ", " ".join(_NVRM_TAG.sub(" ", part) for part in parts)).strip()


def _address(text: str) -> str | None:
    match = _ANY_ADDR.search(text)
    return _normalize(match["addr"]) if match else None


class _Group:
    """One aggregate while scanning: count, first event, the first samples, the last occurrence."""

    __slots__ = ("kind", "template", "count", "first", "samples", "last", "last_raw", "last_index")

    def __init__(self, kind: str, template: str, event: KernelEvent) -> None:
        self.kind = kind
        self.template = template
        self.count = 1
        self.first = event
        self.samples = [event]
        self.last = event
        self.last_raw: bytes | None = None  # a quiet line counted by the fast path: made an event at the end
        self.last_index = 0

    def add(self, event: KernelEvent) -> None:
        self.count += 1
        if len(self.samples) < _SAMPLES - 1:
            self.samples.append(event)
        self.last = event
        self.last_raw = None

    def replace(self, old: KernelEvent, new: KernelEvent) -> None:
        """An event folded with the line after it (AER): the same occurrence, a longer message."""
        self.samples = [new if e is old else e for e in self.samples]
        self.first = new if self.first is old else self.first
        self.last = new if self.last is old else self.last

    def freeze(self, rate: _Rate | None) -> EventGroup:
        if self.last_raw is not None:
            self.last = _other_event(self.last_raw, self.last_index)
            self.last_raw = None
        samples = tuple(self.samples) if self.last == self.samples[-1] else (*self.samples, self.last)
        peak = (rate.peak, rate.peak_from, rate.peak_to) if rate is not None else (0, None, None)
        return EventGroup(self.kind, self.template, self.count, self.first, self.last, samples, *peak)

    def shifted(self, lines: int) -> _Group:
        if self.last_raw is not None:
            self.last = _other_event(self.last_raw, self.last_index)
            self.last_raw = None
        shift = functools.partial(_shift, lines=lines)
        self.first = shift(self.first)
        self.samples = [shift(e) for e in self.samples]
        self.last = self.samples[-1] if self.last is self.first or self.last in self.samples else shift(self.last)
        return self


def _shift(event: KernelEvent, lines: int) -> KernelEvent:
    if not lines or event.line_number is None:
        return event
    return dataclasses.replace(event, line_number=event.line_number + lines)


def _other_event(raw: bytes, index: int) -> KernelEvent:
    line = _decode(raw)
    timestamp, message = _split_prefix(line)
    return KernelEvent(kind="other", message=_clean(message), line=line, line_number=index + 1, timestamp=timestamp)


class _Rate:
    """The most Xid lines of one (GPU, code) within any hour of log time: a sliding window, bounded."""

    __slots__ = ("window", "head", "head_open", "peak", "peak_from", "peak_to")

    def __init__(self) -> None:
        self.window: collections.deque[tuple[float, str]] = collections.deque()
        self.head: list[tuple[float, str]] = []  # the first hour: lets a later merge see windows across a cut
        self.head_open = True
        self.peak = 0
        self.peak_from: str | None = None
        self.peak_to: str | None = None

    def add(self, seconds: float, stamp: str, record_head: bool = True) -> None:
        window = self.window
        if window and seconds < window[-1][0]:
            window.clear()  # the clock went back (a reboot): a new series
        window.append((seconds, stamp))
        while seconds - window[0][0] > _RATE_WINDOW_S or len(window) > _RATE_MAX:
            window.popleft()
        if len(window) > self.peak:
            self.peak, self.peak_from, self.peak_to = len(window), window[0][1], stamp
        if record_head and self.head_open:
            if (self.head and (seconds - self.head[0][0] > _RATE_WINDOW_S or seconds < self.head[-1][0])) \
                    or len(self.head) >= _RATE_MAX:
                self.head_open = False
            else:
                self.head.append((seconds, stamp))

    def absorb(self, later: _Rate) -> None:
        """Continue this series with a later part's (windows across the cut are replayed from its head)."""
        for seconds, stamp in later.head:
            self.add(seconds, stamp, record_head=self.head_open)
        if later.peak > self.peak:
            self.peak, self.peak_from, self.peak_to = later.peak, later.peak_from, later.peak_to
        if later.head_open is False:
            self.window = later.window
            self.head_open = False


class _Collector:
    """Turns hit lines into events as they come and aggregates them by template: bounded whatever the log.

    A multi-line driver message is held until its block ends. An NVRM line already known to be no event
    (assertion spam a wedged driver writes millions of times) is counted without being parsed again.
    """

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str | None, int | None, str], _Group] = {}
        self.banners: list[str] = []
        self.loads: list[int] = []  # the banners' line numbers (KernelLog.driver_loads)
        self.quiet: dict[bytes, _Group] = {}  # exact NVRM message -> its group
        self.quiet_norm: dict[bytes, _Group] = {}  # the same with numbers replaced
        self.dropped: set[bytes] = set()  # exact NVRM messages that are folded repeats
        self.saturated: set[bytes] = set()  # quiet messages whose group has its full sample: counted in bulk
        self.pending: list[_Line] = []
        self.previous: KernelEvent | None = None
        self.previous_group: _Group | None = None
        self.fallen: set[str | None] = set()
        self.rates: dict[tuple[str | None, int], _Rate] = {}
        self.recent: dict[tuple[str | None, int], collections.deque[KernelEvent]] = {}  # see XID_RECENT
        self.signature: list[KernelEvent] = []

    # ---------------------------------------------------------------- feeding

    def feed(self, hits: Any, base: int) -> None:
        if isinstance(hits, _Dense):
            self._feed_dense(hits, base)
            return
        quiet, quiet_norm, dropped = self.quiet, self.quiet_norm, self.dropped
        for index, raw, after in hits:
            if not self.pending:
                at = raw.find(b"NVRM")
                if at != -1:
                    key = raw[at + 2:]  # from "RM": what the dense scan's pattern matches (see _R_LINES)
                    if key in dropped:
                        continue
                    group = quiet.get(key)
                    if group is None and quiet_norm:
                        group = quiet_norm.get(_NUMBERS_BYTES.sub(b"#", key))
                        if group is not None and len(quiet) < _QUIET_MAX:
                            quiet[key] = group
                    if group is not None:
                        if len(group.samples) < _SAMPLES - 1:
                            group.add(_other_event(raw, base + index))
                        else:
                            group.count += 1
                            group.last_raw = raw
                            group.last_index = base + index
                            if len(self.saturated) < _QUIET_MAX:
                                self.saturated.add(key)
                        continue
            self._hit(index, raw, after, base)

    def _feed_dense(self, dense: _Dense, base: int) -> None:
        """Hits of a spam-filled piece: lines already known as chatter (with a full sample) are counted in C,
        per key, between the others, which go through ``feed`` one by one, in order."""
        for batch in dense.batches():
            n = len(batch.keys)
            slow = itertools.compress(range(n), map(operator.not_, map(self.saturated.__contains__, batch.keys)))
            items = sorted(itertools.chain(((j, 1, None) for j in sorted(batch.long.union(slow))),
                                           dense.ordered(batch), ((n, 1, None),)),
                           key=operator.itemgetter(0, 1))
            i = 0
            for j, _, span in items:
                while i < j:
                    if self.pending:  # the line may continue the block (or ends it): in order, in full
                        self.feed([dense.match_hit(batch, i)], base)
                        i += 1
                        continue
                    self._count_known(dense, batch, i, j, base)
                    i = j
                if span is not None:
                    self.feed([dense.span_hit(*span)], base)
                elif j < n:
                    self.feed([dense.match_hit(batch, j)], base)
                    i = j + 1

    def _count_known(self, dense: _Dense, batch: _Batch, start: int, stop: int, base: int) -> None:
        segment = batch.keys[start:stop]
        last = dict(zip(segment, range(start, stop), strict=True))  # the last occurrence of each key
        latest: dict[int, tuple[int, _Group]] = {}
        for key, count in collections.Counter(segment).items():
            group = self.quiet.get(key)
            if group is None:
                continue  # a folded repeat (a GPU's fallen-off-the-bus report after the first)
            group.count += count
            j = last[key]
            if j > latest.get(id(group), (-1, group))[0]:
                latest[id(group)] = (j, group)
        for j, group in sorted(latest.values(), key=operator.itemgetter(0)):  # line numbers counted forward
            index, group.last_raw, _ = dense.match_hit(batch, j)
            group.last_index = base + index

    def _hit(self, index: int, raw_bytes: bytes, after: bytes | None, base: int) -> None:
        raw = _decode(raw_bytes)
        timestamp, message = _split_prefix(raw)
        line = _Line(base + index + 1, raw, timestamp, message, _decode(after) if after else None)
        if self.pending:
            block = self.pending
            if (len(block) < 8 and line.number == block[-1].number + 1 and "NVRM" in message
                    and not _BLOCK_START.search(message)):
                block.append(line)
                if _SENTENCE_END.search(message) and not _wants_more(_clean(*(b.message for b in block))):
                    self._flush()
                return
            self._flush()
        if not any(needle in raw_bytes for needle in _NEEDLES):
            self._signature(line)
            return
        self._line(line, raw_bytes)

    def _line(self, line: _Line, raw: bytes) -> None:
        message = line.message
        if "NVRM" not in message and "SXid" not in message and "AER:" in message:
            self._aer(line)
        elif "NVRM" not in message:
            event = _sxid(line) if "SXid" in message else None
            previous = self.previous
            if event is not None and _SXID_MORE.match(event.message) and previous is not None and (
                    previous.kind, previous.pci_address, previous.xid) == ("sxid", event.pci_address, event.xid):
                event = None  # "Severity 0 Engine instance ..." / "Data {...}" lines continue the first one
            self._emit(event) if event is not None else self._other(line)
        elif "Xid (" in message and (xid_match := _XID.search(message)):
            self._emit(_xid(line, xid_match))
        elif banner := _BANNER.search(message):
            if len(self.banners) < _MAX_BANNERS:
                self.banners.append(banner.group(0).rstrip())
                self.loads.append(line.number)
            else:
                self.banners[-1] = banner.group(0).rstrip()  # the latest load is the one that counts
                self.loads[-1] = line.number
        elif _JOINABLE.search(message) and not (_SENTENCE_END.search(message) and not _wants_more(message)):
            self.pending = [line]
        else:
            self._block([line], raw)

    def _flush(self) -> None:
        block, self.pending = self.pending, []
        self._block(block, None)

    def _block(self, block: list[_Line], raw: bytes | None) -> None:
        """A driver message (one line, or several joined): an event, a repeat to fold, or chatter to count."""
        event = _nvrm_event(block)
        if event is None:
            group = self._other(block[0])
            if raw is not None:
                self._remember_quiet(raw, block[0].message, group)
        elif event.kind == "fallen_off_bus" and event.pci_address in self.fallen:
            if raw is not None:  # one event per GPU: repeats are folded (and not parsed again)
                self._remember_quiet(raw, block[0].message, None)
        else:
            if event.kind == "fallen_off_bus" and len(self.fallen) < _MAX_GROUPS:
                self.fallen.add(event.pci_address)
            self._emit(event)

    def _aer(self, line: _Line) -> None:
        event = _aer(line)
        previous = self.previous
        if event is None:
            self._other(line)  # the status, mask, header and per-bit lines that follow an error
            return
        if (previous is not None and previous.kind == "aer" and "PCIe Bus Error" in event.message
                and "received" in previous.message and "PCIe Bus Error" not in previous.message
                and (previous.pci_address, previous.detail) == (event.pci_address, event.detail)
                and 0 < line.number - (previous.line_number or 0) <= _AER_FOLD_LINES
                and self.previous_group is not None):
            folded = dataclasses.replace(previous, message=f"{previous.message}; {event.message}")
            self.previous_group.replace(previous, folded)  # the same error, as the device's own line
            self.previous = folded
            return
        self._emit(event)

    def _signature(self, line: _Line) -> None:
        event = _untagged_event(line.raw, line.timestamp, line.message, line.number)
        if event is not None and len(self.signature) < _RESCAN_MAX_HITS:
            self.signature.append(event)

    def _remember_quiet(self, raw: bytes, message: str, group: _Group | None) -> None:
        """Let the fast path count this NVRM message next time (and, unless digits matter, its look-alikes).

        ``group`` None: a repeat that is dropped (a GPU's fallen-off-the-bus report after the first).
        """
        at = raw.find(b"NVRM")
        if at == -1 or not message.lstrip().startswith("NVRM") or len(self.quiet) >= _QUIET_MAX:
            return
        key = raw[at + 2:]  # as in feed
        if group is None:
            self.dropped.add(key)
            self.saturated.add(key)
            return
        self.quiet[key] = group
        if len(self.quiet_norm) < _QUIET_NORM_MAX and not _DIGITS_MATTER.search(message):
            self.quiet_norm[_NUMBERS_BYTES.sub(b"#", key)] = group

    # ---------------------------------------------------------------- aggregating

    def _emit(self, event: KernelEvent) -> None:
        group = self._group(event.kind, event.pci_address, event.xid, _template(event.message), event)
        if event.kind == "xid" and event.xid is not None:
            self._rate(event)
            self._recent(event)
        self.previous, self.previous_group = event, group

    def _recent(self, event: KernelEvent) -> None:
        key = (event.pci_address, event.xid or 0)
        recent = self.recent.get(key)
        if recent is None:
            if len(self.recent) >= _MAX_RATES:
                return
            recent = self.recent[key] = collections.deque(maxlen=XID_RECENT)
        recent.append(event)

    def _other(self, line: _Line) -> _Group:
        event = KernelEvent(kind="other", message=_clean(line.message), line=line.raw, line_number=line.number,
                            timestamp=line.timestamp)
        return self._group("other", None, None, _template(event.message), event)

    def _group(self, kind: str, address: str | None, xid: int | None, template: str, event: KernelEvent) -> _Group:
        key = (kind, address, xid, template)
        group = self.groups.get(key)
        if group is None and len(self.groups) >= _MAX_GROUPS:
            key = (kind, address, xid, _OVERFLOW)
            group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(kind, key[3], event)
        else:
            group.add(event)
        return group

    def _rate(self, event: KernelEvent) -> None:
        seconds = timestamp_seconds(event.timestamp)
        if seconds is None or event.timestamp is None:
            return
        key = (event.pci_address, event.xid or 0)
        rate = self.rates.get(key)
        if rate is None:
            if len(self.rates) >= _MAX_RATES:
                return
            rate = self.rates[key] = _Rate()
        rate.add(seconds, event.timestamp)

    # ---------------------------------------------------------------- parts and the result

    def close(self) -> None:
        if self.pending:
            self._flush()

    def drop_caches(self) -> None:
        self.quiet, self.quiet_norm, self.dropped, self.saturated = {}, {}, set(), set()
        self.previous = self.previous_group = None

    def absorb(self, later: _Collector, lines: int) -> None:
        """Append a later part of the same log (its line numbers start ``lines`` further on)."""
        self.close()
        later.close()
        for key, group in later.groups.items():
            mine = self.groups.get(key)
            if group.kind == "fallen_off_bus" and group.first.pci_address in self.fallen:
                continue  # one event per GPU
            group = group.shifted(lines)
            if mine is None:
                if len(self.groups) >= _MAX_GROUPS:
                    key = (*key[:3], _OVERFLOW)
                    mine = self.groups.get(key)
                if mine is None:
                    self.groups[key] = group
                    continue
            mine.count += group.count
            mine.samples.extend(group.samples[:max(0, _SAMPLES - 1 - len(mine.samples))])
            mine.last, mine.last_raw = group.last, None
        self.fallen |= later.fallen
        for banner, load in zip(later.banners, later.loads, strict=True):
            if len(self.banners) < _MAX_BANNERS:
                self.banners.append(banner)
                self.loads.append(load + lines)
            else:
                self.banners[-1] = banner
                self.loads[-1] = load + lines
        for key, rate in later.rates.items():
            if key in self.rates:
                self.rates[key].absorb(rate)
            elif len(self.rates) < _MAX_RATES:
                self.rates[key] = rate
        for key, recent in later.recent.items():
            mine_recent = self.recent.get(key)
            if mine_recent is None:
                if len(self.recent) >= _MAX_RATES:
                    continue
                mine_recent = self.recent[key] = collections.deque(maxlen=XID_RECENT)
            mine_recent.extend(_shift(e, lines) for e in recent)
        self.signature.extend(_shift(e, lines) for e in later.signature[:_RESCAN_MAX_HITS - len(self.signature)])
        self.quiet, self.quiet_norm, self.dropped = later.quiet, later.quiet_norm, later.dropped
        self.saturated = later.saturated

    def result(self, source: str, fmt: str, lines_scanned: int,
               rescan: Callable[[Sequence[bytes]], list[_Hit]] | None, size: int) -> KernelLog:
        self.close()
        failing = {g.first.pci_address for g in self.groups.values()
                   if g.kind in ("bar", "rminit_failed", "probe") and g.first.pci_address}
        known = {e.line_number for g in self.groups.values() for e in g.samples}
        signature = self.signature
        if rescan is not None and size <= _SIGNATURE_SCAN_MAX_BYTES:
            signature = _signature_events(rescan(_SECOND_PASS_NEEDLES))
        signature = _pci_resources(signature, failing)
        known |= {e.line_number for e in signature}
        if failing and rescan is not None:
            for event in _pci_bar_events(rescan, failing, known):
                self._group(event.kind, event.pci_address, event.xid, _template(event.message), event)
        for event in signature:
            self._group(event.kind, event.pci_address, event.xid, _template(event.message), event)
        groups = sorted((g.freeze(self.rates.get((g.first.pci_address, g.first.xid or 0)) if g.kind == "xid"
                                  else None) for g in self.groups.values()),
                        key=lambda g: (g.first.line_number or 0, g.kind, g.template))
        events = sorted((e for g in groups if g.kind != "other" for e in g.samples),
                        key=lambda e: e.line_number or 0)
        xids = sorted((e for recent in self.recent.values() for e in recent), key=lambda e: e.line_number or 0)
        return KernelLog(source=source, format=fmt, lines_scanned=lines_scanned, events=tuple(events),
                         module_banners=tuple(self.banners), groups=tuple(groups), xids=tuple(xids),
                         driver_loads=tuple(self.loads))


def _template(message: str) -> str:
    """The message with numbers, hex values and PCI addresses as ``#``: lines that differ only there are one."""
    return _NUMBERS.sub("#", message[:_TEMPLATE_CHARS])


def timestamp_seconds(timestamp: str | None) -> float | None:
    """A kernel log timestamp as seconds (absolute or since boot; only differences are meaningful)."""
    if not timestamp:
        return None
    text = timestamp.strip()
    try:
        return float(text)  # dmesg, kmsg, pstore, journal monotonic
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(text.replace(",", ".").replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    for form in ("%a %b %d %H:%M:%S %Y", "%b %d %H:%M:%S", "%b %d %H:%M:%S.%f"):
        try:
            parsed = time.strptime(" ".join(text.split()), form)
        except ValueError:
            continue
        return float(time.mktime(parsed[:8] + (0,)) if parsed.tm_year > 1970 else
                     ((parsed.tm_yday * 24 + parsed.tm_hour) * 60 + parsed.tm_min) * 60 + parsed.tm_sec)
    return None


def wall_clock_seconds(timestamp: str | None) -> float | None:
    """A kernel log timestamp as seconds since the epoch, only when it is a date and time with its UTC offset
    (``dmesg --time-format iso``, ``journalctl -o short-iso``): seconds since boot, or a syslog time without a
    year or zone, cannot be placed on the clock and give None."""
    text = (timestamp or "").strip()
    if len(text) < 19 or len(text) > 40 or text[4:5] != "-" or "T" not in text[:11]:
        return None
    text = text.replace(",", ".").replace("Z", "+00:00")
    if text[-5:-4] in "+-" and text[-3:-2] != ":" and text[-5:].replace("+", "").replace("-", "").isdigit():
        text = f"{text[:-2]}:{text[-2:]}"  # "+0000" (journalctl): Python 3.10 reads only "+00:00"
    try:
        parsed = datetime.datetime.fromisoformat(_six_digit_fraction(text))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def _six_digit_fraction(text: str) -> str:
    """Python 3.10's fromisoformat reads a fraction of 3 or 6 digits only: padded or cut to 6."""
    dot = text.find(".", 19)
    if dot < 0:
        return text
    end = dot + 1
    while end < len(text) and text[end].isdigit():
        end += 1
    return f"{text[:dot + 1]}{text[dot + 1:end][:6].ljust(6, '0')}{text[end:]}"


def _signature_events(hits: list[_Hit]) -> list[KernelEvent]:
    """The second pass's events: ``module_signature`` (the kernel refused, or tainted for, an unsigned NVIDIA module)
    and ``probe`` (the driver core's line for the nvidia module's failed probe of a GPU)."""
    events = []
    for index, raw_bytes, _ in hits:
        raw = _decode(raw_bytes)
        timestamp, message = _split_prefix(raw)
        event = _untagged_event(raw, timestamp, message, index + 1)
        if event is not None:
            events.append(event)
    return events


_SOFT_LOCKUP = lazy_re(r"soft lockup - CPU#(?P<cpu>\d{1,5}) stuck for (?P<secs>\d{1,9})s!(?: \[(?P<name>[^\]\n]{1,64}):"
                       r"(?P<pid>\d{1,10})\])?")
_HARD_LOCKUP = lazy_re(r"Watchdog detected hard LOCKUP on cpu (?P<cpu>\d{1,5})")
_HUNG_TASK = lazy_re(r"INFO: task (?P<name>.{1,64}?):(?P<pid>\d{1,10}) blocked for more than (?P<secs>\d{1,9}) seconds")
# "Killed process 123 (python)" and, in GPUd's sample of older kernels, "Killed process 123, UID 48, (httpd)"
_OOM_KILL = lazy_re(r"[Oo]ut of memory: Kill(?:ed)? process (?P<pid>\d{1,10}),?(?: UID \d{1,10},)? "
                    r"\((?P<name>[^)\n]{1,64})\)")
_MLX5 = lazy_re(r"mlx5_core (?P<addr>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_MLX5_FATAL = lazy_re(r"health compromised|Fatal error \d{1,10} detected")
_HOST_TEXTS = tuple(needle.decode() for needle in _HOST_NEEDLES)


def _host_event(raw: str, timestamp: str | None, message: str, number: int | None) -> KernelEvent | None:
    """A line of the host beside the GPUs (``_HOST_NEEDLES``) as an event; None for a look-alike."""
    text = message.strip()
    event = functools.partial(KernelEvent, message=text, line=raw, line_number=number, timestamp=timestamp)
    if found := _SOFT_LOCKUP.search(text):
        return event(kind="soft_lockup", pid=int(found["pid"]) if found["pid"] else None, process=found["name"],
                     detail=f"CPU#{found['cpu']} stuck for {found['secs']} s")
    if found := _HARD_LOCKUP.search(text):
        return event(kind="soft_lockup", detail=f"hard lockup on CPU {found['cpu']}")
    if found := _HUNG_TASK.search(text):
        return event(kind="hung_task", pid=int(found["pid"]), process=found["name"],
                     detail=f"blocked for more than {found['secs']} s")
    if found := _OOM_KILL.search(text):
        return event(kind="oom_kill", pid=int(found["pid"]), process=found["name"],
                     detail="memory cgroup limit" if "cgroup" in text else "system out of memory")
    if "mlx5_core" in text and _MLX5_FATAL.search(text):
        address = _MLX5.search(text)
        return event(kind="mlx5_fatal", pci_address=_normalize(address["addr"]) if address else None)
    return None


def _untagged_event(raw: str, timestamp: str | None, message: str, number: int | None) -> KernelEvent | None:
    """An event from a line without an NVRM tag that a second-pass needle found; None for another driver's line."""
    if any(text in message for text in _HOST_TEXTS):
        return _host_event(raw, timestamp, message, number)
    if any(text in message for text in _PCI_RESOURCE_TEXTS) and (found := _pci_resource_line(raw, timestamp, message,
                                                                                              number)):
        return found
    probe = _CORE_PROBE.search(message) if "probe" in message else None
    if probe:
        address = probe["dev"] or probe["of"]
        return KernelEvent(kind="probe", message=message.strip(), line=raw, line_number=number, timestamp=timestamp,
                           pci_address=_normalize(address.removeprefix("PCI:")),
                           detail=f"probe failed with error {probe['err']}")
    if "nvidia" not in message.lower() or not any(text in message for text in _SIGNATURE_TEXTS):
        return None  # another vendor's module (a Wi-Fi or VirtualBox driver, say), or another driver's probe
    return KernelEvent(kind="module_signature", message=message.strip(), line=raw, line_number=number,
                       timestamp=timestamp)


_PCI_RESOURCE_TEXTS = tuple(needle.decode() for needle in _PCI_RESOURCE_NEEDLES)
_PCI_DEVICE = r"(?P<addr>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):\s{1,4}"
_PCI_ENUMERATION = lazy_re(_PCI_DEVICE + r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\] "
                           r"type [0-9a-fA-F]{2} class 0x(?P<cls>[0-9a-fA-F]{6})")
# "<res> [range]: <what>" (6.8 on), "BAR <n>: <what> [range]" and "can't claim BAR <n> [range]: ..." (before), or a
# resource-less line of the device ("not enough MMIO resources for SR-IOV")
_PCI_RESOURCE_LINE = lazy_re(
    _PCI_DEVICE + r"(?:\[Firmware Bug\]: )?(?P<pre>can't claim |can't enable device: |reg 0x[0-9a-fA-F]{1,3}: )?"
    r"(?P<res>(?:VF )?BAR ?\d{1,2}|ROM|bridge window)?(?P<rest>[^\n]{0,240})")
_PCI_RANGE = lazy_re(r"\[(?P<type>mem|io) {1,2}(?:size (?P<size>0x[0-9a-fA-F]{1,16})|(?P<start>0x[0-9a-fA-F]{1,16})-"
                     r"(?P<end>0x[0-9a-fA-F]{1,16}))")
# what each line says, first match wins: (words, outcome); "ok" lines say the BAR got an address after all
_PCI_OUTCOMES = (
    ("no compatible bridge window", "no compatible bridge window"), ("address conflict", "address conflict"),
    ("conflicts with", "address conflict"), ("no address assigned", "no address assigned"),
    ("not assigned", "not assigned, the device cannot be enabled"),
    ("not claimed", "not claimed, the device cannot be enabled"), ("failed to expand", "could not be enlarged"),
    ("bogus alignment", "bogus alignment"), ("failed to assign", "failed to assign"), ("no space", "no space"),
    ("can't assign", "no space"), ("larger than 4GB", "larger than 4 GB, which this kernel cannot place"),
    ("can't size", "cannot be sized (the firmware's bug)"),
    ("not enough MMIO resources", "not enough MMIO space for the SR-IOV virtual functions"),
    ("unassigned", "no address assigned"), ("trying firmware assignment", "ok"), ("assigned", "ok"),
)


def _pci_resource_line(raw: str, timestamp: str | None, message: str, number: int | None) -> KernelEvent | None:
    """A PCI core line about a device (``_PCI_RESOURCE_NEEDLES``) as a helper event, resolved by ``_pci_resources``:
    ``pci_id`` (the enumeration line: vendor, device and class), ``pci_bar`` (a memory BAR that got no address) and
    ``pci_bar_ok`` (one that did). I/O BARs, expansion ROMs and bridge windows are left out: a GPU's legacy I/O ports or
    ROM without an address do not stop it, and a bridge's window is judged by the BARs of the devices behind it."""
    text = message.strip()
    event = functools.partial(KernelEvent, message=text, line=raw, line_number=number, timestamp=timestamp)
    if "] type 0" in text and (found := _PCI_ENUMERATION.search(text)):
        return event(kind="pci_id", pci_address=_normalize(found["addr"]),
                     detail=f"{found['vendor'].lower()}:{found['device'].lower()} {found['cls'].lower()}")
    found = _PCI_RESOURCE_LINE.search(text)
    if found is None or "unassigned, try booting" in text:
        return None
    res, rest = found["res"] or _register_bar(found["pre"]), found["rest"]
    outcome = next((said for words, said in _PCI_OUTCOMES if words in rest or words in (found["pre"] or "")), None)
    if outcome is None or res in ("ROM", "bridge window", "BAR 6", "BAR6"):
        return None
    if res and not res.startswith("VF") and int("".join(ch for ch in res if ch.isdigit())) > 5:
        return None  # before 6.8 resources 6 and up were the ROM, the SR-IOV and the bridge windows, by number
    span = _PCI_RANGE.search(rest)
    if span is not None and span["type"] == "io" or span is None and res and " io" in rest:
        return None
    if not res and "MMIO" not in rest:
        return None  # a line of the device that names no BAR (an enable message, say)
    size = _pci_size(span)
    name = res or "SR-IOV BARs"
    # the text before the address is who printed it: "pci", or the driver bound to the device ("nvidia")
    return event(kind="pci_bar_ok" if outcome == "ok" else "pci_bar", pci_address=_normalize(found["addr"]),
                 process=text[:found.start()].split()[-1] if text[:found.start()].split() else None,
                 detail=f"{name} ({size}): {outcome}" if size else f"{name}: {outcome}")


def _pci_resource_name(event: KernelEvent) -> tuple[str | None, str]:
    """Which device and resource a ``pci_bar`` / ``pci_bar_ok`` event is about: (address, "BAR 1")."""
    return event.pci_address, (event.detail or "").split(":", 1)[0].split(" (", 1)[0]


def _register_bar(pre: str | None) -> str:
    """The BAR a config-space register names in the kernel's older lines ("reg 0x14:" is BAR 1); "" for none."""
    if not pre or not pre.startswith("reg 0x"):
        return ""
    register = int(pre[6:].rstrip(": "), 16)
    return f"BAR {(register - 0x10) // 4}" if 0x10 <= register <= 0x24 and register % 4 == 0 else ""


def _pci_size(span: re.Match[str] | None) -> str:
    """A PCI range's size in words ("32 GiB"), from "size 0x..." or "start-end"; "" when there is none."""
    if span is None:
        return ""
    size = int(span["size"], 16) if span["size"] else int(span["end"], 16) - int(span["start"], 16) + 1
    if size <= 1:
        return ""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"


def _pci_resources(events: list[KernelEvent], failing: set[str]) -> list[KernelEvent]:
    """The second pass's PCI core lines resolved: a memory BAR that got no address, and no address later in the log
    (the "assigned" of a second pass, the firmware's own address), is a ``bar`` event of an NVIDIA device (its
    enumeration line names vendor 10de, or the driver already reported it failing), else a ``pci_resource`` event of a
    display controller or of a device the log does not identify (the checks weigh those); another device's lines are
    dropped. Every other event passes through."""
    ids = {e.pci_address: e.detail or "" for e in events if e.kind == "pci_id"}
    later_ok: dict[tuple[str | None, str], int] = {}
    for e in events:
        if e.kind == "pci_bar_ok":
            key = _pci_resource_name(e)
            later_ok[key] = max(later_ok.get(key, 0), e.line_number or 0)
    out = []
    for e in events:
        if e.kind in ("pci_id", "pci_bar_ok"):
            continue
        if e.kind != "pci_bar":
            out.append(e)
            continue
        if later_ok.get(_pci_resource_name(e), -1) > (e.line_number or 0):
            continue  # the BAR got its address after all
        known = ids.get(e.pci_address)
        nvidia = known.startswith("10de:") if known else e.pci_address in failing or e.process == "nvidia"
        if known and not nvidia and not known.split(" ")[-1].startswith("03"):
            continue  # another vendor's device that is no display controller: a NIC's or a disk's window
        detail = e.detail if nvidia or not known else f"{e.detail} (display controller {known.split(' ')[0]})"
        out.append(dataclasses.replace(e, kind="bar" if nvidia else "pci_resource", detail=detail))
    return out


def _wants_more(text: str) -> bool:
    """A block whose first sentence ends early but continues (probe / invalid BAR explanations)."""
    return bool(_BAR_INVALID.search(text) and not _BAR_SIZE.search(text))


def _xid(line: _Line, match: re.Match[str]) -> KernelEvent:
    tokens = match["dev"].split()
    address = _normalize(tokens[0]) if tokens else None
    details = [t.replace(": ", ":") for t in _MIG.findall(match["dev"])] if "GPU-" in match["dev"] else []
    rest = match["rest"].strip()
    pid = process = None
    who = _PID_NAME.match(rest) if rest.startswith("pid=") else None
    if who:
        pid_text = who["pid"].strip("'")
        pid = int(pid_text) if pid_text.isdigit() else None
        name = (who["name"] or "").strip()
        process = name if name and name != "<unknown>" else None
        rest = who["msg"].strip()
    parts = [" ".join(details)] if details else []
    caused = _CAUSED_BY.search(rest) if "caused by previous Xid" in rest else None
    if caused:
        parts.append(f"caused by previous Xid {caused[1]}")
    return KernelEvent(kind="xid", message=rest, line=line.raw, line_number=line.number,
                       timestamp=line.timestamp, pci_address=address, xid=int(match["code"]), pid=pid,
                       process=process, detail="; ".join(parts) or None)


def parse_xid_line(raw: str) -> KernelEvent | None:
    """One kernel log line (any supported prefix, a /dev/kmsg record included) as an ``xid`` event, or None
    when it is no Xid line: the fields exactly as the full scan reads them (the monitor's live follower)."""
    _timestamp, message = _split_prefix(raw)
    match = _XID.search(message) if "Xid (" in message else None
    return None if match is None else _xid(_Line(0, raw, _timestamp, message), match)


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
    # syslog writes the message's newlines as "#012" (rsyslog's escape), each continuation line with its "NVRM: "
    mismatch = _API_MISMATCH.search(text if "#012" not in text else " ".join(
        text.replace("#012", " ").replace("NVRM:", " ").split()))
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
            # a GPU vfio-pci or pci-stub holds for a virtual machine is no failed probe (GH628 judges it)
            kind = "passthrough" if probe.groups() and probe.group(1) in _PASSTHROUGH_DRIVERS else "probe"
            return make(kind, _address(text), template.format(*probe.groups()))
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
        number = hit[0] + 1
        raw = _decode(hit[1])
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
