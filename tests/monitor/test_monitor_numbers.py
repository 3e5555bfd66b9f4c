"""Numbers are numbers (issue 25, items 9 and 11): NaN and infinite readings, NaN, infinite and 1e18
timestamps in a replayed trace, and such rows already stored by an older gpuhealth.

Before: `monitor` exited 3 (`cannot convert float NaN to integer`) and the rows stayed in the history, so
`history` exited 3 until they aged out; a NaN or infinite timestamp hung or crashed the replay. Now the
sources refuse them (counted, said once per field, never stored) and the history's readers skip what an
older version stored.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from monitor_fakes import T0

from gpuhealth.cli import main
from gpuhealth.monitor.sample import GpuLost, Refusals, Sample, XidEvent, sane
from gpuhealth.monitor.sources import ReplaySource, trace_header
from gpuhealth.monitor.store import Store

BAD_READINGS = {10: ("temperature_c", math.nan), 11: ("power_w", math.inf), 12: ("utilization_gpu_pct", -math.inf),
                13: ("memory_used_mib", 1e300)}


def bad_trace(path: Path, seconds: int = 300) -> Path:
    """Two GPUs sampled every second; four samples of GPU 0 carry a NaN, +inf, -inf or 1e300 reading; after
    them, samples and an Xid timed NaN, +inf, -inf, 1e18 and 0 (JSON as Python writes it: NaN, Infinity)."""
    lines = [json.dumps(trace_header("tests/monitor/test_monitor_numbers.py", "hand-written: hostile numbers"))]
    for i in range(seconds):
        for gpu in (0, 1):
            row = {"kind": "sample", "t": T0 + i, "gpu": gpu, "temperature_c": 50 + gpu, "power_w": 200.0,
                   "utilization_gpu_pct": 40, "memory_used_mib": 1000}
            if gpu == 0 and i in BAD_READINGS:
                name, value = BAD_READINGS[i]
                row[name] = value
            lines.append(json.dumps(row))
        if i == 20:
            for bad in (math.nan, math.inf, -math.inf, 1e18, 0):
                lines.append(json.dumps({"kind": "sample", "t": bad, "gpu": 0, "temperature_c": 99}))
                lines.append(json.dumps({"kind": "xid", "t": bad, "gpu": 0, "xid": 79}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sane_leaves_out_impossible_readings_and_refuses_impossible_times():
    sample = Sample(T0, 0, temperature_c=math.nan, power_w=math.inf, fan_pct=-math.inf, memory_used_mib=1e300,
                    utilization_gpu_pct=50, clock_event_reasons=1 << 63, processes=((12, math.nan), (13, 5.0)))
    clean, refused = sane(sample)
    assert set(refused) == {"temperature_c", "power_w", "fan_pct", "memory_used_mib", "processes"}
    assert clean.temperature_c is None and clean.power_w is None and clean.fan_pct is None
    assert clean.memory_used_mib is None and clean.utilization_gpu_pct == 50
    assert clean.clock_event_reasons == 1 << 63  # NVML's "unknown reason" bit is a real reading
    assert clean.processes == ((12, None), (13, 5.0))
    for t in (math.nan, math.inf, -math.inf, 1e18, 0.0, -5.0):
        for event in (Sample(t, 0, temperature_c=50), XidEvent(t, 0, 79), GpuLost(t, 0, "lost")):
            assert sane(event) == (None, ("t",))
    assert sane(XidEvent(T0, 0, math.nan)) == (None, ("xid",))
    assert sane(Sample(T0, math.nan)) == (None, ("gpu",))
    good = Sample(T0, 0, temperature_c=50)
    assert sane(good) == (good, ())  # the same object: nothing copied when nothing is wrong


def test_refusals_count_every_one_and_say_each_field_once():
    said: list[str] = []
    refusals = Refusals("trace.jsonl", said.append)
    events = [Sample(T0 + i, 0, temperature_c=math.nan, power_w=100) for i in range(50)]
    kept = refusals.filter(events + [XidEvent(math.inf, 0, 79)] * 3)
    assert len(kept) == 50 and all(e.temperature_c is None and e.power_w == 100 for e in kept)
    assert refusals.counts == {"temperature_c": 50, "t": 3}
    assert len(said) == 2 and "temperature_c reading of nan" in said[0] and "whole event is refused" in said[1]


def test_replay_refuses_them_at_the_source_and_ends(tmp_path):
    source = ReplaySource(bad_trace(tmp_path / "bad.jsonl", seconds=60), speed=0, log=lambda text: None)
    events = []
    for _ in range(1000):  # bounded: a NaN timestamp hung the replay
        events += source.poll()
        if source.exhausted:
            break
    assert source.exhausted and len(events) == 120
    assert source.refused.counts == {"temperature_c": 1, "power_w": 1, "utilization_gpu_pct": 1,
                                     "memory_used_mib": 1, "t": 10}
    assert all(math.isfinite(e.t) for e in events)


def test_monitor_runs_to_the_end_and_history_works(tmp_path):
    trace, db = bad_trace(tmp_path / "bad.jsonl"), tmp_path / "h.db"
    runner = CliRunner()
    result = runner.invoke(main, ["monitor", "--source", f"replay:{trace}", "--replay-speed", "0", "--db", str(db),
                                  "--check-every", "0"])
    assert result.exit_code == 0, result.output
    refusals = [line for line in result.output.splitlines() if "refused" in line]
    assert len(refusals) == 5, refusals  # four readings and the timestamps: each said once
    for metric in ("temperature", "power", "utilization", "memory"):
        out = runner.invoke(main, ["history", "--db", str(db), "--metric", metric, "--since", "30d", "--csv"])
        assert out.exit_code == 0, out.output
        rows = out.output.splitlines()[1:]
        assert rows and not any(word in out.output.lower() for word in ("nan", "inf", "e+"))
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT count(*) FROM raw_block").fetchone()[0]
    assert stored > 0


def old_database(path: Path) -> Path:
    """A history as an older gpuhealth left it: rows in `recent` holding NaN and Infinity (as Python's json
    writes them) and rows timed +inf, -inf and 1e18 beside good rows."""
    store = Store(path)
    store.write([Sample(T0 + i, 0, temperature_c=60, power_w=250) for i in range(5)])
    store.close()
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO recent VALUES (?, ?, ?)", [
            (T0 + 5, 0, '{"temperature_c":NaN,"power_w":Infinity}'),
            (T0 + 6, 0, '{"temperature_c":-Infinity,"power_w":251}'),
            (math.inf, 0, '{"temperature_c":61}'), (-math.inf, 0, '{"temperature_c":61}'),
            (1e18, 0, '{"temperature_c":61}'), (T0 + 7, 0, "not json")])
    return path


def test_an_old_database_with_such_rows_is_read_and_compacted(tmp_path):
    db = old_database(tmp_path / "old.db")
    store = Store(db, clock=lambda: T0 + 60)
    temperature = store.series(0, "temperature_c", T0 - 60, T0 + 60)
    power = store.series(0, "power_w", T0 - 60, T0 + 60)
    assert [p[2] for p in temperature.points] == [60] * 5
    assert [p[2] for p in power.points] == [250] * 5 + [251]
    stats = store.minute_stats(0, "temperature_c", T0 - 60, T0 + 60)
    assert all(math.isfinite(v) for s in stats.values() for v in s)
    store.flush()  # the block encoder met NaN here: "cannot convert float NaN to integer"
    assert [p[2] for p in store.series(0, "power_w", T0 - 60, T0 + 60).points] == [250] * 5 + [251]
    store.close()


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_the_store_never_writes_them_even_when_handed_them(tmp_path, value):
    store = Store(tmp_path / "h.db")
    store.write([Sample(T0, 0, temperature_c=value, power_w=100)])
    store.flush()
    assert store.series(0, "temperature_c", T0 - 1, T0 + 1).points == ()
    assert [p[2] for p in store.series(0, "power_w", T0 - 1, T0 + 1).points] == [100]
    store.close()
