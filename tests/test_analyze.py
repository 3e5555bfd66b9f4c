"""`gpuhealth analyze` over the real corpus: what each file is taken for, and the findings it gives."""

from __future__ import annotations

import gzip
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from gpuhealth.analyze import EvidenceError, analyze_texts, decode_bytes, identify
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity

# What each corpus file must be recognised as (first matching pattern wins; None = not recognised).
EXPECTED_KIND = [
    (r"\.xml$", "smi-xml"),
    (r"nvidia-smi-q_|nvidia-smi-query|nvidia-smi_-q|nvsmi8_output", "smi-query"),
    (r"nvidia-smi_8xV100|nvidia-smi\.5\d\d\.", "smi-table"),
    (r"tesla-p100\.csv", "smi-csv"),
    (r"list_gpus", "smi-list"),
    (r"topo-m_(?!legend)", "smi-topo"),
    (r"topo-p2p", "smi-topo-p2p"),
    (r"nvlink", "smi-nvlink"),
    (r"lspci(?!_-t)", "lspci"),
    (r"lsmod", "lsmod"),
    (r"proc_driver_nvidia_version", "proc-version"),
    (r"pytorch-collect-env/", "collect-env"),
    (r"dmesg|kmsg|pstore|journalctl", "kernel-log"),
]
CONTAINERS = ("nvidia-bug-report.log", "nvidia-gpu-exporter/linux-", "output_ubuntu")


def expected_kind(name: str) -> str | None:
    return next((kind for pattern, kind in EXPECTED_KIND if re.search(pattern, name)), None)


ALL = [p for p in corpus_files("**/*") if not p.name.endswith(".md")]


@pytest.mark.parametrize("path", ALL, ids=corpus_id)
def test_every_corpus_file_is_analysed_without_crashing(path):
    snapshot, recognised = analyze_texts([(corpus_id(path), decode_bytes(path.name, path.read_bytes()))])
    report = run_checks(snapshot)
    assert not [f for f in report.findings if f.code == "GH001"], "a check raised on this evidence"
    name = corpus_id(path)
    if name.startswith(CONTAINERS):
        assert sum(1 for r in recognised if r.kind) >= 2, "a container file should yield several pieces"
        return
    kind = expected_kind(name)
    if kind is not None:
        assert [r.kind for r in recognised] == [kind], recognised
        assert not recognised[0].note, recognised[0].note


def _report(*names: str):
    texts = [(n, decode_bytes(n, (CORPUS / n).read_bytes())) for n in names]
    snapshot, _ = analyze_texts(texts)
    return run_checks(snapshot)


def test_ecc_xid_sequence_is_attributed_and_graded():
    report = _report("gpud/query_log_tail__dmesg.0.log")
    xids = {int(re.match(r"Xid (\d+)", f.message)[1]): f for f in report.findings if f.code == "GH301"}
    assert xids[48].severity is Severity.CRITICAL and xids[63].severity is Severity.INFO
    assert xids[94].subject.pci_address == "0000:19:00.0"
    assert "x" in xids[94].message and "first" in xids[94].message  # counted, with first/last time
    assert report.verdict == "BROKEN"


def test_application_xid_storm_is_summarised_and_never_critical():
    report = _report("gpud/dmesg__dmesg.decode.iso.log.0")
    xid13 = [f for f in report.findings if f.message.startswith("Xid 13")]
    assert xid13 and all(f.severity is not Severity.CRITICAL for f in xid13)
    assert all(len(e.lines) <= 4 for f in xid13 for e in f.evidence)  # storms are summarised
    assert report.verdict == "DEGRADED"


def test_gsp_timeout_xid_119_needs_a_reset():
    report = _report("gpud/accelerator_nvidia_error_xid__dmesg-with-xid-119.log")
    xid119 = next(f for f in report.findings if f.message.startswith("Xid 119"))
    assert xid119.severity is Severity.CRITICAL
    assert any("gpu-reset" in fix.command for fix in xid119.fixes)


def test_bug_report_gives_driver_gpu_and_pci_view():
    report = _report("nvidia-bug-report-352.63/nvidia-bug-report.log")
    snapshot = report.snapshot
    assert snapshot.driver.version == "352.63" and snapshot.driver.flavour == "proprietary"
    assert [g.name for g in snapshot.gpus] == ["GeForce GTX TITAN X"]
    assert [d.address for d in snapshot.nvidia_pci_gpus] == ["0000:06:00.0"]
    assert "GH102" not in {s.code for s in report.skipped}  # PCI and driver views were both there
    assert report.verdict == "HEALTHY"


def test_several_files_combine_into_one_report():
    report = _report("gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid",
                     "gpud/query_log_tail__dmesg.0.log")
    xid48 = next(f for f in report.findings if f.message.startswith("Xid 48"))
    assert xid48.subject.gpu_index == 0  # the kernel log's address matched the nvidia-smi GPU
    assert len(report.snapshot.gpus) == 8


def test_gzip_bug_report_and_bomb_guard(tmp_path, monkeypatch):
    raw = (CORPUS / "nvidia-bug-report-352.63/nvidia-bug-report.log").read_bytes()
    assert decode_bytes("r.gz", gzip.compress(raw)) == raw.decode("utf-8", errors="replace")
    import gpuhealth.analyze as analyze

    monkeypatch.setattr(analyze, "MAX_DECOMPRESSED", 1000)
    with pytest.raises(EvidenceError, match="decompresses to more than"):
        decode_bytes("r.gz", gzip.compress(raw))
    with pytest.raises(EvidenceError, match="corrupt gzip"):
        decode_bytes("r.gz", b"\x1f\x8b\x08garbage")


def test_unrecognised_file_is_named_not_fatal():
    snapshot, _ = analyze_texts([("notes.txt", "lunch at noon\nremember the milk\n")])
    report = run_checks(snapshot)
    assert [f.code for f in report.findings] == ["GH002"]
    assert "notes.txt" in report.findings[0].message


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_analyze_survives_any_text(text):
    snapshot, _ = analyze_texts([("paste", text)])
    run_checks(snapshot)
    identify(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ALL), st.integers(0, 10**6), st.integers(0, 10**6))
def test_analyze_survives_cut_real_files(path, start, length):
    text = path.read_text(errors="replace")
    start %= max(len(text), 1)
    snapshot, _ = analyze_texts([("cut", text[start:start + length % 20000])])
    report = run_checks(snapshot)
    assert not [f for f in report.findings if f.code == "GH001"]
