"""The live check's kernel log: ``dmesg`` output streamed through the kernel-log scanner as it comes.

Fake ``dmesg`` and ``journalctl`` commands on PATH (small scripts written here) produce large, endless,
failing or slow output. The deadline and the byte limit are enforced while reading, before the bytes reach
the scanner; memory stays bounded whatever the size (peak RSS read in a child from its own ``VmHWM``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuhealth.collect import system
from gpuhealth.collect.system import probe_kernel_log
from gpuhealth.host import LocalHost

XID = "[{t}.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=42, name=python3, Graphics SM Warp Exception\n"
QUIET = "[{t}.000001] eth0: link becomes ready on port {t} of the fabric switch, nothing to do with GPUs\n"

# Writes ``blocks`` blocks of 10,000 quiet lines (about 1 MB) and one Xid line each; forever when blocks < 0.
FAKE_LOG = """#!{python}
import sys
blocks = {blocks}
quiet = "".join({quiet!r}.format(t=i) for i in range(10000)).encode()
xid = {xid!r}
i = 0
out = sys.stdout.buffer
while blocks < 0 or i < blocks:
    out.write(quiet + xid.format(t=i).encode())
    i += 1
out.flush()
"""


def _fake(bin_dir: Path, name: str, text: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(text)
    path.chmod(0o755)


def _fake_tools(tmp_path: Path, dmesg: str, journal: str | None = None) -> Path:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir, "dmesg", dmesg)
    _fake(bin_dir, "journalctl", journal or "#!/bin/sh\necho 'No journal files were found.' >&2\nexit 1\n")
    return bin_dir


@pytest.fixture
def on_path(monkeypatch):
    def put(bin_dir: Path) -> None:
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return put


CHILD = """
import json, sys
from gpuhealth.collect.system import probe_kernel_log
from gpuhealth.host import LocalHost
found = probe_kernel_log(LocalHost(), float(sys.argv[1]))
log = found.fields.get("kernel_log")
peak = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"xid": sum(g.count for g in log.groups if g.kind == "xid") if log else None,
                  "lines": log.lines_scanned if log else None, "bytes": log.bytes_scanned if log else None,
                  "source": found.sources.get("kernel_log"), "why": found.unavailable.get("kernel_log"),
                  "peak_kb": int(peak)}))
"""


def test_dmesg_larger_than_the_command_cap_is_scanned_in_bounded_memory(tmp_path):
    """150 MB of output (the in-memory path stopped at 64 MiB and lost the log): every Xid, RSS bounded."""
    blocks = 150
    bin_dir = _fake_tools(tmp_path, FAKE_LOG.format(python=sys.executable, blocks=blocks, quiet=QUIET, xid=XID))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", CHILD, "300"], capture_output=True, text=True, env=env,
                          timeout=600, check=True)
    result = json.loads(done.stdout)
    assert result["source"] == "dmesg --time-format iso", result
    assert result["xid"] == blocks  # the last one comes after 149 MB
    assert result["lines"] == blocks * 10001
    assert result["bytes"] > 2 * 64 * 1024 * 1024  # twice the cap of the in-memory path
    assert 0 < result["peak_kb"] < 200 * 1024, result


def test_endless_dmesg_stops_at_the_deadline(tmp_path, on_path):
    on_path(_fake_tools(tmp_path, FAKE_LOG.format(python=sys.executable, blocks=-1, quiet=QUIET, xid=XID)))
    start = time.monotonic()
    found = probe_kernel_log(LocalHost(), 2.0)
    elapsed = time.monotonic() - start
    assert "kernel_log" not in found.fields
    why = found.unavailable["kernel_log"]
    assert "dmesg: timed out after 2 s" in why and "No journal files were found" in why, why
    assert elapsed < 8, elapsed


def test_output_past_the_byte_limit_is_not_scanned(tmp_path, on_path, monkeypatch):
    on_path(_fake_tools(tmp_path, FAKE_LOG.format(python=sys.executable, blocks=5, quiet=QUIET, xid=XID)))
    monkeypatch.setattr(system, "DEFAULT_MAX_BYTES", 1024 * 1024)
    fed = []
    real = system.parse_kernel_log_stream

    def counting(stream, source, head=b""):
        class Counting:
            def readinto(self, view):
                n = stream.readinto(view)
                fed.append(n)
                return n

            def read(self, size=-1):
                data = stream.read(size)
                fed.append(len(data))
                return data
        return real(Counting(), source, head)

    monkeypatch.setattr(system, "parse_kernel_log_stream", counting)
    found = probe_kernel_log(LocalHost(), 60.0)
    assert "kernel_log" not in found.fields
    assert "output larger than 1048576 bytes" in found.unavailable["kernel_log"]
    assert sum(fed) <= 1024 * 1024  # the bytes past the limit never reached the scanner


def test_a_failing_dmesg_says_why_and_journalctl_is_tried(tmp_path, on_path):
    journal = FAKE_LOG.format(python=sys.executable, blocks=2, quiet=QUIET, xid=XID)
    on_path(_fake_tools(tmp_path, "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\n"
                                  "exit 1\n", journal))
    found = probe_kernel_log(LocalHost(), 60.0)
    log = found.fields["kernel_log"]
    assert found.sources["kernel_log"].startswith("journalctl")
    assert sum(g.count for g in log.groups if g.kind == "xid") == 2


def test_both_failing_name_both_reasons(tmp_path, on_path):
    on_path(_fake_tools(tmp_path, "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\n"
                                  "exit 1\n"))
    why = probe_kernel_log(LocalHost(), 60.0).unavailable["kernel_log"]
    assert "dmesg: dmesg: read kernel buffer failed: Operation not permitted" in why, why
    assert "journalctl: No journal files were found." in why, why


def test_empty_output_is_not_a_log(tmp_path, on_path):
    on_path(_fake_tools(tmp_path, "#!/bin/sh\nexit 0\n"))
    why = probe_kernel_log(LocalHost(), 60.0).unavailable["kernel_log"]
    assert "dmesg --time-format iso: not a kernel log: empty" in why, why


def test_a_helper_holding_the_pipe_does_not_stretch_the_wait(tmp_path, on_path):
    """dmesg exits but leaves a child holding stdout: the log is read, the child killed, no wait for it."""
    on_path(_fake_tools(tmp_path, "#!/bin/sh\n" + "".join(f"echo '{XID.format(t=i).strip()}'\n" for i in range(3))
                        + "sleep 30 &\nexit 0\n"))
    start = time.monotonic()
    found = probe_kernel_log(LocalHost(), 20.0)
    assert time.monotonic() - start < 5
    assert sum(g.count for g in found.fields["kernel_log"].groups if g.kind == "xid") == 3


def test_binary_output_is_refused_by_the_scanner_and_said_so(tmp_path, on_path):
    """The scanner stops at the head (not text): the command is killed, and the reason is the scanner's."""
    on_path(_fake_tools(tmp_path, f"#!{sys.executable}\nimport sys\nwhile True:\n"
                                  "    sys.stdout.buffer.write(bytes(range(256)) * 4096)\n"))
    start = time.monotonic()
    why = probe_kernel_log(LocalHost(), 30.0).unavailable["kernel_log"]
    assert "dmesg --time-format iso: not a kernel log: binary data" in why, why
    assert time.monotonic() - start < 10


# --------------------------------------------------------------------------- snapshot: recorded as it streams

SECRET_LINE = ("[0.000000] Kernel command line: BOOT_IMAGE=/vmlinuz root=/dev/sda1 "
               "inst.repo=https://admin:hunter2secret@repo.example/os\n")
# FAKE_LOG with a secret on the kernel command line first (a bundle is redacted).
SECRET_LOG = FAKE_LOG.replace("i = 0\n", f"i = 0\nsys.stdout.buffer.write({SECRET_LINE!r}.encode())\n")


class _NoRunForLogs(LocalHost):
    """A live host whose kernel-log commands may only be streamed (``run`` would hold the output whole)."""

    def run(self, argv, timeout=10.0):
        assert argv[0] not in ("dmesg", "journalctl"), f"{argv[0]} was run, not streamed"
        return super().run(argv, timeout)


def test_snapshot_writes_the_streamed_kernel_log_into_the_bundle(tmp_path, on_path):
    """`gpuhealth snapshot` (RecordingHost) streams dmesg through the scanner and into the bundle's file as it
    reads (before, `run` held up to 64 MiB of it in memory): the same log live and replayed, the secret on the
    command line redacted in the file, the manifest entry as `run` writes it."""
    from gpuhealth.bundle import BundleHost, RecordingHost

    on_path(_fake_tools(tmp_path, SECRET_LOG.format(python=sys.executable, blocks=3, quiet=QUIET, xid=XID)))
    recorder = RecordingHost(_NoRunForLogs(), tmp_path / "bundle")
    live = probe_kernel_log(recorder, 60)
    out = recorder.finish()
    log = live.fields["kernel_log"]
    assert live.sources["kernel_log"] == "dmesg --time-format iso"
    assert sum(g.count for g in log.groups if g.kind == "xid") == 3 and log.lines_scanned == 1 + 3 * 10001
    manifest = json.loads((out / "manifest.json").read_text())
    (entry,) = [c for c in manifest["commands"] if c["argv"][0] == "dmesg"]
    assert entry["exit_code"] == 0 and not entry["timed_out"] and entry["error"] is None
    recorded = (out / "commands" / f"{entry['key']}.stdout").read_text()
    assert "hunter2secret" not in recorded and "https://<redacted>@repo.example" in recorded
    assert recorded.count("NVRM: Xid") == 3 and len(recorded.splitlines()) == 1 + 3 * 10001
    assert (out / "commands" / f"{entry['key']}.stdout").stat().st_mode & 0o777 == 0o600
    replayed = probe_kernel_log(BundleHost(out), 60).fields["kernel_log"]
    assert [(g.kind, g.count) for g in replayed.groups] == [(g.kind, g.count) for g in log.groups]


SNAPSHOT_CHILD = """
import sys, tempfile
from gpuhealth.bundle import RecordingHost
from gpuhealth.collect.system import probe_kernel_log
from gpuhealth.host import LocalHost
found = probe_kernel_log(RecordingHost(LocalHost(), tempfile.mkdtemp()), 300)
log = found.fields["kernel_log"]
peak = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(sum(g.count for g in log.groups if g.kind == "xid"), int(peak))
"""


def test_snapshot_of_a_large_kernel_log_stays_small(tmp_path):
    """60 MB of dmesg (under the 64 MiB cap): the recorder held it whole, then decoded and re-encoded it
    (about 130 MB peak RSS measured); streamed into the file it stays near the interpreter's own size."""
    blocks = 60
    bin_dir = _fake_tools(tmp_path, FAKE_LOG.format(python=sys.executable, blocks=blocks, quiet=QUIET, xid=XID))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", SNAPSHOT_CHILD], capture_output=True, text=True, env=env,
                          timeout=600, check=True)
    xids, peak_kb = map(int, done.stdout.split())
    assert xids == blocks
    assert 0 < peak_kb < 80 * 1024, peak_kb
