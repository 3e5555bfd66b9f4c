"""The monitor loop: poll the source, record, store, evaluate rules, notify; run the full check
periodically in a thread and turn its findings into alerts too. Everything slow or fallible (store,
webhook, full check) is isolated so that sampling and alerting go on."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuhealth.inert import one_line

from .fold import finding_about
from .notify import Dispatcher
from .rules import Alert, RuleSet, took
from .sample import Event, Sample
from .sources import NvmlSource, ReplaySource, SmiSource, SourceError, TraceWriter
from .store import Store, StoreError

Log = Callable[[str], None]


def _stderr(text: str) -> None:
    print(f"gpuhealth monitor: {one_line(text)}", file=sys.stderr, flush=True)


def run_full_check(expect: Any = None) -> Any:
    """`gpuhealth check` on this host, in-process: the snapshot's findings as a Report, against ``expect``
    (the [check] section of the monitor's configuration; None: the configuration files')."""
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.collect import collect
    from gpuhealth.config import load_expectations
    from gpuhealth.host import LocalHost

    expect = load_expectations(None) if expect is None else expect
    # No PyTorch probe: computing on every GPU every few minutes would disturb running jobs.
    return run_checks(collect(LocalHost(), frameworks=False, ib_exclude=expect.ib_exclude), expect)


class CheckRunner:
    """Runs the full check every ``every_s`` in a daemon thread; findings of warning or worse become
    alerts named ``check:<code>`` that resolve when a later run no longer finds them."""

    def __init__(self, every_s: float, run: Callable[[], Any] = run_full_check, log: Log = _stderr,
                 xidlog: Any = None) -> None:
        self.every_s = every_s
        self.xidlog = xidlog  # monitor/xidlog.py: the kernel log's new Xids, for the correlation rules
        self.xids: list[tuple[float, int, int, str]] = []  # the last check's, until the monitor takes them
        self._run = run
        self._log = log
        self._due = 0.0  # the first check runs at start: the operator sees the host's state at once
        self._thread: threading.Thread | None = None
        self._result: Any = None
        self._error: str | None = None
        self._open: dict[tuple[str, int | None, str], Alert] = {}
        self.runs = 0

    def maybe_start(self, now: float) -> None:
        if self.every_s <= 0 or now < self._due or (self._thread is not None and self._thread.is_alive()):
            return
        self._due = now + self.every_s
        self._thread = threading.Thread(target=self._work, name="gpuhealth-check", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._result = self._run()
        except Exception as exc:  # a bug in a probe must not take the monitor down
            self._error = f"full check failed: {type(exc).__name__}: {exc}"

    @staticmethod
    def _cleared(alert: Alert, now: float) -> str:
        where = f" on GPU {alert.gpu}" if alert.gpu is not None else ""
        return (f"`gpuhealth check` no longer finds {alert.rule.removeprefix('check:')}{where} "
                f"after {took(now - alert.t)}")

    def reboot(self) -> None:
        """The host rebooted (a replay): the findings of the boot before are not open any more."""
        self._open = {}

    def poll(self, now: float) -> list[Alert]:
        if self._error:
            self._log(self._error)
            self._error = None
        if self._result is None:
            return []
        report, self._result = self._result, None
        self.runs += 1
        if self.xidlog is not None:
            self.xids += self.xidlog.take(report.snapshot)
        return self._alerts(report, now)

    def take_xids(self) -> list[tuple[float, int, int, str]]:
        xids, self.xids = self.xids, []
        return xids

    def _alerts(self, report: Any, now: float) -> list[Alert]:
        found: dict[tuple[str, int | None, str], Alert] = {}
        for finding in report.findings:
            if finding.severity.value == "info":
                continue
            alert = Alert(f"check:{finding.code}", finding.subject.gpu_index, finding.severity.value, "firing",
                          finding.message, now, finding.key, about=finding_about(finding), action=finding.action,
                          impact=finding.impact)
            # Findings come most severe first; several of one code on one GPU (Xid 48 and Xid 94 are both
            # GH301) make one alert, at the worst severity, standing on all of them (fold.py).
            first = found.setdefault(alert.identity, alert)
            if first is not alert and alert.about:
                found[alert.identity] = Alert(first.rule, first.gpu, first.severity, first.state, first.message,
                                              first.t, first.key, about=tuple(dict.fromkeys(first.about + alert.about)),
                                              action=first.action, impact=first.impact)
        # An alert still open keeps the time it first fired: its resolution says how long it lasted.
        found = {k: (a if k not in self._open else Alert(a.rule, a.gpu, a.severity, a.state, a.message,
                                                         self._open[k].t, a.key, about=a.about, action=a.action,
                                                         impact=a.impact))
                 for k, a in found.items()}
        resolved = [Alert(a.rule, a.gpu, a.severity, "resolved", self._cleared(a, now), now, a.key, action=a.action,
                          impact=a.impact)
                    for identity, a in self._open.items() if identity not in found]
        self._open = found
        return list(found.values()) + resolved


class Monitor:
    def __init__(self, source: Any, rules: RuleSet, dispatcher: Dispatcher, store: Store | None = None,
                 recorder: TraceWriter | None = None, interval: float = 1.0, checks: CheckRunner | None = None,
                 clock: Callable[[], float] = time.time, log: Log = _stderr, correlator: Any = None,
                 ports: Any = None) -> None:
        self.source, self.rules, self.dispatcher = source, rules, dispatcher
        self.correlator = correlator  # monitor/correlate.py: the correlation table, run over the events
        self.ports = ports  # monitor/ports.py: the InfiniBand ports, read once a minute for the table
        self.store, self.recorder, self.checks = store, recorder, checks
        self.interval = interval
        self.clock = clock
        self._log = log
        self._last_store_error: tuple[str, float] | None = None
        self.steps = 0
        self.latest: dict[int, Event] = {}  # per GPU, for `watch`
        # GPUs a drill injected a fault into (monitor/inject.py): their alerts say DRILL, and their injected
        # samples stay out of the history
        self.drilled: set[int] = set()

    def step(self) -> list[Event]:
        events = self.source.poll()
        now = self.clock()
        self._follow_boot(now)
        for event in events:
            self.latest[event.gpu] = event
        if self.recorder is not None and events:
            self.recorder.write(events)
        real = events
        if any(getattr(e, "injected", None) is True for e in events):
            from .inject import drill_gpus

            self.drilled |= drill_gpus(events)
            real = [e for e in events if e.injected is not True]
        self._store([e for e in real if isinstance(e, Sample)], now)
        if self.dispatcher.memory is not None:
            self.dispatcher.memory.note_resets(real)  # before the alerts: a fault back after a reset escalates
        alerts = self.rules.feed(events)
        if self.correlator is not None:
            self.correlator.feed(real)  # it records its hits in the history: a drill's are not real
            read = self.ports.poll(now) if self.ports is not None else None
            if read:
                self.correlator.feed_ports(now, read)
            alerts += self.correlator.step()
        if self.drilled:
            from .inject import mark

            alerts = mark(alerts, self.drilled)
        if self.checks is not None:
            self.checks.maybe_start(now)
            alerts += self.checks.poll(now)
            xids = self.checks.take_xids()  # taken even without a correlator: they must not pile up
            if self.correlator is not None and xids:
                from .xidlog import TOLERANCE_S

                self.correlator.feed_log(xids, TOLERANCE_S)  # evaluated at its next step
        self.dispatcher.dispatch(alerts)
        self.dispatcher.recheck(now)
        self.steps += 1
        return events

    def _follow_boot(self, now: float) -> None:
        """A replay crossing a ``boot`` record: the traced host rebooted, so the rules, the open alerts and the full
        check's findings start over, as they do when gpuhealth starts with a new boot (boots.py)."""
        memory = self.dispatcher.memory
        if memory is None:
            return
        boot = getattr(getattr(self.source, "inner", self.source), "boot_id", None)  # serve's TeeSource wraps it
        if boot is None or boot == memory.boot:
            return
        if memory.set_boot(boot, now):
            self.rules.restart()
            self.dispatcher.reboot()
            if self.correlator is not None:
                self.correlator.reboot()
            if self.checks is not None:
                self.checks.reboot()

    def _store(self, samples: list[Sample], now: float) -> None:
        if self.store is None or not samples:
            return
        try:
            self.store.write(samples)
        except StoreError as exc:
            # Said once a minute, not every second: the message is the same, and alerts keep going out.
            text = str(exc)
            last = self._last_store_error
            if last is None or last[0] != text or now - last[1] >= 60:
                self._log(text)
                self._last_store_error = (text, now)

    def run(self, stop: threading.Event, max_steps: int | None = None) -> None:
        """Step every ``interval`` until ``stop`` is set, ``max_steps`` ran or a replay ran out."""
        next_at = time.monotonic()
        while not stop.is_set():
            self.step()
            if max_steps is not None and self.steps >= max_steps:
                break
            if getattr(self.source, "exhausted", False):
                break
            if not getattr(self.source, "paced", True):  # a replay at speed 0: as fast as possible
                next_at = time.monotonic()
                continue
            next_at += self.interval
            # Behind schedule (a slow step, a suspended machine): skip ahead rather than burst.
            next_at = max(next_at, time.monotonic())
            stop.wait(next_at - time.monotonic())

    def close(self) -> None:
        """Flush everything: the source stops, the store compacts, notifiers deliver what is queued."""
        self.source.close()
        if self.recorder is not None:
            self.recorder.close()
        if self.store is not None:
            try:
                self.store.flush()
            except StoreError as exc:
                self._log(str(exc))
            self.store.close()
        if self.dispatcher.capture is not None:
            self.dispatcher.capture.wait(60.0)  # a bundle half written is not left behind by a clean stop
        self.dispatcher.close()


def open_source(spec: str, interval: float, nvml_timeout: float = 2.0, replay_speed: float = 1.0,
                log: Log = _stderr) -> Any:
    """``nvml``, ``smi``, ``replay:FILE`` or ``auto`` (NVML, else nvidia-smi when NVML cannot load)."""
    if spec.startswith("replay:"):
        return ReplaySource(Path(spec.removeprefix("replay:")), speed=replay_speed, log=log)
    if spec == "smi":
        return SmiSource(interval, log=log)
    if spec not in ("nvml", "auto"):
        raise ValueError(f"unknown source {spec!r}: nvml, smi, replay:FILE or auto")
    source = NvmlSource(timeout=nvml_timeout, log=log)
    try:
        if source.connect() or spec == "nvml":
            return source
    except SourceError as exc:
        if spec == "nvml":
            raise
        source.last_error = str(exc)
    if shutil.which("nvidia-smi") is None:
        log(f"NVML not usable ({source.last_error}) and nvidia-smi not found; retrying NVML with back-off")
        return source
    log(f"NVML not usable ({source.last_error}); falling back to nvidia-smi")
    source.close()
    return SmiSource(interval, log=log)


def default_db() -> Path:
    system = Path("/var/lib/gpuhealth")
    try:
        system.mkdir(parents=True, exist_ok=True)
        if not os.access(system, os.W_OK):  # asked, not tried: a probe file could be a planted link
            raise PermissionError(system)
        return system / "monitor.db"
    except OSError:
        return Path.home() / ".local" / "state" / "gpuhealth" / "monitor.db"
