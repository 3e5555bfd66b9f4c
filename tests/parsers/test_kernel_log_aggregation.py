"""Kernel log events aggregated while scanning: per template, a count, first and last, a bounded sample.

Hand-written lines in the shapes of the corpus (dmesg ``[seconds]`` prefix; Xid and NVRM texts as the
driver prints them); nothing here is a real log.
"""

from __future__ import annotations

import io

import pytest

from gpuhealth.parsers import kernel_log
from gpuhealth.parsers.kernel_log import parse_kernel_log, parse_kernel_log_file, parse_kernel_log_stream

XID13 = ("[{t:.6f}] NVRM: Xid (PCI:0000:18:00): 13, pid={pid}, name=python3, Graphics SM Warp Exception on "
         "(GPC {gpc}, TPC 1, SM 0): Out Of Range Address\n")
SPAM = ("[{t:.6f}] NVRM: nvCheckOkFailedNoLog: Check failed: Call timed out [NV_ERR_TIMEOUT] (0x00000065) "
        "returned from pRmApi->Control(pRmApi, hClient, hObject, cmd, pParams, paramsSize) @ rs_client.c:{line}\n")
QUIET = "[{t:.6f}] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready\n"


def _storm(count: int, every_s: float = 1.0) -> str:
    return "".join(XID13.format(t=10 + i * every_s, pid=1000 + i, gpc=i % 8) for i in range(count))


def _groups(log, kind):
    return [g for g in log.groups if g.kind == kind]


def test_one_template_counted_with_first_last_and_a_bounded_sample():
    log = parse_kernel_log(_storm(1000))
    (group,) = _groups(log, "xid")
    assert group.count == 1000
    assert group.template.startswith("Graphics SM Warp Exception on (GPC #, TPC #, SM #)")
    assert (group.first.line_number, group.first.timestamp, group.first.pid) == (1, "10.000000", 1000)
    assert (group.last.line_number, group.last.timestamp, group.last.pid) == (1000, "1009.000000", 1999)
    assert len(group.samples) == kernel_log._SAMPLES
    assert [e.line_number for e in group.samples] == [1, 2, 3, 4, 5, 6, 7, 1000]
    assert log.events == group.samples  # events is the bounded sample, not every line


def test_templates_differ_by_words_not_numbers():
    text = (XID13.format(t=1, pid=5, gpc=1) + XID13.format(t=2, pid=6, gpc=7)
            + "[3.000000] NVRM: Xid (PCI:0000:18:00): 13, pid=7, name=python3, Graphics Exception: "
            "ESR 0x404600=0x80000001\n")
    groups = _groups(parse_kernel_log(text), "xid")
    assert sorted(g.count for g in groups) == [1, 2]


def test_devices_and_codes_are_never_merged():
    text = XID13.format(t=1, pid=5, gpc=1) + XID13.format(t=2, pid=5, gpc=1).replace("0000:18:00", "0000:2a:00")
    assert {(g.pci_address, g.count) for g in _groups(parse_kernel_log(text), "xid")} == {
        ("0000:18:00.0", 1), ("0000:2a:00.0", 1)}


def test_driver_spam_is_counted_as_other_and_never_an_event():
    text = "".join(SPAM.format(t=i, line=100 + i % 3) + QUIET.format(t=i + 0.5) for i in range(5000))
    log = parse_kernel_log(text)
    assert not log.events
    (group,) = _groups(log, "other")  # the line numbers in the text differ only in digits: one template
    assert group.count == 5000
    assert group.first.line_number == 1 and group.last.line_number == 9999
    assert group.last.timestamp == "4999.000000"
    assert len(group.samples) == kernel_log._SAMPLES
    assert log.lines_scanned == 10000


def test_fast_path_agrees_with_the_slow_path(monkeypatch):
    text = ("".join(SPAM.format(t=i, line=100 + i % 3) for i in range(300)) + _storm(30)
            + "".join(SPAM.format(t=i, line=7) for i in range(300)))
    fast = parse_kernel_log(text)
    monkeypatch.setattr(kernel_log, "_QUIET_MAX", 0)  # nothing remembered: every line parsed in full
    monkeypatch.setattr(kernel_log, "_QUIET_NORM_MAX", 0)
    assert parse_kernel_log(text) == fast


def test_dense_and_sparse_scans_agree(monkeypatch):
    text = "".join(SPAM.format(t=i, line=1) + QUIET.format(t=i) * (i % 7) for i in range(3000)) + _storm(20)
    dense = parse_kernel_log(text)
    monkeypatch.setattr(kernel_log, "_DENSE_PROBE", 10 ** 9)  # never switch to the line-split scan
    assert parse_kernel_log(text) == dense


def test_number_of_templates_is_bounded(monkeypatch):
    monkeypatch.setattr(kernel_log, "_MAX_GROUPS", 4)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    text = "".join(f"[{i}.0] NVRM: GPU at PCI:0000:18:00: {w} failed\n" for i, w in enumerate(words))
    log = parse_kernel_log(text)
    assert len(log.groups) <= 5
    assert sum(g.count for g in log.groups) == len(words)
    assert any(g.template == "(other messages)" for g in log.groups)


def test_xid_peak_hour():
    burst = _storm(20, every_s=30)  # 20 within 10 minutes
    spread = "".join(XID13.format(t=100_000 + i * 7200, pid=1, gpc=0) for i in range(5))  # one per 2 hours
    (group,) = _groups(parse_kernel_log(burst + spread), "xid")
    assert group.count == 25
    assert (group.peak_hour, group.peak_from, group.peak_to) == (20, "10.000000", "580.000000")


def test_fallen_off_bus_repeats_fold_into_one_event():
    line = "[{t}.0] NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.\n"
    log = parse_kernel_log("".join(line.format(t=i) for i in range(2000)))
    (group,) = _groups(log, "fallen_off_bus")
    assert group.count == 1 and group.first.line_number == 1


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_file_stream_and_memory_scans_agree(tmp_path, workers, monkeypatch):
    monkeypatch.setattr(kernel_log, "_CHUNK", 4096)
    text = ("".join(SPAM.format(t=i, line=i % 5) + QUIET.format(t=i) for i in range(2000)) + _storm(40)
            + "".join(SPAM.format(t=i, line=9) for i in range(500)))
    path = tmp_path / "kern.log"
    path.write_text(text)
    expected = parse_kernel_log(text, str(path), workers=1)
    assert parse_kernel_log_file(path, workers=workers) == expected
    data = text.encode()
    streamed = parse_kernel_log_stream(io.BytesIO(data[100:]), str(path), head=data[:100])
    assert streamed == expected


def test_stream_reads_the_head_it_is_given_first():
    text = _storm(10)
    data = text.encode()
    log = parse_kernel_log_stream(io.BytesIO(data[1000:]), "x", head=data[:1000])
    assert sum(g.count for g in log.groups if g.kind == "xid") == 10
    assert log.bytes_scanned == len(data)
