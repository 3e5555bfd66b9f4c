"""The web app through Starlette's TestClient: every endpoint, the token, the rate limit, size limits,
security headers, and /metrics (None readings absent, no stale series)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx2
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from web_fakes import REPO, T0, app_in_thread, expected, fleet_events, wait_for, write_fleet_trace

from gpuhealth.model import Evidence, Finding, Fix, Gpu, NvmlReport, Report, Severity, Snapshot, Subject
from gpuhealth.monitor.daemon import Monitor
from gpuhealth.monitor.notify import Dispatcher
from gpuhealth.monitor.rules import Alert, Basis, RuleSet
from gpuhealth.monitor.sample import GpuLost, Sample
from gpuhealth.monitor.sources import ReplaySource
from gpuhealth.monitor.store import Store
from gpuhealth.web import state as state_module
from gpuhealth.web.app import create_app
from gpuhealth.web.commands import serve
from gpuhealth.web.security import SECURITY_HEADERS, allowed_hosts_for
from gpuhealth.web.server import ServeError, check_token, parse_listen, wrap_monitor
from gpuhealth.web.state import LiveState, ServeChecks, StateNotifier

TOKEN = "s3cret-token-0123456789"


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def report() -> Report:
    gpu = Gpu(index=0, name="NVIDIA H100 80GB HBM3", pci_address="0000:19:00.0", uuid="GPU-a")
    snapshot = Snapshot(nvml=NvmlReport(ok=True, gpus=(gpu,)))
    finding = Finding("GH301", "xid", Severity.CRITICAL, "Xid 48: double-bit ECC error",
                      Subject(0, "0000:19:00.0"), (Evidence("dmesg --time-format iso", ("NVRM: Xid 48",)),),
                      fixes=(Fix("sudo nvidia-smi --gpu-reset -i 0", disruptive=True),),
                          action="reset_gpu", impact="gpu_unusable")
    return Report(snapshot, (finding,), (), 20)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def live(clock):
    state = LiveState(1.0, clock=clock, source="test")
    state.started_at = T0 - 3600
    return state


def make(live, **kwargs):
    checks = kwargs.pop("checks", None) or ServeChecks(0, report, live, log=lambda text: None)
    return create_app(live, checks, **kwargs), checks


def feed(live, clock, *events):
    clock.t = max(e.t for e in events)
    live.record(list(events))


def metrics(client) -> dict[str, list]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {family.name: family.samples for family in text_string_to_metric_families(response.text)}


def values(samples, name: str, **labels) -> list[float]:
    return [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def test_every_endpoint_answers(live, clock):
    feed(live, clock, *fleet_events(gpus=2, seconds=5))
    app, _ = make(live)
    with TestClient(app) as client:
        page = client.get("/")
        assert page.status_code == 200 and "Check now" in page.text
        for asset, kind in (("/static/app.js", "javascript"), ("/static/series.js", "javascript"),
                            ("/static/app.css", "css"),
                            ("/static/uplot/uPlot.iife.min.js", "javascript"), ("/favicon.ico", "svg")):
            response = client.get(asset)
            assert response.status_code == 200 and kind in response.headers["content-type"], asset
        assert client.get("/healthz").text == "ok\n"
        status = client.get("/api/v1/status").json()
        # readings alone never make the box HEALTHY: no full check has run yet
        assert status["verdict"] == "UNCHECKED" and status["gpus"] == {"seen": 2, "answering": 2, "lost": 0}
        assert status["summary"].endswith("no full check yet")
        gpus = client.get("/api/v1/gpus").json()["gpus"]
        assert [g["gpu"] for g in gpus] == [0, 1] and gpus[1]["readings"]["temperature_c"] == 51
        assert gpus[1]["pci_bus_id"] == "0000:3b:00.0" and gpus[1]["state"] == "ok"
        assert client.get("/api/v1/alerts").json() == {"active": [], "recent": [], "acknowledgements": []}
        assert client.get("/api/v1/findings").json()["checked_at"] is None
        history = client.get("/api/v1/history", params={"gpu": 1, "metric": "temperature", "range": "15m"}).json()
        assert history["series"] == [{"gpu": 1, "metric": "temperature_c", "resolution": "raw",
                                      "t": [T0 + i for i in range(5)], "v": [51] * 5}]
        everything = client.get("/api/v1/history").json()["series"]
        assert {(s["gpu"], s["metric"]) for s in everything} == {
            (g, m) for g in (0, 1) for m in state_module.CHART_METRICS}
        spec = client.get("/api/v1/openapi.json").json()
        assert spec["openapi"].startswith("3.")
        routes = {r.path for r in app.routes if r.path.startswith("/api/") or r.path in ("/metrics", "/healthz")}
        assert routes <= set(spec["paths"])
        assert client.post("/api/v1/check").status_code == 200
        assert client.get("/nowhere").status_code == 404


def test_history_validates_its_parameters(live, clock):
    feed(live, clock, *fleet_events(gpus=1, seconds=2))
    app, _ = make(live)
    with TestClient(app) as client:
        for params in ({"metric": "voltage"}, {"range": "5s"}, {"range": "90d"}, {"range": "soon"},
                       {"gpu": "x"}, {"gpu": "-1"}, {"gpu": "99999"}, {"metric": ",".join(["temp"] * 9)}):
            response = client.get("/api/v1/history", params=params)
            assert response.status_code == 400, params
            assert "error" in response.json()


def test_history_reads_the_database_beyond_the_live_window(tmp_path, live, clock):
    db = tmp_path / "h.db"
    store = Store(db, clock=clock)
    old = [Sample(T0 - 7200 + 60 * i, 0, temperature_c=40 + i % 3) for i in range(100)]
    clock.t = old[-1].t
    for sample in old:
        store.write([sample])
    store.flush()
    store.close()
    live.started_at = T0  # the process started now: the in-memory window holds nothing older
    feed(live, clock, Sample(T0, 0, temperature_c=60))
    app, _ = make(live, db=db)
    with TestClient(app) as client:
        series = client.get("/api/v1/history", params={"gpu": 0, "metric": "temperature", "range": "24h"}).json()
        [one] = series["series"]
        assert one["resolution"] == "minute" and len(one["t"]) >= 100 and one["min"] and one["max"]
        assert set(one["v"]) <= {40, 41, 42, 60}


def test_status_is_healthy_only_after_a_clean_full_check(live, clock):
    assert live.status()["verdict"] == "NO DATA"
    feed(live, clock, *fleet_events(gpus=2, seconds=3))
    assert live.status()["verdict"] == "UNCHECKED"
    live.check_started()
    assert live.status()["summary"].endswith("full check running")
    live.check_finished(error="full check failed: TimeoutError: nvidia-smi did not answer in 10 s")
    status = live.status()
    assert status["verdict"] == "UNCHECKED" and status["summary"].endswith("nvidia-smi did not answer in 10 s")
    live.alert(Alert("temperature", 1, "critical", "firing", "GPU 1 at 91 °C", T0))
    assert live.status()["verdict"] == "BROKEN"  # a firing alert decides without a check
    live.alert(Alert("temperature", 1, "critical", "resolved", "GPU 1 at 70 °C", T0 + 60))
    live.check_finished(Report(Snapshot(nvml=NvmlReport(ok=True, gpus=())), (), (), 20))
    assert live.status()["verdict"] == "HEALTHY"
    live.check_finished(report())
    assert live.status()["verdict"] == "BROKEN"


def test_metrics_from_the_current_state(live, clock):
    events = fleet_events(gpus=8, seconds=3)
    feed(live, clock, *events)
    live.alert(Alert("xid", 3, "critical", "firing", "GPU 3 Xid 79", T0, "79"))
    live.alert(Alert("gpu_count", None, "critical", "firing", "7 of 8", T0))
    live.check_finished(report())
    app, _ = make(live)
    with TestClient(app) as client:
        families = metrics(client)
    temps = families["gpuhealth_gpu_temperature_celsius"]
    assert len(temps) == 8
    for gpu in range(8):
        want = expected(gpu)
        assert values(temps, "gpuhealth_gpu_temperature_celsius", gpu=str(gpu)) == [want["temperature_c"]]
        assert values(families["gpuhealth_gpu_utilization_ratio"], "gpuhealth_gpu_utilization_ratio",
                      gpu=str(gpu)) == [pytest.approx(want["utilization_gpu_pct"] / 100)]
        assert values(families["gpuhealth_gpu_memory_used_bytes"], "gpuhealth_gpu_memory_used_bytes",
                      gpu=str(gpu)) == [want["memory_used_mib"] * 1024 * 1024]
    gpu0 = [s for s in temps if s.labels["gpu"] == "0"][0].labels
    assert gpu0 == {"gpu": "0", "uuid": "GPU-00000000-test-0000-0000-000000000000", "pci_bus_id": "0000:19:00.0",
                    "model": "NVIDIA H100 80GB HBM3"}  # the model the samples name (NVML's device name)
    power = families["gpuhealth_gpu_power_watts"]
    assert {s.labels["gpu"] for s in power} == {str(g) for g in range(8)} - {"5"}  # None -> no series
    assert values(families["gpuhealth_gpu_ecc_errors"], "gpuhealth_gpu_ecc_errors_total", gpu="0",
                  type="uncorrected") == [0]
    assert values(families["gpuhealth_xid_errors"], "gpuhealth_xid_errors_total", gpu="3", xid="79") == [1]
    active = families["gpuhealth_alert_active"]
    assert values(active, "gpuhealth_alert_active", rule="xid", gpu="3", key="79", severity="critical") == [1]
    assert values(active, "gpuhealth_alert_active", rule="gpu_count", gpu="") == [1]
    assert values(families["gpuhealth_check_status"], "gpuhealth_check_status", code="GH301",
                  severity="critical", gpu="0") == [1]
    assert families["gpuhealth_last_sample_timestamp_seconds"][0].value == T0 + 2
    assert "process_resident_memory_bytes" in families


def test_build_info_and_the_gpus_answering_gauge_from_the_first_scrape(live, clock):
    """A node whose driver was broken from boot has no GPU series at all: the answering gauge is there anyway,
    at 0, so that an alert rule (GpuhealthNoGpuAnswers) can fire; it counts only GPUs that answer now."""
    import gpuhealth

    app, _ = make(live)
    with TestClient(app) as client:
        families = metrics(client)
        assert values(families["gpuhealth_gpus_answering"], "gpuhealth_gpus_answering") == [0]
        (info,) = families["gpuhealth_build_info"]
        assert info.value == 1 and info.labels == {
            "version": gpuhealth.__version__, "python": "{}.{}.{}".format(*sys.version_info[:3])}
        feed(live, clock, *fleet_events(gpus=8, seconds=3))
        assert values(metrics(client)["gpuhealth_gpus_answering"], "gpuhealth_gpus_answering") == [8]
        feed(live, clock, GpuLost(clock.t + 1, 3, "GPU is lost"))
        assert values(metrics(client)["gpuhealth_gpus_answering"], "gpuhealth_gpus_answering") == [7]
        clock.t += live.stale_after + 1  # sampling stopped: nobody answers now
        assert values(metrics(client)["gpuhealth_gpus_answering"], "gpuhealth_gpus_answering") == [0]


def test_a_count_alert_has_one_series_per_missing_gpu_with_its_labels(live, clock):
    """So that Alertmanager can inhibit the series of a GPU whose gpu_lost already paged, and only that one."""
    feed(live, clock, *fleet_events(gpus=8, seconds=3))
    live.alert(Alert("gpu_count", None, "critical", "firing", "5 of 8", T0, about=(Basis(2), Basis(6), Basis(None))))
    app, _ = make(live)
    with TestClient(app) as client:
        active = metrics(client)["gpuhealth_alert_active"]
    series = {s.labels["gpu"]: s.labels for s in active if s.labels["rule"] == "gpu_count"}
    assert set(series) == {"2", "6", ""}
    assert series["2"]["pci_bus_id"] == "0000:4c:00.0" and series["2"]["uuid"].startswith("GPU-")
    assert series[""]["uuid"] == "" and all(s.value == 1 for s in active)


def test_xid_alerts_and_the_checks_xid_finding_carry_the_code_as_a_label(live, clock):
    """So that Alertmanager inhibits the full check's finding of the same Xid code only (equal: instance, gpu,
    xid): one series per Xid code the finding stands on, each at that Xid's severity, none for another rule."""
    feed(live, clock, *fleet_events(gpus=2, seconds=3))
    live.alert(Alert("xid", 0, "critical", "firing", "GPU 0 Xid 48", T0, "48"))
    live.alert(Alert("check:GH301", 0, "critical", "firing", "Xid 48 ...", T0, "GH301@GPU 0",
                     about=(Basis(0, "48", "critical", T0), Basis(0, "94", "warning", T0))))
    live.alert(Alert("temperature", 1, "warning", "firing", "GPU 1 at 88 °C", T0))
    app, _ = make(live)
    with TestClient(app) as client:
        active = metrics(client)["gpuhealth_alert_active"]
    got = sorted((s.labels["rule"], s.labels["gpu"], s.labels["xid"], s.labels["severity"]) for s in active)
    assert got == [("check:GH301", "0", "48", "critical"), ("check:GH301", "0", "94", "warning"),
                   ("temperature", "1", "", "warning"), ("xid", "0", "48", "critical")]


def test_none_readings_never_appear_as_values(live, clock):
    feed(live, clock, Sample(T0, 0, pci_address="0000:19:00.0"))  # a GPU that answered nothing
    app, _ = make(live)
    with TestClient(app) as client:
        families = metrics(client)
        text = client.get("/metrics").text
    for name, samples in families.items():
        if name.startswith("gpuhealth_gpu_"):
            assert samples == [], name
    assert "NaN" not in text and "gpuhealth_gpu_temperature_celsius{" not in text


def test_model_label_is_fixed_from_the_first_sample(live, clock):
    """The `model` label never changes: a change would start new Prometheus series."""
    named = Sample(T0, 0, pci_address="0000:19:00.0", uuid="GPU-a", temperature_c=50, name="NVIDIA H100 80GB HBM3")
    unnamed = Sample(T0, 1, pci_address="0000:3b:00.0", uuid="GPU-b", temperature_c=51)  # an old trace
    feed(live, clock, named, unnamed)
    app, _ = make(live)

    def labels(client) -> dict[str, dict[str, str]]:
        temps = metrics(client)["gpuhealth_gpu_temperature_celsius"]
        return {s.labels["gpu"]: s.labels for s in temps}

    with TestClient(app) as client:
        first = labels(client)
        assert first["0"]["model"] == "NVIDIA H100 80GB HBM3"  # at the very first scrape, before any check
        assert first["1"]["model"] == ""
        renamed = Gpu(index=1, name="NVIDIA A100-SXM4-80GB", pci_address="0000:3b:00.0", uuid="GPU-b")
        other = Gpu(index=0, name="something else", pci_address="0000:19:00.0", uuid="GPU-a")
        live.check_finished(Report(Snapshot(nvml=NvmlReport(ok=True, gpus=(other, renamed))), (), (), 20))
        feed(live, clock, Sample(T0 + 1, 0, pci_address="0000:19:00.0", uuid="GPU-a", temperature_c=50,
                                 name="NVIDIA H100 80GB HBM3"),
             Sample(T0 + 1, 1, pci_address="0000:3b:00.0", uuid="GPU-b", temperature_c=51))
        assert labels(client) == first
        # the page may still show the name the check found
        assert client.get("/api/v1/gpus").json()["gpus"][1]["model"] == "NVIDIA A100-SXM4-80GB"


def test_card_status_comes_from_alerts_and_findings(live, clock):
    """GPU 0: a critical finding; GPU 1: healthy; GPU 2: a warning alert; GPU 3: lost."""
    feed(live, clock, *fleet_events(gpus=4, seconds=3))
    app, checks = make(live)
    live.alert(Alert("temperature", 2, "warning", "firing", "GPU 2 at 84 °C (alert at 82 °C, slowdown at 87 °C)",
                     T0, ""))
    live.check_finished(report())
    # the monitor turns the finding into a check: alert too; the card must not list it twice
    live.alert(Alert("check:GH301", 0, "critical", "firing", "Xid 48: double-bit ECC error", T0, "GH301@GPU 0"))
    feed(live, clock, GpuLost(T0 + 3, 3, "GPU is lost"))
    with TestClient(app) as client:
        gpus = {g["gpu"]: g for g in client.get("/api/v1/gpus").json()["gpus"]}
    assert [gpus[g]["status"] for g in range(4)] == ["critical", "ok", "warning", "lost"]
    assert gpus[0]["reason"] == "Xid 48: double-bit ECC error"
    assert gpus[0]["reasons"] == [{"severity": "critical", "text": "Xid 48: double-bit ECC error"}]
    assert gpus[1]["reason"] == "" and gpus[1]["reasons"] == []
    assert gpus[2]["reason"].startswith("GPU 2 at 84 °C")
    assert gpus[3]["reason"] == "Not answering: GPU is lost"
    # the alert resolves: the card is OK again
    live.alert(Alert("temperature", 2, "warning", "resolved", "resolved: GPU 2 at 80 °C", T0 + 4, ""))
    assert live.gpus()[2]["status"] == "ok"
    for gpu in live.gpus():  # no internal keys in what the card shows
        assert all("GH301@" not in r["text"] and "check:" not in r["text"] for r in gpu["reasons"])


def test_processes_per_gpu(clock):
    names = {4000: "python3"}
    live = LiveState(1.0, clock=clock, source="test", process_names=names.get)
    feed(live, clock, *fleet_events(gpus=2, seconds=2))
    feed(live, clock, Sample(T0 + 2, 1, processes=((4001, 1501.0), (77, None), (78, 9000.0))))
    gpus = live.gpus()
    assert gpus[0]["processes"] == [{"pid": 4000, "name": "python3", "memory_mib": 500.0}]
    # the largest first; a pid without a known name or memory says so with None
    assert gpus[1]["processes"] == [{"pid": 78, "name": None, "memory_mib": 9000.0},
                                    {"pid": 4001, "name": None, "memory_mib": 1501.0},
                                    {"pid": 77, "name": None, "memory_mib": None}]
    # a replayed trace's pids are another host's: no names looked up in this host's /proc
    assert LiveState(1.0, source="replay:x.jsonl").process_names is None
    assert state_module.proc_comm(os.getpid()) and state_module.proc_comm(2**22 + 7) is None


def test_process_names_are_read_outside_the_state_lock_and_off_the_event_loop(clock):
    """/proc/<pid>/comm can be slow (a process in exit): its read held the state lock, on the event loop,
    so one slow read stalled the monitor thread and every request."""
    import asyncio
    import threading

    seen: list[tuple[bool, bool]] = []  # (lock held, an event loop running in this thread)

    def name(pid: int) -> str:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append((live._lock.locked(), on_loop))
        return "python3"

    live = LiveState(1.0, clock=clock, source="test", process_names=name)
    feed(live, clock, Sample(T0, 0, processes=((4000, 10.0),)))
    queue = asyncio.Queue()
    live._streams.add(queue)  # a listener: record() builds the samples payload too
    feed(live, clock, Sample(T0 + 1, 0, processes=((4000, 10.0),)))
    assert seen == [(False, False)] and threading.current_thread() is threading.main_thread()
    app, _ = make(live)
    with TestClient(app) as client:
        cards = client.get("/api/v1/gpus").json()["gpus"]
    assert cards[0]["processes"] == [{"pid": 4000, "name": "python3", "memory_mib": 10.0}]
    assert seen[1:] == [(False, False)]


def test_busy_idle_and_held_idle_seconds_count_up_from_the_first_scrape(live, clock):
    # generated samples: 0-100 s busy, 100-160 s idle with the job's memory held, 160-400 s idle and free
    ident = dict(pci_address="0000:19:00.0", uuid="GPU-0")
    app, _ = make(live)
    with TestClient(app) as client:
        feed(live, clock, Sample(T0, 0, utilization_gpu_pct=90, process_count=1, **ident))
        first = metrics(client)
        label = {"gpu": "0", "uuid": "GPU-0", "pci_bus_id": "0000:19:00.0"}
        for kind in ("busy", "idle", "held_idle"):
            assert values(first[f"gpuhealth_gpu_{kind}_seconds"], f"gpuhealth_gpu_{kind}_seconds_total",
                          **label) == [0.0]
        for t in range(1, 401):
            util, procs = (90, 1) if t < 100 else (0, 1) if t < 160 else (0, 0)
            feed(live, clock, Sample(T0 + t, 0, utilization_gpu_pct=util, process_count=procs, **ident))
        families = metrics(client)
        card = client.get("/api/v1/gpus").json()["gpus"][0]
    got = {kind: values(families[f"gpuhealth_gpu_{kind}_seconds"], f"gpuhealth_gpu_{kind}_seconds_total", **label)
           for kind in ("busy", "idle", "held_idle")}
    assert got == {"busy": [100.0], "idle": [300.0], "held_idle": [60.0]}
    assert card["idle_for_s"] == 300.0


def test_no_stale_series_after_a_gpu_disappears(live, clock):
    feed(live, clock, Sample(T0, 0, temperature_c=50, power_w=100), Sample(T0, 1, temperature_c=51, power_w=101))
    app, _ = make(live)
    with TestClient(app) as client:
        assert {s.labels["gpu"] for s in metrics(client)["gpuhealth_gpu_temperature_celsius"]} == {"0", "1"}
        # GPU 1 stops answering: after stale_after (10 s at a 1 s interval) its readings are gone
        for i in range(1, 12):
            feed(live, clock, Sample(T0 + i, 0, temperature_c=50, power_w=100))
        families = metrics(client)
        assert {s.labels["gpu"] for s in families["gpuhealth_gpu_temperature_celsius"]} == {"0"}
        assert {s.labels["gpu"] for s in families["gpuhealth_gpu_power_watts"]} == {"0"}
        assert client.get("/api/v1/gpus").json()["gpus"][1]["state"] == "stale"
        # GPU 0 is lost: its readings go at once, and the verdict says so
        feed(live, clock, GpuLost(T0 + 12, 0, "GPU is lost"))
        assert metrics(client)["gpuhealth_gpu_temperature_celsius"] == []
        assert client.get("/api/v1/status").json()["verdict"] == "DEGRADED"
        # and it answers again
        feed(live, clock, Sample(T0 + 13, 0, temperature_c=52))
        assert values(metrics(client)["gpuhealth_gpu_temperature_celsius"], "gpuhealth_gpu_temperature_celsius",
                      gpu="0") == [52]


def test_token_required_off_loopback(live, clock):
    feed(live, clock, *fleet_events(gpus=1, seconds=1))
    app, _ = make(live, token=TOKEN)
    with TestClient(app) as client:
        for path in ("/metrics", "/api/v1/status", "/api/v1/gpus", "/api/v1/history", "/api/v1/alerts",
                     "/api/v1/findings", "/api/v1/events", "/api/v1/openapi.json"):
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert client.get(path, headers={"Authorization": "Bearer wrong-token-wrong-token"}).status_code == 401
        assert client.post("/api/v1/check").status_code == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/api/v1/status", headers=good).status_code == 200
        assert client.get("/metrics", headers=good).status_code == 200
        for public in ("/", "/healthz", "/static/app.js", "/favicon.ico"):  # no data in these
            assert client.get(public).status_code == 200, public


def test_serve_refuses_a_public_address_without_a_token():
    with pytest.raises(ServeError, match="without a token"):
        check_token("0.0.0.0", None)
    with pytest.raises(ServeError, match="without a token"):
        check_token("gpu-node-17.example", None)
    with pytest.raises(ServeError, match="at least 16"):
        check_token("0.0.0.0", "short")
    assert check_token("127.0.0.1", None) is None and check_token("::1", None) is None
    assert check_token("0.0.0.0", TOKEN) == TOKEN
    result = CliRunner().invoke(serve, ["--listen", "0.0.0.0:0"], env={"GPUHEALTH_TOKEN": None})
    assert result.exit_code == 3 and "without a token" in result.output
    assert parse_listen("[::1]:9835") == ("::1", 9835) and parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    for bad in ("9835", "host:", "host:99999", ":80"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_check_is_rate_limited(live, clock):
    app, _ = make(live, check_period_s=30)
    fake = Clock(1000.0)
    app.state.limiter.clock = fake
    with TestClient(app) as client:
        first = client.post("/api/v1/check")
        assert first.status_code == 200
        doc = first.json()
        assert doc["verdict"] == "BROKEN" and doc["findings"][0]["code"] == "GH301"
        assert doc["findings"][0]["fixes"][0]["command"] == "sudo nvidia-smi --gpu-reset -i 0"
        fake.t += 10
        second = client.post("/api/v1/check")
        assert second.status_code == 429 and second.headers["retry-after"] == "20"
        fake.t += 21
        assert client.post("/api/v1/check").status_code == 200
        assert client.get("/api/v1/findings").json()["findings"][0]["code"] == "GH301"


def test_a_failing_check_is_reported(live):
    def broken():
        raise RuntimeError("probe exploded")

    app, _ = make(live, checks=ServeChecks(0, broken, live, log=lambda text: None))
    with TestClient(app) as client:
        doc = client.post("/api/v1/check").json()
    assert "probe exploded" in doc["error"] and live.status()["check"]["error"]


def test_oversized_and_malformed_requests_are_refused(live):
    app, _ = make(live)
    with TestClient(app) as client:
        assert client.post("/api/v1/check", content=b"x" * 10_000).status_code == 413
        chunked = client.post("/api/v1/check", content=iter([b"x" * 3000, b"y" * 3000]))
        assert chunked.status_code == 413
        assert client.get("/api/v1/history", params={"metric": "t" * 3000}).status_code == 414
        assert client.post("/api/v1/check", headers={"content-length": "abc"}).status_code == 400
        assert client.put("/api/v1/check").status_code == 405
        assert client.post("/api/v1/status").status_code == 405


def test_security_headers_on_every_response(live):
    app, _ = make(live, token=TOKEN)
    with TestClient(app) as client:
        for response in (client.get("/"), client.get("/static/app.js"), client.get("/api/v1/status"),
                         client.get("/nowhere"), client.post("/api/v1/check", content=b"x" * 9000)):
            for name, value in SECURITY_HEADERS:
                assert response.headers.get(name.decode()) == value.decode(), (response.url, name)
        csp = client.get("/").headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert client.get("/api/v1/status", headers={"Authorization": f"Bearer {TOKEN}"}).headers[
            "cache-control"] == "no-store"


def test_loopback_refuses_foreign_host_headers_and_cross_origin_posts(live):
    app, _ = make(live, allowed_hosts=allowed_hosts_for("127.0.0.1", 9835))
    with TestClient(app, base_url="http://127.0.0.1:9835") as client:
        assert client.get("/api/v1/status").status_code == 200
        assert client.get("/api/v1/status", headers={"host": "localhost:9835"}).status_code == 200
        assert client.get("/api/v1/status", headers={"host": "evil.example:9835"}).status_code == 421
        refused = client.post("/api/v1/check", headers={"origin": "http://evil.example"})
        assert refused.status_code == 403
        same = client.post("/api/v1/check", headers={"origin": "http://127.0.0.1:9835"})
        assert same.status_code == 200


def test_too_many_event_streams(live, monkeypatch):
    monkeypatch.setattr(state_module, "MAX_STREAMS", 0)
    app, _ = make(live)
    with TestClient(app) as client:
        response = client.get("/api/v1/events")
    assert response.status_code == 503 and response.headers["retry-after"]


def test_event_stream_pushes_samples_alerts_and_findings(live, clock):
    feed(live, clock, *fleet_events(gpus=2, seconds=1))
    app, checks = make(live)
    with app_in_thread(app) as base, httpx2.Client(base_url=base, timeout=10) as client:
        with client.stream("GET", "/api/v1/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            seen: list[tuple[str, dict]] = []

            def next_event() -> tuple[str, dict]:
                name = None
                for line in lines:
                    if line.startswith("event: "):
                        name = line.removeprefix("event: ")
                    elif line.startswith("data: ") and name:
                        seen.append((name, json.loads(line.removeprefix("data: "))))
                        return seen[-1]
                raise AssertionError("stream ended")

            assert next_event()[0] == "status"
            name, doc = next_event()
            assert name == "samples" and [g["gpu"] for g in doc["gpus"]] == [0, 1]
            wait_for(lambda: live.stream_count == 1, 5, "the stream to subscribe")
            feed(live, clock, Sample(T0 + 5, 0, temperature_c=77, pci_address="0000:19:00.0"))
            name, doc = next_event()
            assert name == "samples" and doc["gpus"][0]["readings"]["temperature_c"] == 77
            live.alert(Alert("temperature", 0, "warning", "firing", "GPU 0 at 88 °C", T0 + 5))
            name, doc = next_event()
            assert name == "alert" and doc["rule"] == "temperature" and doc["state"] == "firing"
            assert next_event()[0] == "status"
            checks.run_now()
            names = [next_event()[0] for _ in range(3)]  # status (running), findings, status
            assert names == ["status", "findings", "status"]
            assert seen[-2][1]["findings"][0]["code"] == "GH301"
    wait_for(lambda: live.stream_count == 0, 5, "the stream to close")


def test_wrapped_monitor_feeds_the_state(tmp_path):
    trace = write_fleet_trace(tmp_path / "t.jsonl", gpus=4, seconds=40)
    from gpuhealth.monitor.config import load_config

    mon = Monitor(ReplaySource(trace, speed=0), RuleSet.from_config(load_config()["rules"]), Dispatcher([]),
                  interval=1.0)
    live, checks = wrap_monitor(mon, "replay:t", report)
    assert isinstance(mon.dispatcher.notifiers[-1], StateNotifier)
    while not mon.source.exhausted:
        mon.step()
    assert [g["gpu"] for g in live.gpus()] == [0, 1, 2, 3]
    active = live.alerts()["active"]
    assert any(a["rule"] == "xid" and a["gpu"] == 3 for a in active)
    assert checks.run_now()
    assert live.wait_check(0, 10)
    wait_for(lambda: not checks._thread.is_alive(), 5, "the check thread to end")
    mon.step()  # the monitor's loop turns the findings into check:<code> alerts
    assert live.findings()["verdict"] == "BROKEN"
    assert any(a["rule"] == "check:GH301" for a in live.alerts()["active"])


def test_commands_module_imports_only_click():
    code = ("import sys, gpuhealth.web.commands; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'uvicorn', 'prometheus_client', "
            "'httpx', 'httpx2', 'rich', 'sqlite3'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_serve_command_help():
    result = CliRunner().invoke(serve, ["--help"])
    assert result.exit_code == 0 and "--listen" in result.output and "GPUHEALTH_TOKEN" in result.output


def test_card_reason_is_short_and_has_no_driver_names():
    long = ("Xid 48 (ROBUST_CHANNEL_GPU_ECC_DBE): Double-bit (uncorrectable) ECC error; also reported to the "
            "application; a GPU reset or reboot clears it at 2024-11-15T12:02:03,470068+00:00 - NVIDIA's action: "
            "WORKFLOW_XID_48")
    assert state_module.short_reason(long) == "Xid 48: Double-bit (uncorrectable) ECC error"
    alert = "GPU 2 at 84 °C (alert at 82 °C, slowdown at 87 °C)"
    assert state_module.short_reason(alert) == alert  # short already: kept whole
    words = "word " * 60
    cut = state_module.short_reason(words)
    assert len(cut) <= state_module.REASON_CHARS + 1 and cut.endswith("word…")


def test_eviction_spares_a_request_whose_body_is_still_arriving():
    """Past the connection limit the guard closes the longest-idle connections. A request whose head is in
    and whose body is still arriving (h11 SEND_BODY) is in progress, not idle: it was evicted first."""
    import asyncio

    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from gpuhealth.web.guard import guarded_protocol

    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.closed = False

        def get_extra_info(self, name, default=None):
            return {"sockname": ("127.0.0.1", 9400), "peername": ("127.0.0.1", 50000)}.get(name, default)

        def is_closing(self) -> bool:
            return self.closed

        def close(self) -> None:
            self.closed = True

        def write(self, data) -> None:
            pass

        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

    async def app(scope, receive, send):
        if scope["type"] == "http":
            while (await receive()).get("more_body"):  # an upload: reads its body as it comes
                pass

    async def scenario() -> dict[str, bool]:
        config = Config(app=app, lifespan="off", log_level="critical")
        config.load()
        protocol, state = guarded_protocol(60.0, max_connections=2), ServerState()
        transports = {"uploading": Transport(), "idle": Transport(), "newcomer": Transport()}
        first = protocol(config, state, {})
        first.connection_made(transports["uploading"])  # the oldest: its request began first
        first.data_received(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
        await asyncio.sleep(0.05)
        protocol(config, state, {}).connection_made(transports["idle"])  # it sent nothing yet
        protocol(config, state, {}).connection_made(transports["newcomer"])  # past the limit: one must go
        closed = {name: transport.closed for name, transport in transports.items()}
        for connection in list(state.connections):
            connection.transport.close()
            connection.connection_lost(None)
        for task in list(state.tasks):
            task.cancel()
        await asyncio.sleep(0)
        return closed

    assert asyncio.run(scenario()) == {"uploading": False, "idle": True, "newcomer": False}


def test_serve_replays_at_speed_0_unpaced(tmp_path):
    """serve wraps the source (TeeSource): it must pass on "not paced", or `serve --replay-speed 0` waits
    --interval between samples (a 10-minute trace took 10 minutes)."""
    from gpuhealth.web.state import LiveState, TeeSource

    trace = write_fleet_trace(tmp_path / "t.jsonl", gpus=1, seconds=5)
    assert TeeSource(ReplaySource(trace, speed=0), LiveState()).paced is False
    assert TeeSource(ReplaySource(trace, speed=1), LiveState()).paced is True


def test_a_finished_replay_is_said_so_and_never_lost(live, clock):
    """Issue 24: when the trace ran out, every GPU stopped sending because the file ended. The page said
    "0 of 8 answering" and marked all eight LOST; now the status says "replay finished" and the cards keep
    their last readings and their own status. A GPU the trace itself lost stays lost."""
    feed(live, clock, *fleet_events(gpus=3, seconds=5))
    feed(live, clock, GpuLost(clock.t, 2, "GPU is lost"))
    live.set_monitor(False, "replay finished", replay_finished=True)
    clock.t += live.stale_after + 60  # long after the last sample
    app, _ = make(live)
    with TestClient(app) as client:
        status = client.get("/api/v1/status").json()
        assert status["monitor"]["replay_finished"] is True
        assert status["summary"].startswith("replay finished: 3 GPU(s) in the trace, 1 lost")
        assert "answering" not in status["summary"]
        gpus = client.get("/api/v1/gpus").json()["gpus"]
        assert [g["state"] for g in gpus] == ["ended", "ended", "lost"]
        assert [g["status"] for g in gpus[:2]] == ["ok", "ok"] and gpus[2]["status"] == "lost"
        assert gpus[0]["readings"]["temperature_c"] == fleet_events(gpus=3, seconds=1)[0].temperature_c
    # a monitor that stopped for another reason: its silent GPUs are stale, as before
    live.set_monitor(False, "stopped")
    with TestClient(app) as client:
        assert [g["state"] for g in client.get("/api/v1/gpus").json()["gpus"]] == ["stale", "stale", "lost"]
        assert "0 of 3 GPU(s) answering" in client.get("/api/v1/status").json()["summary"]
