"""A real Prometheus scrapes a real `gpuhealth serve` fed by a generated trace; promtool checks the
deploy/prometheus files. Without prometheus/promtool: skipped, or FAILED when CI is set."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys

import httpx2
import pytest
from web_fakes import (
    H100_MODEL,
    NO_POWER_GPU,
    REPO,
    XID,
    XID_GPU,
    expected,
    prom_query,
    ready_on,
    record_bundle,
    serve_process,
    start_on_a_free_port,
    stop_process,
    tool,
    wait_for,
    write_fleet_trace,
)

from gpuhealth.web.server import ServeError, check_token

DEPLOY = REPO / "deploy" / "prometheus"


def test_promtool_checks_rules_and_config(tmp_path):
    promtool = tool("promtool")
    rules = sorted(DEPLOY.glob("*.rules.yml"))
    assert rules
    subprocess.run([promtool, "check", "rules", *map(str, rules)], check=True, capture_output=True)
    subprocess.run([promtool, "test", "rules", "gpuhealth.rules.test.yml"], check=True, capture_output=True,
                   cwd=DEPLOY)
    # as shipped: the token file it names is the placeholder beside it
    subprocess.run([promtool, "check", "config", "prometheus.yml"], check=True, capture_output=True, cwd=DEPLOY)


def test_promtool_check_metrics_is_clean_on_metrics_and_the_textfile(tmp_path):
    """`promtool check metrics` lints names, units, HELP and TYPE: serve's /metrics (8 GPUs, alerts, a check)
    and `check --format prometheus` (the textfile of the shipped example) say nothing."""
    from prometheus_client.exposition import generate_latest
    from web_fakes import T0, fleet_events

    from gpuhealth.web.metrics import make_registry
    from gpuhealth.web.state import LiveState

    promtool = tool("promtool")
    state = LiveState(1.0, clock=lambda: T0 + 3)
    state.record(fleet_events(gpus=8, seconds=3))
    exposition = generate_latest(make_registry(state)).decode()
    assert "gpuhealth_build_info{" in exposition and "gpuhealth_gpus_answering 8.0" in exposition
    textfile = subprocess.run([sys.executable, "-m", "gpuhealth", "check", "--format", "prometheus", "--from",
                               str(REPO / "examples" / "h100x8-xid-ecc.tar.gz")], capture_output=True, text=True,
                              timeout=60)
    assert "gpuhealth_check_status{" in textfile.stdout, textfile.stderr  # (exits 0: a textfile, not a gate)
    for text in (exposition, textfile.stdout):
        linted = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                                timeout=60)
        assert (linted.returncode, linted.stdout + linted.stderr) == (0, "")


def test_the_kubernetes_variant_in_the_comments_is_a_valid_config_naming_nodes(tmp_path):
    """prometheus.yml's commented kubernetes_sd_configs, put in place of static_configs as it says: a config
    promtool accepts, whose `instance` is the node's name (a pod IP changes with every restart of the pod).
    Debian's Prometheus is built without Kubernetes discovery ("field kubernetes_sd_configs not found"), so
    promtool checks the relabelling with a static target carrying the labels Kubernetes discovery sets."""
    promtool = tool("promtool")
    text = (DEPLOY / "prometheus.yml").read_text()
    head, rest = text.split("    static_configs:\n", 1)
    comment = rest.split("replace static_configs by:\n", 1)[1]
    variant = "".join(line.replace("    # ", "    ", 1) + "\n" for line in comment.splitlines()
                      if line.startswith("    # ") and not line.startswith("    #   # "))
    assert "kubernetes_sd_configs:" in variant and "target_label: instance" in variant
    assert "__meta_kubernetes_pod_node_name" in variant.split("target_label: instance")[0].rsplit("- ", 1)[1]
    (tmp_path / "prometheus.yml").write_text(head + variant)
    done = subprocess.run([promtool, "check", "config", "prometheus.yml"], capture_output=True, text=True, cwd=tmp_path)
    if "field kubernetes_sd_configs not found" in done.stdout + done.stderr:
        static = ("    static_configs:\n      - targets: ['10.0.0.7:9835']\n        labels: {"
                  "__meta_kubernetes_pod_node_name: gpu-node-17, "
                  "__meta_kubernetes_pod_label_app_kubernetes_io_name: gpuhealth-serve}\n")
        variant = variant.replace("    kubernetes_sd_configs:\n      - role: pod\n", static)
        assert "static_configs" in variant
        (tmp_path / "prometheus.yml").write_text(head + variant)
    for name in ("gpuhealth.token", "gpuhealth.rules.yml"):
        shutil.copy(DEPLOY / name, tmp_path)
    done = subprocess.run([promtool, "check", "config", "prometheus.yml"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr + head + variant


def test_the_shipped_token_is_a_placeholder_no_node_accepts():
    placeholder = (DEPLOY / "gpuhealth.token").read_text()
    assert placeholder.strip() == "REPLACE-ME"
    with pytest.raises(ServeError, match="at least"):
        check_token("0.0.0.0", placeholder)


def test_alertmanager_example_routes_by_severity_to_receivers_it_defines():
    path = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
    text = path.read_text()
    defined = set(re.findall(r"^  - name: (\S+)", text, re.MULTILINE))
    used = set(re.findall(r"receiver: (\S+)", text))
    assert used and used <= defined
    assert "severity=\"critical\"" in text and "group_by: [alertname, instance]" in text
    amtool = tool("amtool")  # Debian: prometheus-alertmanager (.ci/run installs it); fails under CI when missing
    subprocess.run([amtool, "check-config", str(path)], check=True, capture_output=True)


def test_prometheus_scrapes_serve(tmp_path):
    prometheus = tool("prometheus")
    trace = write_fleet_trace(tmp_path / "fleet.jsonl", gpus=8, seconds=900)
    bundle = record_bundle(tmp_path / "bundle")
    token = "prometheus-test-token-0123456789"
    with serve_process(tmp_path, "--source", f"replay:{trace}", "--check-from", str(bundle),
                       env={"GPUHEALTH_TOKEN": token}) as base:
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx2.post(f"{base}/api/v1/check", headers=auth, timeout=60).status_code == 200  # model names
        target = base.removeprefix("http://")
        (tmp_path / "token").write_text(token + "\n")
        shutil.copy(DEPLOY / "gpuhealth.rules.yml", tmp_path)
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files: [gpuhealth.rules.yml]\n"
            "scrape_configs:\n  - job_name: gpuhealth\n    authorization:\n      type: Bearer\n"
            "      credentials_file: token\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        with contextlib.ExitStack() as stack:
            log_path = tmp_path / "prometheus.log"

            start = prometheus_starter(stack, prometheus, tmp_path, log_path)
            port, _ = start_on_a_free_port(start, log_path, ready_on, "Prometheus")
            with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
                temps = wait_for(lambda: len(r := prom_query(client, "gpuhealth_gpu_temperature_celsius")) == 8 and r,
                                 40, "eight temperature series")
                up = prom_query(client, 'up{job="gpuhealth"}')
                assert [s["value"][1] for s in up] == ["1"]
                for series in temps:
                    gpu = int(series["metric"]["gpu"])
                    assert float(series["value"][1]) == expected(gpu)["temperature_c"]
                    assert series["metric"]["model"] == H100_MODEL
                    assert series["metric"]["pci_bus_id"] and series["metric"]["uuid"].startswith("GPU-")
                power = prom_query(client, "gpuhealth_gpu_power_watts")
                assert sorted(int(s["metric"]["gpu"]) for s in power) == [g for g in range(8) if g != NO_POWER_GPU]
                util = prom_query(client, 'gpuhealth_gpu_utilization_ratio{gpu="2"}')
                assert float(util[0]["value"][1]) == expected(2)["utilization_gpu_pct"] / 100
                memory = prom_query(client, 'gpuhealth_gpu_memory_used_bytes{gpu="7"}')
                assert float(memory[0]["value"][1]) == expected(7)["memory_used_mib"] * 1024 * 1024
                xid = prom_query(client, "gpuhealth_xid_errors_total")
                assert [(s["metric"]["gpu"], s["metric"]["xid"], s["value"][1]) for s in xid] == [
                    (str(XID_GPU), str(XID), "1")]
                alert = prom_query(client, 'gpuhealth_alert_active{rule="xid"}')
                assert alert[0]["metric"]["gpu"] == str(XID_GPU) and alert[0]["metric"]["severity"] == "critical"
                status = prom_query(client, 'gpuhealth_check_status{code="GH301",severity="critical"}')
                assert status and all(float(s["value"][1]) >= 1 for s in status)
                age = prom_query(client, "time() - gpuhealth_last_sample_timestamp_seconds")
                assert float(age[0]["value"][1]) < 30
                # the deployed alert rules evaluate against the real series: the Xid alert fires
                firing = wait_for(lambda: [a for a in client.get("/api/v1/alerts").json()["data"]["alerts"]
                                           if a["labels"]["alertname"] == "GpuhealthXid"], 20, "GpuhealthXid")
                assert firing[0]["labels"]["gpu"] == str(XID_GPU)
                rules = client.get("/api/v1/rules").json()["data"]["groups"]
                assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules



def test_a_port_taken_before_prometheus_binds_it_is_picked_again(tmp_path, monkeypatch):
    """The race free_port() leaves open, made certain: the first port offered is already listened on by
    another socket. Prometheus exits with "address already in use" and starts again on the next port."""
    import socket

    import web_fakes

    prometheus = tool("prometheus")
    (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        offered = iter([busy])
        real = web_fakes.free_port
        monkeypatch.setattr(web_fakes, "free_port", lambda: next(offered, None) or real())
        with contextlib.ExitStack() as stack:
            log_path = tmp_path / "prometheus.log"
            starts: list[int] = []
            start = prometheus_starter(stack, prometheus, tmp_path, log_path, starts)
            port, proc = start_on_a_free_port(start, log_path, ready_on, "Prometheus")
            assert starts[0] == busy and port == starts[-1] != busy and len(starts) == 2
            assert proc.poll() is None and ready_on(port)


def prometheus_starter(stack: contextlib.ExitStack, prometheus: str, tmp_path, log_path,
                       starts: list[int] | None = None):
    """start(port) for start_on_a_free_port: Prometheus on tmp_path's prometheus.yml, logging to log_path,
    stopped when the stack closes; each port tried is appended to `starts` when given."""
    def start(port: int) -> subprocess.Popen:
        if starts is not None:
            starts.append(port)
        log = stack.enter_context(open(log_path, "w"))
        proc = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        stack.callback(stop_process, proc)
        return proc
    return start
