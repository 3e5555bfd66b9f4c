"""One failed probe is one finding, and a GPU the driver refuses beside working siblings is GH102's.

Evidence: the kernel log of NVIDIA/aicr#1858 (tests/cases/dev/fewer-gpus-than-pci-h100-faulty-probe-azure: one H100 of
eight refused as "not supported" by 580.126.09; the maintainer found a faulty GPU), other real cases of tests/cases/,
and variants of the aicr#1858 log edited here, each saying what was changed: the driver's own line "None of the
NVIDIA devices were initialized." (kernel-open/nvidia/nv.c, printed right after the count line when it took no GPU)
added, or the refused GPU's PCI ID and the release swapped for a pair the support table agrees with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.report.common import fold

CASES = Path(__file__).parent / "cases" / "dev"
AZURE = CASES / "fewer-gpus-than-pci-h100-faulty-probe-azure" / "dmesg.log"
NONE_TAKEN = "NVRM: None of the NVIDIA devices were initialized.\n"


def report(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def roots(result) -> list[str]:
    return [f"{c.finding.code}@{c.finding.subject}" for c in fold(result.findings)]


def of(result, code: str):
    return [f for f in result.findings if f.code == code]


def case_report(name: str):
    folder = CASES / name
    return report(*[(p.name, p.read_text(errors="replace")) for p in sorted(folder.iterdir()) if p.name != "case.toml"])


def test_a_gpu_refused_beside_working_siblings_is_gh102_with_the_probe_folded_under_it():
    result = report(("dmesg.log", AZURE.read_text()))
    missing, probe = of(result, "GH102"), of(result, "GH305")
    assert [str(f.subject) for f in missing] == ["000a:00:00.0"] and len(probe) == 1
    assert "branch 580 supports Hopper [10de:2330]" in missing[0].message
    assert "GH305" in missing[0].explains and "GH102" not in probe[0].explains  # no loop, GH102 leads
    assert roots(result) == ["GH102@000a:00:00.0"]
    # the driver is ruled out, so what is left is the GPU: a cold boot, then service (disruptive, a step)
    assert any(f.disruptive and "service" in f.command for f in missing[0].fixes)


def test_the_driver_taking_no_gpu_leaves_the_probe_failure_in_front():
    # the same refusal, but the driver says it initialised nothing: the driver, not one GPU, is in question
    result = report(("dmesg.log", AZURE.read_text() + NONE_TAKEN))
    assert not of(result, "GH102")
    assert roots(result)[0] == "GH305@000a:00:00.0"
    assert "GH102" in of(result, "GH305")[0].explains


def test_a_refusal_the_support_table_agrees_with_is_not_a_faulty_gpu():
    # a Blackwell GPU (10de:2b85) refused by a 550 release: branch 550 predates Blackwell (570), so the refusal is true
    text = AZURE.read_text().replace("10de:2330", "10de:2b85").replace("580.126.09", "550.163.01")
    result = report(("dmesg.log", text))
    assert not of(result, "GH102")
    assert [f.code for f in result.findings].count("GH305") == 1


def test_the_pci_listing_and_the_kernel_log_give_one_gh102_for_the_gpu():
    lspci = ("0001:00:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
             "000a:00:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n")
    smi = "index, pci.bus_id, name\n0, 00000001:00:00.0, NVIDIA H100 80GB HBM3\n"
    result = report(("dmesg.log", AZURE.read_text()), ("lspci.txt", lspci), ("gpus.csv", smi))
    missing = of(result, "GH102")
    assert len(missing) == 1 and "refused at its probe" in missing[0].message
    assert any("PCI ID: 10de:2330" in line for e in missing[0].evidence for line in e.lines)
    assert roots(result) == ["GH102@000a:00:00.0"]


def test_one_failed_probe_is_one_finding():
    # 3050 Ti laptop (open-gpu-kernel-modules#393): the refusal names the GPU, the count lines name none
    probe = of(case_report("driver-gpu-unsupported-3050ti-laptop-520"), "GH305")
    assert len(probe) == 1 and str(probe[0].subject) == "0000:01:00.0"
    assert "no NVIDIA device initialised" in probe[0].message
    assert len(probe[0].evidence) == 2  # the GPU's lines, then the driver's count lines


@pytest.mark.parametrize(("case", "lead"), [
    ("pci-bar-laptop-bar0-pci-realloc", "GH304"),  # no BAR, no probe: one root
    ("pci-bar-egpu-bar0-invalid-system76", "GH304"),
    ("xid-79-fallen-off-bus-no-xid-open-570", "GH302"),  # fell off the bus during the probe
])
def test_the_cause_of_a_failed_probe_explains_it(case, lead):
    result = case_report(case)
    assert [r.split("@")[0] for r in roots(result)] == [lead]


def test_a_partial_failure_in_a_real_log_is_read_as_partial():
    # open-570 Xid 79 case: "failed for 1 device(s)" and then the module's load banner, no "None ..." line
    from gpuhealth.checks.kernel_log import probe_events

    snapshot, _ = analyze_texts([("dmesg.log", (CASES / "xid-79-fallen-off-bus-no-xid-open-570" / "dmesg.log")
                                  .read_text())])
    named, summary = probe_events(snapshot)
    assert not named and [e.detail for e in summary.samples] == ["probe routine failed for 1 device(s)"]


def test_the_same_refusal_with_nvrm_on_every_line_is_still_the_faulty_gpu():
    # the aicr#1858 message laid out as most drivers print it ("NVRM: " on each continuation line), which GH209's
    # catalogue row matches: the driver's own refusal is not GH209's when the log reads it as a faulty GPU
    text = ("[    5.100000] NVRM: The NVIDIA GPU 000a:00:00.0 (PCI ID: 10de:2330)\n"
            "[    5.100000] NVRM: installed in this system is not supported by the\n"
            "[    5.100000] NVRM: NVIDIA 580.126.09 driver release.\n"
            "[    5.200000] NVRM: The NVIDIA probe routine failed for 1 device(s).\n")
    result = report(("dmesg.log", text))
    assert roots(result) == ["GH102@000a:00:00.0"] and not of(result, "GH209")
    # and beside "None of the NVIDIA devices were initialized." the refusal is GH209's again
    assert roots(report(("dmesg.log", text + NONE_TAKEN)))[0] == "GH209@host"
