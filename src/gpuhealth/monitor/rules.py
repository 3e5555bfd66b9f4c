"""Alert rules: small stateful objects fed events in time order; each fires once and resolves once.

Every rule debounces through ``Debounce``: a condition must hold for ``for`` before the alert fires,
and the *clear* condition (stricter than "not active": that gap is the hysteresis) must hold for
``clear_for`` before it resolves. A value flapping around a threshold therefore cannot storm.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .config import parse_duration
from .sample import Event, GpuLost, Sample, XidEvent

SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class Alert:
    rule: str
    gpu: int | None  # None: the host
    severity: str
    state: str  # "firing" or "resolved"
    message: str
    t: float
    key: str = ""  # what within the rule and GPU (an Xid code, a sensor): part of the identity

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

    def step(self, t: float, active: bool, cleared: bool) -> str | None:
        """"firing" or "resolved" when the state changes, else None."""
        if not self.firing:
            self._since = (self._since if self._since is not None else t) if active else None
            if self._since is not None and t - self._since >= self.for_s:
                self.firing, self._clear_since = True, None
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

    def _step(self, gpu: int | None, t: float, active: bool, cleared: bool, message: str, key: str = "",
              severity: str | None = None, for_s: float | None = None) -> list[Alert]:
        state = self._states.get((gpu, key))
        if state is None:
            state = self._states[(gpu, key)] = Debounce(self.for_s if for_s is None else for_s, self.clear_for_s)
        change = state.step(t, active, cleared)
        if change is None:
            return []
        text = message if change == "firing" else f"resolved: {message}"
        return [Alert(self.name, gpu, severity or self.severity, change, text, t, key)]


class TemperatureRule(Rule):
    name = "temperature"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.temperature_c is None:
            return []
        limit = float(self.options.get("threshold_c", 85))
        slowdown = event.temperature_slowdown_c
        if slowdown:
            limit = min(limit, slowdown - float(self.options.get("slowdown_margin_c", 5)))
        temp = event.temperature_c
        note = f", slowdown at {slowdown:g} °C" if slowdown else ""
        return self._step(event.gpu, event.t, temp >= limit,
                          temp < limit - float(self.options.get("hysteresis_c", 3)),
                          f"GPU {event.gpu} at {temp:g} °C (alert at {limit:g} °C{note})")


# Readings that, when they move, show the GPU is alive (so a flat sensor is stuck, not an idle GPU).
_LIVELY = ("temperature_c", "power_w", "utilization_gpu_pct", "memory_used_mib", "sm_clock_mhz",
           "memory_temperature_c", "fan_pct")


class StuckSensorRule(Rule):
    name = "stuck_sensor"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.metrics = tuple(options.get("metrics", ("temperature_c", "power_w")))
        self._flat: dict[tuple[int, str], tuple[Any, float, float | None]] = {}  # value, since, others moved at
        self._previous: dict[int, Sample] = {}

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample):
            return []
        alerts: list[Alert] = []
        previous = self._previous.get(event.gpu)
        self._previous[event.gpu] = event
        for metric in self.metrics:
            value = getattr(event, metric)
            moved = previous is not None and any(
                getattr(event, m) != getattr(previous, m) for m in _LIVELY if m != metric)
            old = self._flat.get((event.gpu, metric))
            if old is None or old[0] != value:
                self._flat[(event.gpu, metric)] = (value, event.t, None)
            elif moved:
                self._flat[(event.gpu, metric)] = (value, old[1], event.t)
            value, since, moved_at = self._flat[(event.gpu, metric)]
            stuck = value is not None and moved_at is not None and event.t - since >= self.for_s
            alerts += self._step(event.gpu, event.t, stuck, since == event.t,
                                 f"GPU {event.gpu} {metric} has read {value} for {(event.t - since) / 60:.0f} min "
                                 "while other readings move: a stuck sensor", key=metric, for_s=0)
        return alerts


def _busy_processes(sample: Sample) -> bool:
    return (sample.process_count or 0) > 0 or (sample.process_memory_mib or 0) > 0


class HungJobRule(Rule):
    name = "hung_job"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.utilization_gpu_pct is None:
            return []
        holding = _busy_processes(event)
        util = event.utilization_gpu_pct
        memory = f"{event.process_memory_mib:g} MiB" if event.process_memory_mib is not None else "memory"
        return self._step(event.gpu, event.t, util <= 0 and holding, util > 0 or not holding,
                          f"GPU {event.gpu} at 0 % utilisation while {event.process_count or 'a'} process(es) "
                          f"hold {memory}: a hung job?")


class UtilizationCollapseRule(Rule):
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
        active = self._collapsed.get(gpu, False) and util <= 0
        return self._step(gpu, event.t, active, util >= float(self.options.get("clear_pct", 10)),
                          f"GPU {gpu} utilisation fell from busy to 0 % and stayed there")


class _QuietRule(Rule):
    """Fires on an event; resolves after ``quiet_for`` without another."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.quiet_s = parse_duration(options.get("quiet_for", 3600))
        self._firing: dict[tuple[int | None, str], tuple[float, str, str]] = {}  # last seen, severity, message

    def _fire(self, gpu: int | None, key: str, t: float, severity: str, message: str) -> list[Alert]:
        known = (gpu, key) in self._firing
        self._firing[(gpu, key)] = (t, severity, message)
        return [] if known else [Alert(self.name, gpu, severity, "firing", message, t, key)]

    def tick(self, t: float, present: set[int]) -> list[Alert]:
        alerts = []
        for (gpu, key), (seen, severity, message) in list(self._firing.items()):
            if t - seen >= self.quiet_s:
                del self._firing[(gpu, key)]
                alerts.append(Alert(self.name, gpu, severity, "resolved", f"resolved: {message}", t, key))
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
        return self._fire(event.gpu, str(event.xid), event.t, severity, f"GPU {event.gpu} Xid {event.xid}{what}")


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
                                     f"GPU {event.gpu} {kind} ECC errors rising ({before} -> {value} since boot)")
        return alerts


class PendingRetirementRule(Rule):
    name = "pending_retirement"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample):
            return []
        flags = (event.retired_pages_pending, event.remapped_rows_pending)
        if flags == (None, None):
            return []
        pending = any(flags)
        what = "retired pages" if event.retired_pages_pending else "remapped rows"
        return self._step(event.gpu, event.t, pending, not pending,
                          f"GPU {event.gpu} has {what} pending: reset the GPU (drain it first) to apply them")


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
                          f"{share:.0f} % of the last {self.window / 60:g} min")


class GpuLostRule(Rule):
    name = "gpu_lost"

    def feed(self, event: Event) -> list[Alert]:
        if isinstance(event, GpuLost):
            return self._step(event.gpu, event.t, True, False, f"GPU {event.gpu} lost: {event.reason}")
        if isinstance(event, Sample):
            return self._step(event.gpu, event.t, False, True, f"GPU {event.gpu} lost")
        return []


class GpuCountRule(Rule):
    name = "gpu_count"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.expected = int(options.get("expected", 0))
        self._most = 0

    def tick(self, t: float, present: set[int]) -> list[Alert]:
        self._most = max(self._most, len(present))
        want = self.expected or self._most
        return self._step(None, t, len(present) < want, len(present) >= want,
                          f"{len(present)} GPU(s) answering, {want} expected")


class IdleRule(Rule):
    name = "idle"

    def feed(self, event: Event) -> list[Alert]:
        if not isinstance(event, Sample) or event.utilization_gpu_pct is None:
            return []
        idle = event.utilization_gpu_pct <= 0 and not _busy_processes(event)
        return self._step(event.gpu, event.t, idle, not idle,
                          f"GPU {event.gpu} idle (0 %, no process) for {self.for_s / 3600:g} h")


RULES: dict[str, type[Rule]] = {cls.name: cls for cls in (
    TemperatureRule, StuckSensorRule, HungJobRule, UtilizationCollapseRule, XidRule, EccRule,
    PendingRetirementRule, ClockSlowdownRule, GpuLostRule, GpuCountRule, IdleRule)}


class RuleSet:
    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = list(rules)

    @classmethod
    def from_config(cls, rules_config: dict[str, dict[str, Any]]) -> RuleSet:
        unknown = set(rules_config) - set(RULES)
        if unknown:
            raise ValueError(f"unknown rule(s) {sorted(unknown)}; known: {sorted(RULES)}")
        return cls([RULES[name](options) for name, options in rules_config.items() if options.get("enabled", True)])

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
