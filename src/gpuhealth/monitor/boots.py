"""Faults remembered across restarts of gpuhealth and reboots of the host, in the history database.

The kernel gives every boot a random id (``/proc/sys/kernel/random/boot_id``); a replayed trace carries its own
(``boot_id`` in its header, ``boot`` records where the traced host rebooted). With a history database the monitor
records, per boot:

- the last state of each alert it notified (``paged``). An alert that fires again after gpuhealth restarted, in
  the same boot, is not paged again: it was still open when gpuhealth stopped, or it resolved and the evidence it
  stands on is no newer than that (the full check finds every Xid of this boot's kernel log on its first run).
  It is still sent, at ``info``, saying so; serve's live state and /metrics get it as it is;
- each fault per GPU (``fault``: an Xid code, or a rule). A firing alert whose action is a reboot or a GPU reset
  and whose fault was seen in at least N earlier boots (knowledge/escalation.csv: 2 by default, rows per Xid)
  escalates to ``hardware_inspection``: the reboot did not clear it;
- each boot (``boot``): the reboots observed in the last week are the node's remediation count (``fleet``,
  /metrics ``gpuhealth_remediations``, the dashboard);
- each GPU reset (``reset``), which the monitor infers from its samples (``ResetWatch``): the driver logs a reset
  only at its debug level, and NVML has no reset counter, but a reset re-initialises what NVML counts "since the
  driver loaded" and carries out a pending page retirement or row remap. Resets count as remediations too (per
  node and per GPU: /metrics ``gpuhealth_gpu_resets``), and a fault whose action is a GPU reset that comes back
  after resets escalates like one that comes back after reboots.

Without a boot id (an old trace) none of that applies, and alerts page as before. The acknowledgements (acks.py)
need only the database: an acknowledged alert does not page until its acknowledgement ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gpuhealth.lazyre import lazy_re

from .rules import Alert
from .sample import Event, Sample
from .store import StoreError

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
ESCALATING = ("reboot", "reset_gpu")  # actions that a fault coming back shows did not work
ESCALATED = "hardware_inspection"
REMEDIATION_WINDOW_S = 7 * 86400.0  # NVSentinel's remediation count looks at 7 days
_BOOT_ID = lazy_re(r"[0-9A-Za-z][0-9A-Za-z._:-]{0,63}")


def valid_boot_id(value: Any) -> bool:
    """A boot id as the kernel writes it (a UUID), or a trace's own name for a boot: short, no spaces."""
    return isinstance(value, str) and _BOOT_ID.fullmatch(value) is not None


def read_boot_id(host: Any = None) -> str | None:
    """This boot's id, read through the host seam; None when it cannot be read (not Linux, a sandbox)."""
    if host is None:
        from gpuhealth.host import LocalHost

        host = LocalHost()
    text = (host.read(BOOT_ID_PATH).text or "").strip()
    return text if valid_boot_id(text) else None


@functools.cache
def thresholds() -> dict[str, int]:
    """knowledge/escalation.csv: "default" or an Xid code -> earlier boots with the fault before it escalates."""
    from gpuhealth.knowledge import table_rows

    out: dict[str, int] = {}
    for row in table_rows("escalation.csv"):
        if not row["why"].strip() or not row["source"].strip():
            raise ValueError(f"escalation.csv: {row['key']}: a row says why and names its source")
        if not row["boots"].isdecimal() or int(row["boots"]) < 1:
            raise ValueError(f"escalation.csv: {row['key']}: boots must be a whole number >= 1")
        out[row["key"]] = int(row["boots"])
    if "default" not in out:
        raise ValueError("escalation.csv: no default row")
    return out


def threshold(fault: str) -> int:
    table = thresholds()
    code = fault.removeprefix("xid:")
    return table.get(code, table["default"]) if fault.startswith("xid:") else table["default"]


def faults_of(alert: Alert) -> tuple[str, ...]:
    """What an alert is a fault of, the same across rules and boots: ``xid:<code>`` for the xid rule and for a
    full check's Xid findings (each Xid it stands on), else the rule (and its key)."""
    if alert.rule == "xid" and alert.key:
        return (f"xid:{alert.key}",)
    codes = [basis.key for basis in alert.about if basis.key]
    if alert.rule.startswith("check:") and codes:
        return tuple(f"xid:{code}" for code in dict.fromkeys(codes))
    return (f"{alert.rule}:{alert.key}" if alert.key else alert.rule,)


# What NVML counts since the driver loaded (NVML API reference: nvmlDeviceGetTotalEnergyConsumption "since the
# driver was last reloaded", nvmlDeviceGetPcieReplayCounter, and the volatile ECC counts, "reset each time the driver
# loads"). The monitor keeps the driver loaded (it holds NVML, or nvidia-smi's loop does), so one of them going back
# within a boot means the GPU was reset (`nvidia-smi -r`, a recovery) or the driver reloaded: the GPU started over.
_SINCE_LOAD = ("energy_j", "pcie_replay_count", "ecc_volatile_corrected", "ecc_volatile_uncorrected")
_SLACK = {"energy_j": 1.0}  # the energy counter comes in mJ and is stored rounded: a joule back is rounding
# A pending retirement or row remap takes effect at the GPU's next reset (NVIDIA, GPU Memory Error Management):
# pending going away within a boot is a reset.
_PENDING = ("retired_pages_pending", "remapped_rows_pending")
RESET_DEBOUNCE_S = 60.0  # the signs of one reset show over a few samples (readings missing while it runs)


class ResetWatch:
    """Infers GPU resets from consecutive samples of one GPU within one boot; ``feed`` returns (gpu, t, why)."""

    def __init__(self) -> None:
        self._last: dict[int, dict[str, Any]] = {}  # per GPU, the last reading of each counter and flag
        self._reset_at: dict[int, float] = {}

    def reboot(self) -> None:
        """A new boot: the counters started over with it, which is no reset."""
        self._last.clear()
        self._reset_at.clear()

    def feed(self, events: list[Event]) -> list[tuple[int, float, str]]:
        out: list[tuple[int, float, str]] = []
        for event in events:
            if isinstance(event, Sample) and (why := self._sign(event)) is not None:
                if event.t - self._reset_at.get(event.gpu, -1e18) >= RESET_DEBOUNCE_S:
                    out.append((event.gpu, event.t, why))
                self._reset_at[event.gpu] = event.t
        return out

    def _sign(self, sample: Sample) -> str | None:
        last = self._last.setdefault(sample.gpu, {})
        signs: list[str] = []
        for name in _SINCE_LOAD:
            value = getattr(sample, name)
            if value is None:
                continue  # a reading missing keeps the last one
            before = last.get(name)
            if before is not None and value < before - _SLACK.get(name, 0):
                signs.append(f"{name} went back from {before:g} to {value:g}")
            last[name] = value
        for name in _PENDING:
            value = getattr(sample, name)
            if value is None:
                continue
            if last.get(name) is True and value is False:
                signs.append(f"{name.replace('_', ' ')} cleared")
            last[name] = value
        return "; ".join(signs) or None


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


class FaultMemory:
    """The monitor's memory of one host's boots, pages and faults, in the history ``store``. A store that fails
    is said once per message and then costs only the memory: alerts page as if it were off."""

    def __init__(self, store: Any, boot: str | None, log: Callable[[str], None]) -> None:
        self.store = store
        self.boot: str | None = None
        self._log = log
        self._said: set[str] = set()
        self.remediations: int | None = None  # reboots and GPU resets in the window
        self.listeners: list[Callable[[int | None], None]] = []  # serve's live state: the count when it changes
        self.resets: dict[int, int] = {}  # per GPU, its resets in the window
        self.reset_listeners: list[Callable[[dict[int, int]], None]] = []
        self.watch = ResetWatch()
        self._counted_at = -1e18
        # acknowledgements (acks.py): read again once a minute, or at the next step once ``acks_changed`` is set
        self.acks: list[Any] = []
        self.ack_listeners: list[Callable[[list[Any]], None]] = []
        self.acks_changed = True
        self._silenced: dict[tuple[str, int | None, str], Alert] = {}  # firing alerts an ack holds back
        if boot is not None:
            self.set_boot(boot, store.clock())
        self.poll(store.clock())  # the acknowledgements hold from the first alert on

    def xids_paged(self) -> set[tuple[int, int]]:
        """(GPU, Xid code) of every Xid that NVML's ``xid`` rule paged in this boot, before this gpuhealth started
        too: serve's /metrics gives them (gpuhealth_xid_paged), so that Prometheus does not page the full check's
        finding of the same Xid after a restart (deploy/prometheus/gpuhealth.rules.yml, GpuhealthCheckFinding)."""
        if self.boot is None:
            return set()
        try:
            keys = self.store.paged_keys(self.boot, "xid")
        except StoreError as exc:
            self._failed(exc)
            return set()
        return {(gpu, int(key)) for gpu, key in keys if gpu is not None and key.isdecimal()}

    def _failed(self, exc: StoreError) -> None:
        if str(exc) not in self._said:
            self._said.add(str(exc))
            self._log(f"{exc}; faults are not remembered across restarts meanwhile")

    def set_boot(self, boot: str, now: float) -> bool:
        """Now in ``boot``; True when it differs from the boot before (a reboot, in a replay)."""
        changed = boot != self.boot
        if changed:
            self.watch.reboot()
        self.boot = boot
        try:
            self.store.note_boot(boot, now)
        except StoreError as exc:
            self._failed(exc)
        self.count(now, force=True)
        return changed

    def note_resets(self, events: list[Event]) -> None:
        """Once per monitor step, before the alerts: record the GPU resets the samples show (in a boot only)."""
        found = self.watch.feed(events)
        if not found or self.boot is None:
            return
        for gpu, t, why in found:
            self._log(f"GPU {gpu} was reset or its driver reloaded ({why}): counted as a remediation")
            try:
                self.store.note_reset(self.boot, gpu, t, why)
            except StoreError as exc:
                self._failed(exc)
        self.count(found[-1][1], force=True)

    def count(self, now: float, force: bool = False) -> int | None:
        """The reboots and GPU resets gpuhealth saw in the last week (refreshed at most once a minute), told to the
        listeners; None without a boot id."""
        if not force and now - self._counted_at < 60:
            return self.remediations
        self._counted_at = now
        self.acks_changed = True
        value: int | None = None
        resets: dict[int, int] = {}
        try:
            if self.boot is not None:
                self.store.note_boot(self.boot, now)  # the boot is still running: kept by the retention
                resets = self.store.resets_since(now - REMEDIATION_WINDOW_S)
                value = self.store.reboots_since(now - REMEDIATION_WINDOW_S) + sum(resets.values())
        except StoreError as exc:
            self._failed(exc)
        if resets != self.resets:
            self.resets = resets
            for reset_listener in self.reset_listeners:
                reset_listener(dict(resets))
        if value != self.remediations:
            self.remediations = value
            for listener in self.listeners:
                listener(value)
        return value

    def poll(self, now: float) -> list[Alert]:
        """Once per monitor step: the count and the acknowledgements refreshed when due; the alerts whose
        acknowledgement ended (expired or cleared) while they fire, to page now."""
        self.count(now)
        if self.acks_changed:
            self.acks_changed = False
            from . import acks

            try:
                self.acks = acks.load(self.store)
            except StoreError as exc:
                self._failed(exc)
            for listener in self.ack_listeners:
                listener(list(self.acks))
        ended = [alert for identity, alert in self._silenced.items() if self._ack(alert, now) is None]
        for alert in ended:
            del self._silenced[alert.identity]
        return ended

    def _ack(self, alert: Alert, now: float) -> Any:
        from .acks import covers

        return next((ack for ack in self.acks if ack.active(now) and covers(ack, alert)), None)

    def admit(self, alert: Alert) -> tuple[Alert, str | None]:
        """The alert to notify (escalated when its fault survived reboots) and, when it must not page, why: it
        paged already in this boot before gpuhealth restarted, or an acknowledgement holds it."""
        from .acks import shown_time

        boot = self.boot
        quiet: str | None = None
        if alert.state != "firing":
            self._silenced.pop(alert.identity, None)
        try:
            if boot is not None:
                if alert.state == "firing":
                    if not alert.renotify:
                        before = self.store.paged_state(boot, alert.rule, alert.gpu, alert.key)
                        if before is not None and _continues(alert, before) or self._paged_as_xid(alert, boot):
                            quiet = "paged already in this boot, before gpuhealth restarted: not paged again"
                    alert = self._escalate(alert, boot)
                self.store.note_paged(boot, alert.rule, alert.gpu, alert.key, alert.state, alert.t)
        except StoreError as exc:
            self._failed(exc)
        ack = self._ack(alert, alert.t) if alert.state == "firing" else None
        if ack is not None:
            self._silenced[alert.identity] = alert
            quiet = quiet or (f"acknowledged {shown_time(ack.until)}: {ack.reason} - not paged until then; "
                              "`gpuhealth ack --clear` ends it")
        return alert, quiet

    def _paged_as_xid(self, alert: Alert, boot: str) -> bool:
        """A full check's Xid finding every Xid of which NVML's ``xid`` rule paged on that GPU earlier in this boot,
        the finding standing on no newer log line. Before a restart the dispatcher folds such a finding into the open
        xid alert (fold.py); after one there is no xid alert to fold into, yet it is the same fault."""
        codes = [fault.removeprefix("xid:") for fault in faults_of(alert) if fault.startswith("xid:")]
        if not alert.rule.startswith("check:") or not codes:
            return False
        for code in codes:
            before = self.store.paged_state(boot, "xid", alert.gpu, code)
            seen = [basis.seen for basis in alert.about if basis.key == code and basis.seen is not None]
            if before is None or before[0] != "firing" and seen and max(seen) > before[1]:
                return False
        return True

    def _escalate(self, alert: Alert, boot: str) -> Alert:
        from .notify import actions_of

        action, impact = actions_of(alert)
        # (earlier boots with the fault, the resets it came back after, its threshold)
        worst: tuple[int, int, int] | None = None
        for fault in faults_of(alert):
            self.store.note_fault(boot, alert.gpu, fault, alert.t)
            earlier = len([b for b in dict.fromkeys(self.store.fault_boots(alert.gpu, fault)) if b != boot])
            # a GPU reset is the remediation only of a fault whose action is one; a reboot is any fault's
            resets = (self.store.resets_after_fault(alert.gpu, fault)
                      if action == "reset_gpu" and alert.gpu is not None else 0)
            if (action in ESCALATING and earlier + resets >= threshold(fault)
                    and (worst is None or earlier + resets > worst[0] + worst[1])):
                worst = (earlier, resets, threshold(fault))
        if worst is None:
            return alert
        where = "the host" if alert.gpu is None else f"GPU {alert.gpu}"
        if worst[1] == 0:
            message = (f"{alert.message} - the {_ordinal(worst[0] + 1)} boot with this fault on {where}: {action} did "
                       f"not clear it (escalates after {worst[2]} earlier boot(s)); inspect the hardware")
        else:
            message = (f"{alert.message} - this fault came back on {where} after {worst[0]} reboot(s) and {worst[1]} "
                       f"GPU reset(s): {action} did not clear it (escalates after {worst[2]} reboot(s) or reset(s)); "
                       "inspect the hardware")
        return Alert(alert.rule, alert.gpu, alert.severity, alert.state, message, alert.t, alert.key, alert.renotify,
                     alert.about, ESCALATED, impact)


def _continues(alert: Alert, before: tuple[str, float]) -> bool:
    """Whether a firing alert is the one paged earlier in this boot: still open when gpuhealth stopped, or resolved
    since and standing on nothing newer (a full check's finding names when the kernel log last showed it; a live
    rule's alert after its resolution is a new occurrence)."""
    state, when = before
    if state == "firing":
        return True
    if not alert.rule.startswith("check:"):
        return False
    seen = [basis.seen for basis in alert.about if basis.seen is not None]
    return not seen or max(seen) <= when


def not_paged_note(alert: Alert, why: str) -> Alert:
    """What the monitor's notifiers get for an alert that must not page (``why``): said at info, not paged."""
    return Alert(alert.rule, alert.gpu, "info", alert.state, f"{alert.message} ({why})", alert.t, alert.key,
                 alert.renotify, alert.about, alert.action, alert.impact)
