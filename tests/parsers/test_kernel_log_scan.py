"""The bytes-level kernel log scan against a line-by-line reference.

The scanner finds keyword lines in bulk (one pattern for NVRM and ": AER: ", find for the others, a
bulk path for pieces dense with driver spam, chunked reads that carry lines over); the reference below
splits the log into lines, tests each line for each keyword and hands every hit to the same collector
one by one. Whatever the path, the answer must be the same: on the corpus logs and on inputs built to
break the bookkeeping (lines across buffer and batch boundaries, CRLF, NUL bytes, no final newline, lines
longer than the cut, keywords in odd places, spam that turns the dense path on and off).
"""

from __future__ import annotations

import dataclasses
import io
import random

import pytest

from conftest import corpus_files, corpus_id
from gpuhealth.model import KernelLog
from gpuhealth.parsers import kernel_log
from gpuhealth.parsers.kernel_log import parse_kernel_log, parse_kernel_log_file, parse_kernel_log_stream

CORPUS_LOGS = corpus_files(  # the kernel logs test_kernel_log.py parses, and the issue threads' logs
    "gpud/*dmesg*", "gpud/kmsg__*", "gpud/pstore__*", "gpud/query_log_tail__dmesg.0.log",
    "ml-engineering/dmesg_xid63_row_remapper.txt", "nvidia-bug-report-352.63/dmesg.txt", "issue-logs/*.log",
)


def reference(data: bytes, source: str, rescan: bool = True) -> KernelLog:
    """The log as a line-by-line scan sees it: every line tested for every keyword, hits fed one at a time."""
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()

    def hits(needles) -> list:
        found = []
        for index, line in enumerate(lines):
            if any(needle in line for needle in needles):
                raw = line[:kernel_log._MAX_LINE]
                after = None
                if b"The NVIDIA GPU" in raw:
                    after = b"\n".join(lines[index + 1:index + 1 + kernel_log._LOOKAHEAD_LINES])
                    after = after[:kernel_log._MAX_LINE]
                found.append((index, raw, after))
        return found

    collector = kernel_log._Collector()
    for hit in hits(kernel_log._NEEDLES):
        collector.feed([hit], 0)
    fmt = kernel_log._detect(kernel_log._head(data))
    log = collector.result(source, fmt, len(lines), (lambda needles: hits(needles)[:kernel_log._RESCAN_MAX_HITS])
                           if rescan else None, len(data))
    return dataclasses.replace(log, bytes_scanned=len(data))


def stream_reference(data: bytes, source: str) -> KernelLog:
    """What the stream scan promises: the same, its second-pass lines (signature refusals, the PCI core's BAR lines)
    read in its one pass over the first 64 MiB; only the driver's failing GPUs' "can't reserve" lines, which need a
    second pass over the whole log, are not looked for (none in these logs)."""
    assert len(data) <= kernel_log._SIGNATURE_SCAN_MAX_BYTES and b"reserve" not in data
    return reference(data, source, rescan=True)


def spam_line(rnd: random.Random, t: int) -> str:
    return rnd.choice((
        f"[{t}.000001] NVRM: nvAssertOkFailedNoLog: Assertion failed: Call timed out [NV_ERR_TIMEOUT] "
        f"(0x00000065) returned from pRmApi->Control(pRmApi, RES_GET_CLIENT_HANDLE(pSubdevice)) @ rs_client.c:{t % 7}",
        f"[{t}.000002] NVRM: nvCheckOkFailedNoLog: Check failed: Invalid state [NV_ERR_INVALID_STATE] "
        "(0x00000040) returned from kbusSendSysmembar(pGpu, pKernelBus) @ kern_bus_gh100.c:2067",
        f"[{t}.000003] NVRM: _kgspRpcRecvPoll: GPU0 sequence {t % 3}",
    ))


def adversarial(seed: int, lines: int = 3000) -> bytes:
    """A log that mixes every kind of line the scanner treats differently, in spam runs and quiet runs."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    for t in range(lines):
        mode = (t // 400) % 3  # quiet, spam, mixed runs: the dense path turns on and off
        roll = rnd.random()
        if mode == 1 and roll < 0.8 or mode == 2 and roll < 0.3:
            line = spam_line(rnd, t)
        else:
            line = rnd.choice((
                f"[{t}.5] eth0: link up",
                f"[{t}.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
                f"[{t}.5] NVRM: Xid (PCI:0000:{rnd.randrange(256):02x}:00): 13, pid='<unknown>', name=<unknown>, "
                "Graphics SM Warp Exception",
                f"[{t}.5] NVRM: GPU at PCI:0000:5d:00: GPU-1234",
                f"[{t}.5] NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330)",
                f"[{t}.5] installed in this system has fallen off the bus and is not responding to commands.",
                f"[{t}.5] NVRM: API mismatch: the client has the version 550.54.14, but",
                f"[{t}.5] NVRM: this kernel module has the version 550.90.07.  Please",
                f"[{t}.5] nvidia-nvswitch{t % 4}: SXid (PCI:0000:0{t % 4}:00.0): 12028, Non-fatal, Link 4 egress",
                f"[{t}.5] nvidia-nvswitch{t % 4}: open (major=510)",
                f"[{t}.5] pcieport 0000:00:01.0: AER: Corrected error received: 0000:3b:00.0",
                f"[{t}.5] nvidia 0000:3b:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer",
                f"[{t}.5] nvidia 0000:3b:00.0: AER:   device [10de:2330] error status/mask=00000001/0000e000",
                f"[{t}.5] pcieport 0000:00:01.0: AER: NVRM in an AER line: AER: then NVRM: both",
                f"[{t}.5] NVRNVRM: overlapping keyword, RM: AER: and : AER: twice",
                f"[{t}.5] NVR M not a keyword, nor nvidia-nvswitc h, nor :AER: ",
                f"[{t}.5] \x00\x00 NUL bytes then NVRM: GPU 0000:07:00.0: Failed to load (NUL)",
                f"[{t}.5] NVRM: RmInitAdapter failed! (0x26:0xffff:1234)\r",
                f"[{t}.5] crlf line\r",
                "",
                "NVRM",
                f"[{t}.5] Key was rejected by service: nvidia module",
                f"[{t}.5] pci 0000:3b:00.0: BAR 1: no space for [mem size 0x4000000000 64bit pref]",
            ))
        if t % 500 in (17, 18, 260):  # a few lines longer than the cut (_MAX_LINE), inside every kind of run
            line = rnd.choice((
                f"[{t}.5] " + "x" * rnd.choice((70_000, 200_000)) + " NVRM: GPU 0000:07:00.0: Failed (long line)",
                f"[{t}.5] NVRM: spam tail that is long " + "y" * 70_000,
                # cut at _MAX_LINE inside the message: its key is not the spam's, though the line ends like it
                "z" * (kernel_log._MAX_LINE - 12) + " NVRM: nvCheckOkFailedNoLog: Check failed: Invalid state "
                "[NV_ERR_INVALID_STATE] (0x00000040) returned from kbusSendSysmembar(pGpu, pKernelBus) @ "
                "kern_bus_gh100.c:2067",
            ))
        out.append(line.encode("utf-8", "surrogateescape"))
    tail = rnd.choice((b"", b"\n"))
    return b"\n".join(out) + tail


def _same(log: KernelLog, expected: KernelLog) -> None:
    assert log.lines_scanned == expected.lines_scanned
    assert [(g.kind, g.template, g.count) for g in log.groups] == [
        (g.kind, g.template, g.count) for g in expected.groups]
    assert log == expected


@pytest.mark.parametrize("path", CORPUS_LOGS, ids=corpus_id)
def test_corpus_logs_match_the_line_by_line_scan(path, tmp_path, monkeypatch):
    data = path.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or not data.strip(b"\x00 \n\t\r"):
        pytest.skip("not UTF-8 text")
    expected = reference(kernel_log._as_bytes(data), str(path))
    _same(parse_kernel_log(data, str(path), workers=1), expected)
    monkeypatch.setattr(kernel_log, "_CHUNK", 4096)  # many buffer refills and carried-over lines
    _same(parse_kernel_log_file(path, workers=1), expected)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [512, 4096, 1 << 20])
def test_adversarial_logs_match_the_line_by_line_scan(tmp_path, monkeypatch, seed, chunk):
    data = adversarial(seed)
    path = tmp_path / "kern.log"
    path.write_bytes(data)
    expected = reference(data, str(path))
    assert sum(g.count for g in expected.groups) > 1000  # the input is not trivially empty of hits
    monkeypatch.setattr(kernel_log, "_CHUNK", chunk)
    _same(parse_kernel_log(data, str(path), workers=1), expected)
    _same(parse_kernel_log_file(path, workers=1), expected)


@pytest.mark.parametrize("probe", [1, 4, 10 ** 9])
@pytest.mark.parametrize("sub", [64, 4096, 1 << 20])
def test_dense_path_and_its_batches_match_the_line_by_line_scan(tmp_path, monkeypatch, probe, sub):
    """The bulk path for spam (on at once with probe 1, never with 10**9), batch edges anywhere."""
    monkeypatch.setattr(kernel_log, "_DENSE_PROBE", probe)
    monkeypatch.setattr(kernel_log, "_DENSE_BYTES_PER_HIT", 1 << 30)
    monkeypatch.setattr(kernel_log, "_DENSE_SUB", sub)
    monkeypatch.setattr(kernel_log, "_CHUNK", 8192)
    for seed in (11, 12):
        data = adversarial(seed, 2000)
        path = tmp_path / f"kern{seed}.log"
        path.write_bytes(data)
        expected = reference(data, str(path))
        _same(parse_kernel_log(data, str(path), workers=1), expected)
        _same(parse_kernel_log_file(path, workers=1), expected)


def test_stream_scan_matches_the_line_by_line_scan(monkeypatch):
    monkeypatch.setattr(kernel_log, "_CHUNK", 1024)
    monkeypatch.setattr(kernel_log, "_DENSE_PROBE", 8)
    data = b"\n".join(line for line in adversarial(21, 2500).split(b"\n") if b"Key was" not in line)
    expected = stream_reference(data, "s")
    _same(parse_kernel_log_stream(io.BytesIO(data[300:]), "s", head=data[:300]), expected)


def test_hit_on_the_last_lines_of_a_buffer_sees_the_lines_after_it(tmp_path, monkeypatch):
    """A "The NVIDIA GPU" line continued without an NVRM tag, right where a buffer refill cuts the file."""
    block = (b"[9.0] NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330)\n"
             b"[9.0] installed in this system has\n[9.0] fallen off the bus and is not responding to commands.\n")
    for pad in range(0, 400, 7):
        data = b"[1.0] filler line\n" * 40 + b"p" * pad + b"\n" + block + b"[10.0] tail\n"
        path = tmp_path / "kern.log"
        path.write_bytes(data)
        monkeypatch.setattr(kernel_log, "_CHUNK", 800)
        log = parse_kernel_log_file(path, workers=1)
        assert [e.kind for e in log.events] == ["fallen_off_bus"], pad
        assert log == reference(data, str(path))


@pytest.mark.parametrize("workers", [2, 3])
def test_a_message_straddling_a_worker_split_is_joined(tmp_path, monkeypatch, workers):
    """The parallel scan splits the log at line starts between workers; a "The NVIDIA GPU" line whose
    untagged continuation falls in the next worker's range was read without it (no fallen_off_bus), while
    the single-process scan joins it across its 16 MiB read boundaries. Every split point through the block
    gives the line-by-line answer. The forks are replaced by calls in this process: what is tested is where
    each worker's range ends and how far it may look past that end, not the fork."""
    block = (b"[9.0] NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330)\n"
             b"[9.0] installed in this system has\n[9.0] fallen off the bus and is not responding to commands.\n")
    forked = []

    def in_process(job, count):
        forked.append(count)
        return [job(index) for index in range(count)]

    monkeypatch.setattr(kernel_log, "_fork_map", in_process)
    monkeypatch.setattr(kernel_log, "_worker_count", lambda size, wanted: wanted)
    for pad in range(0, 200, 3):
        # the block sits around the middle (workers=2) or a third of the way (workers=3) for some pad
        data = b"[1.0] filler line\n" * (20 if workers == 2 else 12) + b"p" * pad + b"\n" + block
        data += b"[10.0] tail line\n" * 24
        path = tmp_path / "kern.log"
        path.write_bytes(data)
        expected = reference(data, str(path))
        assert [e.kind for e in expected.events] == ["fallen_off_bus"]
        _same(parse_kernel_log(data, str(path), workers=workers), expected)
        _same(parse_kernel_log_file(path, workers=workers), expected)
    assert forked and set(forked) == {workers}
