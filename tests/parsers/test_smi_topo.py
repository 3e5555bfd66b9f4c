"""parse_smi_topo / parse_smi_topo_p2p against every topology matrix in the corpus, edge cases, fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError, TopologyLink
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.smi_topo import parse_smi_topo, parse_smi_topo_p2p

TOPO_FILES = [p for p in corpus_files("ml-engineering/topo-m_*.txt") if "legend" not in p.name]
P2P_FILES = corpus_files("ml-engineering/topo-p2p-*.txt")
BUNDLES = corpus_files("nvidia-gpu-exporter/linux-*.txt")
KINDS = re.compile(r"NV\d+|SYS|NODE|PHB|PXB|PIX")

ALL_TOPOS = [pytest.param(p.read_text(), id=corpus_id(p)) for p in TOPO_FILES] + [
    pytest.param(split_capture_bundle(p.read_text())["nvidia-smi topo -m"], id=corpus_id(p)) for p in BUNDLES
]

# The layout of a real topo -m with NICs (tabs, NIC rows without affinity, a NIC legend); no such
# capture with a redistributable license was found, so this one is written from that layout.
_WITH_NICS = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV12\tPXB\tSYS\t0-23,48-71\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tSYS\tPXB\t24-47,72-95\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPXB\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)


def parse(name: str):
    return parse_smi_topo((CORPUS / name).read_text())


def test_corpus_has_topologies():
    assert len(TOPO_FILES) >= 5 and len(ALL_TOPOS) >= 13


@pytest.mark.parametrize("text", ALL_TOPOS)
def test_every_topology_parses(text: str):
    topo = parse_smi_topo(text)
    n = len(topo.devices)
    assert n and topo.devices == tuple(f"GPU{i}" for i in range(n))
    assert len(topo.links) == n * (n - 1)
    assert all(KINDS.fullmatch(link.kind) for link in topo.links)
    assert set(topo.cpu_affinity) == set(topo.devices)
    assert all(re.fullmatch(r"[\d,-]+", cpus) for cpus in topo.cpu_affinity.values())


def test_eight_h100_nv18_with_hyperthread_ranges():
    topo = parse("ml-engineering/topo-m_8xH100_NV18_HT.txt")
    assert len(topo.devices) == 8
    assert {link.kind for link in topo.links} == {"NV18"}
    assert TopologyLink("GPU0", "GPU7", "NV18") in topo.links
    assert topo.cpu_affinity["GPU0"] == "0-51,104-155"
    assert topo.cpu_affinity["GPU7"] == "52-103,156-207"
    assert (topo.numa_affinity["GPU3"], topo.numa_affinity["GPU4"]) == ("0", "1")


def test_eight_a100_nv12_and_two_gpu_phb():
    assert {link.kind for link in parse("ml-engineering/topo-m_8xA100_NV12.txt").links} == {"NV12"}
    topo = parse("ml-engineering/topo-m_2gpu_PHB.txt")
    assert topo.links == (TopologyLink("GPU0", "GPU1", "PHB"), TopologyLink("GPU1", "GPU0", "PHB"))
    assert topo.numa_affinity == {}  # N/A
    assert topo.cpu_affinity == {"GPU0": "0-11", "GPU1": "0-11"}


def test_590_ansi_header_and_gpu_numa_id_column():
    path = next((p for p in BUNDLES if "h100-80gb" in p.name), None)
    if path is None:
        pytest.skip("no capture bundles")
    text = split_capture_bundle(path.read_text())["nvidia-smi topo -m"]
    assert "\x1b[4m" in text
    topo = parse_smi_topo(text)
    assert topo.devices == ("GPU0",) and topo.links == ()
    assert (topo.cpu_affinity, topo.numa_affinity) == ({"GPU0": "0-19"}, {"GPU0": "0"})


def test_nic_rows():
    topo = parse_smi_topo(_WITH_NICS)
    assert topo.devices == ("GPU0", "GPU1", "NIC0", "NIC1")
    assert TopologyLink("GPU0", "NIC0", "PXB") in topo.links and TopologyLink("NIC1", "GPU1", "PXB") in topo.links
    assert len(topo.links) == 12
    assert topo.cpu_affinity == {"GPU0": "0-23,48-71", "GPU1": "24-47,72-95"}  # NICs have none
    assert topo.numa_affinity == {"GPU0": "0", "GPU1": "1"}


def test_p2p_matrices():
    topo = parse_smi_topo_p2p((CORPUS / "ml-engineering/topo-p2p-r_8xH100_OK.txt").read_text())
    assert len(topo.devices) == 8 and len(topo.links) == 56 and {link.kind for link in topo.links} == {"OK"}
    topo = parse_smi_topo_p2p((CORPUS / "ml-engineering/topo-p2p-r_2xL4_CNS.txt").read_text())
    assert topo.links == (TopologyLink("GPU0", "GPU1", "CNS"), TopologyLink("GPU1", "GPU0", "CNS"))
    assert topo.cpu_affinity == {}


@pytest.mark.parametrize("path", P2P_FILES, ids=corpus_id)
def test_p2p_is_not_topo_m(path):
    with pytest.raises(ParseError, match="CPU Affinity"):
        parse_smi_topo(path.read_text())


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ((CORPUS / "ml-engineering/topo-m_legend.txt").read_text(), "not a topology header"),
    ("\tGPU0\tGPU1\tCPU Affinity\n", "no rows"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \n", "fewer cells"),
    ("\tGPU0\tGPU0\tCPU Affinity\nGPU0\t X \tNV1\t0-1\n", "not a topology header"),
    ("GPU 0: NVIDIA A100 (UUID: GPU-1)\n", "not a topology header"),
])
def test_bad_input_raises_parse_error(text: str, reason: str):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_smi_topo(text)


# --------------------------------------------------------------------------- fuzzing

_SAMPLES = [p.values[0] for p in ALL_TOPOS][:6] + [_WITH_NICS]


_parse_or_parse_error = only_parse_errors(parse_smi_topo, parse_smi_topo_p2p)
test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(_parse_or_parse_error, _SAMPLES)


@FUZZ
@given(st.lists(st.sampled_from(["GPU0", "GPU1", "NIC0", " X ", "NV4", "\t", "  ", "\n", "CPU Affinity", "0-3",
                                 "\x1b[4m", "\x1b[0m", "N/A"]), max_size=60).map("".join))
def test_fuzz_topology_like_text(text: str):
    _parse_or_parse_error(text)

