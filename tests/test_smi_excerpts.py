"""Pieces of ``nvidia-smi -q`` people paste: ``nvidia-smi -q | grep -A8 "GPU Link Info"``, ``nvidia-smi -q -d PCI``
cut below its GPU header line, and ``--query-gpu=pcie.link...`` CSV. They are PCIe link evidence for GH407, and
never the driver's whole list of GPUs: GH102 must not count them against the PCI bus.

The excerpts are cut here from real ``nvidia-smi -q`` captures in tests/data/corpus, the way grep cuts them
(``grep_after`` does what GNU ``grep -A`` prints, "--" between groups). A test that needs a narrow link changes
one width in such a cut and says so."""

from __future__ import annotations

import re

import pytest

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import identify
from gpuhealth.model import Severity, Snapshot
from gpuhealth.parsers.smi_csv import parse_smi_csv
from gpuhealth.parsers.smi_query import parse_smi_query

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")

A100X8 = "azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out"  # 8 GPUs, Gen4 x16 each
RTX4090 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.154.05.out.0.valid.4090"  # 8 GPUs: Gen1 of 4 at idle
A10 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.129.03.out.0.valid.a10"  # 1 GPU, Gen4 x16
TABLE_1GPU = "gpud/accelerator_nvidia_query__nvidia-smi.525.125.06.out.0.valid"
A100_LSPCI = "gpud/nvidia-query__lspci.nn.a100"  # `lspci -nn`: 8 A100 and 6 NVSwitch bridges
RETIRED_EXCERPT = "ml-engineering/nvidia-smi-q_excerpt_retired_pages_pending.txt"  # header-less, as posted


def grep_after(text: str, needle: str, after: int) -> str:
    """What ``grep -A<after> <needle>`` prints: each matching line and the ``after`` lines below it, groups that do
    not touch separated by a "--" line."""
    lines = text.splitlines()
    keep: list[int] = []
    for i, line in enumerate(lines):
        if needle in line:
            keep.extend(range(i, min(i + after + 1, len(lines))))
    out: list[str] = []
    last = None
    for i in sorted(set(keep)):
        if last is not None and i != last + 1:
            out.append("--")
        out.append(lines[i])
        last = i
    return "\n".join(out) + "\n"


def read(name: str) -> str:
    return (CORPUS / name).read_text(errors="replace")


def narrowed(excerpt: str, group: int, width: str) -> str:
    """The excerpt with the ``group``-th GPU's current link width changed (a test's own change to real output)."""
    groups = excerpt.split("--\n")
    groups[group] = re.sub(r"(Current\s+:\s*)16x", rf"\g<1>{width}", groups[group])
    return "--\n".join(groups)


def snapshot(*pieces: tuple[str, str]) -> Snapshot:
    return analyze_texts(list(pieces))[0]


def findings(snap: Snapshot, code: str):
    report = run_checks(snap, select=[code])
    return list(report.findings), [s.reason for s in report.skipped]


# --------------------------------------------------------------------------- reading the pieces

def test_a_grep_of_the_link_block_is_recognised_and_read_per_gpu():
    excerpt = grep_after(read(A100X8), "GPU Link Info", 8)
    assert excerpt.count("--\n") == 7
    assert identify(excerpt) == "smi-query"
    report = parse_smi_query(excerpt)
    assert report.partial
    assert [g.index for g in report.gpus] == list(range(8))
    assert {(g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) for g in report.gpus} == {
        (4, 4, 16, 16)}
    assert all(g.pci_address is None for g in report.gpus)


def test_one_gpu_s_link_block_names_no_index():
    """535+ prints "Device Current", "Device Max" and "Host Max" too: -A8 then stops before the width's Current,
    which people meet as a cut block; -A10 holds it."""
    (cut,) = parse_smi_query(grep_after(read(A10), "GPU Link Info", 8)).gpus
    assert (cut.pcie_width_max, cut.pcie_width_current) == (16, None)
    report = parse_smi_query(grep_after(read(A10), "GPU Link Info", 10))
    (gpu,) = report.gpus
    assert report.partial and gpu.index is None
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (4, 4, 16, 16)


def test_eight_idle_gpus_at_gen1_of_gen4_are_read_and_quiet():
    """Real: eight RTX 4090 at Gen1 of Gen4, x16 of x16, at idle (a lower generation is judged only under load)."""
    excerpt = grep_after(read(RTX4090), "GPU Link Info", 10)
    report = parse_smi_query(excerpt)
    assert [(g.index, g.pcie_gen_current, g.pcie_gen_max) for g in report.gpus] == [(i, 1, 4) for i in range(8)]
    found, skipped = findings(snapshot(("link.txt", excerpt)), "GH407")
    assert found == [] and skipped == []


def test_q_d_pci_cut_below_its_gpu_header_is_read_with_its_bus_id():
    """`nvidia-smi -q -d PCI` pasted from its "PCI" line down: the section's own "Bus Id" names the GPU."""
    text = read(A100X8)
    start = text.index("\n    PCI\n") + 1
    end = text.index("\n    Fan Speed", start)  # the next GPU-level key after the PCI section
    piece = text[start:end] + "\n"
    assert "GPU 0000" not in piece and identify(piece) == "smi-query"
    (gpu,) = parse_smi_query(piece).gpus
    assert gpu.pci_address and gpu.pci_address.endswith(":00.0")
    assert (gpu.pcie_width_current, gpu.pcie_width_max, gpu.pcie_gen_max) == (16, 16, 4)


def test_a_whole_report_is_not_partial_and_one_gpu_of_several_is():
    whole = read(A100X8)
    assert not parse_smi_query(whole).partial
    first_gpu_only = whole[:whole.index("\nGPU ", whole.index("\nGPU ") + 1)]  # what `nvidia-smi -q -i 0` prints
    report = parse_smi_query(first_gpu_only)
    assert len(report.gpus) == 1 and report.partial


def test_query_gpu_csv_of_the_link_fields_alone_is_recognised():
    """The header NVIDIA's `--help-query-gpu` names: no name/index column, so the sniff must know the link fields."""
    text = ("pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n"
            "1, 4, 16, 16\n4, 4, 8, 16\n")
    assert identify(text) == "smi-csv"
    gpus = parse_smi_csv(text).gpus
    assert [(g.pcie_gen_current, g.pcie_width_current, g.pcie_width_max) for g in gpus] == [(1, 16, 16), (4, 8, 16)]


# --------------------------------------------------------------------------- GH407

def test_a_pasted_link_grep_with_one_narrow_gpu_among_eight_is_a_warning():
    excerpt = narrowed(grep_after(read(A100X8), "GPU Link Info", 8), 3, "8x")
    session = f'$ nvidia-smi -q | grep -A8 "GPU Link Info"\n{excerpt}'
    (narrow,), skipped = findings(snapshot(("paste.txt", session)), "GH407")
    assert narrow.severity is Severity.WARNING and narrow.subject.gpu_index == 3
    assert "link width x8 of x16" in narrow.message


def test_a_single_narrow_link_block_is_info():
    excerpt = narrowed(grep_after(read(A10), "GPU Link Info", 10), 0, "4x")
    (narrow,), _ = findings(snapshot(("link.txt", excerpt)), "GH407")
    assert narrow.severity is Severity.INFO and "x4 of x16" in narrow.message


def test_the_link_block_fills_the_gpu_of_a_pasted_table_and_keeps_its_list():
    """`nvidia-smi` (the table, with the bus id) and the grep of one GPU's link block: one GPU, with both; the
    excerpt's richer format does not replace the table's list."""
    table = read(TABLE_1GPU)
    link = narrowed(grep_after(read(A10), "GPU Link Info", 10), 0, "8x")
    snap = snapshot(("nvidia-smi.txt", table), ("link.txt", link))
    assert snap.smi is not None and snap.smi.format == "table" and not snap.smi.partial
    (gpu,) = snap.gpus
    assert gpu.pci_address and (gpu.pcie_width_current, gpu.pcie_width_max) == (8, 16)
    (narrow,), _ = findings(snap, "GH407")
    assert narrow.subject.pci_address == gpu.pci_address


# --------------------------------------------------------------------------- GH102

@pytest.mark.parametrize("excerpt", [
    pytest.param(lambda: grep_after(read(A10), "GPU Link Info", 10), id="link-grep"),
    pytest.param(lambda: read(RETIRED_EXCERPT), id="retired-pages-excerpt"),
])
def test_an_excerpt_beside_an_lspci_of_eight_gpus_raises_no_missing_gpu(excerpt):
    """Before: "8 NVIDIA GPUs on the PCI bus, the driver lists 1" (critical) from an excerpt of one GPU's lines."""
    snap = snapshot(("smi.txt", excerpt()), ("lspci.txt", read(A100_LSPCI)))
    assert len(snap.nvidia_pci_gpus) == 8 and snap.gpu_list_partial
    found, skipped = findings(snap, "GH102")
    assert found == [] and "excerpt" in skipped[0]
    assert snap.gpu_count == 8


def test_a_whole_list_still_counts_against_the_pci_bus():
    """The rule GH102 keeps: `nvidia-smi -L` (no addresses) naming fewer GPUs than lspci is critical."""
    listing = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5e9a3c2f-0000-0000-0000-000000000000)\n"
    snap = snapshot(("smi-L.txt", listing), ("lspci.txt", read(A100_LSPCI)))
    (missing,), _ = findings(snap, "GH102")
    assert missing.severity is Severity.CRITICAL


@pytest.mark.parametrize(("command", "excerpt"), [
    ("nvidia-smi -i 0 --query-gpu=pcie.link.width.current,pcie.link.width.max --format=csv", True),
    ("sudo nvidia-smi --id=0 -q", True),  # a whole -q of one GPU: "Attached GPUs : 1" cannot tell
    ("nvidia-smi --query-gpu=pcie.link.width.current,pcie.link.width.max --format=csv", False),
])
def test_nvidia_smi_with_i_reports_the_gpus_it_selected_not_all(command, excerpt):
    """`-i`/`--id` selects GPUs: one row is not the driver's list. The CSV lines are written in the header format of
    NVIDIA's `--help-query-gpu`; the lspci listing is real (8 A100)."""
    output = "pcie.link.width.current, pcie.link.width.max\n8, 16\n" if "csv" in command else read(A10)
    snap = snapshot(("paste.txt", f"$ {command}\n{output}$ lspci -nn\n{read(A100_LSPCI)}"))
    assert snap.gpu_list_partial is excerpt
    found, _ = findings(snap, "GH102")
    assert (found == []) is excerpt


def test_two_excerpts_keep_the_gpus_of_the_one_showing_more():
    """`nvidia-smi | head -3` (versions, no GPU) and the link grep of eight GPUs: all eight kept, with the driver."""
    head = "".join(line + "\n" for line in read("gpud/accelerator_nvidia_query__nvidia-smi.525.125.06.out.0.valid")
                   .splitlines()[:3])
    excerpt = narrowed(grep_after(read(A100X8), "GPU Link Info", 8), 5, "4x")
    for order in ((("head.txt", head), ("link.txt", excerpt)), (("link.txt", excerpt), ("head.txt", head))):
        snap = snapshot(*order)
        assert snap.smi is not None and snap.smi.partial and snap.smi.driver_version == "525.125.06"
        assert len(snap.gpus) == 8
        (narrow,), _ = findings(snap, "GH407")
        assert narrow.subject.gpu_index == 5 and narrow.severity is Severity.WARNING
