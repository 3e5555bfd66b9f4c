"""/metrics: a prometheus_client Collector that builds every family from the live state on each scrape.

Nothing is kept between scrapes, so a GPU that stops answering (lost, or no sample for
``LiveState.stale_after``) simply has no reading series in the next scrape, and a reading the GPU did
not give (None) has no series at all: never a 0 or -1 standing in for "unknown". See docs/serve.md.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpuhealth.monitor.fold import xid_series
from gpuhealth.monitor.notify import actions_of

from .state import LiveState

GPU_LABELS = ["gpu", "uuid", "pci_bus_id", "model"]
MIB = 1024 * 1024

# (family name, help, Sample field, factor): one gauge per reading, a series only when read.
READINGS: tuple[tuple[str, str, str, float], ...] = (
    ("gpuhealth_gpu_temperature_celsius", "GPU core temperature in degrees Celsius.", "temperature_c", 1.0),
    ("gpuhealth_gpu_memory_temperature_celsius", "GPU memory (HBM) temperature in degrees Celsius.",
     "memory_temperature_c", 1.0),
    ("gpuhealth_gpu_power_watts", "GPU power draw in watts.", "power_w", 1.0),
    ("gpuhealth_gpu_power_limit_watts", "Enforced power limit in watts.", "power_limit_w", 1.0),
    ("gpuhealth_gpu_memory_used_bytes", "GPU memory in use, in bytes.", "memory_used_mib", MIB),
    ("gpuhealth_gpu_memory_total_bytes", "GPU memory in total, in bytes.", "memory_total_mib", MIB),
    ("gpuhealth_gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU (0-1).",
     "utilization_gpu_pct", 0.01),
    ("gpuhealth_gpu_sm_clock_hertz", "SM clock in hertz.", "sm_clock_mhz", 1e6),
)


def _identity(view: Any) -> list[str]:
    return [str(view.gpu), view.uuid or "", view.pci_bus_id or "", view.model or ""]


def _gpu_labels(gpu: int | None, identity: dict[int, Any]) -> list[str]:
    if gpu is None:
        return ["", "", "", ""]
    return _identity(identity[gpu]) if gpu in identity else [str(gpu), "", "", ""]


def _alert_gpus(alert: Any, identity: dict[int, Any]) -> list[list[str]]:
    """The GPU labels of an alert's series. A host alert that names GPUs (gpu_count's missing ones, None for
    those never seen) has one series per GPU, so that Alertmanager can match each to that GPU's own alert
    (a lost GPU inhibits the count's series for it, never the one for another GPU)."""
    if alert.gpu is not None or not alert.about:
        return [_gpu_labels(alert.gpu, identity)]
    return [list(labels) for labels in dict.fromkeys(tuple(_gpu_labels(basis.gpu, identity)) for basis in alert.about)]


class StateCollector(Collector):
    def __init__(self, state: LiveState) -> None:
        self.state = state

    def describe(self) -> list[Metric]:
        return []  # nothing to describe up front: every scrape is built fresh

    def collect(self) -> Iterator[Metric]:
        view = self.state.metrics_view()
        present = view["present"]
        yield build_info()
        # Always a series, 0 included: a node whose driver was broken from boot has no GPU series at all,
        # and only this gauge lets an alert rule see "none answers" (GpuhealthNoGpuAnswers).
        yield GaugeMetricFamily("gpuhealth_gpus_answering", "GPUs that gave a sample in the last stale_after "
                                "seconds (not lost): 0 when none answers, also when none ever did.",
                                value=float(len(present)))
        for name, help_text, field, factor in READINGS:
            family = GaugeMetricFamily(name, help_text, labels=GPU_LABELS)
            for gpu, sample in present:
                value = getattr(sample, field)
                if value is not None:
                    family.add_metric(_identity(gpu), float(value) * factor)
            yield family

        ecc = CounterMetricFamily("gpuhealth_gpu_ecc_errors", "Volatile ECC errors since the driver loaded "
                                  "(NVML volatile counters), by type.", labels=[*GPU_LABELS, "type"])
        for gpu, sample in present:
            for kind in ("corrected", "uncorrected"):
                value = getattr(sample, f"ecc_volatile_{kind}")
                if value is not None:
                    ecc.add_metric([*_identity(gpu), kind], float(value))
        yield ecc

        identity = view["identity"]
        xid = CounterMetricFamily("gpuhealth_xid_errors", "Xid events seen by this gpuhealth since it started "
                                  "(NVML event API), by Xid code.", labels=[*GPU_LABELS, "xid"])
        for (gpu, code), count in sorted(view["xids"].items()):
            labels = _identity(identity[gpu]) if gpu in identity else [str(gpu), "", "", ""]
            xid.add_metric([*labels, str(code)], float(count))
        yield xid
        paged = GaugeMetricFamily("gpuhealth_xid_paged", "Xids that gpuhealth's Xid alert (NVML events) paged in "
                                  "this boot before this gpuhealth started (its history): the full check's finding of "
                                  "one is no new fault.", labels=[*GPU_LABELS, "xid"])
        for gpu, code in view["xids_paged"]:
            labels = _identity(identity[gpu]) if gpu in identity else [str(gpu), "", "", ""]
            paged.add_metric([*labels, str(code)], 1.0)
        yield paged

        # Labels without the model name, which the first full check may fill in later: these counters keep
        # one series per GPU from the first scrape on.
        for kind, help_text in (
                ("busy", "Seconds this gpuhealth saw the GPU busy (utilisation above 0 %)."),
                ("idle", "Seconds this gpuhealth saw the GPU idle (0 % utilisation), held or not."),
                ("held_idle", "Seconds this gpuhealth saw the GPU at 0 % while a job held it (a process or its "
                              "memory): part of the idle seconds.")):
            family = CounterMetricFamily(f"gpuhealth_gpu_{kind}_seconds", help_text,
                                         labels=["gpu", "uuid", "pci_bus_id"])
            for gpu, seconds in sorted(view["usage"].items()):
                who = identity[gpu]
                family.add_metric([str(gpu), who.uuid or "", who.pci_bus_id or ""], seconds[kind])
            yield family

        alerts = GaugeMetricFamily("gpuhealth_alert_active", "1 for each alert of gpuhealth's monitor that is "
                                   "firing now (rule, GPU, key); a host alert about GPUs (gpu_count: the missing "
                                   "ones) has one series per GPU it names, a full check's Xid finding one per Xid "
                                   "code (label xid, at that Xid's severity); action and impact: what to do and what "
                                   "it does to the node; absent when none.",
                                   labels=["rule", "key", "severity", *GPU_LABELS, "xid", "action", "impact"])
        for alert in sorted(view["active"], key=lambda a: (a.rule, -1 if a.gpu is None else a.gpu, a.key)):
            action, impact = actions_of(alert)  # hardware_inspection where a fault survived reboots (boots.py)
            for labels in _alert_gpus(alert, identity):
                for xid_code, severity in xid_series(alert):
                    alerts.add_metric([alert.rule, alert.key, severity, *labels, xid_code, action, impact], 1.0)
        yield alerts
        acknowledged = GaugeMetricFamily("gpuhealth_alert_acknowledged", "1 for each firing alert that an "
                                         "acknowledgement holds back from paging (`gpuhealth ack`), with the labels of "
                                         "its gpuhealth_alert_active series; absent when none.",
                                         labels=["rule", "key", "severity", *GPU_LABELS, "xid"])
        for alert in sorted(view["acknowledged"], key=lambda a: (a.rule, -1 if a.gpu is None else a.gpu, a.key)):
            for labels in _alert_gpus(alert, identity):
                for xid_code, severity in xid_series(alert):
                    acknowledged.add_metric([alert.rule, alert.key, severity, *labels, xid_code], 1.0)
        yield acknowledged
        if view["remediations"] is not None:
            yield GaugeMetricFamily("gpuhealth_remediations", "Reboots of this host and GPU resets that gpuhealth saw "
                                    "in the last 7 days (a new boot id in its history; a GPU's counters since the "
                                    "driver loaded starting over): a node that keeps being remediated is not being "
                                    "fixed by it.", value=float(view["remediations"]))
        if view["gpu_resets"]:
            resets = GaugeMetricFamily("gpuhealth_gpu_resets", "Resets of this GPU (or reloads of the driver) that "
                                       "gpuhealth saw in the last 7 days; part of gpuhealth_remediations. Absent for "
                                       "a GPU without any.", labels=GPU_LABELS)
            for gpu, count in sorted(view["gpu_resets"].items()):
                resets.add_metric(_gpu_labels(gpu, identity), float(count))
            yield resets

        status = GaugeMetricFamily("gpuhealth_check_status", "Findings of the last full check by check code and "
                                   "severity (1; more when several share the labels), as `gpuhealth check "
                                   "--format prometheus` writes them; xid: the Xid code an Xid finding stands "
                                   "on; action and impact: what to do and what it does to the node.",
                                   labels=["code", "slug", "severity", "gpu", "pci_bus_id", "xid", "action", "impact"])
        report = view["report"]
        if report is not None:
            counts = Counter((f.code, f.slug, f.severity.value,
                              "" if f.subject.gpu_index is None else str(f.subject.gpu_index),
                              f.subject.pci_address or "", f.labels.get("xid", ""), f.action, f.impact)
                             for f in report.findings)
            for labels, count in sorted(counts.items()):
                status.add_metric(list(labels), float(count))
        yield status
        if view["report_at"] is not None:
            yield GaugeMetricFamily("gpuhealth_check_last_run_timestamp_seconds",
                                    "When the last full check finished, in seconds since the epoch.",
                                    value=view["report_at"])
        if view["last_sample_t"] is not None:
            yield GaugeMetricFamily("gpuhealth_last_sample_timestamp_seconds",
                                    "Time of the newest GPU sample, in seconds since the epoch.",
                                    value=view["last_sample_t"])


def build_info() -> GaugeMetricFamily:
    """Always 1; the labels say which gpuhealth and which Python serve this node (for fleet-wide upgrades)."""
    from gpuhealth import __version__

    family = GaugeMetricFamily("gpuhealth_build_info", "1, labelled with the version of gpuhealth and of the "
                               "Python it runs on.", labels=["version", "python"])
    family.add_metric([__version__, ".".join(map(str, sys.version_info[:3]))], 1.0)
    return family


def make_registry(state: LiveState, process: bool = True) -> CollectorRegistry:
    """A registry of our own (not the global one): the state collector, and the process's own
    CPU/memory/fd metrics (``process_*``) so the exporter's cost is visible in Prometheus too."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(state))
    if process:
        from prometheus_client import ProcessCollector

        ProcessCollector(registry=registry)
    return registry
