"""parse_p2p_bandwidth / parse_simple_p2p: CUDA's peer-to-peer samples, as their printf calls lay them out.

The files under tests/data/p2p are hand-written from NVIDIA/cuda-samples' source (their README says which lines);
the inline texts here are written the same way.
"""

from __future__ import annotations

import time

import pytest

from conftest import DATA
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError
from gpuhealth.parsers.cuda_p2p import (
    MAX_GPUS,
    parse_p2p_bandwidth,
    parse_p2p_test,
    parse_simple_p2p,
    sample_line,
)

P2P = DATA / "p2p"
FILES = sorted(P2P.glob("*.txt"))


def _pair(test, src, dst):
    return next(p for p in test.pairs if (p.src, p.dst) == (src, dst))


def test_bandwidth_matrices_per_pair():
    test = parse_p2p_bandwidth((P2P / "p2pBandwidthLatencyTest_2x_pcie_p2p_slower.txt").read_text())
    assert test.program == "p2pBandwidthLatencyTest"
    assert [(d.index, d.name, d.pci_bus, d.pci_domain) for d in test.devices] == [
        (0, "NVIDIA RTX A6000", 0x1, 0), (1, "NVIDIA RTX A6000", 0x41, 0)]
    pair = _pair(test, 0, 1)
    assert (pair.access, pair.uni_disabled, pair.uni_enabled, pair.bi_disabled, pair.bi_enabled) == (
        True, 20.42, 2.37, 27.13, 3.05)
    assert {(p.src, p.dst) for p in test.pairs} == {(0, 1), (1, 0)}  # the diagonal is not a pair


def test_latency_matrices_do_not_overwrite_bandwidth():
    """The latency matrices (GPU and CPU headers) follow the bandwidth ones; their values are microseconds."""
    test = parse_p2p_bandwidth((P2P / "p2pBandwidthLatencyTest_4x_pcie_healthy.txt").read_text())
    assert len(test.pairs) == 12
    assert all(p.uni_enabled == 25.12 and p.bi_disabled == 24.8 for p in test.pairs)


def test_peer_access_from_the_connectivity_matrix_and_the_can_lines():
    text = (P2P / "p2pBandwidthLatencyTest_4x_nvlink_pairs_no_p2p_across.txt").read_text()
    test = parse_p2p_bandwidth(text)
    assert _pair(test, 0, 1).access is True and _pair(test, 0, 2).access is False
    # the matrix alone says the same as the CAN/CANNOT lines
    only_matrix = "\n".join(line for line in text.splitlines() if not line.startswith("Device="))
    assert _pair(parse_p2p_bandwidth(only_matrix), 3, 1).access is False


def test_p2p_reads_matrices_are_not_taken_for_writes():
    """``--p2p_read`` adds "(P2P Reads)" matrices after the writes' ones: the writes' values stay."""
    text = (P2P / "p2pBandwidthLatencyTest_2x_pcie_p2p_slower.txt").read_text()
    reads = ("Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)\n   D\\D     0      1 \n"
             "     0 671.00  99.00 \n     1  99.00 671.00 \n")
    text = text.replace("Bidirectional P2P=Disabled", reads + "Bidirectional P2P=Disabled", 1)
    assert _pair(parse_p2p_bandwidth(text), 0, 1).uni_enabled == 2.37


def test_older_title_without_writes_and_pasted_indentation():
    """Older toolkits titled the enabled matrix without "(P2P Writes)"; a paste may indent every line."""
    text = ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n   D\\D     0      1 \n     0 300.00  10.00 \n"
            "     1  10.00 300.00 \nUnidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n   D\\D     0      1 \n"
            "     0 300.00   1.00 \n     1   1.00 300.00 \n")
    test = parse_p2p_bandwidth("\n".join("    " + line for line in text.splitlines()))
    assert (_pair(test, 1, 0).uni_disabled, _pair(test, 1, 0).uni_enabled) == (10.0, 1.0)


def test_a_matrix_ends_at_the_next_line_that_is_not_a_row():
    text = ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n   D\\D     0      1 \n     0 300.00  10.00 \n"
            "some words 5 6\n     1  10.00 300.00 \n")
    test = parse_p2p_bandwidth(text)
    assert {(p.src, p.dst) for p in test.pairs} == {(0, 1)}


def test_simple_p2p_failed_verification():
    test = parse_simple_p2p((P2P / "simpleP2P_2x_verification_failed.txt").read_text())
    assert test.program == "simpleP2P" and test.result == "failed"
    assert _pair(test, 0, 1).access is True
    assert len(test.verification_errors) == 12 and test.verification_errors[0].startswith("Verification error @")
    assert "Enabling peer access between GPU0 and GPU1..." in test.lines


def test_simple_p2p_passed_and_no():
    test = parse_simple_p2p((P2P / "simpleP2P_2x_passed.txt").read_text())
    assert test.result == "passed" and not test.verification_errors
    waived = parse_simple_p2p(
        "> Peer access from Tesla K80 (GPU0) -> Quadro P400 (GPU1) : No\n"
        "> Peer access from Quadro P400 (GPU1) -> Tesla K80 (GPU0) : No\n"
        "Two or more GPUs with Peer-to-Peer access capability are required for ./simpleP2P.\n"
        "Peer to Peer access is not available amongst GPUs in the system, waiving test.\n")
    assert waived.result == "waived" and _pair(waived, 1, 0).access is False


def test_dispatch_and_own_lines():
    assert parse_p2p_test((P2P / "simpleP2P_2x_passed.txt").read_text()).program == "simpleP2P"
    assert parse_p2p_test((P2P / "p2pBandwidthLatencyTest_4x_pcie_healthy.txt").read_text()).devices
    assert sample_line("NOTE: The CUDA Samples are not meant for performance measurements. Results may vary ...")
    assert sample_line("[./simpleP2P] - Starting...")
    assert not sample_line("P2P is much slower than without it, any idea?")


@pytest.mark.parametrize("text", ["", "hello\n", "P2P Connectivity Matrix\n", "> Peer access from x : Maybe\n",
                                  "Device=\u00b2 CAN Access Peer Device=1\n",  # a digit int() refuses
                                  "> Peer access from a (GPU\u00b2) -> b (GPU1) : Yes\n"])
def test_nothing_read_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_p2p_test(text)


def test_many_gpus_are_bounded_and_linear():
    """A 16-GPU matrix is read whole; columns past MAX_GPUS are dropped; a huge row costs a linear pass."""
    n = 16
    rows = "".join(f"{i:6d} " + "".join(f"{5.0 if i != j else 500.0:6.2f} " for j in range(n)) + "\n"
                   for i in range(n))  # the sample's printf("%6d ") and printf("%6.02f ")
    header = "   D\\D" + "".join(f"{j:6d} " for j in range(n)) + "\n"
    test = parse_p2p_bandwidth("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n" + header + rows)
    assert len(test.pairs) == n * (n - 1)
    wide = MAX_GPUS + 50
    big = ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n   D\\D " + " ".join(map(str, range(wide))) + "\n"
           + "     0 " + "1.00 " * 200_000 + "\n")
    start = time.process_time()
    test = parse_p2p_bandwidth(big)
    assert time.process_time() - start < 1.0
    assert max(p.dst for p in test.pairs) < MAX_GPUS


test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(
    only_parse_errors(parse_p2p_test, parse_p2p_bandwidth, parse_simple_p2p), [p.read_text() for p in FILES])
