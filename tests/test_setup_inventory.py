"""Evidence that only inventories the setup (a package listing, os-release, uname, a tool's version) never makes a
report HEALTHY: it says what is installed, not that the GPUs work (GH005, NO DIAGNOSIS). The listings below are
hand-written in each tool's format; the nvidia-smi table and the two-driver dpkg listing are real (the corpus)."""

from __future__ import annotations

import pytest

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from listings_data import REAL_EXAMPLES, listing

CLEAN_DPKG = """\
Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)
||/ Name                          Version                       Architecture Description
+++-=============================-=============================-============-===============================
ii  libnvidia-compute-535:amd64   535.183.01-0ubuntu0.22.04.1   amd64        NVIDIA libcompute package
ii  nvidia-dkms-535               535.183.01-0ubuntu0.22.04.1   amd64        NVIDIA DKMS package
ii  nvidia-driver-535             535.183.01-0ubuntu0.22.04.1   amd64        NVIDIA driver metapackage
ii  nvidia-utils-535              535.183.01-0ubuntu0.22.04.1   amd64        NVIDIA driver support binaries
"""
INVENTORIES = {
    "dpkg-list": CLEAN_DPKG,
    "rpm-qa": "nvidia-driver-535.183.01-1.el9.x86_64\nkmod-nvidia-latest-dkms-535.183.01-1.el9.x86_64\n",
    "pip-list": "Package    Version\n---------- -------\ntorch      2.3.0+cu121\nnumpy      1.26.4\n",
    "os-release": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
}
SMI_TABLE = "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid"


def _report(*pieces: tuple[str, str]):
    snapshot, log = analyze_texts(list(pieces))
    return run_checks(snapshot), log


@pytest.mark.parametrize("kind", sorted(INVENTORIES))
def test_a_clean_inventory_alone_is_no_diagnosis(kind):
    report, log = _report((f"{kind}.txt", INVENTORIES[kind]))
    assert [r.kind for r in log] == [kind]
    assert report.verdict == "NO DIAGNOSIS" and report.exit_code == 3
    gh005 = next(f for f in report.findings if f.code == "GH005")
    assert kind in gh005.message and any("nvidia-smi" == fix.command for fix in gh005.fixes)


def test_inventories_together_are_still_no_diagnosis():
    report, _ = _report(("dpkg.txt", CLEAN_DPKG), ("os-release", INVENTORIES["os-release"]))
    assert report.verdict == "NO DIAGNOSIS"


def test_an_inventory_with_the_gpus_state_can_be_healthy():
    smi = (CORPUS / SMI_TABLE).read_text()
    alone, _ = _report(("nvidia-smi.txt", smi))
    assert alone.verdict == "HEALTHY"
    both, _ = _report(("nvidia-smi.txt", smi), ("dpkg.txt", CLEAN_DPKG))
    assert both.verdict == "HEALTHY" and "GH005" not in {f.code for f in both.findings}


def test_a_problem_in_the_inventory_decides_the_verdict():
    """A dpkg listing with two driver versions installed (GH509): that warning is the verdict, not NO DIAGNOSIS."""
    name = REAL_EXAMPLES["dpkg-list"]
    report, _ = _report((name, listing(name)))
    codes = {f.code for f in report.findings}
    assert "GH509" in codes and "GH005" in codes
    assert report.verdict == "DEGRADED"


@pytest.mark.parametrize("lines", [3, 4])
def test_an_nvidia_smi_table_cut_after_its_header_is_only_the_setup(lines):
    """`nvidia-smi | head -3` (the real table above, cut): the driver and its CUDA, no GPU, so never HEALTHY."""
    smi = (CORPUS / SMI_TABLE).read_text()
    head = "\n".join(line for line in smi.splitlines() if line.strip()[:1] in "+|")
    cut = "\n".join(head.splitlines()[:lines]) + "\n"
    report, log = _report(("nvidia-smi.txt", cut))
    assert report.verdict == "NO DIAGNOSIS" and "GH005" in {f.code for f in report.findings}
    assert [r.kind for r in log] == ["smi-table header"]


@pytest.mark.parametrize("text", [
    "SecureBoot enabled\n",  # mokutil --sb-state
    '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n',
])
def test_a_hosts_configuration_alone_is_only_the_setup(text):
    """Secure Boot on, or a container runtime set up for the GPUs, says nothing of whether they work: NO DIAGNOSIS
    with GH005, never HEALTHY."""
    report = run_checks(analyze_texts([("paste.txt", text)])[0])
    assert report.verdict != "HEALTHY"
    assert any(f.code == "GH005" for f in report.findings)


# A container runtime's configuration as its daemon reports it, and the GPUs a node advertises to the scheduler,
# are setup too: a correct one shows no GPU computing (the device plugin counts devices, it runs no work on them).
CONFIG_REPORTS = {
    "docker-info": "docker-info/handwritten_nvidia-registered.txt",
    "kubectl-describe-node": "kubectl-describe-node/handwritten_gpu-node-eight-gpus.txt",
    "daemon-json": "daemon-json/docker-for-linux-1531_nvidia-default.json",
}


@pytest.mark.parametrize("kind", sorted(CONFIG_REPORTS))
def test_a_correct_runtime_or_node_report_alone_is_no_diagnosis(kind):
    report, log = _report((f"{kind}.txt", listing(CONFIG_REPORTS[kind])))
    assert [r.kind for r in log] == [kind]
    assert report.verdict == "NO DIAGNOSIS", [f.code for f in report.findings]


def test_a_runtime_report_that_shows_a_fault_still_says_so():
    report, _ = _report(("crictl-info.json", listing("crictl-info/handwritten_nvidia-not-default.json")))
    assert report.verdict == "DEGRADED" and "GH802" in {f.code for f in report.findings}
