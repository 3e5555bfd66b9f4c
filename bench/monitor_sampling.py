"""Benchmark: the monitor's cost. CPU per poll of 8 GPUs from a fake NVML module, the whole process's
CPU and memory while monitoring 8 GPUs at 1 Hz (sampling, history, rules), and history bytes per GPU-day.

Goals (from the monitor issue): <= 1 % of one core at 1 Hz, RSS <= 50 MiB, <= 2 MB of history per GPU-day.
The fake NVML (tests/monitor/monitor_fakes.py) answers instantly, so the numbers are gpuhealth's own
overhead; a real NVML call costs more (tens to hundreds of microseconds each, driver-dependent).

Issue 23's budget, measured through the command line (the path users take): `gpuhealth monitor` replaying a
generated 8-GPU trace at 1 Hz in real time with every rule, the correlation table, boots (the fault memory),
acknowledgements and capture on, and the full check off (it runs `gpuhealth check` on this host, which is not a
GPU node: its cost is measured on its own row). Goal: <= 32 MiB RSS and <= 0.5 % of a core. The peers' figures
beside it are their documented Kubernetes resource requests (not measured here: none of them runs without a GPU).

    python bench/monitor_sampling.py [--seconds 20] [--polls 300] [--cli-seconds 60]
"""

from __future__ import annotations

import argparse
import os
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


def child(seconds: float, kmsg: str = "") -> None:
    """The monitor loop at 1 Hz on 8 fake GPUs with history and every rule; prints CPU share and RSS. With
    ``kmsg``, the kernel log follower (monitor/kmsg.py) reads a fake /dev/kmsg under the temporary directory
    and the correlation table runs (as `monitor` runs it): "steady", KMSG_LINES_S records a second, one of them an
    Xid 74 line (with its NVML event) every 10 s; "storm", STORM_XIDS_S Xid lines a second (no NVML events)."""
    from gpuhealth.monitor.correlate import from_config

    with tempfile.TemporaryDirectory() as tmp:
        nvml = FakeNvml(GPUS)
        source = NvmlSource(nvml)
        stop = threading.Event()
        config = load_config()
        store = Store(Path(tmp) / "h.db")
        correlator = None
        if kmsg:
            source = _follow_fake_kmsg(source, nvml, Path(tmp), stop, kmsg == "storm")
            correlator = from_config(config["monitor"], store)
        mon = Monitor(source, RuleSet.from_config(config["rules"]), Dispatcher([]), store, interval=1.0,
                      correlator=correlator)
        threading.Timer(seconds, stop.set).start()
        cpu0, wall0 = time.process_time(), time.monotonic()
        mon.run(stop)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        mon.close()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{cpu / wall * 100:.3f} {rss_mib:.1f} {mon.steps}")


KMSG_LINES_S = 20  # a busy host's kernel log: far more than an idle one writes
STORM_XIDS_S = 1000  # a faulting GPU's Xid storm: the follower reads at most 1024 records a step


def _follow_fake_kmsg(source: NvmlSource, nvml: FakeNvml, tmp: Path, stop: threading.Event,
                      storm: bool = False) -> object:
    from gpuhealth.host import LocalHost
    from gpuhealth.monitor.kmsg import follow

    (tmp / "dev").mkdir()
    path = tmp / "dev" / "kmsg"
    path.write_bytes(b"")
    xid74 = ("NVRM: Xid (PCI:0000:19:00): 74, pid=2311, name=python, NVLink: fatal error detected on link "
             "5(0x10, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)")

    def write_storm() -> None:  # Xid 74 on GPU 0 and Xid 13 on each GPU, every line its own pid
        seq = 0
        while not stop.wait(1.0):
            with path.open("ab") as handle:
                for _ in range(STORM_XIDS_S):
                    seq += 1
                    text = (xid74.replace("2311", str(seq)) if seq % 2 else
                            f"NVRM: Xid (PCI:0000:{0x19 + 0x20 * (seq % GPUS):02x}:00): 13, pid={seq}, name=python, "
                            "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address")
                    handle.write(f"3,{seq},{seq * 1000},-;{text}\n".encode())

    def write() -> None:
        seq = 0
        while not stop.wait(1.0):
            with path.open("ab") as handle:
                for i in range(KMSG_LINES_S):
                    seq += 1
                    xid = i == 0 and seq % (10 * KMSG_LINES_S) == 1
                    text = xid74 if xid else "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready"
                    handle.write(f"6,{seq},{seq * 1000},-;{text}\n".encode())
            if seq % (10 * KMSG_LINES_S) == KMSG_LINES_S:
                nvml.xids.append((0, 74))

    threading.Thread(target=write_storm if storm else write, daemon=True).start()
    return follow(source, None, host=LocalHost(str(tmp)))


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


# What the peers document as their Kubernetes resource requests (their own files, as the README's comparison cites).
PEER_REQUESTS = (
    ("GPUd: Helm chart request", "256 MiB, 50m CPU (5 % of a core)", "leptonai/gpud deployments/helm/gpud/values.yaml"),
    ("NVSentinel GPU health monitor: request", "128 MiB, 100m CPU (10 % of a core)",
     "NVIDIA/NVSentinel docs/configuration/gpu-health-monitor.md"),
)
CLI_WARMUP_S = 5.0  # start-up (imports, opening the history) is left out of the CPU share; peak RSS includes it


def write_bench_trace(path: Path, seconds: int) -> None:
    """8 GPUs at 1 Hz training steadily, an Xid 13 on a GPU every 20 s (warnings: the xid rule and the correlation
    rows work, nothing is critical, so no capture is written). Generated: synthetic values."""
    import json

    rng = random.Random(23)
    t0 = 1_750_000_000.0
    header = {"format": "gpuhealth-trace", "version": 1, "generated_by": "bench/monitor_sampling.py",
              "note": "GENERATED for the bench: synthetic values", "boot_id": "bench-boot-1"}
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for second in range(seconds):
            t = t0 + second
            for gpu in range(GPUS):
                out.write(json.dumps({
                    "kind": "sample", "t": t, "gpu": gpu, "pci_address": f"0000:{0x19 + 0x20 * gpu:02x}:00.0",
                    "uuid": f"GPU-{gpu:08d}-bench", "name": "NVIDIA H100 80GB HBM3",
                    "temperature_c": 60 + rng.randint(0, 8), "power_w": 550 + rng.random() * 100,
                    "power_limit_w": 700.0, "utilization_gpu_pct": rng.randint(90, 100),
                    "utilization_memory_pct": rng.randint(30, 45), "memory_used_mib": 70000.0,
                    "memory_total_mib": 81559.0, "sm_clock_mhz": 1980.0, "memory_clock_mhz": 2619.0,
                    "clock_event_reasons": 0, "ecc_volatile_uncorrected": 0, "ecc_volatile_corrected": 0,
                    "remapped_rows_pending": False, "pcie_gen": 5, "pcie_width": 16, "process_count": 1,
                    "process_memory_mib": 69000.0, "processes": [[4000 + gpu, 69000.0]],
                    "temperature_slowdown_c": 87.0, "pcie_replay_count": 0}) + "\n")
            if second % 20 == 10:
                out.write(json.dumps({"kind": "xid", "t": t, "gpu": (second // 20) % GPUS, "xid": 13,
                                      "text": "Graphics SM Warp Exception"}) + "\n")


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _proc_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


def cli_monitor(seconds: float, check_every: str = "0") -> tuple[float, float, float, int]:
    """`gpuhealth monitor` replaying an 8-GPU trace at 1 Hz: (CPU share in % of a core after the warm-up,
    peak RSS MiB, RSS MiB at the end, alerts logged)."""
    import signal

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "bench.trace"
        write_bench_trace(trace, int(seconds + CLI_WARMUP_S + 30))
        log = Path(tmp) / "alerts.log"
        config = Path(tmp) / "monitor.toml"
        # every rule, correlation and capture on (the defaults); boots and acks come with the history
        config.write_text(f'[monitor]\ncorrelate_every = "10s"\ncapture_every = "1h"\n'
                          f'[notify]\nstderr = false\nlog_file = "{log}"\n')
        command = [sys.executable, "-m", "gpuhealth", "monitor", "--source", f"replay:{trace}", "--replay-speed",
                   "1", "--interval", "1s", "--check-every", check_every, "--db", str(Path(tmp) / "h.db"),
                   "--config", str(config)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HOME": tmp, "XDG_CONFIG_HOME": tmp}
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(CLI_WARMUP_S)
            cpu0, wall0 = _proc_cpu_s(process.pid), time.monotonic()
            time.sleep(seconds)
            cpu, wall = _proc_cpu_s(process.pid) - cpu0, time.monotonic() - wall0
            peak, now = _proc_kib(process.pid, "VmHWM") / 1024, _proc_kib(process.pid, "VmRSS") / 1024
        finally:
            process.send_signal(signal.SIGTERM)
            _out, err = process.communicate(timeout=60)
        if process.returncode not in (0, -signal.SIGTERM):
            raise RuntimeError(f"gpuhealth monitor exited {process.returncode}: {err.decode()[-500:]}")
        alerts = len(log.read_text().splitlines()) if log.exists() else 0
    return cpu / wall * 100, peak, now, alerts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--polls", type=int, default=300)
    parser.add_argument("--cli-seconds", type=float, default=60.0,
                        help="how long `gpuhealth monitor` is measured through the command line (0: not at all)")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--kmsg", choices=("steady", "storm"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.kmsg or "")
        return
    # as installed: pip compiles the bytecode; without it every import compiles its module first, and the compiler's
    # memory stays in the peak (kernel_log.py, imported at the first Xid line, cost 3 MiB of it)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    if args.cli_seconds > 0:
        cli_table(args.cli_seconds)
    per_poll = cpu_per_poll(args.polls)
    out = subprocess.run([sys.executable, __file__, "--child", str(args.seconds)], capture_output=True, text=True,
                         check=True, timeout=args.seconds + 60).stdout.split()
    share, rss, steps = float(out[0]), float(out[1]), int(out[2])
    kmsg_share, kmsg_rss = _child(args.seconds, "steady")
    storm_share, storm_rss = _child(args.seconds, "storm")
    raw, rollup, size = bytes_per_gpu_day()
    rows = [
        ("CPU per poll, 8 GPUs (fake NVML)", f"{per_poll * 1e3:.2f} ms ({per_poll * 1e3 / GPUS:.3f} ms per GPU)",
         "(for reference)"),
        (f"whole process at 1 Hz, {steps} polls", f"{share:.2f} % of a core", _goal(share <= 1.0, "<= 1 %")),
        ("whole process peak RSS", f"{rss:.1f} MiB", _goal(rss <= 50, "<= 50 MiB")),
        (f"  the same, following the kernel log ({KMSG_LINES_S} lines/s, an Xid every 10 s), correlation on",
         f"{kmsg_share:.2f} % of a core, {kmsg_rss:.1f} MiB", _goal(kmsg_share <= 1.0 and kmsg_rss <= 32,
                                                                     "<= 1 %, <= 32 MiB")),
        (f"  the same in an Xid storm ({STORM_XIDS_S} Xid lines/s)", f"{storm_share:.2f} % of a core, "
         f"{storm_rss:.1f} MiB", _goal(storm_rss <= 32, "<= 32 MiB")),
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


def _child(seconds: float, kmsg: str) -> tuple[float, float]:
    """CPU share and peak RSS of a child following a fake kernel log (``child``)."""
    out = subprocess.run([sys.executable, __file__, "--child", str(seconds), "--kmsg", kmsg], capture_output=True,
                         text=True, check=True, timeout=seconds + 60).stdout.split()
    return float(out[0]), float(out[1])


def cli_table(seconds: float) -> None:
    share, peak, now, alerts = cli_monitor(seconds)
    check_share, check_peak, _check_now, _ = cli_monitor(seconds, check_every="10m")
    rows = [
        (f"gpuhealth monitor (CLI), 8 GPUs at 1 Hz, {seconds:g} s, all on", f"{share:.2f} % of a core",
         _goal(share <= 0.5, "<= 0.5 %")),
        ("  peak RSS (VmHWM, start-up included)", f"{peak:.1f} MiB", _goal(peak <= 32, "<= 32 MiB")),
        ("  RSS at the end", f"{now:.1f} MiB", f"({alerts} alert lines logged)"),
        ("  the same with the full check on (its first run at start)", f"{check_share:.2f} % of a core",
         "(this host is no GPU node)"),
        ("  peak RSS with the full check on", f"{check_peak:.1f} MiB", "(for reference)"),
    ]
    rows += [(what, value, f"documented: {where}") for what, value, where in PEER_REQUESTS]
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    print(f"{'what':{width}}  {'measured':{value_width}}  goal or source")
    for what, value, goal in rows:
        print(f"{what:{width}}  {value:{value_width}}  {goal}")
    print()


def _goal(met: bool, text: str) -> str:
    return f"{text}: {'met' if met else 'MISSED'}"


if __name__ == "__main__":
    main()
