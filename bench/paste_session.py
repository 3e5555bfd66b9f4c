"""Benchmark: ``gpuhealth analyze`` on a 300-line pasted terminal session. Goal: under 0.3 s.

The session is built from the real evidence in tests/cases/ (each case's files, as the users posted
them), each file pasted after a prompt, until 300 lines; the same session every run. Timed in-process
(``analyze_texts`` + the checks + the differential), best of --repeat after a warm-up, and once through
the command line (``gpuhealth analyze - --format json``, which adds the interpreter's start-up).

    python bench/paste_session.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "cases" / "dev"
GOAL_S = 0.3
LINES = 300


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


def command_line(text: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpuhealth", "analyze", "-", "--format", "json"], input=text, text=True,
                   capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    text = session()
    best = in_process(text, args.repeat)
    cli = command_line(text)
    verdict = "meets" if best < GOAL_S else "MISSES"
    print(f"{len(text.splitlines())}-line pasted session: analyze + checks {best * 1000:.0f} ms (best of "
          f"{args.repeat}); {verdict} the {GOAL_S:g} s goal. Whole command with start-up: {cli:.2f} s")
    return 0 if best < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
