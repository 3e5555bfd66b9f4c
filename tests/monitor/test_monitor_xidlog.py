"""The full check's kernel-log Xids feed the correlation rules (monitor/xidlog.py, Correlator.feed_log): on a host
where the /dev/kmsg follower is off, "Xid 31 twice on the same GPU" in the kernel log fires xid31_same_gpu; what NVML
delivered is not counted twice; a restart in the same boot does not feed the same lines again; a flood stays bounded.

The kernel log is in the `dmesg --time-format iso` form the full check reads (collect/system.py), its Xid texts the
documented forms of tests/data/correlate/xid_lines.txt (hand-written: see its README), dated around the fake clock.
"""

from __future__ import annotations

import datetime
import time

from monitor_fakes import T0, CapturingNotifier, Clock, FakeNvml

from gpuhealth.model import Gpu, NvmlReport, Report, Snapshot
from gpuhealth.monitor.correlate import Correlator, load_rows
from gpuhealth.monitor.daemon import CheckRunner, Monitor
from gpuhealth.monitor.notify import Dispatcher
from gpuhealth.monitor.rules import RuleSet
from gpuhealth.monitor.sources import NvmlSource
from gpuhealth.monitor.store import Store
from gpuhealth.monitor.xidlog import POSITION_KEY, XidLogFeed
from gpuhealth.parsers.kernel_log import XID_RECENT, parse_kernel_log

# FakeNvml's GPU 0 is at 0000:19:00.0, GPU 1 at 0000:1a:00.0
XID31 = ("NVRM: Xid (PCI:0000:{bus}:00): 31, pid=1563, name=python, Ch 00000008, intr 00000000. MMU Fault: "
         "ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3c_5e000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ")
XID154 = ("NVRM: Xid (PCI:0000:{bus}:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
          "(Node Reboot Required)")
BUS = {0: "19", 1: "1a"}


def _line(t: float, template: str, gpu: int) -> str:
    stamp = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S,%f+00:00")
    return f"{stamp} {template.format(bus=BUS[gpu])}"


def _report(lines: list[str]) -> Report:
    log = parse_kernel_log("\n".join(lines) + "\n", "dmesg --time-format iso")
    gpus = (Gpu(index=0, pci_address="0000:19:00.0"), Gpu(index=1, pci_address="0000:1a:00.0"))
    return Report(snapshot=Snapshot(nvml=NvmlReport(ok=True, gpus=gpus), kernel_log=log))


class _Log:
    """The kernel log the full check reads, as the test leaves it."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self) -> Report:
        return _report(self.lines)


def _monitor(clock: Clock, store: Store | None, log: _Log, boot: str = "boot-1", nvml: FakeNvml | None = None):
    """A monitor on the fake NVML with the follower off (no KmsgSource), its full check reading ``log``."""
    nvml = nvml or FakeNvml(2)
    got = CapturingNotifier()
    checks = CheckRunner(600, run=log, log=lambda _: None, xidlog=XidLogFeed(boot, store))
    correlator = Correlator(load_rows(), every_s=1.0, store=store)
    monitor = Monitor(NvmlSource(nvml, clock=clock), RuleSet([]), Dispatcher([got]), store, clock=clock,
                      checks=checks, correlator=correlator, log=lambda _: None)
    return monitor, nvml, got


def _steps(monitor: Monitor, clock: Clock, n: int) -> None:
    for _ in range(n):
        clock.t += 1.0
        monitor.step()
        thread = monitor.checks._thread
        if thread is not None:
            thread.join(30)  # the check's thread: its result is taken at the next step


def _firing(got) -> list[tuple[str, int | None]]:
    return [(a.key, a.gpu) for a in got.got if a.rule == "correlate" and a.state == "firing"]


def _xids(monitor: Monitor) -> list[tuple[int, int]]:
    return sorted((o.gpu, o.xid) for o in monitor.correlator._occurrences if o.what == "xid")


def test_xid31_twice_on_one_gpu_in_the_full_checks_log_fires_xid31_same_gpu(tmp_path):
    log = _Log()
    log.lines = [_line(T0 - 1200, XID31, 0), _line(T0 - 600, XID31, 0)]
    clock = Clock(T0)
    monitor, _nvml, got = _monitor(clock, Store(tmp_path / "h.db"), log)
    _steps(monitor, clock, 4)
    monitor.close()
    assert _xids(monitor) == [(0, 31), (0, 31)]
    assert _firing(got) == [("xid31_same_gpu", 0)]


def test_near_miss_xid31_once_on_each_of_two_gpus_is_not_the_same_gpu_row(tmp_path):
    log = _Log()
    log.lines = [_line(T0 - 1200, XID31, 0), _line(T0 - 600, XID31, 1)]
    clock = Clock(T0)
    monitor, _nvml, got = _monitor(clock, Store(tmp_path / "h.db"), log)
    _steps(monitor, clock, 4)
    monitor.close()
    assert _xids(monitor) == [(0, 31), (1, 31)]
    assert ("xid31_same_gpu", 0) not in _firing(got)


def test_xid154_text_from_the_full_check_fires_the_recovery_row(tmp_path):
    log = _Log()
    log.lines = [_line(T0 - 60, XID154, 1)]
    clock = Clock(T0)
    monitor, _nvml, got = _monitor(clock, Store(tmp_path / "h.db"), log)
    _steps(monitor, clock, 4)
    monitor.close()
    assert ("xid154_node_reboot", 1) in _firing(got)


def test_xids_nvml_delivered_are_not_counted_twice(tmp_path):
    log = _Log()
    clock = Clock(T0)
    monitor, nvml, got = _monitor(clock, Store(tmp_path / "h.db"), log)
    monitor.checks._due = float("inf")  # the full check runs once both Xids are in, below
    times = []
    for _ in range(2):
        nvml.xids.append((0, 31))
        _steps(monitor, clock, 1)
        times.append(clock.t)
        clock.t += 600
    assert _xids(monitor) == [(0, 31), (0, 31)]
    # the kernel's lines of the same two Xids, dated 2 s off NVML's poll, and one more, new
    log.lines = [_line(times[0] - 2, XID31, 0), _line(times[1] + 1, XID31, 0), _line(times[1] + 300, XID31, 0)]
    monitor.checks._due = 0.0
    _steps(monitor, clock, 4)
    monitor.close()
    assert _xids(monitor) == [(0, 31)] * 3
    assert _firing(got) == [("xid31_same_gpu", 0)]  # fired on NVML's two, not again
    # no row decodes an Xid 31's text, so none is kept (a code-only Xid taking its line's decoded part: test_monitor
    # _correlate.py, test_a_code_only_xid_takes_the_decoded_part_of_its_logged_line)
    assert [o.text for o in monitor.correlator._occurrences if o.what == "xid"] == ["", "", ""]


def test_a_restart_in_the_same_boot_does_not_feed_the_same_lines_again_and_a_new_boot_does(tmp_path):
    log = _Log()
    log.lines = [_line(T0 - 1200, XID31, 0), _line(T0 - 600, XID31, 0)]
    clock, path = Clock(T0), tmp_path / "h.db"
    monitor, _nvml, got = _monitor(clock, Store(path), log)
    _steps(monitor, clock, 4)
    monitor.close()
    assert _firing(got) == [("xid31_same_gpu", 0)]

    monitor, _nvml, got = _monitor(clock, Store(path), log)  # restarted, same boot, same log
    _steps(monitor, clock, 4)
    assert _xids(monitor) == [] and _firing(got) == []
    log.lines.append(_line(clock.t - 1, XID31, 1))  # a line logged since: fed
    monitor.checks._due = 0.0
    _steps(monitor, clock, 4)
    monitor.close()
    assert _xids(monitor) == [(1, 31)]

    monitor, _nvml, got = _monitor(clock, Store(path), log, boot="boot-2")  # a new boot: its log is its own
    _steps(monitor, clock, 4)
    monitor.close()
    assert len(_xids(monitor)) == 3


def test_with_the_follower_on_only_lines_before_it_began_are_fed_and_a_restart_keeps_that_moment(tmp_path):
    store = Store(tmp_path / "h.db")
    report = _report([_line(T0 - 100, XID31, 0), _line(T0 + 10, XID31, 0)])
    feed = XidLogFeed("boot-1", store, follower_since=T0)
    assert [(t, gpu, xid) for t, gpu, xid, _ in feed.take(report.snapshot)] == [(T0 - 100, 0, 31)]
    again = XidLogFeed("boot-1", store, follower_since=T0 + 50)  # resumed: it read every line since T0 itself
    assert again.until == T0 and again.take(report.snapshot) == []
    assert store.meta(POSITION_KEY).startswith("boot-1 ")


def test_lines_without_a_wall_clock_time_or_a_known_gpu_are_not_fed():
    lines = ["[ 1234.567890] " + XID31.format(bus="19"), _line(T0, XID31, 0).replace("0000:19:00", "0000:3b:00")]
    assert XidLogFeed("boot-1").take(_report(lines).snapshot) == []


def test_a_flood_of_100k_xid_lines_keeps_a_bounded_list_and_feeds_fast():
    base = T0 - 20_000
    lines = [_line(base + i * 0.1, XID31 if i % 3 else XID154, i % 2) for i in range(100_000)]
    started = time.process_time()
    report = _report(lines)
    log = report.snapshot.kernel_log
    assert sum(g.count for g in log.groups if g.kind == "xid") == 100_000  # every line counted...
    assert len(log.xids) == 4 * XID_RECENT  # ...each kept with its time for the last few per GPU and code
    assert [e.timestamp for e in log.xids][-1] == lines[-1].split(" ")[0]
    correlator = Correlator(load_rows(), every_s=1.0)
    feed = XidLogFeed("boot-1")
    fed = feed.take(report.snapshot)
    assert correlator.feed_log(fed) == 4 * XID_RECENT
    correlator.feed([])
    elapsed = time.process_time() - started
    assert elapsed < 30, elapsed  # the parse dominates (~2 s here); the feed is over 64 occurrences


def test_a_full_checks_lines_sort_in_among_the_delivered_ones_so_old_ones_still_expire():
    correlator = Correlator(load_rows(), every_s=1.0)
    from gpuhealth.monitor.sample import XidEvent

    correlator.feed([XidEvent(T0, 0, 79)])
    correlator.feed_log([(T0 - 90_000, 0, 31, ""), (T0 - 10, 1, 31, "")])
    assert [o.t for o in correlator._occurrences] == [T0 - 90_000, T0 - 10, T0]
    correlator.step(T0)
    assert T0 - 90_000 not in [o.t for o in correlator._occurrences]  # older than every window: dropped



def test_the_monitor_command_gives_its_full_check_the_feed(tmp_path, monkeypatch):
    """`gpuhealth monitor` (commands._build) on a live source with the full check on: the check's Xids are fed; with
    the follower off nothing limits them to before it."""
    from gpuhealth.monitor import commands, daemon

    monkeypatch.setattr(daemon, "open_source", lambda *args, **kwargs: NvmlSource(FakeNvml(2)))
    monkeypatch.setattr(commands, "_boot_id", lambda source, replaying: "boot-9")
    config = tmp_path / "config.toml"
    config.write_text("[monitor]\nkernel_log = false\n")
    monitor = commands._build(config, "1s", "10m", tmp_path / "h.db", "nvml", None, 1.0)
    try:
        feed = monitor.checks.xidlog
        assert isinstance(feed, XidLogFeed) and feed.boot == "boot-9" and feed.until is None
        assert feed.store is monitor.store
    finally:
        monitor.close()
