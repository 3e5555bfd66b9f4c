"""Benchmark: start-up. `gpuhealth --help`, `check --from` an 8-GPU bundle and `analyze` on 8-GPU evidence
(its `nvidia-smi -q` and kernel log), beside the bare interpreter, in one run, bytecode compiled.

Goals (issues 1 and 10): each command <= 8x `python -c pass` (and check --from <= 0.5 s); analysis alone
(replaying the bundle into a snapshot and running every check, in-process) <= 50 ms.

The bundle is the h100x8-xid-ecc test host (a real 8x H100 `nvidia-smi -q`, real kernel log with
Xids) recorded through RecordingHost into bench/out/, exactly as `gpuhealth snapshot` would write it.

    python bench/check_from_bundle.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

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


def wall(argv: list[str], repeat: int) -> tuple[float, float]:
    """Best and median wall time of a command, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


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
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    bundle = build_bundle()
    # An installed package has its bytecode compiled; measure that, not a first-run compile.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    gpuhealth = str(Path(sys.executable).with_name("gpuhealth"))
    bare = wall([sys.executable, "-c", "pass"], args.repeat)
    cli = wall([gpuhealth, "check", "--from", str(bundle), "--format", "json"], args.repeat)
    helped = wall([gpuhealth, "--help"], args.repeat)
    analyzed = wall([gpuhealth, "analyze", *evidence_files(bundle), "--format", "json"], args.repeat)
    in_process = analysis(bundle, args.repeat)

    def goal(best: float) -> str:
        return f"<= 8x: {'met' if best <= 8 * bare[0] else 'MISSED'}"

    rows = [
        ("python -c pass", bare, "-", ""),
        ("gpuhealth --help", helped, f"{helped[0] / bare[0]:.1f}x", goal(helped[0])),
        ("gpuhealth check --from (8 GPUs)", cli, f"{cli[0] / bare[0]:.1f}x",
         "<= 0.5 s and <= 8x: " + ("met" if cli[0] <= 0.5 and cli[0] <= 8 * bare[0] else "MISSED")),
        ("gpuhealth analyze (8-GPU smi -q + log)", analyzed, f"{analyzed[0] / bare[0]:.1f}x", goal(analyzed[0])),
        ("analysis alone (replay + checks)", in_process, "-",
         "<= 50 ms: " + ("met" if in_process[0] <= 0.05 else "MISSED")),
    ]
    print(f"{'what':40} {'best s':>8} {'median s':>9} {'vs bare':>8}  goal")
    for name, (best, median), ratio, text in rows:
        print(f"{name:40} {best:8.3f} {median:9.3f} {ratio:>8}  {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
