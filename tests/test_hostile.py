"""Hostile and broken input (issue 11): every attack ends within its limits, with exit 3 or a correct report.

Each case runs gpuhealth in a subprocess and measures what an operator would see: wall time, peak memory
(the child's own ``ru_maxrss`` from ``wait4``), the exit code and how much it wrote to stderr. The bombs are
generated here, small on disk and huge when unpacked (see ``_gzip``), never checked in.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuhealth import host as host_module
from gpuhealth.bundle import RecordingHost, write_archive
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec

MB = 1024 * 1024


# --------------------------------------------------------------------------- measuring a child


@dataclass
class Outcome:
    exit_code: int
    seconds: float
    max_rss_mb: float
    stdout: bytes  # the first 64 KiB
    stderr: bytes  # the first 64 KiB
    stderr_bytes: int  # all of it, counted

    def __str__(self) -> str:  # what a failed assertion shows
        return (f"exit {self.exit_code} after {self.seconds:.1f} s, {self.max_rss_mb:.0f} MB, "
                f"stderr {self.stderr_bytes} bytes: {self.stderr[:600]!r}")


class _Drain(threading.Thread):
    """Counts a pipe's bytes, keeping the first 64 KiB: a 1.6 GB traceback must not fill the test's memory."""

    def __init__(self, pipe) -> None:
        super().__init__(daemon=True)
        self.pipe, self.head, self.count = pipe, bytearray(), 0

    def run(self) -> None:
        while chunk := self.pipe.read(65536):
            self.count += len(chunk)
            if len(self.head) < 65536:
                self.head += chunk[: 65536 - len(self.head)]


def measure(argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None,
            stdin: bytes | None = None) -> Outcome:
    """Run ``argv`` (a gpuhealth command line when it starts with an option or command name)."""
    if not argv[0].startswith("/"):
        argv = [sys.executable, "-m", "gpuhealth", *argv]
    started = time.monotonic()
    child = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    drains = [_Drain(child.stdout), _Drain(child.stderr)]
    for drain in drains:
        drain.start()
    if stdin is not None:
        child.stdin.write(stdin)
        child.stdin.close()
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > timeout:
            os.killpg(child.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.02)
    seconds = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    for drain in drains:
        drain.join(5)
    return Outcome(child.returncode, seconds, usage.ru_maxrss / 1024, bytes(drains[0].head),
                   bytes(drains[1].head), drains[1].count)


def assert_refused(outcome: Outcome, *needles: str, seconds: float = 20.0, rss_mb: float = 200.0) -> None:
    """Exit 3, one short line on stderr naming the cause, no traceback, within time and memory."""
    text = outcome.stderr.decode("utf-8", "replace")
    assert outcome.exit_code == 3, outcome
    assert outcome.seconds < seconds, outcome
    assert outcome.max_rss_mb < rss_mb, outcome
    assert outcome.stderr_bytes < 2000 and "Traceback" not in text, outcome
    for needle in needles:
        assert needle in text, outcome


# --------------------------------------------------------------------------- generating bombs


def _gzip(path: Path, parts: list[tuple[bytes, int]]) -> Path:
    """A gzip file of each ``(chunk, repeat)`` in turn, written in seconds whatever it unpacks to.

    After a full flush deflate forgets its history, so one compressed chunk can be repeated as is;
    the CRC and length in the trailer are computed over the real data, so the file is valid gzip.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    crc = size = 0
    with open(path, "wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        for chunk, repeat in parts:
            packed = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
            for _ in range(repeat):
                out.write(packed)
                crc = zlib.crc32(chunk, crc)
            size += len(chunk) * repeat
        out.write(compressor.flush())
        out.write(crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little"))
    return path


def _header(name: str, size: int, kind: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(tarfile.USTAR_FORMAT)


def _member(name: str, data: bytes) -> bytes:
    return _header(name, len(data), tarfile.REGTYPE) + data + bytes(-len(data) % 512)


def _extended_header_bomb(path: Path, kind: bytes, megabytes: int) -> Path:
    """One PAX ('x') or GNU long-name ('L') header whose content is ``megabytes`` of 'A'."""
    filler = b"A" * MB
    size = megabytes * MB + 16
    body_start = f"{size} path=".encode() if kind == b"x" else b""
    head = _header("b/././@LongLink" if kind == b"L" else "b/pax", size, kind) + body_start
    tail_len = size - len(body_start) - megabytes * MB
    tail = b"A" * (tail_len - 1) + b"\n" + bytes(-size % 512)
    return _gzip(path, [(head, 1), (filler, megabytes), (tail + _member("b/x", b"x") + bytes(1024), 1)])


def _json_member_bundle(path: Path, name: str, parts: list[tuple[bytes, int]]) -> Path:
    """A bundle archive whose member ``name`` is the concatenation of ``parts``."""
    size = sum(len(chunk) * repeat for chunk, repeat in parts)
    head = _header(f"b/{name}", size, tarfile.REGTYPE)
    return _gzip(path, [(head, 1), *parts, (bytes(-size % 512) + bytes(1024), 1)])


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory) -> Path:
    """A real bundle (directory) recorded from a healthy H100 host case."""
    out = tmp_path_factory.mktemp("good") / "bundle"
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), out, hostname="gpu-node-17")
    collect(recorder)
    recorder.finish()
    return out


def _tampered(good: Path, tmp_path: Path, name: str = "manifest.json", change=None, text: str | None = None,
              archive: bool = True) -> Path:
    """A copy of the good bundle with one JSON file changed (``change(document)``) or replaced (``text``)."""
    copy = tmp_path / "bundle"
    shutil.copytree(good, copy)
    if change is not None:
        document = json.loads((copy / name).read_text())
        change(document)
        text = json.dumps(document)
    (copy / name).write_text(text or "")
    return write_archive(copy, tmp_path / "bundle.tar.gz") if archive else copy


# --------------------------------------------------------------------------- archive bombs (issue items 2, 5)


def test_pax_header_bomb_is_refused_before_it_is_read(tmp_path):
    bomb = _extended_header_bomb(tmp_path / "pax.tar.gz", b"x", 1000)
    assert bomb.stat().st_size < 2 * MB
    assert_refused(measure(["check", "--from", str(bomb)]), "PAX header", seconds=15)


def test_gnu_long_name_bomb_is_refused_before_it_is_read(tmp_path):
    bomb = _extended_header_bomb(tmp_path / "gnu.tar.gz", b"L", 1500)
    assert_refused(measure(["check", "--from", str(bomb)]), "GNU long name header", seconds=15)


def test_chained_extended_headers_are_refused(tmp_path):
    record = b"20 path=b/aaaaaaaaa\n"
    pax = _header("b/pax", len(record), b"x") + record + bytes(-len(record) % 512)
    bomb = _gzip(tmp_path / "chain.tar.gz", [(pax, 5000), (_member("b/x", b"x") + bytes(1024), 1)])
    assert_refused(measure(["check", "--from", str(bomb)]), "in a row", seconds=15)


def test_too_many_members_are_refused_while_iterating(tmp_path):
    bomb = _gzip(tmp_path / "many.tar.gz", [(_member("b/f", b""), 30_000), (bytes(1024), 1)])
    assert_refused(measure(["check", "--from", str(bomb)]), "more than 20000 members")


@pytest.mark.parametrize("compression", ["bz2", "xz", ""])
def test_every_compression_is_scanned_the_same_way(tmp_path, compression):
    """A PAX bomb under bzip2, xz and no compression at all is refused like the gzip one."""
    raw = tmp_path / "bomb.tar"
    with open(raw, "wb") as out:
        size = 20 * MB
        out.write(_header("b/pax", size, b"x") + f"{size} path=".encode())
        for _ in range(20):
            out.write(b"A" * MB)
    archive = tmp_path / f"bomb.tar.{compression}" if compression else raw
    if compression:
        subprocess.run(["bzip2" if compression == "bz2" else "xz", "-1", "-k", str(raw)], check=True)
        raw.with_name(raw.name + (".bz2" if compression == "bz2" else ".xz")).rename(archive)
    assert_refused(measure(["check", "--from", str(archive)]), "PAX header")


def test_manifest_of_empty_objects_is_refused_before_parsing(tmp_path):
    """120 MiB of [{},{},...] (136 KB compressed) took 3.1 GB; and within every size limit, 15 MiB."""
    chunk = b"{}," * (MB // 3)
    for megabytes, reason in ((120, "larger than"), (40, "larger than 16777216 bytes"), (15, "too many elements")):
        archive = _json_member_bundle(tmp_path / f"m{megabytes}.tar.gz", "manifest.json",
                                      [(b"[", 1), (chunk, megabytes), (b"{}]", 1)])
        assert_refused(measure(["check", "--from", str(archive)]), "manifest.json" if megabytes < 64 else "",
                       reason)


@pytest.mark.parametrize("name", ["manifest.json", "nvml.json", "env.json"])
@pytest.mark.parametrize("levels", [200, 100_000])
def test_deep_json_in_a_bundle_exits_3(good_bundle, tmp_path, name, levels):
    archive = _tampered(good_bundle, tmp_path, name, text="[" * levels + "]" * levels)
    assert_refused(measure(["check", "--from", str(archive), "--no-frameworks"]), name, "nested deeper")


@pytest.mark.parametrize("field, value, says", [
    ("commands", 7, "`commands` is int"),
    ("files", ["a"], "`files` is list"),
    ("duration_s", "slow", "duration_s` is str"),
    ("stats", {"/proc/x": {"size": "big"}}, "size` is str"),
])
def test_wrong_types_in_the_manifest_exit_3_naming_the_field(good_bundle, tmp_path, field, value, says):
    def change(document):
        if field == "duration_s":
            document["commands"][0]["duration_s"] = value
        else:
            document[field] = value

    archive = _tampered(good_bundle, tmp_path, change=change)
    assert_refused(measure(["check", "--from", str(archive), "--no-frameworks"]), "manifest.json", says)


def test_wrong_types_in_env_json_exit_3_naming_the_file(good_bundle, tmp_path):
    """Raised inside a probe, so it comes out of collect's future.result(): still exit 3, file named."""
    archive = _tampered(good_bundle, tmp_path, "env.json", text=json.dumps({"PATH": ["/bin"]}))
    outcome = measure(["check", "--from", str(archive), "--no-frameworks"])
    assert_refused(outcome, "bundle.tar.gz", "env.json")
    debug = measure(["--debug", "check", "--from", str(archive), "--no-frameworks"])
    assert debug.exit_code == 3 and b"Traceback" in debug.stderr, debug


def test_truncated_archive_exits_3(good_bundle, tmp_path):
    archive = write_archive(good_bundle, tmp_path / "whole.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    assert_refused(measure(["check", "--from", str(cut)]), "cut.tar.gz", "truncated")


# --------------------------------------------------------------------------- bounded commands (issue item 3)


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def _run_command_in_child(script: Path, timeout: float) -> tuple[Outcome, dict]:
    code = ("import json, sys; from gpuhealth.host import run_command; "
            f"r = run_command([{str(script)!r}], {timeout}); "
            "print(json.dumps({'exit': r.exit_code, 'out': len(r.stdout), 'timed_out': r.timed_out, "
            "'error': r.error, 'took': r.duration_s}))")
    outcome = measure([sys.executable, "-c", code], timeout=60)
    return outcome, json.loads(outcome.stdout or b"{}")


def test_endless_output_is_cut_at_the_cap_as_it_is_read(tmp_path):
    """A fake nvidia-smi running `yes` took 6.9 GB: output is now read incrementally up to the cap."""
    outcome, run = _run_command_in_child(_script(tmp_path, "nvidia-smi", "exec yes\n"), 30)
    assert outcome.exit_code == 0, outcome
    assert run["out"] == host_module.MAX_OUTPUT_BYTES and "larger than" in run["error"], run
    assert outcome.seconds < 15 and outcome.max_rss_mb < 300, outcome


def test_grandchild_holding_stdout_does_not_stretch_the_deadline(tmp_path):
    """--timeout 2 lasted 120 s when a grandchild in a new session kept stdout open."""
    pidfile = tmp_path / "grandchild.pid"
    script = _script(tmp_path, "nvidia-smi", f"""\
        setsid sleep 100 &
        echo $! > {pidfile}
        echo partial
        sleep 100
        """)
    try:
        outcome, run = _run_command_in_child(script, 2)
        assert run["timed_out"] and run["exit"] is None and "timed out after 2 s" in run["error"], run
        assert run["took"] < 3.2 and outcome.seconds < 8, (run, outcome)
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_command_that_exits_while_a_helper_holds_stdout_returns_promptly(tmp_path):
    pidfile = tmp_path / "helper.pid"
    script = _script(tmp_path, "nvidia-smi", f"""\
        setsid sleep 100 &
        echo $! > {pidfile}
        echo done
        """)
    try:
        outcome, run = _run_command_in_child(script, 10)
        assert run["exit"] == 0 and not run["timed_out"] and run["took"] < 2, run
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_sigterm_is_ignored_in_vain(tmp_path):
    script = _script(tmp_path, "nvidia-smi", "trap '' TERM\necho x\nsleep 100\n")
    outcome, run = _run_command_in_child(script, 2)
    assert run["timed_out"] and run["took"] < 3.2, run


def test_an_unkillable_command_is_abandoned_and_reported(tmp_path, monkeypatch):
    """State D cannot be made on purpose: a kill that does nothing stands in for the kernel refusing it."""
    monkeypatch.setattr(host_module, "_kill_group", lambda process: None)
    pidfile = tmp_path / "stuck.pid"
    script = _script(tmp_path, "nvidia-smi", f"echo $$ > {pidfile}\nexec sleep 30\n")
    started = time.monotonic()
    run = host_module.run_command([str(script)], 1)
    try:
        assert time.monotonic() - started < 3
        assert run.timed_out and host_module.STUCK_MARKER in (run.error or ""), run
        assert "stuck in the driver" in run.error
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.model import Snapshot

    report = run_checks(Snapshot(origin="test", smi_run=run))
    hung = [f for f in report.findings if f.code == "GH204"]
    assert hung and "stuck in the driver" in hung[0].message, [f.code for f in report.findings]


# --------------------------------------------------------------------------- exit codes (issue item 7)


@pytest.mark.parametrize("argv", [["check", "--gpu-count", "eight"], ["chek"], ["check", "--no-such-option"]])
def test_usage_errors_exit_3_not_2(argv):
    outcome = measure(argv)
    assert outcome.exit_code == 3 and outcome.stderr_bytes < 2000, outcome


def test_file_modes_of_a_bundle_are_private(good_bundle, tmp_path):
    for path in [good_bundle, *good_bundle.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    archive = write_archive(good_bundle, tmp_path / "b.tar.gz")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
