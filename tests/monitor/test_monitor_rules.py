"""Every rule against generated traces: one where it fires (and resolves) and one where it stays quiet."""

from __future__ import annotations

import json

import pytest
from monitor_fakes import NOTE, T0, busy, fired, play, samples

from gpuhealth.monitor.config import load_config, parse_duration
from gpuhealth.monitor.rules import Debounce, RuleSet
from gpuhealth.monitor.sample import GpuLost, XidEvent


def test_generated_traces_say_so_in_their_header(tmp_path):
    play(samples(0, 2, **busy()), tmp_path)
    header = json.loads((tmp_path / "trace.jsonl").read_text().splitlines()[0])
    assert header["format"] == "gpuhealth-trace" and header["version"] == 1
    assert header["note"] == NOTE and "GENERATED" in NOTE


def test_debounce_needs_the_condition_to_hold_and_to_clear():
    d = Debounce(for_s=10, clear_for_s=5)
    assert [d.step(t, True, False) for t in (0, 5)] == [None, None]
    assert d.step(10, True, False) == "firing"
    assert d.step(11, False, False) is None  # inside the hysteresis band: still firing
    assert [d.step(t, False, True) for t in (12, 16)] == [None, None]
    assert d.step(17, False, True) == "resolved"


def test_temperature_fires_after_its_duration_and_resolves_below_the_band(tmp_path):
    hot = samples(0, 60, **busy(temperature_c=88))
    cool = samples(0, 90, t0=T0 + 60, **busy(temperature_c=70))
    alerts = play(hot + cool, tmp_path)
    (firing,) = fired(alerts, "temperature")
    assert firing.t == T0 + 30 and "88 °C" in firing.message and firing.gpu == 0
    assert len(fired(alerts, "temperature", "resolved")) == 1


def test_temperature_uses_the_gpus_slowdown_threshold_when_known(tmp_path):
    alerts = play(samples(0, 40, **busy(temperature_c=80, temperature_slowdown_c=84)), tmp_path)
    assert "alert at 79 °C" in fired(alerts, "temperature")[0].message


def test_temperature_flapping_at_the_threshold_does_not_storm(tmp_path):
    alerts = play(samples(0, 600, **busy(temperature_c=lambda i: 85 if i % 2 else 84)), tmp_path)
    assert fired(alerts, "temperature") == []  # never 30 s in a row
    alerts = play(samples(0, 600, **busy(temperature_c=lambda i: 86 if i < 100 else 84 + i % 2)), tmp_path)
    assert len(fired(alerts, "temperature")) == 1 and fired(alerts, "temperature", "resolved") == []


def test_temperature_quiet_when_cool(tmp_path):
    assert fired(play(samples(0, 120, **busy()), tmp_path), "temperature") == []


def test_stuck_temperature_sensor_while_power_moves(tmp_path):
    alerts = play(samples(0, 70, step=10, **busy(temperature_c=47)), tmp_path)
    (stuck,) = fired(alerts, "stuck_sensor")
    assert stuck.key == "temperature_c" and stuck.t == T0 + 600


def test_flat_readings_on_an_idle_gpu_are_not_a_stuck_sensor(tmp_path):
    still = dict(temperature_c=35, power_w=60, utilization_gpu_pct=0, process_count=0)
    assert fired(play(samples(0, 70, step=10, **still), tmp_path), "stuck_sensor") == []


def test_hung_job_fires_when_a_process_holds_memory_at_zero_utilisation(tmp_path):
    alerts = play(samples(0, 70, step=10, **busy(utilization_gpu_pct=0)), tmp_path)
    assert fired(alerts, "hung_job")[0].t == T0 + 600
    quiet = play(samples(0, 70, step=10, **busy(utilization_gpu_pct=0, process_count=0,
                                                  process_memory_mib=0)), tmp_path)
    assert fired(quiet, "hung_job") == []


def test_utilization_collapse_from_busy_to_zero(tmp_path):
    before = samples(0, 60, **busy())
    after = samples(0, 400, t0=T0 + 60, **busy(utilization_gpu_pct=0))
    back = samples(0, 60, t0=T0 + 460, **busy())
    alerts = play(before + after + back, tmp_path)
    assert fired(alerts, "utilization_collapse")[0].t == T0 + 60 + 300
    assert len(fired(alerts, "utilization_collapse", "resolved")) == 1


def test_utilization_that_was_never_busy_is_no_collapse(tmp_path):
    alerts = play(samples(0, 400, **busy(utilization_gpu_pct=lambda i: 20 if i < 50 else 0)), tmp_path)
    assert fired(alerts, "utilization_collapse") == []


def test_new_xid_fires_once_per_code_graded_by_the_catalogue_and_resolves_when_quiet(tmp_path):
    events = samples(0, 4000, step=1, **busy()) + [XidEvent(T0 + 5, 0, 79), XidEvent(T0 + 6, 0, 79),
                                                     XidEvent(T0 + 7, 0, 13)]
    alerts = play(events, tmp_path)
    firing = fired(alerts, "xid")
    assert [a.key for a in firing] == ["79", "13"]
    assert firing[0].severity == "critical" and "GPU_HAS_FALLEN_OFF_THE_BUS" in firing[0].message
    assert len(fired(alerts, "xid", "resolved")) == 2


def test_no_xid_no_alert(tmp_path):
    assert fired(play(samples(0, 50, **busy()), tmp_path), "xid") == []


def test_ecc_counters_increasing(tmp_path):
    alerts = play(samples(0, 20, **busy(ecc_volatile_uncorrected=lambda i: 0 if i < 10 else 2,
                                        ecc_volatile_corrected=lambda i: 5 if i < 15 else 6)), tmp_path)
    by_key = {a.key: a for a in fired(alerts, "ecc")}
    assert by_key["ecc_volatile_uncorrected"].severity == "critical"
    assert by_key["ecc_volatile_corrected"].severity == "warning"


def test_ecc_counters_nonzero_but_steady_are_quiet(tmp_path):
    alerts = play(samples(0, 20, **busy(ecc_volatile_uncorrected=3, ecc_volatile_corrected=9)), tmp_path)
    assert fired(alerts, "ecc") == []


def test_pending_remapped_rows_fire_and_resolve_after_reset(tmp_path):
    alerts = play(samples(0, 20, **busy(remapped_rows_pending=lambda i: 5 <= i < 10)), tmp_path)
    assert "remapped rows pending" in fired(alerts, "pending_retirement")[0].message
    assert len(fired(alerts, "pending_retirement", "resolved")) == 1
    assert fired(play(samples(0, 20, **busy()), tmp_path), "pending_retirement") == []


def test_hardware_slowdown_active_most_of_the_window(tmp_path):
    alerts = play(samples(0, 400, **busy(clock_event_reasons=lambda i: 0x40 if i % 2 else 0)), tmp_path)
    assert fired(alerts, "clock_slowdown")[0].t == T0 + 150  # half the window covered, 50 % active


def test_idle_and_power_cap_reasons_are_not_slowdown(tmp_path):
    alerts = play(samples(0, 400, **busy(clock_event_reasons=0x1 | 0x4)), tmp_path)
    assert fired(alerts, "clock_slowdown") == []


def test_gpu_lost_fires_once_and_resolves_when_it_answers_again(tmp_path):
    events = samples(0, 10, **busy()) + samples(1, 100, **busy())
    events += [GpuLost(T0 + t, 0, "GPU is lost") for t in range(10, 40)]
    events += samples(0, 60, t0=T0 + 40, **busy())
    alerts = play(events, tmp_path)
    assert [(a.gpu, a.state) for a in alerts if a.rule == "gpu_lost"] == [(0, "firing"), (0, "resolved")]


def test_gpu_count_dropping(tmp_path):
    events = samples(0, 100, **busy()) + samples(1, 40, **busy())
    alerts = play(events, tmp_path)
    (drop,) = fired(alerts, "gpu_count")
    assert drop.gpu is None and "1 GPU(s) answering, 2 expected" in drop.message
    assert fired(play(samples(0, 100, **busy()) + samples(1, 100, **busy()), tmp_path), "gpu_count") == []


def test_gpu_idle_for_hours(tmp_path):
    idle = dict(temperature_c=30, utilization_gpu_pct=0, process_count=0)
    assert fired(play(samples(0, 260, step=60, **idle), tmp_path), "idle")[0].t == T0 + 4 * 3600
    assert fired(play(samples(0, 200, step=60, **idle), tmp_path), "idle") == []


def test_a_user_file_overrides_defaults_and_typos_are_refused(tmp_path):
    path = tmp_path / "monitor.toml"
    path.write_text('[rules.temperature]\nthreshold_c = 70\nfor = "5s"\n[rules.idle]\nenabled = false\n')
    config = load_config(path)
    assert config["rules"]["temperature"]["threshold_c"] == 70 and config["rules"]["temperature"]["hysteresis_c"] == 3
    assert "idle" not in {r.name for r in RuleSet.from_config(config["rules"]).rules}
    path.write_text("[rules.temperature]\nthreshhold_c = 70\n")
    with pytest.raises(ValueError, match="unknown key 'threshhold_c'"):
        load_config(path)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("4h", 14400), ("30d", 2592000), (5, 5)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds
