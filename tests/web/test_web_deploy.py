"""The deploy files name only metrics `gpuhealth serve` exports, and the Grafana dashboard has a
data-source variable (so it imports into any Grafana)."""

from __future__ import annotations

import json
import re

from web_fakes import REPO, T0, fleet_events

from gpuhealth.web.metrics import make_registry
from gpuhealth.web.state import LiveState

DEPLOY = REPO / "deploy"
OURS = re.compile(r"\b(gpuhealth_[a-z_]+|process_[a-z_]+)\b")


def exported() -> set[str]:
    from prometheus_client.exposition import generate_latest

    state = LiveState(1.0, clock=lambda: T0 + 1)
    state.record(fleet_events(gpus=2, seconds=2))
    text = generate_latest(make_registry(state)).decode()
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")} | {
        line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")} | {
        "gpuhealth_check_last_run_timestamp_seconds"}


def test_grafana_dashboard_uses_a_datasource_variable_and_our_metrics():
    dashboard = json.loads((DEPLOY / "grafana" / "gpuhealth-fleet.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    names = exported()
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            for metric in OURS.findall(target["expr"]):
                assert metric in names, (panel["title"], metric)


def test_alert_rules_use_our_metrics():
    names = exported()
    text = (DEPLOY / "prometheus" / "gpuhealth.rules.yml").read_text()
    exprs = re.findall(r"expr: (.*)", text)
    assert len(exprs) >= 12
    for expr in exprs:
        for metric in OURS.findall(expr):
            assert metric in names, metric
    rules = set(re.findall(r'rule="([a-z_]+)"', text))
    from gpuhealth.monitor.rules import RULES

    # one Prometheus alert per monitor rule, and one for the correlation table's alerts (monitor/correlate.py)
    assert rules == set(RULES) | {"correlate"}


def test_the_serve_daemonset_runs_a_valid_serve_whose_probes_it_answers_unprivileged():
    # Checked on the text (PyYAML is no dependency): every value below is one line of the manifest.
    from gpuhealth.web.commands import serve
    from gpuhealth.web.security import PUBLIC_PATHS

    text = (DEPLOY / "kubernetes" / "gpuhealth-serve-daemonset.yaml").read_text()
    (args,) = re.findall(r"^\s+args: (\[.*\])$", text, re.M)
    command, *options = json.loads(args)
    assert command == "serve"
    context = serve.make_context("serve", list(options))  # options `gpuhealth serve` knows, values it accepts
    port = context.params["listen"].rsplit(":", 1)[1]
    assert re.search(rf"- name: http\n\s+containerPort: {port}\n", text)
    probes = re.findall(r"(liveness|readiness)Probe:\n\s+httpGet:\n\s+path: (\S+)\n\s+port: (\S+)\n", text)
    assert sorted(kind for kind, _, _ in probes) == ["liveness", "readiness"]
    # the probes carry no token: the path must be one that answers without it (the pod listens off loopback)
    assert all(path == "/healthz" and path in PUBLIC_PATHS and port_name == "http" for _, path, port_name in probes)
    # the token comes from the variable `serve` reads
    assert "- name: GPUHEALTH_TOKEN\n" in text
    assert next(p for p in serve.params if p.name == "token").envvar == "GPUHEALTH_TOKEN"
    # unprivileged: no privileged mode, no host namespaces; one added capability, explained beside it
    assert not re.search(r"privileged: true|hostPID|hostNetwork|hostIPC", text)
    assert 'drop: ["ALL"]' in text and re.search(r"# .*dmesg.*\n\s+add: \[\"SYSLOG\"\]", text)


def test_every_deploy_path_the_docs_and_files_name_exists():
    """An operator copies what the header says: `sudo cp deploy/gpuhealth-monitor.service` named a file that
    was never there (it is in deploy/systemd/)."""
    named = re.compile(r"(?<![\w/.-])deploy/[A-Za-z0-9_./-]*[A-Za-z0-9_/-]")  # not a URL's .../deploy/...
    texts = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(p for p in DEPLOY.rglob("*") if p.is_file()),
             *(REPO / "examples").rglob("*.md"), *(REPO / "src").rglob("*.py")]
    missing = {(str(p.relative_to(REPO)), path) for p in texts
               for path in named.findall(p.read_text(encoding="utf-8", errors="replace"))
               if not (REPO / path).exists()}
    assert missing == set()
