"""GPUs that vanished stay a problem (check --gpu-state), and --timeout bounds every command, the probe included."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from gpuhealth import gpustate
from gpuhealth.bundle import RecordingHost
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.exits import CannotRun
from gpuhealth.parsers.cuda import TORCH_PROBE_SCRIPT
from hostcases import FakeHost, load_spec


def bundle_of(case: str, folder) -> str:
    recorder = RecordingHost(FakeHost(load_spec(case)), folder / case, hostname="gpu-node-17")
    collect(recorder)  # captured as the test host says: 2026-11-30T12:00:00+0000
    recorder.finish()
    return str(folder / case)


def nhc(bundle: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", "--from", bundle, "--format", "nhc", *args])
    return result.exit_code, result.output


@pytest.fixture(autouse=True)
def _default_threshold(monkeypatch):
    monkeypatch.delenv("GPUHEALTH_FAIL_ON", raising=False)


def test_a_node_whose_gpus_vanished_stays_drained(tmp_path):
    healthy, empty = bundle_of("h100x8-healthy", tmp_path), bundle_of("no-gpu", tmp_path)
    state = tmp_path / "state" / "gpus-seen"
    # no memory: a machine without GPUs is the truth, nothing drains
    assert nhc(empty, "--gpu-state", str(state)) == (0, "")
    assert not state.exists()  # no GPU seen: nothing remembered
    assert nhc(healthy, "--gpu-state", str(state)) == (0, "")
    assert json.loads(state.read_text())["gpus"] == 8
    code, line = nhc(empty, "--gpu-state", str(state))
    assert code == 2, line
    assert line.startswith("gpuhealth: GH101 no-nvidia-gpu impact=node_unusable action=reboot: No NVIDIA GPU on the "
                           "PCI bus, where 8 were seen at 2026-11-30T12:00:00+0000"), line
    assert json.loads(state.read_text())["gpus"] == 8  # a bus without GPUs keeps the memory: it stays drained
    assert nhc(empty, "--gpu-state", str(state))[0] == 2
    assert nhc(empty) == (0, "")  # the same evidence, no memory asked for


def test_the_configured_count_says_it_too(tmp_path):
    code, line = nhc(bundle_of("no-gpu", tmp_path), "--gpu-count", "4")
    assert code == 2 and "GH101 no-nvidia-gpu impact=node_unusable" in line and "expects 4" in line, line


def test_a_state_file_gpuhealth_did_not_write_is_refused(tmp_path):
    target = tmp_path / "target"
    target.write_text('{"gpus": 8}')
    link = tmp_path / "link"
    os.symlink(target, link)
    with pytest.raises(CannotRun, match="symbolic link"):
        gpustate.read(link)
    with pytest.raises(CannotRun, match="symbolic link"):
        gpustate.remember(link, 8, "t")
    assert target.read_text() == '{"gpus": 8}'
    garbage = tmp_path / "garbage"
    garbage.write_text("eight")
    with pytest.raises(CannotRun, match="not a gpuhealth GPU state file"):
        gpustate.read(garbage)
    result = CliRunner().invoke(main, ["check", "--from", bundle_of("no-gpu", tmp_path), "--format", "nhc",
                                       "--gpu-state", str(garbage)])
    assert result.exit_code == 3 and "garbage: not a gpuhealth GPU state file" in result.output
    assert gpustate.read(tmp_path / "absent") is None


class TimedHost(FakeHost):
    """A test host that notes the deadline each command was given."""

    def __init__(self, spec):
        super().__init__(spec)
        self.deadlines: dict[str, float] = {}

    def run(self, argv, timeout=10.0):
        self.deadlines["torch" if TORCH_PROBE_SCRIPT in argv else argv[0]] = timeout
        return super().run(argv, timeout)


def test_timeout_bounds_every_command_the_probe_included():
    host = TimedHost(load_spec("h100x8-healthy"))
    collect(host, 10.0)
    assert host.deadlines["torch"] == 60.0  # not given: the probe's own, the first CUDA call is slow
    host = TimedHost(load_spec("h100x8-healthy"))
    collect(host, 5.0, probe_timeout=5.0)
    assert host.deadlines["torch"] == 5.0 and max(host.deadlines.values()) == 5.0
    host = TimedHost(load_spec("h100x8-healthy"))
    collect(host, 5.0, frameworks=False)
    assert "torch" not in host.deadlines


@pytest.mark.parametrize(("vendor", "product", "family", "drains"), [
    ("NVIDIA", "NVIDIA DGX-2", "DGX", True),  # as lablup/backend.ai#113 quotes a DGX-2's DMI
    ("NVIDIA", "", "DGX", True),
    ("Dell Inc.", "PowerEdge R720xd", "", False),  # a server that may or may not hold GPUs: no memory, no drain
    (None, None, None, False),  # no DMI at all (many ARM boards)
])
def test_the_machines_firmware_name_says_it_had_gpus(tmp_path, vendor, product, family, drains):
    """No count configured, no memory: a machine the firmware names as built with NVIDIA GPUs (knowledge/
    gpu_servers.csv) and none on the bus is a node whose GPUs left it. Hand-written DMI values on the no-gpu host."""
    spec = load_spec("no-gpu")
    spec.setdefault("files", {}).update({f"/sys/class/dmi/id/{name}": f"{value}\n" for name, value in (
        ("sys_vendor", vendor), ("product_name", product), ("product_family", family)) if value is not None})
    recorder = RecordingHost(FakeHost(spec), tmp_path / "bundle", hostname="n1")
    collect(recorder)
    recorder.finish()
    code, line = nhc(str(tmp_path / "bundle"))
    if drains:
        assert code == 2 and line.startswith("gpuhealth: GH101 no-nvidia-gpu impact=node_unusable"), line
        assert "this machine is an NVIDIA DGX" in line, line
    else:
        assert (code, line) == (0, "")
