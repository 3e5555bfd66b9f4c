"""A GPU whose PCI memory windows (BARs) got no address, told in a person's words (knowledge/cause_phrases.csv
told-bar-space-too-small and told-above-4g-decoding-off, citing the Linux PCI core's setup-res.c and NVIDIA's nv-pci.c):
GH304 leads as the reporter's words, at most a warning, ahead of NO DIAGNOSIS. The sentences are written for these
tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


@pytest.mark.parametrize("words", [
    "Our new card is listed by lspci, yet the kernel could not assign its BARs, so the driver never binds.",
    "The PCIe windows this host offers are too small for the GPU's 64 GB BAR1.",
    "After moving the A100 into the other server its memory addresses could not be assigned.",
    "The GPU is seen, but BAR 2 can't get an address on this ARM board.",
    "Above 4G decoding is turned off in the BIOS and the GPU does not come up.",
    "The workstation needs Resizable BAR and Above 4G decoding for the RTX card, and both were disabled.",
    # PCI-E and PCI Express spellings, and a root complex whose outbound window no GPU's BARs fit (an ARM SoC's)
    "The PCI-E BAR space on this motherboard is too small for the RTX card.",
    "Our PCI Express windows ran out and the GPU's BAR1 could not be assigned.",
    "The SoC's PCIe outbound memory window is only 64 MB, so the NVIDIA card cannot get its BARs.",
    "The board has a 16 MB PCI-E outbound limit, the graphics card never comes up.",
    "新装的显卡在 lspci 里能看到，但是 BAR 空间不够，驱动起不来。",
    "服务器 BIOS 的 Above 4G Decoding 被禁用了，GPU 用不了。",
])
def test_the_bar_fault_told_in_words_leads_as_a_warning(words):
    report = report_of(("notes.txt", words + "\n"))
    first = report.findings[0]
    assert first.code == "GH304", [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"
    assert any(words in line for e in first.evidence for line in e.lines)
    assert not [f for f in report.findings if f.severity is Severity.CRITICAL]


@pytest.mark.parametrize("words", [
    "Resizable BAR enabled, Above 4G decoding enabled, the GPU trains at full speed.",
    "The BARs of all eight GPUs are assigned and the MMIO window is large enough.",
    "If the BAR space is too small, turn on Above 4G decoding.",
    "Is Above 4G decoding required for an H100?",
    "The IP address could not be assigned to the GPU node by DHCP.",
    "The SoC's PCIe outbound window is 64 GB, the NVIDIA card gets all its BARs.",
    "The GPU node's outbound network traffic is capped at 100 MB/s.",
    "If the PCIe outbound window is only 32 MB, the GPU cannot be used there.",
])
def test_a_healthy_setting_a_question_or_another_address_is_not_the_bar_fault(words):
    assert not [t for t in told_symptoms(words) if t.cause == "pci-bar-failure"]
    report = report_of(("notes.txt", words + "\n"))
    assert "GH304" not in {f.code for f in report.findings}


def test_the_words_beside_a_kernel_log_that_shows_the_bar_are_one_finding():
    """The PCI core's own line and the person's sentence: the machine's line makes it critical, one GH304."""
    log = ("[    0.410000] pci 0000:41:00.0: [10de:2330] type 00 class 0x030200\n"
           "[    0.620010] pci 0000:41:00.0: BAR 2 [mem size 0x2000000000 64bit pref]: failed to assign\n")
    words = "The GPU is seen, but BAR 2 can't get an address.\n"
    report = report_of(("dmesg.txt", log), ("notes.txt", words))
    found = [f for f in report.findings if f.code == "GH304"]
    assert found and found[0] is report.findings[0] and found[0].severity is Severity.CRITICAL
