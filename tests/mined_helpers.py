"""What the mined-table tests (test_mined_messages, test_mined_tool_messages, test_mined_api) share: the full
analysis of a pasted text, and that analysis run in a fresh interpreter to see which tables it read."""

from __future__ import annotations

import subprocess
import sys

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Report

_ANALYZE = ("import sys; from gpuhealth.cli import main\n"
            "sys.argv = ['gpuhealth', 'analyze', '-']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n")


def report(text: str, name: str) -> Report:
    """The checks' report on ``text`` pasted as a file named ``name``."""
    snapshot, _ = analyze_texts([(name, text)])
    return run_checks(snapshot)


def analyze_in_child(text: str, probe: str) -> str:
    """`gpuhealth analyze -` on ``text`` in a fresh interpreter (so no table is read yet), then ``probe`` (Python
    that prints what it finds to stderr) there; the child's stderr."""
    done = subprocess.run([sys.executable, "-c", _ANALYZE + probe], input=text, capture_output=True, text=True,
                          timeout=120)
    return done.stderr


def imported(module: str) -> str:
    """A probe for analyze_in_child: MINED if ``module`` was imported, else NOT-MINED."""
    return f"print('MINED' if {module!r} in sys.modules else 'NOT-MINED', file=sys.stderr)"
