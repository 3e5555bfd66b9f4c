"""The live kernel log behind the monitor's Xid events: each Xid gets the text of its kernel line.

NVML's Xid events carry only the code. The correlation rows that decode an Xid (Xid 74's registers, NVLink5's
Fatal/Nonfatal and link, Xid 154's recovery action: monitor/correlate.py) need the driver's line, which only the
kernel log has. ``KmsgFollower`` reads ``/dev/kmsg`` through the host seam (host.LocalHost.kmsg), without blocking,
a bounded amount per monitor step, and keeps only the ``NVRM: Xid`` lines, read with the kernel-log parser's own
Xid fields (parsers/kernel_log.parse_xid_line). The driver prints an Xid as one line: "NVRM: Xid (PCI:<address>):
<code>, <text>" (NVIDIA, "Xid Errors" <https://docs.nvidia.com/deploy/xid-errors/index.html>; the Xid 74 form
"NVLink: fatal error detected on link N(0x..., six more)", the Xid 154 form "GPU recovery action changed from 0x0
(None) to 0x2 (Node Reboot Required)" (the names from the driver's gpu.c, _gpuRecoveryActionName, NVIDIA open GPU
kernel modules <https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/src/nvidia/src/kernel/gpu/gpu.c>) and
the NVLink5 144-150 form all sit on the Xid line itself: NVIDIA, "Analyzing Xid Errors with the Xid Catalog"
<https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>), so no following line is joined.

``KmsgSource`` wraps the monitor's source. An NVML Xid event waits up to ``match_s`` for the kernel line of the
same GPU (by PCI address) and code, and goes on with its text; without one it goes on as it came. A kernel line that
no NVML event claims within ``match_s`` (NVML unavailable, the nvidia-smi fallback, Xid events not supported on
the GPU) becomes an Xid event itself. A kernel line takes the time it was read: within a step of when the driver
printed it, live.

Where it starts: the last record read is kept in the history per boot (``meta`` ``kmsg_position``), so a restart
of the monitor in the same boot goes on after it (neither replayed nor lost while the ring buffer still holds
them); otherwise it starts at the log's current end (the full check reads what came before).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from .sample import Event, Sample, XidEvent

POSITION_KEY = "kmsg_position"
MAX_BYTES = 256 * 1024  # read per step at most: a storm of kernel lines costs a bounded step
MAX_LINES = 1024  # records handled per step at most; the rest wait for the next step
MAX_PENDING = 1024  # Xid events and kernel lines waiting for their match
MATCH_S = 3.0  # an NVML Xid event and its kernel line are this close in time, or not the same Xid
SAVE_EVERY_S = 30.0  # the position is saved at once after an Xid line, else at most this often

Log = Callable[[str], None]


def _quiet(text: str) -> None:
    pass


class KmsgFollower:
    """The new ``NVRM: Xid`` lines of the kernel log, as kernel-log events, each ``poll``."""

    def __init__(self, reader: Any, boot: str | None = None, store: Any = None, log: Log = _quiet,
                 clock: Callable[[], float] = time.time) -> None:
        self.reader, self.boot, self.store, self._log, self.clock = reader, boot, store, log, clock
        self.after = self._saved()  # the last record's sequence number already read, when it is known
        if self.after is None:
            reader.seek_end()
        self._saved_seq = self.after
        self._saved_at = clock()
        self._missed = 0  # records skipped by the kernel's sequence numbers, not said yet
        self._missed_said_at = -float("inf")
        self.lines = 0  # records read, for tests and the bench

    def _saved(self) -> int | None:
        if self.store is None or self.boot is None:
            return None
        from .store import StoreError

        try:
            value = self.store.meta(POSITION_KEY)
        except StoreError as exc:
            self._log(str(exc))
            return None
        boot, _, seq = (value or "").partition(" ")
        return int(seq) if boot == self.boot and seq.isdecimal() else None

    def poll(self) -> list[Any]:
        found = []
        for line in self.reader.read_lines(MAX_BYTES, MAX_LINES):
            if line[:1] == b" ":  # a record's dictionary line (" SUBSYSTEM=pci")
                continue
            head, sep, _text = line.partition(b";")
            fields = head.split(b",")
            if not sep or len(fields) < 3 or not fields[1].isdigit():
                continue  # no record ("prio,seq,usec,flags;text")
            seq = int(fields[1])
            if self.after is not None and seq <= self.after:
                continue  # read before the monitor restarted
            if self.after is not None and seq > self.after + 1:  # overwritten before read (EPIPE, or while down)
                self._missed += seq - self.after - 1
            self.after = seq
            self.lines += 1
            if b"NVRM: Xid (" in line:
                # imported at the first Xid: the parser is a few MiB of a monitor's resident memory
                from gpuhealth.parsers.kernel_log import parse_xid_line

                if (event := parse_xid_line(line.decode("utf-8", "replace"))) is not None:
                    found.append(event)
        self._say_missed()
        self._save(bool(found))
        return found

    def _say_missed(self) -> None:
        """Records the ring buffer overwrote before they were read, said at most once a minute."""
        now = self.clock()
        if self._missed and now - self._missed_said_at >= 60.0:
            self._log(f"{self._missed} kernel log record(s) were overwritten before the monitor read them (the ring "
                      "buffer wrapped): an Xid among them has NVML's code only")
            self._missed, self._missed_said_at = 0, now

    def _save(self, now_please: bool = False) -> None:
        if self.store is None or self.boot is None or self.after is None or self.after == self._saved_seq:
            return
        now = self.clock()
        if not now_please and now - self._saved_at < SAVE_EVERY_S:
            return
        from .store import StoreError

        try:
            self.store.set_meta(POSITION_KEY, f"{self.boot} {self.after}")
        except StoreError as exc:
            self._log(str(exc))
        self._saved_seq, self._saved_at = self.after, now

    def close(self) -> None:
        self._save(True)
        self.reader.close()


class KmsgSource:
    """The monitor's source, its Xid events given their kernel text; kernel Xid lines without an NVML event
    become events. Everything else passes unchanged."""

    def __init__(self, inner: Any, follower: KmsgFollower, match_s: float = MATCH_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.inner, self.follower, self.match_s, self.clock = inner, follower, match_s, clock
        self._waiting: list[XidEvent] = []  # NVML Xid events without their line yet
        # (when read, PCI address, Xid, text) of the kernel lines without their NVML event yet: the fields, not the
        # parser's whole event (it holds the line a second time, up to 16 KiB): at most MAX_PENDING of them
        self._lines: list[tuple[float, str, int, str]] = []
        self._gpus: dict[str, int] = {}  # PCI address -> the driver's index, from the samples

    def __getattr__(self, name: str) -> Any:  # exhausted, paced, boot_id, ...: the inner source's
        if name == "inner":  # not set yet
            raise AttributeError(name)
        return getattr(self.inner, name)

    def poll(self) -> list[Event]:
        events = self.inner.poll()
        now = self.clock()
        out: list[Event] = []
        for event in events:
            if isinstance(event, Sample) and event.pci_address:
                self._gpus[event.pci_address] = event.gpu
            if isinstance(event, XidEvent) and event.text is None:
                self._waiting.append(event)
            else:
                out.append(event)
        self._lines += [(now, line.pci_address or "", line.xid, line.message) for line in self.follower.poll()]
        return out + self._match(now)

    def _match(self, now: float) -> list[Event]:
        released: list[Event] = []
        unclaimed = []
        for read_at, address, xid, text in self._lines:
            gpu = self._gpus.get(address, -1)
            twin = next((e for e in self._waiting if e.xid == xid and e.gpu == gpu and gpu >= 0
                         and abs(e.t - read_at) <= self.match_s), None)
            if twin is not None:
                self._waiting.remove(twin)
                released.append(dataclasses.replace(twin, text=text))
            else:
                unclaimed.append((read_at, address, xid, text))
        # Waited long enough, or too many waiting (a storm): on without a match.
        late = len(self._waiting) - MAX_PENDING
        keep = []
        for index, event in enumerate(self._waiting):
            if index < late or now - event.t >= self.match_s:
                released.append(event)
            else:
                keep.append(event)
        self._waiting = keep
        late = len(unclaimed) - MAX_PENDING
        self._lines = []
        for index, line in enumerate(unclaimed):
            read_at, address, xid, text = line
            if index < late or now - read_at >= self.match_s:
                released.append(XidEvent(read_at, self._gpus.get(address, -1), xid, text))
            else:
                self._lines.append(line)
        released.sort(key=lambda e: e.t)
        return released

    def close(self) -> None:
        self.follower.close()
        self.inner.close()


def follow(source: Any, boot: str | None, store: Any = None, log: Log = _quiet, host: Any = None,
           path: str | None = None) -> Any:
    """``source`` wrapped with a follower of this host's kernel log, or ``source`` itself, said once in ``log``,
    when the log cannot be read (not root, no /dev/kmsg): the monitor runs on, its Xid events with the code only."""
    if host is None:
        from gpuhealth.host import LocalHost

        host = LocalHost()
    reader = host.kmsg(path)
    if isinstance(reader, str):
        log(f"kernel log not followed ({reader}): Xid events carry NVML's code only, so the correlation rules "
            "that decode an Xid's text cannot match")
        return source
    return KmsgSource(source, KmsgFollower(reader, boot, store, log))
