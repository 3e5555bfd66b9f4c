"""What a source produces: one ``Sample`` per GPU per interval, plus ``GpuLost`` and ``XidEvent``.

Every reading is optional: a GPU that does not support a field reports None for it, and the sources
say *which* fields are unsupported once rather than on every sample.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from gpuhealth.records import record


@record
class Sample:
    t: float  # seconds since the epoch
    gpu: int  # the driver's index
    pci_address: str | None = None
    uuid: str | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # since the driver loaded
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    clock_event_reasons: int | None = None  # NVML bit mask (gpuhealth.nvml.CLOCK_EVENT_BITS)
    ecc_volatile_uncorrected: int | None = None
    ecc_volatile_corrected: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    # Counts, for re-notifying a pending retirement that grows. Not kept in history (see METRICS): they
    # change a few times in a GPU's life. Retired pages are read only while a retirement is pending.
    retired_pages: int | None = None
    remapped_rows: int | None = None  # correctable + uncorrectable rows remapped
    pcie_gen: int | None = None
    pcie_width: int | None = None
    fan_pct: float | None = None
    process_count: int | None = None
    process_memory_mib: float | None = None
    memory_reserved_mib: float | None = None  # held by the driver and firmware (NVML memory info v2)
    pcie_tx_bytes_s: float | None = None  # PCIe throughput, NVML's KB/s as bytes per second
    pcie_rx_bytes_s: float | None = None
    # PCIe replays since the driver loaded (NVML's replay counter): its rate is a correlation row
    # (monitor/correlate.py), not a history metric.
    pcie_replay_count: int | None = None
    # Each compute process as (pid, used MiB or None when the driver does not say); history keeps only
    # process_count and process_memory_mib, traces keep the list.
    processes: tuple[tuple[int, float | None], ...] | None = None
    # Static, read once per session and repeated so that rules and replayed traces see it.
    temperature_slowdown_c: float | None = None
    name: str | None = None  # the model (NVML's device name), static like the slowdown temperature
    # True on a record `gpuhealth inject` wrote or changed (monitor/inject.py): a drill, never a real reading.
    injected: bool | None = None


@record
class GpuLost:
    """A GPU stopped answering: NVML said "GPU is lost", a call hung past its timeout, or it vanished."""

    t: float
    gpu: int
    reason: str
    injected: bool | None = None  # written by `gpuhealth inject` (a drill)


@record
class XidEvent:
    t: float
    gpu: int
    xid: int
    # The kernel line's text after the code, where the source has it (the kernel log follower, monitor/kmsg.py; a
    # replayed trace): the correlation rows decode Xid 74's registers, NVLink5's fields and Xid 154's recovery
    # action from it. NVML gives only the code.
    text: str | None = None
    injected: bool | None = None  # written by `gpuhealth inject` (a drill)


Event = Sample | GpuLost | XidEvent  # a runtime union: Python 3.10 has it

# `[monitor] held_mib`: without a process list, memory used beyond this (the driver's own share stays
# well under it) says a job still holds the GPU.
HELD_MIB = 1024.0


def job_holds(process_count: float | None, process_memory_mib: float | None, memory_used_mib: float | None,
              held_mib: float = HELD_MIB) -> bool:
    """Whether a job still holds the GPU: with a process list, any process or process memory; without one
    (some drivers, containers), more than ``held_mib`` of memory used. The one definition used by the
    utilisation-collapse, hung-job and idle rules, `gpuhealth usage` (per minute) and serve's /metrics counters."""
    if process_count is not None or process_memory_mib is not None:
        return (process_count or 0) > 0 or (process_memory_mib or 0) > 0
    return (memory_used_mib or 0) > held_mib


def sample_holds(sample: Sample, held_mib: float = HELD_MIB) -> bool:
    return job_holds(sample.process_count, sample.process_memory_mib, sample.memory_used_mib, held_mib)

# The numeric readings that history stores and rules may look at (identity and static fields excluded).
METRICS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(Sample)
    if f.name not in ("t", "gpu", "pci_address", "uuid", "temperature_slowdown_c", "processes", "name",
                      "retired_pages", "remapped_rows", "pcie_replay_count", "injected")
)
# Short names accepted on the command line: "temperature" for "temperature_c" and so on.
METRIC_ALIASES: dict[str, str] = {
    "temperature": "temperature_c", "temp": "temperature_c", "memory_temperature": "memory_temperature_c",
    "power": "power_w", "utilization": "utilization_gpu_pct", "util": "utilization_gpu_pct",
    "memory": "memory_used_mib", "sm_clock": "sm_clock_mhz", "fan": "fan_pct", "energy": "energy_j",
}

_KINDS: dict[str, type] = {"sample": Sample, "lost": GpuLost, "xid": XidEvent}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}


def resolve_metric(name: str) -> str:
    """A metric's stored name from a name or alias; ValueError lists the choices."""
    metric = METRIC_ALIASES.get(name, name)
    if metric not in METRICS:
        raise ValueError(f"unknown metric {name!r}; choose from {', '.join(sorted(METRIC_ALIASES) + list(METRICS))}")
    return metric


def to_record(event: Event) -> dict[str, Any]:
    """A JSON-ready dict with a ``kind``; None fields are left out to keep traces small."""
    record: dict[str, Any] = {"kind": _KIND_OF[type(event)]}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if value is not None:
            record[f.name] = value
    return record


def from_record(record: dict[str, Any]) -> Event:
    """Inverse of ``to_record``; unknown keys are ignored so newer traces still replay. ValueError if bad."""
    cls = _KINDS.get(record.get("kind", ""))
    if cls is None:
        raise ValueError(f"unknown event kind {record.get('kind')!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in record.items() if k in names}
    if isinstance(values.get("processes"), list):  # JSON has no tuples
        try:
            values["processes"] = tuple((int(pid), mib) for pid, mib in values["processes"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad processes in {record.get('kind')} record: {exc}") from exc
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f"bad {record.get('kind')} record: {exc}") from exc


# ---------------------------------------------------------------------- numbers are numbers (issue 25)

# What a source may hand on: a time between 2000-01-01 and 2100-01-01 UTC (a NaN, infinite or 1e18 timestamp
# in a trace hung or crashed the monitor), a GPU index from -1 (an Xid of an unknown device) to 1023, and
# readings that are finite numbers no larger than MAX_READING (a NaN reading crashed the history's encoder,
# stayed in the database so that `history` and serve's API failed, and /metrics exported +Inf).
T_MIN, T_MAX = 946_684_800.0, 4_102_444_800.0
GPU_MIN, GPU_MAX = -1, 1023
MAX_READING = 1e15  # far above any real reading (PCIe bytes/s ~1e11, energy since driver load ~1e10 J)
_TEXT_FIELDS = ("pci_address", "uuid", "name")
_FLAG_FIELDS = ("retired_pages_pending", "remapped_rows_pending", "injected")
_CHECKED_FIELDS = tuple(f.name for f in dataclasses.fields(Sample) if f.name not in ("t", "gpu"))


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and -MAX_READING <= value <= MAX_READING)


def _index(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def sane(event: Event) -> tuple[Event | None, tuple[str, ...]]:
    """``event`` with each impossible reading left out (None), and the names of what was refused. The whole
    event is refused (None, with ``t``, ``gpu`` or ``xid``) when its time, GPU index or Xid code is not
    possible: nothing of it can be placed."""
    t = event.t
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and T_MIN <= t <= T_MAX):
        return None, ("t",)
    if not _index(event.gpu, GPU_MIN, GPU_MAX):
        return None, ("gpu",)
    if isinstance(event, XidEvent):
        if not _index(event.xid, 0, 1_000_000):
            return None, ("xid",)
        if event.text is not None and not isinstance(event.text, str):
            return dataclasses.replace(event, text=None), ("text",)
        return event, ()
    if isinstance(event, GpuLost):
        return (event, ()) if isinstance(event.reason, str) else (None, ("reason",))
    bad: list[str] = []
    fixed: dict[str, Any] = {}
    for name in _CHECKED_FIELDS:
        value = getattr(event, name)
        if value is None:
            continue
        if name in _TEXT_FIELDS:
            ok = isinstance(value, str)
        elif name in _FLAG_FIELDS:
            ok = isinstance(value, bool) or value in (0, 1)
        elif name == "clock_event_reasons":  # a 64-bit mask (NVML's "unknown" reason is the top bit)
            ok = _index(value, 0, (1 << 64) - 1)
        elif name == "processes":
            clean = _processes(value)
            ok = clean is not None
            if ok and clean != value:
                bad.append("processes")
                fixed[name] = clean
                continue
        else:
            ok = _number(value)
        if not ok:
            bad.append(name)
            fixed[name] = None
    if not bad:
        return event, ()
    return dataclasses.replace(event, **fixed), tuple(bad)


def _processes(value: Any) -> tuple[tuple[int, float | None], ...] | None:
    """The process list with impossible memory figures left out; None when it is not a list of pairs."""
    if not isinstance(value, tuple):
        return None
    out = []
    for item in value:
        if not (isinstance(item, tuple) and len(item) == 2 and _index(item[0], 0, 1 << 32)):
            return None
        out.append((item[0], item[1] if item[1] is None or _number(item[1]) else None))
    return tuple(out)


def _say(text: str) -> None:
    print(f"gpuhealth: {text}", file=sys.stderr, flush=True)


class Refusals:
    """What a source refused (``sane``), counted per field and said once per field: a GPU whose sensor
    reads NaN every second must not flood the journal, and must not be silent either."""

    def __init__(self, where: str, log: Callable[[str], None] | None = _say) -> None:
        self.where = where
        self.log = log
        self.counts: Counter[str] = Counter()

    def filter(self, events: Iterable[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            clean, refused = sane(event)
            for name in refused:
                self.counts[name] += 1
                if self.counts[name] == 1 and self.log is not None:
                    self.log(self._first(name, event))
            if clean is not None:
                out.append(clean)
        return out

    def _first(self, name: str, event: Event) -> str:
        from gpuhealth.inert import one_line

        value = getattr(event, name, None)
        shown = one_line(repr(value))[:80]
        if name in ("t", "gpu", "xid", "reason"):
            what = f"an event whose {name} is {shown}: the whole event is refused"
        else:
            what = f"a {name} reading of {shown} (GPU {event.gpu}): that reading is left out"
        return (f"{self.where}: refused {what}; not a number, infinite or out of range, never stored "
                "(said once; further ones are counted)")
