"""GH604 and a daemon started with ``--no-persistence-mode``: read live (the unit's MainPID from ``systemctl show``,
then ``/proc/<pid>/cmdline``; its ExecStart when /proc cannot be read), kept in a snapshot bundle and read back by
``check --from``, and read from a pasted ``ps aux`` / ``ps -ef`` row; and each way reading it can fail.

Test hosts are FakeHosts (tests/hostcases.py) made from tests/hosts/a100x8-persistenced-no-persistence-mode.json: the
real 8x A100 capture (persistence Disabled on all 8) with hand-written daemon evidence (see tests/hosts/README.md).
"""

from __future__ import annotations

import copy
import json
import time

import pytest
from click.testing import CliRunner
from hypothesis import given

from fuzzing import FUZZ, mutated, only_parse_error
from gpuhealth.analyze import analyze_texts
from gpuhealth.bundle import BundleHost, RecordingHost
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.evidence.registry import KINDS, identify, route
from gpuhealth.model import ParseError, Severity, Snapshot, from_jsonable, to_jsonable
from gpuhealth.parsers import services
from hostcases import FakeHost, load_spec
from listings_data import listing

HOST = "a100x8-persistenced-no-persistence-mode"
SHOW = "systemctl show -p MainPID -p ExecStart nvidia-persistenced"
FLAGGED = "/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose"
PLAIN = "/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose"
FORUM_PS = "ps-listing/forum-light-locker-xubuntu-1610_ps-auxf.txt"  # a real `ps auxf` (SOURCE.md there)
SMI_4_GPUS = "corpus:azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out"


def spec(**changes) -> dict:
    """The test host, with ``commands``/``files``/``file_errors`` entries replaced (None removes one)."""
    out = copy.deepcopy(load_spec(HOST))
    for section, entries in changes.items():
        target = out.setdefault(section, {})
        for key, value in entries.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
    return out


def checked(host_spec: dict):
    snapshot = collect(FakeHost(host_spec))
    return snapshot, [f for f in run_checks(snapshot).findings if f.code == "GH604"]


def show_output(pid: int, argv: str = FLAGGED) -> dict:
    return {"stdout": f"MainPID={pid}\nExecStart={{ path=/usr/bin/nvidia-persistenced ; argv[]={argv} ; "
                      "ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n"}


# --------------------------------------------------------------------------- live

def test_live_check_reads_the_running_daemons_command_line():
    snapshot, [gh604] = checked(load_spec(HOST))
    assert snapshot.cuda.persistenced_command == FLAGGED
    assert snapshot.cuda.persistenced_command_source == "/proc/2748/cmdline (the unit's MainPID)"
    assert gh604.severity is Severity.WARNING
    assert "Persistence mode is off on 8 of 8 GPU(s): nvidia-persistenced is active but was started with " \
           "--no-persistence-mode" in gh604.message
    assert any(e.source.startswith("/proc/2748/cmdline") and f"command line: {FLAGGED}" in e.lines
               for e in gh604.evidence)
    assert gh604.fixes[0].command == "sudo systemctl edit --full nvidia-persistenced"
    assert "sudo systemctl enable --now nvidia-persistenced" not in [f.command for f in gh604.fixes]


def test_before_this_the_live_check_stayed_silent():
    # the same host without the command line (what collection gathered before): the daemon is active, GH604 quiet
    snapshot, found = checked(spec(commands={SHOW: None}))
    assert snapshot.cuda.persistenced_active == "active" and snapshot.cuda.persistenced_command is None
    assert found == []
    assert snapshot.unavailable["cuda_persistenced_command"] == f"{SHOW}: not installed"


def test_the_process_is_read_over_the_units_configuration():
    # the unit was edited (ExecStart without the flag) but not restarted: what runs still has the flag
    snapshot, [gh604] = checked(spec(commands={SHOW: show_output(2748, PLAIN)}))
    assert snapshot.cuda.persistenced_command == FLAGGED and gh604.severity is Severity.WARNING
    # and the other way round: a process that runs without the flag keeps GH604 quiet
    plain = "\0".join(PLAIN.split()) + "\0"
    snapshot, found = checked(spec(files={"/proc/2748/cmdline": plain}))
    assert snapshot.cuda.persistenced_command == PLAIN and found == []


def test_unreadable_proc_falls_back_to_the_units_exec_start():
    denied = "permission denied: run as root (sudo)"
    snapshot, [gh604] = checked(spec(file_errors={"/proc/2748/cmdline": denied}))
    assert snapshot.cuda.persistenced_command == FLAGGED
    assert snapshot.cuda.persistenced_command_source == \
        f"systemctl show -p ExecStart nvidia-persistenced (/proc/2748/cmdline: {denied})"
    assert gh604.severity is Severity.WARNING
    # /proc mounted hidepid=2: another user's /proc/<pid> is not there at all
    snapshot, [_] = checked(spec(files={"/proc/2748/cmdline": None}))
    assert "(/proc/2748/cmdline: not present)" in snapshot.cuda.persistenced_command_source


def test_a_pid_now_used_by_another_program_is_not_taken_for_the_daemon():
    snapshot, _ = checked(spec(files={"/proc/2748/cmdline": "/usr/sbin/cron\0-f\0"}))
    assert snapshot.cuda.persistenced_command == FLAGGED  # ExecStart, not cron's command line
    assert "is another program's" in snapshot.cuda.persistenced_command_source


def test_nothing_readable_leaves_the_reason_and_no_finding():
    empty_unit = {"stdout": "MainPID=2748\nExecStart=\n"}
    denied = {"/proc/2748/cmdline": "permission denied"}
    snapshot, found = checked(spec(commands={SHOW: empty_unit}, file_errors=denied))
    assert snapshot.cuda.persistenced_command is None and found == []
    assert snapshot.unavailable["cuda_persistenced_command"] == \
        f"/proc/2748/cmdline: permission denied; {SHOW} names no ExecStart"
    hung = {"timed_out": True}
    snapshot, found = checked(spec(commands={SHOW: hung}))
    assert snapshot.unavailable["cuda_persistenced_command"].startswith(f"{SHOW}: timed out after")
    assert found == []


def test_daemon_absent_gets_the_enable_fix_and_no_command_line():
    # no unit: is-active says inactive, show answers MainPID=0 and an empty ExecStart (as systemd does)
    absent = spec(commands={"systemctl is-active nvidia-persistenced": {"stdout": "inactive\n", "exit_code": 3},
                            "systemctl is-enabled nvidia-persistenced": {"stdout": "not-found\n", "exit_code": 1},
                            SHOW: {"stdout": "MainPID=0\nExecStart=\n"}},
                  files={"/proc/2748/cmdline": None})
    snapshot, [gh604] = checked(absent)
    assert snapshot.cuda.persistenced_command is None
    assert "cuda_persistenced_command" not in snapshot.unavailable  # nothing runs: nothing was missed
    assert "nvidia-persistenced is inactive" in gh604.message
    assert "sudo systemctl enable --now nvidia-persistenced" in [f.command for f in gh604.fixes]
    # active, but systemd names no main process (it just ended): the configured command line is still known
    snapshot, [_] = checked(spec(commands={SHOW: show_output(0)}))
    assert snapshot.cuda.persistenced_command_source.endswith("(systemctl show gives no MainPID)")


# --------------------------------------------------------------------------- the bundle

def test_snapshot_bundle_keeps_it_and_check_from_reads_it_back(tmp_path):
    recorder = RecordingHost(FakeHost(load_spec(HOST)), tmp_path / "bundle", hostname="gpu-node-17")
    collect(recorder)
    recorder.finish()
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["files"]["/proc/2748/cmdline"] == {"bytes": len(FLAGGED) + 1}
    assert any(c["argv"] == SHOW.split() for c in manifest["commands"])
    result = CliRunner().invoke(main, ["check", "--from", str(tmp_path / "bundle"), "--format", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    [gh604] = [f for f in report["findings"] if f["code"] == "GH604"]
    assert "--no-persistence-mode" in gh604["message"] and gh604["severity"] == "warning"
    daemon = next(e for e in gh604["evidence"] if e["source"] == "/proc/2748/cmdline (the unit's MainPID)")
    assert f"command line: {FLAGGED}" in daemon["lines"]
    # the snapshot's new field survives its own JSON form too (drift's saved runs)
    snapshot = collect(BundleHost(tmp_path / "bundle"))
    again = from_jsonable(Snapshot, json.loads(json.dumps(to_jsonable(snapshot))))
    assert again.cuda.persistenced_command_source == snapshot.cuda.persistenced_command_source
    assert again.cuda == snapshot.cuda


def test_an_older_bundle_without_the_answer_says_so(tmp_path):
    recorder = RecordingHost(FakeHost(spec(commands={SHOW: None})), tmp_path / "old")
    collect(recorder)
    recorder.finish()
    manifest_path = tmp_path / "old" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["commands"] = [c for c in manifest["commands"] if c["argv"] != SHOW.split()]
    manifest_path.write_text(json.dumps(manifest))
    snapshot = collect(BundleHost(tmp_path / "old"))
    assert snapshot.unavailable["cuda_persistenced_command"] == f"{SHOW}: not captured in this bundle"


# --------------------------------------------------------------------------- pasted ps

def test_real_ps_auxf_row_is_read():
    text = listing(FORUM_PS)
    assert identify(text) == "ps-listing" and route("ps auxf", text).name == "ps-listing"
    cuda = KINDS["ps-listing"].parse(text, "ps.txt")["cuda"]
    assert (cuda.persistenced_active, cuda.persistenced_command) == ("active", FLAGGED)
    assert cuda.persistenced_command_source == "ps.txt (ps)"


def test_pasted_ps_beside_nvidia_smi_gives_the_forced_off_warning():
    snapshot, _ = analyze_texts([("ps.txt", listing(FORUM_PS)), ("nvidia-smi -q", listing(SMI_4_GPUS))])
    [gh604] = [f for f in run_checks(snapshot).findings if f.code == "GH604"]
    assert gh604.severity is Severity.WARNING and "--no-persistence-mode" in gh604.message
    assert any(e.source == "ps.txt (ps)" for e in gh604.evidence)


def test_pasted_ps_alone_is_information_not_healthy_silence():
    snapshot, _ = analyze_texts([("ps.txt", listing(FORUM_PS))])
    [gh604] = [f for f in run_checks(snapshot).findings if f.code == "GH604"]
    assert gh604.severity is Severity.INFO
    assert "forces persistence mode off on every GPU" in gh604.message and "not in the evidence given" in gh604.message


def test_beside_a_failed_nvidia_smi_the_failure_leads_and_gh604_is_information():
    # a broken driver with Ubuntu's packaged unit running: GH203 says what is wrong, GH604 adds only information
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    snapshot, _ = analyze_texts([("ps.txt", listing(FORUM_PS)), ("nvidia-smi", failed)])
    findings = run_checks(snapshot).findings
    assert findings[0].code == "GH203" and findings[0].severity is Severity.CRITICAL
    assert [f.severity for f in findings if f.code == "GH604"] == [Severity.INFO]


def test_a_live_host_whose_nvidia_smi_failed_gets_no_gh604():
    failed = {"stdout": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
              "exit_code": 9}
    host = spec(commands={"nvidia-smi -q": failed})
    host["nvml"] = {"ok": False, "error": "Driver Not Loaded", "error_code": 9}
    snapshot, found = checked(host)
    assert snapshot.cuda.persistenced_command == FLAGGED and not snapshot.gpus
    assert found == []


def test_ps_ef_grep_without_the_flag_is_quiet_and_the_grep_row_is_not_the_daemon():
    text = listing("ps-listing/handwritten_ps-ef-grep.txt")
    assert services.parse_ps_persistenced(text) == (PLAIN,)
    snapshot, _ = analyze_texts([("ps -ef", text), ("nvidia-smi -q", listing(SMI_4_GPUS))])
    assert "GH604" not in {f.code for f in run_checks(snapshot).findings}
    grep_only = "root 48211 48190  0 11:02 pts/0    00:00:00 grep --color=auto nvidia-persistenced\n"
    with pytest.raises(ParseError, match="no nvidia-persistenced process"):
        services.parse_ps_persistenced(grep_only)
    assert identify(grep_only) != "ps-listing"


def test_a_ps_listing_without_the_daemon_is_not_read_as_one():
    rows = "\n".join(listing(FORUM_PS).splitlines()[:4])  # the header and kernel threads only
    assert identify(rows) == "ps-listing"
    with pytest.raises(ParseError, match="no nvidia-persistenced process among the 3 ps row"):
        KINDS["ps-listing"].parse(rows, "ps")


# --------------------------------------------------------------------------- parsers

def test_systemctl_show_and_cmdline_parsers():
    props = services.parse_systemctl_show(show_output(2748)["stdout"])
    assert props["MainPID"] == "2748"
    assert services.exec_start_command(props["ExecStart"]) == FLAGGED
    assert services.exec_start_command("") is None and services.exec_start_command("{ path=/x ; }") is None
    assert services.proc_cmdline(b"/usr/bin/nvidia-persistenced\0--verbose\0") == \
        "/usr/bin/nvidia-persistenced --verbose"
    assert services.proc_cmdline(b"") is None
    assert services.runs_persistenced(FLAGGED) and services.runs_persistenced("nvidia-persistenced")
    assert not services.runs_persistenced("grep nvidia-persistenced") and not services.runs_persistenced("")
    with pytest.raises(ParseError):
        services.parse_systemctl_show("Failed to connect to bus: No such file or directory\n")


TEXTS = [listing(FORUM_PS), listing("ps-listing/handwritten_ps-ef-grep.txt"), show_output(2748)["stdout"]]


@given(mutated(TEXTS))
@FUZZ
def test_the_parsers_survive_fuzzing(text):
    only_parse_error(services.parse_ps_persistenced, text)
    only_parse_error(services.parse_systemctl_show, text)
    services.exec_start_command(text)
    services.proc_cmdline(text)
    KINDS["ps-listing"].recognise(text)
    only_parse_error(KINDS["ps-listing"].parse, text, "fuzz")


@pytest.mark.parametrize("text", ["a 1 0.0 0.0 1 1 ? S 1 1:00" + " " * 200_000 + "x",
                                  "argv[]=" + " " * 100_000 + "x" * 100_000,
                                  "u 1 1 0 09:12 ? 00:00:00 " + "|   \\_ " * 30_000 + "nvidia-persistenced",
                                  ("nvidia-+ 1 0.0 0.0 1 1 ? S 1 1:00 " + "x " * 2000 + "\n") * 2000])
def test_long_input_costs_linear_time(text):
    start = time.process_time()
    only_parse_error(services.parse_ps_persistenced, text)
    only_parse_error(services.parse_systemctl_show, text)
    services.exec_start_command(text)
    KINDS["ps-listing"].recognise(text)
    assert time.process_time() - start < 2.0


def test_the_fix_script_leaves_the_unit_edit_to_a_person():
    """`systemctl edit --full` opens an editor: a script run unread must not stop in one. It is a comment there."""
    from gpuhealth.fixscript import fix_script

    lines = fix_script(run_checks(collect(FakeHost(load_spec(HOST))))).splitlines()
    edits = [line for line in lines if "systemctl edit --full nvidia-persistenced" in line]
    assert edits and all(line.startswith("#") for line in edits)
