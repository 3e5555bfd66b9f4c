"""Where alerts go: stderr (the journal under systemd), a log file, a webhook. ``Dispatcher`` drops
duplicates (an alert already in that state) and never lets one failing notifier stop the others."""

from __future__ import annotations

import io
import json
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Protocol

from gpuhealth.inert import one_line

from .rules import Alert


class Notifier(Protocol):
    def send(self, alert: Alert) -> None: ...
    def close(self) -> None: ...


def format_line(alert: Alert) -> str:
    stamp = datetime.fromtimestamp(alert.t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    where = "host" if alert.gpu is None else f"gpu={alert.gpu}"
    key = f"[{alert.key}]" if alert.key else ""
    # the journal, a log file, a terminal: one inert line (a message may quote a GPU's or a trace's text)
    return one_line(f"{stamp} {alert.state.upper()} {alert.severity} {alert.rule}{key} {where}: {alert.message}")


def to_json(alert: Alert) -> dict[str, object]:
    action, impact = actions_of(alert)
    return {"rule": alert.rule, "key": alert.key, "gpu": alert.gpu, "severity": alert.severity,
            "state": alert.state, "message": alert.message, "t": alert.t,
            "time": datetime.fromtimestamp(alert.t, timezone.utc).isoformat(), "action": action, "impact": impact,
            "capture": alert.capture or None,
            # a drill (monitor/inject.py): its message says DRILL; a receiver may route on this instead
            "drill": alert.drill or alert.message.startswith("DRILL: ")}


def actions_of(alert: Alert) -> tuple[str, str]:
    """What to do about an alert and what it does to the node: a check finding's own (carried on the alert), else the
    row of its check or rule in knowledge/actions.csv (``check:GH301`` -> GH301, a rule -> ``rule:<name>``), and for
    an Xid alert of the xid rule, its Xid's row (xid_actions.csv)."""
    if alert.action and alert.impact:
        return alert.action, alert.impact
    from gpuhealth.knowledge.actions import of_check, of_rule, of_xid

    if alert.rule.startswith("check:"):
        return of_check(alert.rule.removeprefix("check:"), alert.severity)
    if alert.rule == "xid" and alert.key.isdecimal():
        from gpuhealth.knowledge.xid import lookup

        return of_xid(lookup(int(alert.key)))
    return of_rule(alert.rule, alert.key)


# syslog priorities (sd-daemon.h): what `journalctl -p err` and the like select on. A resolved alert is a
# notice whatever its severity, so that `-p err` lists only what is wrong.
PRIORITY = {"critical": 2, "warning": 4, "info": 6}
RESOLVED_PRIORITY = 5


def syslog_priority(alert: Alert) -> int:
    return RESOLVED_PRIORITY if alert.state == "resolved" else PRIORITY.get(alert.severity, RESOLVED_PRIORITY)


def writes_to_journal(stream: IO[str]) -> bool:
    """Is STREAM systemd's journal stream? systemd sets JOURNAL_STREAM to its device:inode; comparing keeps
    a pipe or file that the service redirected stderr to (or a child that inherited the variable) plain."""
    try:
        device, inode = (int(part) for part in os.environ["JOURNAL_STREAM"].split(":"))
        stat = os.fstat(stream.fileno())
    except (KeyError, ValueError, OSError, AttributeError, io.UnsupportedOperation):
        return False
    return (stat.st_dev, stat.st_ino) == (device, inode)


class StreamNotifier:
    """One line per alert on stderr (or STREAM). Under systemd each line starts with ``<N>``, its syslog
    priority, which the journal reads (SyslogLevelPrefix=, on by default) and strips."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream
        self._journal: bool | None = None

    def send(self, alert: Alert) -> None:
        stream = self.stream or sys.stderr
        if self._journal is None:
            self._journal = writes_to_journal(stream)
        prefix = f"<{syslog_priority(alert)}>" if self._journal else ""
        print(prefix + format_line(alert), file=stream, flush=True)

    def close(self) -> None:
        pass


class LogFileNotifier:
    """One line per alert, appended and flushed at once (a crash keeps every line written)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        from gpuhealth.safefile import open_append

        self._file = open_append(path, 0o644)  # never through a planted link; held for the monitor's life

    def send(self, alert: Alert) -> None:
        self._file.write(format_line(alert) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


MAX_BACKOFF_S = 60.0  # one wait between webhook attempts at most
MAX_RESPONSE_BYTES = 64 * 1024  # read of a webhook's answer (it is not used)


def redact_url(url: str) -> str:
    """``https://hooks.example.com/…``: scheme and host (and port) only, for every log line. A webhook's path
    and query often are its secret (Slack, Teams, Discord put the token there), and userinfo is a password."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "<webhook URL>"
    if not parts.scheme or not host:
        return "<webhook URL>"
    shown = f"[{host}]" if ":" in host else host
    rest = "/…" if (parts.path not in ("", "/") or parts.query or parts.fragment) else ""
    return f"{parts.scheme}://{shown}{'' if port is None else f':{port}'}{rest}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook is POSTed where configured, never where its answer points: a 3xx is a failed delivery
    (a redirect to a loopback or metadata address would make the monitor a proxy into the host)."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class WebhookNotifier:
    """JSON POST per alert from a background thread, so a slow endpoint never delays sampling.
    Each attempt has ``timeout``; failures are retried ``retries`` times with doubling back-off (each wait
    at most ``MAX_BACKOFF_S``). Redirects are not followed; log lines show the URL redacted."""

    def __init__(self, url: str, timeout: float = 5.0, retries: int = 3, backoff: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep, on_error: Callable[[str], None] | None = None) -> None:
        from .config import DURATIONS, NUMBERS, show_seconds

        if not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook URL must be http:// or https://, not {redact_url(url)!r}")
        low, high = DURATIONS["notify.webhook_timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not low <= timeout <= high:
            raise ValueError(f"webhook_timeout {timeout!r} is out of range: between {show_seconds(low)} and "
                             f"{show_seconds(high)}")
        most = int(NUMBERS["notify.webhook_retries"][1])
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= most:
            raise ValueError(f"webhook_retries {retries!r} is out of range: a whole number from 0 to {most}")
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not 0 <= backoff <= MAX_BACKOFF_S:
            raise ValueError(f"webhook back-off {backoff!r} is out of range: 0 to {MAX_BACKOFF_S:g} s")
        self.url, self.timeout, self.retries, self.backoff = url, float(timeout), retries, float(backoff)
        self.shown = redact_url(url)
        self._opener = urllib.request.build_opener(_NoRedirects)
        self._sleep = sleep
        self._on_error = on_error or (lambda text: print(text, file=sys.stderr, flush=True))
        self._queue: queue.Queue[Alert | None] = queue.Queue(maxsize=1000)
        self._thread = threading.Thread(target=self._run, name="gpuhealth-webhook", daemon=True)
        self._thread.start()
        self.delivered = 0

    def send(self, alert: Alert) -> None:
        try:
            self._queue.put_nowait(alert)
        except queue.Full:  # the endpoint is down for long: keep the newest alerts flowing elsewhere
            self._on_error(f"webhook {self.shown}: queue full, alert dropped: {format_line(alert)}")

    def _run(self) -> None:
        while (alert := self._queue.get()) is not None:
            try:
                self._deliver(alert)
            except Exception as exc:  # never the end of the thread: the next alert must still go out
                self._on_error(f"webhook {self.shown}: delivery failed: {self._scrub(exc)}")

    def _scrub(self, error: BaseException) -> str:
        """The error's text without the URL's secret parts (some errors quote the URL)."""
        from urllib.parse import urlsplit

        text = f"{error}"
        if isinstance(error, urllib.error.HTTPError) and 300 <= error.code < 400:
            text = f"HTTP {error.code} redirect, not followed"
        try:
            parts = urlsplit(self.url)
            secrets = [self.url, parts.path, parts.query, parts.fragment, parts.netloc.rpartition("@")[0]]
        except ValueError:
            secrets = [self.url]
        for secret in sorted((x for x in secrets if x and x != "/"), key=len, reverse=True):
            text = text.replace(secret, "…")
        return one_line(text)

    def _deliver(self, alert: Alert) -> None:
        body = json.dumps(to_json(alert)).encode()
        delay = self.backoff
        error: BaseException | None = None
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    response.read(MAX_RESPONSE_BYTES)
                self.delivered += 1
                return
            except (urllib.error.URLError, OSError, ValueError) as exc:
                error = exc
            if attempt < self.retries:
                self._sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
        why = self._scrub(error) if error is not None else "no attempt made"
        self._on_error(f"webhook {self.shown}: alert not delivered after {self.retries + 1} attempt(s): {why}")

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (bounded by ``timeout``), then stop."""
        self._queue.put(None)
        self._thread.join(timeout)


class Dispatcher:
    """Sends each alert to every notifier once: a repeat of an alert's current state is dropped. A derived
    alert of a fault that already paged is folded into that alert for the notifiers (fold.py); a notifier
    with ``every_alert`` set (serve's live state, which /metrics exports for Alertmanager to inhibit) gets
    every alert as it is."""

    def __init__(self, notifiers: Sequence[Notifier], on_error: Callable[[str], None] | None = None) -> None:
        from .fold import Folding

        self.notifiers = list(notifiers)
        self._folding = Folding()
        self._state: dict[tuple[str, int | None, str], str] = {}
        self._message: dict[tuple[str, int | None, str], str] = {}  # an update ("now 2") is sent once
        self._on_error = on_error or (lambda text: print(text, file=sys.stderr, flush=True))
        self.sent: list[Alert] = []
        # boots.FaultMemory (the monitor sets it when it has a history): escalation, no second page for what paged
        # in this boot before gpuhealth restarted, acknowledgements
        self.memory: Any = None
        self.capture: Any = None  # capture.Capture: the first critical page of an incident writes a bundle

    def dispatch(self, alerts: Sequence[Alert]) -> None:
        for alert in alerts:
            if self._state.get(alert.identity, "resolved") == alert.state and not (
                    alert.renotify and alert.state == "firing" and self._message.get(alert.identity) != alert.message):
                # duplicate: already firing, or resolving something never fired; but a folded alert that now
                # stands on something else (another Xid code in the next full check) may have to page
                again = self._folding.again(alert)
                if again is not None:
                    self._deliver(again, raw=False)
                continue
            self._state[alert.identity] = alert.state
            self._message[alert.identity] = alert.message
            quiet: str | None = None
            # A drill's alert (monitor/inject.py) pages but is never remembered as a fault of this host (no
            # escalation, no "paged before the restart") nor captured: the host's evidence shows no such fault.
            if self.memory is not None and not alert.drill:
                alert, quiet = self.memory.admit(alert)
            if self.capture is not None and quiet is None and not alert.drill:
                path = self.capture.on_page(alert)
                if path is not None:
                    from .capture import with_capture

                    alert = with_capture(alert, path)
            self.sent.append(alert)
            del self.sent[:-1000]  # bounded: kept for `watch` and tests, not as a record
            self._deliver(alert, raw=True, quiet=quiet)

    def recheck(self, now: float) -> None:
        """Once per monitor step: an alert an acknowledgement held back pages once that ends while it fires."""
        if self.memory is None:
            return
        for alert in self.memory.poll(now):
            if self._state.get(alert.identity) == "firing":
                note = Alert(alert.rule, alert.gpu, alert.severity, "firing", f"{alert.message} (its "
                             "acknowledgement ended: paged now)", now, alert.key, True, alert.about, alert.action,
                             alert.impact)
                self._deliver(note, raw=False)

    def reboot(self) -> None:
        """The host rebooted (a replay crossing a ``boot`` record): what was open ends with the boot, as it does
        when gpuhealth restarts with the host. Live state (``every_alert``) is told; nothing pages."""
        for alert in self._folding.open_alerts():
            ended = Alert(alert.rule, alert.gpu, alert.severity, "resolved", "the host rebooted", alert.t, alert.key,
                          action=alert.action, impact=alert.impact)
            for notifier in self.notifiers:
                if getattr(notifier, "every_alert", False):
                    try:
                        notifier.send(ended)
                    except Exception as exc:
                        self._on_error(f"notifier {type(notifier).__name__} failed: {exc}")
        from .fold import Folding

        self._folding = Folding()
        self._state.clear()
        self._message.clear()

    def _deliver(self, alert: Alert, raw: bool, quiet: str | None = None) -> None:
        """To every notifier (``raw``: the alert itself to those with ``every_alert``, the fold's routing to
        the others); only the fold's routing when not ``raw``. ``quiet``: why it must not page (boots.py); the
        others get it at info, saying so."""
        routed = self._folding.route(alert)
        if quiet is not None and routed.severity != "info":
            from .boots import not_paged_note

            routed = not_paged_note(routed, quiet)
        for notifier in self.notifiers:
            every = getattr(notifier, "every_alert", False)
            if every and not raw:
                continue
            try:
                notifier.send(alert if every else routed)
            except Exception as exc:  # a full disk under the log file must not stop the webhook
                self._on_error(f"notifier {type(notifier).__name__} failed: {exc}")

    @property
    def firing(self) -> list[tuple[str, int | None, str]]:
        return [identity for identity, state in self._state.items() if state == "firing"]

    def close(self) -> None:
        for notifier in self.notifiers:
            try:
                notifier.close()
            except Exception as exc:
                self._on_error(f"notifier {type(notifier).__name__} failed to close: {exc}")
