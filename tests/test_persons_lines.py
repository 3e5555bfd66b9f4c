"""GH003 ("error lines gpuhealth does not know") counts a program's error lines, not a person's sentences about an
error: a sentence that introduces a paste, a markdown list item of the reporter's, a sentence in which the person
speaks (parsers/prose.persons_line). Every line opening as a program's does (a level, a program's name and its level,
a timestamp, an exception's name, the driver's prefix) still counts, and so does a person's sentence carrying a
program's message (after a colon, in quotes, an error code, a constant, an exception's name). A sentence left out of
GH003 is named as the reporter's words not read (GH002, with its lines), and a paste of such sentences alone is NO
DIAGNOSIS, never HEALTHY.

The sentences and lines are our own, written for these tests; none is taken from a case."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.parsers.prose import persons_line


def report(text: str):
    snapshot, _ = analyze_texts([("issue.md", text)])
    return run_checks(snapshot)


def unknown_lines(result) -> list[str]:
    return [line for f in result.findings if f.code == "GH003" for e in f.evidence for line in e.lines]


@pytest.mark.parametrize("line", [
    "Whenever we start the frob service on a fresh host, we get errors like these:",
    "Later failures on the same node; we traced the error to a bad riser. Evidence:",
    "- Distribution: Rocky Linux 9.3 (the same failure on 9.2)",
    "* Kernel: 5.14.0-362 (the build failed on the older one too)",
    "I keep getting the same error after every reboot",
    "Our nodes all fail the same way, the log shows this:",
])
def test_a_persons_sentence_about_an_error(line: str):
    assert persons_line(line)


@pytest.mark.parametrize("line", [
    "foo: fatal: the frobnicator refused to start",
    "frobd: error: cannot open /dev/frob0: Permission denied",
    "ERROR: the frobnicator failed to start",
    "E: Unable to locate package frobnicator",
    "[ERROR] frobnicator exited with status 3",
    "RuntimeError: the frobnicator refused to start",
    "2026-12-07 10:00:01 frobd failed to bind the device",
    "Dec  7 10:00:01 gpu01 kernel: NVRM: we failed to map the frame buffer",
    "W1207 10:00:01.123456    42 frob.go:88] cannot reach the frobnicator",
    "The above exception was the direct cause of the following exception:",
    "- Error: the frobnicator failed",  # a list item quoting a program's error
    "I/O error on the frobnicator's device",
    "I use `frobctl start` and get `frobctl: error: no such device`",  # the quoted program line is kept
    # a person's sentence carrying a program's message
    "my daemon then stops with: FATAL: the frob runtime refused to start, error 12",
    "our job then dies with: the frob runtime refused to start",
    "I keep getting error 17 when the frobnicator starts",
    "We see exit code 139 from the frob loader after every reboot",
    "I get FROB_ERROR_NOT_READY from the frob library on every start",
    "we get a FrobInitError as soon as the frobnicator loads",
    'I get "frobnicator not responding" on every node',
    "I get 'frob device unavailable' after the upgrade",
    "the frob library fails with ENODEV on my node",
    "- Kernel: 6.8 (the module fails with error -22)",
])
def test_a_programs_error_line(line: str):
    assert not persons_line(line)


def test_the_sentences_around_a_paste_are_not_unknown_lines():
    text = ("Whenever we start the frob service on a fresh host, we get errors like these:\n\n"
            "```\nfrobd: error: cannot open /dev/frob0: Permission denied\n```\n\n"
            "Later failures on the same node; we traced the error to a bad riser. Evidence:\n\n"
            "- Distribution: Rocky Linux 9.3 (the same failure on 9.2)\n")
    result = report(text)
    assert unknown_lines(result) == ["frobd: error: cannot open /dev/frob0: Permission denied"]
    assert result.verdict != "HEALTHY"


def test_sentences_alone_are_no_diagnosis_not_healthy():
    text = ("Whenever we start the frob service on a fresh host, we get errors like these:\n\n"
            "- Distribution: Rocky Linux 9.3 (the same failure on 9.2)\n")
    result = report(text)
    assert "GH003" not in {f.code for f in result.findings}
    assert result.verdict == "NO DIAGNOSIS"


def test_an_unknown_program_line_among_prose_still_counts():
    text = "I upgraded the host yesterday.\nfoo: fatal: the frobnicator refused to start\n"
    result = report(text)
    assert unknown_lines(result) == ["foo: fatal: the frobnicator refused to start"]


def words_not_read(result) -> list[str]:
    return [line for f in result.findings if f.code == "GH002" for e in f.evidence for line in e.lines]


def test_a_sentence_left_out_of_gh003_is_named_as_words_not_read():
    """A person's sentence about an error in a part of the post that something else was read in (a version stated in
    words) is not dropped: GH002 names it with its lines, and the report is NO DIAGNOSIS, not HEALTHY."""
    text = ("We traced the failure on our nodes to the frob riser after several weeks of tests.\n"
            "- Distribution: Rocky Linux 9.3 (the same failure on 9.2)\n")
    result = report(text)
    assert "GH003" not in {f.code for f in result.findings}
    assert "- Distribution: Rocky Linux 9.3 (the same failure on 9.2)" in words_not_read(result)
    assert any("riser" in line for line in words_not_read(result))
    assert result.verdict == "NO DIAGNOSIS"


def test_a_sentence_alone_is_no_diagnosis():
    result = report("I keep getting the same failure on every node after each reboot\n")
    assert "GH003" not in {f.code for f in result.findings}
    assert result.verdict == "NO DIAGNOSIS"


def test_a_sentence_carrying_a_programs_message_still_counts():
    text = "I upgraded the host yesterday.\nmy daemon then stops with: the frob runtime refused to start, error 12\n"
    result = report(text)
    assert unknown_lines(result) == ["my daemon then stops with: the frob runtime refused to start, error 12"]
    assert result.verdict != "HEALTHY"
