"""Fakes and trace builders shared by the monitor tests and bench/monitor_sampling.py.

``FakeNvml`` is built like tests/test_nvml.py's: an object with NVML's function names. Traces built
here are synthetic and their headers say so.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpuhealth.monitor.config import load_config
from gpuhealth.monitor.rules import Alert, RuleSet
from gpuhealth.monitor.sample import HELD_MIB, Event, Sample
from gpuhealth.monitor.sources import ReplaySource, write_trace

T0 = 1_699_999_980.0  # 2023-11-14T22:13:00Z, a round minute
GENERATED_BY = "tests/monitor/monitor_fakes.py"
NOTE = "GENERATED for tests: synthetic values, not recorded from a real GPU"


class CapturingNotifier:
    """A notifier that keeps what it is sent (pages only, unless ``every_alert``), for tests to read."""

    every_alert = False

    def __init__(self) -> None:
        self.got: list[Alert] = []

    def send(self, alert: Alert) -> None:
        self.got.append(alert)

    def close(self) -> None:
        pass


class FakeNVMLError(Exception):
    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


class FakeNvml:
    """``gpus`` H100s; ``lost`` GPUs say GPU_IS_LOST, ``hang`` GPUs block until ``release`` is set."""

    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    nvmlMemory_v2 = 0x02000028  # noqa: N815 - nvidia-ml-py's name

    def __init__(self, gpus: int = 2) -> None:
        self.gpus = gpus
        self.lost: set[int] = set()
        self.hang: set[int] = set()
        self.release = threading.Event()
        self.init_error: FakeNVMLError | None = None
        self.xids: list[tuple[int, int]] = []
        self.calls: Counter[str] = Counter()
        self.temperature = 41
        # reader names (sources.READERS) whose calls answer NOT_SUPPORTED on every GPU
        self.unsupported: set[str] = set()
        self.processes: list[Any] = [SimpleNamespace(pid=4242, usedGpuMemory=39 * 1024**3)]
        self.remapped = (0, 0, 0, 0)  # correctable, uncorrectable, pending, failure
        self.retired: dict[int, list[int]] | None = None  # cause -> page addresses; None: Not Supported

    def _device(self, handle: int, name: str) -> None:
        self.calls[name] += 1
        if handle in self.hang:
            self.release.wait(30)
        if handle in self.lost:
            raise FakeNVMLError(15, "GPU is lost")

    def nvmlInit(self):  # noqa: N802 - NVML's names
        self.calls["init"] += 1
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):  # noqa: N802
        self.calls["shutdown"] += 1

    def nvmlDeviceGetCount(self):  # noqa: N802
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return index

    def nvmlDeviceGetPciInfo(self, handle):  # noqa: N802
        return SimpleNamespace(busId=f"00000000:{0x19 + handle:02X}:00.0".encode())

    def nvmlDeviceGetUUID(self, handle):  # noqa: N802
        return f"GPU-{handle:08d}-0000-0000-0000-000000000000"

    def nvmlDeviceGetTemperatureThreshold(self, handle, kind):  # noqa: N802
        return 87

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        self._device(handle, "temperature")
        return self.temperature + handle

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        self._device(handle, "power")
        return 301234

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return 700000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        return 123456789

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return SimpleNamespace(gpu=97, memory=40)

    def _maybe_unsupported(self, name: str) -> None:
        self.calls[name] += 1
        if name in self.unsupported:
            raise FakeNVMLError(3, "Not Supported")

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):  # noqa: N802
        if version is None:
            return SimpleNamespace(total=80 * 1024**3, used=40 * 1024**3)
        assert version == self.nvmlMemory_v2
        self._maybe_unsupported("memory_reserved")  # nvmlDeviceGetMemoryInfo_v2 underneath
        return SimpleNamespace(version=version, total=80 * 1024**3, reserved=613 * 1024**2,
                               free=40 * 1024**3 - 613 * 1024**2, used=40 * 1024**3)

    def nvmlDeviceGetPcieThroughput(self, handle, counter):  # noqa: N802
        self._maybe_unsupported("pcie_throughput")
        return 1_250_000 if counter == self.NVML_PCIE_UTIL_TX_BYTES else 250_000  # KB/s

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802
        return 1980 if kind == 1 else 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return 0

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter):  # noqa: N802
        return 0

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):  # noqa: N802
        if self.retired is None:
            raise FakeNVMLError(3, "Not Supported")  # Ampere and newer remap rows instead
        self.calls["retired_pending"] += 1
        return 1 if any(self.retired.values()) else 0

    def nvmlDeviceGetRetiredPages(self, handle, cause):  # noqa: N802
        self.calls["retired_pages"] += 1
        return list((self.retired or {}).get(cause, []))

    def nvmlDeviceGetRemappedRows(self, handle):  # noqa: N802
        return self.remapped

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):  # noqa: N802
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):  # noqa: N802
        return 16

    def nvmlDeviceGetFanSpeed(self, handle):  # noqa: N802
        self.calls["fan"] += 1
        raise FakeNVMLError(3, "Not Supported")  # passively cooled

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        self._maybe_unsupported("processes")
        return self.processes

    def nvmlEventSetCreate(self):  # noqa: N802
        return "event-set"

    def nvmlDeviceRegisterEvents(self, handle, types, event_set):  # noqa: N802
        pass

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):  # noqa: N802
        if not self.xids:
            raise FakeNVMLError(10, "Timeout")
        gpu, xid = self.xids.pop(0)
        return SimpleNamespace(device=gpu, eventData=xid)


class Clock:
    """An injected clock: tests move time, nothing sleeps."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def samples(gpu: int, n: int, t0: float = T0, step: float = 1.0, **fields: Any) -> list[Sample]:
    """``n`` samples; a field given as a callable gets the sample's number."""
    out = []
    for i in range(n):
        values = {k: (v(i) if callable(v) else v) for k, v in fields.items()}
        out.append(Sample(t0 + i * step, gpu, **values))
    return out


def play(events: Sequence[Event], tmp_path: Path, rules: dict[str, Any] | None = None,
         name: str = "trace.jsonl", held_mib: float = HELD_MIB) -> list[Alert]:
    """Write ``events`` as a generated trace, replay it through the rules, return the alerts."""
    path = tmp_path / name
    write_trace(path, sorted(events, key=lambda e: e.t), GENERATED_BY, NOTE)
    config = load_config()["rules"]
    for rule, options in (rules or {}).items():
        config[rule] = {**config[rule], **options}
    ruleset = RuleSet.from_config(config, held_mib)
    source = ReplaySource(path, speed=0, rebase=False)
    alerts: list[Alert] = []
    while not source.exhausted:
        alerts += ruleset.feed(source.poll())
    return alerts


def fired(alerts: Sequence[Alert], rule: str, state: str = "firing") -> list[Alert]:
    return [a for a in alerts if a.rule == rule and a.state == state]


def busy(**overrides: Any) -> dict[str, Callable[[int], Any] | Any]:
    """A healthy busy GPU whose readings move a little every sample."""
    base: dict[str, Any] = dict(temperature_c=lambda i: 60 + i % 3, power_w=lambda i: 300 + i % 7,
                                utilization_gpu_pct=lambda i: 90 + i % 5, memory_used_mib=40000,
                                process_count=1, process_memory_mib=39000, clock_event_reasons=0,
                                ecc_volatile_uncorrected=0, ecc_volatile_corrected=0,
                                remapped_rows_pending=False)
    base.update(overrides)
    return base


def wait_until_catching(pid: int, sig: int, deadline_s: float = 20.0) -> None:
    """Wait until the process has installed a handler for `sig` (the SigCgt mask in /proc/PID/status)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with open(f"/proc/{pid}/status") as status:
            caught = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
        if caught & (1 << (sig - 1)):
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never installed a handler for signal {sig}")
