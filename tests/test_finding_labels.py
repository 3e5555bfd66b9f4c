"""What a finding stands on is in its fields (``labels``, ``last_seen``), never read back out of its message:
the Xid checks fill them from the kernel log's lines, the JSON report and saved runs carry them, and every
reader (the monitor's folding, drift, JUnit's crashed checks, the metrics) reads the fields."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from pathlib import Path

from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.drift import _key, run_of
from gpuhealth.model import FINDING_LABELS, Finding, Severity, Subject, from_jsonable
from gpuhealth.monitor.fold import finding_about
from gpuhealth.parsers.kernel_log import wall_clock_seconds
from gpuhealth.report import json_report, prometheus_text
from gpuhealth.report.junit import crashed_checks
from hostcases import FakeHost, load_spec

SRC = Path(__file__).resolve().parent.parent / "src" / "gpuhealth"


def _report(host: str):
    return run_checks(collect(FakeHost(load_spec(host))))


def test_the_xid_check_labels_each_finding_with_its_code_and_the_time_of_its_newest_line():
    """The h100x8-xid-ecc test host (a real gpud dmesg, --time-format iso): Xid 48 once, 63 once, 94 x3."""
    findings = {f.labels["xid"]: f for f in _report("h100x8-xid-ecc").findings if f.code == "GH301"}
    assert set(findings) == {"48", "63", "94"}
    utc = datetime.timezone.utc
    assert findings["48"].last_seen == datetime.datetime(2024, 11, 15, 12, 2, 3, 470068, utc).timestamp()
    assert findings["94"].last_seen > findings["48"].last_seen  # its last of three lines, not its first
    assert all(set(f.labels) <= set(FINDING_LABELS) for f in findings.values())


def test_a_gpu_fallen_off_the_bus_stands_on_xid_79():
    (finding,) = [f for f in _report("gpu-fell-off-bus").findings if f.code == "GH302"]
    assert finding.labels == {"xid": "79"}
    assert finding.last_seen == datetime.datetime(2024, 5, 2, 3, 4, 5, 100100, datetime.timezone.utc).timestamp()


def test_the_json_report_carries_labels_and_last_seen_and_reads_back():
    report = _report("h100x8-xid-ecc")
    document = json.loads(json_report.render(report))
    gh301 = [f for f in document["findings"] if f["code"] == "GH301"]
    assert sorted(f["labels"]["xid"] for f in gh301) == ["48", "63", "94"]
    assert all(isinstance(f["last_seen"], float) for f in gh301)
    assert all("labels" not in f for f in document["findings"] if f["code"] not in ("GH301", "GH302", "GH704"))
    back = [from_jsonable(Finding, f) for f in document["findings"]]
    assert back == list(report.findings)


def test_readers_use_the_labels_not_the_message():
    """A message worded differently (a later catalogue, a translation) changes nothing a program reads."""
    finding = Finding("GH301", "xid-errors", Severity.CRITICAL, "Double-bit ECC error (was: Xid 48 ...)",
                      Subject(0, "0000:19:00.0"), labels={"xid": "48"}, last_seen=1.5e9,
                      action="reset_gpu", impact="gpu_unusable")
    assert [tuple(b) for b in finding_about(finding)] == [(0, "48", "critical", 1.5e9)]
    unlabelled = dataclasses.replace(finding, message="Xid 48: a message that names a code", labels={})
    assert finding_about(unlabelled) == ()
    crashed = Finding("GH001", "internal-error", Severity.WARNING, "a check crashed", labels={"check": "GH301"},
                      action="contact_support", impact="none")
    worded = dataclasses.replace(crashed, message="check GH999 (something) failed: ...", labels={})
    report = _report("h100x8-xid-ecc")
    assert crashed_checks(dataclasses.replace(report, findings=(crashed, worded))) == {"GH301"}
    assert run_of(dataclasses.replace(report, findings=(finding,))).finding_keys == (
        "GH301@GPU 0 0000:19:00.0 Xid 48",)
    lines = prometheus_text.render(dataclasses.replace(report, findings=(finding,)))
    assert 'gpuhealth_check_status{code="GH301",slug="xid-errors",severity="critical",gpu="0",' \
           'pci_bus_id="0000:19:00.0",xid="48",action="reset_gpu",impact="gpu_unusable"} 1' in lines


def test_drift_reads_a_run_saved_before_findings_had_labels():
    """Saved runs written by an older gpuhealth have no labels: their Xid findings keep their identity, so the
    first drift after an upgrade does not report every Xid as gone and new."""
    old = {"code": "GH301", "subject": {"gpu_index": 0}, "message": "Xid 48 (ROBUST_CHANNEL_GPU_ECC_DBE): ..."}
    new = {**old, "message": "reworded", "labels": {"xid": "48"}}
    assert _key(old) == _key(new) == "GH301@GPU 0 Xid 48"
    assert _key({**old, "message": "reworded", "labels": {}}) == "GH301@GPU 0"


def test_no_module_reads_a_finding_back_out_of_its_message():
    """The guard that keeps it so: no regular expression runs over a finding's message in the source."""
    reading = re.compile(r"\.(?:match|search|fullmatch|findall)\(\s*(?:f|finding|finding_|c\.finding)\.message\b"
                         r"|(?:f|finding)\.message\.(?:startswith|split|partition)\(")
    hits = [f"{path.relative_to(SRC)}:{n}" for path in SRC.rglob("*.py")
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if reading.search(line)]
    assert hits == []


def test_wall_clock_timestamps_only():
    assert wall_clock_seconds("2024-11-15T12:02:03,470068+00:00") == 1731672123.470068
    assert wall_clock_seconds("2024-11-15T13:02:03+0100") == 1731672123.0  # journalctl -o short-iso
    for not_on_the_clock in ("12345.678901", "Nov 15 12:02:03", "2024-11-15T12:02:03", "", None, "2024-99-99T1"):
        assert wall_clock_seconds(not_on_the_clock) is None, not_on_the_clock


def test_a_check_that_raises_is_named_in_its_gh001_labels():
    from gpuhealth.checks.engine import _internal_error
    from gpuhealth.checks.registry import REGISTRY

    finding = _internal_error(REGISTRY["GH302"], KeyError("boom"))
    assert (finding.code, finding.labels) == ("GH001", {"check": "GH302"})
