"""Benchmark: start-up. `gpuhealth --help`, `check --from` an 8-GPU bundle and `analyze` on 8-GPU evidence
(its `nvidia-smi -q` and kernel log), beside the bare interpreter, in one run, bytecode compiled
(the package's and its dependencies', as pip installs them: bench/installed.py).

Goals (issues 1 and 10): each command <= 8x `python -c pass` (and check --from <= 0.5 s); analysis alone
(replaying the bundle into a snapshot and running every check, in-process) <= 50 ms.

Each command runs ``--repeat`` times, interleaved with the bare interpreter (one round runs every command
once), so a burst of load from other processes falls on all rows alike. Shown per row: best and median
wall time, the median's ratio to the bare interpreter's median, and the median CPU time (user + system,
from ``wait4``), which other processes' load disturbs far less than wall time on a shared machine.

The bundle is the h100x8-xid-ecc test host (a real 8x H100 `nvidia-smi -q`, real kernel log with
Xids) recorded through RecordingHost into bench/out/, exactly as `gpuhealth snapshot` would write it.

    python bench/check_from_bundle.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from installed import compile_bytecode  # noqa: E402

from gpuhealth.bundle import BundleHost, RecordingHost  # noqa: E402
from gpuhealth.checks.engine import run_checks  # noqa: E402
from gpuhealth.collect import collect  # noqa: E402
from hostcases import FakeHost, load_spec  # noqa: E402

OUT = ROOT / "bench" / "out"
CASE = "h100x8-xid-ecc"


def build_bundle() -> Path:
    target = OUT / f"bundle-{CASE}"
    shutil.rmtree(target, ignore_errors=True)
    recorder = RecordingHost(FakeHost(load_spec(CASE)), target, hostname="bench-host")
    collect(recorder)
    recorder.finish()
    return target


def once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of a command."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped above
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def interleaved(commands: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float, float]]:
    """Per command: best wall, median wall, median CPU (seconds), the commands run in rounds."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for argv in commands.values():
        once(argv)  # warm the page cache and the bytecode
    for _ in range(repeat):
        for name, argv in commands.items():
            runs[name].append(once(argv))
    return {name: (min(w for w, _ in found), statistics.median(w for w, _ in found),
                   statistics.median(c for _, c in found)) for name, found in runs.items()}


def analysis(bundle: Path, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        host = BundleHost(bundle)
        report = run_checks(collect(host, origin="bundle"))
        times.append(time.perf_counter() - started)
    assert len(report.snapshot.gpus) == 8 and report.findings, "bench bundle lost its GPUs or findings"
    return min(times), statistics.median(times)


def evidence_files(bundle: Path) -> list[str]:
    """The bundle's `nvidia-smi -q` and kernel log as the loose files a user would pass to `analyze`."""
    from gpuhealth.bundle import command_key
    from gpuhealth.collect.system import KERNEL_LOG_COMMANDS

    commands = bundle / "commands"
    smi = next(p for p in sorted(commands.glob("*.stdout")) if p.name.startswith("nvidia-smi_-q")
               and p.stat().st_size > 10000)
    files = []
    for source, name in ((smi, "nvidia-smi-q.txt"), (commands / f"{command_key(KERNEL_LOG_COMMANDS[0])}.stdout",
                                                     "dmesg.log")):
        target = OUT / f"evidence-{CASE}-{name}"
        shutil.copyfile(source, target)
        files.append(str(target))
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    bundle = build_bundle()
    # An installed package has its bytecode compiled, its dependencies' too: measure that, not a compile at each run.
    compile_bytecode()
    gpuhealth = str(Path(sys.executable).with_name("gpuhealth"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "gpuhealth --help": [gpuhealth, "--help"],
        "gpuhealth check --from (8 GPUs)": [gpuhealth, "check", "--from", str(bundle), "--format", "json"],
        "gpuhealth analyze (8-GPU smi -q + log)": [gpuhealth, "analyze", *evidence_files(bundle), "--format", "json"],
    }
    measured = interleaved(commands, args.repeat)
    in_process = analysis(bundle, args.repeat)
    _, bare, bare_cpu = measured["python -c pass"]
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs); {args.repeat} rounds")
    print(f"{'what':40} {'best s':>7} {'median s':>8} {'vs bare':>7} {'cpu s':>6} {'vs bare':>7}  goal")
    for name, (best, median, cpu) in measured.items():
        if name == "python -c pass":
            ratio = cpu_ratio = goal = ""
        else:
            ratio, cpu_ratio = f"{median / bare:.1f}x", f"{cpu / bare_cpu:.1f}x"
            goal = f"<= 8x: {'met' if median <= 8 * bare else 'MISSED'}"
            if "check" in name:
                goal = f"<= 0.5 s and {goal}" if median <= 0.5 else "<= 0.5 s: MISSED"
        print(f"{name:40} {best:7.3f} {median:8.3f} {ratio:>7} {cpu:6.3f} {cpu_ratio:>7}  {goal}")
    best, median = in_process
    print(f"{'analysis alone (replay + checks)':40} {best:7.3f} {median:8.3f} {'':>7} {'':>6} {'':>7}  "
          f"<= 50 ms: {'met' if best <= 0.05 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
