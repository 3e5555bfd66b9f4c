"""The text report's last line names the `gpuhealth fix` that reads the same source: `fix --from BUNDLE`
after `check --from BUNDLE`, `fix FILE...` after `analyze FILE...`. A bare `gpuhealth fix`, typed as
shown, checked this host instead."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

from conftest import REPO

BUNDLE = REPO / "examples" / "h100x8-xid-ecc.tar.gz"
SESSION = REPO / "tests" / "cases" / "dev" / "module-not-built-dkms-reinstall" / "session.txt"
HINT = re.compile(r"; run `(gpuhealth fix[^`]*)` for a script$")


def _gpuhealth(args: list[str], cwd, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhealth", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, input=stdin)


# a closing line too long for the terminal puts the command whole on a line of its own, after "for a script, run:"
OWN_LINE = re.compile(r"for a script, run:$")


def _hint(output: str) -> str:
    *_, before, last = output.rstrip("\n").splitlines()
    match = HINT.search(last)
    if match is None and OWN_LINE.search(before) and last.strip().startswith("gpuhealth fix"):
        return last.strip()
    assert match, last
    return match.group(1)


def _runs_as_shown(hint: str, cwd, stdin: str | None = None) -> str:
    """The hint pasted as shown: a script with the report's fixes."""
    program, command, *args = shlex.split(hint)
    assert (program, command) == ("gpuhealth", "fix")
    ran = _gpuhealth(["fix", *args], cwd, stdin)
    assert ran.returncode == 0 and ran.stdout.startswith("#!/usr/bin/env bash"), ran.stderr
    return ran.stdout


def test_after_check_from_a_bundle_the_hint_is_fix_from_that_bundle(tmp_path):
    copy = tmp_path / "node 17's bundle.tar.gz"  # a name the shell must get quoted
    shutil.copy(BUNDLE, copy)
    report = _gpuhealth(["check", "--from", copy.name], tmp_path)
    assert report.returncode == 2, report.stderr
    hint = _hint(report.stdout)
    assert hint == f"gpuhealth fix --from {shlex.quote(copy.name)}"
    script = _runs_as_shown(hint, tmp_path)
    assert "nvidia-smi --gpu-reset -i 0" in script and "for gpu-node-17" in script  # the bundle's host, not this one


def test_after_analyze_the_hint_is_fix_on_the_same_files_or_stdin(tmp_path):
    shutil.copy(SESSION, tmp_path / "session.txt")
    report = _gpuhealth(["analyze", "session.txt"], tmp_path)
    assert report.returncode == 2, report.stderr
    hint = _hint(report.stdout)
    assert hint == "gpuhealth fix session.txt"
    assert "mokutil --sb-state" in _runs_as_shown(hint, tmp_path)
    piped = _gpuhealth(["analyze", "-"], tmp_path, SESSION.read_text())
    assert _hint(piped.stdout) == "gpuhealth fix -"
    assert "mokutil --sb-state" in _runs_as_shown("gpuhealth fix -", tmp_path, SESSION.read_text())
