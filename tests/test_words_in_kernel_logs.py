"""A person's sentences inside a timestamped kernel log (a pasted dmesg with the user's comments between its records, a
note at the end of a journal): read as a notes file's sentences are (symptoms and causes told, facts stated, the
catalogue), the reporter's words; lines nothing reads are named as not read (GH002), so the report is never HEALTHY
on them; an ordinary log reads as before. The logs and sentences are hand-written for these tests."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import TOLD
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.kernel_log import annotations, unlogged_runs

HEAD = ("[    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13 (Ubuntu "
        "13.2.0-23ubuntu4) 13.2.0) #45-Ubuntu SMP PREEMPT_DYNAMIC\n"
        "[    4.118213] nvidia: loading out-of-tree module taints kernel.\n"
        "[    4.305118] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:01 UTC 2024\n")
TAIL = "[   10.993310] e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: None\n"
JOURNAL = ("Dec 07 09:12:01 gpu-07 kernel: Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) #45-Ubuntu SMP\n"
           "Dec 07 09:12:05 gpu-07 kernel: nvidia: loading out-of-tree module taints kernel.\n"
           "Dec 07 09:12:05 gpu-07 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 "
           "10:10:01 UTC 2024\n")
HANGS = "Two hours into the run nvidia-smi hangs and never returns; not even kill -9 stops it."
UNREAD = "this is where I pressed the reset button on the chassis"


def _report(name: str, text: str):
    snapshot, _ = analyze_texts([(name, text)])
    return snapshot, run_checks(snapshot)


def _dmesg(*between: str) -> str:
    return HEAD + "".join(line + "\n" for line in between) + TAIL


def test_an_ordinary_dmesg_reads_as_before():
    snapshot, report = _report("dmesg.txt", _dmesg())
    assert snapshot.unrecognized_files == ()
    assert not snapshot.reported and not any(m.reported for m in snapshot.messages)
    assert report.verdict == "HEALTHY"


def test_a_logs_own_lines_are_no_ones_words():
    # a record's indented second line, journal markers and journalctl -x's catalogue lines, journalctl's notice, and
    # the marks of a cut are the log's or the paste's, not a person's sentences
    text = ("-- Logs begin at Mon 2024-12-02 08:00:01 UTC, end at Sat 2024-12-07 09:13:00 UTC. --\n" + JOURNAL
            + "    a second line of the record above\n-- Subject: A start job for unit has finished\n--\n"
            + "...\n[...]\n-----\n"
            + "Hint: You are currently not seeing messages from other users and the system.\n"
            + "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"
            + "Dec 07 09:12:09 gpu-07 kernel: e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex\n")
    assert unlogged_runs(text) == []
    snapshot, report = _report("journal.txt", text)
    assert snapshot.kernel_log is not None and snapshot.kernel_log.format == "journal"
    assert snapshot.unrecognized_files == ()
    assert report.verdict == "HEALTHY"


def test_runs_are_the_lines_between_two_records():
    text = "here is my dmesg:\n" + _dmesg("then it froze", "", "and I rebooted") + "the end\n"
    assert unlogged_runs(text) == [["here is my dmesg:"], ["then it froze", "and I rebooted"], ["the end"]]


def test_a_symptom_told_between_records_is_read_as_a_notes_file_reads_it():
    snapshot, report = _report("dmesg.txt", _dmesg(HANGS))
    told = [m for m in snapshot.messages if m.line and m.line in HANGS]
    assert told and all(m.reported and m.symptom for m in told)
    _, notes = _report("notes.txt", HANGS)
    lead = report.findings[0]
    assert lead.code == notes.findings[0].code == "GH204"
    assert lead.severity is Severity.WARNING  # the words alone never make it critical
    assert lead.evidence[0].source == "dmesg.txt" + TOLD and told[0].line in lead.evidence[0].lines
    assert snapshot.unrecognized_files == ()  # read, so not named as not read


def test_a_critical_symptom_told_in_a_log_stays_below_critical():
    sentence = "a day into the run one of the cards vanished and nvidia-smi now shows only three GPUs"
    _, report = _report("dmesg.txt", _dmesg(sentence))
    assert report.findings[0].code == "GH102"
    assert max(f.severity.rank for f in report.findings) < Severity.CRITICAL.rank
    assert TOLD in report.findings[0].message


def test_a_fact_stated_between_records_is_a_reported_fact():
    snapshot, _ = _report("dmesg.txt", _dmesg("Secure Boot is enabled on this machine."))
    assert snapshot.install is not None and snapshot.install.secure_boot == "enabled"
    assert [(f.field, f.words) for f in snapshot.reported] == [("install", "Secure Boot is enabled on this machine.")]
    assert snapshot.unrecognized_files == ()


def test_words_nothing_reads_are_named_and_the_report_is_not_healthy():
    snapshot, report = _report("dmesg.txt", _dmesg(UNREAD))
    assert len(snapshot.unrecognized_files) == 1
    named = snapshot.unrecognized_files[0]
    assert named.startswith("dmesg.txt: 1 line(s) between the kernel log's records, not read") and UNREAD[:40] in named
    assert report.verdict == "NO DIAGNOSIS"
    assert [f.code for f in report.findings] == ["GH002"]
    assert report.findings[0].message == named  # the log was analysed: not "nothing in it was analysed"


def test_only_the_lines_nothing_reads_are_counted():
    # one comment is read (a symptom told), the other is not: the one not read is still named, alone
    snapshot, _ = _report("dmesg.txt", HEAD + HANGS + "\n" + TAIL + UNREAD + "\n")
    assert [name.split(" not read")[0] for name in snapshot.unrecognized_files] == [
        "dmesg.txt: 1 line(s) between the kernel log's records,"]
    assert UNREAD[:40] in snapshot.unrecognized_files[0]


def test_a_note_at_the_end_of_a_journal_is_read():
    snapshot, report = _report("journal.txt", JOURNAL + HANGS + "\n")
    assert snapshot.kernel_log.format == "journal"
    assert report.findings[0].code == "GH204" and report.findings[0].severity is Severity.WARNING


def test_a_programs_error_line_in_the_log_is_kept_once():
    # another program's line between the records: an error line kept for GH003, not also named as words not read
    line = "dmesg: read kernel buffer failed: Operation not permitted"
    snapshot, report = _report("dmesg.txt", _dmesg(line))
    assert [m.line for m in snapshot.messages if m.line == line] == [line]
    assert snapshot.unrecognized_files == ()
    assert report.findings[0].code == "GH003"


def test_a_record_pasted_without_its_timestamp_is_the_logs():
    # the parser reads an NVRM line without its prefix as a record: it is not read again as words
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2213, GPU has fallen off the bus."
    snapshot, _ = _report("dmesg.txt", _dmesg(line))
    assert snapshot.unrecognized_files == ()
    assert not any(m.reported for m in snapshot.messages)
    assert any(e.xid == 79 for e in snapshot.kernel_log.events)


def test_a_comment_in_a_pasted_dmesg_session_is_named_when_not_read():
    text = "$ sudo dmesg\n" + _dmesg(UNREAD)
    snapshot, report = _report("session.txt", text)
    assert any("between the kernel log's records, not read" in name for name in snapshot.unrecognized_files)
    assert report.verdict != "HEALTHY"


@pytest.mark.parametrize("sentence", [HANGS, UNREAD])
def test_a_bug_reports_dmesg_section_is_the_machines(sentence: str):
    # nvidia-bug-report.log's sections are the machine's files, not a person's paste: nothing in them is read as words
    text = ("Start of NVIDIA bug report log file.  Please include this file, along\n"
            "____________________________________________\n\n*** /var/log/dmesg\n" + _dmesg(sentence))
    snapshot, _ = _report("nvidia-bug-report.log", text)
    assert not any(m.reported for m in snapshot.messages)
    assert not any("between the kernel log's records" in name for name in snapshot.unrecognized_files)


def test_a_cause_left_by_elimination_quotes_the_words_that_told_the_symptom():
    # the clean log rules out the Xid causes of a slow nvidia-smi, so persistence (GH604) is left: the finding made
    # for it shows the sentence, as the reporter's words, and is as grave as the symptom told (a warning, as with the
    # words alone): the cause's severity is the symptom's as observed (checks/diagnosis.cause_severity)
    sentence = "on this server nvidia-smi takes forever to show anything, about 12 seconds per call"
    alone = run_checks(analyze_texts([("notes.txt", sentence)])[0]).findings[0]
    assert alone.code == "GH604" and alone.severity is Severity.WARNING
    for texts in ([("dmesg.txt", _dmesg(sentence))], [("dmesg.txt", _dmesg()), ("notes.txt", sentence)]):
        snapshot, _ = analyze_texts(texts)
        report = run_checks(snapshot)
        lead = report.findings[0]
        assert lead.code == "GH604" and TOLD in lead.message and lead.labels.get("reported") == "words"
        assert any(e.source.endswith(TOLD) and sentence[:30] in " ".join(e.lines) for e in lead.evidence)
        assert lead.severity is Severity.WARNING and report.verdict == "DEGRADED"


PLAIN = ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:01 UTC 2024\n"
         "nvidia: loading out-of-tree module taints kernel.\n")


def test_words_beside_an_untimed_logs_lines_that_nothing_reads_are_named():
    # a paste of kernel lines without their timestamps: its other lines were already read as words; when nothing in
    # them is read they are named too, as in a timestamped log
    snapshot, report = _report("paste.txt", PLAIN + UNREAD + "\n...\n")
    assert snapshot.kernel_log is not None and snapshot.kernel_log.format == "plain"
    assert len(snapshot.unrecognized_files) == 1
    assert snapshot.unrecognized_files[0].startswith("paste.txt: 1 line(s) beside the kernel log's lines, not read")
    assert report.verdict == "NO DIAGNOSIS"
    snapshot, report = _report("paste.txt", PLAIN + HANGS + "\n")
    assert snapshot.unrecognized_files == () and report.findings[0].code == "GH204"
    snapshot, report = _report("paste.txt", PLAIN)
    assert snapshot.unrecognized_files == () and report.verdict == "HEALTHY"


def test_a_note_after_an_arrow_at_a_records_end_is_read():
    record = "[    9.117265] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.120"
    snapshot, report = _report("dmesg.txt", _dmesg(f"{record}   <-- {HANGS}"))
    assert report.findings[0].code == "GH204" and report.findings[0].severity is Severity.WARNING
    assert any(m.reported and m.line in HANGS for m in snapshot.messages)
    snapshot, _ = _report("dmesg.txt", _dmesg(f"{record}  <== {UNREAD}", f"{record} <-- ...", "[...] <--"))
    assert [name.split(" not read")[0] for name in snapshot.unrecognized_files] == [
        "dmesg.txt: 1 line(s) between the kernel log's records,"]
    assert annotations("[ 1.0] a <-- see here\n[ 2.0] b <==== and here\n[ 3.0] c \u2190 also\n[ 4.0] d <- not one\n") \
        == ["see here", "and here", "also"]
