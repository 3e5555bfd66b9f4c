"""`gpuhealth fleet --prometheus URL`: the fleet as Prometheus sees it, for operators without Grafana.

Reads only Prometheus's HTTP API (instant queries, ``/api/v1/query``) over the series every node's
`gpuhealth serve` exports: ``up``, ``gpuhealth_alert_active``, ``gpuhealth_alert_acknowledged``,
``gpuhealth_check_status``, ``gpuhealth_remediations`` and ``gpuhealth_gpu_utilization_ratio``. Shows nodes and
GPUs with firing alerts (acknowledged ones marked) or last-check findings, nodes rebooted in the last week, nodes
down, idle GPUs, worst first, each with its impact and action (docs/actions.md; "Drain:" names the nodes and GPUs
whose impact is node_unusable or gpu_unusable), and exits like `check`: 2 critical, 1 warning, 0 clear, 3 when
Prometheus cannot be asked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gpuhealth.exits import CannotRun
from gpuhealth.records import record

RANK = {"critical": 2, "warning": 1, "info": 0}
MAX_ANSWER = 32 * 1024 * 1024  # a bigger answer is refused before parsing: a fleet view needs far less


@record
class Row:
    severity: str
    instance: str
    gpu: str  # "" for the node
    what: str
    source: str  # "scrape", "alert", "check", "reboots" or "idle"
    # what to do and what it does to the node (docs/actions.md): a finding's labels, an alert's rule row; "" for a
    # node Prometheus cannot scrape (nothing is known of it)
    action: str = ""
    impact: str = ""

    def as_json(self) -> dict[str, str]:
        return {"severity": self.severity, "instance": self.instance, "gpu": self.gpu, "what": self.what,
                "source": self.source, "action": self.action, "impact": self.impact}


def query(base: str, expr: str, token: str | None, timeout: float) -> list[dict[str, Any]]:
    """One instant query's vector; CannotRun names the server and why."""
    import urllib.error  # here, not at import: the CLI starts without loading http and ssl
    import urllib.parse
    import urllib.request

    url = f"{base.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the operator's URL
            body = response.read(MAX_ANSWER + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise CannotRun(f"{base}: cannot query Prometheus ({getattr(exc, 'reason', exc)})") from exc
    if len(body) > MAX_ANSWER:
        raise CannotRun(f"{base}: answer to {expr!r} larger than {MAX_ANSWER // 2**20} MiB")
    try:
        answer = json.loads(body)
        if answer.get("status") != "success" or answer["data"]["resultType"] != "vector":
            raise ValueError(answer.get("error") or "not a vector")
        return [r for r in answer["data"]["result"] if isinstance(r, dict) and isinstance(r.get("metric"), dict)]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CannotRun(f"{base}: unexpected answer to {expr!r} ({exc})") from exc


def _value(result: dict[str, Any]) -> float:
    try:
        return float(result["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return float("nan")


def collect(ask: Any, job: str) -> tuple[list[Row], int]:
    """Rows worst first and the number of nodes; ``ask(expr)`` runs one query."""
    from gpuhealth.knowledge.actions import of_rule  # here, not at import: `gpuhealth --help` imports this module

    sel = 'job="{}"'.format(job.replace("\\", "\\\\").replace('"', '\\"'))  # a PromQL string literal
    rows: list[Row] = []
    nodes = ask(f"up{{{sel}}}")
    for r in nodes:
        if _value(r) != 1:
            rows.append(Row("critical", r["metric"].get("instance", "?"), "", "node down: Prometheus cannot scrape "
                            "its gpuhealth serve", "scrape"))
    # alerts an acknowledgement holds back (`gpuhealth ack`): listed as they are, marked, never left out
    acked = {(m.get("instance", "?"), m.get("rule", ""), m.get("key", ""), m.get("gpu", ""))
             for r in ask(f"gpuhealth_alert_acknowledged{{{sel}}}") if isinstance(m := r["metric"], dict)}
    acked_checks = {(instance, rule, gpu) for instance, rule, _key, gpu in acked}
    for r in ask(f"gpuhealth_alert_active{{{sel}}}"):
        m = r["metric"]
        if str(m.get("rule", "")).startswith("check:"):
            continue  # the check's own alert for a finding: the finding's row (below) names it with its code
        mark = (m.get("instance", "?"), m.get("rule", ""), m.get("key", ""), m.get("gpu", "")) in acked
        rows.append(Row(m.get("severity", "warning"), m.get("instance", "?"), m.get("gpu", ""),
                        f"alert {m.get('rule', '?')}" + (f" ({m['key']})" if m.get("key") else "")
                        + (f" {m['uuid']}" if m.get("uuid") else "") + (" (acknowledged)" if mark else ""), "alert",
                        *_alert_actions(m)))
    for r in ask(f"gpuhealth_check_status{{{sel}}}"):
        m = r["metric"]
        if m.get("severity") in ("critical", "warning"):
            mark = (m.get("instance", "?"), f"check:{m.get('code', '')}", m.get("gpu", "")) in acked_checks
            rows.append(Row(m["severity"], m.get("instance", "?"), m.get("gpu", ""),
                            f"check {m.get('code', '?')} {m.get('slug', '')}".rstrip()
                            + (f" (Xid {m['xid']})" if m.get("xid") else "")  # one row per Xid code
                            + (" (acknowledged)" if mark else ""), "check",
                            str(m.get("action", "")), str(m.get("impact", ""))))
    for r in ask(f"gpuhealth_remediations{{{sel}}} > 0"):
        m, count = r["metric"], _value(r)
        rows.append(Row("info", m.get("instance", "?"), "", f"{count:.0f} reboot(s) or GPU reset(s) in the last 7 days "
                        "(remediations)",
                        "reboots"))
    for r in ask(f"gpuhealth_gpu_utilization_ratio{{{sel}}} == 0"):
        m = r["metric"]
        rows.append(Row("info", m.get("instance", "?"), m.get("gpu", ""),
                        "idle: 0 % utilisation now" + (f" {m['uuid']}" if m.get("uuid") else ""), "idle",
                        *of_rule("idle")))
    # worst first; within a severity by node, the node itself before its GPUs in index order
    rows.sort(key=lambda row: (-RANK.get(row.severity, 1), row.instance,
                               int(row.gpu) if row.gpu.isdigit() else -1, row.what))
    return rows, len(nodes)


def _alert_actions(metric: dict[str, Any]) -> tuple[str, str]:
    """An alert series' action and impact: its rule's row (knowledge/actions.csv), an Xid alert's Xid row."""
    from gpuhealth.monitor.notify import actions_of
    from gpuhealth.monitor.rules import Alert

    if metric.get("action") and metric.get("impact"):  # a serve that exports them (escalated: hardware_inspection)
        return str(metric["action"]), str(metric["impact"])
    try:
        return actions_of(Alert(str(metric.get("rule", "")), None, str(metric.get("severity", "")), "firing", "", 0.0,
                                str(metric.get("key", ""))))
    except ValueError:  # a rule this gpuhealth does not know (a newer node): nothing to say
        return "", ""


def exit_code(rows: list[Row]) -> int:
    return max((RANK.get(r.severity, 1) for r in rows), default=0)


@click.command()
@click.option("--prometheus", "base", required=True, metavar="URL", help="Prometheus base URL (http://host:9090).")
@click.option("--job", default="gpuhealth", show_default=True, help="The scrape job of the gpuhealth nodes.")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Bearer token for a Prometheus behind a proxy that wants one.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds per query.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def fleet(base: str, job: str, token_file: Path | None, timeout: float, fmt: str) -> None:
    """The fleet from Prometheus: nodes down, firing alerts, last-check findings, idle GPUs, worst first.
    Exits 2 on anything critical (drain or RMA), 1 on warnings, 0 when clear: it can gate a rollout."""
    token = token_file.read_text(encoding="utf-8").strip() if token_file else None
    rows, nodes = collect(lambda expr: query(base, expr, token, timeout), job)
    if fmt == "json":
        click.echo(json.dumps({"prometheus": base, "job": job, "nodes": nodes,
                               "rows": [r.as_json() for r in rows]}, indent=2))
    else:
        _table(rows, nodes, base)
    raise SystemExit(exit_code(rows))


def table_rows(rows: list[Row]) -> list[Row]:
    """The table's rows: a node's idle GPUs in one row when it has several. Fifty quiet nodes of eight GPUs
    would otherwise print 400 idle rows after the few that matter. JSON keeps one row per GPU."""
    idle: dict[str, list[Row]] = {}
    for row in rows:
        if row.source == "idle":
            idle.setdefault(row.instance, []).append(row)
    out: list[Row] = []
    for row in rows:
        group = idle.get(row.instance, []) if row.source == "idle" else []
        if len(group) <= 1:
            out.append(row)
        elif row is group[0]:
            gpus = [r.gpu for r in group]
            out.append(Row("info", row.instance, ", ".join(gpus), f"idle: 0 % utilisation now on {len(gpus)} GPUs",
                           "idle", row.action, row.impact))
    return out


def _table(rows: list[Row], nodes: int, base: str) -> None:
    from rich.table import Table
    from rich.text import Text

    from gpuhealth import inert
    from gpuhealth.model import DRAINING_IMPACTS

    console = inert.console(highlight=False)  # node names and findings come from the fleet: shown, never interpreted
    if nodes == 0:
        console.print(f"{base}: no gpuhealth node known to Prometheus (check --job)")
    table = Table(title=f"gpuhealth fleet: {nodes} node(s), from {base}", title_justify="left")
    # A long node name or UUID folds onto the next line rather than being cut with an ellipsis: cut, it no
    # longer names the node to drain (80 columns when piped).
    for column in ("severity", "node", "GPU", "what"):
        table.add_column(column, overflow="fold")
    for row in table_rows(rows):
        style = {"critical": "bold red", "warning": "yellow"}.get(row.severity, "")
        # impact and action under the row's text, not in columns of their own: at 80 columns two more columns would
        # fold the node names
        facts = f"\nimpact {row.impact}, action {row.action}" if row.impact else ""
        table.add_row(Text(row.severity, style=style), row.instance, row.gpu, row.what + facts)
    # what drains is the impact's call (node_unusable, gpu_unusable), not the severity's
    drain = sorted({(r.instance, r.gpu) for r in rows if r.impact in DRAINING_IMPACTS})
    console.print(table)
    if drain:
        console.print("Drain: " + ", ".join(f"{node} GPU {gpu}" if gpu else f"{node}" for node, gpu in drain))
    elif not rows:
        console.print("Nothing firing, no findings, no idle GPU.")
