"""What the web layer knows, shared between the monitor thread (writer) and the web app (reader).

The monitor is reused as it is; ``serve`` only wraps its parts:

- ``TeeSource`` wraps the source: every batch of events also lands in ``LiveState`` (latest readings,
  a short in-memory window for the charts, Xid counts) and is pushed to the event-stream clients;
- ``StateNotifier`` is one more notifier on the monitor's ``Dispatcher`` (which already drops duplicate
  alerts): it keeps the active alerts and the recent alert feed;
- ``ServeChecks`` is the monitor's ``CheckRunner`` with "run now" added; the report of every full check
  (periodic or requested) is kept for the findings view.

Readers get copies taken under one lock; the monitor thread never waits on a web client: pushing an
update is one ``call_soon_threadsafe`` per batch, and a client that cannot keep up is dropped. A stream's
slot (``MAX_STREAMS`` in all, ``MAX_STREAMS_PER_CLIENT`` per client address) is held until its response
really ends, not merely until the fan-out drops it: a client that never reads holds its slot until the
server's write deadline cuts its connection (web/guard.py), so it cannot open more in its place.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.monitor.daemon import CheckRunner
from gpuhealth.monitor.notify import to_json
from gpuhealth.monitor.rules import Alert
from gpuhealth.monitor.sample import HELD_MIB, Event, GpuLost, Sample, XidEvent
from gpuhealth.monitor.usage import sample_state

# The readings the page charts, and what the live window keeps per GPU.
CHART_METRICS: tuple[str, ...] = ("temperature_c", "utilization_gpu_pct", "memory_used_mib", "power_w")
# What a sample shows on a GPU card and in /api/v1/gpus (None fields are left out).
CARD_FIELDS: tuple[str, ...] = (
    "temperature_c", "memory_temperature_c", "power_w", "power_limit_w", "utilization_gpu_pct",
    "utilization_memory_pct", "memory_used_mib", "memory_total_mib", "sm_clock_mhz", "fan_pct",
    "ecc_volatile_corrected", "ecc_volatile_uncorrected", "retired_pages_pending", "remapped_rows_pending",
    "pcie_gen", "pcie_width", "process_count", "process_memory_mib", "temperature_slowdown_c")
SEVERITY_RANK = {"info": 1, "warning": 2, "critical": 3}
VERDICT_OF = {0: "HEALTHY", 1: "HEALTHY", 2: "DEGRADED", 3: "BROKEN"}
# A GPU card's status, worst last; "lost" outranks "critical" (no readings at all).
STATUS_RANK = {"ok": 0, "warning": 1, "critical": 2, "lost": 3}
MAX_PROCESSES = 50  # per GPU card; a busy MPS host may run hundreds
MAX_STREAMS = 100  # event-stream clients at once; more get 503
MAX_STREAMS_PER_CLIENT = 10  # per client address (a browser tab holds one)
STREAM_QUEUE = 64  # frames buffered per client; a client this far behind is dropped (it reconnects)


class TooManyStreams(RuntimeError):
    pass


@dataclass
class GpuView:
    gpu: int
    uuid: str = ""
    pci_bus_id: str = ""
    model: str = ""  # the `model` label: fixed at the first sample so /metrics series never change
    check_model: str = ""  # the name the full check gave, shown when the samples carry none
    sample: Sample | None = None  # the latest
    seen_at: float = 0.0  # the latest sample's time
    lost: str | None = None  # why, when the latest event was a GpuLost
    lost_at: float = 0.0
    # Seconds busy, idle and idle with the GPU held (part of idle) since this process started, each
    # interval counted with the state of the sample that began it: /metrics counters.
    usage_s: dict[str, float] = field(default_factory=lambda: {"busy": 0.0, "idle": 0.0, "held_idle": 0.0})
    idle_since: float | None = None  # the first of the current run of idle samples
    usage_known: bool = False  # a utilisation reading came: the usage counters exist from now on


def _sample_json(sample: Sample) -> dict[str, Any]:
    out: dict[str, Any] = {"t": sample.t}
    for name in CARD_FIELDS:
        value = getattr(sample, name)
        if value is not None:
            out[name] = value
    return out


_MNEMONIC = lazy_re(r" ?\([A-Z][A-Z0-9_]{3,}\)")  # "(ROBUST_CHANNEL_GPU_ECC_DBE)": the driver's name
REASON_CHARS = 140


def short_reason(text: str) -> str:
    """A card's one-line reason: the finding's or alert's first clause, without the driver's internal
    names (the full text stays in the findings and alerts lists)."""
    text = _MNEMONIC.sub("", text).split(" - ", 1)[0].strip()
    if len(text) > REASON_CHARS and "; " in text:
        text = text.split("; ", 1)[0]
    if len(text) > REASON_CHARS:
        text = text[:REASON_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return text


def proc_comm(pid: int) -> str | None:
    """A process's command name from /proc (None when it ended or is not ours to read)."""
    try:
        with open(f"/proc/{int(pid)}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read(64).strip() or None
    except OSError:
        return None


def sse_frame(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class LiveState:
    def __init__(self, interval: float = 1.0, clock: Callable[[], float] = time.time, window_s: float = 900.0,
                 feed_size: int = 200, stale_after: float | None = None, source: str = "",
                 process_names: Callable[[int], str | None] | None = None, held_mib: float = HELD_MIB) -> None:
        self.interval = interval
        self.held_mib = held_mib  # the monitor's `[monitor] held_mib`: held-idle as the rules and `usage` count it
        # pid -> command name, only where the pids are this host's (NVML sampled live, not a replay)
        self.process_names = process_names if process_names is not None else (
            proc_comm if source == "nvml" else None)
        self.clock = clock
        self.window_s = window_s
        # A GPU without a sample for this long counts as gone: its readings leave /metrics.
        self.stale_after = stale_after if stale_after is not None else max(10.0, 5 * interval)
        self.source = source
        self.started_at = clock()
        self._lock = threading.Lock()
        self._gpus: dict[int, GpuView] = {}
        self._window: dict[int, deque[tuple[float, ...]]] = {}
        self._xids: Counter[tuple[int, int]] = Counter()
        # (GPU, Xid) that NVML's xid rule paged in this boot before this gpuhealth started (monitor/boots.py)
        self.xids_paged: set[tuple[int, int]] = set()
        self._active: dict[tuple[str, int | None, str], Alert] = {}
        self._feed: deque[Alert] = deque(maxlen=feed_size)
        self._names: dict[str, str] = {}  # uuid or PCI address -> model name, from the full check
        self.last_sample_t: float | None = None
        # reboots of the host gpuhealth saw in the last week (monitor/boots.py); None without a history or boot id
        self.remediations: int | None = None
        self.gpu_resets: dict[int, int] = {}  # per GPU, the resets in the remediation window (monitor/boots.py)
        # acknowledgements (monitor/acks.py) as the monitor last read them; ``acks_changed`` tells it to read again
        self.acks: list[Any] = []
        self.acks_changed: Callable[[], None] = lambda: None
        self.monitor_running = False
        self.monitor_note = "starting"
        # A replayed trace that ran out: its GPUs stop sending because the file ended, not because they were
        # lost. Cards keep their last readings and the banner says "replay finished" (never "0 of 8 answering").
        self.replay_finished = False
        # the full check
        self.report: Any = None
        self.report_at: float | None = None
        self.check_running = False
        self.check_error: str | None = None
        self.check_generation = 0  # +1 per finished run (report or error)
        self._check_done = threading.Condition(self._lock)
        # event-stream clients
        self._loop: asyncio.AbstractEventLoop | None = None
        self._streams: set[asyncio.Queue[str | None]] = set()  # fed by the fan-out
        self._slots: Counter[str] = Counter()  # open streams per client address, until each response ends

    # ------------------------------------------------------------------ writing (monitor thread)

    def record(self, events: Sequence[Event]) -> None:
        if not events:
            return
        with self._lock:
            for event in sorted(events, key=lambda e: e.t):
                view = self._gpus.get(event.gpu)
                if view is None:
                    view = self._gpus[event.gpu] = GpuView(event.gpu)
                if isinstance(event, Sample):
                    self._sample(view, event)
                elif isinstance(event, GpuLost):
                    view.lost, view.lost_at = event.reason, event.t
                elif isinstance(event, XidEvent):
                    self._xids[(event.gpu, event.xid)] += 1
            if not self._streams:  # nobody listening: no payload to build
                return
            now = self.clock()
            payload = {"t": self.last_sample_t,
                       "gpus": [self._gpu_json(v, now) for _, v in sorted(self._gpus.items())]}
        self.publish("samples", {"t": payload["t"], "gpus": self._name_processes(payload["gpus"])})

    def _sample(self, view: GpuView, sample: Sample) -> None:
        self._count_usage(view, sample)
        if view.lost is not None and sample.t >= view.lost_at:
            view.lost = None
        first = view.sample is None
        view.sample, view.seen_at = sample, sample.t
        if first:  # identity labels are set once: a label that changes makes new Prometheus series
            view.uuid = sample.uuid or ""
            view.pci_bus_id = sample.pci_address or ""
            view.model = sample.name or self._names.get(view.uuid) or self._names.get(view.pci_bus_id) or ""
        window = self._window.setdefault(sample.gpu, deque())
        window.append((sample.t, *(getattr(sample, m) for m in CHART_METRICS)))
        while window and window[0][0] < sample.t - self.window_s:
            window.popleft()
        if self.last_sample_t is None or sample.t > self.last_sample_t:
            self.last_sample_t = sample.t

    def _count_usage(self, view: GpuView, sample: Sample) -> None:
        state = sample_state(sample, self.held_mib)
        previous = view.sample
        if previous is not None and sample.t > previous.t:
            before = sample_state(previous, self.held_mib)
            if before is not None:
                # a gap longer than a stale GPU's is not counted: nobody saw what the GPU did
                dt = min(sample.t - previous.t, self.stale_after)
                view.usage_s["busy" if before == "busy" else "idle"] += dt
                if before == "held_idle":
                    view.usage_s["held_idle"] += dt
        view.usage_known = view.usage_known or state is not None
        if state in ("idle", "held_idle"):
            view.idle_since = view.idle_since if view.idle_since is not None else sample.t
        elif state == "busy":
            view.idle_since = None

    def alert(self, alert: Alert) -> None:
        with self._lock:
            if alert.state == "firing":
                self._active[alert.identity] = alert
            else:
                self._active.pop(alert.identity, None)
            self._feed.appendleft(alert)
        self.publish("alert", to_json(alert))
        self.publish("status", self.status())

    def check_started(self) -> None:
        with self._lock:
            self.check_running = True
        self.publish("status", self.status())

    def check_finished(self, report: Any = None, error: str | None = None) -> None:
        with self._lock:
            self.check_running = False
            self.check_generation += 1
            if report is not None:
                self.report, self.report_at, self.check_error = report, self.clock(), None
                for gpu in report.snapshot.gpus:
                    if gpu.name:
                        for key in (gpu.uuid, gpu.pci_address):
                            if key:
                                self._names[key] = gpu.name
                for view in self._gpus.values():  # for the page only: the label stays as first sampled
                    view.check_model = self._names.get(view.uuid) or self._names.get(view.pci_bus_id) or ""
            else:
                self.check_error = error
            self._check_done.notify_all()
        self.publish("findings", self.findings())
        self.publish("status", self.status())

    def wait_check(self, generation: int, timeout: float) -> bool:
        """Block (a worker thread, not the event loop) until a run after ``generation`` finished."""
        with self._check_done:
            return self._check_done.wait_for(lambda: self.check_generation > generation, timeout)

    def set_acks(self, acks: list[Any]) -> None:
        with self._lock:
            self.acks = list(acks)

    def _ack_of(self, alert: Alert, now: float) -> Any:
        """The acknowledgement holding ``alert`` back, if any (called under the lock)."""
        if not self.acks:
            return None
        from gpuhealth.monitor.acks import covers

        return next((ack for ack in self.acks if ack.active(now) and covers(ack, alert)), None)

    def set_xids_paged(self, xids: set[tuple[int, int]]) -> None:
        with self._lock:
            self.xids_paged = set(xids)

    def set_remediations(self, count: int | None) -> None:
        with self._lock:
            self.remediations = count

    def set_gpu_resets(self, resets: dict[int, int]) -> None:
        with self._lock:
            self.gpu_resets = dict(resets)

    def set_monitor(self, running: bool, note: str, replay_finished: bool = False) -> None:
        with self._lock:
            self.monitor_running, self.monitor_note = running, note
            self.replay_finished = replay_finished
        self.publish("status", self.status())

    # ------------------------------------------------------------------ reading

    def _present(self, view: GpuView, now: float) -> bool:
        return view.sample is not None and view.lost is None and now - view.seen_at <= self.stale_after

    def _silent(self) -> str:
        """The state of a GPU that sends no more samples and was not lost: "ended" once a replay ran out (the
        trace ended, the GPU did not go), else "stale"."""
        return "ended" if self.replay_finished else "stale"

    def _gpu_json(self, view: GpuView, now: float | None = None) -> dict[str, Any]:
        now = self.clock() if now is None else now
        present = self._present(view, now)
        state = "ok" if present else ("lost" if view.lost is not None else self._silent())
        out: dict[str, Any] = {"gpu": view.gpu, "uuid": view.uuid, "pci_bus_id": view.pci_bus_id,
                               "model": view.model or view.check_model, "state": state,
                               "last_seen": view.seen_at or None}
        if view.lost is not None:
            out["lost_reason"] = view.lost
        out.update(self._trouble(view, state))
        if (present or state == "ended") and view.sample is not None:  # a finished replay keeps its last readings
            out["readings"] = _sample_json(view.sample)
            if view.sample.processes is not None:
                out["processes"] = self._processes(view.sample)
            if view.idle_since is not None:
                out["idle_for_s"] = round(view.sample.t - view.idle_since, 1)
        xids = {str(x): n for (g, x), n in sorted(self._xids.items()) if g == view.gpu}
        if xids:
            out["xids"] = xids
        return out

    def _trouble(self, view: GpuView, state: str) -> dict[str, Any]:
        """The card's status (ok, warning, critical, lost) and its reasons, worst first: the GPU's own
        firing alerts and the last full check's findings about it (its ``check:`` alerts repeat those)."""
        reasons: list[tuple[int, str, str]] = []  # (rank, severity, sentence)
        if state not in ("ok", "ended"):
            why = view.lost or f"no sample for {self.stale_after:g} s"
            reasons.append((STATUS_RANK["lost"], "lost", f"Not answering: {why}"))
        for alert in self._active.values():
            if alert.gpu == view.gpu and not alert.rule.startswith("check:") and alert.severity in STATUS_RANK:
                reasons.append((STATUS_RANK[alert.severity], alert.severity, alert.message))
        if self.report is not None:
            for finding in self.report.findings:
                subject, severity = finding.subject, finding.severity.value
                if severity not in STATUS_RANK:  # info findings do not colour a card
                    continue
                if subject.gpu_index == view.gpu or (view.pci_bus_id and subject.pci_address == view.pci_bus_id):
                    reasons.append((STATUS_RANK[severity], severity, finding.message))
        reasons.sort(key=lambda r: -r[0])
        unique = list(dict.fromkeys((sev, short_reason(text)) for _, sev, text in reasons))
        status = unique[0][0] if unique else "ok"
        return {"status": status, "reason": unique[0][1] if unique else "",
                "reasons": [{"severity": sev, "text": text} for sev, text in unique]}

    def _processes(self, sample: Sample) -> list[dict[str, Any]]:
        """The sample's largest processes; their names are filled in later, outside the lock."""
        rows = sorted(sample.processes or (), key=lambda p: -(p[1] or 0))[:MAX_PROCESSES]
        return [{"pid": pid, "name": None, "memory_mib": mib} for pid, mib in rows]

    def _name_processes(self, gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Process names from /proc, read with the lock released: a slow /proc read (a process in exit, a
        loaded host) must not hold up the monitor thread or every other request."""
        if self.process_names is not None:
            for gpu in gpus:
                for process in gpu.get("processes", ()):
                    process["name"] = self.process_names(process["pid"])
        return gpus

    def gpus(self) -> list[dict[str, Any]]:
        """Every GPU's card, process names included: call it off the event loop (it reads /proc)."""
        now = self.clock()
        with self._lock:
            cards = [self._gpu_json(v, now) for _, v in sorted(self._gpus.items())]
        return self._name_processes(cards)

    def gpu_indices(self) -> list[int]:
        with self._lock:
            return sorted(self._gpus)

    def metrics_view(self) -> dict[str, Any]:
        """Everything /metrics needs, copied under the lock: present GPUs with their latest sample."""
        now = self.clock()
        with self._lock:
            views = sorted(self._gpus.values(), key=lambda v: v.gpu)
            return {
                "present": [(v, v.sample) for v in views if self._present(v, now)],
                "identity": {v.gpu: v for v in views},
                "xids": dict(self._xids),
                "xids_paged": sorted(self.xids_paged),
                # only GPUs that ever gave a utilisation reading: no 0 standing in for "unknown"
                "usage": {v.gpu: dict(v.usage_s) for v in views if v.usage_known},
                "active": list(self._active.values()),
                "last_sample_t": self.last_sample_t,
                "report": self.report,
                "report_at": self.report_at,
                "remediations": self.remediations,
                "gpu_resets": dict(self.gpu_resets),
                "acknowledged": [a for a in self._active.values() if self._ack_of(a, now) is not None],
            }

    def window(self, gpu: int, metric: str, since: float) -> tuple[list[float], list[float]] | None:
        """The in-memory points of one chart metric, or None when the window does not cover ``since``."""
        if metric not in CHART_METRICS or since < self.started_at:
            return None
        column = 1 + CHART_METRICS.index(metric)
        with self._lock:
            rows = [r for r in self._window.get(gpu, ()) if r[0] >= since and r[column] is not None]
        return [r[0] for r in rows], [r[column] for r in rows]

    def alerts(self) -> dict[str, Any]:
        now = self.clock()
        with self._lock:
            active = sorted(self._active.values(), key=lambda a: (-SEVERITY_RANK.get(a.severity, 0), a.t))
            acked = {a.identity: ack.as_json() for a in active if (ack := self._ack_of(a, now)) is not None}
            feed = list(self._feed)
            acks = [ack.as_json() for ack in self.acks]
        # an acknowledged alert is listed as it is, with its acknowledgement beside it: never hidden
        return {"active": [{**to_json(a), "acknowledged": acked.get(a.identity)} for a in active],
                "recent": [to_json(a) for a in feed], "acknowledgements": acks}

    def findings(self) -> dict[str, Any]:
        with self._lock:
            report, at, running, error = self.report, self.report_at, self.check_running, self.check_error
        out: dict[str, Any] = {"checked_at": at, "running": running, "error": error, "verdict": None,
                               "counts": None, "findings": [], "skipped": []}
        if report is None:
            return out
        from gpuhealth.model import to_jsonable
        from gpuhealth.report.common import fixes_for_host
        from gpuhealth.report.text import split_message

        out["verdict"] = report.verdict
        out["counts"] = {s: sum(1 for f in report.findings if f.severity.value == s)
                         for s in ("critical", "warning", "info")}
        findings = []
        for finding in report.findings:
            item = to_jsonable(finding)
            item["fixes"] = [to_jsonable(f) for f in fixes_for_host(finding, report.snapshot)]
            item["subject_text"] = str(finding.subject)
            # the message as the text report lays it out: a short headline, the rest, and its count, times and
            # next action apart (the message itself stays whole in "message")
            headline, rest, facts = split_message(finding.message)
            item["layout"] = {"headline": headline, "rest": rest, "facts": [[k, v] for k, v in facts]}
            findings.append(item)
        out["findings"] = findings
        out["skipped"] = [to_jsonable(s) for s in report.skipped]
        out["checks_run"] = report.checks_run
        return out

    def status(self) -> dict[str, Any]:
        now = self.clock()
        with self._lock:
            views = list(self._gpus.values())
            present = sum(1 for v in views if self._present(v, now))
            lost = sum(1 for v in views if v.lost is not None)
            active = list(self._active.values())
            report, at = self.report, self.report_at
            running, error = self.check_running, self.check_error
            monitor_running, note, last = self.monitor_running, self.monitor_note, self.last_sample_t
            resets = dict(self.gpu_resets)
            reboots = None if self.remediations is None else self.remediations - sum(resets.values())
            acknowledged = sum(1 for a in active if self._ack_of(a, now) is not None)
            finished = self.replay_finished
        rank = max((SEVERITY_RANK.get(a.severity, 0) for a in active), default=0)
        if report is not None:
            rank = max([rank, *(SEVERITY_RANK[f.severity.value] for f in report.findings)])
        if lost or (views and present < len(views) and not finished):
            rank = max(rank, 2)
        if not views and report is None:
            verdict = "NO DATA"
        elif report is None and rank < 2:
            # Readings without a full check say nothing about the driver, the kernel log or the install:
            # the page must not call the box healthy on them alone.
            verdict = "UNCHECKED"
        else:
            verdict = VERDICT_OF[rank]
        counts = Counter(a.severity for a in active)
        if finished:  # nothing answers after the trace's end, by design: say that, not "0 of 8 answering"
            parts = [f"replay finished: {len(views)} GPU(s) in the trace" + (f", {lost} lost" if lost else "")]
        else:
            parts = [f"{present} of {len(views)} GPU(s) answering" if views else "no GPU sampled yet"]
        parts.append(f"{len(active)} active alert(s)" if active else "no active alerts")
        if acknowledged:
            parts[-1] += f" ({acknowledged} acknowledged)"
        if report is not None:
            parts.append(f"last check: {report.verdict.lower()}")
        elif error:
            parts.append(error)
        else:
            parts.append("full check running" if running else "no full check yet")
        if reboots or resets:
            parts.append(f"{reboots} reboot(s)" + (f" and {sum(resets.values())} GPU reset(s)" if resets else "")
                         + " in the last 7 days")
        return {
            "verdict": verdict, "summary": "; ".join(parts), "time": now,
            "gpus": {"seen": len(views), "answering": present, "lost": lost},
            "alerts": {"active": len(active), **{s: counts.get(s, 0) for s in ("critical", "warning", "info")},
                       "acknowledged": acknowledged},
            "check": {"verdict": report.verdict if report is not None else None, "checked_at": at,
                      "running": running, "error": error},
            "monitor": {"running": monitor_running, "note": note, "replay_finished": finished,
                        "source": self.source, "last_sample_t": last, "interval_s": self.interval},
            # reboots of the host and GPU resets (per GPU) in the last 7 days (monitor/boots.py); reboots null
            # without a history or boot id
            "remediations": {"reboots": reboots, "window_days": 7,
                             **({"gpu_resets": {str(gpu): n for gpu, n in sorted(resets.items())}} if resets else {})},
        }

    # ------------------------------------------------------------------ event streams

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop

    def subscribe(self, client: str = "") -> asyncio.Queue[str | None]:
        """Called on the event loop; TooManyStreams beyond ``MAX_STREAMS``, or ``MAX_STREAMS_PER_CLIENT``
        for ``client`` (its address). Each subscription must be given back with ``unsubscribe``."""
        if self.stream_count >= MAX_STREAMS:
            raise TooManyStreams(f"{MAX_STREAMS} event streams open already")
        if self._slots[client] >= MAX_STREAMS_PER_CLIENT:
            raise TooManyStreams(f"{MAX_STREAMS_PER_CLIENT} event streams open already from this address")
        queue: asyncio.Queue[str | None] = asyncio.Queue(STREAM_QUEUE)
        self._streams.add(queue)
        self._slots[client] += 1
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str | None], client: str = "") -> None:
        """The stream's response ended (or never began): its slot is free again."""
        self._streams.discard(queue)
        self._slots[client] -= 1
        if self._slots[client] <= 0:
            del self._slots[client]

    @property
    def stream_count(self) -> int:
        """Event streams open (dropped from the fan-out or not) until their responses end."""
        return sum(self._slots.values())

    def publish(self, event: str, data: Any) -> None:
        """From any thread: serialise once, hand to the loop; never blocks the caller."""
        loop = self._loop
        if loop is None or not self._streams or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._fanout, sse_frame(event, data))
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _fanout(self, frame: str | None) -> None:
        for queue in list(self._streams):
            try:
                queue.put_nowait(frame)
            except asyncio.QueueFull:  # too slow: drop the client; it reconnects and gets a fresh view
                self._streams.discard(queue)
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(None)

    def close_streams(self) -> None:
        """End every event stream (shutdown); safe from a signal handler or another thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._fanout, None)
            except RuntimeError:
                pass


# ---------------------------------------------------------------------- wrappers around the monitor


class TeeSource:
    """The monitor's source, unchanged, with each batch also recorded into the live state."""

    def __init__(self, source: Any, state: LiveState) -> None:
        self.inner = source
        self.state = state

    def poll(self) -> list[Event]:
        events = self.inner.poll()
        self.state.record(events)
        return events

    @property
    def exhausted(self) -> bool:
        return bool(getattr(self.inner, "exhausted", False))

    @property
    def paced(self) -> bool:
        """The inner source's: without it, `serve --replay-speed 0` was paced by --interval."""
        return bool(getattr(self.inner, "paced", True))

    def close(self) -> None:
        self.inner.close()


class StateNotifier:
    """A notifier (the Dispatcher's interface) that keeps alerts for the page and /metrics."""

    # Every alert as it is, folded or not (monitor/fold.py): /metrics exports them all and Alertmanager's
    # inhibit_rules keep a fault to one page; the dashboard lists each.
    every_alert = True

    def __init__(self, state: LiveState) -> None:
        self.state = state

    def send(self, alert: Alert) -> None:
        self.state.alert(alert)

    def close(self) -> None:
        pass


class ServeChecks(CheckRunner):
    """The monitor's periodic full check, plus ``run_now`` for the page's button and POST /api/v1/check.

    With ``every_s`` 0 (a replayed trace) only requested runs happen. Findings still become
    ``check:<code>`` alerts through the base class while the monitor loop runs.
    """

    def __init__(self, every_s: float, run: Callable[[], Any], state: LiveState,
                 log: Callable[[str], None] | None = None) -> None:
        if log is None:
            super().__init__(every_s, self._observed)
        else:
            super().__init__(every_s, self._observed, log)
        self._inner = run
        self._state = state
        self._start_lock = threading.Lock()

    def _observed(self) -> Any:
        self._state.check_started()
        try:
            report = self._inner()
        except Exception as exc:
            self._state.check_finished(error=f"full check failed: {type(exc).__name__}: {exc}")
            raise
        self._state.check_finished(report)
        return report

    def maybe_start(self, now: float) -> None:
        with self._start_lock:
            super().maybe_start(now)

    def run_now(self) -> bool:
        """Start a run unless one is running; True when this call started it."""
        with self._start_lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            if self.every_s > 0:
                self._due = time.time() + self.every_s
            self._thread = threading.Thread(target=self._work, name="gpuhealth-check-now", daemon=True)
            self._thread.start()
            return True
