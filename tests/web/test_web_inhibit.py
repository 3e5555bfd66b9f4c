"""One page per fault through Prometheus: deploy/alertmanager/alertmanager.yml's inhibit_rules let the more
specific alert inhibit the one derived from it on the same node and GPU only. Checked on the text (PyYAML is
no dependency), against gpuhealth's own folding (monitor/fold.py), and in a real Alertmanager (fails under
CI when missing, else skipped)."""

from __future__ import annotations

import contextlib
import re
import time

import httpx2
from web_fakes import REPO, alertmanager_tool, start_alertmanager

from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.monitor.fold import FOLDS

catalogue.load()  # every check registered: the codes the rules name must exist

ALERTMANAGER_YML = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
RULES_YML = REPO / "deploy" / "prometheus" / "gpuhealth.rules.yml"
MATCHER = re.compile(r"""'(\w+)(=~|!=|=)"([^"]*)"'""")


def inhibit_rules() -> list[dict]:
    """The inhibit rules as written: [{source: [(label, op, value)], target: [...], equal: [...]}]."""
    text = ALERTMANAGER_YML.read_text()
    block = text.split("\ninhibit_rules:\n", 1)[1]
    block = re.split(r"\n(?=\S)", block, maxsplit=1)[0]  # up to the next top-level key
    rules = []
    for item in re.split(r"\n  - ", "\n" + block)[1:]:
        fields = dict(re.findall(r"(source_matchers|target_matchers|equal): \[(.*)\]", item))
        assert set(fields) == {"source_matchers", "target_matchers", "equal"}, item
        rules.append({"source": MATCHER.findall(fields["source_matchers"]),
                      "target": MATCHER.findall(fields["target_matchers"]),
                      "equal": [e.strip() for e in fields["equal"].split(",")]})
    return rules


def shipped_alerts() -> dict[str, str]:
    """Prometheus alert name -> its expression, from the shipped rules."""
    return dict(re.findall(r"- alert: (\w+)\n\s+expr: (.*)", RULES_YML.read_text()))


def alert_for(monitor_rule: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The Prometheus alert that carries a monitor rule, and the matchers that single the rule out."""
    for name, expr in shipped_alerts().items():
        if f'rule="{monitor_rule}"' in expr:
            return name, []
    assert monitor_rule.startswith("check:"), monitor_rule
    assert 'rule=~"check:.*"' in shipped_alerts()["GpuhealthCheckFinding"]
    return "GpuhealthCheckFinding", [("rule", "=", monitor_rule)]


def test_every_inhibit_rule_names_shipped_alerts():
    rules = inhibit_rules()
    assert len(rules) >= 5
    names = set(shipped_alerts())
    for rule in rules:
        for side in ("source", "target"):
            exact = [value for label, op, value in rule[side] if label == "alertname" and op == "="]
            pattern = [value for label, op, value in rule[side] if label == "alertname" and op == "=~"]
            assert exact or pattern, rule
            assert set(exact) <= names, (side, exact)
            assert all(any(re.fullmatch(p, n) for n in names) for p in pattern), (side, pattern)
            for label, _, value in rule[side]:
                if label == "rule":  # a check finding's code: a check that exists
                    assert re.fullmatch(r"check:GH\d{3}", value), value
                    assert value.removeprefix("check:") in REGISTRY, value


def test_each_fold_of_the_monitor_is_an_inhibit_rule_on_the_same_node_and_gpu():
    """The same rule in both places: each (derived, primary) pair of fold.py is an inhibit rule whose source is
    the primary's alert and whose target is the derived one's, equal on instance and gpu (never instance alone,
    which would hide a second GPU's failure), and on the Xid code when the fold compares codes."""
    rules = inhibit_rules()
    pairs = 0
    for derived, primaries in FOLDS.items():
        for primary, key in primaries:
            source, source_extra = alert_for(primary)
            if key:  # a fixed key of the primary: Xid 79 for a lost GPU
                source_extra = [*source_extra, ("xid", "=", key)]
            target, target_extra = alert_for(derived)
            found = [r for r in rules if ("alertname", "=", source) in r["source"]
                     and ("alertname", "=", target) in r["target"] and all(m in r["target"] for m in target_extra)
                     and all(m in r["source"] for m in source_extra)]
            assert found, (derived, primary, key)
            want = ["instance", "gpu", "xid"] if key is None else ["instance", "gpu"]
            assert all(r["equal"] == want for r in found), found
            pairs += 1
    assert pairs >= 6
    # the GPU-level rules never match on the node alone; an Xid rule for the full check compares the codes
    for rule in rules:
        if ("alertname", "=", "GpuhealthDown") not in rule["source"]:
            assert "gpu" in rule["equal"], rule
        if ("rule", "=", "check:GH301") in rule["target"]:
            assert "xid" in rule["equal"], rule


def _alert(**labels: str) -> dict:
    base = {"job": "gpuhealth", "instance": "n1:9835"}
    return {"labels": {**base, **labels}, "annotations": {"summary": "test"}}


# (alert, inhibited?) posted to a real Alertmanager running the shipped configuration (labels as Prometheus sends
# them: an empty label such as xid="" on a non-Xid alert is absent)
POSTED = [
    (_alert(alertname="GpuhealthGpuLost", rule="gpu_lost", severity="critical", gpu="3"), False),
    (_alert(alertname="GpuhealthGpuCount", rule="gpu_count", severity="critical", gpu="3"), True),
    (_alert(alertname="GpuhealthGpuCount", rule="gpu_count", severity="critical", gpu="6"), False),  # another GPU
    (_alert(alertname="GpuhealthGpuCount", rule="gpu_count", severity="critical"), False),  # never seen (gpu="")
    (_alert(alertname="GpuhealthGpuCount", rule="gpu_count", severity="critical", gpu="3", instance="n2:9835"),
     False),  # another node
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH302", severity="critical", gpu="3"), True),
    # GPU 4 fell off the bus: its Xid 79 is the one page; the lost GPU, the count and GH302 are inhibited
    (_alert(alertname="GpuhealthXid", rule="xid", key="79", xid="79", severity="critical", gpu="4"), False),
    (_alert(alertname="GpuhealthGpuLost", rule="gpu_lost", severity="critical", gpu="4"), True),
    (_alert(alertname="GpuhealthGpuCount", rule="gpu_count", severity="critical", gpu="4"), True),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH302", severity="critical", gpu="4"), True),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH302", severity="critical", gpu="4", instance="n2:9835"),
     False),  # another node
    (_alert(alertname="GpuhealthXid", rule="xid", key="48", xid="48", severity="critical", gpu="0"), False),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH301", xid="48", severity="critical", gpu="0"), True),
    # another Xid on that GPU, which NVML did not report: a second failure, it pages (before, any GH301 on the GPU
    # was inhibited by a critical Xid)
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH301", xid="94", severity="warning", gpu="0"), False),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH301", xid="48", severity="critical", gpu="1"), False),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH403", severity="critical", gpu="0"), False),  # ECC
    (_alert(alertname="GpuhealthXid", rule="xid", key="13", xid="13", severity="warning", gpu="5"), False),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH301", xid="13", severity="critical", gpu="5"),
     False),  # worse
    (_alert(alertname="GpuhealthXid", rule="xid", key="13", xid="13", severity="warning", gpu="7"), False),
    (_alert(alertname="GpuhealthCheckFinding", rule="check:GH301", xid="13", severity="warning", gpu="7"), True),
]


def test_a_real_alertmanager_inhibits_the_derived_alert_of_the_same_gpu_only(tmp_path):
    alertmanager = alertmanager_tool()
    with contextlib.ExitStack() as stack:
        port = start_alertmanager(stack, alertmanager, ALERTMANAGER_YML, tmp_path)
        client = stack.enter_context(httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=5))
        response = client.post("/api/v2/alerts", json=[a for a, _ in POSTED])
        assert response.status_code == 200, response.text
        want = {_key(a["labels"]): inhibited for a, inhibited in POSTED}

        deadline = time.monotonic() + 20  # the inhibitor sees the source alerts a moment after they are posted
        while True:
            got = {_key(a["labels"]): bool(a["status"]["inhibitedBy"]) for a in client.get("/api/v2/alerts").json()}
            if got == want or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert {k: v for k, v in got.items() if want.get(k) != v} == {}, "inhibited (True) or not, wrongly"
        assert got == want


def _key(labels: dict) -> tuple:
    return tuple(sorted(labels.items()))
