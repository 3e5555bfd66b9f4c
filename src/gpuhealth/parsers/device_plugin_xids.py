"""The Xids the NVIDIA Kubernetes device plugin logs from NVML's event API: machine output, not a person's words.

The plugin's health check waits on NVML's ``nvmlEventTypeXidCriticalError`` events and, for each Xid it does not skip,
logs the Xid and the GPU's UUID, then stops advertising that GPU to the kubelet (causes.csv
``device-plugin-gpu-unhealthy``). Its lines, from NVIDIA/k8s-device-plugin
(https://github.com/NVIDIA/k8s-device-plugin, tags read in its git history):

- ``XidCriticalError: Xid=%d on Device=%s; marking device as unhealthy.``: internal/rm/health.go, log.Printf in
  v0.13.0, klog.Infof from v0.14.0 (still in v0.20.0);
- ``XidCriticalError: Xid=%d on Device=%s, the device will go unhealthy.`` and ``XidCriticalError: Xid=%d, All
  devices will go unhealthy.`` (log.Printf): nvidia.go up to v0.9.0, cmd/nvidia-device-plugin/nvidia.go in v0.10.0
  and v0.11.0, internal/rm/health.go in v0.12.0; forks of that code print ``on GPU=%s`` or ``, uuid=%s``;
- ``Failed to determine uuid for event %v: %v; Marking all devices as unhealthy.`` (klog.Infof; internal/rm/health.go
  v0.20.0): the event is go-nvml's EventData printed with %v, ``{Device EventType EventData GpuInstanceId
  ComputeInstanceId}``, its EventType 8 (nvmlEventTypeXidCriticalError: other events are skipped before it) and its
  EventData the Xid;
- ``uuidCriticalError: Xid=%d, All devices will go unhealthy.`` / ``uuidCriticalError: Xid=%d on Device%s, the
  device will go unhealthy.``: forks of the same health check (log.Warningf), not NVIDIA's repository.

Each line becomes an Xid event of a KernelLog whose format is :data:`DEVICE_PLUGIN`: the same Xid checks (GH301,
GH302 ...) judge it with the severity a logged Xid of that number gets, and its evidence says it came from the
device plugin's NVML event. The event has the GPU's UUID (in ``detail``), not its PCI address. The plugin skips the
application Xids by default (31, 43, 45 up to v0.9.0; 13, 31, 43, 45, 68 from v0.10.0 (applicationErrorXids); 109 too
from v0.18.0; more with ``DP_DISABLE_HEALTHCHECKS``, and ``DP_ENABLE_HEALTHCHECKS`` from v0.18.0 turns one back on);
one that it logged all the same is still an application error, kept below critical.

A person's sentence about the plugin ("the device plugin said Xid 79") has no ``Xid=`` and stays the reporter's
words (parsers/reported_xids.py).
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import guarded_re, has_folded
from gpuhealth.model import DEVICE_PLUGIN, EventGroup, KernelEvent, KernelLog

__all__ = ["DEVICE_PLUGIN_SOURCE", "SKIPPED_BY_DEFAULT", "plugin_xids"]

MAX_EVENTS = 64
# what the evidence says of the log these lines came from
DEVICE_PLUGIN_SOURCE = "the NVIDIA device plugin's NVML Xid events"
# the application Xids the plugin's health check skips unless told otherwise (internal/rm/health.go v0.18.0 to
# v0.20.0, getDisabledHealthCheckXids): the GPU stays healthy for the plugin
SKIPPED_BY_DEFAULT = frozenset({13, 31, 43, 45, 68, 109})
_LINE = guarded_re(
    r"\b(?:Xid|uuid)CriticalError: Xid=(?P<xid>\d{1,4})"
    r"(?: on (?:Device|GPU)=?(?P<device>[\w:/.-]{1,100}?))?(?:,|;)\s{0,3}"
    r"(?:uuid=[\w:/.-]{1,100},\s{0,3})?"
    r"(?P<outcome>marking device as unhealthy|the device will go unhealthy|all devices will go unhealthy"
    r"|marking all devices as unhealthy)",
    re.I, may=has_folded("criticalerror: xid="))
# go-nvml's EventData printed with %v: the Device (a struct of one pointer), EventType 8, the Xid, the instance ids
_NO_UUID = guarded_re(
    r"Failed to determine uuid for event \{(?:\{[^{}\s]{0,40}\}|[^{}\s]{0,40}) 8 (?P<xid>\d{1,4}) \d{1,10} \d{1,10}\}: "
    r"[^;]{0,100}; Marking all devices as unhealthy", may=has_folded("marking all devices as unhealthy"))


def plugin_xids(lines: list[str], source: str) -> tuple[dict[str, KernelLog], list[str]]:
    """The device plugin's Xid lines among ``lines``: ``({"kernel_log": log}, the lines)``, or ``({}, [])``."""
    events: list[KernelEvent] = []
    named: list[str] = []
    for number, line in enumerate(lines, 1):
        if len(events) >= MAX_EVENTS:
            break
        match = _LINE.search(line[:1000]) or _NO_UUID.search(line[:1000])
        if match is None:
            continue
        code = int(match["xid"])
        if code == 0:
            continue
        text = line.strip()[:500]
        device = match.groupdict().get("device")
        events.append(KernelEvent(kind="xid", message=text, line=text, line_number=number, xid=code,
                                  detail=f"device {device}" if device else "all devices"))
        named.append(line)
    if not events:
        return {}, []
    # one group per line, so that the events count where this log is joined with a kernel log's groups
    log = KernelLog(source=f"{source} ({DEVICE_PLUGIN_SOURCE})", format=DEVICE_PLUGIN, lines_scanned=len(lines),
                    events=tuple(events), groups=tuple(EventGroup("xid", e.line, 1, e, e, (e,)) for e in events))
    return {"kernel_log": log}, named
