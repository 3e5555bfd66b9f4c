"""GH706 from what CUDA's peer-to-peer samples measured (checks/peer.py), and nvidia-smi topo -p2p kept apart from
topo -m. The sample outputs are hand-written from NVIDIA/cuda-samples' source (tests/data/p2p/README.md)."""

from __future__ import annotations

from conftest import DATA
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.peer import P2P_SLOW_FRACTION
from gpuhealth.model import Severity

P2P = DATA / "p2p"
SLOWER = "p2pBandwidthLatencyTest_2x_pcie_p2p_slower.txt"
# lspci -vvv of a PCI bridge whose ACS redirects peer requests and completions (the layout lspci prints)
ACS_ON = ("00:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge (prog-if 00 "
          "[Normal decode])\n\tCapabilities: [2a0 v1] Access Control Services\n"
          "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
          "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n")
TOPO_NV = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
           "GPU0\t X \tNV4\t0-31\t0\nGPU1\tNV4\t X \t0-31\t0\n")


def _report(*names: str, extra: tuple[tuple[str, str], ...] = ()):
    snapshot, _ = analyze_texts([(name, (P2P / name).read_text()) for name in names] + list(extra))
    return snapshot, run_checks(snapshot)


def _gh706(report):
    return [f for f in report.findings if f.code == "GH706"]


def test_p2p_enabled_far_below_disabled_is_gh706():
    snapshot, report = _report(SLOWER)
    (finding,) = _gh706(report)
    assert finding.severity is Severity.WARNING
    assert "P2P-enabled copies are below 50%" in finding.message and "1 GPU pair" in finding.message
    assert "PCIe ACS or the IOMMU" in finding.message
    (evidence,) = finding.evidence
    assert evidence.source == SLOWER and evidence.lines[0].startswith("GPU0 -> GPU1: P2P=Enabled 3.05 GB/s")
    assert report.findings[0].code == "GH706"


def test_acs_redirection_beside_the_measurement_is_critical():
    _, report = _report(SLOWER, extra=(("lspci-vvv.txt", ACS_ON),))
    (finding,) = _gh706(report)
    assert finding.severity is Severity.CRITICAL and "PCIe ACS redirects peer traffic" in finding.message
    assert any("ReqRedir+" in line for e in finding.evidence for line in e.lines)
    # the NCCL guide's setpci, written out for the bridge lspci -vvv shows redirecting
    (setpci,) = [f for f in finding.fixes if "setpci" in f.command]
    assert setpci.command == "sudo setpci -s 00:01.1 ECAP_ACS+0x6.w=0000" and setpci.kind == "command"
    assert setpci.disruptive and "does not persist across reboots" in setpci.note


def test_only_redirecting_bridges_get_a_setpci():
    """A bridge whose ACSCtl does not redirect, and a redirecting device that is not a PCI bridge, get none."""
    clean = ACS_ON.replace("00:01.1", "00:03.1").replace("ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+",
                                                        "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir-")
    endpoint = ACS_ON.replace("00:01.1 PCI bridge", "41:00.0 3D controller")
    snapshot, _ = analyze_texts([("lspci-vvv.txt", ACS_ON + clean + endpoint)])
    assert snapshot.p2p.acs_bridges == ("00:01.1",)


def test_the_setpci_fix_is_the_guides_and_says_it_does_not_persist():
    _, report = _report(SLOWER)
    (finding,) = _gh706(report)
    (setpci,) = [f for f in finding.fixes if "setpci" in f.command]
    assert setpci.command == "sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000"  # NCCL guide, PCI ACS section
    assert "does not persist across reboots" in setpci.note and setpci.disruptive


def test_threshold_is_half_of_the_staged_bandwidth():
    text = (P2P / SLOWER).read_text()
    # enabled at 60 % of disabled (20.42 -> 12.25; 27.13 -> 16.28): above the threshold, not judged slow
    assert P2P_SLOW_FRACTION == 0.5
    near = text.replace("  2.37 ", " 12.25 ").replace("  3.05 ", " 16.28 ")
    snapshot, _ = analyze_texts([("p2p.txt", near)])
    assert not _gh706(run_checks(snapshot))
    below = text.replace("  2.37 ", "  9.90 ").replace("  3.05 ", " 16.28 ")  # 48 % one way
    snapshot, _ = analyze_texts([("p2p.txt", below)])
    assert [f.severity for f in _gh706(run_checks(snapshot))] == [Severity.WARNING]


def test_nvlink_pairs_are_not_pcie_pairs():
    _, report = _report(SLOWER, extra=(("topo.txt", TOPO_NV),))
    assert not _gh706(report)


def test_healthy_and_no_peer_access_raise_nothing_and_read_as_understood():
    for name in ("p2pBandwidthLatencyTest_4x_pcie_healthy.txt",
                 "p2pBandwidthLatencyTest_4x_nvlink_pairs_no_p2p_across.txt", "simpleP2P_2x_passed.txt"):
        snapshot, report = _report(name)
        assert not _gh706(report), name
        assert "p2p" in snapshot.sources and not snapshot.unrecognized_files, name
        assert report.verdict == "HEALTHY", name


def test_simple_p2p_wrong_data_is_critical():
    _, report = _report("simpleP2P_2x_verification_failed.txt")
    (finding,) = _gh706(report)
    assert finding.severity is Severity.CRITICAL and "wrong data" in finding.message
    assert any("Verification error @ element 1" in line for e in finding.evidence for line in e.lines)


def test_a_session_routes_the_samples_by_their_command():
    text = (P2P / SLOWER).read_text()
    snapshot, _ = analyze_texts([("session.txt", "$ ./p2pBandwidthLatencyTest\n" + text)])
    assert snapshot.p2p is not None and snapshot.p2p.tests[0].program == "p2pBandwidthLatencyTest"


def test_topo_p2p_is_kept_apart_from_topo_m():
    """topo -p2p's OK/CNS cells are the driver's P2P answer, not how GPUs connect: GH702 still reads topo -m."""
    session = ("$ nvidia-smi topo -m\n" + TOPO_NV + "$ nvidia-smi topo -p2p r\n"
               "        GPU0    GPU1\n GPU0   X       OK\n GPU1   OK      X\n")
    snapshot, _ = analyze_texts([("session.txt", session)])
    assert {link.kind for link in snapshot.topology.links} == {"NV4"}
    assert snapshot.p2p.topo_p2p_capability == "read"
    assert {link.kind for link in snapshot.p2p.topo_p2p} == {"OK"}


def _matrix(title: str, values: dict[tuple[int, int], float], n: int) -> str:
    """A bandwidth matrix as the sample's printf calls lay it out ("%6d ", "%6.02f ")."""
    rows = [title, "   D\\D" + "".join(f"{j:6d} " for j in range(n))]
    rows += [f"{i:6d} " + "".join(f"{values.get((i, j), 500.0 if i == j else 20.0):6.2f} " for j in range(n))
             for i in range(n)]
    return "\n".join(rows) + "\n"


def test_cuda_numbers_are_matched_to_nvidia_smi_by_pci_bus():
    """CUDA may number GPUs otherwise than nvidia-smi (fastest first): the sample's pciBusID says which is which, so
    the NVLink pair of topo -m (nvidia-smi's numbers) is found whatever CUDA calls it."""
    smi = ("index, name, pci.bus_id\n0, NVIDIA RTX A6000, 00000000:01:00.0\n1, NVIDIA RTX A6000, 00000000:41:00.0\n"
           "2, NVIDIA RTX A6000, 00000000:81:00.0\n")
    topo = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV4\tSYS\t0-31\t0\nGPU1\tNV4\t X \tSYS\t0-31\t0\nGPU2\tSYS\tSYS\t X \t32-63\t1\n")
    devices = "".join(f"Device: {i}, NVIDIA RTX A6000, pciBusID: {bus}, pciDeviceID: 0, pciDomainID:0\n"
                      for i, bus in enumerate(("81", "41", "1")))  # CUDA 0 is nvidia-smi's GPU2, CUDA 2 its GPU0
    slow = {(0, 1): 2.0, (1, 0): 2.0, (1, 2): 2.0, (2, 1): 2.0}  # CUDA 0-1 is PCIe, CUDA 1-2 the NVLink pair
    sample = (devices + _matrix("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", {}, 3)
              + _matrix("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", slow, 3))
    snapshot, _ = analyze_texts([("smi.csv", smi), ("topo.txt", topo), ("p2p.txt", sample)])
    (finding,) = _gh706(run_checks(snapshot))
    (evidence,) = finding.evidence
    assert {line.split(":")[0] for line in evidence.lines} == {"GPU0 -> GPU1", "GPU1 -> GPU0"}


def test_two_samples_pasted_together_are_both_read():
    snapshot, report = _report(SLOWER, "simpleP2P_2x_verification_failed.txt")
    assert [t.program for t in snapshot.p2p.tests] == ["p2pBandwidthLatencyTest", "simpleP2P"]
    (finding,) = _gh706(report)
    assert finding.severity is Severity.CRITICAL and "wrong data" in finding.message
    assert any(line.startswith("GPU0 -> GPU1: P2P=Enabled") for e in finding.evidence for line in e.lines)


def test_a_sample_that_stopped_on_a_failed_call_is_never_healthy():
    # written from p2pBandwidthLatencyTest's cudaCheckError() format ("Cuda failure %s:%d: '%s'"): the sample read
    # the devices and the CAN lines, then a peer call failed; its parser reads no failure, so the line is not judged
    text = ("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
            "Device: 0, NVIDIA GeForce RTX 3090, pciBusID: 1, pciDeviceID: 0, pciDomainID:0\n"
            "Device: 1, NVIDIA GeForce RTX 3090, pciBusID: 21, pciDeviceID: 0, pciDomainID:0\n"
            "Device=0 CAN Access Peer Device=1\nDevice=1 CAN Access Peer Device=0\n"
            "Cuda failure p2pBandwidthLatencyTest.cu:178: 'peer access is not supported between these two devices'\n")
    snapshot, _ = analyze_texts([("p2p.txt", text)])
    report = run_checks(snapshot)
    assert report.verdict != "HEALTHY"
    assert any("Cuda failure" in line for f in report.findings if f.severity is not Severity.INFO
               for e in f.evidence for line in e.lines)
