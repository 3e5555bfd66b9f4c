"""What the README and docs/ state as numbers or value lists, checked against the code that decides them:
the check counts in the README's two example reports, `usage`'s default window, the values of
gpuhealth_verdict. A doc that drifts fails here with the line to change."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
COUNTS = re.compile(r"\d+ checks; \d+ check\(s\) skipped|\d+ checks need evidence you did not give")


def _counts(text: str) -> list[str]:
    return COUNTS.findall(text)


def _second_block_after(marker: str) -> str:
    """The second ``` block after MARKER in the README (the first is the input, the second what it prints)."""
    return README.split(marker, 1)[1].split("```\n")[3]


def _real(args: list[str], cwd) -> str:
    run = subprocess.run([sys.executable, "-m", "gpuhealth", *args], capture_output=True, text=True, timeout=60,
                         cwd=cwd)
    assert run.returncode == 2, run.stderr
    return run.stdout


def test_the_readme_reports_count_the_checks_that_run_today():
    bundle = REPO / "examples" / "h100x8-xid-ecc.tar.gz"
    shown = _counts(README.split("$ gpuhealth check --from examples/h100x8-xid-ecc.tar.gz\n", 1)[1].split("```")[0])
    real = _counts(_real(["check", "--from", str(bundle)], REPO))
    assert shown and shown == real, f"README's check --from block: write {real} (a check was added or removed)"
    case = REPO / "tests" / "cases" / "dev" / "module-not-built-dkms-reinstall"
    shown = _counts(_second_block_after("This is what `gpuhealth analyze session.txt` prints for it:"))
    real = _counts(_real(["analyze", "session.txt"], case))
    assert len(shown) == 2 and shown == real, f"README's analyze block: write {real} (a check was added or removed)"


def test_usage_help_and_docs_say_the_default_window_the_code_uses():
    from gpuhealth.monitor.commands import usage
    from gpuhealth.monitor.config import load_config

    (since,) = [p for p in usage.params if p.name == "since"]
    days = int(since.default.removesuffix("d"))
    monitor_md = (REPO / "docs" / "monitor.md").read_text(encoding="utf-8")
    assert f"{days} days back by default (`--since {since.default}`" in monitor_md
    assert f"`gpuhealth usage [--since {since.default}]" in README
    keep = load_config()["monitor"]["rollup_keep"]  # what the help and the doc name as the history's reach
    assert keep == "30d" and "30 days unless configured" in (since.help or "")
    assert "so 30 days back by default" not in monitor_md


def test_the_textfile_doc_names_every_verdict_the_metric_has():
    from gpuhealth.report.prometheus_text import VERDICTS

    doc = (REPO / "docs" / "prometheus-textfile.md").read_text(encoding="utf-8")
    (row,) = [line for line in doc.splitlines() if line.startswith("| `gpuhealth_verdict` |")]
    assert re.findall(r"`([A-Z][A-Z ]+)`", row) == list(VERDICTS)
    others = {2: "two", 3: "three", 4: "four"}[len(VERDICTS) - 1]
    assert f"0 for the other {others}" in row
