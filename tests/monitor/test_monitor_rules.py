"""Every rule against generated traces: one where it fires (and resolves) and one where it stays quiet."""

from __future__ import annotations

import json
import random

import pytest
from monitor_fakes import NOTE, T0, busy, fired, play, samples

from gpuhealth.monitor.config import load_config, parse_duration
from gpuhealth.monitor.notify import Dispatcher
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


def test_stuck_temperature_sensor_while_the_load_changes(tmp_path):
    # Idle for 5 min, then a job starts: utilisation and power jump, the temperature does not move.
    load = busy(temperature_c=47, utilization_gpu_pct=lambda i: 0 if i < 30 else 95,
                power_w=lambda i: 60 if i < 30 else 300 + i % 7)
    alerts = play(samples(0, 70, step=10, **load), tmp_path)
    (stuck,) = fired(alerts, "stuck_sensor")
    assert stuck.key == "temperature_c" and stuck.t == T0 + 600 and "load changed" in stuck.message
    # in words and units a person reads, not the field name and a float ("temperature_c has read 47.0")
    assert stuck.message.startswith("GPU 0 temperature has read 47 °C for 10 min while"), stuck.message
    assert "utilisation 0-95 %" in stuck.message, stuck.message


def test_a_stuck_power_sensor_is_named_in_watts(tmp_path):
    load = busy(power_w=250.0, utilization_gpu_pct=lambda i: 0 if i < 30 else 95)
    stuck = [a for a in fired(play(samples(0, 70, step=10, **load), tmp_path), "stuck_sensor") if a.key == "power_w"]
    assert stuck and stuck[0].message.startswith("GPU 0 power has read 250 W for 10 min"), stuck


def test_steady_load_alone_does_not_prove_a_sensor_stuck(tmp_path):
    # busy(): utilisation 90-94 %, power 300-306 W: small wiggles, no clear change of load
    assert fired(play(samples(0, 70, step=10, **busy(temperature_c=47)), tmp_path), "stuck_sensor") == []


def test_flat_readings_on_an_idle_gpu_are_not_a_stuck_sensor(tmp_path):
    still = dict(temperature_c=35, power_w=60, utilization_gpu_pct=0, process_count=0)
    assert fired(play(samples(0, 70, step=10, **still), tmp_path), "stuck_sensor") == []


def test_idle_gpu_whose_temperature_creeps_while_power_jitters_is_not_a_stuck_sensor(tmp_path):
    # The reported false alarm: 1 °C every 2-15 min, power +-0.4 W, 0 %, for 6 hours (1 sample / 10 s).
    rng = random.Random(13)
    temps, temp, change_at = [], 33.0, 0
    for i in range(6 * 360):
        if i >= change_at:
            temp += rng.choice((-1, 1))
            change_at = i + rng.randint(12, 90)
        temps.append(temp)
    trace = samples(0, len(temps), step=10, temperature_c=lambda i: temps[i], utilization_gpu_pct=0,
                    power_w=lambda i: round(61 + rng.uniform(-0.4, 0.4), 2), memory_used_mib=0, process_count=0)
    assert fired(play(trace, tmp_path), "stuck_sensor") == []


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
    assert [(a.key, a.renotify) for a in firing] == [("79", False), ("13", False), ("79", True)]  # "now 2", 10 min on
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


def test_a_growing_pending_retirement_is_notified_again_with_the_new_count(tmp_path):
    trace = samples(0, 40, **busy(remapped_rows_pending=lambda i: 5 <= i < 30,
                                  remapped_rows=lambda i: 0 if i < 5 else 1 if i < 20 else 2))
    alerts = play(trace, tmp_path)
    firing = fired(alerts, "pending_retirement")
    assert [(a.t, a.renotify) for a in firing] == [(T0 + 5, False), (T0 + 20, True)]
    assert "(1 remapped row)" in firing[0].message and "now 2 remapped rows" in firing[1].message
    assert len(fired(alerts, "pending_retirement", "resolved")) == 1
    dispatcher = Dispatcher([])
    dispatcher.dispatch(firing)
    assert len(dispatcher.sent) == 2
    pages = samples(0, 20, **busy(retired_pages_pending=lambda i: i >= 5, retired_pages=lambda i: 1 + (i >= 12)))
    firing = fired(play(pages, tmp_path), "pending_retirement")
    assert [a.t for a in firing] == [T0 + 5, T0 + 12] and "now 2 retired pages" in firing[1].message


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


# ---- issue 13: the rule fixes, each on a generated trace


def test_a_finished_job_is_no_utilization_collapse(tmp_path):
    before = samples(0, 60, **busy())
    # the job ended: 0 %, no process, memory freed
    after = samples(0, 900, t0=T0 + 60, **busy(utilization_gpu_pct=0, process_count=0, process_memory_mib=0,
                                                memory_used_mib=0))
    assert fired(play(before + after, tmp_path), "utilization_collapse") == []


def test_a_collapse_resolves_when_the_job_ends_and_says_so(tmp_path):
    before = samples(0, 60, **busy())
    stuck = samples(0, 400, t0=T0 + 60, **busy(utilization_gpu_pct=0))  # process still there, memory held
    gone = samples(0, 60, t0=T0 + 460, **busy(utilization_gpu_pct=0, process_count=0, process_memory_mib=0))
    alerts = play(before + stuck + gone, tmp_path)
    assert fired(alerts, "utilization_collapse")[0].t == T0 + 60 + 300
    (done,) = fired(alerts, "utilization_collapse", "resolved")
    assert "job ended" in done.message and "after" in done.message


def test_collapse_without_a_process_list_uses_memory_held(tmp_path):
    before = samples(0, 60, **busy(process_count=None, process_memory_mib=None))
    held = samples(0, 400, t0=T0 + 60, **busy(utilization_gpu_pct=0, process_count=None, process_memory_mib=None))
    assert len(fired(play(before + held, tmp_path), "utilization_collapse")) == 1
    freed = samples(0, 400, t0=T0 + 60, **busy(utilization_gpu_pct=0, process_count=None, process_memory_mib=None,
                                                memory_used_mib=600))
    assert fired(play(before + freed, tmp_path), "utilization_collapse") == []


def test_a_rising_ecc_count_is_notified_again_with_the_new_figure(tmp_path):
    trace = samples(0, 30, **busy(ecc_volatile_uncorrected=lambda i: 0 if i < 10 else 1 if i < 20 else 2))
    alerts = [a for a in fired(play(trace, tmp_path), "ecc") if a.key == "ecc_volatile_uncorrected"]
    assert [(a.t, a.renotify) for a in alerts] == [(T0 + 10, False), (T0 + 20, True)]
    assert "0 -> 1" in alerts[0].message and "now 2" in alerts[1].message
    dispatcher = Dispatcher([])
    dispatcher.dispatch(alerts + alerts[1:])  # a repeat of the same update is still dropped
    assert [a.message for a in dispatcher.sent] == [a.message for a in alerts]


def test_a_repeated_xid_is_notified_again_with_its_count_at_most_every_renotify_interval(tmp_path):
    xids = [XidEvent(T0 + t, 0, 13) for t in (5, 6, 7, 700, 701)]
    alerts = fired(play(samples(0, 1300, **busy()) + xids, tmp_path), "xid")
    # 10 min after firing, the count held back meanwhile (3); 10 min after that, the later rises (5)
    assert [(a.t, a.renotify) for a in alerts] == [(T0 + 5, False), (T0 + 605, True), (T0 + 1205, True)]
    assert "now 3 times" in alerts[1].message and "now 5 times" in alerts[2].message


def test_an_xid_rise_held_back_by_the_renotify_limit_is_sent_when_the_limit_ends(tmp_path):
    """Review finding: a second Xid within 10 min of the first, then none: the "now 2" was never sent."""
    xids = [XidEvent(T0 + 5, 0, 79), XidEvent(T0 + 60, 0, 79)]
    alerts = fired(play(samples(0, 700, **busy()) + xids, tmp_path), "xid")
    assert [(a.t, a.renotify) for a in alerts] == [(T0 + 5, False), (T0 + 605, True)]
    assert "now 2 times" in alerts[1].message
    dispatcher = Dispatcher([])
    dispatcher.dispatch(alerts)
    assert [a.message for a in dispatcher.sent] == [a.message for a in alerts]
    # with no rise after the first, nothing is sent again
    assert len(fired(play(samples(0, 700, **busy()) + xids[:1], tmp_path), "xid")) == 1


def test_resolution_messages_say_what_cleared(tmp_path):
    hot = samples(1, 540, **busy(temperature_c=88))
    cool = samples(1, 300, t0=T0 + 540, **busy(temperature_c=70))
    (done,) = fired(play(hot + cool, tmp_path), "temperature", "resolved")
    # fired at 30 s; resolves once under half of the 5-min window was hot (690 s) and cool for 60 s more
    assert done.t == T0 + 750 and done.message == "GPU 1 back under 82 °C (now 70 °C) after 12 min"
    events = samples(0, 4000, **busy()) + [XidEvent(T0 + 5, 0, 79)]
    events += samples(0, 200, **busy(ecc_volatile_uncorrected=lambda i: 0 if i < 100 else 1))
    for alert in [a for a in play(events, tmp_path) if a.state == "resolved"]:
        assert "resolved" not in alert.message and "after" in alert.message, alert


def test_the_gpu_count_alert_names_the_missing_gpus(tmp_path):
    ids = {g: dict(pci_address=f"00000000:{0x19 + g:02X}:00.0", uuid=f"GPU-{g:08d}-aaaa") for g in range(4)}
    events = [s for g in (0, 1, 3) for s in samples(g, 100, **busy(), **ids[g])]
    events += samples(2, 40, **busy(), **ids[2])
    (drop,) = fired(play(events, tmp_path), "gpu_count")
    assert drop.message == ("3 GPU(s) answering, 4 expected; missing: (GPU 2, 00000000:1B:00.0, GPU-00000002-aaaa)")
    alerts = play(samples(0, 60, **busy(), **ids[0]), tmp_path, rules={"gpu_count": {"expected": 2}})
    assert "missing: 1 never seen since the monitor started" in fired(alerts, "gpu_count")[0].message


def _flipping(seconds: int, seed: int, hot: tuple[int, int] = (2, 5), cool: tuple[int, int] = (2, 5)) -> list[int]:
    """A temperature that flips between 86 and 84 °C, each spell 2-5 s long (seeded: reproducible)."""
    rng, out, value = random.Random(seed), [], 86
    while len(out) < seconds:
        out += [value] * rng.randint(*(hot if value == 86 else cool))
        value = 84 if value == 86 else 86
    return out[:seconds]


def test_a_gpu_hovering_at_the_threshold_alerts_on_time_above(tmp_path):
    temps = _flipping(1800, seed=7)
    assert all(run < 30 for run in _runs_above(temps))  # the for-duration alone never fires
    alerts = play(samples(0, 1800, temperature_c=lambda i: temps[i], utilization_gpu_pct=90), tmp_path)
    (hot,) = fired(alerts, "temperature")
    assert "over 85 °C for" in hot.message and "of the last 5 min" in hot.message
    assert fired(alerts, "temperature", "resolved") == []  # still hovering: the hysteresis keeps it open


def test_time_above_under_the_share_stays_quiet_and_the_share_is_configurable(tmp_path):
    temps = _flipping(1800, seed=7, hot=(2, 3), cool=(4, 5))  # about 40 % above
    trace = samples(0, 1800, temperature_c=lambda i: temps[i], utilization_gpu_pct=90)
    assert fired(play(trace, tmp_path), "temperature") == []
    assert len(fired(play(trace, tmp_path, rules={"temperature": {"above_share": 0.3}}), "temperature")) == 1


def test_time_above_resolves_once_cool_for_long_enough(tmp_path):
    temps = _flipping(900, seed=3) + [70] * 600
    alerts = play(samples(0, 1500, temperature_c=lambda i: temps[i], utilization_gpu_pct=90), tmp_path)
    (done,) = fired(alerts, "temperature", "resolved")
    # the share of the window must fall to half or less (up to 2.5 min) and stay cool for clear_for (60 s)
    assert T0 + 900 + 60 <= done.t <= T0 + 900 + 150 + 60 + 5


def _runs_above(temps: list[int]) -> list[int]:
    runs, n = [], 0
    for t in temps:
        n = n + 1 if t >= 85 else 0
        runs.append(n)
    return runs
