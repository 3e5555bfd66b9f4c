"""GH4xx GPU-state checks over real corpus captures (analyze path), and over real GPUs with one field
changed for the states no redistributable capture shows (remap failure, recovery action, MIG pending)."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Finding, Gpu, NvmlReport, Severity, Snapshot, Subject

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")

GH4 = [f"GH4{i:02d}" for i in range(1, 11)]
A100X8 = "azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out"
A10 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.129.03.out.0.valid.a10"
H100_161 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid"
H100_183 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.183.01.out.0.valid"


def snapshot_of(*names: str) -> Snapshot:
    snapshot, _ = analyze_texts([(name, (CORPUS / name).read_text(errors="replace")) for name in names])
    return snapshot


def findings(snapshot: Snapshot, code: str | None = None) -> list[Finding]:
    report = run_checks(snapshot, select=GH4)
    return [f for f in report.findings if code is None or f.code == code]


def lines(finding: Finding) -> list[str]:
    return [line for evidence in finding.evidence for line in evidence.lines]


def with_gpus(snapshot: Snapshot, change) -> Snapshot:
    """The snapshot with ``change(gpu)`` applied to each nvidia-smi GPU."""
    gpus = tuple(change(g) for g in snapshot.smi.gpus)
    return dataclasses.replace(snapshot, smi=dataclasses.replace(snapshot.smi, gpus=gpus))


def on_gpu(index: int, **fields):
    return lambda g: dataclasses.replace(g, **fields) if g.index == index else g


# --------------------------------------------------------------------------- real captures


def test_a100_remap_pending_excerpt_is_a_warning_and_correctable_errors_stay_quiet():
    snapshot = snapshot_of("ml-engineering/nvidia-smi-q_excerpt_A100_510.73.08_remapped_rows_pending.txt")
    (pending,) = findings(snapshot, "GH401")
    assert pending.severity is Severity.WARNING
    assert pending.subject == Subject(0, "0000:10:1c.0")
    assert "reset the GPU" in pending.message
    assert "Remapped Rows Pending: Yes" in lines(pending)
    assert any(f.command == "sudo nvidia-smi --gpu-reset -i 0" and f.disruptive for f in pending.fixes)
    assert [f.code for f in findings(snapshot)] == ["GH401"]  # 177 correctable DRAM errors: no GH403


def test_a10_with_uncorrectable_remapped_rows_pending():
    found = {f.code: f for f in findings(snapshot_of(A10))}
    assert set(found) == {"GH401", "GH403"}
    assert found["GH401"].severity is Severity.WARNING
    assert "Remapped Rows Uncorrectable Error: 4" in lines(found["GH401"])
    assert found["GH403"].severity is Severity.WARNING
    assert "Remapped rows (uncorrectable error): 4" in lines(found["GH403"])
    assert found["GH403"].subject == Subject(0, "0000:07:00.0")


def test_retired_pages_pending_excerpt():
    (pending,) = findings(snapshot_of("ml-engineering/nvidia-smi-q_excerpt_retired_pages_pending.txt"))
    assert (pending.code, pending.severity) == ("GH401", Severity.WARNING)
    assert lines(pending)[0] == "Retired Pages Pending: Yes"


def test_sram_uncorrectable_in_this_boot_is_critical():
    (ecc,) = findings(snapshot_of("ml-engineering/nvidia-smi-q_excerpt_ecc_sram_uncorrectable.txt"))
    assert (ecc.code, ecc.severity) == ("GH403", Severity.CRITICAL)
    assert lines(ecc)[:3] == ["Volatile uncorrectable: 1", "Aggregate uncorrectable: 5",
                              "Aggregate SRAM uncorrectable: 5"]


def test_azure_retired_pages_are_attributed_to_each_gpu():
    snapshot = snapshot_of("azurehpc-health-checks/bad_nvsmi8_output.txt")
    pending = findings(snapshot, "GH401")
    assert [(f.subject.gpu_index, f.subject.pci_address) for f in pending] == [
        (1, "0002:00:00.0"), (3, "0004:00:00.0"), (5, "0006:00:00.0"), (7, "0008:00:00.0")]
    history = {f.subject.gpu_index: f for f in findings(snapshot, "GH403")}
    assert sorted(history) == [0, 1, 5, 7]  # GPU 3 has only single-bit retirements
    assert all(f.severity is Severity.WARNING for f in history.values())
    assert history[0].subject.pci_address == "0001:00:00.0"
    assert lines(history[0]) == ["Retired pages (double bit ECC): 5"]
    assert findings(snapshot_of("azurehpc-health-checks/orig_nvsmi8_output.txt")) == []


def test_inforom_warning_names_the_gpu():
    (corrupt,) = findings(snapshot_of("azhpc-diagnostics/nvidia-smi_8xV100-SXM2_460.32.03_inforom-corrupted.out"))
    assert (corrupt.code, corrupt.severity) == ("GH405", Severity.WARNING)
    assert corrupt.subject == Subject(7, "0008:00:00.0")
    assert lines(corrupt) == ["WARNING: infoROM is corrupted at gpu 0008:00:00.0"]


def test_fan_err_in_the_table_is_a_warning():
    (fan,) = findings(snapshot_of("gpud/accelerator_nvidia_query__nvidia-smi.525.125.06.out.0.valid"))
    assert (fan.code, fan.severity) == ("GH410", Severity.WARNING)
    assert lines(fan)[0] == "Fan: ERR!"


def test_h100_power_brake_on_idle_cool_gpus_is_not_reported_but_is_under_load():
    snapshot = snapshot_of(H100_161)
    assert {g.clock_event_reasons for g in snapshot.gpus} == {("hw_slowdown", "hw_power_brake_slowdown")}
    assert findings(snapshot, "GH406") == []
    (slow,) = findings(with_gpus(snapshot, on_gpu(4, utilization_gpu_pct=95.0)), "GH406")
    assert (slow.severity, slow.subject) == (Severity.WARNING, Subject(4, "0000:9b:00.0"))
    assert lines(slow)[:2] == ["HW Slowdown: Active", "HW Power Brake Slowdown: Active"]
    assert "Utilization GPU: 95 %" in lines(slow)
    assert any("ipmitool sel" in f.command for f in slow.fixes)


def test_h100_sw_thermal_slowdown_is_a_warning_even_when_idle():
    (slow,) = findings(snapshot_of(H100_183), "GH406")
    assert slow.severity is Severity.WARNING
    assert slow.subject == Subject(2, "0000:75:00.0")
    assert lines(slow)[:2] == ["SW Thermal Slowdown: Active", "HW Power Brake Slowdown: Active"]


def test_idle_a100s_are_quiet():
    assert findings(snapshot_of(A100X8)) == []


@pytest.mark.parametrize("name", ["telegraf-nvidia-smi/dual_2080-v13.xml", "telegraf-nvidia-smi/tesla-t4.xml"])
def test_narrow_link_on_every_gpu_alike_is_info(name):
    narrow = findings(snapshot_of(name), "GH407")
    assert narrow and all(f.severity is Severity.INFO for f in narrow)
    assert "Link Width Current: 8x" in lines(narrow[0])


def test_nvlink_inactive_links_per_gpu():
    snapshot = snapshot_of("azhpc-diagnostics/nvlink-s_8xV100-SXM2_inactive-links.out")
    down = {f.subject.gpu_index: f for f in findings(snapshot, "GH408")}
    assert sorted(down) == [3, 4, 5, 6]
    assert all(f.severity is Severity.WARNING for f in down.values())
    assert lines(down[3])[1:] == ["Link 3: <inactive>", "Link 5: <inactive>"]
    assert down[3].message.startswith("2 of 6 NVLink links inactive")


def test_nvlink_all_inactive_on_an_sxm_gpu_is_a_warning():
    (down,) = findings(snapshot_of("azurehpc-health-checks/bad_nvlink_status.txt"), "GH408")
    assert (down.severity, down.subject.gpu_index) == (Severity.WARNING, 6)
    assert down.message == "All NVLink links are inactive"


def test_nvlink_all_inactive_on_a_geforce_without_bridge_is_info():
    name = "nvidia-gpu-exporter/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"
    (down,) = findings(snapshot_of(name), "GH408")
    assert down.severity is Severity.INFO
    assert down.subject == Subject(0, "0000:0c:00.0")  # address from the same capture's -q


@pytest.mark.parametrize("name", ["azurehpc-health-checks/good_nvlink_status.txt",
                                  "gpud/nvidia-query__nvidia-smi.nvlink.status.a100"])
def test_nvlink_all_active_is_quiet(name):
    assert findings(snapshot_of(name), "GH408") == []


def test_checks_skip_with_a_reason_without_gpu_data():
    snapshot = snapshot_of("gpud/query_log_tail__dmesg.0.log")
    report = run_checks(snapshot, select=GH4)
    assert report.findings == ()
    reasons = {s.code: s.reason for s in report.skipped}
    assert set(reasons) == set(GH4)
    assert reasons["GH401"] == "not in the evidence given"


# --------------------------------------------------------------------------- one field changed


def test_remap_failure_is_critical_and_explains_the_pending_remap():
    from gpuhealth.report.common import fold

    snapshot = with_gpus(snapshot_of(A10), on_gpu(0, remapped_rows_failure=True))
    report = run_checks(snapshot, select=GH4)
    failed = next(f for f in report.findings if f.code == "GH402")
    assert failed.severity is Severity.CRITICAL
    assert "Remapped Rows Remapping Failure Occurred: Yes" in lines(failed)
    cause = next(c for c in fold(report.findings) if c.finding.code == "GH402")
    assert [s.code for s in cause.symptoms] == ["GH401"]


@pytest.mark.parametrize(("fields", "message", "command"), [
    ({"recovery_action": "Node Reboot"}, "The GPU needs recovery: Node Reboot", "sudo reboot"),
    ({"recovery_action": "GPU Reset"}, "The GPU needs recovery: GPU Reset", "sudo nvidia-smi --gpu-reset -i 3"),
    ({"reset_required": True}, "The GPU needs recovery: GPU reset required", "sudo nvidia-smi --gpu-reset -i 3"),
])
def test_reset_required_names_the_action(fields, message, command):
    (reset,) = findings(with_gpus(snapshot_of(A100X8), on_gpu(3, **fields)), "GH404")
    assert (reset.severity, reset.message, reset.subject.gpu_index) == (Severity.CRITICAL, message, 3)
    assert reset.fixes[0].command == command


def test_recovery_action_none_is_quiet():
    assert findings(with_gpus(snapshot_of(A100X8), on_gpu(3, recovery_action="None")), "GH404") == []


def test_mig_change_pending():
    (mig,) = findings(with_gpus(snapshot_of(A100X8), on_gpu(5, mig_mode_pending="Enabled")), "GH409")
    assert (mig.severity, mig.subject.gpu_index) == (Severity.WARNING, 5)
    assert lines(mig) == ["MIG Mode Current: Disabled", "MIG Mode Pending: Enabled"]


@pytest.mark.parametrize(("temperature", "severity"), [(83.0, None), (84.0, Severity.WARNING),
                                                      (90.0, Severity.WARNING), (92.0, Severity.CRITICAL)])
def test_temperature_against_the_gpus_own_thresholds(temperature, severity):
    # A100-SXM4-40GB: slowdown 89 C, shutdown 92 C in the capture
    found = findings(with_gpus(snapshot_of(A100X8), on_gpu(1, temperature_c=temperature)), "GH406")
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_hw_slowdown_under_load_is_a_warning():
    snapshot = with_gpus(snapshot_of(A100X8), on_gpu(2, clock_event_reasons=("hw_slowdown",),
                                                     utilization_gpu_pct=97.0))
    (slow,) = findings(snapshot, "GH406")
    assert slow.severity is Severity.WARNING and "HW Slowdown: Active" in lines(slow)


def test_sw_power_cap_and_idle_are_not_faults():
    snapshot = with_gpus(snapshot_of(A100X8), lambda g: dataclasses.replace(
        g, clock_event_reasons=("gpu_idle", "sw_power_cap"), utilization_gpu_pct=100.0))
    assert findings(snapshot, "GH406") == []


def test_one_narrow_link_among_identical_gpus_is_a_warning():
    (narrow,) = findings(with_gpus(snapshot_of(A100X8), on_gpu(3, pcie_width_current=8)), "GH407")
    assert (narrow.severity, narrow.subject.gpu_index) == (Severity.WARNING, 3)
    assert narrow.message == "PCIe link below its maximum: link width x8 of x16"


def test_lower_pcie_generation_counts_only_under_load():
    idle = with_gpus(snapshot_of(A100X8), on_gpu(4, pcie_gen_current=1))
    assert findings(idle, "GH407") == []
    busy = with_gpus(snapshot_of(A100X8), on_gpu(4, pcie_gen_current=3, utilization_gpu_pct=80.0))
    (slow,) = findings(busy, "GH407")
    assert slow.severity is Severity.WARNING and "PCIe Gen3 of Gen4 while 80 % busy" in slow.message


def test_nvml_gpus_are_completed_with_nvidia_smi_fields():
    """NVML has no recovery action or retired page counts: nvidia-smi's values for the same GPU count."""
    snapshot = with_gpus(snapshot_of(A100X8), on_gpu(6, recovery_action="Node Reboot", ecc_volatile_uncorrected=2))
    nvml_gpus = tuple(Gpu(index=g.index, pci_address=g.pci_address, ecc_volatile_uncorrected=g.ecc_volatile_uncorrected,
                          source="NVML") for g in snapshot.smi.gpus)
    snapshot = dataclasses.replace(snapshot, nvml=NvmlReport(ok=True, gpus=nvml_gpus))
    assert snapshot.gpus[6].recovery_action is None  # what a check reading snapshot.gpus would miss
    found = {f.code: f for f in findings(snapshot)}
    assert found["GH404"].message == "The GPU needs recovery: Node Reboot"
    assert found["GH404"].evidence[0].source == A100X8
    assert found["GH403"].evidence[0].source == "NVML (nvidia-ml-py)"


# --------------------------------------------------------------------------- thresholds from the config


def gh406(snapshot: Snapshot, expect) -> list[Finding]:
    return [f for f in run_checks(snapshot, expect, select=["GH406"]).findings]


def test_config_thresholds_judge_h100_that_prints_only_t_limit_margins():
    from gpuhealth.checks.registry import Expectations

    snapshot = with_gpus(snapshot_of(H100_161), on_gpu(6, temperature_c=88.0))
    assert {g.temperature_slowdown_c for g in snapshot.gpus} == {None}  # 535 prints only T.Limit margins
    assert gh406(snapshot, Expectations()) == []
    name = "nvidia h100 80gb hbm3"  # matched case-insensitively
    expect = Expectations(models={name: {"temperature_slowdown_c": 90, "temperature_shutdown_c": 95}})
    (hot,) = gh406(snapshot, expect)
    assert (hot.severity, hot.subject.gpu_index) == (Severity.WARNING, 6)
    assert "within 5 °C of its slowdown threshold (90 °C)" in hot.message
    assert f'GPU Slowdown Temp: 90 C (config [check.models."{name}"] temperature_slowdown_c)' in lines(hot)
    assert f'GPU Shutdown Temp: 95 C (config [check.models."{name}"] temperature_shutdown_c)' in lines(hot)
    (stop,) = gh406(snapshot, Expectations(models={name: {"temperature_shutdown_c": 88}}))
    assert stop.severity is Severity.CRITICAL and "shutdown threshold (88 °C)" in stop.message


def test_config_threshold_overrides_the_gpus_own_and_margin_is_configurable():
    from gpuhealth.checks.registry import Expectations

    snapshot = with_gpus(snapshot_of(A100X8), on_gpu(2, temperature_c=82.0))  # the A100 says 89 °C slowdown
    assert gh406(snapshot, Expectations()) == []
    (near,) = gh406(snapshot, Expectations(temperature_margin_c=7))
    assert "within 7 °C of its slowdown threshold (89 °C)" in near.message
    assert "GPU Slowdown Temp: 89 C (reported by the GPU)" in lines(near)
    assert "GPU Shutdown Temp: 92 C (reported by the GPU)" in lines(near)
    expect = Expectations(models={"A100-SXM4-40GB": {"temperature_slowdown_c": 85}})
    (near,) = gh406(snapshot, expect)
    assert near.subject.gpu_index == 2 and "(85 °C)" in near.message
    assert 'GPU Slowdown Temp: 85 C (config [check.models."A100-SXM4-40GB"] temperature_slowdown_c)' in lines(near)
    assert "GPU Shutdown Temp: 92 C (reported by the GPU)" in lines(near)
    assert gh406(snapshot, dataclasses.replace(expect, temperature_margin_c=0)) == []


def test_gh508_counts_any_graphics_process_type_as_a_display_client():
    """GH508 (install checks) on the centos7 host case: a process of Type G or C+G whose name is not a known
    display server still holds the compute GPU as a display client; a compute process does not."""
    from gpuhealth.collect import collect
    from gpuhealth.model import GpuProcess
    from hostcases import FakeHost, load_spec

    snapshot = collect(FakeHost(load_spec("centos7-desktop-mixed-install")))

    def gh508(processes):
        changed = with_gpus(snapshot, lambda g: dataclasses.replace(g, processes=processes))
        return [f for f in run_checks(changed, select=["GH508"]).findings if f.message.startswith("A display")]

    (held,) = gh508((GpuProcess(4242, "/opt/viz/render", 40.0, "C+G"),))
    assert held.severity is Severity.WARNING
    assert "GPU 0: /opt/viz/render (pid 4242, type C+G, 40 MiB)" in lines(held)
    assert gh508((GpuProcess(4243, "/usr/bin/python3", 900.0, "C"),)) == []
