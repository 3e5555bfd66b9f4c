"""Active tests (check --level 2): the script run for real against a stand-in ``torch``, the runner's
refusals, and GH710/GH711 on test hosts.

This machine has no PyTorch and no GPU, so ``tests/fake_torch.py`` is a hand-written stand-in package
(shared with the probe's tests) that implements only the calls ACTIVE_TEST_SCRIPT makes, on tiny tensors,
with modes for a wrong matmul, a memory fault and an error raised on cuda:1. The host answers in the
GH710/GH711 tests are hand-written JSON lines in the script's output format.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from fake_torch import install_fake_torch
from gpuhealth.active import ACTIVE_TEST_SCRIPT, active_argv, parse_active_output, run_active_tests, with_active_tests
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.topology import link_rate_gbps
from gpuhealth.collect import collect
from gpuhealth.model import CommandRun, GpuProcess, ParseError, Severity
from hostcases import FakeHost, load_spec


@pytest.fixture()
def fake_torch(tmp_path):
    return install_fake_torch(tmp_path)


def _script(path=None, mode: str = "ok", budget_s: float = 60) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    env["FAKE_TORCH"] = mode
    argv = active_argv(budget_s)
    run = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=60, env=env,
                         cwd=path or None)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip().splitlines()) == 1, run.stdout
    return parse_active_output(run.stdout)


def test_script_without_torch():
    if any((p and os.path.isdir(os.path.join(p, "torch"))) for p in sys.path):
        pytest.skip("PyTorch is installed in this venv")
    assert _script()["installed"] is False


def test_script_success(fake_torch):
    data = _script(fake_torch)
    assert data["installed"] and data["available"] and data["version"] == "2.3.1+cu121"
    first, second = data["gpus"]
    assert first["pci_address"] == "0000:19:00.0" and second["pci_address"] == "0000:3b:00.0"
    for gpu in data["gpus"]:
        assert gpu["pinned"] is True and gpu["h2d_gbps"] > 0 and gpu["d2h_gbps"] > 0
        assert gpu["matmul_max_error"] == 0.0 and gpu["matmul_nonfinite"] is False
        assert gpu["memory_mismatches"] == 0 and gpu["memory_tested_mib"] == 512


@pytest.mark.parametrize("mode, key, value", [("wrong", "matmul_max_error", 5.0), ("memfault", "memory_mismatches", 4)])
def test_script_reports_a_faulty_gpu(fake_torch, mode, key, value):
    good, bad = _script(fake_torch, mode)["gpus"]
    assert good[key] == 0 and bad[key] == pytest.approx(value)


def test_script_error_on_one_gpu_and_budget(fake_torch):
    good, bad = _script(fake_torch, "raise")["gpus"]
    assert "error" not in good and bad["error"].startswith("RuntimeError: CUDA error: an illegal memory access")
    data = _script(fake_torch, "no-cuda")
    assert data["available"] is False and "gpus" not in data


def test_parse_rejects_bad_shapes():
    with pytest.raises(ParseError):
        parse_active_output("Traceback (most recent call last):\n")
    with pytest.raises(ParseError):
        parse_active_output('{"active": 1, "gpus": "none"}')


# --------------------------------------------------------------------------- the runner and the checks


class ActiveHost(FakeHost):
    """A test host whose python3 answers the active tests with ``answer`` (a JSON object, or a CommandRun)."""

    def __init__(self, spec, answer):
        super().__init__(spec)
        self.answer = answer
        self.asked: list[tuple[list[str], float]] = []

    def run(self, argv, timeout=10.0):
        if argv[:3] == ["python3", "-c", ACTIVE_TEST_SCRIPT]:
            self.asked.append((argv, timeout))
            if isinstance(self.answer, CommandRun):
                return self.answer
            return CommandRun(tuple(argv), 0, json.dumps(self.answer) + "\n", "", 1.0)
        return super().run(argv, timeout)


def _gpu(index, **values):
    return {"index": index, "name": "NVIDIA H100 80GB HBM3", "pinned": True, "h2d_gbps": 52.1, "d2h_gbps": 50.3,
            "matmul_max_error": 0.0001, "matmul_nonfinite": False, "memory_tested_mib": 512, "memory_mismatches": 0,
            **values}


def _check(answer, name="h100x8-healthy", force=False):
    host = ActiveHost(load_spec(name), answer)
    snapshot = with_active_tests(host, collect(host), budget_s=30, force=force)
    return host, run_checks(snapshot, select=["GH710", "GH711"])


def test_healthy_gpus_pass_both_checks():
    host, report = _check({"active": 1, "installed": True, "available": True, "version": "2.3.1",
                           "gpus": [_gpu(i) for i in range(8)]})
    assert report.findings == () and report.skipped == ()
    (argv, timeout), = host.asked
    assert timeout == 30 and json.loads(argv[3])["budget_s"] == 22.5


def test_low_bandwidth_and_failed_tests_fire():
    gpus = [_gpu(0, h2d_gbps=12.0), _gpu(1, matmul_max_error=37.25), _gpu(2, memory_mismatches=3),
            _gpu(3, error="RuntimeError: CUDA error: an illegal memory access was encountered"),
            _gpu(4, pinned=False, h2d_gbps=3.0), *(_gpu(i) for i in range(5, 8))]
    _, report = _check({"active": 1, "installed": True, "available": True, "gpus": gpus})
    found = {(f.code, f.subject.gpu_index): f for f in report.findings}
    assert set(found) == {("GH710", 0), ("GH711", 1), ("GH711", 2), ("GH711", 3)}
    assert "host-to-device 12.0 GB/s of 63.0 GB/s theoretical (PCIe Gen5 x16)" in found[("GH710", 0)].message
    assert found[("GH710", 0)].severity is Severity.WARNING
    assert found[("GH711", 1)].severity is Severity.CRITICAL and found[("GH711", 2)].severity is Severity.CRITICAL
    assert found[("GH711", 3)].severity is Severity.WARNING


def test_link_rates():
    assert link_rate_gbps(3, 16) == pytest.approx(15.75, abs=0.01)
    assert link_rate_gbps(4, 16) == pytest.approx(31.5, abs=0.01)
    assert link_rate_gbps(5, 16) == pytest.approx(63.0, abs=0.02)
    assert link_rate_gbps(None, 16) is None


def test_refuses_busy_gpus_unless_forced():
    host = ActiveHost(load_spec("h100x8-healthy"), {"active": 1, "installed": True, "available": True,
                                                    "gpus": [_gpu(0)]})
    snapshot = collect(host)
    busy = dataclasses.replace(snapshot.nvml.gpus[2], utilization_gpu_pct=45.0, processes=(GpuProcess(4242),))
    gpus = snapshot.nvml.gpus[:2] + (busy,) + snapshot.nvml.gpus[3:]
    snapshot = dataclasses.replace(snapshot, nvml=dataclasses.replace(snapshot.nvml, gpus=gpus))
    refused = run_active_tests(host, snapshot)
    assert not refused.ran and "GPU 2 (45 % busy, 1 process(es))" in refused.skipped_reason and not host.asked
    skipped = {s.code: s.reason for s in run_checks(dataclasses.replace(snapshot, active=refused),
                                                    select=["GH710", "GH711"]).skipped}
    assert "busy" in skipped["GH710"] and "busy" in skipped["GH711"]
    assert run_active_tests(host, snapshot, force=True).ran and len(host.asked) == 1


def test_skipped_with_the_reason():
    assert run_active_tests(FakeHost(load_spec("no-gpu")), collect(FakeHost(load_spec("no-gpu")))).skipped_reason == \
        "no NVIDIA GPU on this host"
    host = ActiveHost(load_spec("h100x8-healthy"), {"active": 1, "installed": False})
    assert run_active_tests(host, collect(host)).skipped_reason == "PyTorch is not installed for the python3 on PATH"
    timed_out = CommandRun(("python3",), None, timed_out=True, error="timed out after 30 s")
    _, report = _check(timed_out)
    assert [(f.code, f.severity) for f in report.findings] == [("GH711", Severity.WARNING)]
    report = run_checks(collect(FakeHost(load_spec("h100x8-healthy"))), select=["GH710"])
    assert "opt-in" in report.skipped[0].reason


def test_level_2_from_a_bundle_without_active_results_is_skipped_with_the_reason(tmp_path):
    import json

    from click.testing import CliRunner

    from gpuhealth.bundle import RecordingHost
    from gpuhealth.cli import main
    from gpuhealth.collect import collect
    from hostcases import FakeHost, load_spec

    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    level1 = json.loads(CliRunner().invoke(main, ["check", "--from", str(tmp_path / "b"), "--format", "json"]).output)
    level2 = json.loads(CliRunner().invoke(main, ["check", "--from", str(tmp_path / "b"), "--format", "json",
                                                  "--level", "2"]).output)
    reasons = {s["code"]: s["reason"] for s in level2["skipped"]}
    assert "opt-in" in {s["code"]: s["reason"] for s in level1["skipped"]}["GH710"]
    assert "not captured in this bundle" in reasons["GH710"]  # it tried, and says why it could not
    assert not [f for f in level2["findings"] if f["code"] in ("GH710", "GH711")]
