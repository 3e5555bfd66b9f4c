"""parse_pci_ids over the pci.ids excerpt, a hand-written database, and fuzzing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, mutated
from gpuhealth.model import ParseError
from gpuhealth.parsers.pci_ids import parse_pci_ids

PCI_IDS_FILES = corpus_files("pciids/*")
EXCERPT = CORPUS / "pciids" / "pci.ids.nvidia-10de-excerpt"


def test_corpus_has_pci_ids():
    assert PCI_IDS_FILES


@pytest.mark.parametrize("path", PCI_IDS_FILES, ids=corpus_id)
def test_corpus_file_parses(path: Path):
    devices = parse_pci_ids(path.read_text(errors="replace"))
    assert len(devices) > 100
    for device_id, name in devices.items():
        assert re.fullmatch(r"[0-9a-f]{4}", device_id)
        assert name and name == name.strip()


def test_nvidia_names():
    devices = parse_pci_ids(EXCERPT.read_text())
    assert "H100" in devices["2330"]
    assert devices["2330"] == "GH100 [H100 SXM5 80GB]"
    assert devices["20b2"] == "GA100 [A100 SXM4 80GB]"
    assert devices["2236"] == "GA102GL [A10]"
    assert devices["0020"] == "NV4 [Riva TNT]"
    assert "GB200" in devices["2941"]
    # subsystem lines ("\t\t1043 0200  V3400 TNT") and the class blocks ("\t00  VGA ...") are not devices
    assert "V3400 TNT" not in devices.values()
    assert "VGA compatible controller" not in devices.values()


def test_vendor_argument_forms():
    text = EXCERPT.read_text()
    assert parse_pci_ids(text, "0x10DE") == parse_pci_ids(text)
    assert parse_pci_ids(text, "15b3") == {}  # pci.ids, but that vendor is not in the excerpt
    with pytest.raises(ParseError):
        parse_pci_ids(text, "nvidia")


# Hand-written: a two-vendor pci.ids fragment with a subsystem line, a comment and a class block.
SMALL = """\
# comment
10de  NVIDIA Corporation
\t2330  GH100 [H100 SXM5 80GB]
\t\t10de 16c1  H100 SXM5 80GB
# a comment inside the vendor block
\t2331  GH100 [H100 PCIe]
15b3  Mellanox Technologies
\t1021  MT2910 Family [ConnectX-7]
C 03  Display controller
\t02  3D controller
"""


def test_small_database():
    assert parse_pci_ids(SMALL) == {"2330": "GH100 [H100 SXM5 80GB]", "2331": "GH100 [H100 PCIe]"}
    assert parse_pci_ids(SMALL, "15b3") == {"1021": "MT2910 Family [ConnectX-7]"}


@pytest.mark.parametrize("text", ["", "hello\n", "\t2330  GH100\n", "C 03  Display controller\n"])
def test_not_pci_ids(text: str):
    with pytest.raises(ParseError):
        parse_pci_ids(text)


# --------------------------------------------------------------------------- fuzzing

_TEXTS = [p.read_text(errors="replace") for p in PCI_IDS_FILES] or [SMALL]




def _only_parse_error(text: str, vendor: str = "10de") -> None:
    try:
        parse_pci_ids(text, vendor)
    except ParseError:
        pass


@FUZZ
@given(st.text(), st.text(max_size=8))
def test_fuzz_random_text(text: str, vendor: str):
    _only_parse_error(text, vendor)


@FUZZ
@given(mutated(_TEXTS))
def test_fuzz_mutated_corpus(text: str):
    _only_parse_error(text)
