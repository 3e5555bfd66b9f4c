"""The monitor's InfiniBand/RoCE port read (monitor/ports.py) and the correlation rows of scope same_port: over a
fake /sys/class/infiniband (tests/monitor/ib-sysfs, hand-written in the kernel's shape, see its README) whose
counters change between reads, a link flap (link_downed rising) pages once, steady counters stay quiet, a rise of
symbol errors is recorded and never paged, and an excluded device is never read."""

from __future__ import annotations

import shutil
from pathlib import Path

from monitor_fakes import T0, CapturingNotifier, Clock

from gpuhealth.host import LocalHost
from gpuhealth.monitor.correlate import Correlator, load_rows
from gpuhealth.monitor.daemon import Monitor
from gpuhealth.monitor.notify import Dispatcher
from gpuhealth.monitor.ports import EVERY_S, PortWatch
from gpuhealth.monitor.rules import RuleSet
from gpuhealth.monitor.sample import Sample
from gpuhealth.monitor.store import Store

TREE = Path(__file__).resolve().parent / "ib-sysfs"
PORT = "/sys/class/infiniband/{device}/ports/1/counters/{counter}"


class _Recording:
    """The host seam over the fake tree, keeping every path asked for."""

    def __init__(self, root: Path) -> None:
        self.inner = LocalHost(str(root))
        self.asked: list[str] = []

    def read(self, path: str):
        self.asked.append(path)
        return self.inner.read(path)

    def listdir(self, path: str):
        self.asked.append(path)
        return self.inner.listdir(path)


class _OneGpu:
    """A source giving one sample of GPU 0 per step, at the clock's time."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def poll(self) -> list[Sample]:
        return [Sample(self.clock.t, 0, temperature_c=50.0)]

    def close(self) -> None:
        pass


class _Node:
    def __init__(self, tmp_path: Path, exclude: tuple[str, ...] = ("mlx5_1",)) -> None:
        self.root = tmp_path / "root"
        shutil.copytree(TREE, self.root, ignore=shutil.ignore_patterns("README.md"))
        self.host = _Recording(self.root)
        self.clock = Clock(T0)
        self.got = CapturingNotifier()
        self.store = Store(tmp_path / "history.db")
        self.correlator = Correlator(load_rows(), every_s=10.0, store=self.store)
        self.ports = PortWatch(self.host, exclude)
        self.monitor = Monitor(_OneGpu(self.clock), RuleSet([]), Dispatcher([self.got]), None, interval=1.0,
                               clock=self.clock, correlator=self.correlator, ports=self.ports)

    def run(self, seconds: int) -> None:
        for _ in range(seconds):
            self.monitor.step()
            self.clock.t += 1

    def add(self, device: str, counter: str, amount: int) -> None:
        path = self.root / PORT.format(device=device, counter=counter).lstrip("/")
        path.write_text(f"{int(path.read_text()) + amount}\n")

    def correlations(self) -> list[tuple[str, int]]:
        return [(rule, shadow) for _t, rule, _gpu, shadow, _action, _message in self.store.correlations()]


def test_steady_counters_stay_quiet_and_are_read_once_a_minute(tmp_path):
    node = _Node(tmp_path)
    node.run(int(EVERY_S * 3) + 1)  # mlx5_0 starts with a link down and symbol errors: history, not a rise
    assert node.got.got == [] and node.correlator.recorded == 0
    assert node.ports.reads == 4  # at 0, 60, 120 and 180 s: never per sample


def test_a_link_flap_pages_once_as_a_warning_naming_the_port(tmp_path):
    node = _Node(tmp_path)
    node.run(30)
    node.add("mlx5_0", "link_downed", 1)
    node.run(int(EVERY_S) * 3)  # read at 60 s: the rise; the reads after it add nothing
    flaps = [a for a in node.got.got if a.rule == "correlate"]
    assert [(a.key, a.state, a.severity, a.action, a.gpu) for a in flaps] == [
        ("ib_link_flap/mlx5_0/1", "firing", "warning", "hardware_inspection", None)]
    assert "port mlx5_0/1: InfiniBand link downs (flaps) up 1 within 60 min" in flaps[0].message


def test_symbol_errors_rising_are_recorded_never_paged(tmp_path):
    node = _Node(tmp_path)
    node.run(30)
    node.add("mlx5_0", "symbol_error", 500)
    node.add("mlx5_0", "port_rcv_errors", 7)
    node.run(int(EVERY_S) + 10)
    assert node.got.got == []
    recorded = node.correlations()
    assert sorted(key for key, _shadow in recorded) == ["ib_port_rcv_errors/mlx5_0/1", "ib_symbol_errors/mlx5_0/1"]
    assert all(shadow for _key, shadow in recorded)


def test_an_excluded_device_is_never_read(tmp_path):
    node = _Node(tmp_path)
    node.run(30)
    node.add("mlx5_1", "link_downed", 3)  # it flaps, but it must not be read at all
    node.run(int(EVERY_S) * 2)
    assert node.got.got == [] and node.ports.reads == 3
    assert "/sys/class/infiniband" in node.host.asked
    assert not [path for path in node.host.asked if "mlx5_1" in path]
    assert [path for path in node.host.asked if "mlx5_0/ports/1/counters/link_downed" in path]


def test_a_host_without_infiniband_costs_one_listing(tmp_path):
    node = _Node(tmp_path)
    shutil.rmtree(node.root / "sys")
    node.run(int(EVERY_S) + 1)
    assert node.host.asked == ["/sys/class/infiniband"] * 2 and node.got.got == []


def test_the_monitor_reads_the_ports_of_a_live_host_with_the_check_exclude_list(tmp_path, monkeypatch):
    from gpuhealth.monitor import commands, daemon
    from gpuhealth.monitor.commands import _build

    monkeypatch.setattr(daemon, "open_source", lambda *args, **kwargs: _OneGpu(Clock(T0)))  # a live source
    monkeypatch.setattr(commands, "_boot_id", lambda source, replaying: "boot-a")  # not this machine's
    config = tmp_path / "monitor.toml"
    config.write_text('[check]\nib_exclude = ["mlx5_4"]\n\n[monitor]\nports_every = "2m"\n\n[notify]\nstderr = false\n')
    mon = _build(config, "1s", "0", tmp_path / "h.db", "nvml", None, 0.0)
    assert (mon.ports.exclude, mon.ports.every_s) == (frozenset({"mlx5_4"}), 120.0)
    mon.close()
    config.write_text('[monitor]\nports_every = "0"\n\n[notify]\nstderr = false\n')
    mon = _build(config, "1s", "0", tmp_path / "h.db", "nvml", None, 0.0)
    assert mon.ports is None  # off
    mon.close()
