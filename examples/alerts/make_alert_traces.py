"""Write the hand-written monitor traces in examples/alerts/: one per alert condition of the field reports, and
a healthy one. Every value is SYNTHETIC (written here, not recorded from a GPU); each trace's header says so.

Usage: python examples/alerts/make_alert_traces.py [OUT_DIR] (default: examples/alerts/). Runtime dependencies only.
``EXPECTED`` is what `gpuhealth monitor` must raise on each (tests/monitor/test_alert_traces.py replays them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent / "src")]

from gpuhealth.monitor.sample import Event, GpuLost, Sample, XidEvent  # noqa: E402
from gpuhealth.monitor.sources import write_trace  # noqa: E402

GENERATED_BY = "examples/alerts/make_alert_traces.py"
T0 = 1_764_583_200.0  # 2025-12-01T10:00:00Z
STEP = 10.0  # seconds between samples
GPU = dict(pci_address="0000:3b:00.0", uuid="GPU-5c1e0d2a-0000-4b7e-9a3f-handwritten0", name="Tesla V100-SXM2-32GB",
           memory_total_mib=32768.0, power_limit_w=300.0)

# Two more GPUs of the same host, for the traces where GPUs go missing
GPUS = [GPU, {**GPU, "pci_address": "0000:5e:00.0", "uuid": "GPU-5c1e0d2a-0001-4b7e-9a3f-handwritten1"},
        {**GPU, "pci_address": "0000:86:00.0", "uuid": "GPU-5c1e0d2a-0002-4b7e-9a3f-handwritten2"}]

# (severity, rule with its key, GPU or None for the host) that `gpuhealth monitor` must report FIRING for each
# trace, and nothing else
EXPECTED: dict[str, set[tuple[str, str, int | None]]] = {
    "stuck-sensor": {("warning", "stuck_sensor[temperature_c]", 0)},
    "held-idle": {("warning", "utilization_collapse", 0), ("warning", "hung_job", 0)},
    "hot": {("warning", "temperature", 0)},
    "xid": {("warning", "xid[13]", 0), ("critical", "xid[79]", 0)},
    "ecc": {("critical", "ecc[ecc_volatile_uncorrected]", 0)},
    "healthy": set(),
    # gpu_count's alert folds into gpu_lost's (monitor/fold.py): one page; GPU 2 vanishing on its own pages again
    "gpu-lost": {("critical", "gpu_lost", 1)},
    "gpu-lost-then-vanished": {("critical", "gpu_lost", 1), ("critical", "gpu_count", None)},
    # a GPU falling off the bus: its Xid 79 is the page; gpu_lost and gpu_count are its consequences, folded in
    "fallen-off-bus": {("critical", "xid[79]", 1)},
}
# text that must be in the alert lines of a trace: the folded alert is said, never dropped
FOLDED: dict[str, list[str]] = {
    "gpu-lost": ["FIRING critical gpu_lost gpu=1: GPU 1 lost: GPU is lost (also gpu_count on the host: 2 GPU(s) "
                 "answering, 3 expected; missing: (GPU 1, 0000:5e:00.0, GPU-5c1e0d2a-0001-4b7e-9a3f-handwritten1) "
                 "- the same fault, folded into this alert)"],
    "gpu-lost-then-vanished": ["folded into this alert", "FIRING critical gpu_count host: 1 GPU(s) answering, 3 "
                               "expected; missing: (GPU 1, "],
    "fallen-off-bus": ["FIRING critical xid[79] gpu=1: GPU 1 Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)",
                       "(also gpu_lost on GPU 1: GPU 1 lost: GPU is lost - the same fault, folded into this alert)",
                       "(also gpu_count on the host: 2 GPU(s) answering, 3 expected; missing: (GPU 1, "],
}

NOTES = {
    "stuck-sensor": "the temperature reads 39 °C throughout while a job starts at 5 min and trains for 15 min "
                    "(field report 000: a sensor frozen at 39 °C however long the training ran)",
    "held-idle": "training for 2 min, then 0 % utilisation for 13 min while the process still holds 62 MiB "
                 "(field report 000: 62 MB left in GPU memory, utilisation stuck at 0 %)",
    "hot": "training; the temperature climbs from 76 to 88 °C and stays (field report 001: log above 85 °C); "
           "no slowdown threshold in the samples, as from nvidia-smi, so the 85 °C threshold applies",
    "xid": "training for 2 min; Xid 13 at 30 s, Xid 79 (fallen off the bus) at 90 s",
    "ecc": "training for 3 min; the volatile uncorrected ECC counter goes from 0 to 1 at 60 s",
    "healthy": "20 minutes of steady training: temperature 66-69 °C, power 236-264 W, utilisation 93-97 %",
    "gpu-lost": "three GPUs training; at 2 min GPU 1 is lost (NVML: GPU is lost) and stays lost",
    "gpu-lost-then-vanished": "three GPUs training; at 2 min GPU 1 is lost (NVML: GPU is lost), at 4 min GPU 2 "
                              "stops answering without a word (its samples stop)",
    "fallen-off-bus": "three GPUs training; at 2 min NVML reports Xid 79 on GPU 1 (fallen off the bus) and from "
                      "the next poll on GPU 1 is lost (NVML: GPU is lost)",
}


def _training(i: int) -> dict[str, float]:
    """A steady training step with small deterministic wobbles (no randomness: the files are reproducible)."""
    return dict(utilization_gpu_pct=95 + (i * 7) % 5 - 2, power_w=250 + (i * 13) % 29 - 14,
                temperature_c=67 + (i * 5) % 4 - 1, memory_used_mib=30_000.0, process_count=1,
                process_memory_mib=29_500.0, ecc_volatile_uncorrected=0, ecc_volatile_corrected=0)


def _samples(count: int, values: Callable[[int], dict[str, float]]) -> list[Event]:
    return [Sample(T0 + i * STEP, 0, **GPU, **values(i)) for i in range(count)]


def _stuck(i: int) -> dict[str, float]:
    if i < 30:  # idle: no job
        values = dict(utilization_gpu_pct=0, power_w=41 + i % 3, memory_used_mib=0.0, process_count=0,
                      process_memory_mib=0.0)
    else:
        values = _training(i)
    return {**values, "temperature_c": 39.0}


def _held(i: int) -> dict[str, float]:
    if i < 12:
        return _training(i)
    return {**_training(i), "utilization_gpu_pct": 0, "power_w": 55 + i % 3, "memory_used_mib": 62.0,
            "process_memory_mib": 62.0}


def _hot(i: int) -> dict[str, float]:
    return {**_training(i), "temperature_c": min(88.0, 76 + i)}


def _ecc(i: int) -> dict[str, float]:
    return {**_training(i), "ecc_volatile_uncorrected": 1 if i >= 6 else 0}


def _missing(lost_at: int, vanished_at: int | None, count: int) -> list[Event]:
    """Three GPUs sampled every STEP; GPU 1 lost from sample ``lost_at`` on (a GpuLost each poll, as NVML's
    source says it), GPU 2's samples stop at ``vanished_at``."""
    events: list[Event] = []
    for i in range(count):
        t = T0 + i * STEP
        for gpu, identity in enumerate(GPUS):
            if gpu == 1 and i >= lost_at:
                events.append(GpuLost(t, 1, "GPU is lost"))
            elif not (gpu == 2 and vanished_at is not None and i >= vanished_at):
                events.append(Sample(t, gpu, **identity, **_training(i)))
    return events


def traces() -> dict[str, list[Event]]:
    return {
        "stuck-sensor": _samples(120, _stuck),
        "held-idle": _samples(90, _held),
        "hot": _samples(36, _hot),
        "xid": sorted(_samples(12, _training) + [XidEvent(T0 + 30, 0, 13), XidEvent(T0 + 90, 0, 79)],
                      key=lambda e: e.t),
        "ecc": _samples(18, _ecc),
        "healthy": _samples(120, _training),
        "gpu-lost": _missing(12, None, 30),
        "gpu-lost-then-vanished": _missing(12, 24, 36),
        "fallen-off-bus": sorted(_missing(13, None, 30) + [XidEvent(T0 + 12 * STEP, 1, 79)], key=lambda e: e.t),
    }


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else HERE
    out.mkdir(parents=True, exist_ok=True)
    for name, events in traces().items():
        write_trace(out / f"{name}.trace", events, GENERATED_BY,
                    f"HAND-WRITTEN example: synthetic values, not recorded from a GPU. {NOTES[name]}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
