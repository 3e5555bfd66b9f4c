"""The dev cases' text reports at 80 columns: no line over 80 but a command, and every command printed unbroken.

Each dev case (tests/cases/dev: evidence as users posted it, with its long log lines, tabs and tracebacks) is read as
`gpuhealth analyze` reads it and rendered at 80 columns, plain and -v, and piped (unwrapped). A line over 80 columns
must be a command: a fix, a "to tell" command, a "paste these next" command or the closing `gpuhealth fix FILES`.
Evidence quoted from the paste wraps at its blanks under a deeper indent, keeping every character; each command the
piped report prints on a line of its own is on a line of its own, whole, at 80 columns too.
"""

from __future__ import annotations

import io
import re
from collections import Counter

import pytest
from rich.console import Console

from caseset import case_folders, load_case
from gpuhealth import inert
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import next_commands as next_commands_for
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence_input import read_evidence
from gpuhealth.model import Evidence, Finding, Report, Severity
from gpuhealth.report import text
from gpuhealth.report.common import fixes_for_host, next_commands
from gpuhealth.termwidth import UNWRAPPED

WIDTH = 80
FIX = "gpuhealth fix"
_CLOSING_COMMAND = re.compile(r"run `(?P<command>[^`]+)` for a script")


def _report(folder) -> Report:
    case = load_case(folder)
    return run_checks(analyze_texts([(str(p), read_evidence(str(p)).content) for p in case.evidence])[0])


def _rendered(report: Report, width: int, verbose: bool = False) -> str:
    buffer = io.StringIO()
    console: Console = inert.console(file=buffer, width=width, highlight=False, color_system=None)
    text.render(report, console, verbose=verbose, fix_command=f"{FIX} evidence.txt")
    return buffer.getvalue()


def _commands(report: Report) -> set[str]:
    """Every command the report may print, as printed (blanks collapsed)."""
    found = set(next_commands(report)) | {f"{FIX} evidence.txt"}
    for finding in report.findings:
        found |= {fix.command for fix in (*finding.fixes, *fixes_for_host(finding, report.snapshot)) if fix.is_command}
        found |= set(next_commands_for((finding,), report.snapshot.commands_given))
    return {" ".join(command.split()) for command in found}


def _body(line: str) -> str:
    return line.strip().removeprefix("to tell:").strip()


FOLDERS = case_folders("dev")


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_a_dev_cases_report_fits_80_columns_outside_its_commands(folder):
    report = _report(folder)
    commands = _commands(report)
    for verbose in (False, True):
        narrow = _rendered(report, WIDTH, verbose)
        wide = [line for line in narrow.splitlines() if len(line) > WIDTH and _body(line) not in commands]
        assert wide == [], f"{folder.name}: lines over {WIDTH} columns that are no command"
    piped = _rendered(report, UNWRAPPED)
    printed = [_body(line) for line in piped.splitlines() if _body(line) in commands]
    narrow_lines = Counter(_body(line) for line in _rendered(report, WIDTH).splitlines())
    for command in printed:  # each command printed whole, on a line of its own, as often as piped
        assert narrow_lines[command] >= 1, f"{folder.name}: command broken at {WIDTH} columns: {command}"


def test_the_dev_cases_have_long_evidence_and_long_commands():
    """Not vacuous: the cases hold evidence lines and commands wider than 80 columns, and evidence with tabs."""
    long_evidence = long_commands = tabs = 0
    for folder in FOLDERS:
        report = _report(folder)
        lines = [line for f in report.findings for e in f.evidence for line in e.lines]
        long_evidence += sum(len(line) > WIDTH for line in lines)
        tabs += sum("\t" in line for line in lines)
        long_commands += sum(len(c) + 6 > WIDTH for c in _commands(report) if c in _rendered(report, UNWRAPPED))
        if long_evidence > 20 and long_commands > 20 and tabs:
            return
    pytest.fail(f"{long_evidence} long evidence lines, {long_commands} long commands, {tabs} lines with tabs")


def _one(lines: tuple[str, ...]) -> Report:
    """A report of one finding quoting ``lines``."""
    finding = Finding("GH301", "xid-errors", Severity.INFO, "an Xid", evidence=(Evidence("dmesg.txt", lines),),
                      action="none", impact="none")
    return Report(analyze_texts([("x.txt", "")])[0], (finding,), (), 1)


def test_a_quoted_line_wraps_at_its_blanks_keeping_every_character():
    line = ("2024-11-15T12:02:03,498753+00:00 NVRM: Xid (PCI:0000:19:00): 63, pid='<unknown>', name=<unknown>, "
            "Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate.")
    tabbed = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans- and more words"
    token = "x" * 100  # one word longer than a line: cut where the line ends
    report = _one((line, tabbed, token, "Assertion `0' failed in a program whose backquote is its own, not a command"))
    out = _rendered(report, WIDTH).splitlines()
    assert all(len(row) <= WIDTH for row in out), [row for row in out if len(row) > WIDTH]
    start = out.index(next(row for row in out if row.startswith("      2024-11-15")))
    block = [out[start]]
    for row in out[start + 1:]:
        if not row.startswith(" " * 8):
            break
        block.append(row)
    assert len(block) > 1 and all(row.startswith(" " * 8) for row in block[1:])  # continued deeper
    assert "".join(row.strip() for row in block).replace(" ", "") == line.replace(" ", "")
    assert any(row.startswith("      ACSCtl:   SrcValid+") for row in out)  # the tab as the console shows it
    piped = _rendered(report, UNWRAPPED).splitlines()
    assert f"      {line}" in piped  # piped, the line is whole


def test_json_and_markdown_do_not_depend_on_the_width(monkeypatch):
    from gpuhealth.report.formats import render

    report = _report(next(f for f in FOLDERS if "xid" in f.name))
    outputs = []
    for columns in ("80", "", "40"):
        monkeypatch.setenv("COLUMNS", columns)
        outputs.append([render(name, report)[0] for name in ("json", "markdown")])
    assert outputs[0] == outputs[1] == outputs[2]


def test_analyze_v_through_the_command_line_fits_80_columns_outside_commands():
    """`gpuhealth analyze -v` as a user runs it, at COLUMNS=80: the report and the lines -v adds on stderr (what each
    piece was taken for, with a case's long path) fit, commands aside; piped, each of those is one line."""
    import json

    from click.testing import CliRunner

    from gpuhealth.cli import main

    runner = CliRunner()
    for folder in FOLDERS[:12]:
        files = [str(p) for p in load_case(folder).evidence]
        narrow = runner.invoke(main, ["analyze", "-v", *files], env={"COLUMNS": "80"})
        document = json.loads(runner.invoke(main, ["analyze", "--format", "json", *files]).stdout)
        commands = set(document.get("next_commands", [])) | {f"{FIX} {' '.join(files)}"}
        commands |= {" ".join(fix["command"].split()) for f in document["findings"] for fix in f.get("fixes", [])}
        wide = [line for line in narrow.output.splitlines() if len(line) > WIDTH and _body(line) not in commands]
        assert wide == [], folder.name
        assert narrow.stderr.strip(), folder.name  # -v said what each piece was taken for
        piped = runner.invoke(main, ["analyze", "-v", *files], env={"COLUMNS": ""})
        assert all(line.startswith(tuple(files)) for line in piped.stderr.splitlines()), folder.name
