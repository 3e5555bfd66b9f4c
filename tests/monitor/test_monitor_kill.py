"""The whole monitor process killed with SIGKILL at random moments, restarted each time: the database
opens cleanly, passes SQLite's integrity check, and holds every sample the process had recorded except
at most the last interval before each kill.

Each run replays a generated trace as fast as possible (``--replay-speed 0``: one trace timestamp,
all GPUs, per poll, no wait between polls) and records what it polled (``--record``, flushed before
the batch is stored). The trace is long enough (10,000 steps) that no run reaches its end before the
kill; a step of 2 s makes the replayed history cross a 10-minute block every 300 polls, so kills land
between (and now and then inside) compactions, and later runs, whose history overlaps the earlier
ones', merge into blocks compacted already.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from monitor_fakes import GENERATED_BY, NOTE, busy, samples

from gpuhealth.monitor.sources import write_trace
from gpuhealth.monitor.store import Store

GPUS = 2
KILLS = 4


def _recorded(path: Path) -> Counter[tuple[int, int]]:
    """(gpu, t in ms) of every sample the run recorded; a line cut short by the kill is not one."""
    found: Counter[tuple[int, int]] = Counter()
    for line in path.read_text().splitlines()[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line, half written when the process died
        if record.get("kind") == "sample":
            found[(record["gpu"], round(record["t"] * 1000))] += 1
    return found


def test_sigkill_at_random_moments_loses_at_most_the_last_interval(tmp_path):
    trace, db = tmp_path / "trace.jsonl", tmp_path / "monitor.db"
    events = [s for gpu in range(GPUS) for s in samples(gpu, 10_000, step=2.0, **busy())]
    write_trace(trace, sorted(events, key=lambda e: e.t), GENERATED_BY, NOTE)
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    recorded: Counter[tuple[int, int]] = Counter()
    last_batches: Counter[tuple[int, int]] = Counter()
    started = time.monotonic()
    for run in range(KILLS):
        record = tmp_path / f"run{run}.jsonl"
        child = subprocess.Popen(
            [sys.executable, "-m", "gpuhealth", "monitor", "--source", f"replay:{trace}", "--replay-speed", "0",
             "--db", str(db), "--record", str(record), "--check-every", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while (not record.exists() or record.read_text().count("\n") < 2) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 1.2))  # a few hundred to a few thousand polls in
        child.send_signal(signal.SIGKILL)
        assert child.wait(5) == -signal.SIGKILL, f"run {run} ended before the kill (seed {seed})"
        run_samples = _recorded(record)
        assert run_samples, f"run {run} recorded nothing (seed {seed})"
        last = max(t for _, t in run_samples)
        recorded += run_samples
        last_batches += Counter({key: n for key, n in run_samples.items() if key[1] == last})
    assert time.monotonic() - started < 20

    store = Store(db)  # opens cleanly: no error, no recovery step
    assert store.integrity() == "ok"
    times = [t for _, t in recorded]
    stored: Counter[tuple[int, int]] = Counter()
    for gpu in range(GPUS):
        series = store.series(gpu, "temperature_c", min(times) / 1000 - 1, max(times) / 1000 + 1)
        assert series.resolution == "raw"
        stored.update((gpu, round(t * 1000)) for t, *_ in series.points)
    store.close()
    assert not stored - recorded, f"stored samples no run recorded (seed {seed})"
    lost = recorded - stored
    assert not lost - last_batches, f"lost more than the last interval of a run (seed {seed}): {sorted(lost)}"
    assert sum(stored.values()) >= sum(recorded.values()) - KILLS * GPUS
