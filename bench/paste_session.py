"""Benchmark: ``gpuhealth analyze`` on 300-line pastes. Goal: analysis under 0.3 s; the whole command well under 1 s.

Two pastes, each built the same way every run from the real evidence in tests/cases/dev/ (the files as the users
posted them; nothing here is written by hand):

- a terminal session: each case's files, each after a prompt naming a command, until 300 lines;
- a GitHub thread, prose-heavy: each case that has the reporter's words (``notes.txt``) gives them whole, then the
  first lines of each of its other files in a code fence (words between program output, as an issue thread reads),
  until 300 lines.

Timed per paste: the analysis in-process (``analyze_texts`` + the checks + the differential), best of --repeat after a
warm-up; the first analysis in a fresh interpreter (the package imported, nothing compiled or loaded yet: what the
command pays for the analysis), median of --runs; and the whole command (``gpuhealth analyze - --format json``, start-up
included), median of --runs wall and CPU time (CPU is disturbed far less by other processes' load on a shared
machine), with its peak resident memory (``wait4``'s ru_maxrss). Bytecode is compiled
first, the package's and its dependencies', as an installed gpuhealth has it (bench/installed.py).

    python bench/paste_session.py [--repeat 10] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from installed import compile_bytecode

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "cases" / "dev"
GOAL_S = 0.3
COMMAND_GOAL_S = 1.0
LINES = 300
FENCED = 12  # lines of each program output quoted in the thread


def session(lines: int = LINES) -> str:
    """A 300-line session: the cases' files, each after a prompt naming a command, in a fixed order."""
    out: list[str] = []
    for folder in sorted(p for p in CASES.iterdir() if p.is_dir()):
        for path in sorted(folder.iterdir()):
            if path.name in ("case.toml", "README.md"):
                continue
            out.append(f"user@gpu-node:~$ cat {path.name}")
            out.extend(path.read_text(errors="replace").splitlines()[:40])
            if len(out) >= lines:
                return "\n".join(out[:lines]) + "\n"
    return "\n".join(out) + "\n"


def thread(lines: int = LINES) -> str:
    """A 300-line prose-heavy thread: each case's ``notes.txt`` (the reporter's words) whole, then the first
    ``FENCED`` lines of each of its other files in a code fence, in a fixed order."""
    out: list[str] = []
    for folder in sorted(p for p in CASES.iterdir() if p.is_dir()):
        notes = folder / "notes.txt"
        if not notes.is_file():
            continue
        out.extend(notes.read_text(errors="replace").splitlines())
        for path in sorted(folder.iterdir()):
            if path.name in ("case.toml", "README.md", "notes.txt"):
                continue
            out.append("```")
            out.extend(path.read_text(errors="replace").splitlines()[:FENCED])
            out.append("```")
        out.append("")
        if len(out) >= lines:
            return "\n".join(out[:lines]) + "\n"
    return "\n".join(out) + "\n"


def in_process(text: str, repeat: int) -> float:
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks

    run_checks(analyze_texts([("paste", text)])[0])  # warm-up: imports, catalogue compiled once
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run_checks(analyze_texts([("paste", text)])[0])
        best = min(best, time.perf_counter() - start)
    return best


_FIRST = """
import sys, time
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
text = sys.stdin.read()
start, cpu = time.perf_counter(), time.process_time()
run_checks(analyze_texts([("paste", text)])[0])
print(time.perf_counter() - start, time.process_time() - cpu)
"""


def first_analysis(text: str) -> tuple[float, float]:
    """Wall and CPU seconds of the first analysis in a fresh interpreter that has imported the package (what the
    command pays)."""
    done = subprocess.run([sys.executable, "-c", _FIRST], input=text, text=True, capture_output=True, check=True)
    wall, cpu = done.stdout.split()[-2:]
    return float(wall), float(cpu)


def command_line(text: str) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and peak resident KiB of one ``gpuhealth analyze - --format json``
    on ``text``."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "gpuhealth", "analyze", "-", "--format", "json"],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process.stdin.write(text.encode())  # type: ignore[union-attr]
    process.stdin.close()  # type: ignore[union-attr]
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped above
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="in-process analyses per paste (best is shown)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per paste (median is shown)")
    args = parser.parse_args()
    compile_bytecode()  # as installed: no module compiled from source at each run
    pastes = {"terminal session": session(), "GitHub thread (prose-heavy)": thread()}
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    print(f"{'paste':28} {'lines':>5} {'warm ms':>7} {'first ms':>8} {'cpu ms':>6} {'command s':>9} {'cpu s':>5} "
          f"{'peak MiB':>8}  goal")
    met = True
    for name, text in pastes.items():
        warm = in_process(text, args.repeat)
        firsts = [first_analysis(text) for _ in range(args.runs)]
        first, first_cpu = (statistics.median(f[i] for f in firsts) for i in (0, 1))
        runs = [command_line(text) for _ in range(args.runs)]
        wall, cpu = (statistics.median(r[i] for r in runs) for i in (0, 1))
        peak = max(r[2] for r in runs) / 1024
        ok = warm < GOAL_S and first < GOAL_S and wall < COMMAND_GOAL_S
        met = met and ok
        print(f"{name:28} {len(text.splitlines()):5} {warm * 1000:7.0f} {first * 1000:8.0f} {first_cpu * 1000:6.0f} "
              f"{wall:9.2f} {cpu:5.2f} {peak:8.1f}  analysis < {GOAL_S:g} s, command < {COMMAND_GOAL_S:g} s: "
              f"{'met' if ok else 'MISSED'}")
    print(f"warm: best of {args.repeat} in one process; first: the first analysis in a fresh process (wall, CPU), "
          f"median of {args.runs}; command: `gpuhealth analyze -` (wall, CPU), median of {args.runs}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
