"""Expected hardware without hand configuration: knowledge/platforms.csv, looked up by the firmware's product name
or the configured instance type, and what GH101, GH103, GH701 and GH720 make of it. The DMI product names and the
extra InfiniBand ports are hand-written onto the test hosts (tests/hosts/README.md), in the shape of the real files
(/sys/class/dmi/id/product_name: one line)."""

from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner

from gpuhealth.bundle import RecordingHost
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.expected import expected
from gpuhealth.checks.registry import Expectations
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.config import load_expectations
from gpuhealth.knowledge import platforms
from gpuhealth.model import OsInfo, Severity, Snapshot
from hostcases import FakeHost, load_spec


def _with_dmi(spec: dict, product: str, vendor: str = "NVIDIA") -> dict:
    spec.setdefault("files", {}).update({"/sys/class/dmi/id/sys_vendor": f"{vendor}\n",
                                         "/sys/class/dmi/id/product_name": f"{product}\n"})
    return spec


def _report(spec: dict, expect: Expectations | None = None, select: list[str] | None = None):
    return run_checks(collect(FakeHost(spec), frameworks=False), expect, select=select)


def _codes(report, code):
    return [f for f in report.findings if f.code == code]


# --------------------------------------------------------------------------- the table


def test_every_row_cites_its_document_and_efa_is_not_infiniband():
    rows = [platform for _, platform in platforms.table()]
    assert len(rows) >= 20
    assert all("<https://" in p.source and p.document for p in rows)
    efa = [p for p in rows if p.network == "EFA"]
    assert {p.name for p in efa} >= {"AWS p4d.24xlarge", "AWS p5.48xlarge", "AWS p5en.48xlarge"}
    assert all(p.ib_port_count is None and p.ib_rate_gbps is None for p in efa)


@pytest.mark.parametrize(("name", "platform", "gpus", "nvlinks", "ports", "rate"), [
    ("NVIDIA DGX H100", "NVIDIA DGX H100", 8, 18, 8, 400),
    ("DGXH100", "NVIDIA DGX H100", 8, 18, 8, 400),
    ("DGX H200", "NVIDIA DGX H200", 8, 18, 8, 400),
    ("NVIDIA DGX A100", "NVIDIA DGX A100", 8, 12, 8, 200),
    # a DGX A100's firmware as a public `dmidecode -t 1` shows it: model, no space, then the part number
    ("DGXA100 920-23687-2531-001", "NVIDIA DGX A100", 8, 12, 8, 200),
    ("a3-highgpu-8g", "GCP a3-highgpu-8g", 8, None, None, None),
    ("a2-ultragpu-2g", "GCP a2-ultragpu-2g", 2, None, None, None),
    ("Standard_ND96asr_v4", "Azure Standard_ND96asr_v4", 8, None, 8, 200),
    ("DGX B200", "NVIDIA DGX B200", 8, None, 8, 400),  # the guide gives no link count: none invented
    ("p4d.24xlarge", "AWS p4d.24xlarge", 8, None, None, None),
    ("Standard_ND96amsr_A100_v4", "Azure Standard_ND96amsr_A100_v4", 8, None, 8, 200),
    ("ND96isr_H100_v5", "Azure Standard_ND96isr_H100_v5", 8, None, 8, 400),
    ("a2-highgpu-4g", "GCP a2-highgpu-4g", 4, None, None, None),
    ("a2-megagpu-16g", "GCP a2-megagpu-16g", 16, None, None, None),
])
def test_lookup(name, platform, gpus, nvlinks, ports, rate):
    found = platforms.lookup(name)
    assert found is not None and found.name == platform
    assert (found.gpu_count, found.nvlink_count, found.ib_port_count, found.ib_rate_gbps) == (gpus, nvlinks, ports,
                                                                                             rate)


@pytest.mark.parametrize("name", ["NVIDIA DGX-2", "DGX-1 with V100", "Virtual Machine", "Google Compute Engine",
                                  "PowerEdge XE9680", "p4d.24xlarge.extra", "a2-highgpu-8", "DGX H1000", ""])
def test_names_not_listed(name):
    assert platforms.lookup(name) is None


def test_configured_instance_type_comes_before_the_firmware_and_config_values_before_both():
    snapshot = Snapshot(os=OsInfo(machine_vendor="Microsoft Corporation", machine_product="Virtual Machine"))
    assert expected(snapshot, Expectations(), "gpu_count") == (None, "")
    azure = Expectations(instance_type="Standard_ND96asr_v4")
    assert expected(snapshot, azure, "ib_rate_gbps") == (200, "Azure Standard_ND96asr_v4 (Azure ND A100 v4 series)")
    dgx = Snapshot(os=OsInfo(machine_vendor="NVIDIA", machine_product="DGXH100"))
    assert expected(dgx, azure, "ib_rate_gbps")[0] == 200  # the configured type names the VM exactly
    assert expected(dgx, Expectations(ib_rate_gbps=100), "ib_rate_gbps") == (100, "config [check] ib_rate_gbps")
    assert expected(dgx, Expectations(), "nvlink_count") == (
        18, "NVIDIA DGX H100 (NVIDIA DGX BasePOD Reference Architecture)")


def test_instance_type_in_the_config(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[check]\ninstance_type = "Standard_ND96isr_H100_v5"\n')
    assert load_expectations(path).instance_type == "Standard_ND96isr_H100_v5"
    path.write_text('[check]\ninstance_type = "a3-highgpu-8g; rm -rf /"\n')
    with pytest.raises(ValueError, match="instance_type must be a cloud instance type"):
        load_expectations(path)


# --------------------------------------------------------------------------- GH103


def test_a_dgx_h100_with_seven_gpus_and_no_config_fires_gh103():
    spec = _with_dmi(load_spec("h100x8-healthy"), "NVIDIA DGX H100")
    spec["pci"] = spec["pci"][1:]
    findings = _codes(_report(spec, select=["GH103"]), "GH103")
    assert [f.severity for f in findings] == [Severity.CRITICAL]
    assert findings[0].message == ("7 NVIDIA GPU(s) on the PCI bus, 8 expected: NVIDIA DGX H100 "
                                   "(NVIDIA DGX BasePOD Reference Architecture)")


def test_a_dgx_h100_with_its_eight_gpus_is_judged_and_quiet():
    report = _report(_with_dmi(load_spec("h100x8-healthy"), "NVIDIA DGX H100"), select=["GH103"])
    assert report.findings == () and not report.skipped


def test_the_configured_count_overrides_the_table():
    spec = _with_dmi(load_spec("h100x8-healthy"), "NVIDIA DGX H100")
    spec["pci"] = spec["pci"][1:]
    assert _report(spec, Expectations(gpu_count=7), select=["GH103"]).findings == ()
    message = _codes(_report(spec, Expectations(gpu_count=8), select=["GH103"]), "GH103")[0].message
    assert message.endswith("8 expected: config [check] gpu_count")


def test_an_unknown_product_name_changes_nothing():
    plain = _report(load_spec("h100x8-host-quiet"))
    unknown = _report(_with_dmi(load_spec("h100x8-host-quiet"), "PowerEdge XE9680", "Dell Inc."))

    def seen(report):
        return ({(f.code, f.severity, f.message) for f in report.findings},
                {(s.code, s.reason) for s in report.skipped})
    assert seen(plain) == seen(unknown)
    assert "GH103" in {s.code for s in unknown.skipped}


# --------------------------------------------------------------------------- GH720


def _ib_host(active: int, ethernet_vf: bool = False) -> dict:
    """h100x8-host-quiet with eight NDR ports (its four, and four more of mlx5_0's shape), ``active`` of them
    ACTIVE; with ``ethernet_vf`` also an ACTIVE Ethernet port, as an Azure VM's accelerated-networking VF shows."""
    spec = load_spec("h100x8-host-quiet")
    files, listings = spec["files"], spec["listings"]
    template = {path.removeprefix("/sys/class/infiniband/mlx5_0/"): text for path, text in files.items()
                if path.startswith("/sys/class/infiniband/mlx5_0/")}
    names = [f"mlx5_{i}" for i in range(8)] + (["mlx5_an0"] if ethernet_vf else [])
    for name in names:
        for tail, text in template.items():
            files.setdefault(f"/sys/class/infiniband/{name}/{tail}", copy.copy(text))
        listings[f"/sys/class/infiniband/{name}/ports"] = ["1"]
    listings["/sys/class/infiniband"] = names
    for name in names[active:8]:
        files[f"/sys/class/infiniband/{name}/ports/1/state"] = "1: DOWN\n"
        files[f"/sys/class/infiniband/{name}/ports/1/phys_state"] = "3: Disabled\n"
    if ethernet_vf:
        files["/sys/class/infiniband/mlx5_an0/ports/1/link_layer"] = "Ethernet\n"
        files["/sys/class/infiniband/mlx5_an0/ports/1/rate"] = "100 Gb/sec (4X EDR)\n"
    return _with_dmi(spec, "Virtual Machine", "Microsoft Corporation")


AZURE = Expectations(instance_type="Standard_ND96isr_H100_v5")


def test_an_azure_nd_h100_v5_with_seven_active_ib_ports_fires_gh720():
    findings = _codes(_report(_ib_host(7, ethernet_vf=True), AZURE, select=["GH720"]), "GH720")
    assert [(f.severity, f.message) for f in findings] == [
        (Severity.WARNING, "7 of 8 expected InfiniBand/RoCE ports are ACTIVE (Azure Standard_ND96isr_H100_v5 "
                           "(Azure ND H100 v5 series))")]  # the Ethernet VF is no InfiniBand port: not counted


def test_an_azure_nd_h100_v5_with_eight_is_quiet_and_without_the_instance_type_not_judged():
    assert _codes(_report(_ib_host(8, ethernet_vf=True), AZURE, select=["GH720"]), "GH720") == []
    unknown = _codes(_report(_ib_host(7), select=["GH720"]), "GH720")
    assert [f.severity for f in unknown] == [Severity.INFO]  # down ports listed, not judged
    assert "set [check] ib_port_count to judge" in unknown[0].message


def test_a_port_below_the_platforms_rate_and_the_configured_rate_over_it():
    spec = _ib_host(8, ethernet_vf=True)
    spec["files"]["/sys/class/infiniband/mlx5_1/ports/1/rate"] = "200 Gb/sec (4X HDR)\n"
    findings = _codes(_report(spec, AZURE, select=["GH720"]), "GH720")
    assert [f.message for f in findings] == ["mlx5_1 port 1 runs at 200 Gb/sec (4X HDR), below the 400 Gb/sec "
                                             "expected (Azure Standard_ND96isr_H100_v5 (Azure ND H100 v5 series))"]
    # a configured rate judges every ACTIVE port, as before: the Ethernet VF at 100 Gb/s too
    configured = Expectations(instance_type="Standard_ND96isr_H100_v5", ib_rate_gbps=200)
    assert [f.labels["device"] for f in _codes(_report(spec, configured, select=["GH720"]), "GH720")] == ["mlx5_an0"]


def test_the_configured_port_count_overrides_the_table():
    findings = _codes(_report(_ib_host(7), Expectations(instance_type="Standard_ND96isr_H100_v5", ib_port_count=7),
                              select=["GH720"]), "GH720")
    assert not [f for f in findings if f.severity is not Severity.INFO]


def test_a_listed_platform_off_its_fabric_is_said_not_judged():
    findings = _codes(_report(_ib_host(0), AZURE, select=["GH720"]), "GH720")
    assert [f.severity for f in findings] == [Severity.INFO]
    assert findings[0].message.startswith("No InfiniBand port is ACTIVE, not judged against the platform's")
    assert "(Azure Standard_ND96isr_H100_v5 (Azure ND H100 v5 series): 8 ports;" in findings[0].message


def test_efa_instances_carry_no_infiniband_expectation():
    spec = _with_dmi(_ib_host(7), "p5.48xlarge", "Amazon EC2")
    findings = _codes(_report(spec, select=["GH720"]), "GH720")
    assert [f.severity for f in findings] == [Severity.INFO]


# --------------------------------------------------------------------------- GH101: the scheduler's decision


def test_an_instance_whose_gpus_left_the_bus_stays_drained(tmp_path, monkeypatch):
    """p5.48xlarge in the firmware's product name (as AWS Nitro instances show it), no GPU on the bus, no count
    configured and no memory: the node lost its GPUs and is drained."""
    spec = _with_dmi(load_spec("no-gpu"), "p5.48xlarge", "Amazon EC2")
    recorder = RecordingHost(FakeHost(spec), tmp_path / "bundle", hostname="n1")
    collect(recorder)
    recorder.finish()
    monkeypatch.delenv("GPUHEALTH_FAIL_ON", raising=False)
    result = CliRunner().invoke(main, ["check", "--from", str(tmp_path / "bundle"), "--format", "nhc"])
    code, line = result.exit_code, result.output
    assert code == 2 and line.startswith("gpuhealth: GH101 no-nvidia-gpu impact=node_unusable"), line
    assert "AWS p5.48xlarge, is built with 8 (secondary EC2 instance listings)" in line, line
