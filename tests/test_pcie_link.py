"""GH407 on a pasted ``lspci -vv`` (and sysfs): the GPU's LnkSta width against its LnkCap width, with the
same twin rule as nvidia-smi's link fields. Real captures are in tests/data/corpus; the hand-written
blocks in tests/data/pcie/ say what they are in its README."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Finding, Severity, Snapshot

DATA = Path(__file__).parent / "data" / "pcie"
H100X8_LSPCI = "gpud/accelerator_nvidia_query_pci__lspci-vvv"
SMI_4090 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.154.05.out.0.valid.4090"


def snapshot_of(*paths: Path) -> Snapshot:
    snapshot, _ = analyze_texts([(p.name, p.read_text(errors="replace")) for p in paths])
    return snapshot


def gh407(snapshot: Snapshot) -> tuple[list[Finding], list[str]]:
    report = run_checks(snapshot, select=["GH407"])
    return list(report.findings), [s.reason for s in report.skipped]


def lines(finding: Finding) -> list[str]:
    return [line for evidence in finding.evidence for line in evidence.lines]


def test_single_gpu_at_x1_of_x16_is_reported_as_info():
    (narrow,), skipped = gh407(snapshot_of(DATA / "x1-of-x16.lspci"))
    assert skipped == []
    assert narrow.severity is Severity.INFO
    assert narrow.message.startswith("PCIe link below its maximum: link width x1 of x16")
    assert narrow.subject.pci_address == "0000:01:00.0"
    assert lines(narrow) == ["LnkCap: Width x16", "LnkSta: Width x1", "LnkSta: Speed 5.0 GT/s"]


def test_one_narrow_gpu_beside_an_identical_full_width_one_is_a_warning():
    (narrow,), _ = gh407(snapshot_of(DATA / "twins-one-x8.lspci"))
    assert (narrow.severity, narrow.subject.pci_address) == (Severity.WARNING, "0000:3b:00.0")
    assert narrow.message == "PCIe link below its maximum: link width x8 of x16"


def test_idle_gpu_at_a_lower_speed_but_full_width_is_quiet():
    """Real: a GT 730 at 2.5GT/s of 5GT/s, x8 of x8 (speed is not judged from lspci: load is unknown)."""
    found, skipped = gh407(snapshot_of(DATA / "gt730-idle-gen1.lspci"))
    assert found == [] and skipped == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")
def test_real_8x_h100_lspci_at_full_width_is_quiet_and_other_devices_do_not_count():
    """The capture's Broadcom NICs train x1 of x2 "(downgraded)": not GPUs, not GH407's."""
    found, skipped = gh407(snapshot_of(CORPUS / H100X8_LSPCI))
    assert found == [] and skipped == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")
def test_nvidia_smi_link_fields_win_over_lspci_for_the_same_gpu():
    """A narrow lspci link for the GPU nvidia-smi reports at full width is not a second finding."""
    smi = CORPUS / SMI_4090
    snapshot = snapshot_of(smi)
    gpu = snapshot.gpus[0]
    assert gpu.pcie_width_current == gpu.pcie_width_max == 16
    assert gpu.pci_address
    block = (DATA / "x1-of-x16.lspci").read_text().replace("01:00.0", gpu.pci_address.split(":", 1)[1])
    both, _ = analyze_texts([(smi.name, smi.read_text(errors="replace")), ("lspci.txt", block)])
    found, _ = gh407(both)
    assert all(f.evidence[0].source != "lspci.txt" for f in found)
    assert not any("x1 of x16" in f.message for f in found)


def test_no_link_data_at_all_is_a_skip_not_a_pass():
    snapshot, _ = analyze_texts([("nvidia-smi.txt", "NVIDIA-SMI has failed because it couldn't communicate "
                                  "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed "
                                  "and running.\n")])
    found, skipped = gh407(snapshot)
    assert found == [] and len(skipped) == 1
