"""`gpuhealth fleet` against a fake Prometheus HTTP API: a thread answering /api/v1/query with
hand-written vectors (the series names and labels are the ones `gpuhealth serve` exports; see
tests/web/test_web_metrics*.py): ordering, exits and malformed answers. The same command against a real
Prometheus scraping three nodes: tests/web/test_web_fleet_e2e.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main

NODE = {"job": "gpuhealth"}


def _vector(*items: tuple[dict[str, str], float]) -> list[dict]:
    return [{"metric": {**NODE, **labels}, "value": [1700000000.0, str(value)]} for labels, value in items]


ANSWERS = {
    'up{job="gpuhealth"}': _vector(({"instance": "node1:9835"}, 1), ({"instance": "node2:9835"}, 1),
                                   ({"instance": "node3:9835"}, 0)),
    'gpuhealth_alert_active{job="gpuhealth"}': _vector(
        # escalated by the node (monitor/boots.py: the Xid 79 came back after reboots): its labels say so
        ({"instance": "node2:9835", "rule": "xid", "key": "79", "severity": "critical", "gpu": "3",
          "uuid": "GPU-3", "pci_bus_id": "00000000:1C:00.0", "action": "hardware_inspection",
          "impact": "node_unusable"}, 1),
        ({"instance": "node1:9835", "rule": "temperature", "key": "", "severity": "warning", "gpu": "0"}, 1),
        # a serve node turns each finding of its check into an alert too: the finding's row below says it once
        ({"instance": "node1:9835", "rule": "check:GH604", "key": "GH604@host", "severity": "warning", "gpu": ""}, 1)),
    'gpuhealth_check_status{job="gpuhealth"}': _vector(
        ({"instance": "node1:9835", "code": "GH604", "slug": "persistence-off", "severity": "warning", "gpu": "",
          "action": "fix_host_software", "impact": "degraded"}, 1),
        ({"instance": "node1:9835", "code": "GH999", "slug": "x", "severity": "info", "gpu": ""}, 1)),
    'gpuhealth_gpu_utilization_ratio{job="gpuhealth"} == 0': _vector(({"instance": "node1:9835", "gpu": "5"}, 0)),
    'gpuhealth_remediations{job="gpuhealth"} > 0': _vector(({"instance": "node2:9835"}, 3)),
    # node1's hot GPU is acknowledged (`gpuhealth ack temperature --gpu 0`): listed, marked
    'gpuhealth_alert_acknowledged{job="gpuhealth"}': _vector(
        ({"instance": "node1:9835", "rule": "temperature", "key": "", "severity": "warning", "gpu": "0"}, 1)),
}


class FakePrometheus(BaseHTTPRequestHandler):
    answers: dict[str, list] = ANSWERS

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        expr = parse_qs(url.query).get("query", [""])[0]
        if url.path != "/api/v1/query" or expr not in self.answers:
            body = {"status": "error", "error": f"unexpected {url.path} {expr!r}"}
        else:
            body = {"status": "success", "data": {"resultType": "vector", "result": self.answers[expr]}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_fleet_lists_worst_first_and_exits_like_check(prometheus):
    result = CliRunner().invoke(main, ["fleet", "--prometheus", prometheus, "--format", "json"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.output)
    assert report["nodes"] == 3
    rows = [(r["severity"], r["instance"], r["gpu"], r["source"]) for r in report["rows"]]
    assert rows == [("critical", "node2:9835", "3", "alert"), ("critical", "node3:9835", "", "scrape"),
                    ("warning", "node1:9835", "", "check"), ("warning", "node1:9835", "0", "alert"),
                    ("info", "node1:9835", "5", "idle"), ("info", "node2:9835", "", "reboots")]
    assert "xid (79) GPU-3" in report["rows"][0]["what"]
    assert report["rows"][-1]["what"] == "3 reboot(s) or GPU reset(s) in the last 7 days (remediations)"
    assert [r["what"].endswith("(acknowledged)") for r in report["rows"]] == [False, False, False, True, False, False]
    # each row's action and impact: an alert's own labels (the escalated Xid 79), else its rule's row (temperature),
    # a finding its labels, the idle rule's row
    facts = [(r["action"], r["impact"]) for r in report["rows"]]
    assert facts == [("hardware_inspection", "node_unusable"), ("", ""), ("fix_host_software", "degraded"),
                     ("hardware_inspection", "degraded"),
                     ("none", "none"), ("", "")]
    table = CliRunner().invoke(main, ["fleet", "--prometheus", prometheus], env={"COLUMNS": "160"})
    assert table.exit_code == 2 and "Drain: node2:9835 GPU 3" in table.output


def test_fleet_exits_1_on_warnings_only_and_0_when_clear(prometheus, monkeypatch):
    warnings = {k: [r for r in v if r["metric"].get("severity") != "critical" and r["value"][1] != "0"]
                if not k.startswith("gpuhealth_gpu") else [] for k, v in ANSWERS.items()}
    monkeypatch.setattr(FakePrometheus, "answers", warnings)
    assert CliRunner().invoke(main, ["fleet", "--prometheus", prometheus]).exit_code == 1
    clear = {k: ([r for r in v if r["value"][1] == "1"] if k.startswith("up") else []) for k, v in ANSWERS.items()}
    monkeypatch.setattr(FakePrometheus, "answers", clear)
    result = CliRunner().invoke(main, ["fleet", "--prometheus", prometheus])
    assert result.exit_code == 0 and "Nothing firing" in result.output


def test_fleet_without_prometheus_exits_3_naming_it():
    result = CliRunner().invoke(main, ["fleet", "--prometheus", "http://127.0.0.1:1", "--timeout", "2"])
    assert result.exit_code == 3 and "http://127.0.0.1:1: cannot query Prometheus" in result.output


def test_the_table_at_80_columns_never_cuts_a_node_name_or_uuid(prometheus, monkeypatch):
    # 50 nodes with long names, piped (80 columns): "gpu-node-017.training-a.clu…" does not say which node to drain.
    def long_name(item: dict) -> dict:
        instance = item["metric"]["instance"].replace(":", ".training-a.cluster.example.com:")
        metric = {**item["metric"], "instance": instance}
        return {**item, "metric": metric}

    answers = {k: [long_name(r) for r in v] for k, v in ANSWERS.items()}
    answers['gpuhealth_alert_active{job="gpuhealth"}'][0]["metric"]["uuid"] = "GPU-00000002-0003-4e2e-8000-000000000000"
    monkeypatch.setattr(FakePrometheus, "answers", answers)
    result = CliRunner().invoke(main, ["fleet", "--prometheus", prometheus], env={"COLUMNS": "80"})
    assert result.exit_code == 2 and "…" not in result.output, result.output
    cells: list[list[str]] = []  # per table row, the cells of its lines joined back together
    for line in result.output.splitlines():
        if line.startswith("│"):
            parts = [p.strip() for p in line.strip("│").split("│")]
            if parts[0] or not cells:
                cells.append(parts)
            else:
                cells[-1] = [a + b if i == 1 or not a or not b else f"{a} {b}" for i, (a, b) in
                             enumerate(zip(cells[-1], parts, strict=True))]
    nodes = {r[1] for r in cells}
    assert nodes == {f"node{n}.training-a.cluster.example.com:9835" for n in (1, 2, 3)}, cells
    assert any("GPU-00000002-0003-4e2e-8000-000000000000" in r[3].replace(" ", "") for r in cells), cells


def test_a_nodes_idle_gpus_make_one_table_row_and_one_json_row_each(prometheus, monkeypatch):
    """50 quiet nodes of 8 GPUs were 400 idle rows burying the critical ones: one row per node in the table."""
    idle = _vector(*(({"instance": f"node{n}:9835", "gpu": str(g), "uuid": f"GPU-{n}-{g}"}, 0)
                     for n in (1, 2) for g in range(8)), ({"instance": "node3:9835", "gpu": "4"}, 0))
    monkeypatch.setattr(FakePrometheus, "answers", {**ANSWERS, 'gpuhealth_gpu_utilization_ratio{job="gpuhealth"} == 0':
                                                    idle})
    result = CliRunner().invoke(main, ["fleet", "--prometheus", prometheus], env={"COLUMNS": "160"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if "idle" in line]
    assert len(lines) == 3, result.output
    assert "0, 1, 2, 3, 4, 5, 6, 7" in lines[0] and "idle: 0 % utilisation now on 8 GPUs" in lines[0]
    assert "node3:9835" in lines[2] and "│ 4 " in lines[2] and "on 1" not in lines[2]
    answer = CliRunner().invoke(main, ["fleet", "--prometheus", prometheus, "--format", "json"]).output
    rows = json.loads(answer)["rows"]
    assert sum(r["source"] == "idle" for r in rows) == 17


def test_two_xid_codes_on_one_gpu_are_two_rows_naming_their_codes():
    """The check's Xid findings carry their code as the label xid: one row each, not two identical rows."""
    from gpuhealth.web.fleet import collect

    status = _vector(*[({"instance": "node1:9835", "code": "GH301", "slug": "xid-errors", "severity": severity,
                         "gpu": "0", "xid": code}, 1) for code, severity in (("48", "critical"), ("94", "warning"))])
    answers = {**{expr: [] for expr in ANSWERS}, 'gpuhealth_check_status{job="gpuhealth"}': status}
    rows, _ = collect(lambda expr: answers[expr], "gpuhealth")
    assert [(r.severity, r.what) for r in rows] == [("critical", "check GH301 xid-errors (Xid 48)"),
                                                    ("warning", "check GH301 xid-errors (Xid 94)")]
