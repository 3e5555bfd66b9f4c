"""Usage and cost per GPU and per day (UTC), from the history's per-minute rollups.

Each minute with a utilisation reading counts as 60 s monitored. A minute is *idle* when utilisation
was 0 % for all of it, otherwise *busy*; an idle minute is *held-idle* when a job still held the GPU
(``sample.job_holds``: a process, process memory, or, without a process list, more than ``held_mib`` of
memory used; the same test as the utilisation-collapse rule and serve's counters). Held-idle
is part of idle. Energy comes from the driver's energy counter where the history has one (summing its
rises minute to minute, a reset after a driver reload counting from zero), otherwise from the integral
of the per-minute mean power: either way only over monitored minutes, so the energy spent during a gap in
monitoring is in no minute. Minutes are the resolution: figures are correct to the minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .sample import HELD_MIB, Sample, job_holds, sample_holds
from .store import Store


def sample_state(sample: Sample, held_mib: float = HELD_MIB) -> str | None:
    """One sample as "busy", "idle" or "held_idle" (idle while a job holds the GPU); None: no utilisation."""
    util = sample.utilization_gpu_pct
    if util is None:
        return None
    if util > 0:
        return "busy"
    return "held_idle" if sample_holds(sample, held_mib) else "idle"


@dataclass
class DayUsage:
    gpu: int
    day: str  # YYYY-MM-DD, UTC
    monitored_s: float = 0.0
    busy_s: float = 0.0
    idle_s: float = 0.0
    held_idle_s: float = 0.0
    util_sum: float = 0.0  # mean utilisation x minutes, for the day's mean
    energy_j: float = 0.0
    energy_from: str = ""  # "counter", "power" or "" (no reading)

    @property
    def mean_utilization_pct(self) -> float | None:
        minutes = self.monitored_s / 60
        return round(self.util_sum / minutes, 1) if minutes else None

    def as_json(self, price: float | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpu": self.gpu, "day": self.day, "hours_monitored": _hours(self.monitored_s),
            "hours_busy": _hours(self.busy_s), "hours_idle": _hours(self.idle_s),
            "hours_held_idle": _hours(self.held_idle_s), "mean_utilization_pct": self.mean_utilization_pct,
            "energy_kwh": round(self.energy_j / 3.6e6, 3) if self.energy_from else None,
            "energy_from": self.energy_from or None}
        if price is not None:
            out["cost_idle"] = round(self.idle_s / 3600 * price, 2)
            out["cost_held_idle"] = round(self.held_idle_s / 3600 * price, 2)
        return out


def _hours(seconds: float) -> float:
    return round(seconds / 3600, 3)


def _day(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, timezone.utc).strftime("%Y-%m-%d")


def gpu_usage(store: Store, gpu: int, since: float, until: float, held_mib: float = HELD_MIB) -> list[DayUsage]:
    """One ``DayUsage`` per UTC day with readings, oldest first."""
    util = store.minute_stats(gpu, "utilization_gpu_pct", since, until)
    procs = store.minute_stats(gpu, "process_count", since, until)
    proc_mem = store.minute_stats(gpu, "process_memory_mib", since, until)
    used = store.minute_stats(gpu, "memory_used_mib", since, until)
    days: dict[str, DayUsage] = {}
    for minute, (_n, _low, mean, high) in util.items():
        day = days.setdefault(_day(minute), DayUsage(gpu, _day(minute)))
        day.monitored_s += 60
        day.util_sum += mean
        if high > 0:
            day.busy_s += 60
            continue
        day.idle_s += 60
        # the minute as one sample: the most processes and process memory, the least memory used
        if job_holds(procs[minute][3] if minute in procs else None,
                     proc_mem[minute][3] if minute in proc_mem else None,
                     used[minute][1] if minute in used else None, held_mib):
            day.held_idle_s += 60
    _energy(store, gpu, since, until, days)
    return [days[d] for d in sorted(days)]


def _energy(store: Store, gpu: int, since: float, until: float, days: dict[str, DayUsage]) -> None:
    counter = store.minute_stats(gpu, "energy_j", since, until)
    if counter:
        previous: tuple[int, float] | None = None  # the last minute with a reading, and its last value
        for minute, (_n, low, _mean, high) in counter.items():
            # A rise from the previous minute's last value. Across a gap in monitoring (a minute without a
            # reading) or a reset (driver reload), only the rise within this minute: the energy spent
            # while nobody watched is not charged to the first minute after it (those minutes do not count
            # as monitored either).
            follows = previous is not None and previous[0] == minute - 1 and high >= previous[1]
            rise = high - previous[1] if follows and previous is not None else high - low
            previous = (minute, high)
            day = days.get(_day(minute))
            if day is not None:
                day.energy_j += rise
                day.energy_from = "counter"
        return
    for minute, (_n, _low, mean, _high) in store.minute_stats(gpu, "power_w", since, until).items():
        day = days.get(_day(minute))
        if day is not None:
            day.energy_j += mean * 60
            day.energy_from = "power"


def usage(store: Store, since: float, until: float, gpus: list[int] | None = None,
          held_mib: float = HELD_MIB) -> list[DayUsage]:
    """Every GPU (or those given), each day: ordered by GPU, then day."""
    return [d for gpu in (gpus if gpus is not None else store.gpus())
            for d in gpu_usage(store, gpu, since, until, held_mib)]


def to_rows(days: list[DayUsage], price: float | None) -> list[dict[str, Any]]:
    return [d.as_json(price) for d in days]
