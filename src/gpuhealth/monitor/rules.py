"""Alert rules: small stateful objects fed events in time order; each fires once and resolves once.

Every rule debounces through ``Debounce``: a condition must hold for ``for`` before the alert fires,
and the *clear* condition (stricter than "not active": that gap is the hysteresis) must hold for
``clear_for`` before it resolves. A value flapping around a threshold therefore cannot storm.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gpuhealth.records import record

from .config import parse_duration
from .sample import HELD_MIB, Event, GpuLost, Sample, XidEvent, sample_holds

SEVERITIES = ("info", "warning", "critical")


def took(seconds: float) -> str:
    """A duration for a message: "45 s", "9 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Basis(NamedTuple):
    """One thing an alert stands on (monitor/fold.py), in the terms of the alert that would explain it: a GPU (None:
    GPUs never seen) and a key of that alert (an Xid code; "" for none). A full check's finding adds its own
    severity (its Xid's, which may be below the alert's worst) and when the kernel log last showed it (seconds
    since the epoch; None when the log has no wall-clock time)."""

    gpu: int | None
    key: str = ""
    severity: str = ""
    seen: float | None = None


@record
class Alert:
    rule: str
    gpu: int | None  # None: the host
    severity: str
    state: str  # "firing" or "resolved"
    message: str
    t: float
    key: str = ""  # what within the rule and GPU (an Xid code, a sensor): part of the identity
    # A firing alert that is already firing, sent again because its count rose ("... now 2"):
    # notifiers deliver it although the state did not change.
    renotify: bool = False
    # What the alert stands on (monitor/fold.py): a host alert's GPUs (gpu_count: each missing GPU; Basis(None) for
    # GPUs never seen), a check finding's Xid codes. Not part of the identity.
    about: tuple[Basis, ...] = ()
    # What to do and what it does to the node (model.ACTIONS, model.IMPACTS): a check finding's own; "" for a rule's
    # alert, whose row notify.actions_of reads (knowledge/actions.csv "rule:<name>", an Xid's row for rules.xid).
    action: str = ""
    impact: str = ""
    # The snapshot bundle captured for this alert's incident (monitor/capture.py); "" for none.
    capture: str = ""
    # Raised on a GPU that a drill injected a fault into (monitor/inject.py): its message says "DRILL"; it is
    # notified but never kept in the fault memory (boots.py) nor captured.
    drill: bool = False

    @property
    def identity(self) -> tuple[str, int | None, str]:
        return (self.rule, self.gpu, self.key)


class Debounce:
    """for-duration on the way up, clear-duration on the way down."""

    def __init__(self, for_s: float, clear_for_s: float) -> None:
        self.for_s, self.clear_for_s = for_s, clear_for_s
        self.firing = False
        self._since: float | None = None
        self._clear_since: float | None = None
        self.fired_at: float | None = None

    def step(self, t: float, active: bool, cleared: bool) -> str | None:
        """"firing" or "resolved" when the state changes, else None."""
        if not self.firing:
            self._since = (self._since if self._since is not None else t) if active else None
            if self._since is not None and t - self._since >= self.for_s:
                self.firing, self._clear_since, self.fired_at = True, None, t
                return "firing"
            return None
        self._clear_since = (self._clear_since if self._clear_since is not None else t) if cleared else None
        if self._clear_since is not None and t - self._clear_since >= self.clear_for_s:
            self.firing, self._since = False, None
            return "resolved"
        return None


class Rule:
    name = ""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.held_mib = HELD_MIB  # `[monitor] held_mib` (RuleSet.from_config sets it): see sample.job_holds
        self.severity = str(options.get("severity", "warning"))
        if self.severity not in SEVERITIES:
            raise ValueError(f"rules.{self.name}.severity must be one of {', '.join(SEVERITIES)}")
        self.for_s = parse_duration(options.get("for", 0))
        self.clear_for_s = parse_duration(options.get("clear_for", 0))
        self._states: dict[tuple[int | None, str], Debounce] = {}

    def feed(self, event: Event) -> list[Alert]:
        return []

    def tick(self, t: float, present: set[int]) -> list[Alert]:
        """Called once per batch of events, with the GPUs that answered in it."""
        return []

    def _step(self, gpu: int | None, t: float, active: bool, cleared: bool, message: str, resolution: str,
              key: str = "", severity: str | None = None, for_s: float | None = None) -> list[Alert]:
        """Debounce one condition. ``message`` says what fired, ``resolution`` what cleared; the latter
        gets "after <how long it was firing>" appended."""
        state = self._states.get((gpu, key))
        if state is None:
            state = self._states[(gpu, key)] = Debounce(self.for_s if for_s is None else for_s, self.clear_for_s)
        fired_at = state.fired_at
        change = state.step(t, active, cleared)
        if change is None:
            return []
        if change == "resolved":
            message = f"{resolution} after {took(t - (fired_at if fired_at is not None else t))}"
        return [Alert(self.name, gpu, severity or self.severity, change, message, t, key)]


class TemperatureRule(Rule):
    """Too hot for ``for`` in a row, or over the threshold more than ``above_share`` of the last ``window``
    (a GPU hovering at the threshold never stays over it 30 s in a row, yet runs hot half the time)."""

    name = "temperature"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.window = parse_duration(options.get("window", 300))
        self.above_share = float(options.get("above_share", 0.5))
        if not 0 < self.above_share <= 1:
            raise ValueError("rules.temperature.above_share must be a fraction in (0, 1]")
        # per GPU: (t, seconds over the threshold since the previous sample) and their running sum
        self._spells: dict[int, deque[tuple[float, float]]] = {}
        self._above_s: dict[int, float] = {}
        self._last: dict[int, tuple[float, bool]] = {}
        self._hot_since: dict[int, float | None] = {}

    def _time_above(self, gpu: int, t: float, above: bool) -> float:
        """Seconds over the threshold within the last ``window``: each interval between two samples
        counts with the state at its start, capped so that a pause in sampling does not count."""
        spells = self._spells.setdefault(gpu, deque())
        last = self._last.get(gpu)
        self._last[gpu] = (t, above)
        total = self._above_s.get(gpu, 0.0)
        if last is not None and last[1] and t > last[0]:
            dt = min(t - last[0], 60.0)
            spells.append((t, dt))
            total += dt
        while spells and spells[0][0] <= t - self.window:
            total -= spells.popleft()[1]
        self._above_s[gpu] = total = max(total, 0.0)
        return total

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.temperature_c is None:
            return []
        limit = float(self.options.get("threshold_c", 85))
        slowdown = event.temperature_slowdown_c
        if slowdown:
            limit = min(limit, slowdown - float(self.options.get("slowdown_margin_c", 5)))
        temp = event.temperature_c
        below = limit - float(self.options.get("hysteresis_c", 3))
        above_s = self._time_above(event.gpu, event.t, temp >= limit)
        mostly = above_s > self.above_share * self.window
        hot_since = self._hot_since.get(event.gpu) if temp >= limit else None
        self._hot_since[event.gpu] = hot_since = (event.t if hot_since is None else hot_since) if temp >= limit \
            else None
        sustained = hot_since is not None and event.t - hot_since >= self.for_s
        note = f", slowdown at {slowdown:g} °C" if slowdown else ""
        if sustained or not mostly:
            text = f"GPU {event.gpu} at {temp:g} °C (alert at {limit:g} °C{note})"
        else:
            text = (f"GPU {event.gpu} over {limit:g} °C for {took(above_s)} of the last {took(self.window)}, "
                    f"now {temp:g} °C (alert at {limit:g} °C{note})")
        # The debounce itself waits for nothing: "for" is counted above, beside the share of the window.
        return self._step(event.gpu, event.t, sustained or mostly, temp < below and not mostly, text,
                          f"GPU {event.gpu} back under {below:g} °C (now {temp:g} °C)", for_s=0)


class StuckSensorRule(Rule):
    """A reading identical for ``for`` while the GPU's own load moved clearly in that time: utilisation
    by ``load_util_pct`` points or power by ``load_power_w`` watts (more than its idle noise). An idle GPU
    whose temperature creeps while power jitters is not a stuck sensor."""

    name = "stuck_sensor"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.metrics = tuple(options.get("metrics", ("temperature_c", "power_w")))
        self.util_move = float(options.get("load_util_pct", 25))
        self.power_move = float(options.get("load_power_w", 15))
        # (gpu, metric) -> [value, since, util low, util high, power low, power high]
        self._flat: dict[tuple[int, str], list[Any]] = {}

    @staticmethod
    def _widen(flat: list[Any], slot: int, value: float | None) -> None:
        if value is None:
            return
        flat[slot] = value if flat[slot] is None else min(flat[slot], value)
        flat[slot + 1] = value if flat[slot + 1] is None else max(flat[slot + 1], value)

    def _load_moved(self, flat: list[Any], metric: str) -> bool:
        def spread(slot: int) -> float:
            return 0.0 if flat[slot] is None else flat[slot + 1] - flat[slot]

        power_counts = metric != "power_w"  # a stuck power sensor cannot prove itself alive
        return spread(2) >= self.util_move or (power_counts and spread(4) >= self.power_move)

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample):
            return []
        alerts: list[Alert] = []
        for metric in self.metrics:
            value = getattr(event, metric)
            flat = self._flat.get((event.gpu, metric))
            if flat is None or flat[0] != value:
                flat = self._flat[(event.gpu, metric)] = [value, event.t, None, None, None, None]
            self._widen(flat, 2, event.utilization_gpu_pct)
            self._widen(flat, 4, event.power_w)
            since = flat[1]
            stuck = value is not None and event.t - since >= self.for_s and self._load_moved(flat, metric)
            word, reading = _reading(metric, value)
            alerts += self._step(event.gpu, event.t, stuck, since == event.t,
                                 f"GPU {event.gpu} {word} has read {reading} for {took(event.t - since)} "
                                 f"while the GPU's load changed ({self._load(flat, metric)}): a stuck sensor",
                                 f"GPU {event.gpu} {word} reading changes again (now {reading})",
                                 key=metric, for_s=0)
        return alerts

    def _load(self, flat: list[Any], metric: str) -> str:
        """The load's range while the reading stood still, as the evidence that the GPU was not simply idle."""
        parts = []
        if flat[2] is not None:
            parts.append(f"utilisation {flat[2]:g}-{flat[3]:g} %")
        if flat[4] is not None and metric != "power_w":
            parts.append(f"power {flat[4]:.0f}-{flat[5]:.0f} W")
        return ", ".join(parts)


# A sensor's name and unit in the alert text: people read "temperature 39 °C", not "temperature_c 39.0".
SENSOR_WORDS = {"temperature_c": ("temperature", "°C"), "memory_temperature_c": ("memory temperature", "°C"),
                "power_w": ("power", "W"), "fan_pct": ("fan", "%")}


def _reading(metric: str, value: float | None) -> tuple[str, str]:
    word, unit = SENSOR_WORDS.get(metric, (metric, ""))
    if value is None:
        return word, "nothing"
    return word, f"{value:g} {unit}".rstrip()


def _holding(sample: Sample) -> str:
    """What holds the GPU, in words: the processes and their memory, or, without a process list, the memory used."""
    if sample.process_count is None and sample.process_memory_mib is None:
        return f"{sample.memory_used_mib or 0:g} MiB is in use (no process list)"
    memory = f"{sample.process_memory_mib:g} MiB" if sample.process_memory_mib is not None else "memory"
    return f"{sample.process_count or 'a'} process(es) hold {memory}"


class HungJobRule(Rule):
    """0 % while a job holds the GPU (sample.job_holds, behind `[monitor] held_mib`)."""

    name = "hung_job"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.utilization_gpu_pct is None:
            return []
        holding = sample_holds(event, self.held_mib)
        util = event.utilization_gpu_pct
        cleared = (f"GPU {event.gpu} computing again ({util:g} %)" if util > 0
                   else f"GPU {event.gpu}: the job ended (no process, memory freed)")
        return self._step(event.gpu, event.t, util <= 0 and holding, util > 0 or not holding,
                          f"GPU {event.gpu} at 0 % utilisation while {_holding(event)}: a hung job?", cleared)


class UtilizationCollapseRule(Rule):
    """Busy, then 0 % within ``drop_within`` and staying there *while the job is still there*: a process
    remains or memory stays held. A job that finished (no process, memory freed) is not an alert."""

    name = "utilization_collapse"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self._last_busy: dict[int, float] = {}
        self._collapsed: dict[int, bool] = {}

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.utilization_gpu_pct is None:
            return []
        util, gpu = event.utilization_gpu_pct, event.gpu
        if util >= float(self.options.get("busy_pct", 50)):
            self._last_busy[gpu] = event.t
            self._collapsed[gpu] = False
        elif util <= 0:
            busy_at = self._last_busy.get(gpu)
            window = parse_duration(self.options.get("drop_within", 60))
            if busy_at is not None and event.t - busy_at <= window:
                self._collapsed[gpu] = True
        else:
            self._collapsed[gpu] = False
        held = sample_holds(event, self.held_mib)
        active = self._collapsed.get(gpu, False) and util <= 0 and held
        back = util >= float(self.options.get("clear_pct", 10))
        cleared = (f"GPU {gpu} utilisation back at {util:g} %" if back
                   else f"GPU {gpu}: the job ended (no process, memory freed)")
        return self._step(gpu, event.t, active, back or not held,
                          f"GPU {gpu} utilisation fell from busy to 0 % and stayed there while the job "
                          "still holds the GPU", cleared)


@dataclass
class _Open:
    """An open counter alert of a ``_QuietRule``."""

    seen: float  # the last event that counted
    severity: str
    update: str  # the text of the latest figure ("... now 3 times")
    count: int
    notified: int  # the figure last sent
    notified_at: float
    fired_at: float


class _QuietRule(Rule):
    """Fires on an event; resolves after ``quiet_for`` without another. A count that rises while the
    alert is open is notified again with the new figure, at most once per ``renotify_every``; a rise held
    back by that limit is sent when the limit ends, even if no further event comes."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.quiet_s = parse_duration(options.get("quiet_for", 3600))
        self.renotify_s = parse_duration(options.get("renotify_every", 0))
        self._firing: dict[tuple[int | None, str], _Open] = {}

    def _fire(self, gpu: int | None, key: str, t: float, severity: str, message: str, count: int,
              update: str) -> list[Alert]:
        """``message`` for a new alert; ``update`` (with "now N") when the count rose while it is open."""
        open_ = self._firing.get((gpu, key))
        if open_ is None:
            self._firing[(gpu, key)] = _Open(t, severity, message, count, count, t, t)
            return [Alert(self.name, gpu, severity, "firing", message, t, key)]
        open_.seen, open_.count, open_.update = t, count, update
        return self._renotify(gpu, key, open_, t)

    def _renotify(self, gpu: int | None, key: str, open_: _Open, t: float) -> list[Alert]:
        if open_.count <= open_.notified or t - open_.notified_at < self.renotify_s:
            return []
        open_.notified, open_.notified_at = open_.count, t
        return [Alert(self.name, gpu, open_.severity, "firing", open_.update, t, key, renotify=True)]

    def resolution(self, gpu: int | None, key: str, count: int) -> str:
        return f"GPU {gpu} {key}: nothing new"

    def tick(self, t: float, present: set[int]) -> list[Alert]:
        alerts = []
        for (gpu, key), open_ in list(self._firing.items()):
            if t - open_.seen >= self.quiet_s:
                del self._firing[(gpu, key)]
                text = (f"{self.resolution(gpu, key, open_.count)} for {took(t - open_.seen)}, "
                        f"after {took(t - open_.fired_at)}")
                alerts.append(Alert(self.name, gpu, open_.severity, "resolved", text, t, key))
            else:  # a rise held back by renotify_every goes out once the limit has passed
                alerts += self._renotify(gpu, key, open_, t)
        return alerts


class XidRule(_QuietRule):
    name = "xid"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, XidEvent):
            return []
        from gpuhealth.knowledge.xid import lookup

        info = lookup(event.xid)
        severity = info.severity.value if info else self.severity
        what = f" ({info.mnemonic}): {info.meaning}" if info else ""
        open_ = self._firing.get((event.gpu, str(event.xid)))
        count = open_.count + 1 if open_ is not None else 1
        return self._fire(event.gpu, str(event.xid), event.t, severity, f"GPU {event.gpu} Xid {event.xid}{what}",
                          count, f"GPU {event.gpu} Xid {event.xid}{what}: now {count} times since it fired")

    def resolution(self, gpu: int | None, key: str, count: int) -> str:
        return f"GPU {gpu} no Xid {key} again ({count} in all)"


class EccRule(_QuietRule):
    name = "ecc"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self._last: dict[tuple[int, str], int] = {}

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample):
            return []
        alerts: list[Alert] = []
        for counter, severity in (("ecc_volatile_uncorrected", self.severity),
                                  ("ecc_volatile_corrected", str(self.options.get("corrected_severity", "warning")))):
            value = getattr(event, counter)
            before = self._last.get((event.gpu, counter))
            if value is None:
                continue
            self._last[(event.gpu, counter)] = value
            if before is not None and value > before:
                kind = counter.split("_")[-1]
                alerts += self._fire(event.gpu, counter, event.t, severity,
                                     f"GPU {event.gpu} {kind} ECC errors rising ({before} -> {value} since boot)",
                                     value, f"GPU {event.gpu} {kind} ECC errors still rising: now {value} since boot")
        return alerts

    def resolution(self, gpu: int | None, key: str, count: int) -> str:
        return f"GPU {gpu} {key.split('_')[-1]} ECC count steady at {count}"


def _retirements(sample: Sample) -> str | None:
    """ "2 retired pages, 1 remapped row" from the counts the sample has, None without any."""
    parts = [f"{n} {noun}{'s' if n != 1 else ''}" for n, noun in ((sample.retired_pages, "retired page"),
                                                                   (sample.remapped_rows, "remapped row"))
             if n is not None]
    return ", ".join(parts) or None


class PendingRetirementRule(Rule):
    """Retired pages or remapped rows pending a reset. While it fires, a rising count (another page
    retired, another row remapped) is notified again with the new figures."""

    name = "pending_retirement"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self._notified: dict[int, int] = {}  # GPU -> the count last notified while firing

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample):
            return []
        flags = (event.retired_pages_pending, event.remapped_rows_pending)
        if flags == (None, None):
            return []
        pending = any(flags)
        state = self._states.get((event.gpu, ""))
        if not pending and (state is None or not state.firing):  # the usual case, every second: nothing to say
            if state is not None:
                state.step(event.t, False, True)
            return []
        what = "retired pages" if event.retired_pages_pending else "remapped rows"
        counts = _retirements(event)
        count = (event.retired_pages or 0) + (event.remapped_rows or 0)
        alerts = self._step(event.gpu, event.t, pending, not pending,
                            f"GPU {event.gpu} has {what} pending" + (f" ({counts})" if counts else "")
                            + ": reset the GPU (drain it first) to apply them",
                            f"GPU {event.gpu} has no page retirement or row remapping pending any more")
        state = self._states[(event.gpu, "")]
        if alerts and alerts[0].state == "firing":
            self._notified[event.gpu] = count
        elif state.firing and count > self._notified.get(event.gpu, count):
            self._notified[event.gpu] = count
            alerts.append(Alert(self.name, event.gpu, self.severity, "firing",
                                f"GPU {event.gpu} has {what} pending, still growing: now {counts}; reset the GPU "
                                "(drain it first) to apply them", event.t, renotify=True))
        return alerts


class ClockSlowdownRule(Rule):
    name = "clock_slowdown"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        from gpuhealth.nvml import CLOCK_EVENT_BITS

        bits = {name: bit for bit, name in CLOCK_EVENT_BITS.items()}
        names = options.get("reasons", ())
        unknown = [n for n in names if n not in bits]
        if unknown:
            raise ValueError(f"rules.clock_slowdown.reasons: unknown {unknown}; known: {sorted(bits)}")
        self.mask = sum(bits[n] for n in names)
        self.window = parse_duration(options.get("window", 300))
        self._history: dict[int, deque[tuple[float, bool]]] = {}

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.clock_event_reasons is None:
            return []
        history = self._history.setdefault(event.gpu, deque())
        history.append((event.t, bool(event.clock_event_reasons & self.mask)))
        while history and history[0][0] < event.t - self.window:
            history.popleft()
        share = 100 * sum(active for _, active in history) / len(history)
        covered = event.t - history[0][0] >= self.window / 2  # no verdict from the first few samples
        return self._step(event.gpu, event.t, covered and share >= float(self.options.get("active_pct", 20)),
                          share < float(self.options.get("clear_pct", 10)),
                          f"GPU {event.gpu} clocks held down by hardware slowdown/thermal/power brake "
                          f"{share:.0f} % of the last {self.window / 60:g} min",
                          f"GPU {event.gpu} clocks held down only {share:.0f} % of the last {self.window / 60:g} min")


class GpuLostRule(Rule):
    name = "gpu_lost"

    def feed(self, event: Event) -> list[Alert]:
        if isinstance(event, GpuLost):
            return self._step(event.gpu, event.t, True, False, f"GPU {event.gpu} lost: {event.reason}", "")
        if isinstance(event, Sample):
            return self._step(event.gpu, event.t, False, True, f"GPU {event.gpu} lost",
                              f"GPU {event.gpu} answering again")
        return []


class GpuCountRule(Rule):
    """Fewer GPUs answering than expected; the alert names the missing ones from what was seen before."""

    name = "gpu_count"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.expected = int(options.get("expected", 0))
        self._most = 0
        self._known: dict[int, tuple[str | None, str | None]] = {}  # index -> (bus id, UUID)
        self._notified: tuple[Basis, ...] = ()  # the missing GPUs last said while firing

    def feed(self, event: Event) -> list[Alert]:
        if isinstance(event, Sample) and (event.gpu not in self._known or event.uuid or event.pci_address):
            old = self._known.get(event.gpu, (None, None))
            self._known[event.gpu] = (event.pci_address or old[0], event.uuid or old[1])
        return []

    def _missing(self, present: set[int], want: int) -> str:
        gone = sorted(set(self._known) - present)
        names = [", ".join(x for x in (f"GPU {i}", *self._known[i]) if x) for i in gone]
        unseen = want - len(present) - len(gone)
        if unseen > 0:
            names.append(f"{unseen} never seen since the monitor started")
        return "; ".join(f"({n})" if n.startswith("GPU") else n for n in names)

    def _about(self, present: set[int], want: int) -> tuple[Basis, ...]:
        gone = sorted(set(self._known) - present)
        unseen = want - len(present) - len(gone) > 0
        return tuple(Basis(i) for i in gone) + ((Basis(None),) if unseen else ())

    def tick(self, t: float, present: set[int]) -> list[Alert]:
        self._most = max(self._most, len(present))
        want = self.expected or self._most
        short = len(present) < want
        text = f"{len(present)} GPU(s) answering, {want} expected"
        about = self._about(present, want) if short else ()
        if short:
            text += f"; missing: {self._missing(present, want)}"
        alerts = self._step(None, t, short, len(present) >= want, text, f"all {want} expected GPU(s) answering again")
        alerts = [Alert(a.rule, a.gpu, a.severity, a.state, a.message, a.t, a.key, about=about) for a in alerts]
        state = self._states[(None, "")]
        if alerts and alerts[0].state == "firing":
            self._notified = about
        elif state.firing and short and about != self._notified:
            # Other GPUs missing now (one more vanished, or one came back): said again, since the GPUs it is
            # about decide whether a lost GPU's own alert already covers it (fold.py).
            self._notified = about
            alerts.append(Alert(self.name, None, self.severity, "firing", text, t, renotify=True, about=about))
        return alerts


class IdleRule(Rule):
    """0 % and no job holds the GPU (sample.job_holds) for hours: capacity paid for and unused."""

    name = "idle"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.utilization_gpu_pct is None:
            return []
        idle = event.utilization_gpu_pct <= 0 and not sample_holds(event, self.held_mib)
        return self._step(event.gpu, event.t, idle, not idle,
                          f"GPU {event.gpu} idle (0 %, no job holds it) for {self.for_s / 3600:g} h",
                          f"GPU {event.gpu} in use again ({event.utilization_gpu_pct:g} %, "
                          f"{event.process_count or 0} process(es))")


RULES: dict[str, type[Rule]] = {cls.name: cls for cls in (
    TemperatureRule, StuckSensorRule, HungJobRule, UtilizationCollapseRule, XidRule, EccRule,
    PendingRetirementRule, ClockSlowdownRule, GpuLostRule, GpuCountRule, IdleRule)}


class RuleSet:
    def __init__(self, rules: Sequence[Rule], held_mib: float = HELD_MIB) -> None:
        self.rules = list(rules)
        self.held_mib = held_mib  # what "a job holds the GPU" means here; serve's usage counters use it too

    @classmethod
    def from_config(cls, rules_config: dict[str, dict[str, Any]], held_mib: float = HELD_MIB) -> RuleSet:
        unknown = set(rules_config) - set(RULES)
        if unknown:
            raise ValueError(f"unknown rule(s) {sorted(unknown)}; known: {sorted(RULES)}")
        if not held_mib >= 0:
            raise ValueError(f"monitor.held_mib must be a number of MiB >= 0, not {held_mib!r}")
        rules = [RULES[name](options) for name, options in rules_config.items() if options.get("enabled", True)]
        for rule in rules:
            rule.held_mib = held_mib
        return cls(rules, held_mib)

    def restart(self) -> None:
        """Every rule as new (the host rebooted, in a replay): no state of the boot before carries over."""
        self.rules = [type(rule)(rule.options) for rule in self.rules]
        for rule in self.rules:
            rule.held_mib = self.held_mib

    def feed(self, events: Sequence[Event]) -> list[Alert]:
        """One batch (one poll): every event to every rule in time order, then each rule's tick."""
        if not events:
            return []
        alerts: list[Alert] = []
        ordered = sorted(events, key=lambda e: e.t)
        for event in ordered:
            for rule in self.rules:
                alerts += rule.feed(event)
        present = {e.gpu for e in ordered if isinstance(e, Sample)}
        if any(isinstance(e, (Sample, GpuLost)) for e in ordered):
            for rule in self.rules:
                alerts += rule.tick(ordered[-1].t, present)
        else:
            for rule in self.rules:
                if isinstance(rule, _QuietRule):
                    alerts += rule.tick(ordered[-1].t, present)
        return alerts
