"""Text out is inert (issue 24 item 8, issue 25 item 6): escape sequences from evidence never reach a terminal raw.

Evidence is written by strangers: a process name in an Xid line is whatever its owner named the process, a
trace's GPU-lost reason or bus id whatever the file says. Each test feeds the same hostile text through one
real route (a pasted kernel log, a bundle's dmesg, a pasted terminal session, a replayed trace) into the real
command line and reads every text output: no control character other than newline and tab may be left, and
the hostile text must show as escapes (so the test knows it went through). JSON keeps the exact text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import CORPUS
from gpuhealth.bundle import RecordingHost
from gpuhealth.cli import main
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec
from repo_paths import REPO

# OSC 0 (window title, ended by BEL), OSC 52 (writes the clipboard, ended by ST), clear screen, hidden text,
# and the 8-bit CSI (U+009B, which some terminals act on like ESC [).
HOSTILE = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x1b\\\x1b[2J\x1b[8mhidden\x9b31m"
SHOWN = "\\x1b]0;owned"  # how the start of HOSTILE looks once made visible
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
RAW_SEQUENCES = ("\x1b]0;", "\x1b]52;", "\x1b[2J", "\x1b[8m", "\x9b", "\x07")
TEXT_FORMATS = ("text", "markdown")
MACHINE_FORMATS = ("nhc", "npd", "junit", "prometheus")  # single-line or escaped formats: clean as well

# A real Xid line (gpud's dmesg capture, tests/data/corpus/gpud) whose process is given the hostile name.
DMESG = CORPUS / "gpud/query_log_tail__dmesg.0.log"


def hostile_dmesg() -> str:
    text = DMESG.read_text()
    assert "name=python3.10, Ch 00000008" in text
    return text.replace("name=python3.10", "name=python3.10" + HOSTILE)


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), input=stdin, env=env)


def assert_inert(text: str, where: str) -> None:
    match = RAW_CONTROL.search(text)
    assert match is None, f"{where}: raw {match[0]!r} in ...{text[max(0, match.start() - 80):match.end() + 40]!r}"


def assert_all_outputs_inert(args: list[str], *, stdin: str | None = None) -> None:
    """Every text and machine format of one report: inert, the hostile text visible in the text ones,
    exact in JSON."""
    for fmt in TEXT_FORMATS + MACHINE_FORMATS:
        result = run(*args, "--format", fmt, stdin=stdin)
        assert result.exit_code in (0, 1, 2), (fmt, result.output)  # prometheus and nhc have their own codes
        assert_inert(result.output, fmt)
        if fmt in TEXT_FORMATS:
            assert SHOWN in result.output, (fmt, result.output)
    result = run(*args, "--format", "json", stdin=stdin)
    assert any(HOSTILE in text for text in strings(json.loads(result.output))), "JSON lost the exact text"


def strings(value: object) -> list[str]:
    """Every string in a parsed JSON document."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    return [text for item in value for text in strings(item)] if isinstance(value, list) else []


def test_analyze_a_pasted_kernel_log_whose_process_name_holds_escapes(tmp_path):
    path = tmp_path / "dmesg.txt"
    path.write_text(hostile_dmesg())
    assert_all_outputs_inert(["analyze", str(path)])
    assert_all_outputs_inert(["analyze", "-"], stdin=hostile_dmesg())


def test_check_from_a_bundle_whose_dmesg_holds_escapes(tmp_path):
    spec = load_spec("h100x8-xid-ecc")
    spec["commands"]["dmesg --time-format iso"] = {"stdout": hostile_dmesg()}
    recorder = RecordingHost(FakeHost(spec), tmp_path / "bundle", hostname="gpu-node-17")
    collect(recorder)
    recorder.finish()
    assert_all_outputs_inert(["check", "--from", str(tmp_path / "bundle")])


def test_the_text_report_on_a_colour_terminal_keeps_its_own_styles_but_no_hostile_sequence(tmp_path):
    """On a terminal rich adds its own SGR codes (ESC [ ... m): those stay, the evidence's sequences do not."""
    path = tmp_path / "dmesg.txt"
    path.write_text(hostile_dmesg())
    result = run("analyze", str(path), env={"FORCE_COLOR": "1", "TERM": "xterm-256color"})
    assert "\x1b[" in result.output  # styled: this really is the terminal path
    assert not [s for s in RAW_SEQUENCES if s in result.output]
    assert SHOWN in result.output


def test_a_pasted_terminal_session_and_analyze_verbose_notes(tmp_path):
    session = (
        "user@gpu01:~$ sudo dmesg --time-format iso | grep -i xid\n"
        + "".join(line + "\n" for line in hostile_dmesg().splitlines() if "Xid" in line)
        + f"user@gpu01:~$ cat /proc/driver/nvidia/version{HOSTILE}\n"
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:18 UTC 2024\n"
    )
    assert_all_outputs_inert(["analyze", "-"], stdin=session)
    verbose = run("analyze", "-", "-v", stdin=session)  # -v lists each piece (its command line) on stderr
    assert verbose.exit_code == 2, verbose.output
    assert_inert(verbose.stderr, "analyze -v notes")
    assert_inert(verbose.stdout, "analyze -v report")


def test_error_lines_quoting_input_are_inert(tmp_path):
    missing = run("analyze", str(tmp_path / f"no-such{HOSTILE}.log"))
    assert missing.exit_code == 3 and "No such file" in missing.output
    assert_inert(missing.output, "analyze error")
    unknown = run("explain", f"GH9{HOSTILE}")
    assert unknown.exit_code == 3
    assert_inert(unknown.output, "explain error")


# --------------------------------------------------------------------------- a replayed trace


def hostile_trace(tmp_path: Path) -> Path:
    """The shipped trace where GPU 1 is lost, then GPU 2 vanishes, with the hostile text in the GPU-lost
    reason, the GPUs' names, bus ids and UUIDs (the gpu_count alert names the vanished GPU by them)."""
    lines = []
    for line in (REPO / "examples/alerts/gpu-lost-then-vanished.trace").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "lost":
            record["reason"] += HOSTILE
        if record.get("kind") == "sample":
            record["name"] = record.get("name", "") + HOSTILE
            record["uuid"] = record.get("uuid", "") + HOSTILE
            record["pci_address"] = record.get("pci_address", "") + HOSTILE
        lines.append(json.dumps(record))
    path = tmp_path / "hostile.trace"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """The hostile trace run through `monitor` (alerts on stderr and in a log file, history in a database)."""
    tmp = tmp_path_factory.mktemp("replay")
    trace = hostile_trace(tmp)
    log = tmp / "alerts.log"
    config = tmp / "monitor.toml"
    config.write_text(f'[notify]\nlog_file = "{log}"\nstderr = true\n')
    result = run("monitor", "--source", f"replay:{trace}", "--replay-speed", "0", "--interval", "0.05",
                 "--db", str(tmp / "history.db"), "--config", str(config))
    assert result.exit_code == 0, result.output
    return tmp, trace, result


def test_monitor_alert_lines_are_inert(replayed):
    tmp, _, result = replayed
    assert "lost" in result.stderr and SHOWN in result.stderr  # the lost GPU's alert quotes the reason
    assert_inert(result.output, "monitor stderr")
    log = (tmp / "alerts.log").read_text()
    assert SHOWN in log
    assert_inert(log, "monitor log file")


def test_watch_renders_a_hostile_trace_inert(replayed):
    _, trace, _ = replayed
    result = run("watch", "--source", f"replay:{trace}", "--replay-speed", "0", "--interval", "0.05")
    assert result.exit_code == 0, result.output
    assert "LOST" in result.output and "\\x1b" in result.output
    assert_inert(result.output, "watch")


def test_history_and_usage_of_a_hostile_trace_are_inert(replayed):
    tmp, _, _ = replayed
    db = str(tmp / "history.db")
    for args in (["history", "--db", db, "--since", "3650d"], ["usage", "--db", db, "--since", "3650d"]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert_inert(result.output, args[0])


def test_notifier_text_is_one_inert_line_and_webhook_json_is_exact():
    from gpuhealth.monitor.notify import format_line, to_json
    from gpuhealth.monitor.rules import Alert

    alert = Alert("gpu_lost", 1, "critical", "firing", f"GPU 1 lost: GPU is lost\n{HOSTILE}", 1764583320.0)
    line = format_line(alert)
    assert "\n" not in line and SHOWN in line
    assert_inert(line, "format_line")
    assert to_json(alert)["message"] == alert.message


def test_fleet_table_shows_node_names_and_findings_as_text(capsys):
    from gpuhealth.web.fleet import Row, _table

    rows = [Row("critical", f"node-7[link=https://x.example/]{HOSTILE}", "0", f"Xid 79 [bold]{HOSTILE}", "check",
                "reboot", "node_unusable")]  # a row that drains: its node is named again on the "Drain:" line
    _table(rows, 1, "http://prometheus:9090")
    out = capsys.readouterr().out
    assert_inert(out, "fleet")
    assert "[link=https://x.example/]" in out and "[bold]" in out  # markup in evidence is shown, not obeyed
