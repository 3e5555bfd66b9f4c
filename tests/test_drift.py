"""History and drift: saved runs round-trip, and `diff` reports what got worse (and only that as worse)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from click.testing import CliRunner

from gpuhealth.bundle import RecordingHost
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.drift import diff, load_run, run_of, save_run, saved_runs
from hostcases import FakeHost, load_spec


def report_of(case: str):
    return run_checks(collect(FakeHost(load_spec(case)), captured_at="t"))


def test_saved_run_round_trips(tmp_path):
    report = report_of("h100x8-xid-ecc")
    path = save_run(report, tmp_path)
    run = load_run(path)
    assert run.snapshot == report.snapshot
    assert set(run.finding_keys) == set(run_of(report).finding_keys)
    # one GPU with three Xids keeps three findings (the Xid is part of a finding's identity across runs)
    assert {k for k in run.finding_keys if k.startswith("GH301@GPU 0 ")} >= {
        "GH301@GPU 0 0000:19:00.0 Xid 48", "GH301@GPU 0 0000:19:00.0 Xid 63"}
    assert run.finding_severities["GH301@GPU 0 0000:19:00.0 Xid 48"] == "critical"
    assert save_run(report, tmp_path) != path  # a second run in the same second gets its own file


def test_new_xids_and_findings_are_worse():
    changes = diff(run_of(report_of("h100x8-healthy")), run_of(report_of("h100x8-xid-ecc")))
    worse = [c for c in changes if c.worse]
    assert {c.kind for c in worse} == {"xid", "finding-new"}
    assert any(c.message.startswith("Xid 48: 0 -> 1") and c.subject == "0000:19:00.0" for c in worse)
    back = diff(run_of(report_of("h100x8-xid-ecc")), run_of(report_of("h100x8-healthy")))
    assert not any(c.worse for c in back)  # a reboot clears the log: resolved, not worse
    assert {c.kind for c in back} == {"finding-resolved"}


def test_vanished_gpu_ecc_increase_link_and_driver_change():
    before = report_of("h100x8-healthy").snapshot
    gpus = list(before.nvml.gpus)
    gpus[1] = dataclasses.replace(gpus[1], ecc_aggregate_uncorrected=(gpus[1].ecc_aggregate_uncorrected or 0) + 2,
                                  pcie_width_current=8)
    after = dataclasses.replace(
        before, nvml=dataclasses.replace(before.nvml, gpus=tuple(gpus[:7])),
        driver=dataclasses.replace(before.driver, version="550.90.07"))
    changes = diff(run_of(run_checks(before)), run_of(run_checks(after)))
    by_kind = {c.kind: c for c in changes}
    assert by_kind["gpu-vanished"].subject == "0000:db:00.0" and by_kind["gpu-vanished"].worse
    assert "ecc aggregate uncorrected" in by_kind["ecc"].message and by_kind["ecc"].subject == "0000:3b:00.0"
    assert by_kind["pcie"].message == "PCIe width x16 -> x8"
    assert by_kind["driver"].message == "driver 535.161.08 -> 550.90.07" and not by_kind["driver"].worse


def test_check_save_then_diff_latest(tmp_path):
    runs = tmp_path / "runs"
    for case in ("h100x8-healthy", "h100x8-xid-ecc"):
        recorder = RecordingHost(FakeHost(load_spec(case)), tmp_path / case)
        collect(recorder)
        recorder.finish()
        CliRunner().invoke(main, ["check", "--from", str(tmp_path / case), "--save", str(runs), "--format", "json"])
    assert len(list(runs.glob("run-*.json"))) == 2
    result = CliRunner().invoke(main, ["diff", "--latest", str(runs)])
    assert result.exit_code == 1 and re.search(r"^WORSE +- +xid ", result.output, re.M)
    same = CliRunner().invoke(main, ["diff", str(tmp_path / "h100x8-healthy"), str(tmp_path / "h100x8-healthy")])
    assert same.exit_code == 0 and "no drift" in same.output
    junk = tmp_path / "junk.json"
    junk.write_text("{}")
    assert CliRunner().invoke(main, ["diff", str(junk), str(junk)]).exit_code == 3


@pytest.mark.parametrize("case", ["no-gpu", "gpu-fell-off-bus", "debian-kernel-update-lost-driver"])
def test_saved_runs_load_whatever_the_check_found(tmp_path, case):
    """nvidia-smi missing (no-gpu), hung (gpu-fell-off-bus) or failing: a command that never ran has no exit
    code, and its run must load (issue 24: `diff --latest` exited 3 'missing ... exit_code')."""
    bundle = tmp_path / case
    recorder = RecordingHost(FakeHost(load_spec(case)), bundle)
    collect(recorder)
    recorder.finish()
    runs = tmp_path / "runs"
    for _ in range(2):
        saved = CliRunner().invoke(main, ["check", "--from", str(bundle), "--save", str(runs), "--format", "json"])
        assert saved.exit_code in (0, 1, 2), saved.output
    first, second = sorted(runs.glob("run-*.json"))
    assert load_run(first).snapshot == load_run(second).snapshot
    smi = load_run(first).snapshot.smi_run
    assert smi is not None and not smi.ok  # the failure itself was kept, not dropped
    result = CliRunner().invoke(main, ["diff", "--latest", str(runs)])
    assert result.exit_code == 0 and "no drift" in result.output, result.output


def test_saved_runs_are_pruned_to_the_newest_n(tmp_path):
    report = report_of("h100x8-healthy")
    paths = [save_run(report, tmp_path, keep=3) for _ in range(5)]
    assert sorted(tmp_path.glob("run-*.json")) == paths[-3:]
    stranger = tmp_path / "run-notes.json"  # not a name save_run writes: never removed
    stranger.write_text("{}")
    save_run(report, tmp_path, keep=1)
    assert stranger.exists() and len(saved_runs(tmp_path)) == 1
    for _ in range(3):
        save_run(report, tmp_path, keep=0)  # 0 keeps all
    assert len(saved_runs(tmp_path)) == 4


def test_check_keep_runs_flag(tmp_path):
    bundle = tmp_path / "b"
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), bundle)
    collect(recorder)
    recorder.finish()
    runs = tmp_path / "runs"
    for _ in range(3):
        CliRunner().invoke(main, ["check", "--from", str(bundle), "--save", str(runs), "--keep-runs", "2",
                                  "--format", "json"])
    assert len(saved_runs(runs)) == 2
    bad = CliRunner().invoke(main, ["check", "--from", str(bundle), "--save", str(runs), "--keep-runs", "-1"])
    assert bad.exit_code in (2, 3) and "--keep-runs" in bad.output
