"""Benchmark: the monitor's cost. CPU per poll of 8 GPUs from a fake NVML module, the whole process's
CPU and memory while monitoring 8 GPUs at 1 Hz (sampling, history, rules), and history bytes per GPU-day.

Goals (from the monitor issue): <= 1 % of one core at 1 Hz, RSS <= 50 MiB, <= 2 MB of history per GPU-day.
The fake NVML (tests/monitor/monitor_fakes.py) answers instantly, so the numbers are gpuhealth's own
overhead; a real NVML call costs more (tens to hundreds of microseconds each, driver-dependent).

    python bench/monitor_sampling.py [--seconds 20] [--polls 300]
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "monitor")]

from monitor_fakes import FakeNvml  # noqa: E402

from gpuhealth.monitor.config import load_config  # noqa: E402
from gpuhealth.monitor.daemon import Monitor  # noqa: E402
from gpuhealth.monitor.notify import Dispatcher  # noqa: E402
from gpuhealth.monitor.rules import RuleSet  # noqa: E402
from gpuhealth.monitor.sample import Sample  # noqa: E402
from gpuhealth.monitor.sources import NvmlSource  # noqa: E402
from gpuhealth.monitor.store import Store  # noqa: E402

GPUS = 8
DAY = 86400


def cpu_per_poll(polls: int) -> float:
    """CPU seconds (all threads of this process) per poll of 8 GPUs."""
    source = NvmlSource(FakeNvml(GPUS))
    source.poll()  # connect, find what is unsupported
    started = time.process_time()
    for _ in range(polls):
        source.poll()
    used = (time.process_time() - started) / polls
    source.close()
    return used


def child(seconds: float) -> None:
    """The monitor loop at 1 Hz on 8 fake GPUs with history and every rule; prints CPU share and RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        mon = Monitor(NvmlSource(FakeNvml(GPUS)), RuleSet.from_config(load_config()["rules"]), Dispatcher([]),
                      Store(Path(tmp) / "h.db"), interval=1.0)
        stop = threading.Event()
        threading.Timer(seconds, stop.set).start()
        cpu0, wall0 = time.process_time(), time.monotonic()
        mon.run(stop)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        mon.close()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{cpu / wall * 100:.3f} {rss_mib:.1f} {mon.steps}")


def bytes_per_gpu_day() -> tuple[float, float, float]:
    """One GPU-day at 1 Hz of a busy GPU with noisy readings: raw, rollup and total bytes in the file.

    Uniformly random readings are the worst case for the codec (nothing repeats); the file also holds
    the pages that the `recent` table (up to one 10-minute block of JSON rows) frees and reuses."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.db"
        t0 = 1_699_999_980.0
        store = Store(path, raw_keep_s=2 * DAY, clock=lambda: t0 + DAY)
        energy = 0.0
        for minute in range(DAY // 60):
            batch = []
            for second in range(60):
                t = t0 + minute * 60 + second + rng.random() * 0.01
                power = 300 + rng.random() * 400
                energy += power
                batch.append(Sample(t, 0, "0000:19:00.0", "GPU-x", temperature_c=60 + rng.randint(0, 15),
                                    memory_temperature_c=70 + rng.randint(0, 10), power_w=power, power_limit_w=700,
                                    energy_j=energy, utilization_gpu_pct=rng.randint(80, 100),
                                    utilization_memory_pct=rng.randint(20, 60),
                                    memory_used_mib=70000 + rng.randint(0, 8),
                                    memory_total_mib=81559, sm_clock_mhz=1980 - rng.choice((0, 0, 0, 15)),
                                    memory_clock_mhz=2619, clock_event_reasons=rng.choice((0, 0, 0, 4)),
                                    ecc_volatile_uncorrected=0, ecc_volatile_corrected=0, remapped_rows_pending=False,
                                    pcie_gen=5, pcie_width=16, process_count=1, process_memory_mib=69000,
                                    memory_reserved_mib=613, pcie_tx_bytes_s=rng.randint(0, 25_000_000) * 1024,
                                    pcie_rx_bytes_s=rng.randint(0, 25_000_000) * 1024,
                                    processes=((4242, 69000.0),)))
            store.write(batch)
        store.flush()
        store.close()
        conn = sqlite3.connect(path)
        raw = conn.execute("SELECT sum(length(data)) + 16 * count(*) FROM raw_block").fetchone()[0]
        rollup = conn.execute("SELECT sum(length(data)) + 16 * count(*) FROM rollup_block").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return raw, rollup, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--polls", type=int, default=300)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    per_poll = cpu_per_poll(args.polls)
    out = subprocess.run([sys.executable, __file__, "--child", str(args.seconds)], capture_output=True, text=True,
                         check=True, timeout=args.seconds + 60).stdout.split()
    share, rss, steps = float(out[0]), float(out[1]), int(out[2])
    raw, rollup, size = bytes_per_gpu_day()
    rows = [
        ("CPU per poll, 8 GPUs (fake NVML)", f"{per_poll * 1e3:.2f} ms ({per_poll * 1e3 / GPUS:.3f} ms per GPU)",
         "(for reference)"),
        (f"whole process at 1 Hz, {steps} polls", f"{share:.2f} % of a core", _goal(share <= 1.0, "<= 1 %")),
        ("whole process peak RSS", f"{rss:.1f} MiB", _goal(rss <= 50, "<= 50 MiB")),
        ("history per GPU-day: raw blocks", f"{raw / 1e6:.2f} MB", "(part of the total)"),
        ("history per GPU-day: minute rollups", f"{rollup / 1e6:.2f} MB", "(kept 30 days)"),
        ("history per GPU-day: database file", f"{size / 1e6:.2f} MB", _goal(size <= 2e6, "<= 2 MB")),
        ("steady state per GPU: 24 h raw + 30 d rollups", f"{(raw + 30 * rollup) / 1e6:.2f} MB of blocks",
         "(for reference)"),
    ]
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    print(f"{'what':{width}}  {'measured':{value_width}}  goal")
    for what, value, goal in rows:
        print(f"{what:{width}}  {value:{value_width}}  {goal}")


def _goal(met: bool, text: str) -> str:
    return f"{text}: {'met' if met else 'MISSED'}"


if __name__ == "__main__":
    main()
