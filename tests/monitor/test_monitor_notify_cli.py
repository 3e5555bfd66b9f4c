"""Notifiers (log file, stream, webhook against a local server), dedup, the daemon, and the commands."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from click.testing import CliRunner
from monitor_fakes import GENERATED_BY, NOTE, T0, Clock, FakeNvml, busy, samples, wait_until_catching

from gpuhealth.model import Finding, Report, Severity, Snapshot, Subject
from gpuhealth.monitor.commands import history, monitor, sparkline
from gpuhealth.monitor.config import load_config
from gpuhealth.monitor.daemon import CheckRunner, Monitor
from gpuhealth.monitor.notify import Dispatcher, LogFileNotifier, StreamNotifier, WebhookNotifier
from gpuhealth.monitor.rules import Alert, RuleSet
from gpuhealth.monitor.sample import XidEvent
from gpuhealth.monitor.sources import NvmlSource, write_trace
from gpuhealth.monitor.store import Store, StoreError

ALERT = Alert("temperature", 0, "warning", "firing", "GPU 0 at 88 °C", T0)


@pytest.fixture
def server():
    received, statuses = [], []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status = statuses.pop(0) if statuses else 200
            if status == 200:
                received.append(json.loads(body))
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/hook", received, statuses
    httpd.shutdown()


def test_webhook_posts_json(server):
    url, received, _ = server
    hook = WebhookNotifier(url, timeout=2)
    hook.send(ALERT)
    hook.close()
    assert received[0]["rule"] == "temperature" and received[0]["state"] == "firing" and received[0]["gpu"] == 0


def test_webhook_retries_with_back_off(server):
    url, received, statuses = server
    statuses += [500, 503]
    waits = []
    hook = WebhookNotifier(url, timeout=2, retries=3, backoff=1, sleep=waits.append)
    hook.send(ALERT)
    hook.close()
    assert len(received) == 1 and waits == [1, 2]


def test_webhook_gives_up_with_a_message(server):
    url, received, statuses = server
    statuses += [500] * 5
    errors = []
    hook = WebhookNotifier(url, timeout=2, retries=1, sleep=lambda s: None, on_error=errors.append)
    hook.send(ALERT)
    hook.close()
    assert received == [] and "not delivered after 2 attempt(s)" in errors[0]


def test_dispatcher_deduplicates_and_survives_a_broken_notifier(tmp_path):
    class Broken:
        def send(self, alert):
            raise OSError("No space left on device")

        def close(self):
            pass

    stream, errors = io.StringIO(), []
    log = tmp_path / "alerts.log"
    dispatcher = Dispatcher([Broken(), LogFileNotifier(log), StreamNotifier(stream)], on_error=errors.append)
    resolved = Alert("temperature", 0, "warning", "resolved", "GPU 0 back under 82 °C after 1 min", T0 + 60)
    dispatcher.dispatch([ALERT, ALERT, resolved, resolved])
    dispatcher.close()
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and lines[0].startswith("2023-11-14T22:13:00Z FIRING warning temperature gpu=0")
    assert stream.getvalue().count("\n") == 2 and len(errors) == 2


def test_the_daemon_keeps_alerting_when_the_store_fails(tmp_path):
    class FullDisk:
        def write(self, samples):
            raise StoreError("h.db: disk full; history is not being written (alerts still go out): free space")

        def flush(self):
            raise StoreError("h.db: disk full")

        def close(self):
            pass

    fake = FakeNvml(gpus=1)
    fake.temperature = 95
    clock, logs = Clock(), []
    rules = load_config()["rules"]
    rules["temperature"]["for"] = "0s"
    dispatcher = Dispatcher([])
    mon = Monitor(NvmlSource(fake, clock=clock), RuleSet.from_config(rules), dispatcher, FullDisk(), clock=clock,
                  log=logs.append)
    for _ in range(3):
        mon.step()
        clock.t += 1
    mon.close()
    assert [a.rule for a in dispatcher.sent] == ["temperature"] and len(logs) == 2 and "disk full" in logs[0]


def test_full_check_findings_become_alerts_and_resolve():
    finding = Finding("GH301", "xid", Severity.CRITICAL, "Xid 79", Subject(0, "0000:19:00.0"),
                      action="reset_gpu", impact="gpu_unusable")
    reports = [Report(Snapshot(), (finding,)), Report(Snapshot(), ())]
    runner = CheckRunner(600, run=lambda: reports.pop(0), log=print)
    runner.maybe_start(T0)
    runner._thread.join(5)
    (alert,) = runner.poll(T0)
    assert alert.rule == "check:GH301" and alert.state == "firing" and alert.gpu == 0
    runner.maybe_start(T0 + 10)
    assert runner._thread.is_alive() is False and runner.poll(T0 + 10) == []  # not due yet
    runner.maybe_start(T0 + 600)
    runner._thread.join(5)
    (done,) = runner.poll(T0 + 600)
    assert done.state == "resolved" and done.message == "`gpuhealth check` no longer finds GH301 on GPU 0 after 10 min"


def _trace(tmp_path, seconds=120):
    events = samples(0, seconds, **busy(temperature_c=lambda i: 90 if i >= 30 else 60))
    events += samples(1, seconds, **busy())
    events += [XidEvent(T0 + 50, 1, 79)]
    path = tmp_path / "demo.jsonl"
    write_trace(path, sorted(events, key=lambda e: e.t), GENERATED_BY, NOTE)
    return path


def test_monitor_replays_a_trace_into_history_alerts_and_a_recording(tmp_path):
    trace, db, record, log = _trace(tmp_path), tmp_path / "h.db", tmp_path / "rec.jsonl", tmp_path / "alerts.log"
    config = tmp_path / "m.toml"
    config.write_text(f'[notify]\nlog_file = "{log}"\nstderr = false\n')
    result = CliRunner().invoke(monitor, ["--source", f"replay:{trace}", "--replay-speed", "0", "--interval", "0.05",
                                          "--db", str(db), "--record", str(record), "--config", str(config)])
    assert result.exit_code == 0, result.output
    alerts = log.read_text()
    assert "FIRING warning temperature gpu=0" in alerts and "FIRING critical xid[79] gpu=1" in alerts
    assert len(record.read_text().splitlines()) == 1 + 241
    assert json.loads(record.read_text().splitlines()[0])["generated_by"].startswith("gpuhealth")
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM raw_block").fetchone()[0]
    assert rows >= 2  # two GPUs, one or two 10-minute blocks each
    store = Store(db)
    stored = store.series(0, "temperature_c", time.time() - 3600, time.time() + 3600).points
    store.close()
    assert len(stored) == 120


def test_history_prints_a_table_with_sparklines_and_csv(tmp_path):
    db = tmp_path / "h.db"
    store = Store(db)
    now = time.time()
    store.write(samples(0, 120, t0=now - 120, temperature_c=lambda i: 40 + i // 10))
    store.close()
    table = CliRunner().invoke(history, ["--db", str(db), "--metric", "temperature", "--since", "10m"])
    assert table.exit_code == 0, table.output
    assert "120 raw" in table.output and "▁" in table.output and "█" in table.output
    out = CliRunner().invoke(history, ["--db", str(db), "--gpu", "0", "--since", "10m", "--csv"])
    rows = list(csv.reader(io.StringIO(out.output)))
    assert rows[0] == ["time", "gpu", "metric", "resolution", "min", "avg", "max"] and len(rows) == 121
    bad = CliRunner().invoke(history, ["--db", str(db), "--metric", "bogus"])
    assert bad.exit_code == 2 and "unknown metric" in bad.output


def test_history_without_a_database_says_so(tmp_path):
    result = CliRunner().invoke(history, ["--db", str(tmp_path / "none.db")])
    assert result.exit_code == 3 and "no history yet" in result.output


def test_history_on_an_empty_database_says_so(tmp_path):
    db = tmp_path / "h.db"
    Store(db).close()  # what a monitor that has not sampled yet leaves
    result = CliRunner().invoke(history, ["--db", str(db)])
    assert result.exit_code == 0 and "holds no samples yet" in result.output and "GPU" not in result.output
    out = CliRunner().invoke(history, ["--db", str(db), "--csv"])
    assert out.exit_code == 0 and out.stdout == "time,gpu,metric,resolution,min,avg,max\n"  # the note: stderr


def test_sparkline_scales_and_leaves_gaps():
    assert sparkline([(0, 0), (9, 10)], 0, 10, width=10) == "▁        █"


def test_sigterm_flushes_and_exits_zero(tmp_path):
    trace, db = _trace(tmp_path, seconds=600), tmp_path / "h.db"
    code = "from gpuhealth.monitor.commands import monitor; monitor()"
    child = subprocess.Popen([sys.executable, "-c", code, "--source", f"replay:{trace}", "--replay-speed", "50",
                              "--interval", "0.05", "--db", str(db), "--check-every", "0"],
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not db.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    wait_until_catching(child.pid, signal.SIGTERM)
    time.sleep(0.5)
    child.send_signal(signal.SIGTERM)
    assert child.wait(10) == 0
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM recent").fetchone()[0] == 0  # flushed: compacted on the way out


def test_periodic_check_keeps_the_worst_finding_per_code_and_gpu():
    """Xid 48 (critical) and Xid 94 (warning) are both GH301 on GPU 0: one alert, critical."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.collect import collect
    from gpuhealth.monitor.daemon import CheckRunner
    from hostcases import FakeHost, load_spec

    report = run_checks(collect(FakeHost(load_spec("h100x8-xid-ecc"))))
    runner = CheckRunner(600, run=lambda: report, log=lambda _: None)
    alerts = runner._alerts(report, now=0.0)
    gh301 = [a for a in alerts if a.rule == "check:GH301"]
    assert len(gh301) == 1 and gh301[0].severity == "critical"


def test_alert_lines_carry_their_syslog_priority_only_into_the_journal(tmp_path, monkeypatch):
    """Under systemd (JOURNAL_STREAM names stderr's device:inode) each line starts with <N>, so that
    `journalctl -p err` finds a critical alert; a resolved one is a notice. Elsewhere the lines stay plain."""
    from gpuhealth.monitor.notify import syslog_priority

    alerts = [Alert("xid", 0, "critical", "firing", "GPU 0 Xid 79", T0, "79"), ALERT,
              Alert("gpu_idle", 1, "info", "firing", "GPU 1 idle", T0),
              Alert("xid", 0, "critical", "resolved", "GPU 0 Xid 79 quiet", T0 + 60, "79")]
    assert [syslog_priority(a) for a in alerts] == [2, 4, 6, 5]  # crit, warning, info, notice
    journal, other = tmp_path / "journal", tmp_path / "redirected"
    with journal.open("w") as stream, other.open("w") as redirected:
        stat = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{stat.st_dev}:{stat.st_ino}")
        for notifier in (StreamNotifier(stream), StreamNotifier(redirected)):
            for alert in alerts:
                notifier.send(alert)
    lines = journal.read_text().splitlines()
    assert [line[:3] for line in lines] == ["<2>", "<4>", "<6>", "<5>"]
    assert lines[0][3:].startswith("2023-11-14T22:13:00Z FIRING critical xid[79] gpu=0: GPU 0 Xid 79")
    assert not any(line.startswith("<") for line in other.read_text().splitlines())  # not the journal's stream
    monkeypatch.delenv("JOURNAL_STREAM")
    plain = io.StringIO()  # no file descriptor, no variable: plain
    StreamNotifier(plain).send(alerts[0])
    assert plain.getvalue().startswith("2023-")


def test_monitor_says_at_once_what_it_samples_and_where_history_and_alerts_go(tmp_path):
    """A healthy box raises no alert for hours: the start line says the monitor runs. A webhook is named by its
    host only (a token in its path stays out of the journal)."""
    trace, db, log = _trace(tmp_path), tmp_path / "h.db", tmp_path / "alerts.log"
    config = tmp_path / "m.toml"
    config.write_text(f'[notify]\nlog_file = "{log}"\nwebhook_url = "https://hooks.example.com/T0/s3cret"\n'
                      'webhook_retries = 0\n[rules.idle]\nenabled = false\n')
    result = CliRunner().invoke(monitor, ["--source", f"replay:{trace}", "--replay-speed", "0", "--interval", "0.05",
                                          "--db", str(db), "--config", str(config)])
    assert result.exit_code == 0, result.output
    first = result.stderr.splitlines()[0]
    rules = len(load_config(config)["rules"]) - 1  # every rule but the one disabled
    assert first == (f"gpuhealth monitor: started: source replay of {trace}, history {db}, {rules} rules, alerts to "
                     f"stderr, {log}, webhook https://hooks.example.com")
    assert "s3cret" not in first
