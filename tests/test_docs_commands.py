"""Docs that run as written (issue 24 item 2): every `gpuhealth ...` command in README.md and docs/*.md is run,
as a user would type it, unless NOT_RUNNABLE says, with its reason, why it cannot run here.

Where a command is found:
- in a code block: a line starting with `$ gpuhealth` (the lines after it, up to the next `$` line or the
  block's end, are its output), or, in a block with no `$` line, a line starting with `gpuhealth`;
  a block fenced as ```text holds output only;
- in inline code: `gpuhealth ...` between backticks (a table's `\\|` is a `|`).

How it runs: `gpuhealth` is the console script beside this Python (the venv's), first on PATH; the current
directory is the repository (commands name examples/...), HOME and XDG_CONFIG_HOME are a temporary
directory, no shell. A command fails when it exits 3, prints a traceback, a usage error or "No such command",
or runs past its time; where the doc shows its output, each line shown must appear, in order ("..." skips
lines). Commands that run until stopped (a replay in real time) are in LONG_RUNNING: still running at the
end of their time, without an error, is a pass.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]  # docs/checks too: generated, still read
TIMEOUT_S = 60.0  # one command; they take 0.5-2 s here

PROSE = "a command's name in prose, not a command line"
SYNOPSIS = "a synopsis: placeholders and [options], not a command line"
NEEDS_GPU = "samples this host's GPUs (NVML or nvidia-smi): needs a GPU"
# command as the doc writes it -> why it cannot run here. An entry no doc holds any more fails the test.
NOT_RUNNABLE: dict[str, str] = {
    "gpuhealth": PROSE,
    "gpuhealth analyze": PROSE,
    "gpuhealth ack": PROSE,
    "gpuhealth inject": PROSE,
    "gpuhealth gpu: drain_then_reset GPU 0 (GH301 gpu_unusable): ...":
        "a node condition's message (--format npd-gpu), quoted",
    "gpuhealth gpu: reset_gpu GPU 3 (GH302 gpu_unusable): GPU 3 fell off the bus":
        "a node condition's message (--format npd-gpu), quoted",
    "gpuhealth inject KIND [CODE] --gpu N --into TRACE -o OUT": SYNOPSIS,
    "gpuhealth monitor --source replay:/tmp/gpuhealth-drill.trace --replay-speed 0 --db /tmp/drill.db":
        "replays the drill trace the `gpuhealth inject` command before it writes (commands here run in parallel); "
        "tests/monitor/test_monitor_inject.py runs inject and the replay of each kind",
    "gpuhealth check --from": PROSE,
    "gpuhealth diff": PROSE,
    "gpuhealth fleet": PROSE,
    "gpuhealth monitor": NEEDS_GPU,
    "gpuhealth serve": NEEDS_GPU,
    "gpuhealth watch": NEEDS_GPU,
    "gpuhealth usage": "reads the monitor's history database, which exists only after `gpuhealth monitor` ran",
    "gpuhealth --debug": "an option named in prose (it needs a command)",
    "gpuhealth --debug ...": "an option named in prose (it needs a command)",
    "gpuhealth explain CODE": SYNOPSIS,
    "gpuhealth ack CODE [--gpu N] [--until 8h|2026-12-07T18:00] --reason TEXT": SYNOPSIS,
    "gpuhealth ack --clear CODE [--gpu N]": SYNOPSIS,
    "gpuhealth explain <code>": SYNOPSIS,
    "gpuhealth snapshot": PROSE,
    "gpuhealth check --from bundle.tar.gz": "reads the bundle.tar.gz that the `gpuhealth snapshot -o bundle.tar.gz` "
                                            "before it writes (that one runs here, in a directory of its own)",
    "gpuhealth check --level 2": "runs active tests (copy bandwidth, a matmul, a memory pattern) on this host's GPUs",
    "gpuhealth snapshot -o DIR|FILE.tar.gz": SYNOPSIS,
    "gpuhealth snapshot -o PATH": SYNOPSIS,
    "gpuhealth snapshot -o DIR --redact-host": SYNOPSIS,
    "gpuhealth check --from BUNDLE": SYNOPSIS,
    "gpuhealth check --from PATH": SYNOPSIS,
    "gpuhealth analyze FILE... | -": SYNOPSIS,
    "gpuhealth analyze LOG": SYNOPSIS,
    "gpuhealth analyze LOG.gz": SYNOPSIS,
    "gpuhealth diff BEFORE AFTER": SYNOPSIS,
    "gpuhealth usage [--since 7d] [--price P] [--csv | --format json]": SYNOPSIS,
    "gpuhealth fleet --prometheus URL [--job gpuhealth] [--format json]": SYNOPSIS,
    "gpuhealth config show [--config FILE]": SYNOPSIS,
    "gpuhealth recommend [FILE... | - | --from BUNDLE] [--gpu ID_OR_NAME]... [--os DISTRO-VERSION] "
    "[--format text|json]": SYNOPSIS,
    "gpuhealth fix [FILE... | - | --from BUNDLE] [-o FILE]": SYNOPSIS,
    "gpuhealth monitor [--interval 1s] [--check-every 10m] [--db PATH] [--source auto|nvml|smi|replay:FILE]":
        SYNOPSIS,
    "gpuhealth history [--gpu N] [--metric temperature] [--since 1h] [--csv] [--db PATH]": SYNOPSIS,
    "gpuhealth watch [--source auto|nvml|smi|replay:FILE] [--interval 1s] [--config FILE] [--replay-speed 1]":
        SYNOPSIS,
    "gpuhealth usage [--gpu N] [--since 7d] [--price P] [--csv | --format json] [--db PATH] [--config FILE]":
        SYNOPSIS,
    "gpuhealth serve [--listen 127.0.0.1:9835] [--source auto|nvml|smi|replay:FILE] [--db PATH]": SYNOPSIS,
    "gpuhealth serve --source replay:examples/h100x8.trace --check-from examples/h100x8-xid-ecc.tar.gz":
        "binds 127.0.0.1:9835, which a running serve or a parallel test may hold; tests/web/test_web_examples.py "
        "runs this command on a free port and checks its start line and dashboard",
    "gpuhealth serve --listen 0.0.0.0:9835": "listens on every address of this machine (and needs a token)",
    "gpuhealth fleet --prometheus http://prometheus:9090": "needs a Prometheus server that scrapes gpuhealth nodes",
    "gpuhealth fleet --prometheus http://127.0.0.1:50605": "needs a Prometheus server that scrapes gpuhealth nodes; "
                                                           "tests/web/test_web_fleet_e2e.py runs fleet against one",
    "gpuhealth check --format nhc --no-frameworks --timeout 10 --gpu-state /var/lib/gpuhealth/gpus-seen":
        "writes /var/lib/gpuhealth/gpus-seen, outside the repository (as root, on a Slurm node)",
    "gpuhealth monitor: trace.jsonl: refused a temperature_c reading of nan (GPU 0): that reading is left out; ...":
        "a line the monitor prints, quoted in prose",
}
# commands that run until stopped: seconds to let them run
LONG_RUNNING: dict[str, float] = {
    "gpuhealth watch --source replay:examples/h100x8.trace": 3.0,  # a 4-minute trace replayed in real time
}
# commands that name files relative to another directory than the repository ("tmp": a fresh one)
WORKDIR: dict[str, str] = {
    "gpuhealth analyze session.txt": "tests/cases/dev/module-not-built-dkms-reinstall",  # README: "prints for it"
    "gpuhealth snapshot -o bundle.tar.gz --redact-host": "tmp",  # writes bundle.tar.gz
    "gpuhealth snapshot -o bundle.tar.gz": "tmp",
}
# output blocks another test compares (these commands are still run here)
OUTPUT_CHECKED_ELSEWHERE: dict[str, str] = {
    "gpuhealth check --from examples/h100x8-xid-ecc.tar.gz":
        "tests/test_docs_match_code.py::test_the_readme_reports_count_the_checks_that_run_today",
}
# a crash, and click's usage errors (an unknown command or option, a missing argument, a bad value)
ERRORS = ("Traceback (most recent call last)", "No such command", "Try 'gpuhealth")


@dataclass
class Documented:
    command: str
    where: list[str] = field(default_factory=list)  # FILE:LINE
    output: list[list[str]] = field(default_factory=list)  # each output block shown beside it


_FENCE = re.compile(r"^\s*```(\w*)")
_INLINE = re.compile(r"`(gpuhealth(?: [^`]*)?)`")
_BLOCK_COMMAND = re.compile(r"^\s*(gpuhealth(?: .*)?)$")


def extract(text: str, name: str, found: dict[str, Documented]) -> None:
    """Every command of one Markdown text into ``found`` (by command; where and output blocks added)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            for match in _INLINE.finditer(lines[i]):
                _add(found, match[1].replace("\\|", "|").strip(), f"{name}:{i + 1}")
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if _FENCE.match(lines[j])), len(lines))
        block = lines[i + 1:end]
        if fence[1] != "text":
            _block(block, name, i + 2, found)
        i = end + 1


def _block(block: list[str], name: str, first: int, found: dict[str, Documented]) -> None:
    prompts = [n for n, line in enumerate(block) if line.lstrip().startswith("$ ")]
    if not prompts:
        for n, line in enumerate(block):
            match = _BLOCK_COMMAND.match(line)
            if match:
                _add(found, match[1].strip(), f"{name}:{first + n}")
        return
    for k, n in enumerate(prompts):
        command = block[n].lstrip()[2:].strip()
        if not command.startswith("gpuhealth"):
            continue
        until = prompts[k + 1] if k + 1 < len(prompts) else len(block)
        shown = [line.rstrip() for line in block[n + 1:until]]
        _add(found, command, f"{name}:{first + n}", shown if any(shown) else None)


def _add(found: dict[str, Documented], command: str, where: str, output: list[str] | None = None) -> None:
    entry = found.setdefault(command, Documented(command))
    entry.where.append(where)
    if output is not None:
        entry.output.append(output)


def documented() -> dict[str, Documented]:
    found: dict[str, Documented] = {}
    for path in DOCS:
        extract(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)), found)
    return found


def shows(output: str, expected: list[str]) -> str | None:
    """None when every line of ``expected`` is a line of ``output``, in order ("..." skips any lines);
    else the first line not found."""
    actual = [line.rstrip() for line in output.splitlines()]
    at = 0
    skipping = False
    for want in expected:
        if want.strip() == "...":
            skipping = True
            continue
        if skipping:
            hits = [n for n in range(at, len(actual)) if actual[n] == want]
            if not hits:
                return want
            at = hits[0] + 1
        else:
            if at >= len(actual) or actual[at] != want:
                return want
            at += 1
        skipping = False
    return None


def _run(command: str, script_dir: Path, scratch: Path) -> tuple[int | None, str, float]:
    """(exit code, None when it ran past its time; stdout and stderr; seconds) of one documented command."""
    env = {**os.environ, "PATH": f"{script_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(scratch / "home"), "XDG_CONFIG_HOME": str(scratch / "home" / ".config"),
           "COLUMNS": "200"}
    env.pop("GPUHEALTH_TOKEN", None)
    cwd = WORKDIR.get(command)
    where = Path(tempfile.mkdtemp(dir=scratch)) if cwd == "tmp" else REPO / cwd if cwd else REPO
    limit = LONG_RUNNING.get(command, TIMEOUT_S)
    started = time.monotonic()
    proc = subprocess.Popen(shlex.split(command), cwd=where, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    try:
        output, _ = proc.communicate(timeout=limit)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        code = None
    return code, output, time.monotonic() - started


def _failure(entry: Documented, code: int | None, output: str) -> str | None:
    long_running = entry.command in LONG_RUNNING
    if code is None and not long_running:
        return f"ran past {TIMEOUT_S:g} s"
    if code == 3 or (code is not None and code < 0):
        return f"exit {code}"
    error = next((marker for marker in ERRORS if marker in output), None)
    if error:
        return f"printed {error!r}"
    if long_running and code not in (None, 0):
        return f"exit {code}"
    if entry.command not in OUTPUT_CHECKED_ELSEWHERE:
        for shown in entry.output:
            missing = shows(output, shown)
            if missing is not None:
                return f"its output differs from the doc's block: {missing!r} not found"
    return None


def test_every_runnable_documented_command_runs(tmp_path, capsys):
    found = documented()
    script = Path(sys.executable).parent / "gpuhealth"
    assert script.is_file(), f"{script}: no console script beside this Python (pip install -e .)"
    listed = set(NOT_RUNNABLE) | set(LONG_RUNNING) | set(WORKDIR) | set(OUTPUT_CHECKED_ELSEWHERE)
    stale = sorted(listed - set(found))
    assert not stale, f"listed here but in no doc any more: {stale}"
    runnable = [entry for command, entry in found.items() if command not in NOT_RUNNABLE]
    (tmp_path / "home" / ".config").mkdir(parents=True)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda entry: _run(entry.command, script.parent, tmp_path), runnable))
    failures = []
    for entry, (code, output, _seconds) in zip(runnable, results, strict=True):
        why = _failure(entry, code, output)
        if why:
            tail = "\n    ".join(output.strip().splitlines()[-5:])
            failures.append(f"{entry.command!r} ({', '.join(entry.where)}): {why}\n    {tail}")
    with capsys.disabled():
        print(f"\ndocs test: ran {len(runnable)} documented gpuhealth commands in {time.monotonic() - started:.1f} s; "
              f"{len(NOT_RUNNABLE)} listed as not runnable here")
    assert not failures, "\n".join(failures)
    assert len(runnable) >= 10  # the extraction found the docs' commands (an empty run would pass)


def test_extraction_finds_blocks_prompts_outputs_and_inline_code():
    text = "\n".join([
        "Run `gpuhealth checks` or `gpuhealth snapshot -o A\\|B`; `grep gpuhealth` is not one.",
        "```",
        "$ gpuhealth check --from x",
        " BROKEN",
        "",
        "$ echo gpuhealth",
        "```",
        "```bash",
        "gpuhealth watch --source replay:t",
        "  gpuhealth serve",
        "```",
        "```text",
        "gpuhealth watch  nvml  2 GPU(s)",
        "```",
    ])
    found: dict[str, Documented] = {}
    extract(text, "doc.md", found)
    assert sorted(found) == ["gpuhealth check --from x", "gpuhealth checks", "gpuhealth serve",
                             "gpuhealth snapshot -o A|B", "gpuhealth watch --source replay:t"]
    assert found["gpuhealth check --from x"].output == [[" BROKEN", ""]]
    assert found["gpuhealth check --from x"].where == ["doc.md:3"]
    assert found["gpuhealth serve"].where == ["doc.md:10"] and found["gpuhealth serve"].output == []


@pytest.mark.parametrize("output, expected, missing", [
    ("a\nb\nc\n", ["a", "b"], None),
    ("a\nb\nc\n", ["a", "...", "c"], None),
    ("a\nb\nc\n", ["b"], "b"),  # without "...", the block starts at the first line
    ("a\nb\nc\n", ["a", "c"], "c"),
    ("a\nb  \n", ["a", "b"], None),  # trailing blanks do not count
    ("a\nb\n", ["...", "x"], "x"),
])
def test_shown_output_must_appear_in_order(output, expected, missing):
    assert shows(output, expected) == missing
