"""``analyze`` input: limits enforced while reading, large kernel logs streamed in bounded memory.

The logs here are generated on the fly (hand-written line shapes, repeated); nothing is committed.
Peak memory is measured in a subprocess from its own ``VmHWM`` (a child forked from this large pytest
process would otherwise count this process's memory as its own peak).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuhealth.evidence_input import InputError, parse_max_bytes, read_evidence

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and FIFOs")

XID = "[{t}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1911, name=python3, GPU has fallen off the bus.\n"
XID13 = ("[{t}.000000] NVRM: Xid (PCI:0000:18:00): 13, pid={pid}, name=python3, Graphics SM Warp Exception on "
         "(GPC 1, TPC 2, SM 0): Out Of Range Address\n")
SPAM = ("[{t}.000000] NVRM: nvCheckOkFailedNoLog: Check failed: Call timed out [NV_ERR_TIMEOUT] (0x00000065) "
        "returned from pRmApi->Control(pRmApi, hClient, hObject, cmd, pParams, paramsSize) @ rs_client.c:{n}\n")
QUIET = "[{t}.000000] IPv6: ADDRCONF(NETDEV_CHANGE): cali{n:08x}: link becomes ready\n"

# The command as a user runs it, reporting its own peak RSS (kB) on stderr's last line.
RUNNER = """
import atexit, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("VmHWM", line.split()[1], file=sys.stderr, flush=True)
atexit.register(peak)
from gpuhealth.cli import main
sys.argv = ["gpuhealth", *sys.argv[1:]]
main()
"""


def _block(lines: int = 10_000) -> str:
    """About 1 MB: quiet lines, one in five driver spam, a few Xid 13."""
    parts = []
    for i in range(lines):
        if i % 5 == 0:
            parts.append(SPAM.format(t=100 + i, n=1000 + i % 3))
        elif i % 2500 == 1:
            parts.append(XID13.format(t=100 + i, pid=4000 + i))
        else:
            parts.append(QUIET.format(t=100 + i, n=i))
    return "".join(parts)


def _run(args: list[str], stdin=None, timeout: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    done = subprocess.run([sys.executable, "-c", RUNNER, *args], stdin=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)
    lines = done.stderr.strip().splitlines()
    peak_kb = int(lines[-1].split()[1]) if lines and lines[-1].startswith("VmHWM") else -1
    return done, peak_kb


def _write_big(path: Path, megabytes: int) -> int:
    block = _block().encode()
    with open(path, "wb") as out:
        for _ in range(megabytes * 1024 * 1024 // len(block) + 1):
            out.write(block)
    return path.stat().st_size // len(block)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("big") / "kern.log"
    return path, _write_big(path, 300)


def test_300mb_noisy_log_in_bounded_memory(big_log):
    path, blocks = big_log
    start = time.monotonic()
    done, peak_kb = _run(["analyze", str(path), "--format", "json"])
    assert done.returncode in (1, 2), done.stderr[-2000:]
    assert peak_kb > 0
    assert peak_kb < 200 * 1024, f"peak RSS {peak_kb // 1024} MB for a {path.stat().st_size >> 20} MB log"
    report = json.loads(done.stdout)
    xid = [f for f in report["findings"] if f["code"] == "GH301"]
    assert xid and f"x{4 * blocks}" in xid[0]["message"]  # every Xid 13 counted, though few are kept
    assert time.monotonic() - start < 120


def test_gzip_log_streamed_in_bounded_memory(tmp_path):
    path = tmp_path / "kern.log.gz"
    block = _block().encode()
    with gzip.open(path, "wb", compresslevel=1) as out:
        for _ in range(120):
            out.write(block)
    done, peak_kb = _run(["analyze", str(path), "--format", "json", "-v"])
    assert done.returncode in (1, 2), done.stderr[-2000:]
    assert 0 < peak_kb < 200 * 1024
    assert "scanned as a stream" in done.stderr


def test_endless_stdin_stops_at_max_bytes():
    yes = subprocess.Popen(["yes", "NVRM: nvCheckOkFailedNoLog: Check failed"], stdout=subprocess.PIPE)
    try:
        start = time.monotonic()
        done, peak_kb = _run(["analyze", "-", "--max-bytes", "100M"], stdin=yes.stdout, timeout=60)
    finally:
        yes.kill()
        yes.wait()
    assert done.returncode == 3
    message = [line for line in done.stderr.splitlines() if not line.startswith("VmHWM")]
    assert len(message) == 1 and "<stdin>" in message[0] and "--max-bytes" in message[0], done.stderr
    assert 0 < peak_kb < 200 * 1024
    assert time.monotonic() - start < 60


def test_fifo_without_writer_gives_up_within_the_timeout(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    done, _ = _run(["analyze", str(fifo), "--open-timeout", "1"], timeout=30)
    assert done.returncode == 3
    assert time.monotonic() - start < 15
    assert f"{fifo}: a FIFO with no data after 1 s" in done.stderr


def test_fifo_with_a_writer_is_read(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"sleep 0.3; printf '%s\\n' '{XID.format(t=5).strip()}' > {fifo}"])
    try:
        evidence = read_evidence(str(fifo), open_timeout=10)
    finally:
        writer.wait(timeout=10)
    assert evidence.text is not None and "fallen off the bus" in evidence.text


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/"])
def test_devices_and_directories_are_refused_before_reading(path):
    with pytest.raises(InputError, match=r"not a regular file; refused"):
        read_evidence(path)


def test_regular_file_over_the_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 5000)
    with pytest.raises(InputError, match=r"big.log: 4.9 KiB, over the 4 KiB limit"):
        read_evidence(str(path), max_bytes=4096)


def test_gzip_bomb_stops_at_the_limit(tmp_path):
    path = tmp_path / "bomb.log.gz"
    with gzip.open(path, "wb") as out:
        for _ in range(64):
            out.write(b"\0" * (1 << 20))
    assert path.stat().st_size < 1 << 20
    with pytest.raises(InputError, match=r"bomb.log.gz: more than 16 MiB"):
        read_evidence(str(path), max_bytes=16 << 20)


def test_corrupt_gzip_is_one_clear_error(tmp_path):
    path = tmp_path / "bad.gz"
    path.write_bytes(gzip.compress("".join(f"NVRM: Xid {i * 7919 % 10007}\n" for i in range(20000)).encode())[:2000])
    with pytest.raises(InputError, match=r"bad.gz: corrupt gzip data"):
        read_evidence(str(path))


def test_long_single_line_is_scanned_in_pieces(tmp_path):
    # an 80 MB line of "cuInit x " (no newline), then an Xid: found, in bounded time and memory
    path = tmp_path / "line.log"
    with open(path, "w") as out:
        for _ in range(80):
            out.write("cuInit x " * 116508)
        out.write("\n" + XID.format(t=7))
    done, peak_kb = _run(["analyze", str(path), "--format", "json"], timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert 0 < peak_kb < 200 * 1024
    assert any(f["code"] == "GH302" for f in json.loads(done.stdout)["findings"])


def test_small_inputs_are_still_sniffed_by_content(tmp_path):
    path = tmp_path / "version"
    path.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n")
    evidence = read_evidence(str(path))
    assert evidence.kernel_log is None and evidence.text.startswith("NVRM version")


@pytest.mark.parametrize(("text", "expected"), [("4G", 4 << 30), ("512M", 512 << 20), ("64k", 64 << 10),
                                                ("1000", 1000), ("2GiB", 2 << 30)])
def test_parse_max_bytes(text, expected):
    assert parse_max_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "G", "-1", "1.5G", "lots", "0"])
def test_parse_max_bytes_refuses(text):
    with pytest.raises(ValueError):
        parse_max_bytes(text)


def test_bundle_kernel_log_is_scanned_in_place(tmp_path):
    # check --from reads a bundle's dmesg output through the same file scanner, in bounded memory
    sys.path.insert(0, str(Path(__file__).parent))
    from gpuhealth.bundle import RecordingHost, command_key
    from gpuhealth.collect import collect
    from gpuhealth.collect.system import KERNEL_LOG_COMMANDS
    from hostcases import FakeHost, load_spec

    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    stdout = tmp_path / "b" / "commands" / f"{command_key(KERNEL_LOG_COMMANDS[0])}.stdout"
    assert stdout.exists()
    blocks = _write_big(stdout, 60)  # a bundle member is at most 64 MiB (bundle.MAX_MEMBER_BYTES)
    done, peak_kb = _run(["check", "--from", str(tmp_path / "b"), "--format", "json", "--no-frameworks"])
    assert done.returncode in (1, 2), done.stderr[-2000:]
    assert 0 < peak_kb < 200 * 1024
    xid = [f for f in json.loads(done.stdout)["findings"] if f["code"] == "GH301"]
    assert xid and f"x{4 * blocks}" in xid[0]["message"]
