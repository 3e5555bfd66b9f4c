"""GH003 ("error lines gpuhealth does not know") counts a program's error lines, not a person's sentences about an
error: a sentence that introduces a paste, a markdown list item of the reporter's, a sentence in which the person
speaks (parsers/prose.persons_line). Every line opening as a program's does (a level, a program's name and its level,
a timestamp, an exception's name, the driver's prefix) still counts, and a paste of such sentences alone is still NO
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
    "When attempting to start the service on the new host, errors like the following are produced:",
    "Later failures on the same node; we traced the error to a bad riser. Evidence:",
    "- Operating system: Rocky Linux 9.3 (same error on 9.2)",
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
])
def test_a_programs_error_line(line: str):
    assert not persons_line(line)


def test_the_sentences_around_a_paste_are_not_unknown_lines():
    text = ("When attempting to start the service on the new host, errors like the following are produced:\n\n"
            "```\nfrobd: error: cannot open /dev/frob0: Permission denied\n```\n\n"
            "Later failures on the same node; we traced the error to a bad riser. Evidence:\n\n"
            "- Operating system: Rocky Linux 9.3 (same error on 9.2)\n")
    result = report(text)
    assert unknown_lines(result) == ["frobd: error: cannot open /dev/frob0: Permission denied"]
    assert result.verdict != "HEALTHY"


def test_sentences_alone_are_no_diagnosis_not_healthy():
    text = ("When attempting to start the service on the new host, errors like the following are produced:\n\n"
            "- Operating system: Rocky Linux 9.3 (same error on 9.2)\n")
    result = report(text)
    assert "GH003" not in {f.code for f in result.findings}
    assert result.verdict == "NO DIAGNOSIS"


def test_an_unknown_program_line_among_prose_still_counts():
    text = "I upgraded the host yesterday.\nfoo: fatal: the frobnicator refused to start\n"
    result = report(text)
    assert unknown_lines(result) == ["foo: fatal: the frobnicator refused to start"]
