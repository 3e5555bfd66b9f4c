"""The severity of a cause told in words (docs/analyze.md, "Causes told in words"): alone, at most a warning; beside
a program's own critical line that it explains, the failure's severity, critical, still marked as the reporter's
words, with the explained finding kept in the report. The sentences and lines are written for these tests."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity

WORDS = ("notes.txt", "It turns out CUDA_VISIBLE_DEVICES was set to an empty string in the job's launcher.\n")
TORCH = ("traceback.txt", "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
         "    torch.zeros(1).cuda()\nRuntimeError: No CUDA GPUs are available\n")


def findings_of(*texts):
    return run_checks(analyze_texts(list(texts))[0]).findings


def test_a_told_cause_alone_is_a_warning():
    first = findings_of(WORDS)[0]
    assert (first.code, first.severity, first.labels.get("reported")) == ("GH608", Severity.WARNING, "words")


def test_a_told_cause_explaining_a_programs_critical_line_takes_its_severity_and_keeps_its_label():
    findings = findings_of(WORDS, TORCH)
    cause = next(f for f in findings if f.code == "GH608")
    assert cause.severity is Severity.CRITICAL and cause.labels.get("reported") == "words"
    assert "GH605" in cause.explains
    assert any(f.code == "GH605" and f.severity is Severity.CRITICAL for f in findings)


def test_words_alone_never_drain_and_a_programs_critical_line_still_does():
    """A drain follows impact (docs/actions.md). Words that tell a GPU missing, or its BARs unassigned, rest on nobody
    having seen the machine say it: the finding's impact is at most degraded, whatever its check's row says for the
    fault seen. Beside a program's own critical line, the told cause keeps the draining impact of what was seen."""
    told = [("notes.txt", "After the reboot GPU 3 is missing from nvidia-smi, only 7 of our 8 GPUs show up.\n"),
            ("notes.txt", "The firmware did not assign the GPU's BAR, its PCIe memory window is too small.\n")]
    for words in told:
        found = [f for f in findings_of(words) if f.labels.get("reported") == "words"]
        assert found, words
        draining = [(f.code, f.impact) for f in found if f.impact in ("node_unusable", "gpu_unusable")]
        assert not draining, draining
    cause = next(f for f in findings_of(WORDS, TORCH) if f.code == "GH608")
    assert cause.severity is Severity.CRITICAL and cause.labels.get("reported") == "words"
