""""A job still holds the GPU" is one definition (gpuhealth.monitor.sample.job_holds) behind one setting,
`[monitor] held_mib`: the utilisation-collapse rule, `gpuhealth usage` and serve's held-idle counters agree.
The review found two settings (`usage.held_mib`, `rules.utilization_collapse.held_mib`) and /metrics using
neither. Generated trace (labelled as such): a driver without a process list, busy, then at 0 % for 10 min
with 3000 MiB still in use."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from monitor_fakes import GENERATED_BY, NOTE, T0, fired, play, samples

from gpuhealth.cli import main
from gpuhealth.exits import CannotRun
from gpuhealth.monitor.commands import _build
from gpuhealth.monitor.sample import job_holds
from gpuhealth.monitor.sources import write_trace
from gpuhealth.web.server import wrap_monitor


def _trace(tmp_path):
    events = samples(0, 120, utilization_gpu_pct=90, memory_used_mib=30_000, temperature_c=50)
    events += samples(0, 600, t0=T0 + 120, utilization_gpu_pct=0, memory_used_mib=3000, temperature_c=45)
    path = tmp_path / "held.jsonl"
    write_trace(path, events, GENERATED_BY, NOTE)
    return path


@pytest.mark.parametrize("held_mib", [None, 5000])
def test_one_setting_decides_held_for_the_rule_usage_and_metrics(tmp_path, held_mib):
    config = None
    if held_mib is not None:
        config = tmp_path / "monitor.toml"
        config.write_text(f"[monitor]\nheld_mib = {held_mib}\n\n[notify]\nstderr = false\n")
    held = job_holds(None, None, 3000, held_mib if held_mib is not None else 1024)
    assert held is (held_mib is None)  # 3000 MiB is held under the default 1024, not under 5000
    db = tmp_path / "history.db"
    spec = f"replay:{_trace(tmp_path)}"
    mon = _build(config, "1s", "0", db, spec, None, 0.0)
    state, _checks = wrap_monitor(mon, spec, lambda: None)
    mon.run(threading.Event())  # speed 0: the whole trace, then it stops
    mon.close()
    collapse = [a for a in mon.dispatcher.sent if a.rule == "utilization_collapse" and a.state == "firing"]
    assert bool(collapse) is held
    counters = state.metrics_view()["usage"][0]
    assert counters["idle"] >= 590 and (counters["held_idle"] == counters["idle"]) is held
    assert counters["held_idle"] == (counters["idle"] if held else 0)
    args = ["usage", "--db", str(db), "--since", "1d", "--format", "json"]
    args += ["--config", str(config)] if config else []
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    days = json.loads(result.output)["days"]  # the replay is rebased to now: it may cross midnight UTC
    idle, held_idle = (sum(day[key] for day in days) for key in ("hours_idle", "hours_held_idle"))
    assert idle >= 0.16 and held_idle == pytest.approx(idle if held else 0)


def test_the_old_per_rule_and_usage_settings_are_refused_and_a_bad_value_named(tmp_path):
    for text in ("[usage]\nheld_mib = 10\n", "[rules.utilization_collapse]\nheld_mib = 10\n"):
        (tmp_path / "old.toml").write_text(text)
        with pytest.raises(CannotRun, match="unknown key 'held_mib'"):
            _build(tmp_path / "old.toml", "1s", "0", None, f"replay:{_trace(tmp_path)}", None, 0.0, use_store=False)
    (tmp_path / "bad.toml").write_text('[monitor]\nheld_mib = "lots"\n')
    with pytest.raises(CannotRun, match="monitor.held_mib"):
        _build(tmp_path / "bad.toml", "1s", "0", None, f"replay:{_trace(tmp_path)}", None, 0.0, use_store=False)


@pytest.mark.parametrize("held_mib", [1024, 5000])
def test_hung_job_and_idle_ask_the_same_question(tmp_path, held_mib):
    """hung_job and idle read "a job holds the GPU" through job_holds too: on a driver without a process list,
    5 h at 0 % with 3000 MiB used is a held GPU (a hung job, not idle) under the default 1024 MiB, and an idle one
    under 5000. They read the process fields alone before, so without a process list hung_job never fired and
    idle fired on a GPU whose memory a job still held."""
    trace = samples(0, 300, step=60, utilization_gpu_pct=0, memory_used_mib=3000, temperature_c=40)
    alerts = play(trace, tmp_path, held_mib=held_mib)
    held = held_mib == 1024
    hung, idle = fired(alerts, "hung_job"), fired(alerts, "idle")
    assert bool(hung) is held and bool(idle) is not held
    if held:
        assert "3000 MiB is in use (no process list)" in hung[0].message
    else:
        assert idle[0].t == T0 + 4 * 3600


def test_a_process_list_decides_before_the_memory_used(tmp_path):
    """With a process list, a process decides: no process is idle even with memory used over held_mib."""
    none_left = samples(0, 300, step=60, utilization_gpu_pct=0, memory_used_mib=3000, process_count=0,
                        process_memory_mib=0, temperature_c=40)
    alerts = play(none_left, tmp_path)
    assert fired(alerts, "hung_job") == [] and len(fired(alerts, "idle")) == 1
