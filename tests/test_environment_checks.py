"""GH8xx checks on hand-made snapshots and on `analyze` of pasted training logs (HAND-WRITTEN lines in the
form PyTorch, CUDA and NVML print them; facts.md 4 quotes the NVML and CUDA messages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.environment import end_of_support, end_of_support_table
from gpuhealth.checks.registry import Expectations
from gpuhealth.config import load_expectations
from gpuhealth.model import HostEnvironment, OsInfo, Severity, Snapshot

# (pasted line, the check that leads, related codes the GH806 finding must name; None: no GH806 finding).
# A line whose catalogue row names another check is that check's (one finding per line, with its differential);
# GH806 speaks for the rows that are its own.
PASTED = [
    ("RuntimeError: cuda runtime error (100) : no CUDA-capable device is detected at THCGeneral.cpp:47", "GH610", None),
    ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version", "GH601", None),
    ("UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
     "PyTorch installation.", "GH606", None),
    ("Failed to initialize NVML: Unknown Error", "GH803", None),
    ("Failed to initialize NVML: Driver/library version mismatch", "GH202", None),
    ("Failed to initialize NVML: Insufficient Permissions", "GH806", ("GH203",)),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "GH806", ("GH301", "GH607")),
]


def _findings(text: str, code: str = "GH806"):
    snapshot, _ = analyze_texts([("train.log", "Traceback (most recent call last):\n" + text + "\n")])
    report = run_checks(snapshot)
    return [f for f in report.findings if f.code == code], report


@pytest.mark.parametrize(("line", "lead", "codes"), PASTED, ids=[f"{row[1]}-{i}" for i, row in enumerate(PASTED)])
def test_pasted_error_leads_once_and_gh806_names_the_checks_that_explain_it(line, lead, codes):
    findings, report = _findings(line)
    assert report.findings[0].code == lead
    if codes is None:
        assert findings == []  # the leading check reports the line; GH806 does not repeat it
        return
    (finding,) = findings
    assert finding.severity is Severity.WARNING
    assert finding.explains == ()  # root cause -> symptom only; this is the symptom
    for code in codes:
        assert code in finding.message
        assert any(fix.command == f"gpuhealth explain {code}" for fix in finding.fixes)
    assert finding.evidence[0].lines[0].startswith("2: ")


def test_a_log_alone_cannot_decide_and_names_what_to_collect():
    (finding,), _ = _findings("Failed to initialize NVML: Insufficient Permissions")
    assert "cannot decide" in finding.message
    assert any(fix.command == "ls -l /dev/nvidia*" for fix in finding.fixes)


def test_partial_evidence_still_names_what_is_missing():
    lspci = ("0000:3b:00.0 3D controller [0302]: NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB] [10de:1db6] "
             "(rev a1)\n")
    lsmod = ("Module                  Size  Used by\nnvidia_uvm           1359872  0\n"
             "nvidia              39063552  1 nvidia_uvm\n")
    snapshot, _ = analyze_texts([("lspci.txt", lspci), ("lsmod.txt", lsmod),
                                 ("train.log", "RuntimeError: CUDA error: no CUDA-capable device is detected\n")])
    report = run_checks(snapshot)
    lead = report.findings[0]
    assert lead.code == "GH610" and not [f for f in report.findings if f.code == "GH806"]
    # the module list rules the unloaded driver out; the /dev listing is still missing from loose evidence, so the
    # device files stay an open candidate and their command is among those that decide
    status = {c.cause: c.status for c in lead.differential}
    assert status["driver-not-loaded"] == "ruled out" and status["device-nodes-missing"] == "open"
    assert any("ls -l /dev/nvidia" in c.command for c in lead.differential if c.cause == "device-nodes-missing")


def test_one_finding_per_kind_with_counts():
    text = "\n".join(["RuntimeError: CUDA error: out of memory"] * 6 + ["NCCL WARN Connect to 10.0.0.2 failed"])
    findings, _ = _findings(text)
    by_kind = {f.message.split()[0]: f for f in findings}
    assert set(by_kind) == {"cuda-oom", "nccl"}
    assert "(6x)" in by_kind["cuda-oom"].message
    assert by_kind["cuda-oom"].evidence[0].lines[-1] == "... 2 more like these ..."


def _snapshot(**env) -> Snapshot:
    return Snapshot(captured_at="2026-01-15T10:00:00+0000", os=OsInfo(id="ubuntu", version_id="22.04"),
                    host_env=HostEnvironment(**env))


def test_driver_params_configured_and_compared(tmp_path: Path):
    config = tmp_path / "gpuhealth.toml"
    config.write_text('driver_params = { EnableMSI = 1, NVreg_EnablePCIeGen3 = 1, NoSuchParam = "x" }\n')
    expect = load_expectations(config)
    assert expect.driver_params == {"EnableMSI": "1", "NVreg_EnablePCIeGen3": "1", "NoSuchParam": "x"}
    snapshot = _snapshot(driver_params={"EnableMSI": "1", "EnablePCIeGen3": "0"})
    findings = [f for f in run_checks(snapshot, expect).findings if f.code == "GH804"]
    messages = sorted(f.message for f in findings)
    assert len(findings) == 2 and all(f.severity is Severity.WARNING for f in findings)
    assert "EnablePCIeGen3 is 0, the configuration expects 1" in messages[0]
    assert "NoSuchParam is not reported" in messages[1]
    assert any("NVreg_EnablePCIeGen3=1" in fix.command for fix in findings[0].fixes + findings[1].fixes)


def test_driver_params_skipped_without_configuration():
    report = run_checks(_snapshot(driver_params={"EnableMSI": "0"}), Expectations())
    assert "GH804" in {s.code for s in report.skipped}


@pytest.mark.parametrize("text", ["driver_params = 3\n", "driver_params = { EnableMSI = true }\n",
                                  "driver_params = {}\n"])
def test_driver_params_bad_config(tmp_path: Path, text: str):
    config = tmp_path / "gpuhealth.toml"
    config.write_text(text)
    with pytest.raises(ValueError, match="driver_params"):
        load_expectations(config)


def test_end_of_life_uses_the_capture_date_not_the_clock():
    def gh801(captured_at: str, os_id: str, version: str):
        snapshot = Snapshot(captured_at=captured_at, os=OsInfo(id=os_id, version_id=version))
        report = run_checks(snapshot)
        return ([f.severity for f in report.findings if f.code == "GH801"],
                [s.reason for s in report.skipped if s.code == "GH801"])

    assert gh801("2025-06-01T00:00:00+0000", "ubuntu", "20.04")[0] == [Severity.WARNING]
    assert gh801("2025-04-01T00:00:00+0000", "ubuntu", "20.04")[0] == [Severity.INFO]  # 60 days before
    assert gh801("2024-01-01T00:00:00+0000", "ubuntu", "20.04") == ([], [])
    assert gh801("2024-07-01T00:00:00+0000", "rhel", "7.9")[0] == [Severity.WARNING]  # major version row
    assert gh801("2026-09-01T00:00:00+0000", "debian", "11")[0] == [Severity.WARNING]
    assert "no end-of-support date" in gh801("2026-01-01T00:00:00+0000", "gentoo", "2.14")[1][0]
    assert "capture date is unknown" in gh801("t", "centos", "7")[1][0]


def test_end_of_life_table_has_a_source_per_row():
    rows = end_of_support_table()
    assert all(r.source.startswith("https://") and r.support and r.confirmed for r in rows)
    assert end_of_support("centos", "7").date.isoformat() == "2024-06-30"
    assert end_of_support("ubuntu", "18.04").date.isoformat() == "2023-05-31"
    assert end_of_support("ubuntu", "18.10") is None  # not an LTS row: no major-version fallback hit


def test_registry_keys_are_compared_like_params(tmp_path: Path):
    """The field report's health script: exit 1 when RMEdgeTrigger or RMEnableNvGpuFirmwareLoad in
    /proc/driver/nvidia/registry is 0. Hand-written registry values (the corpus has no registry file)."""
    config = tmp_path / "gpuhealth.toml"
    config.write_text("driver_params = { RMEdgeTrigger = 1, RMEnableNvGpuFirmwareLoad = 1 }\n")
    expect = load_expectations(config)
    snapshot = _snapshot(driver_params={"EnableMSI": "1"},
                         driver_registry={"RMEdgeTrigger": "0", "RMEnableNvGpuFirmwareLoad": "1"})
    findings = [f for f in run_checks(snapshot, expect).findings if f.code == "GH804"]
    assert [f.message for f in findings] == ["Driver parameter RMEdgeTrigger is 0, the configuration expects 1"]
    assert findings[0].evidence[0].source == "/proc/driver/nvidia/registry"


def test_registry_file_is_collected(tmp_path: Path):
    from gpuhealth.collect import collect
    from hostcases import FakeHost, load_spec

    spec = load_spec("h100x8-healthy")
    spec.setdefault("files", {})["/proc/driver/nvidia/registry"] = "RMEdgeTrigger: 1\nBinary: \"\"\n"
    snapshot = collect(FakeHost(spec))
    assert snapshot.host_env.driver_registry["RMEdgeTrigger"] == "1"


def test_driver_package_versions_one_helper_for_gh509_and_the_user_space_version():
    """GH509 and the user-space driver version group packages by driver version through one helper: each
    package once per version, versions in order; a tool's own version (the container toolkit) is no driver."""
    from gpuhealth.checks.driver import user_space_version
    from gpuhealth.model import NvidiaPackage

    packages = (NvidiaPackage("libnvidia-compute-535", "535.161.08-0ubuntu1", "dpkg"),
                NvidiaPackage("libnvidia-compute-535", "535.161.08-0ubuntu1", "dpkg"),  # listed twice
                NvidiaPackage("libnvidia-common-495", "495.29.05-0ubuntu1", "dpkg"),
                NvidiaPackage("nvidia-container-toolkit", "1.15.0-1", "dpkg"))
    snapshot = Snapshot(origin="evidence", host_env=HostEnvironment(packages=packages, package_source="dpkg -l"))
    (finding,) = [f for f in run_checks(snapshot).findings if f.code == "GH509"]
    assert [(e.source, e.lines) for e in finding.evidence] == [
        ("495.29.05: dpkg -l", ("libnvidia-common-495 495.29.05-0ubuntu1",)),
        ("535.161.08: dpkg -l", ("libnvidia-compute-535 535.161.08-0ubuntu1",))]
    # libnvidia-common holds no driver library: the library packages agree on one version
    assert user_space_version(snapshot) == ("535.161.08", "dpkg -l: libnvidia-compute-535")
