"""`gpuhealth usage` on a generated trace (labelled as such) with known busy, idle and held-idle minutes."""

from __future__ import annotations

import csv
import io
import json
import re
import time

from click.testing import CliRunner
from monitor_fakes import GENERATED_BY, NOTE, samples

from gpuhealth.cli import main
from gpuhealth.monitor.sources import ReplaySource, write_trace
from gpuhealth.monitor.store import Store
from gpuhealth.monitor.usage import usage

DAY0 = 1_699_920_000.0  # 2023-11-14T00:00:00Z
START = DAY0 + 22 * 3600  # 22:00 on the 14th; the trace crosses midnight
STEP = 10.0
# (minutes, utilisation %, processes, process MiB, power W): 22:00-23:00 busy, 23:00-23:30 idle with the
# job's memory still held, 23:30-00:45 idle and free (crossing midnight), 00:45-01:00 busy again.
PHASES = [(60, 80, 1, 30000, 300.0), (30, 0, 1, 30000, 80.0), (75, 0, 0, 0, 60.0), (15, 50, 1, 20000, 300.0)]


def _phase(i: int) -> tuple[int, int, int, float]:
    minute = i * STEP / 60
    for length, *values in PHASES:
        if minute < length:
            return tuple(values)  # type: ignore[return-value]
        minute -= length
    raise IndexError(i)


def _trace(tmp_path, start: float = START):
    n = int(sum(p[0] for p in PHASES) * 60 / STEP)
    common = dict(utilization_gpu_pct=lambda i: _phase(i)[0], process_count=lambda i: _phase(i)[1],
                  process_memory_mib=lambda i: _phase(i)[2], power_w=lambda i: _phase(i)[3],
                  memory_used_mib=lambda i: 600 + _phase(i)[2], temperature_c=40)
    # GPU 0 has the driver's energy counter (joules so far); GPU 1 only power
    energy = [0.0]
    for i in range(1, n):
        energy.append(energy[-1] + _phase(i - 1)[3] * STEP)
    events = samples(0, n, t0=start, step=STEP, energy_j=lambda i: energy[i], **common)
    events += samples(1, n, t0=start, step=STEP, **common)
    path = tmp_path / "usage.jsonl"
    write_trace(path, sorted(events, key=lambda e: e.t), GENERATED_BY, NOTE)
    return path


def _past_start() -> float:
    """22:00 UTC two days ago: the trace ends at 01:00 yesterday, wholly past and inside `--since 3d` whatever
    the time of day the test runs (a trace ending at 01:00 today was cut short when run just after midnight)."""
    return (time.time() // 86400) * 86400 - 26 * 3600


def _store(tmp_path, start: float = START) -> Store:
    """The trace replayed into a history database, as `gpuhealth monitor --source replay:` would."""
    source = ReplaySource(_trace(tmp_path, start), speed=0, rebase=False)
    store = Store(tmp_path / "h.db", clock=lambda: start + 4 * 3600)
    while not source.exhausted:
        store.write(source.poll())
    return store


def test_usage_to_the_minute_per_gpu_and_utc_day(tmp_path):
    store = _store(tmp_path)
    days = {(d.gpu, d.day): d.as_json(price=2.0) for d in usage(store, START - 3600, START + 4 * 3600)}
    store.close()
    assert sorted(days) == [(0, "2023-11-14"), (0, "2023-11-15"), (1, "2023-11-14"), (1, "2023-11-15")]
    for gpu in (0, 1):
        first, second = days[(gpu, "2023-11-14")], days[(gpu, "2023-11-15")]
        assert (first["hours_busy"], first["hours_idle"], first["hours_held_idle"]) == (1.0, 1.0, 0.5)
        assert (second["hours_busy"], second["hours_idle"], second["hours_held_idle"]) == (0.25, 0.75, 0.0)
        assert first["hours_monitored"] == 2.0 and second["hours_monitored"] == 1.0
        assert first["mean_utilization_pct"] == 40.0 and second["mean_utilization_pct"] == 12.5
        assert first["cost_idle"] == 2.0 and first["cost_held_idle"] == 1.0 and second["cost_idle"] == 1.5
        # 1 h x 300 W + 30 min x 80 W + 30 min x 60 W; then 45 min x 60 W + 15 min x 300 W (the counter
        # stops at the last sample: one 10-s step at 300 W, 0.0008 kWh, short)
        assert abs(first["energy_kwh"] - 0.37) <= 0.0015 and abs(second["energy_kwh"] - 0.12) <= 0.0015
    assert days[(0, "2023-11-14")]["energy_from"] == "counter" and days[(1, "2023-11-14")]["energy_from"] == "power"


def test_usage_command_table_csv_and_json_with_a_price(tmp_path):
    _store(tmp_path, _past_start()).close()
    db = str(tmp_path / "h.db")
    runner = CliRunner()
    result = runner.invoke(main, ["usage", "--db", db, "--since", "3d", "--format", "json", "--price", "3"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["price_per_gpu_hour"] == 3 and len(report["days"]) == 4
    assert report["days"][0]["cost_idle"] == 3.0 and report["days"][0]["hours_held_idle"] == 0.5
    result = runner.invoke(main, ["usage", "--db", db, "--since", "3d", "--csv", "--gpu", "1"])
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [r["hours_busy"] for r in rows] == ["1.0", "0.25"] and "cost_idle" not in rows[0]
    result = runner.invoke(main, ["usage", "--db", db, "--since", "3d", "--price", "2.5"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "held idle cost" in result.output and "1.25" in result.output
    missing = runner.invoke(main, ["usage", "--db", str(tmp_path / "none.db")])
    assert missing.exit_code == 3 and "no history yet" in missing.output


def test_energy_across_a_monitoring_gap_is_not_charged_to_one_minute(tmp_path):
    """Review finding: the counter's rise over a 3-h gap (the monitor stopped) landed in the first minute
    after it. Generated trace: 300 W throughout, monitored 22:00-22:30 and 01:30-02:00 (the next UTC day)."""
    watts, step = 300.0, 10.0
    first = samples(0, 180, t0=START, step=step, utilization_gpu_pct=80, power_w=watts,
                    energy_j=lambda i: 1e6 + i * step * watts)
    later = START + 3.5 * 3600
    second = samples(0, 180, t0=later, step=step, utilization_gpu_pct=80, power_w=watts,
                     energy_j=lambda i: 1e6 + (later - START + i * step) * watts)
    path = tmp_path / "gap.jsonl"
    write_trace(path, first + second, GENERATED_BY, NOTE)
    source = ReplaySource(path, speed=0, rebase=False)
    store = Store(tmp_path / "gap.db", clock=lambda: START + 5 * 3600)
    while not source.exhausted:
        store.write(source.poll())
    days = {d.day: d.as_json(None) for d in usage(store, START - 60, START + 5 * 3600)}
    store.close()
    assert [d["hours_monitored"] for d in days.values()] == [0.5, 0.5]
    for day in days.values():  # 30 min x 300 W = 0.15 kWh each (less one 10-s step at the end: 0.0008)
        assert day["energy_from"] == "counter" and abs(day["energy_kwh"] - 0.15) <= 0.0015, days


def test_the_table_never_cuts_a_value_on_an_80_column_terminal(tmp_path):
    # The day, the energy source and every figure must stay whole at any width ("2026-1…" named no day): the
    # headings wrap instead, and where even that does not fit the table is wider than the terminal.
    _store(tmp_path, _past_start()).close()
    db = str(tmp_path / "h.db")
    runner = CliRunner()
    days = json.loads(runner.invoke(main, ["usage", "--db", db, "--since", "3d", "--format", "json",
                                           "--price", "2.5"]).output)["days"]
    for columns in ("80", "60"):
        result = runner.invoke(main, ["usage", "--db", db, "--since", "3d", "--price", "2.5"], env={"COLUMNS": columns})
        assert result.exit_code == 0 and "…" not in result.output, result.output
        lines = [line for line in result.output.splitlines() if re.match(r"\s*\d+\s+\d{4}-\d\d-\d\d ", line)]
        assert len(lines) == len(days)
        for line, day in zip(lines, days, strict=True):
            cells = line.split()  # no value holds a space
            assert cells[:2] == [str(day["gpu"]), day["day"]] and day["energy_from"] in cells, line
            assert f"{day['cost_held_idle']:.2f}" == cells[-1], line
