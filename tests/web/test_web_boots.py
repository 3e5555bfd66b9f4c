"""Serve's view of the monitor's boots (monitor/boots.py): the reboot count in /metrics (gpuhealth_remediations) and
in the status the dashboard shows, and an escalated alert's action as a label of gpuhealth_alert_active."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuhealth.monitor.boots import FaultMemory
from gpuhealth.monitor.notify import Dispatcher
from gpuhealth.monitor.rules import Alert
from gpuhealth.monitor.store import Store
from gpuhealth.web.metrics import make_registry
from gpuhealth.web.state import LiveState, StateNotifier

T0 = 1_750_000_000.0


def _samples(state: LiveState) -> list:
    text = generate_latest(make_registry(state, process=False)).decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def test_remediations_and_an_escalated_action_reach_metrics_and_status(tmp_path):
    now = [T0]
    store = Store(tmp_path / "h.db", clock=lambda: now[0])
    state = LiveState(clock=lambda: T0)
    assert not [s for s in _samples(state) if s.name == "gpuhealth_remediations"]  # unknown: no series, never a 0
    assert state.status()["remediations"]["reboots"] is None
    for number, boot in enumerate(("a", "b", "c")):
        now[0] = T0 + 3600 * number  # gpuhealth starts with each boot of the host
        dispatcher = Dispatcher([StateNotifier(state)])
        dispatcher.memory = memory = FaultMemory(store, boot, log=lambda text: None)
        memory.listeners.append(state.set_remediations)
        state.set_remediations(memory.remediations)
        dispatcher.dispatch([Alert("xid", 0, "critical", "firing", "GPU 0 Xid 79", T0 + number, "79")])
    samples = _samples(state)
    assert [s.value for s in samples if s.name == "gpuhealth_remediations"] == [2.0]
    active = [s for s in samples if s.name == "gpuhealth_alert_active"]
    assert [(s.labels["rule"], s.labels["action"], s.labels["impact"]) for s in active] == [
        ("xid", "hardware_inspection", "node_unusable")]
    status = state.status()
    assert status["remediations"] == {"reboots": 2, "window_days": 7}
    assert "2 reboot(s) in the last 7 days" in status["summary"]


def test_a_node_never_rebooted_says_nothing_of_reboots(tmp_path):
    store = Store(tmp_path / "h.db", clock=lambda: T0)
    state = LiveState(clock=lambda: T0)
    memory = FaultMemory(store, "a", log=lambda text: None)
    state.set_remediations(memory.remediations)
    assert [s.value for s in _samples(state) if s.name == "gpuhealth_remediations"] == [0.0]
    assert "reboot" not in state.status()["summary"]


def test_gpu_resets_reach_metrics_per_gpu_and_the_status_beside_the_reboots(tmp_path):
    from gpuhealth.monitor.sample import Sample

    store = Store(tmp_path / "h.db", clock=lambda: T0)
    state = LiveState(clock=lambda: T0)
    memory = FaultMemory(store, "a", log=lambda text: None)
    memory.listeners.append(state.set_remediations)
    memory.reset_listeners.append(state.set_gpu_resets)
    assert not [s for s in _samples(state) if s.name == "gpuhealth_gpu_resets"]  # none: no series
    memory.note_resets([Sample(T0, 1, energy_j=900.0)])
    memory.note_resets([Sample(T0 + 1, 1, energy_j=3.0)])  # GPU 1's energy since the driver loaded started over
    samples = _samples(state)
    assert [(s.labels["gpu"], s.value) for s in samples if s.name == "gpuhealth_gpu_resets"] == [("1", 1.0)]
    assert [s.value for s in samples if s.name == "gpuhealth_remediations"] == [1.0]
    status = state.status()
    assert status["remediations"] == {"reboots": 0, "window_days": 7, "gpu_resets": {"1": 1}}
    assert "0 reboot(s) and 1 GPU reset(s) in the last 7 days" in status["summary"]


TOKEN = "s3cret-token-0123456789"


def test_ack_over_the_api_needs_the_token_and_shows_the_alert_as_acknowledged(tmp_path):
    from starlette.testclient import TestClient

    from gpuhealth.monitor import acks
    from gpuhealth.web.app import create_app

    db = tmp_path / "h.db"
    Store(db).close()
    state = LiveState()
    asked: list[bool] = []
    state.acks_changed = lambda: asked.append(True)
    state.alert(Alert("xid", 0, "critical", "firing", "GPU 0 Xid 79", T0, "79"))
    body = {"code": "xid:79", "gpu": 0, "until": "8h", "reason": "ticket 42"}
    with TestClient(create_app(state, db=db)) as client:  # on loopback without a token: refused all the same
        assert client.post("/api/v1/ack", json=body).status_code == 403
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(state, db=db, token=TOKEN)) as client:
        assert client.post("/api/v1/ack", json=body).status_code == 401
        assert client.post("/api/v1/ack", json={**body, "code": "rm -rf"}, headers=headers).status_code == 400
        assert client.post("/api/v1/ack", json={**body, "reason": ""}, headers=headers).status_code == 400
        assert client.post("/api/v1/ack", json={**body, "gpu": "0"}, headers=headers).status_code == 400
        answer = client.post("/api/v1/ack", json=body, headers=headers)
        assert answer.status_code == 200 and answer.json()["result"].startswith("acknowledged xid:79 until")
        assert asked == [True]  # the monitor is told to read the acknowledgements again
        store = Store(db)
        state.set_acks(acks.load(store))  # what the monitor thread does on its next step
        store.close()
        active = client.get("/api/v1/alerts", headers=headers).json()["active"]
        assert active[0]["rule"] == "xid" and active[0]["acknowledged"]["reason"] == "ticket 42"
        status = client.get("/api/v1/status", headers=headers).json()
        assert status["alerts"]["acknowledged"] == 1 and "(1 acknowledged)" in status["summary"]
        metrics = client.get("/metrics", headers=headers).text
        assert 'gpuhealth_alert_acknowledged{' in metrics and 'rule="xid"' in metrics
        cleared = client.post("/api/v1/ack", json={"code": "xid:79", "gpu": 0, "clear": True}, headers=headers)
        assert cleared.json()["result"] == "cleared xid:79"


def _serve_once(tmp_path, trace) -> tuple[list[str], LiveState]:
    """The monitor as `gpuhealth serve` builds and wraps it, run over a trace to its end; the log file's lines
    (gpuhealth's own notifier) and the live state /metrics reads."""
    import threading

    from gpuhealth.monitor.commands import _build
    from gpuhealth.web.server import wrap_monitor

    log = tmp_path / "alerts.log"
    log.unlink(missing_ok=True)
    config = tmp_path / "serve.toml"
    config.write_text(f'[notify]\nlog_file = "{log}"\nstderr = false\n')
    mon = _build(config, "0.05", "0", tmp_path / "h.db", f"replay:{trace}", None, 0.0)
    state, _checks = wrap_monitor(mon, f"replay:{trace}", lambda: None)
    try:
        mon.run(threading.Event())
    finally:
        mon.close()
    return (log.read_text().splitlines() if log.exists() else []), state


def test_a_restart_of_serve_in_the_middle_of_a_trace_pages_nothing_twice(tmp_path):
    import json

    from gpuhealth.monitor.sample import Sample, XidEvent, to_record
    from gpuhealth.monitor.sources import trace_header

    def part(t0: float) -> list:
        events = [Sample(t0 + i, 0, temperature_c=50.0) for i in range(10)] + [XidEvent(t0 + 3, 0, 79)]
        return sorted(events, key=lambda e: e.t)

    for name, t0 in (("first", T0), ("second", T0 + 20)):  # the same boot: the Xid 79 still open at the restart
        lines = [json.dumps(trace_header("tests/web/test_web_boots.py", "GENERATED: synthetic", "boot-a"))]
        (tmp_path / f"{name}.trace").write_text("\n".join(lines + [json.dumps(to_record(e)) for e in part(t0)]) + "\n")
    first, state = _serve_once(tmp_path, tmp_path / "first.trace")
    assert [line for line in first if " FIRING critical xid[79] gpu=0:" in line]
    assert not [s for s in _samples(state) if s.name == "gpuhealth_xid_paged"]  # nothing paged before it started
    second, state = _serve_once(tmp_path, tmp_path / "second.trace")
    assert not [line for line in second if " FIRING critical " in line or " FIRING warning " in line], second
    assert [line for line in second if " FIRING info xid[79] " in line and "paged already in this boot" in line]
    # /metrics still shows the fault as it is: Alertmanager keeps one alert for it, which it notified already
    active = [s for s in _samples(state) if s.name == "gpuhealth_alert_active"]
    assert [(s.labels["rule"], s.labels["severity"]) for s in active] == [("xid", "critical")]
    # ... and names the Xid paged before the restart, which Prometheus's GpuhealthCheckFinding then leaves out
    # when the first full check finds its line in the kernel log (deploy/prometheus/gpuhealth.rules.test.yml)
    paged = [s for s in _samples(state) if s.name == "gpuhealth_xid_paged"]
    assert [(s.labels["gpu"], s.labels["xid"], s.value) for s in paged] == [("0", "79", 1.0)]
