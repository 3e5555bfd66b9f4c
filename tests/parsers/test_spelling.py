"""Spelling tolerance for a person's words (parsers/spelling.py, analyze.py ``_read_misspelt``).

Every line here is written for the test; the catalogue rows they reach are NVIDIA's messages as the catalogue cites
them (docker's "Unknown runtime specified nvidia", NVML's "Driver/library version mismatch").
"""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.spelling import _ENGLISH, _one_edit, _pattern_words, corrected, vocabulary

RUNTIME_TYPO = "docker: Error response from daemon: Unknow runtime specified nvidia."


def test_the_vocabulary_comes_from_the_readers_tables():
    known, _ = vocabulary()
    assert {"nvidia", "runtime", "driver", "module", "unknown", "failed", "mismatch"} <= known


@pytest.mark.parametrize(("typed", "meant"), [
    ("Unknow runtime specified", "Unknown runtime specified"),  # a letter left out
    ("the kernal module", "the kernel module"),  # a letter replaced
    ("version missmatch", "version mismatch"),  # a letter doubled
    ("the nvidia drvier", "the nvidia driver"),  # two neighbours swapped (Damerau: one edit)
    ("RUNTIEM", "RUNTIME"),  # the case as typed is kept
])
def test_a_word_one_edit_from_one_known_word_is_corrected(typed, meant):
    assert corrected(typed) == meant


def test_a_word_two_edits_away_is_left_alone():
    assert not _one_edit("rnutiem", "runtime")
    assert corrected("the rnutiem is gone") == "the rnutiem is gone"


def test_a_word_one_edit_from_two_known_words_is_left_alone():
    known, _ = vocabulary()
    assert {"failed", "fails"} <= known  # "faild" is one edit from both: which one was meant is not known
    assert corrected("nvidia-smi has faild") == "nvidia-smi has faild"


@pytest.mark.parametrize("line", [
    "driver 535.104.O5 installed",  # a version, even with a letter in it
    "cuda12.1 and cudnn9.1",  # identifiers with digits
    "/usr/lib/nvidai/libcuda.so",  # a path
    "nvidai_uvm was not loaded",  # an identifier with an underscore
    "cudaMaloc returned an error",  # a mixed-case name
    "libcuda.so.1 libnvidai.so",  # file names
    "at 0xdeadbef",  # hex
])
def test_numbers_paths_and_identifiers_are_never_corrected(line):
    fixed = corrected(line)
    for chunk in line.split():
        if any(c.isdigit() or c in "/_." for c in chunk) or not (chunk.islower() or chunk.istitle()):
            assert chunk in fixed.split()


def test_short_and_common_english_words_are_never_corrected():
    known, _ = vocabulary()
    english = sorted(_ENGLISH - known)
    # some of them are one edit from a word the readers know ("doing" from "going"): kept as typed all the same
    assert any(_one_edit(word, other) for word in english for other in known if len(other) >= 4)
    assert [corrected(word) for word in english] == english
    assert "dkms" in known
    assert corrected("the dkmz build") == "the dkmz build"  # 4 letters: too short to be sure


def test_a_misspelt_catalogue_line_is_read_as_the_reporters_words():
    snapshot, log = analyze_texts([("note.txt", RUNTIME_TYPO + "\n")])
    (message,) = snapshot.messages
    assert message.signature == "docker-unknown-runtime-specified"
    assert message.reported and message.line == RUNTIME_TYPO  # the evidence is the line as typed
    assert any("the message they retype" in r.note for r in log)
    report = run_checks(snapshot)
    (finding,) = [f for f in report.findings if f.code == "GH802"]
    assert finding.severity is Severity.WARNING and finding.labels.get("reported") == "words"
    assert any(e.source == "note.txt (the reporter's words)" for e in finding.evidence)


def test_a_symptom_told_with_a_typo_is_read():
    snapshot, _ = analyze_texts([("note.txt", "nvidia-smi takes forver to show anything\n")])
    assert [(m.symptom, m.reported) for m in snapshot.messages] == [("nvidia-smi-slow", True)]


def test_a_line_read_as_typed_is_not_read_again():
    line = "Failed to initialize NVML: Driver/library version mismatch, the kernal was updated"
    snapshot, log = analyze_texts([("note.txt", line + "\n")])
    assert [m.signature for m in snapshot.messages] == ["nvml-driver-library-mismatch"]
    assert not any("retype" in r.note for r in log)


def test_a_programs_output_is_never_corrected():
    session = f"$ docker run --rm --gpus all ubuntu nvidia-smi\n{RUNTIME_TYPO}\n"
    snapshot, log = analyze_texts([("session.txt", session)])
    assert all(m.signature is None and not m.reported for m in snapshot.messages)
    assert not any("retype" in r.note for r in log)


def test_correcting_is_linear_in_the_line():
    line = "kernal " * 500  # a long line of one typo: each word is looked up once
    assert corrected(line) == "kernel " * 500
    assert corrected("kernal " * 1000) == "kernal " * 1000  # a line no person typed is left as it is


def test_a_retyped_message_need_not_keep_the_programs_capitals():
    from gpuhealth.knowledge.signatures import match_line, match_retyped

    line = "since the update docker says unknown runtime specified nvidia"
    assert match_line(line) is None  # the row reads the program's "Unknown runtime"
    assert match_retyped(line).id == "docker-unknown-runtime-specified"
    assert match_retyped(line.replace("since", "sínce")) is None  # only ASCII lines are folded
    snapshot, _ = analyze_texts([("note.txt", line + "\n")])
    read = [(m.signature, m.reported, m.line) for m in snapshot.messages]
    assert read == [("docker-unknown-runtime-specified", True, line)]


def test_a_typo_and_lost_capitals_together():
    line = "docker run stops with: unknow runtime specified nvidia, any idea?"
    snapshot, _ = analyze_texts([("note.txt", line + "\n")])
    assert [(m.signature, m.reported) for m in snapshot.messages] == [("docker-unknown-runtime-specified", True)]


def test_a_programs_output_keeps_its_case():
    session = "$ nvidia-smi\nnvidia-smi has failed because it couldn't communicate with the nvidia driver\n"
    snapshot, _ = analyze_texts([("session.txt", session)])
    assert not any(m.reported for m in snapshot.messages)


def test_words_raise_a_checks_own_finding_no_higher_than_a_warning():
    """A check that does not read the lines keeps its finding; a critical row's line in the reporter's words raises it
    to a warning at most (a program's line of that row raises it to critical)."""
    from gpuhealth.checks.diagnosis import _signature_findings, judges_lines
    from gpuhealth.model import Finding, MessageLine

    assert not judges_lines("GH802")
    own = Finding("GH802", "container-toolkit-missing", Severity.INFO, "the check's own words",
                  action="fix_host_software", impact="degraded")
    for reported, severity in ((True, Severity.WARNING), (False, Severity.CRITICAL)):
        line = MessageLine("docker: Unknown runtime specified nvidia.", "note.txt", "docker-unknown-runtime-specified",
                           "container-no-gpu", reported=reported)
        (finding,) = _signature_findings([own], [line], {"GH802"}, {})
        assert finding.severity is severity and finding.message == "the check's own words"


def test_a_patterns_stems_are_no_words():
    """A group of stems glued to a wildcard ("(?:cycl|toggl|bounc)\\w{0,6}", parsers/prose.py) spells no word: the
    real word "toggle" was once 'corrected' to the stem "toggl"."""
    assert _pattern_words(r"->|\b(?:cycl|flap|toggl|bounc)\w{0,6}") == set()
    assert "toggl" not in vocabulary()[0]
    assert corrected("the GPU toggle option disappeared") == "the GPU toggle option disappeared"
