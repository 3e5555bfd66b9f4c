"""The full check's kernel-log Xids, fed to the correlation rules (monitor/correlate.py) once each.

NVML's Xid events and the live /dev/kmsg follower (monitor/kmsg.py) feed the correlator as Xids happen. On a host
where the follower is off (not root, no /dev/kmsg, the nvidia-smi fallback), and for the Xids logged before the
monitor started, only the periodic full check sees them: its kernel log (``dmesg --time-format iso`` or
``journalctl -k -b``: this boot only) keeps the last few occurrences per GPU and Xid with their own time and text
(``KernelLog.xids``, parsers/kernel_log.XID_RECENT). ``XidLogFeed.take`` turns the new ones into occurrences:

- only lines with a wall-clock time (the ISO forms the full check reads; a line that cannot be placed on the clock
  cannot be counted in a rule's window) and of a GPU the snapshot knows (a same-GPU rule needs the GPU);
- only lines newer than the last one already fed in this boot: the mark is kept in the history (``meta``
  ``xidlog_position``: "<boot> <seconds>"), so a restart of the monitor in the same boot does not feed them again,
  and a new boot starts over (its log is new);
- with the follower on, only lines from before it began reading (it reads every later line itself); that moment is
  kept with the mark, so a follower resumed after a restart keeps the first one's.

The correlator then drops an occurrence NVML already delivered (same GPU and Xid within ``TOLERANCE_S``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

POSITION_KEY = "xidlog_position"
# An NVML event is timed when the monitor polls it (within a step), a kernel line by the kernel's clock as dmesg
# converts it: the same Xid lies this close in time, or it is another one.
TOLERANCE_S = 5.0

Log = Callable[[str], None]


def _quiet(text: str) -> None:
    pass


class XidLogFeed:
    """The new Xid occurrences of each full check's kernel log: (t, GPU index, Xid, text), oldest first."""

    def __init__(self, boot: str | None, store: Any = None, log: Log = _quiet,
                 follower_since: float | None = None) -> None:
        self.boot, self.store, self._log = boot, store, log
        saved = self._saved()
        self.mark = saved[0] if saved else None  # the newest line's time already fed in this boot
        self.until = None  # lines from this time on are the follower's; None: no follower
        if follower_since is not None:
            self.until = saved[1] if saved and saved[1] is not None else follower_since
            if not saved or saved[1] is None:
                self._save()  # a restart resuming the follower keeps this moment: it read every line since
        self.fed = 0

    def _saved(self) -> tuple[float | None, float | None] | None:
        if self.store is None or self.boot is None:
            return None
        from .store import StoreError

        try:
            value = self.store.meta(POSITION_KEY) or ""
        except StoreError as exc:
            self._log(str(exc))
            return None
        boot, _, rest = value.partition(" ")
        mark_text, _, until_text = rest.partition(" ")
        try:
            mark = None if mark_text == "-" else float(mark_text)
            until = float(until_text) if until_text else None
        except ValueError:
            return None
        return (mark, until) if boot == self.boot else None

    def take(self, snapshot: Any) -> list[tuple[float, int, int, str]]:
        from gpuhealth.parsers.kernel_log import wall_clock_seconds

        log = getattr(snapshot, "kernel_log", None)
        if log is None:
            return []
        new = []
        for event in log.xids:
            t = wall_clock_seconds(event.timestamp)
            if t is None or event.xid is None or (self.mark is not None and t <= self.mark):
                continue
            if self.until is not None and t >= self.until:
                continue
            gpu = snapshot.gpu_subject(event.pci_address).gpu_index if event.pci_address else None
            if gpu is None:
                continue
            new.append((t, gpu, event.xid, event.message))
        new.sort(key=lambda item: item[0])
        if new:
            self.mark = new[-1][0]
            self.fed += len(new)
            self._save()
        return new

    def _save(self) -> None:
        if self.store is None or self.boot is None:
            return
        from .store import StoreError

        mark = "-" if self.mark is None else repr(self.mark)
        until = "" if self.until is None else repr(self.until)
        try:
            self.store.set_meta(POSITION_KEY, f"{self.boot} {mark} {until}".rstrip())
        except StoreError as exc:
            self._log(str(exc))
