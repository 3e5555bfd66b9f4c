"""Capture on failure (monitor/capture.py): the first critical page of an incident writes one redacted snapshot
bundle that `check --from` reads back to the same findings; later critical pages in the incident name that bundle;
warnings capture nothing; old bundles go past the retention. The captured host here is the shipped example bundle
(examples/h100x8-xid-ecc.tar.gz, GENERATED: synthetic values) read through BundleHost: what a capture of a live
host records, replayed."""

from __future__ import annotations

import json
import tarfile

from click.testing import CliRunner
from monitor_fakes import CapturingNotifier, samples

from conftest import REPO
from gpuhealth.cli import main
from gpuhealth.monitor.capture import Capture
from gpuhealth.monitor.config import load_config
from gpuhealth.monitor.daemon import Monitor
from gpuhealth.monitor.notify import Dispatcher, to_json
from gpuhealth.monitor.rules import Alert, RuleSet
from gpuhealth.monitor.sample import XidEvent
from gpuhealth.monitor.sources import ReplaySource, write_trace

EXAMPLE = REPO / "examples" / "h100x8-xid-ecc.tar.gz"
T0 = 1_750_000_000.0


def _example_host():
    from gpuhealth.bundle import BundleHost

    return BundleHost(EXAMPLE)


def _findings(source) -> set[tuple[str, str]]:
    result = CliRunner().invoke(main, ["check", "--from", str(source), "--format", "json"])
    return {(f["code"], f["severity"]) for f in json.loads(result.output)["findings"]}


def test_a_critical_fault_in_a_replay_writes_one_bundle_that_check_from_reads_back(tmp_path):
    trace = tmp_path / "xid.trace"
    events = [e for gpu in (0, 1) for e in samples(gpu, 20, t0=T0, temperature_c=50.0)]
    events += [XidEvent(T0 + 3, 0, 79), XidEvent(T0 + 5, 1, 79), XidEvent(T0 + 6, 1, 31)]  # 2 critical, 1 warning
    write_trace(trace, sorted(events, key=lambda e: e.t), "tests/monitor/test_monitor_capture.py", "GENERATED")
    page = CapturingNotifier()
    dispatcher = Dispatcher([page])
    dispatcher.capture = capture = Capture(tmp_path / "captures", host=_example_host)
    monitor = Monitor(ReplaySource(trace, speed=0), RuleSet.from_config(load_config()["rules"]), dispatcher,
                      interval=0.01)
    while not monitor.source.exhausted:
        monitor.step()
    capture.wait(120)
    bundles = sorted((tmp_path / "captures").iterdir())
    assert len(bundles) == 1 and capture.written == bundles
    critical = [a for a in page.got if a.severity == "critical" and a.state == "firing"]
    assert len(critical) == 2 and {a.capture for a in critical} == {str(bundles[0])}
    assert f"gpuhealth check --from {bundles[0]}" in critical[0].message
    assert to_json(critical[0])["capture"] == str(bundles[0])
    assert not [a.capture for a in page.got if a.severity != "critical" and a.capture]  # a warning carries none
    assert _findings(bundles[0]) == _findings(EXAMPLE)  # the captured evidence gives the same findings
    # host identifiers redacted (the example's host is gpu-node-17), as `snapshot --redact-host` does
    assert not [p for p in bundles[0].rglob("*") if p.is_file() and b"gpu-node-17" in p.read_bytes()]
    with tarfile.open(EXAMPLE) as original:  # which the original names: the assertion above could fail
        manifest = next(m for m in original if m.name.endswith("manifest.json"))
        assert b"gpu-node-17" in original.extractfile(manifest).read()


def test_one_capture_per_period_and_the_oldest_bundles_go(tmp_path):
    now = [T0]
    capture = Capture(tmp_path / "captures", every_s=3600, keep=2, host=_example_host, clock=lambda: now[0])
    alert = Alert("xid", 0, "critical", "firing", "GPU 0 Xid 79", T0, "79")
    first = capture.on_page(alert)
    assert capture.on_page(alert) == first  # within the hour: the same incident
    capture.wait(120)
    for hours in (2, 4):
        now[0] = T0 + hours * 3600
        assert capture.on_page(alert) != first
        capture.wait(120)
    kept = sorted(p.name for p in (tmp_path / "captures").iterdir())
    assert len(kept) == 2 and first.name not in kept  # the oldest went
    off = Capture(tmp_path / "off", every_s=0, host=_example_host)
    assert off.on_page(alert) is None and not (tmp_path / "off").exists()
