"""The expectations file (config.py) and how the checks resolve an expectation: per model, global, default."""

from __future__ import annotations

import dataclasses

import pytest

from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import Expectations
from gpuhealth.checks.topology import expected_value
from gpuhealth.collect import collect
from gpuhealth.config import load_expectations
from gpuhealth.knowledge import gpu_expectations
from gpuhealth.model import OsInfo, Snapshot
from hostcases import FakeHost, load_spec


def _load(tmp_path, text: str) -> Expectations:
    path = tmp_path / "gpuhealth.toml"
    path.write_text(text)
    return load_expectations(path)


def test_every_key(tmp_path):
    expect = _load(tmp_path, 'gpu_count = 8\nnvlink_count = 12\npcie_width = 16\nxid_rate_per_hour = 5\n'
                             '[models."NVIDIA H100 80GB HBM3"]\nnvlink_count = 18\npcie_width = 16\n')
    assert (expect.gpu_count, expect.nvlink_count, expect.pcie_width, expect.xid_rate_per_hour) == (8, 12, 16, 5)
    assert expect.models == {"NVIDIA H100 80GB HBM3": {"nvlink_count": 18, "pcie_width": 16}}


def test_temperature_keys(tmp_path):
    expect = _load(tmp_path, 'temperature_margin_c = 3\n[models."NVIDIA H100 80GB HBM3"]\n'
                             'temperature_slowdown_c = 87\ntemperature_shutdown_c = 92\n')
    assert expect.temperature_margin_c == 3
    assert expect.models == {"NVIDIA H100 80GB HBM3": {"temperature_slowdown_c": 87, "temperature_shutdown_c": 92}}
    assert _load(tmp_path, "").temperature_margin_c is None  # GH406 then uses 5


def test_empty_file_expects_nothing(tmp_path):
    assert _load(tmp_path, "") == Expectations()


@pytest.mark.parametrize("text, message", [
    ("gpus = 8\n", "unknown key(s) gpus"),
    ("nvlink_count = -1\n", "nvlink_count must be a non-negative integer"),
    ("pcie_width = true\n", "pcie_width must be a non-negative integer"),
    ('pcie_width = "16"\n', "pcie_width must be a non-negative integer"),
    ("xid_rate_per_hour = 0\n", "xid_rate_per_hour must be a positive integer"),
    ('models = "H100"\n', "models must be tables"),
    ('[models."A100-SXM4-40GB"]\ngpu_count = 8\n', 'models."A100-SXM4-40GB": unknown key(s) gpu_count'),
    ('[models."A100-SXM4-40GB"]\nnvlink_count = 1.5\n', "nvlink_count must be a non-negative integer"),
    ("gpu_count = \n", "not valid TOML"),
    ("temperature_margin_c = -1\n", "temperature_margin_c must be a non-negative integer"),
    ('[models."H100"]\ntemperature_slowdown_c = "87"\n', 'models."H100".temperature_slowdown_c must be'),
    ('[models."H100"]\ntemperature_limit_c = 87\n', "unknown key(s) temperature_limit_c"),
])
def test_bad_files_say_what_is_wrong(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _load(tmp_path, text)


def test_model_defaults_are_sourced_and_specific():
    assert gpu_expectations.lookup("NVIDIA H100 80GB HBM3").nvlink_count == 18
    assert gpu_expectations.lookup("A100-SXM4-40GB").nvlink_count == 12
    assert gpu_expectations.lookup("Tesla V100-SXM2-32GB").nvlink_count == 6
    assert gpu_expectations.lookup("NVIDIA A10").pcie_width == 16
    assert gpu_expectations.lookup("NVIDIA A100-SXM4-80GB").nvlink_count == 12  # not taken for an A10
    assert gpu_expectations.lookup("NVIDIA H100 PCIe") is None
    assert gpu_expectations.lookup("NVIDIA GeForce RTX 4090") is None
    assert all(row.source for _, row in gpu_expectations.table())


def test_expectation_precedence():
    name, host = "NVIDIA H100 80GB HBM3", Snapshot()
    assert expected_value(host, Expectations(), name, "nvlink_count")[0] == 18
    assert expected_value(host, Expectations(nvlink_count=4), name, "nvlink_count") == (
        4, "config [check] nvlink_count")
    per_model = Expectations(nvlink_count=4, models={"nvidia h100 80gb hbm3": {"nvlink_count": 16}})
    assert expected_value(host, per_model, name, "nvlink_count")[0] == 16
    assert expected_value(host, Expectations(), "NVIDIA GeForce RTX 4090", "nvlink_count") == (None, "")
    # the platform (knowledge/platforms.csv) comes after the configuration and before the model's default
    dgx = Snapshot(os=OsInfo(machine_vendor="NVIDIA", machine_product="NVIDIA DGX A100"))
    assert expected_value(dgx, Expectations(), "NVIDIA GeForce RTX 4090", "nvlink_count") == (
        12, "NVIDIA DGX A100 (NVIDIA blog: Introducing NVIDIA HGX A100)")
    assert expected_value(dgx, Expectations(nvlink_count=4), name, "nvlink_count")[0] == 4
    assert expected_value(dgx, Expectations(), name, "pcie_width")[0] == 16  # no platform value: the model's


def _report(name: str, expect: Expectations, codes: list[str]):
    return run_checks(collect(FakeHost(load_spec(name))), expect, select=codes)


def test_config_override_quiets_and_raises_gh701():
    # GPU 3 has 16 of 18 links in this case: an operator who expects 16 sees no GH701 for it
    expect = Expectations(models={"NVIDIA H100 80GB HBM3": {"nvlink_count": 16}})
    report = _report("h100x8-topology-degraded", expect, ["GH701"])
    assert [f.subject.gpu_index for f in report.findings] == [7]
    report = _report("h100x8-topology-healthy", Expectations(nvlink_count=20), ["GH701"])
    assert len(report.findings) == 8


def test_pcie_width_expectation_gh705():
    report = _report("h100x8-topology-healthy", Expectations(), ["GH705"])
    assert report.findings == () and report.skipped == ()  # judged: every H100 at x16
    spec = load_spec("h100x8-topology-healthy")
    snapshot = collect(FakeHost(spec))
    narrow = dataclasses.replace(snapshot.nvml.gpus[5], pcie_width_current=8)
    gpus = snapshot.nvml.gpus[:5] + (narrow,) + snapshot.nvml.gpus[6:]
    snapshot = dataclasses.replace(snapshot, nvml=dataclasses.replace(snapshot.nvml, gpus=gpus))
    report = run_checks(snapshot, Expectations(), select=["GH705", "GH407"])
    gh705 = [f for f in report.findings if f.code == "GH705"]
    assert [f.subject.gpu_index for f in gh705] == [5] and "x8, x16 expected" in gh705[0].message
    assert gh705[0].explains == ("GH407",)
    assert run_checks(snapshot, Expectations(pcie_width=8), select=["GH705"]).findings == ()


def test_xid_rate_threshold_from_config():
    assert _report("h100x8-topology-degraded", Expectations(xid_rate_per_hour=14), ["GH704"]).findings == ()
    assert len(_report("h100x8-topology-degraded", Expectations(xid_rate_per_hour=13), ["GH704"]).findings) == 1
