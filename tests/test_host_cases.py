"""Every test host: where its checks fire, where they stay quiet, and live == recorded == replayed."""

from __future__ import annotations

import dataclasses

import pytest

from gpuhealth.bundle import BundleHost, RecordingHost
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.model import Report, Severity
from hostcases import FakeHost, case_names, load_spec


def record_and_replay(name: str, tmp_path) -> tuple[Report, Report, Report]:
    """The same host checked live, while being recorded, and from the recorded bundle."""
    spec = load_spec(name)
    live = run_checks(collect(FakeHost(spec), captured_at="t"))
    recorder = RecordingHost(FakeHost(spec), tmp_path / name, hostname="gpu-node-17")
    recorded = run_checks(collect(recorder, captured_at="t"))
    recorder.finish()
    host = BundleHost(tmp_path / name)
    replayed = run_checks(collect(host, origin="live", captured_at="t"))
    return live, recorded, replayed


def _without_env(report: Report):
    # The bundle redacts secrets in the environment, so that field alone may differ.
    return dataclasses.replace(report.snapshot, env={})


@pytest.mark.parametrize("name", case_names())
def test_live_and_offline_give_the_same_findings(name, tmp_path):
    live, recorded, replayed = record_and_replay(name, tmp_path)
    assert live.findings == recorded.findings == replayed.findings
    assert live.skipped == replayed.skipped
    assert _without_env(live) == _without_env(replayed)


@pytest.mark.parametrize("name", case_names())
def test_case_fires_and_stays_quiet_as_expected(name, tmp_path):
    spec = load_spec(name)
    report = run_checks(collect(FakeHost(spec)))
    skipped = {s.code: s.reason for s in report.skipped}
    fired = {}
    for finding in report.findings:
        current = fired.get(finding.code)
        if current is None or finding.severity.rank > current.rank:
            fired[finding.code] = finding.severity
    for code, severity in spec["expect"]["fires"].items():
        assert code in fired, f"{name}: expected {code} to fire; got {sorted(fired)}"
        assert fired[code] is Severity(severity), f"{name}: {code} is {fired[code]}, expected {severity}"
    for code in spec["expect"]["quiet"]:
        assert code not in fired, f"{name}: {code} fired: {[f.message for f in report.findings if f.code == code]}"
        assert code not in skipped, f"{name}: {code} was skipped ({skipped.get(code)}), not quiet"
    for code in spec["expect"].get("skipped", []):
        assert code in skipped, f"{name}: expected {code} to be skipped"
    # every finding says what to do and what it does to the node, in the JSON report too
    from caseset import unstamped
    from gpuhealth.report.json_report import document

    assert not unstamped(document(report)), f"{name}: {unstamped(document(report))}"
    # information never takes a node out of service
    assert not [f.code for f in report.findings if f.severity is Severity.INFO and f.drains], name


def test_healthy_case_is_healthy_and_lists_eight_gpus(tmp_path):
    report = run_checks(collect(FakeHost(load_spec("h100x8-healthy"))))
    assert report.verdict == "HEALTHY", [f.message for f in report.findings]
    assert len(report.snapshot.gpus) == 8
    assert report.snapshot.gpus[0].pci_address == "0000:19:00.0"


def test_xid_findings_name_the_gpu_by_index_and_address():
    report = run_checks(collect(FakeHost(load_spec("h100x8-xid-ecc"))))
    xids = [f for f in report.findings if f.code == "GH301"]
    assert {f.subject.pci_address for f in xids} == {"0000:19:00.0"}
    assert {f.subject.gpu_index for f in xids} == {0}
    by_code = {int(f.message.split()[1].rstrip(":")): f for f in xids}
    assert by_code[48].severity is Severity.CRITICAL
    assert by_code[63].severity is Severity.INFO


def test_root_cause_folds_its_symptoms():
    from gpuhealth.report.common import fold

    report = run_checks(collect(FakeHost(load_spec("driver-library-mismatch"))))
    causes = fold(report.findings)
    leading = [c.finding.code for c in causes]
    assert "GH202" in leading and "GH203" not in leading
    mismatch = next(c for c in causes if c.finding.code == "GH202")
    assert {s.code for s in mismatch.symptoms} == {"GH203"}


def test_missing_gpu_is_explained_by_rminit_failure():
    from gpuhealth.report.common import fold

    report = run_checks(collect(FakeHost(load_spec("gpu-missing-rminit"))))
    rminit = next(c for c in fold(report.findings) if c.finding.code == "GH303")
    assert [s.subject.pci_address for s in rminit.symptoms] == ["0000:e1:00.0"]
