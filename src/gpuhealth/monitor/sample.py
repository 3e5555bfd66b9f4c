"""What a source produces: one ``Sample`` per GPU per interval, plus ``GpuLost`` and ``XidEvent``.

Every reading is optional: a GPU that does not support a field reports None for it, and the sources
say *which* fields are unsupported once rather than on every sample.
"""

from __future__ import annotations

import dataclasses
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
    # Each compute process as (pid, used MiB or None when the driver does not say); history keeps only
    # process_count and process_memory_mib, traces keep the list.
    processes: tuple[tuple[int, float | None], ...] | None = None
    # Static, read once per session and repeated so that rules and replayed traces see it.
    temperature_slowdown_c: float | None = None
    name: str | None = None  # the model (NVML's device name), static like the slowdown temperature


@record
class GpuLost:
    """A GPU stopped answering: NVML said "GPU is lost", a call hung past its timeout, or it vanished."""

    t: float
    gpu: int
    reason: str


@record
class XidEvent:
    t: float
    gpu: int
    xid: int


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
                      "retired_pages", "remapped_rows")
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
