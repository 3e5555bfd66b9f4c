"""Action and impact on every finding: the tables behind them, the Xid mapping, and no finding without both."""

from __future__ import annotations

import pytest

from conftest import REPO
from gpuhealth.checks import catalogue
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.collect import collect
from gpuhealth.knowledge import table_rows
from gpuhealth.knowledge.actions import check_rows, of_check, of_xid, xid_rows
from gpuhealth.knowledge.xid import all_xids, lookup
from gpuhealth.model import ACTIONS, DRAINING_IMPACTS, IMPACTS, Finding, Severity
from gpuhealth.monitor.notify import actions_of, to_json
from gpuhealth.monitor.rules import RULES, Alert
from hostcases import FakeHost, load_spec


def test_a_finding_without_action_or_impact_cannot_be_made():
    with pytest.raises(ValueError, match="action"):
        Finding("GH201", "driver-not-loaded", Severity.CRITICAL, "m")
    with pytest.raises(ValueError, match="impact"):
        Finding("GH201", "driver-not-loaded", Severity.CRITICAL, "m", action="reload_driver")
    with pytest.raises(ValueError, match="action"):
        Finding("GH201", "driver-not-loaded", Severity.CRITICAL, "m", action="REBOOT_SYSTEM", impact="node_unusable")


def test_every_check_states_its_action_and_impact():
    catalogue.load()
    rows = check_rows()
    checks = {code for code, severity in rows if not code.startswith("rule:")}
    assert {code for code, severity in rows if not severity} >= set(REGISTRY), "one default row per check"
    assert checks == set(REGISTRY)
    rules = {code.split(":")[1] for code, severity in rows if code.startswith("rule:")}
    assert rules == set(RULES), "one row per rule of the monitor"
    for (code, severity), (action, impact) in rows.items():
        assert severity in ("", "info", "warning", "critical"), (code, severity)
        assert action in ACTIONS and impact in IMPACTS
    for row in table_rows("actions.csv") + table_rows("xid_actions.csv"):
        assert row["why"].strip() and row["source"].strip(), row


def test_every_xid_maps_through_its_bucket_or_its_own_row():
    rows = xid_rows()
    for info in all_xids():
        assert str(info.xid) in rows or info.immediate_action in rows, f"Xid {info.xid} ({info.immediate_action})"


def test_an_xid_drains_exactly_when_its_severity_is_critical():
    """Severity and impact come from the same catalogue row: a GPU that needs a reset or service drains, a contained
    or application error does not (an application-class Xid never does)."""
    for info in all_xids():
        critical = info.severity is Severity.CRITICAL and not info.application_class
        assert (of_xid(info)[1] in DRAINING_IMPACTS) == critical, f"Xid {info.xid}: {of_xid(info)}"


def test_xid_actions_follow_nvidia():
    assert of_xid(lookup(48)) == ("reset_gpu", "gpu_unusable")
    # NVIDIA's Xid 48 workflow: with Xid 63 or 64 on the same GPU, drain it, then reset
    assert of_xid(lookup(48), frozenset({64})) == ("drain_then_reset", "gpu_unusable")
    assert of_xid(lookup(48), frozenset({13})) == ("reset_gpu", "gpu_unusable")
    assert of_xid(lookup(13)) == ("restart_app", "none")
    assert of_xid(lookup(63)) == ("none", "none")
    assert of_xid(lookup(79)) == ("reboot", "node_unusable")
    assert of_xid(lookup(54)) == ("hardware_inspection", "gpu_unusable")
    assert of_xid(None) == of_check("GH301", "")


def test_a_severity_row_overrides_the_default():
    assert of_check("GH507", "critical") == ("fix_host_software", "node_unusable")
    assert of_check("GH507", "warning") == ("fix_host_software", "degraded")
    assert of_check("GH605", "critical") == ("fix_user_environment", "user_environment")
    with pytest.raises(LookupError, match="no row"):
        of_check("GH999", "")


def test_xid_finding_takes_its_xids_row():
    report = run_checks(collect(FakeHost(load_spec("h100x8-xid-ecc"))))
    xids = [f for f in report.findings if f.code == "GH301"]
    assert xids
    for finding in xids:
        info = lookup(int(finding.labels["xid"]))
        others = frozenset(int(f.labels["xid"]) for f in xids if f.subject == finding.subject) - {info.xid}
        assert (finding.action, finding.impact) == of_xid(info, others)


def test_every_alert_says_what_to_do():
    """The webhook payload (and the dashboard's alert list) carries action and impact: a check finding's own, else
    its rule's row, and an Xid alert its Xid's."""
    for rule in RULES:
        assert actions_of(Alert(rule, 0, "warning", "firing", "m", 0.0))[0] in ACTIONS
    assert actions_of(Alert("xid", 0, "warning", "firing", "Xid 48", 0.0, "48")) == ("reset_gpu", "gpu_unusable")
    assert actions_of(Alert("ecc", 0, "warning", "firing", "m", 0.0, "ecc_volatile_corrected"))[1] == "degraded"
    assert actions_of(Alert("ecc", 0, "critical", "firing", "m", 0.0, "ecc_volatile_uncorrected"))[1] == "gpu_unusable"
    own = Alert("check:GH404", 0, "critical", "firing", "m", 0.0, action="reboot", impact="node_unusable")
    assert {k: to_json(own)[k] for k in ("action", "impact")} == {"action": "reboot", "impact": "node_unusable"}
    resolved = Alert("check:GH605", None, "critical", "resolved", "m", 0.0)
    assert actions_of(resolved) == ("fix_user_environment", "user_environment")


def test_the_docs_page_names_every_action_impact_and_bucket():
    page = (REPO / "docs" / "actions.md").read_text(encoding="utf-8")
    for name in (*ACTIONS, *IMPACTS, *(key for key in xid_rows() if not key.isdecimal())):
        assert f"`{name}`" in page, name
