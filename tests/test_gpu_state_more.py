"""GH411-GH413 (compute mode, power limit, fan under load) over a real 8x H100 capture with one field
changed, and PCIe replays rising as drift."""

from __future__ import annotations

import dataclasses

from gpuhealth.checks.engine import run_checks
from gpuhealth.drift import diff, run_of
from gpuhealth.model import Severity
from test_gpu_state import H100_161, on_gpu, snapshot_of, with_gpus

CODES = ["GH411", "GH412", "GH413"]


def fired(snapshot):
    return [f for f in run_checks(snapshot, select=CODES).findings]


def test_the_real_capture_is_quiet():
    snapshot = snapshot_of(H100_161)
    assert {g.compute_mode for g in snapshot.gpus} == {"Default"}
    assert fired(snapshot) == []


def test_prohibited_compute_mode_is_a_warning_exclusive_is_info():
    snapshot = with_gpus(snapshot_of(H100_161), on_gpu(2, compute_mode="Prohibited"))
    snapshot = with_gpus(snapshot, on_gpu(5, compute_mode="Exclusive_Process"))
    by_gpu = {f.subject.gpu_index: f for f in fired(snapshot)}
    assert by_gpu[2].severity is Severity.WARNING and "no CUDA program" in by_gpu[2].message
    assert by_gpu[5].severity is Severity.INFO
    assert by_gpu[2].fixes[0].command == "sudo nvidia-smi -i 2 -c DEFAULT"


def test_power_limit_below_default():
    base = snapshot_of(H100_161)
    default = base.gpus[0].power_default_limit_w
    assert default  # the capture reports it
    capped = with_gpus(base, on_gpu(0, power_limit_w=default * 0.7))
    (finding,) = fired(capped)
    assert finding.code == "GH412" and finding.subject.gpu_index == 0
    assert fired(with_gpus(base, on_gpu(0, power_limit_w=default * 0.97))) == []  # within 5 %


def test_fan_at_zero_under_load_but_not_when_cool_or_idle():
    base = snapshot_of(H100_161)
    stalled = with_gpus(base, on_gpu(1, fan_speed_pct=0, utilization_gpu_pct=90, temperature_c=78))
    (finding,) = fired(stalled)
    assert finding.code == "GH413" and "90 % busy" in finding.message
    cool = with_gpus(base, on_gpu(1, fan_speed_pct=0, utilization_gpu_pct=90, temperature_c=40))
    idle = with_gpus(base, on_gpu(1, fan_speed_pct=0, utilization_gpu_pct=0, temperature_c=78))
    passive = with_gpus(base, on_gpu(1, fan_speed_pct=None, utilization_gpu_pct=90, temperature_c=78))
    assert fired(cool) == fired(idle) == fired(passive) == []


def test_pcie_replays_rising_is_drift():
    before = snapshot_of(H100_161)
    after = with_gpus(before, lambda g: dataclasses.replace(g, pcie_replay_counter=(g.pcie_replay_counter or 0) + 500)
                      if g.index == 3 else g)
    changes = [c for c in diff(run_of(run_checks(before)), run_of(run_checks(after))) if c.kind == "pcie"]
    assert len(changes) == 1 and changes[0].worse and "pcie replay counter" in changes[0].message
