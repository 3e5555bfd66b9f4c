"""Bundles are untrusted input: crafted archives are refused with a clear message; secrets never leak."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from gpuhealth.bundle import BundleError, BundleHost, RecordingHost, command_key, write_archive
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


@pytest.mark.parametrize("member, reason", [
    (_file("/etc/passwd"), "unsafe path"),
    (_file("b/../../escape"), "unsafe path"),
])
def test_unsafe_paths_are_refused(tmp_path, member, reason):
    archive = _tar(tmp_path / "bad.tar.gz", [member])
    with pytest.raises(BundleError, match=reason):
        BundleHost(archive)


def test_links_and_devices_are_refused(tmp_path):
    link = tarfile.TarInfo("b/root/proc/modules")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    with pytest.raises(BundleError, match="is a link"):
        BundleHost(_tar(tmp_path / "link.tar.gz", [(link, None)]))
    device = tarfile.TarInfo("b/dev")
    device.type = tarfile.CHRTYPE
    with pytest.raises(BundleError, match="device or special"):
        BundleHost(_tar(tmp_path / "dev.tar.gz", [(device, None)]))


def test_oversized_member_is_refused(tmp_path, monkeypatch):
    import gpuhealth.bundle as bundle

    monkeypatch.setattr(bundle, "MAX_MEMBER_BYTES", 10)
    with pytest.raises(BundleError, match="larger than"):
        BundleHost(_tar(tmp_path / "big.tar.gz", [_file("b/manifest.json", b"{" * 100)]))


def test_not_a_bundle_says_so(tmp_path):
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(BundleError, match="not a readable"):
        BundleHost(tmp_path / "junk.tar.gz")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "manifest.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(BundleError, match="not a gpuhealth bundle"):
        BundleHost(tmp_path / "dir")


def test_symlink_inside_bundle_directory_cannot_leave_it(tmp_path):
    spec = load_spec("h100x8-healthy")
    recorder = RecordingHost(FakeHost(spec), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    secret = tmp_path / "secret"
    secret.write_text("do not read")
    target = tmp_path / "b" / "root" / "proc" / "modules"
    target.unlink()
    target.symlink_to(secret)
    content = BundleHost(tmp_path / "b").read("/proc/modules")
    assert content.data is None and "leaves the bundle" in content.error


def test_archive_round_trip_and_secret_redaction(tmp_path):
    spec = load_spec("h100x8-healthy")
    recorder = RecordingHost(FakeHost(spec), tmp_path / "b", hostname="gpu-node-17")
    collect(recorder)
    recorder.finish()
    env = json.loads((tmp_path / "b" / "env.json").read_text())
    assert env["HF_TOKEN"] == "<redacted>" and env["PATH"] == "/usr/bin"
    archive = write_archive(tmp_path / "b", tmp_path / "host.tar.gz")
    host = BundleHost(archive)
    assert host.read("/proc/sys/kernel/hostname").text == "gpu-node-17\n"
    assert host.run(["dmesg", "--time-format", "iso"]).exit_code == 0
    assert host.run(["never", "ran"]).error == "not captured in this bundle"
    host.close()


def test_redact_host_replaces_hostname_uuids_and_serials(tmp_path):
    spec = load_spec("h100x8-healthy")
    recorder = RecordingHost(FakeHost(spec), tmp_path / "b", hostname="gpu-node-17")
    snapshot = collect(recorder)
    recorder.finish(redact_host=True)
    everything = "".join(p.read_text(errors="replace") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert "gpu-node-17" not in everything
    for gpu in snapshot.nvml.gpus:
        assert gpu.uuid and gpu.uuid not in everything
        if gpu.serial:
            assert gpu.serial not in everything
    replayed = collect(BundleHost(tmp_path / "b"))
    # the same GPU keeps the same placeholder everywhere: still eight distinct GPUs
    assert len({g.uuid for g in replayed.nvml.gpus}) == 8


def test_command_keys_are_file_safe_and_distinct():
    keys = {command_key(a) for a in (["nvidia-smi", "-q", "-x"], ["nvidia-smi", "-q"], ["a/b", "../c"])}
    assert len(keys) == 3
    assert all("/" not in k and not k.startswith(".") for k in keys)
