"""Reports and tables in 80 columns (issue 24 item 4).

Every test host's text report, rendered at 80 columns (plain and -v), has no line over 80 except the one kind
that is never wrapped: a command (a fix, a "to tell" or "run these next" command: pasted, a wrapped line would run
as two). A line of evidence quoted from a log wraps at its blanks, under a deeper indent (tests/
test_report_width_cases.py holds the dev cases to the same). Which lines are commands is worked out here from the
report's own data, not from how the renderer styled them. A finding's headline is one clause of at
most 100 characters, and the lines under it keep every word of the message. `checks`, `usage` and `recommend` at
COLUMNS=80 have no line over 80; piped (no COLUMNS, not a terminal) nothing is wrapped.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from gpuhealth.checks.diagnosis import next_commands as next_commands_for
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.model import Report
from gpuhealth.report import text
from gpuhealth.report.common import fixes_for_host, next_commands
from hostcases import FakeHost, case_names, load_spec

WIDTH = 80
HEADLINE = re.compile(r"(CRITICAL|WARNING |INFO    ) GH\d{3} ")


def report_for(name: str) -> Report:
    return run_checks(collect(FakeHost(load_spec(name)), origin="bundle"))


def rendered(report: Report, width: int = WIDTH, verbose: bool = False) -> str:
    buffer = io.StringIO()
    text.render(report, Console(file=buffer, width=width, highlight=False, color_system=None), verbose=verbose)
    return buffer.getvalue()


def exempt_lines(report: Report) -> set[str]:
    """What may be wider than the terminal: each command as printed."""
    found = set(next_commands(report))
    for finding in report.findings:
        found |= {" ".join(fix.command.split()) for fix in fixes_for_host(finding, report.snapshot)}
        found |= {" ".join(fix.command.split()) for fix in finding.fixes}
        found |= set(next_commands_for((finding,), report.snapshot.commands_given))
    return {line for line in found if line}


def words(message: str) -> list[str]:
    return message.replace("…", " ").split()


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
@pytest.mark.parametrize("name", case_names())
def test_every_host_report_fits_80_columns_outside_commands(name, verbose):
    report = report_for(name)
    output = rendered(report, verbose=verbose)
    exempt = exempt_lines(report)
    for line in output.splitlines():
        if len(line) <= WIDTH:
            continue
        body = line.strip().removeprefix("to tell: ")
        assert body in exempt, f"{name}: {len(line)} columns and not a command:\n{line}"


@pytest.mark.parametrize("name", case_names())
def test_headlines_are_short_and_the_message_loses_nothing(name):
    report = report_for(name)
    output = rendered(report)
    flat = " ".join(output.split())
    for finding in report.findings:
        headline, rest, facts = text.split_message(finding.message)
        assert len(headline) <= text.HEADLINE_CHARS, (name, finding.code, headline)
        assert headline.strip() and not headline.endswith((";", ","))
        # every word of the message is in the headline, the rest or a fact line ...
        kept = words(" ".join([headline, rest, *(value for _, value in facts)]))
        for word in words(finding.message):
            assert word in kept or word.rstrip(";,") in kept or word == "-" or re.fullmatch(r"x\d+|next:|first|last|at",
                                                                                             word.rstrip(",")), \
                (name, finding.code, word)
    # ... and on the page: each root cause's headline follows its severity, code and subject
    heads = [line for line in output.splitlines() if HEADLINE.match(line)]
    assert heads or not report.findings
    for finding in report.findings:
        headline = text.split_message(finding.message)[0]
        assert " ".join(headline.split()) in flat, (name, finding.code)


def test_counts_times_and_next_action_have_lines_of_their_own():
    """The issue's example: GH301 glued the time onto the advice ("... clears it at 2024-11-15T12:02:03...")."""
    output = rendered(report_for("h100x8-xid-ecc"))
    lines = output.splitlines()
    xid48 = next(i for i, line in enumerate(lines) if "Xid 48 (ROBUST_CHANNEL_GPU_ECC_DBE)" in line)
    block = lines[xid48:lines.index("", xid48)]
    assert "    at: 2024-11-15T12:02:03,470068+00:00" in block
    assert any(line.startswith("    next: follow NVIDIA's Xid 48 workflow") for line in block)
    assert not any("clears it at 2024" in line for line in block)
    xid94 = next(i for i, line in enumerate(lines) if "Xid 94 (ROBUST_CHANNEL_CONTAINED_ERROR)" in line)
    block = lines[xid94:lines.index("", xid94)]
    for expected in ("    seen: 9 times", "    first: 2024-11-15T12:02:03,506595+00:00",
                     "    last: 2024-11-15T12:02:03,638794+00:00", "    next: restart the application"):
        assert expected in block, block


@pytest.mark.parametrize("message,headline", [
    ("Xid 94 (X): meaning of it x3, first 2024-01-01T00:00:00,0+00:00, last 2024-01-01T00:00:01,0+00:00 - next: act",
     "Xid 94 (X): meaning of it"),
    ("GPU 0000:3b:00.0 has fallen off the bus at 1234.567890", "GPU 0000:3b:00.0 has fallen off the bus"),
    # " at " before words that are not a time stays in the sentence
    ("the module is loaded at boot by the initramfs", "the module is loaded at boot by the initramfs"),
])
def test_split_message(message, headline):
    assert text.split_message(message)[0] == headline


def test_a_long_clause_is_cut_at_its_last_clause_end_within_100_characters():
    message = ("Secure Boot is enabled and /var/lib/dkms/mok.pub is not enrolled (mokutil --test-key): the kernel "
               "refuses modules signed with it until it is imported with mokutil and confirmed at the next boot")
    headline, rest, facts = text.split_message(message)
    assert headline == "Secure Boot is enabled and /var/lib/dkms/mok.pub is not enrolled (mokutil --test-key):"
    assert rest.startswith("the kernel refuses modules") and facts == []


@pytest.mark.parametrize("folder", ["", "a-folder-deep-enough/that-the-bundle-path/alone-is/longer-than-80-columns"])
def test_the_command_line_wraps_at_columns_and_not_when_piped(tmp_path, folder):
    """`check --from` of the shipped bundle: at COLUMNS=80 the same rules hold; piped (no COLUMNS, not a terminal)
    nothing is wrapped, so each clause of a finding stays on one line for grep. The closing line's
    `gpuhealth fix --from BUNDLE` is a command: whole on one line however long the bundle's path."""
    shipped = Path(__file__).parent.parent / "examples" / "h100x8-xid-ecc.tar.gz"
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    bundle = str(tmp_path / folder / shipped.name)
    Path(bundle).write_bytes(shipped.read_bytes())
    runner = CliRunner()
    narrow = runner.invoke(main, ["check", "--from", bundle], env={"COLUMNS": "80"})
    piped = runner.invoke(main, ["check", "--from", bundle], env={"COLUMNS": ""})
    assert narrow.exit_code == piped.exit_code == 2, narrow.output
    assert all(len(line) <= WIDTH or line.startswith(" " * 6) for line in narrow.output.splitlines())
    assert "  driver 535.161.08" in narrow.output  # the host line, wrapped at its " · "
    assert any(line.startswith("gpu-node") and line.endswith("8 GPUs") for line in piped.output.splitlines())
    for output in (narrow.output, piped.output):
        assert any(f"gpuhealth fix --from {bundle}" in line for line in output.splitlines()), output
    # the same words, only laid out anew (a comment continued on the next line is a comment again: one more "#");
    # the closing paragraph names the same command in two forms ("; run `CMD` for a script", or CMD on its own line)
    def body(output: str) -> list[str]:
        return sorted(w for w in output.rstrip().rpartition("\n\n")[0].split() if w != "#")

    assert body(narrow.output) == body(piped.output)


# --------------------------------------------------------------------------- the other tables


def over(output: str, width: int = WIDTH) -> list[str]:
    return [line for line in output.splitlines() if len(line) > width]


def test_checks_fits_80_columns_and_is_one_line_a_check_piped():
    runner = CliRunner()
    narrow = runner.invoke(main, ["checks"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0 and over(narrow.output) == []
    piped = runner.invoke(main, ["checks"], env={"COLUMNS": ""})
    codes = re.findall(r"^  (GH\d{3})  ", piped.output, re.M)
    assert len(codes) == len([line for line in piped.output.splitlines() if line.startswith("  GH")]) > 70
    assert re.findall(r"^  (GH\d{3})  ", narrow.output, re.M) == codes
    assert " ".join(narrow.output.split()) == " ".join(piped.output.split())  # the same words, wrapped


@pytest.mark.parametrize("args", [
    ["recommend", "--gpu", "H100 80GB HBM3", "--gpu", "RTX 5090", "--gpu", "10de:1db1", "--os", "ubuntu-22.04"],
    ["recommend", "--from", str(Path(__file__).parent.parent / "examples" / "h100x8-xid-ecc.tar.gz")],
], ids=["planned", "bundle"])
def test_recommend_fits_80_columns_and_keeps_its_commands_whole(args):
    runner = CliRunner()
    narrow = runner.invoke(main, args, env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    assert [line for line in over(narrow.output) if not line.startswith("  ")] == []
    piped = runner.invoke(main, args, env={"COLUMNS": ""})
    commands = [line for line in piped.output.splitlines() if re.match(r"  (sudo|pip|curl|wget) ", line)]
    assert commands and all(command in narrow.output.splitlines() for command in commands)
    assert over(narrow.output) == [c for c in commands if len(c) > WIDTH]
    # nothing cut ("…"): the addresses of the sources fold at the edge and table cells wrap, so the characters are
    # compared, not their order (a wrapped comment adds a "#")
    def kept(output: str) -> Counter:
        return Counter(char for char in output if not char.isspace() and char != "#")

    assert "…" not in narrow.output and kept(narrow.output) == kept(piped.output)


def test_usage_fits_80_columns_with_every_value_whole(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "monitor"))
    from test_monitor_usage import _past_start, _store

    _store(tmp_path, _past_start()).close()
    runner = CliRunner()
    for extra in ([], ["--price", "2.5"]):
        args = ["usage", "--db", str(tmp_path / "h.db"), "--since", "3d", *extra]
        narrow = runner.invoke(main, args, env={"COLUMNS": "80"})
        assert narrow.exit_code == 0 and over(narrow.output) == [], narrow.output
        assert "…" not in narrow.output
        days = re.findall(r"\d{4}-\d\d-\d\d", narrow.output)
        assert len(days) == 4  # each row's day whole
        piped = runner.invoke(main, args, env={"COLUMNS": ""})
        assert re.findall(r"\d{4}-\d\d-\d\d", piped.output) == days
        # piped, the table is one line per day at its natural width
        assert len([line for line in piped.output.splitlines() if re.search(r"\d{4}-\d\d-\d\d", line)]) == 4
