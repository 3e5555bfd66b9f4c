"""What keeps `check --from` and `analyze` quick to start (README, Performance; bench/check_from_bundle.py).

A replayed bundle is probed without threads and without the live host's machinery; the bundle's cheaper
containment check still refuses every way out of the bundle; and the heavy modules a command does not
use stay unimported (a regression here is a slower start-up, which no other test would notice).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from gpuhealth.bundle import BundleHost, RecordingHost, extract_archive
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec

EXAMPLE = REPO / "examples" / "h100x8-xid-ecc.tar.gz"


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped 8-GPU example bundle, unpacked: `check --from DIR` reads no archive."""
    where = tmp_path_factory.mktemp("example")
    extract_archive(EXAMPLE, where)
    found = next(p.parent for p in where.rglob("manifest.json"))
    return found


def _modules_after(argv: list[str]) -> set[str]:
    code = ("import sys, json\n"
            "from gpuhealth.cli import main\n"
            f"sys.argv = {['gpuhealth', *argv]!r}\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stderr.rsplit("MODULES ", 1)[1]))


# Modules a replay or an analysis of files needs none of: the live host's (processes, sockets), thread
# pools, archives, XML (these bundles hold no XML), pickling (the parallel scanner of huge logs), and the
# resource loader (the knowledge tables are read as files), hashing (OpenSSL: a long command's key is read
# from the manifest) and gzip (none of this evidence is compressed).
NOT_NEEDED = {"subprocess", "socket", "selectors", "concurrent.futures", "tarfile", "tempfile", "zipfile",
              "hashlib", "_hashlib", "gzip",
              "importlib.resources", "xml.etree.ElementTree", "pickle", "rich", "pynvml", "torch",
              "gpuhealth.monitor.commands", "gpuhealth.web.commands", "gpuhealth.web.fleet"}


@pytest.fixture(scope="module")
def framework() -> set[str]:
    """What importing click loads (on Python 3.10 that includes subprocess): not ours to trim."""
    code = "import sys, json, click; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(out.stdout))


def test_check_from_a_bundle_directory_imports_only_what_it_uses(bundle_dir: Path, framework: set[str]):
    loaded = _modules_after(["check", "--from", str(bundle_dir), "--format", "json"])
    assert "gpuhealth.checks.engine" in loaded and "gpuhealth.bundle" in loaded  # it did run
    extra = (NOT_NEEDED & loaded) - framework
    assert not extra, sorted(extra)


def test_analyze_of_files_imports_only_what_it_uses(bundle_dir: Path, framework: set[str]):
    smi = next(p for p in (bundle_dir / "commands").glob("nvidia-smi_-q.stdout"))
    dmesg = next((bundle_dir / "commands").glob("dmesg*.stdout"))
    loaded = _modules_after(["analyze", str(smi), str(dmesg), "--format", "json"])
    assert "gpuhealth.analyze" in loaded
    extra = (NOT_NEEDED & loaded) - framework
    assert not extra, sorted(extra)


def test_a_bundle_is_probed_without_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    import threading

    started: list[str] = []
    original = threading.Thread.start

    def counting(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", counting)
    snapshot = collect(BundleHost(tmp_path / "b"), origin="bundle")
    assert snapshot.gpus and not started, started


def test_a_linked_directory_in_a_bundle_cannot_lead_out(tmp_path: Path):
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "modules").write_text("secret 1 0 - Live 0x0\n")
    proc = tmp_path / "b" / "root" / "proc"
    moved = tmp_path / "proc-moved"
    proc.rename(moved)
    proc.symlink_to(outside, target_is_directory=True)  # root/proc -> a directory outside the bundle
    host = BundleHost(tmp_path / "b")
    content = host.read("/proc/modules")
    assert content.data is None and "leaves the bundle" in (content.error or "")
    missing = host.read("/proc/no/such/file")
    assert missing.data is None and missing.error  # a missing file below the link: refused or not captured


def test_a_link_to_a_sibling_whose_name_extends_the_bundles_cannot_lead_out(tmp_path: Path):
    """The containment check compares path strings: "/x/b-other" is not below "/x/b"."""
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    sibling = tmp_path / "b-other"
    sibling.mkdir()
    (sibling / "modules").write_text("secret 1 0 - Live 0x0\n")
    modules = tmp_path / "b" / "root" / "proc" / "modules"
    modules.unlink()
    modules.symlink_to(sibling / "modules")
    (tmp_path / "b" / "commands" / "nvidia-smi_-q.stdout").unlink()
    (tmp_path / "b" / "commands" / "nvidia-smi_-q.stdout").symlink_to(sibling / "modules")
    host = BundleHost(tmp_path / "b")
    content = host.read("/proc/modules")
    assert content.data is None and "leaves the bundle" in (content.error or "")
    assert host.run(["nvidia-smi", "-q"]).stdout == ""
    assert host.stdout_file(["nvidia-smi", "-q"])[1] is None


def test_reads_inside_the_bundle_still_work_and_missing_files_say_so(tmp_path: Path):
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    host = BundleHost(tmp_path / "b")
    assert host.read("/proc/modules").data
    assert host.read("/etc/never-captured").error == "not captured in this bundle"
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["commands"]


def test_a_long_command_replays_under_its_recorded_key(bundle_dir: Path):
    """A long command line's key ends in a hash; a replay takes it from the manifest (no hashlib) and
    must find exactly what command_key finds."""
    from gpuhealth.bundle import command_key

    host = BundleHost(bundle_dir)
    long_ones = [c for c in host.manifest["commands"] if len(" ".join(c["argv"])) > 80]
    assert long_ones  # the example holds two: dpkg-query and the python3 probe
    for entry in long_ones:
        assert host._key(entry["argv"]) == command_key(entry["argv"]) == entry["key"]
        run = host.run(entry["argv"])
        stdout = bundle_dir / "commands" / f"{entry['key']}.stdout"
        assert run.stdout == (stdout.read_text(errors="replace") if stdout.exists() else "")
    # A recorded key of the wrong form is not trusted: the key is computed.
    entry = long_ones[0]
    host._recorded_keys[tuple(entry["argv"])] = "elsewhere"
    assert host._key(entry["argv"]) == command_key(entry["argv"])
    assert host._key(["nvidia-smi", "-q"]) == command_key(["nvidia-smi", "-q"]) == "nvidia-smi_-q"


def test_short_commands_collect_garbage_rarely_and_restore_the_thresholds():
    import gc

    import click
    from click.testing import CliRunner

    from gpuhealth.cli import START_UP_GC_THRESHOLD, main

    seen = []
    before = gc.get_threshold()

    @click.command()
    def probe() -> None:
        seen.append(gc.get_threshold())

    main.add_command(probe, "zz-probe")
    try:
        result = CliRunner().invoke(main, ["zz-probe"])
    finally:
        main.commands.pop("zz-probe")
    assert result.exit_code == 0, result.output
    assert seen == [(START_UP_GC_THRESHOLD, *before[1:])]
    assert gc.get_threshold() == before
    # A long-lived command (monitor, serve...) runs with the thresholds it was started with.
    main._gc_thresholds = before
    gc.set_threshold(START_UP_GC_THRESHOLD, *before[1:])
    try:
        assert main.get_command(click.Context(main), "monitor") is not None
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
