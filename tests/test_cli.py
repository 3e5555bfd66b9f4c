"""The command line: exit codes, formats, snapshot -> check --from on this very machine, explain."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import CORPUS
from gpuhealth.bundle import RecordingHost
from gpuhealth.cli import main
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, list(args), input=stdin)


def bundle_of(case: str, tmp_path):
    recorder = RecordingHost(FakeHost(load_spec(case)), tmp_path / case, hostname="gpu-node-17")
    collect(recorder)
    recorder.finish()
    return str(tmp_path / case)


def test_exit_codes_follow_the_verdict(tmp_path):
    assert run("check", "--from", bundle_of("h100x8-healthy", tmp_path)).exit_code == 0
    assert run("check", "--from", bundle_of("no-gpu", tmp_path)).exit_code == 1
    assert run("check", "--from", bundle_of("driver-library-mismatch", tmp_path)).exit_code == 2


def test_unusable_bundle_exits_3_with_the_reason(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"junk")
    result = run("check", "--from", str(tmp_path / "x.tar.gz"))
    assert result.exit_code == 3 and "not a readable .tar.gz bundle" in result.output


def test_json_report_has_versioned_schema_gpus_and_findings(tmp_path):
    result = run("check", "--from", bundle_of("h100x8-xid-ecc", tmp_path), "--format", "json")
    doc = json.loads(result.output)
    assert doc["schema"] == "gpuhealth-report" and doc["schema_version"] == 1
    assert len(doc["gpus"]) == 8 and doc["gpus"][0]["pci_address"] == "0000:19:00.0"
    assert {f["code"] for f in doc["findings"]} == {"GH301"}
    assert doc["verdict"] == "BROKEN" and doc["exit_code"] == 2 == result.exit_code


def test_text_report_leads_with_the_verdict_and_folds_symptoms(tmp_path):
    result = run("check", "--from", bundle_of("driver-library-mismatch", tmp_path))
    lines = result.output.splitlines()
    assert lines[0].strip().startswith("BROKEN")
    assert "GH202" in result.output and "explains GH203" in result.output
    assert "sudo reboot" in result.output


def test_markdown_report_for_a_ticket(tmp_path):
    result = run("check", "--from", bundle_of("nouveau-holds-gpu", tmp_path), "--format", "markdown")
    assert result.output.startswith("## gpuhealth: BROKEN")
    assert "dracut --force" in result.output and "update-initramfs" not in result.output  # Rocky host


def test_analyze_reads_files_and_stdin():
    log = (CORPUS / "gpud/query_log_tail__dmesg.0.log").read_text()
    result = run("analyze", "-", "--format", "json", stdin=log)
    assert result.exit_code == 2
    assert any(f["message"].startswith("Xid 48") for f in json.loads(result.output)["findings"])
    missing = run("analyze", "/nonexistent/file.log")
    assert missing.exit_code == 3 and "No such file" in missing.output


@pytest.mark.parametrize("command", ["fix", "recommend", "analyze"])
def test_unreadable_evidence_is_exit_3_with_one_line_naming_it(command, tmp_path, monkeypatch):
    """fix and recommend read evidence as analyze does: a missing file, a directory, a device or a file they may
    not read is exit 3 with one line naming it and why, never an empty reading (fix exited 0 on /dev/null)."""
    locked = tmp_path / "locked.log"
    locked.write_text("NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.\n")
    real_open = os.open

    def refused(path, *args, **kwargs):  # as root, chmod 000 does not stop a read: refuse it here
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)
    cases = {str(tmp_path / "missing.log"): "No such file", str(tmp_path): "a directory",
             "/dev/null": "a character device", str(locked): "Permission denied"}
    for path, why in cases.items():
        result = run(command, path)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 3, (path, result.output)
        assert len(lines) == 1 and path in lines[0] and why in lines[0], result.output


def test_checks_and_explain():
    listing = run("checks").output
    assert "GH202" in listing and "driver-library-mismatch" in listing
    text = run("explain", "driver-library-mismatch").output
    for section in ("What:", "Why it matters:", "How to fix:", "Exceptions:"):
        assert section in text
    assert run("explain", "GH999").exit_code == 3


def test_snapshot_then_check_from_matches_live_on_this_machine(tmp_path):
    """The real LocalHost: record this machine, replay it, compare the findings."""
    archive = tmp_path / "host.tar.gz"
    assert run("snapshot", "-o", str(archive)).exit_code == 0
    live = json.loads(run("check", "--format", "json").output)
    replayed = json.loads(run("check", "--from", str(archive), "--format", "json").output)
    assert [f["code"] for f in live["findings"]] == [f["code"] for f in replayed["findings"]]
    assert live["skipped"] == replayed["skipped"]
    assert run("snapshot", "-o", str(archive)).exit_code == 3  # never overwrites


def test_python_dash_m_and_no_heavy_imports_at_start():
    code = ("import sys, gpuhealth.cli; "
            "print(sorted(m for m in ('pynvml', 'rich', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    version = subprocess.run([sys.executable, "-m", "gpuhealth", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "gpuhealth" in version.stdout
