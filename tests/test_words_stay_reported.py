"""What rests on a person's words stays reported (issue 21, SESSION rule "words are not machine output").

Sentences here are written for the test; the ACSCtl line has the shape `lspci -vvv` prints for a bridge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity

ROOT = Path(__file__).resolve().parent.parent

HANG = "Our DDP job hangs at the first all_reduce across the 8 GPUs.\n"
ACS_OFF = ("00:01.0 PCI bridge: Intel Corporation Device 1234\n"
           "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n")


def _report(*named: tuple[str, str]):
    snapshot, _ = analyze_texts(list(named))
    return run_checks(snapshot)


def test_a_catalogue_row_for_words_alone_is_a_reported_warning():
    report = _report(("note.txt", "the nouveau module is still loaded after a reboot\n"))
    (finding,) = [f for f in report.findings if f.code == "GH206"]
    assert finding.severity is Severity.WARNING and finding.labels.get("reported") == "words"
    assert any(e.source == "note.txt (the reporter's words)" for e in finding.evidence)


def test_a_hang_told_in_words_does_not_rule_out_acs():
    """GH706 needs the ACS or IOMMU setting to judge: a failure alone leaves it open (skipped, never clean)."""
    report = _report(("note.txt", HANG))
    assert "GH706" in {s.code for s in report.skipped}
    ruled_out = [c for f in report.findings for c in f.differential if c.code == "GH706" and c.status == "ruled out"]
    assert ruled_out == []


def test_the_acs_setting_shown_lets_gh706_judge():
    report = _report(("note.txt", HANG), ("lspci-vvv.txt", ACS_OFF))
    assert "GH706" not in {s.code for s in report.skipped}


def test_a_whole_lspci_vvv_gives_the_acs_redirection():
    """The bridges' ACSCtl lines of a full `lspci -vvv` (a listing the lspci parser reads) reach GH706."""
    redirecting = ACS_OFF.replace("ReqRedir- CmpltRedir-", "ReqRedir+ CmpltRedir+")
    report = _report(("note.txt", HANG), ("lspci-vvv.txt", redirecting))
    assert [f.severity for f in report.findings if f.code == "GH706"] == [Severity.CRITICAL]


def test_a_sentence_after_a_programs_output_is_read_not_dropped():
    """A person's sentence pasted below lspci's rows is not lspci's: it is read as words (here an error line nobody
    knows), so the report is not HEALTHY on the rows alone."""
    paste = ("$ lspci -nn | grep -i nvidia\n"
             "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] "
             "(rev a1)\n"
             "Since the upgrade my training script cannot find the GPU at all and I do not know why.\n")
    report = _report(("session.txt", paste))
    assert report.verdict != "HEALTHY"
    assert any("training script" in line for f in report.findings for e in f.evidence for line in e.lines)


@pytest.mark.parametrize("path", [
    "tests/data/corpus/pytorch-collect-env/pytorch-issue-84365_could-not-collect.txt",  # "Clang version: Could not ..."
    "tests/cases/dev/cpu-only-pytorch-oobabooga-installer-80/collect_env.txt",  # a report that ends on such a field
    "tests/data/corpus/gpud/accelerator_nvidia_query_pci__lspci-vvv",  # "Interrupt: pin A routed to IRQ 140"
    "tests/cases/dev/not-a-fault-persistenced-registered-started/syslog.log",  # a journal's own timestamped lines
])
def test_a_programs_own_sentence_like_lines_are_not_a_persons(path):
    """Real outputs whose own lines read like sentences: none is taken for a person's words left unread (GH002)."""
    text = (ROOT / path).read_text()
    snapshot, _ = analyze_texts([(path, text)])
    assert not [u for u in snapshot.unrecognized_files if "prose beside" in u]


def test_a_sentence_below_a_collect_env_report_is_still_a_persons():
    text = (ROOT / "tests/cases/dev/cpu-only-pytorch-oobabooga-installer-80/collect_env.txt").read_text()
    snapshot, _ = analyze_texts([("issue.txt", text + "I tried this with the latest driver and it did not help.\n")])
    assert any("prose beside" in u for u in snapshot.unrecognized_files)


def test_a_message_quoted_in_a_question_is_the_reporters_words():
    # a thread title that asks about PyTorch's warning (written here): the message stops at the person's "?"
    asked = _report(("notes.txt", "Error running my trainer, Unexpected error from cudaGetDeviceCount()?\n"))
    found = next(f for f in asked.findings if f.code == "GH605")
    assert found.severity is Severity.WARNING
    assert any("the reporter's words" in e.source for e in found.evidence)
    # PyTorch's own line (c10/cuda/CUDAFunctions.cpp's format) goes on after the message, even where it ends in "?"
    printed = _report(("log.txt", "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did "
                                  "you run some cuda functions before calling NumCudaDevices() that might have already "
                                  "set an error?\n"))
    assert next(f for f in printed.findings if f.code == "GH605").severity is Severity.CRITICAL
