"""Capture on failure: the first critical page of an incident writes a snapshot bundle of the host, as
`gpuhealth snapshot --redact-host` writes one, while the evidence is still there (the kernel log before it
rotates, nvidia-smi while the GPU is still in its bad state).

- At most one capture per ``every_s`` (``[monitor] capture_every``, 1 h; 0: off): the critical pages that follow
  within it belong to the same incident and name the bundle already being written.
- At most ``keep`` bundles (``[monitor] capture_keep``, 5): the oldest ``capture-*`` directories go.
- The bundle is written in a thread of its own (collecting takes seconds; sampling and alerting go on), into
  ``<history directory>/captures/capture-<UTC time>``, owner-only, through ``bundle.RecordingHost`` (its files
  through ``safefile``), host identifiers redacted.
- The alert carries the path (its message, and ``capture`` in the webhook's JSON), so ``gpuhealth check --from
  PATH`` reads it anywhere later.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .rules import Alert

PREFIX = "capture-"


def _local_host() -> Any:
    from gpuhealth.host import LocalHost

    return LocalHost()


class Capture:
    def __init__(self, directory: Path, every_s: float = 3600.0, keep: int = 5, host: Callable[[], Any] = _local_host,
                 timeout: float = 30.0, clock: Callable[[], float] = time.time,
                 log: Callable[[str], None] = lambda text: None) -> None:
        self.directory = Path(directory)
        self.every_s, self.keep, self.timeout = every_s, keep, timeout
        self._host, self._clock, self._log = host, clock, log
        self._last: tuple[float, Path] | None = None  # when the last capture began, and where
        self._thread: threading.Thread | None = None
        self.written: list[Path] = []

    def on_page(self, alert: Alert) -> Path | None:
        """For a firing alert about to page: the bundle it carries (a new one for the first critical page of an
        incident, the incident's for a later one within ``every_s``); None when it carries none."""
        if alert.state != "firing" or alert.severity != "critical" or self.every_s <= 0 or self.keep <= 0:
            return None
        now = self._clock()
        if self._last is not None and now - self._last[0] < self.every_s:
            return self._last[1]
        path = self.directory / f"{PREFIX}{datetime.fromtimestamp(now, timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
        self._last = (now, path)
        self._thread = threading.Thread(target=self._write, args=(path,), name="gpuhealth-capture", daemon=True)
        self._thread.start()
        return path

    def _write(self, path: Path) -> None:
        from gpuhealth.bundle import RecordingHost
        from gpuhealth.collect import collect
        from gpuhealth.safefile import make_directory

        host = None
        try:
            make_directory(self.directory, 0o700)
            host = self._host()
            name = getattr(host, "hostname", None)  # LocalHost: a function; a bundle read as the host: its value
            recorder = RecordingHost(host, path, hostname=name() if callable(name) else name)
            collect(recorder, self.timeout, frameworks=False)  # no PyTorch probe: jobs may still run
            recorder.finish(redact_host=True)
            self.written.append(path)
            self._prune()
        except Exception as exc:  # a capture that fails must not take the monitor down: said, and the alert stands
            self._log(f"capture {path} failed: {type(exc).__name__}: {exc}")
        finally:
            close = getattr(host, "close", None)  # a bundle read as the host (tests, `serve --check-from`)
            if close is not None:
                close()

    def _prune(self) -> None:
        """Keep the newest ``keep`` bundles; only directories this module names, never a link."""
        bundles = sorted(p for p in self.directory.iterdir()
                         if p.name.startswith(PREFIX) and p.is_dir() and not p.is_symlink())
        for old in bundles[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def wait(self, timeout: float | None = None) -> None:
        """Until the capture in progress is written (tests, and a clean stop)."""
        if self._thread is not None:
            self._thread.join(timeout)


def with_capture(alert: Alert, path: Path) -> Alert:
    return Alert(alert.rule, alert.gpu, alert.severity, alert.state,
                 f"{alert.message} (evidence captured to {path}: gpuhealth check --from {path})", alert.t, alert.key,
                 alert.renotify, alert.about, alert.action, alert.impact, capture=str(path))
