"""The live kernel-log follower (monitor/kmsg.py): each Xid gets its kernel line's text, so the correlation rows
that decode it fire on a live host.

/dev/kmsg is faked by a file under a test root, read through the host seam (LocalHost(root).kmsg). The records are
in the real /dev/kmsg form "prio,seq,usec,flags;text": the non-Xid ones are gpud's recorded /dev/kmsg
(tests/data/corpus/gpud/kmsg__kmsg.1.log, its SOURCE.md), the Xid texts are the documented forms of
tests/data/correlate/xid_lines.txt (hand-written: see its README), given a record prefix here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_fakes import T0, CapturingNotifier, Clock, FakeNvml

from gpuhealth.host import LocalHost
from gpuhealth.monitor.correlate import Correlator, load_rows
from gpuhealth.monitor.daemon import Monitor
from gpuhealth.monitor.kmsg import MATCH_S, MAX_LINES, POSITION_KEY, KmsgFollower, KmsgSource, follow
from gpuhealth.monitor.notify import Dispatcher
from gpuhealth.monitor.rules import RuleSet
from gpuhealth.monitor.sample import XidEvent
from gpuhealth.monitor.sources import NvmlSource, TraceWriter
from gpuhealth.monitor.store import Store

ROOT = Path(__file__).resolve().parents[2]
CORPUS_KMSG = ROOT / "tests" / "data" / "corpus" / "gpud" / "kmsg__kmsg.1.log"
# FakeNvml's GPU 0 is at 0000:19:00.0, GPU 1 at 0000:1a:00.0
XID154 = ("NVRM: Xid (PCI:0000:1a:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
          "(Node Reboot Required)")
XID74_BIT20 = ("NVRM: Xid (PCI:0000:19:00): 74, pid=2311, name=python, NVLink: fatal error detected on link "
               "5(0x100000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)")


class FakeKmsg:
    """A /dev/kmsg under ``root``: the corpus records already in it, new records appended with the next seq."""

    def __init__(self, root: Path) -> None:
        (root / "dev").mkdir(parents=True, exist_ok=True)
        self.path = root / "dev" / "kmsg"
        self.path.write_bytes(CORPUS_KMSG.read_bytes())
        last = CORPUS_KMSG.read_text().splitlines()[-1]
        self.seq = int(last.split(",")[1])

    def record(self, text: str) -> bytes:
        self.seq += 1
        return f"4,{self.seq},{240000000 + self.seq},-;{text}\n".encode()

    def add(self, *texts: str) -> None:
        with self.path.open("ab") as handle:
            handle.write(b"".join(self.record(text) for text in texts))

    def add_bytes(self, data: bytes) -> None:
        with self.path.open("ab") as handle:
            handle.write(data)


def _monitor(tmp_path: Path, clock: Clock, store: Store, boot: str = "boot-1", record: Path | None = None):
    nvml = FakeNvml(2)
    host = LocalHost(str(tmp_path / "root"))
    follower = KmsgFollower(host.kmsg(), boot, store, clock=clock)
    source = KmsgSource(NvmlSource(nvml, clock=clock), follower, clock=clock)
    got = CapturingNotifier()
    recorder = TraceWriter(record, "test", "kmsg test", boot) if record is not None else None
    monitor = Monitor(source, RuleSet([]), Dispatcher([got]), store, recorder=recorder, clock=clock,
                      correlator=Correlator(load_rows(), every_s=1.0, store=store))
    return monitor, nvml, got


def _steps(monitor: Monitor, clock: Clock, n: int) -> list:
    events = []
    for _ in range(n):
        clock.t += 1.0
        events += monitor.step()
    return events


def _firing(got) -> list[str]:
    return [a.key for a in got.got if a.rule == "correlate" and a.state == "firing"]


def test_a_live_xid154_gets_its_text_and_its_recovery_row_fires_and_is_recorded(tmp_path):
    kmsg = FakeKmsg(tmp_path / "root")
    kmsg.add(XID154.replace("1a:00", "19:00"))  # already in the log at start: the full check's, not the follower's
    clock, store = Clock(T0), Store(tmp_path / "h.db")
    trace = tmp_path / "trace.jsonl"
    monitor, nvml, got = _monitor(tmp_path, clock, store, record=trace)
    _steps(monitor, clock, 2)
    nvml.xids.append((1, 154))
    kmsg.add("IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready", XID154)
    events = _steps(monitor, clock, 3)
    monitor.close()
    xids = [e for e in events if isinstance(e, XidEvent)]
    assert [(e.gpu, e.xid) for e in xids] == [(1, 154)]  # one event: the NVML one, given its line's text
    assert xids[0].text == "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert "xid154_node_reboot" in _firing(got)
    assert [a.gpu for a in got.got if a.key == "xid154_node_reboot"] == [1]
    recorded = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    assert [(r["gpu"], r["xid"], r["text"]) for r in recorded if r.get("kind") == "xid"] == [(1, 154, xids[0].text)]


def test_a_kernel_xid74_without_an_nvml_event_becomes_one_and_its_register_row_fires(tmp_path):
    kmsg = FakeKmsg(tmp_path / "root")
    clock, store = Clock(T0), Store(tmp_path / "h.db")
    monitor, _nvml, got = _monitor(tmp_path, clock, store)
    _steps(monitor, clock, 2)
    kmsg.add(XID74_BIT20)
    first = _steps(monitor, clock, 1)
    assert not [e for e in first if isinstance(e, XidEvent)]  # it waits for NVML's event a few seconds
    events = _steps(monitor, clock, int(MATCH_S) + 2)
    monitor.close()
    xids = [e for e in events if isinstance(e, XidEvent)]
    assert [(e.gpu, e.xid) for e in xids] == [(0, 74)]
    assert "link 5(0x100000" in xids[0].text
    assert "xid74_reg0_solo" in _firing(got)


def test_an_nvml_xid_without_a_kernel_line_goes_on_with_its_code_only(tmp_path):
    FakeKmsg(tmp_path / "root")
    clock, store = Clock(T0), Store(tmp_path / "h.db")
    monitor, nvml, got = _monitor(tmp_path, clock, store)
    _steps(monitor, clock, 1)
    nvml.xids.append((0, 79))
    events = _steps(monitor, clock, int(MATCH_S) + 2)
    monitor.close()
    assert [(e.gpu, e.xid, e.text) for e in events if isinstance(e, XidEvent)] == [(0, 79, None)]


def test_a_restart_in_the_same_boot_goes_on_after_the_last_record_read(tmp_path):
    kmsg = FakeKmsg(tmp_path / "root")
    host = LocalHost(str(tmp_path / "root"))
    store = Store(tmp_path / "h.db")
    first = KmsgFollower(host.kmsg(), "boot-1", store)
    kmsg.add(XID154)
    assert [e.xid for e in first.poll()] == [154]
    first.close()
    assert store.meta(POSITION_KEY) == f"boot-1 {kmsg.seq}"
    kmsg.add(XID74_BIT20)  # printed while the monitor was down
    again = KmsgFollower(host.kmsg(), "boot-1", store)
    assert [e.xid for e in again.poll()] == [74]  # not 154 again, and 74 not lost
    again.close()
    kmsg.add(XID154)
    other_boot = KmsgFollower(host.kmsg(), "boot-2", store)  # a position of another boot means nothing here
    assert other_boot.poll() == []
    kmsg.add(XID74_BIT20)
    assert [e.xid for e in other_boot.poll()] == [74]
    other_boot.close()


def test_a_record_cut_at_the_end_of_a_read_waits_for_its_rest(tmp_path):
    kmsg = FakeKmsg(tmp_path / "root")
    follower = KmsgFollower(LocalHost(str(tmp_path / "root")).kmsg())
    whole = kmsg.record(XID154)
    kmsg.add_bytes(whole[:40])
    assert follower.poll() == []
    kmsg.add_bytes(whole[40:])
    got = follower.poll()
    assert [(e.xid, e.pci_address) for e in got] == [(154, "0000:1a:00.0")]
    follower.close()


def test_a_flood_is_read_a_bounded_amount_per_step_and_nothing_is_lost(tmp_path):
    kmsg = FakeKmsg(tmp_path / "root")
    reader = LocalHost(str(tmp_path / "root")).kmsg()
    follower = KmsgFollower(reader)
    total = 3 * MAX_LINES + 10
    kmsg.add(*[XID74_BIT20] * total)
    kmsg.add_bytes(b"4,1,1,-;" + b"x" * 100_000)  # one line longer than any record, never ended
    counts = []
    for _ in range(8):
        counts.append(len(follower.poll()))
    assert max(counts) <= MAX_LINES
    assert sum(counts) == total
    assert len(reader._partial) <= 16 * 1024 and reader.cut >= 1  # the endless line is dropped, not kept
    follower.close()


def test_no_kernel_log_leaves_the_follower_off_with_one_line_and_the_monitor_running(tmp_path):
    said: list[str] = []
    host = LocalHost(str(tmp_path / "empty-root"))
    nvml = FakeNvml(1)
    source = follow(NvmlSource(nvml), "boot-1", None, said.append, host=host)
    assert isinstance(source, NvmlSource)  # not wrapped
    assert len(said) == 1 and "/dev/kmsg: not present" in said[0]
    monitor = Monitor(source, RuleSet([]), Dispatcher([]))
    nvml.xids.append((0, 13))
    assert [e.xid for e in monitor.step() if isinstance(e, XidEvent)] == [13]
    monitor.close()


def test_the_start_line_says_the_kernel_log_is_followed_and_a_bad_setting_is_refused(tmp_path):
    from gpuhealth.monitor.commands import CannotRun, _build, describe

    FakeKmsg(tmp_path / "root")
    source = follow(NvmlSource(FakeNvml(1)), None, host=LocalHost(str(tmp_path / "root")))
    monitor = Monitor(source, RuleSet([]), Dispatcher([]))
    assert describe(monitor).startswith("source NVML and the kernel log, history off")
    monitor.close()
    config = tmp_path / "bad.toml"
    config.write_text('[monitor]\nkernel_log = "yes"\n')
    with pytest.raises(CannotRun, match="monitor.kernel_log must be true or false"):
        _build(config, "1s", "0", None, "replay:/nonexistent", None, 0.0, use_store=False)


def test_records_overwritten_before_they_were_read_are_said_once(tmp_path):
    kmsg = FakeKmsg(tmp_path / "root")
    host = LocalHost(str(tmp_path / "root"))
    store = Store(tmp_path / "h.db")
    said: list[str] = []
    first = KmsgFollower(host.kmsg(), "boot-1", store, said.append)
    kmsg.add(XID154)
    first.poll()
    first.close()
    kmsg.seq += 7  # seven records the ring buffer dropped while the monitor was down
    kmsg.add(XID74_BIT20)
    again = KmsgFollower(host.kmsg(), "boot-1", store, said.append)
    assert [e.xid for e in again.poll()] == [74]
    assert len(said) == 1 and said[0].startswith("7 kernel log record(s) were overwritten")
    kmsg.add(XID74_BIT20)
    again.poll()
    assert len(said) == 1  # no gap, nothing more said
    again.close()
