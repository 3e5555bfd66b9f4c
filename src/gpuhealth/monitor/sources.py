"""Where samples come from: NVML (one long-lived session), a streaming nvidia-smi, or a recorded trace.

A source has ``poll() -> list[Event]`` (called once per interval, never blocks longer than its timeout)
and ``close()``. ``TraceWriter`` records what any source produced in the format ``ReplaySource`` plays.
"""

from __future__ import annotations

import json
import math
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuhealth.lazyre import lazy_re

from .sample import Event, GpuLost, Refusals, Sample, XidEvent, from_record, to_record

MIB = 1024 * 1024
TRACE_FORMAT = "gpuhealth-trace"
TRACE_VERSION = 1
# nvmlReturn_t values (nvml.h) that decide what a failed call means.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
_UNSUPPORTED = {NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND}
_GPU_GONE = {NVML_ERROR_GPU_IS_LOST, NVML_ERROR_RESET_REQUIRED}
_SESSION_GONE = {NVML_ERROR_UNINITIALIZED, NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIB_RM_VERSION_MISMATCH}
XID_EVENT_TYPE = 0x8  # nvmlEventTypeXidCriticalError
NVML_FI_DEV_MEMORY_TEMP = 82


class SourceError(RuntimeError):
    """A source cannot start at all (for example NVML is not installed)."""


# --------------------------------------------------------------------------- a worker that may hang


@dataclass
class _Job:
    fn: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


class _Worker:
    """One daemon thread running jobs in order. A hung job leaves the worker busy; the caller never
    waits longer than its own timeout, and a daemon thread cannot block interpreter exit."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.current: _Job | None = None
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job.value = job.fn()
            except BaseException as exc:  # handed to the caller, who decides
                job.error = exc
            job.done.set()

    @property
    def busy(self) -> bool:
        return self.current is not None and not self.current.done.is_set()

    def submit(self, fn: Callable[[], Any]) -> _Job:
        self.current = _Job(fn)
        self._jobs.put(self.current)
        return self.current

    def stop(self) -> None:
        self._jobs.put(None)


def _wait(job: _Job, deadline: float) -> bool:
    return job.done.wait(max(0.0, deadline - time.monotonic()))


# --------------------------------------------------------------------------- NVML


class _Unsupported(Exception):
    pass


class _GpuGone(Exception):
    pass


class _SessionGone(Exception):
    pass


def _nvml_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _fn(nvml: Any, name: str) -> Callable[..., Any]:
    function = getattr(nvml, name, None)
    if function is None:  # an older nvidia-ml-py without this call
        raise _Unsupported(name)
    return function


def _temperature(nvml: Any, h: Any) -> dict[str, Any]:
    return {"temperature_c": _fn(nvml, "nvmlDeviceGetTemperature")(h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))}


def _memory_temperature(nvml: Any, h: Any) -> dict[str, Any]:
    # No dedicated call: HBM temperature is only a field value.
    fid = getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", NVML_FI_DEV_MEMORY_TEMP)
    value = _fn(nvml, "nvmlDeviceGetFieldValues")(h, [fid])[0]
    if getattr(value, "nvmlReturn", 0) != 0:
        raise _Unsupported("memory temperature")
    raw = getattr(value, "value", None)
    return {"memory_temperature_c": getattr(raw, "uiVal", raw)}


def _power(nvml: Any, h: Any) -> dict[str, Any]:
    return {"power_w": _fn(nvml, "nvmlDeviceGetPowerUsage")(h) / 1000}


def _power_limit(nvml: Any, h: Any) -> dict[str, Any]:
    return {"power_limit_w": _fn(nvml, "nvmlDeviceGetEnforcedPowerLimit")(h) / 1000}


def _energy(nvml: Any, h: Any) -> dict[str, Any]:
    return {"energy_j": _fn(nvml, "nvmlDeviceGetTotalEnergyConsumption")(h) / 1000}


def _utilization(nvml: Any, h: Any) -> dict[str, Any]:
    rates = _fn(nvml, "nvmlDeviceGetUtilizationRates")(h)
    return {"utilization_gpu_pct": rates.gpu, "utilization_memory_pct": rates.memory}


def _memory(nvml: Any, h: Any) -> dict[str, Any]:
    info = _fn(nvml, "nvmlDeviceGetMemoryInfo")(h)
    return {"memory_used_mib": info.used / MIB, "memory_total_mib": info.total / MIB}


def _memory_reserved(nvml: Any, h: Any) -> dict[str, Any]:
    # nvidia-ml-py asks nvmlDeviceGetMemoryInfo_v2 when given the v2 struct version; an NVML without
    # that symbol answers FUNCTION_NOT_FOUND, a module without the constant cannot ask at all.
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            info = _fn(nvml, "nvmlDeviceGetMemoryInfo")(h, version=version)
        except TypeError as exc:  # a wrapper without the version argument
            raise _Unsupported("memory reserved") from exc
    else:
        info = _fn(nvml, "nvmlDeviceGetMemoryInfo_v2")(h)
    reserved = getattr(info, "reserved", None)
    if not isinstance(reserved, int):
        raise _Unsupported("memory reserved")
    return {"memory_reserved_mib": reserved / MIB}


def _clocks(nvml: Any, h: Any) -> dict[str, Any]:
    clock = _fn(nvml, "nvmlDeviceGetClockInfo")
    return {"sm_clock_mhz": clock(h, getattr(nvml, "NVML_CLOCK_SM", 1)),
            "memory_clock_mhz": clock(h, getattr(nvml, "NVML_CLOCK_MEM", 2))}


def _reasons(nvml: Any, h: Any) -> dict[str, Any]:
    try:
        function = _fn(nvml, "nvmlDeviceGetCurrentClocksEventReasons")
    except _Unsupported:  # renamed in 535; the old name still works on older libraries
        function = _fn(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    return {"clock_event_reasons": int(function(h))}


def _ecc(nvml: Any, h: Any) -> dict[str, Any]:
    total = _fn(nvml, "nvmlDeviceGetTotalEccErrors")
    return {"ecc_volatile_uncorrected": total(h, 1, 0), "ecc_volatile_corrected": total(h, 0, 0)}


def _retired(nvml: Any, h: Any) -> dict[str, Any]:
    pending = bool(_fn(nvml, "nvmlDeviceGetRetiredPagesPendingStatus")(h))
    out: dict[str, Any] = {"retired_pages_pending": pending}
    if pending:  # the count (two more calls) only while a retirement waits for a reset: no cost otherwise
        try:
            pages = _fn(nvml, "nvmlDeviceGetRetiredPages")
            out["retired_pages"] = sum(len(pages(h, cause) or ()) for cause in (0, 1))  # multiple SBE, DBE
        except Exception:  # the count is a detail: the pending flag stands without it
            pass
    return out


def _remapped(nvml: Any, h: Any) -> dict[str, Any]:
    correctable, uncorrectable, pending, *_failed = _fn(nvml, "nvmlDeviceGetRemappedRows")(h)
    return {"remapped_rows_pending": bool(pending), "remapped_rows": int(correctable) + int(uncorrectable)}


def _pcie(nvml: Any, h: Any) -> dict[str, Any]:
    return {"pcie_gen": _fn(nvml, "nvmlDeviceGetCurrPcieLinkGeneration")(h),
            "pcie_width": _fn(nvml, "nvmlDeviceGetCurrPcieLinkWidth")(h)}


def _pcie_throughput(nvml: Any, h: Any) -> dict[str, Any]:
    # NVML samples each counter over a short window (about 20 ms) inside the call: run per GPU on its
    # worker, so the GPUs still overlap.
    throughput = _fn(nvml, "nvmlDeviceGetPcieThroughput")
    return {"pcie_tx_bytes_s": throughput(h, getattr(nvml, "NVML_PCIE_UTIL_TX_BYTES", 0)) * 1024,
            "pcie_rx_bytes_s": throughput(h, getattr(nvml, "NVML_PCIE_UTIL_RX_BYTES", 1)) * 1024}


def _pcie_replay(nvml: Any, h: Any) -> dict[str, Any]:
    return {"pcie_replay_count": _fn(nvml, "nvmlDeviceGetPcieReplayCounter")(h)}


def _fan(nvml: Any, h: Any) -> dict[str, Any]:
    return {"fan_pct": _fn(nvml, "nvmlDeviceGetFanSpeed")(h)}


def _processes(nvml: Any, h: Any) -> dict[str, Any]:
    procs = _fn(nvml, "nvmlDeviceGetComputeRunningProcesses")(h) or ()
    used = [getattr(p, "usedGpuMemory", None) for p in procs]
    used = [u if isinstance(u, int) else None for u in used]  # None: WDDM, or not available
    pairs = tuple((int(p.pid), None if u is None else u / MIB) for p, u in zip(procs, used, strict=True))
    return {"process_count": len(procs), "process_memory_mib": sum(u for u in used if u is not None) / MIB,
            "processes": pairs}


# Each reader fills one or more Sample fields; a reader the GPU does not support is dropped for good.
READERS: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
    "temperature": _temperature, "memory_temperature": _memory_temperature, "power": _power,
    "power_limit": _power_limit, "energy": _energy, "utilization": _utilization, "memory": _memory,
    "memory_reserved": _memory_reserved, "clocks": _clocks, "clock_event_reasons": _reasons, "ecc": _ecc,
    "retired_pages": _retired, "remapped_rows": _remapped, "pcie": _pcie, "pcie_throughput": _pcie_throughput,
    "pcie_replay": _pcie_replay, "fan": _fan, "processes": _processes,
}


@dataclass
class _NvmlGpu:
    index: int
    handle: Any
    pci_address: str | None
    uuid: str | None
    slowdown_c: float | None
    worker: _Worker
    unsupported: set[str] = field(default_factory=set)
    name: str | None = None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class NvmlSource:
    """Samples every GPU through one NVML session, one worker thread per GPU.

    A call that hangs costs that GPU a ``GpuLost`` (the others are still sampled); "GPU is lost" is a
    ``GpuLost`` too. When the whole session goes (driver unloaded, every GPU lost), it shuts down and
    reconnects with back-off. ``module`` is an NVML-like object (tests pass fakes); by default the real
    one comes from ``gpuhealth.nvml`` (the only importer of pynvml).
    """

    def __init__(self, module: Any = None, timeout: float = 2.0, clock: Callable[[], float] = time.time,
                 backoff: tuple[float, float] = (1.0, 60.0), xid_events: bool = True,
                 log: Callable[[str], None] | None = None) -> None:
        self._module = module
        self.refused = Refusals("NVML", log) if log is not None else Refusals("NVML")
        self.timeout = timeout
        self.clock = clock
        self._backoff = backoff
        self._delay = backoff[0]
        self._retry_at = 0.0
        self._xid_events = xid_events
        self._control = _Worker("gpuhealth-nvml-control")
        self._gpus: list[_NvmlGpu] = []
        self._event_set: Any = None
        self.connected = False
        self.last_error: str | None = None
        # (gpu index, reader) pairs found unsupported; kept across reconnects (same hardware)
        self.unsupported: dict[int, set[str]] = {}

    # ---- session

    def _nvml(self) -> Any:
        if self._module is None:
            from gpuhealth import nvml as core_nvml  # no pynvml import until a monitor really starts

            try:
                self._module = core_nvml._load_module()
            except ImportError as exc:
                raise SourceError(f"nvidia-ml-py not importable: {exc}") from exc
        return self._module

    def connect(self) -> bool:
        """Start the session (bounded by the timeout); False with ``last_error`` set when it fails."""
        if self._control.busy:
            self.last_error = "an earlier nvmlInit is still hung"
            return False
        job = self._control.submit(self._open)
        if not _wait(job, time.monotonic() + self.timeout):
            self.last_error = f"nvmlInit did not answer within {self.timeout:g} s"
        elif job.error is not None:
            self.last_error = str(job.error) or type(job.error).__name__
            if isinstance(job.error, SourceError):
                raise job.error
        else:
            self.connected, self.last_error = True, None
            self._delay = self._backoff[0]
            return True
        self._retry_at = self.clock() + self._delay
        self._delay = min(self._delay * 2, self._backoff[1])
        return False

    def _open(self) -> None:
        nvml = self._nvml()
        nvml.nvmlInit()
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            gpus.append(self._describe(nvml, index, nvml.nvmlDeviceGetHandleByIndex(index)))
        old, self._gpus = self._gpus, gpus
        for gpu in old:
            gpu.worker.stop()
        self._event_set = self._register_xids(nvml) if self._xid_events else None

    def _describe(self, nvml: Any, index: int, handle: Any) -> _NvmlGpu:
        def ask(name: str, *args: Any) -> Any:
            try:
                return _text(getattr(nvml, name)(handle, *args))
            except Exception:  # identity fields are nice to have, never a reason to fail
                return None

        from gpuhealth.model import normalize_pci_address

        pci = ask("nvmlDeviceGetPciInfo")
        slowdown = getattr(nvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
        return _NvmlGpu(index, handle, normalize_pci_address(_text(getattr(pci, "busId", None))),
                        ask("nvmlDeviceGetUUID"), ask("nvmlDeviceGetTemperatureThreshold", slowdown),
                        _Worker(f"gpuhealth-nvml-gpu{index}"), self.unsupported.setdefault(index, set()),
                        ask("nvmlDeviceGetName"))

    def _register_xids(self, nvml: Any) -> Any:
        try:
            event_set = nvml.nvmlEventSetCreate()
            for gpu in self._gpus:
                nvml.nvmlDeviceRegisterEvents(gpu.handle, XID_EVENT_TYPE, event_set)
            return event_set
        except Exception:  # not supported (MIG, some virtual GPUs): Xids still reach the kernel log
            return None

    def _disconnect(self) -> None:
        self.connected = False
        self._retry_at = self.clock() + self._delay
        nvml = self._module
        # nvmlShutdown can hang on a wedged driver as well: never wait for it.
        threading.Thread(target=lambda: _quietly(nvml.nvmlShutdown), daemon=True).start()

    # ---- sampling

    def poll(self) -> list[Event]:
        now = self.clock()
        if not self.connected and (now < self._retry_at or not self.connect()):
            return []
        jobs = [(gpu, None if gpu.worker.busy else gpu.worker.submit(lambda g=gpu: self._sample(g, now)))
                for gpu in self._gpus]
        xids = self._control.submit(lambda: self._drain_xids(now)) if self._event_set and not self._control.busy \
            else None
        deadline = time.monotonic() + self.timeout
        events: list[Event] = []
        session_gone = None
        for gpu, job in jobs:
            if job is None or not _wait(job, deadline):
                events.append(GpuLost(now, gpu.index, f"NVML did not answer within {self.timeout:g} s"))
            elif isinstance(job.error, _SessionGone):
                session_gone = str(job.error)
            elif job.error is not None:
                events.append(GpuLost(now, gpu.index, str(job.error) or type(job.error).__name__))
            else:
                events.append(job.value)
        if xids is not None and _wait(xids, deadline) and xids.error is None:
            events.extend(xids.value)
        if session_gone is None and self._gpus and not any(isinstance(e, Sample) for e in events):
            session_gone = "no GPU answered"
        if session_gone is not None:
            self._disconnect()
            lost = {e.gpu for e in events if isinstance(e, GpuLost)}
            events += [GpuLost(now, g.index, f"NVML session lost ({session_gone}); reconnecting")
                       for g in self._gpus if g.index not in lost]
        return self.refused.filter(events)

    def _sample(self, gpu: _NvmlGpu, now: float) -> Sample:
        nvml = self._module
        values: dict[str, Any] = {}
        for name, reader in READERS.items():
            if name in gpu.unsupported:
                continue
            try:
                values.update(reader(nvml, gpu.handle))
            except _Unsupported:
                gpu.unsupported.add(name)
            except Exception as exc:
                self._classify(exc, gpu, name)
        return Sample(now, gpu.index, gpu.pci_address, gpu.uuid, temperature_slowdown_c=gpu.slowdown_c,
                      name=gpu.name, **values)

    @staticmethod
    def _classify(exc: Exception, gpu: _NvmlGpu, name: str) -> None:
        code = _nvml_code(exc)
        if code in _UNSUPPORTED:
            gpu.unsupported.add(name)
        elif code in _GPU_GONE:
            raise _GpuGone(str(exc) or "GPU is lost") from exc
        elif code in _SESSION_GONE:
            raise _SessionGone(str(exc)) from exc
        # anything else (a transient error, a timeout inside NVML): this reading is None this time

    def _drain_xids(self, now: float) -> list[Event]:
        nvml, events = self._module, []
        by_handle = {id(g.handle): g.index for g in self._gpus}
        for _ in range(256):  # bounded: a storm of events must not starve sampling
            try:
                data = nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except Exception:  # NVML_ERROR_TIMEOUT: nothing pending
                break
            index = by_handle.get(id(data.device))
            if index is None:
                index = _quietly(lambda d=data: nvml.nvmlDeviceGetIndex(d.device))
            events.append(XidEvent(now, index if isinstance(index, int) else -1, int(data.eventData)))
        return events

    def close(self) -> None:
        if self.connected:
            self._disconnect()
        for gpu in self._gpus:
            gpu.worker.stop()
        self._control.stop()


def _quietly(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return None


# --------------------------------------------------------------------------- nvidia-smi


SMI_FIELDS: tuple[str, ...] = (
    "index", "pci.bus_id", "uuid", "temperature.gpu", "temperature.memory", "power.draw",
    "enforced.power.limit", "utilization.gpu", "utilization.memory", "memory.used", "memory.total",
    "clocks.sm", "clocks.mem", "clocks_throttle_reasons.active", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total", "retired_pages.pending", "pcie.link.gen.current",
    "pcie.link.width.current", "fan.speed", "memory.reserved",
)
_INVALID_FIELD = lazy_re(r'Field "([^"]+)" is not a valid field to query')


MAX_LINE = 4096  # characters of one nvidia-smi line read at a time (a real one is under 1 KiB)
MAX_QUEUED = 10_000  # unread lines from nvidia-smi (at most ~40 MB); more are dropped


class SmiSource:
    """The fallback when NVML cannot load: one ``nvidia-smi --query-gpu ... -lms`` process, read line by
    line on a thread. Restarted with back-off when it dies; a field this nvidia-smi rejects is dropped
    from the query. Silence for ``stall_s`` counts as a hang: the process is killed and every GPU seen
    gets a ``GpuLost``."""

    def __init__(self, interval: float = 1.0, command: str = "nvidia-smi", fields: Sequence[str] = SMI_FIELDS,
                 clock: Callable[[], float] = time.time, backoff: tuple[float, float] = (1.0, 60.0),
                 stall_s: float | None = None, log: Callable[[str], None] | None = None) -> None:
        self.interval = interval
        self.refused = Refusals("nvidia-smi", log) if log is not None else Refusals("nvidia-smi")
        self.command = command
        self.fields = list(fields)
        self.clock = clock
        self._backoff = backoff
        self._delay = backoff[0]
        self._retry_at = 0.0
        self.stall_s = stall_s if stall_s is not None else max(10.0, 5 * interval)
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []
        self._last_line = 0.0
        self._seen: set[int] = set()
        self.starts = 0
        self.last_error: str | None = None

    def _start(self) -> None:
        argv = [self.command, "--query-gpu=" + ",".join(self.fields), "--format=csv,noheader,nounits",
                "-lms", str(max(1, int(self.interval * 1000)))]
        try:
            self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          bufsize=1, start_new_session=True)
        except OSError as exc:
            self.last_error = f"{self.command}: {exc.strerror or exc}"
            self._schedule_retry()
            return
        self.starts += 1
        self._stderr = []
        self._last_line = self.clock()
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump_err, args=(self._proc.stderr,), daemon=True).start()

    @staticmethod
    def _pump(stream: IO[str], lines: queue.SimpleQueue[str | None]) -> None:
        # Bounded both ways, so an nvidia-smi that floods (or a fake one running `yes`) cannot grow memory:
        # a line is read at most MAX_LINE characters at a time, and past MAX_QUEUED unread lines the
        # newest are dropped (a sample per GPU per interval is far below that).
        while line := stream.readline(MAX_LINE):
            if lines.qsize() < MAX_QUEUED:
                lines.put(line)
        lines.put(None)  # end of this process's output

    def _pump_err(self, stream: IO[str]) -> None:
        while line := stream.readline(MAX_LINE):
            if len(self._stderr) < 50:
                self._stderr.append(line.strip())

    def _schedule_retry(self) -> None:
        self._retry_at = self.clock() + self._delay
        self._delay = min(self._delay * 2, self._backoff[1])

    def poll(self) -> list[Event]:
        now = self.clock()
        if self._proc is None:
            if now < self._retry_at:
                return []
            self._start()
        events: list[Event] = []
        for _ in range(MAX_QUEUED):  # bounded: a flooding nvidia-smi must not keep poll() from returning
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is not None and line.strip():
                self._last_line = now
                events.extend(self._parse(line, now))
        return self.refused.filter(events + self._watch(now))

    def _watch(self, now: float) -> list[Event]:
        """Restart a process that died; kill one that stalled (and say so per GPU)."""
        proc = self._proc
        if proc is None:
            return []
        if proc.poll() is not None:
            self._exited(proc)
            return []
        if now - self._last_line < self.stall_s:
            return []
        self._kill(proc)
        self._schedule_retry()
        reason = f"nvidia-smi printed nothing for {self.stall_s:g} s"
        return [GpuLost(now, gpu, reason) for gpu in sorted(self._seen)]

    def _exited(self, proc: subprocess.Popen[str]) -> None:
        self._proc = None
        time.sleep(0.01)  # let the stderr pump catch the last message
        message = " ".join(self._stderr)
        bad = _INVALID_FIELD.search(message)
        if bad and bad[1] in self.fields and bad[1] != "index":
            self.fields.remove(bad[1])  # an older nvidia-smi: query without that field at once
            return
        self.last_error = f"nvidia-smi exited with {proc.returncode}: {message[:200]}"
        self._schedule_retry()

    def _parse(self, line: str, now: float) -> list[Event]:
        from gpuhealth.model import ParseError
        from gpuhealth.parsers.smi_csv import parse_smi_csv

        try:
            gpus = parse_smi_csv(line, self.fields).gpus
        except ParseError:
            return []  # a stray line (a warning nvidia-smi interleaves): skip it
        if not gpus or gpus[0].index is None:
            return []
        self._delay = self._backoff[0]
        self._seen.add(gpus[0].index)
        return [_smi_sample(gpus[0], _extra(line, self.fields), now)]

    def _kill(self, proc: subprocess.Popen[str]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self._proc = None

    def close(self) -> None:
        if self._proc is not None:
            self._kill(self._proc)


def _extra(line: str, fields: Sequence[str]) -> dict[str, float | None]:
    """The clocks and reserved memory, which the core's CSV parser does not model."""
    values = [v.strip() for v in line.split(",")]
    out: dict[str, float | None] = {}
    for name, key in (("clocks.sm", "sm_clock_mhz"), ("clocks.mem", "memory_clock_mhz"),
                      ("memory.reserved", "memory_reserved_mib")):
        if name in fields and len(values) == len(fields):
            try:
                out[key] = float(values[list(fields).index(name)])
            except ValueError:
                out[key] = None
    return out


def _smi_sample(gpu: Any, extra: dict[str, float | None], now: float) -> Sample:
    from gpuhealth.nvml import CLOCK_EVENT_BITS

    bits = {name: bit for bit, name in CLOCK_EVENT_BITS.items()}
    reasons = sum(bits.get(name, 0) for name in gpu.clock_event_reasons)
    return Sample(
        now, gpu.index, gpu.pci_address, gpu.uuid, temperature_c=gpu.temperature_c,
        memory_temperature_c=gpu.memory_temperature_c, power_w=gpu.power_draw_w, power_limit_w=gpu.power_limit_w,
        utilization_gpu_pct=gpu.utilization_gpu_pct, utilization_memory_pct=gpu.utilization_memory_pct,
        memory_used_mib=gpu.memory_used_mib, memory_total_mib=gpu.memory_total_mib,
        clock_event_reasons=reasons, ecc_volatile_uncorrected=gpu.ecc_volatile_uncorrected,
        ecc_volatile_corrected=gpu.ecc_volatile_corrected, retired_pages_pending=gpu.retired_pages_pending,
        pcie_gen=gpu.pcie_gen_current, pcie_width=gpu.pcie_width_current, fan_pct=gpu.fan_speed_pct, **extra)


# --------------------------------------------------------------------------- traces


def trace_header(generated_by: str, note: str, boot_id: str | None = None) -> dict[str, Any]:
    header = {"format": TRACE_FORMAT, "version": TRACE_VERSION, "generated_by": generated_by, "note": note}
    if boot_id is not None:  # optional (monitor/boots.py): the boot the trace starts in
        header["boot_id"] = boot_id
    return header


@dataclass(frozen=True)
class BootMark:
    """A ``boot`` record of a trace: from ``t`` on, the traced host runs in boot ``boot_id`` (it rebooted). Not an
    event: the replay source takes it (``ReplaySource.boot_id``) and no rule ever sees it."""

    t: float
    boot_id: str


def boot_record(t: float, boot_id: str) -> dict[str, Any]:
    return {"kind": "boot", "t": t, "boot_id": boot_id}


class TraceWriter:
    """``--record FILE``: a header line, then one JSON line per event, flushed every batch so a killed
    monitor loses at most the last interval."""

    def __init__(self, path: Path, generated_by: str, note: str, boot_id: str | None = None) -> None:
        from gpuhealth.safefile import open_replacing

        self._file = open_replacing(path, 0o644)  # never through a planted link; held for the monitor's life
        self._file.write(json.dumps(trace_header(generated_by, note, boot_id)) + "\n")
        self._file.flush()

    def write(self, events: Sequence[Event]) -> None:
        for event in events:
            self._file.write(json.dumps(to_record(event), separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_trace(path: Path, events: Sequence[Event], generated_by: str, note: str) -> None:
    writer = TraceWriter(path, generated_by, note)
    writer.write(events)
    writer.close()


def read_trace(path: Path, refused: Refusals | None = None) -> tuple[dict[str, Any], Iterator[Event | BootMark]]:
    """The header and the events (and ``BootMark``s, where the trace has ``boot`` records); ValueError when the
    file is not a gpuhealth trace. An event whose time or GPU is impossible is skipped, an impossible reading left
    out (``sample.sane``), counted in ``refused``."""
    from .boots import valid_boot_id

    refused = refused if refused is not None else Refusals(str(path), log=None)
    handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the iterator
    try:
        header = json.loads(handle.readline() or "null")
    except json.JSONDecodeError as exc:
        handle.close()
        raise ValueError(f"{path}: not a gpuhealth trace ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != TRACE_FORMAT:
        handle.close()
        raise ValueError(f"{path}: not a gpuhealth trace (the first line is no {TRACE_FORMAT} header)")
    if header.get("version") != TRACE_VERSION:
        handle.close()
        raise ValueError(f"{path}: trace version {header.get('version')!r}; this gpuhealth reads {TRACE_VERSION}")
    if "boot_id" in header and not valid_boot_id(header["boot_id"]):
        handle.close()
        raise ValueError(f"{path}: the header's boot_id is no boot id (up to 64 letters, digits, '-', '_', '.', ':')")

    def events() -> Iterator[Event | BootMark]:
        with handle:
            for number, line in enumerate(handle, start=2):
                if line.strip():
                    try:
                        item = _trace_item(json.loads(line))
                    except (ValueError, TypeError) as exc:
                        raise ValueError(f"{path}:{number}: {exc}") from exc
                    if isinstance(item, BootMark):
                        yield item
                    else:
                        yield from refused.filter((item,))

    return header, events()


def _trace_item(record: Any) -> Event | BootMark:
    from .boots import valid_boot_id

    if isinstance(record, dict) and record.get("kind") == "boot":
        t, boot = record.get("t"), record.get("boot_id")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not valid_boot_id(boot):
            raise ValueError("bad boot record: it needs a time t and a boot_id (up to 64 letters, digits, '-', '_', "
                             "'.', ':')")
        return BootMark(float(t), boot)
    return from_record(record)


def trace_end(path: Path) -> float:
    """The latest timestamp in a trace (one pass, reading only each event's time)."""
    _header, events = read_trace(path)
    last = -math.inf
    for event in events:
        last = max(last, event.t)
    return last


class ReplaySource:
    """Plays a trace. ``speed`` 1 is real time, 0 as fast as polled (one timestamp per poll, and the
    monitor does not wait between polls). With ``rebase`` the trace is moved to the clock: at speed > 0
    its first timestamp maps to the first poll, so the replay happens now; at speed 0 its *last*
    timestamp maps to the first poll, so a fast replay ends at "now" and history shows all of it at once
    rather than samples dated in the future. Faster than real time (speed > 1), the trace keeps its own
    durations and is placed so that its last sample is dated when the replay ends: no sample is ever
    dated after the moment it is played (for-durations and charts stay true)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time, speed: float = 1.0,
                 rebase: bool = True, log: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.refused = Refusals(str(path), log) if log is not None else Refusals(str(path))
        self.header, self._events = read_trace(path, self.refused)
        # The boot the events returned by the last poll belong to (monitor/boots.py): the header's, then each
        # ``boot`` record's from where it stands; None for a trace without (older ones).
        self.boot_id: str | None = self.header.get("boot_id")
        self.clock = clock
        self.speed = speed
        self.rebase = rebase
        self._pending: Event | BootMark | None = next(self._events, None)
        self._origin: tuple[float, float] | None = None  # (trace time that maps to the clock, clock at first poll)
        self._fast_shift: float | None = None  # speed > 1: computed once, from the trace's last timestamp
        self.exhausted = self._pending is None

    @property
    def paced(self) -> bool:
        """False at speed 0: the caller polls again at once instead of every interval."""
        return self.speed > 0

    def poll(self) -> list[Event]:
        if self._pending is None:
            self.exhausted = True
            return []
        now = self.clock()
        if self._origin is None:
            anchor = self._pending.t if self.speed > 0 or not self.rebase else trace_end(self.path)
            self._origin = (anchor, now)
        anchor, start = self._origin
        until = self._pending.t if self.speed <= 0 else anchor + (now - start) * self.speed
        shift = self._shift(anchor, start) if self.rebase else 0.0
        out: list[Event] = []
        while self._pending is not None and self._pending.t <= until:
            if isinstance(self._pending, BootMark):
                if out:  # a reboot ends the batch: the events before it belong to the boot before
                    break
                self.boot_id = self._pending.boot_id
                self._pending = next(self._events, None)
                if self.speed <= 0 and self._pending is not None:
                    until = self._pending.t
                continue
            out.append(_shifted(self._pending, shift))
            self._pending = next(self._events, None)
        self.exhausted = self._pending is None
        return out

    def _shift(self, anchor: float, start: float) -> float:
        if self.speed <= 1:
            return start - anchor
        if self._fast_shift is None:
            end = trace_end(self.path)
            self._fast_shift = start + (end - anchor) / self.speed - end
        return self._fast_shift

    def close(self) -> None:
        self._events.close()  # type: ignore[attr-defined]


def _shifted(event: Event, shift: float) -> Event:
    from dataclasses import replace

    return replace(event, t=event.t + shift) if shift else event
