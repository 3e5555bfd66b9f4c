"""LocalHost against a fake root and fake commands on PATH: timeouts, missing tools, unreadable files."""

from __future__ import annotations

import os
import time

import pytest

from gpuhealth.host import LocalHost, run_command


def test_a_hung_command_is_killed_at_the_timeout(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nsleep 30 &\nsleep 30\n")  # a child too: the whole group must die
    script.chmod(0o755)
    started = time.monotonic()
    run = run_command([str(script)], timeout=0.5)
    assert time.monotonic() - started < 5
    assert run.timed_out and run.exit_code is None and run.error == "timed out after 0.5 s"


def test_missing_command_is_an_answer_not_an_exception():
    run = LocalHost().run(["gpuhealth-no-such-tool"], 1)
    assert run.exit_code is None and run.error == "not installed" and not run.ok


def test_exit_code_and_output_are_kept():
    run = run_command(["sh", "-c", "echo out; echo err >&2; exit 9"], 5)
    assert (run.exit_code, run.stdout, run.stderr.strip()) == (9, "out\n", "err")


def test_reads_under_a_fake_root_and_explains_failures(tmp_path):
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text("NVRM version: x\n")
    host = LocalHost(str(tmp_path))
    assert host.read("/proc/driver/nvidia/version").text == "NVRM version: x\n"
    assert host.read("/nope").error == "not present"
    assert host.listdir("/proc/driver").names == ("nvidia",)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything; permission errors cannot be staged")
def test_unreadable_file_says_run_as_root(tmp_path):
    secret = tmp_path / "var" / "log" / "kern.log"
    secret.parent.mkdir(parents=True)
    secret.write_text("x")
    secret.chmod(0)
    assert "group adm" in LocalHost(str(tmp_path)).read("/var/log/kern.log").error


def test_permission_error_messages_name_the_fix():
    from gpuhealth.host import explain_os_error

    error = PermissionError(13, "Permission denied")
    expected = "permission denied: run as root, or add the user to group adm"
    assert explain_os_error("/var/log/kern.log", error) == expected
    assert explain_os_error("/dev/kmsg", error) == "permission denied: run as root (sudo)"
