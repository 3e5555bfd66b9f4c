"""The shipped examples (examples/): the README's bundle and the generated 8-GPU trace load and show what the
README says, they are what examples/make_examples.py builds today, and the README's example block is the
command's real output."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main
from gpuhealth.monitor.commands import watch
from gpuhealth.monitor.config import load_config
from gpuhealth.monitor.rules import RuleSet
from gpuhealth.monitor.sample import Sample
from gpuhealth.monitor.sources import ReplaySource
from repo_paths import REPO

EXAMPLES = REPO / "examples"
BUNDLE = EXAMPLES / "h100x8-xid-ecc.tar.gz"
TRACE = EXAMPLES / "h100x8.trace"
README_COMMAND = "$ gpuhealth check --from examples/h100x8-xid-ecc.tar.gz"
README_COLUMNS = "80"  # the width the README's example block was rendered at


@pytest.fixture(scope="module")
def maker():
    spec = importlib.util.spec_from_file_location("make_examples", EXAMPLES / "make_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _members(archive: Path) -> dict[str, bytes]:
    """The archive's files by path below its top folder; the manifest without the tool's version."""
    out = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                out[member.name.split("/", 1)[1]] = tar.extractfile(member).read()
    manifest = json.loads(out.pop("manifest.json"))
    manifest.pop("tool_version", None)
    manifest["commands"].sort(key=lambda c: json.dumps(c, sort_keys=True))  # probes run in parallel
    out["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    return out


def test_shipped_bundle_gives_the_readme_findings():
    result = CliRunner().invoke(main, ["check", "--from", str(BUNDLE), "--format", "json"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.output)
    assert report["verdict"] == "BROKEN" and len(report["gpus"]) == 8
    assert {g["name"] for g in report["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    critical = [f for f in report["findings"] if f["severity"] == "critical"]
    assert [f["code"] for f in critical] == ["GH301"] and critical[0]["message"].startswith("Xid 48 ")


def test_shipped_bundle_is_what_the_script_builds(maker, tmp_path):
    # the spec or the corpus changed and the shipped bundle did not: run `python examples/make_examples.py`
    fresh = maker.build_bundle(tmp_path / "h100x8-xid-ecc.tar.gz")
    assert _members(BUNDLE) == _members(fresh)


def test_shipped_trace_is_generated_labelled_and_what_the_script_builds(maker, tmp_path):
    source = ReplaySource(TRACE, speed=0, rebase=False)
    assert source.header["generated_by"] == "examples/make_examples.py"
    assert source.header["note"].startswith("GENERATED")
    events = []
    while not source.exhausted:
        events += source.poll()
    source.close()
    samples = [e for e in events if isinstance(e, Sample)]
    assert {s.gpu for s in samples} == set(range(8)) and len(samples) == len(events)
    assert events[-1].t - events[0].t >= 180  # minutes, not seconds
    assert TRACE.read_bytes() == maker.build_trace(tmp_path / "h100x8.trace").read_bytes()


def test_trace_runs_hot_on_one_gpu_only():
    rules = RuleSet.from_config(load_config()["rules"])
    source = ReplaySource(TRACE, speed=0, rebase=False)
    alerts = []
    while not source.exhausted:
        alerts += rules.feed(source.poll())
    source.close()
    firing = {(a.rule, a.gpu) for a in alerts if a.state == "firing"}
    assert ("temperature", 6) in firing and ("clock_slowdown", 6) in firing
    assert {gpu for _, gpu in firing} == {6}


def test_watch_replays_the_trace():
    result = CliRunner().invoke(watch, ["--source", f"replay:{TRACE}", "--replay-speed", "0", "--interval", "0.05"])
    assert result.exit_code == 0, result.output
    assert all(f"GPU {gpu}  util" in result.output for gpu in range(8)) and "GPU 8" not in result.output
    assert "temperature gpu=6" in result.output


def _masked(line: str) -> str:
    """Counts of checks and skips grow with every check added; the README need not follow each one."""
    line = re.sub(r"\d+ checks; \d+ check\(s\) skipped", "N checks; M check(s) skipped", line)
    return re.sub(r"^Skipped \(\d+\)", "Skipped (M)", line)


def test_readme_example_is_the_real_output(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split(README_COMMAND + "\n", 1)[1].split("```", 1)[0]
    shown = [_masked(line.rstrip()) for line in block.splitlines()]
    env = {**os.environ, "COLUMNS": README_COLUMNS}
    # as typed in the README, from the clone: the closing line names the bundle's path as given
    run = subprocess.run([sys.executable, "-m", "gpuhealth", "check", "--from", str(BUNDLE.relative_to(REPO))],
                         capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert run.returncode == 2, run.stderr
    real = [_masked(line.rstrip()) for line in run.stdout.splitlines()]
    # Every README line, in order, is a line of the real output; "..." marks lines left out.
    position = 0
    for line in shown:
        if line.strip() == "...":
            continue
        assert line in real[position:], (f"README example line not in the real output (run `make demo` and "
                                         f"update the README example): {line!r}")
        position = real.index(line, position) + 1
    assert shown[0] == real[0] and sum(line.strip() == "..." for line in shown) <= 2


def test_make_examples_needs_no_test_dependencies():
    # `make demo` runs on the runtime install: the script and what it imports must not need pytest
    code = ("import sys, builtins; real = builtins.__import__\n"
            "def guard(name, *a, **k):\n"
            "    if name.split('.')[0] in ('pytest', 'hypothesis', 'conftest'): raise ImportError(name)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = guard\n"
            "sys.argv = ['make_examples.py', '--help']\n"
            f"exec(compile(open({str(EXAMPLES / 'make_examples.py')!r}).read(), 'make_examples.py', 'exec'), "
            "{'__name__': '__main__', '__file__': " + repr(str(EXAMPLES / "make_examples.py")) + "})\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "usage" in run.stdout.lower()
