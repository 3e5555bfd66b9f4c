"""A GPU memory fault the reporter tells in words (parsers/reported_xids.memory_told) is GH403's failing memory: the
same memory failing again after the reset or reboot that applies its repair, a growing count of remapped rows or
retired pages, a row remapping failure. NVIDIA's documents name the consequence (GPU Memory Error Management, RMA
policy: https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/; Dynamic Page Retirement:
https://docs.nvidia.com/deploy/dynamic-page-retirement/; the Xid catalogue:
https://docs.nvidia.com/deploy/xid-errors/). Words alone stay a warning; beside a log that shows the GPU's memory
Xids the finding is machine-shown. The examples are ours, written from those documents' terms, not from any case."""

from __future__ import annotations

import time

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.reported_xids import GREW, RECURRED, REMAP_FAILED, memory_told, told_beside_log
from gpuhealth.report.common import fold

DBE_LOG = (
    "[ 812.000100] NVRM: Xid (PCI:0000:3b:00): 48, pid=4410, name=python, Ch 00000008, An uncorrectable double bit "
    "error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0.\n"
    "[ 812.000200] NVRM: Xid (PCI:0000:3b:00): 63, pid=4410, name=python, Ch 00000008, Row Remapper: New row marked "
    "for remapping, reset gpu to activate.\n")


def told(line: str) -> set[str]:
    return {e.detail for e in memory_told(line, 1)}


def report(*files: tuple[str, str]):
    snapshot, _ = analyze_texts(list(files))
    return snapshot, run_checks(snapshot)


def gh403(findings) -> list:
    return [f for f in findings if f.code == "GH403"]


@pytest.mark.parametrize(("line", "expected"), [
    ("The DBE came back on the same GPU after a reboot.", {RECURRED}),
    ("A new row failed again after the node was rebooted.", {RECURRED}),
    ("Even after a GPU reset the uncorrectable ECC errors recur.", {RECURRED}),
    ("Remapped rows grew from 3 to 5 overnight.", {GREW}),
    ("The retired pages keep growing.", {GREW}),
    ("nvidia-smi -q shows Remapping Failure Occurred: Yes", {REMAP_FAILED}),
    ("The row remapping failed on bank 3.", {REMAP_FAILED}),
    ("Still getting Xid 48 after rebooting.", {RECURRED}),
    ("We rebooted; the error is back.", {RECURRED}),
    ("ECC errors again after the driver was reloaded.", {RECURRED}),
    ("A remap failure on that GPU.", {REMAP_FAILED}),
])
def test_a_memory_fault_told_in_words_is_read(line, expected):
    assert told(line) == expected


@pytest.mark.parametrize("line", [
    "Is Xid 63 bad if it comes back after a reboot?",  # a question
    "If the DBE comes back after a reset, replace the board.",  # a supposition
    "The error did not come back after the reboot.",  # denied
    "Xid 48 once, a reset cleared it.",  # a one-off repaired by its reset
    "Remapping Failure Occurred: No",
    "Row Remapping Failure Occurred : No",
    "We rebooted and it has not been back.",
    "It still works after the reboot.",
    "Remapped rows went from 12 to 12.",  # no growth
    "Retired pages went from 5 to 3 after the reset.",  # fewer is no growth
    "Volatile correctable ECC errors: 12",
    "We restarted the job again.",  # no reset of the GPU, no memory
])
def test_what_is_not_a_memory_fault_told(line):
    assert told(line) == set()


def test_xids_and_a_recurrence_in_words_are_one_warning_that_leads():
    notes = ("Our A100 keeps killing jobs:\n"
             "- Xid 48, then Xid 171: a double-bit error in HBM\n"
             "- Xid 63: the row remapper marks a new row\n"
             "- after a reboot the errors came back on the same GPU\n")
    snapshot, result = report(("notes.md", notes))
    (finding,) = gh403(result.findings)
    assert finding.severity is Severity.WARNING  # words alone: nobody saw the machine say it
    assert "reported in words" in finding.message and "replace the board" in finding.message
    assert "came back after the reset or reboot" in finding.message
    (cause, *_) = fold(result.findings)
    assert cause.finding is finding  # it leads, and the GPU's Xids fold under it: one finding, not one per Xid
    folded = {s.labels.get("xid"): s for s in cause.symptoms if s.code == "GH301"}
    assert folded.keys() == {"48", "63"}  # Xid 171 ("see Xid 48" in NVIDIA's catalogue) is told in Xid 48's finding
    assert "with Xid 171: the uncorrectable error is in DRAM" in folded["48"].message
    assert not [f for f in result.findings if f.code == "GH003"]  # the recurrence line is read, not unknown


@pytest.mark.parametrize("notes", [
    "After another Xid 48 the remapped rows went from 2 to 4.\n",
    "The retired pages keep growing on our V100.\n",
    "We see Xid 94 bursts. nvidia-smi -q says Remapping Failure Occurred: Yes\n",
])
def test_a_growing_count_or_a_remap_failure_in_words_is_failing_memory(notes):
    _, result = report(("notes.txt", notes))
    (finding,) = gh403(result.findings)
    assert finding.severity is Severity.WARNING and "RMA" in finding.message


@pytest.mark.parametrize("notes", [
    "We got a single Xid 94 on GPU 2; the application restarted fine.\n",  # contained: the app restarts
    "We saw Xid 48 once, a reset cleared it.\n",  # GH301's one-off, the reset as the guide says
    "Is Xid 63 bad?\n",
    "Volatile correctable ECC count is 12 on GPU 0.\n",
    "Xid 79 came back after a reboot.\n",  # a recurrence, but of no memory fault
])
def test_what_the_guide_does_not_call_failing_memory_is_not_gh403(notes):
    _, result = report(("notes.txt", notes))
    assert gh403(result.findings) == []
    assert all(f.severity is not Severity.CRITICAL for f in result.findings)


def test_a_recurrence_told_beside_the_logged_dbe_is_machine_shown():
    text = DBE_LOG + "\nThe same error came back on this GPU after we rebooted the node.\n"
    snapshot, result = report(("dmesg.txt", text))
    assert not snapshot.kernel_log.reported  # the machine's log, with the words kept beside it
    (finding,) = gh403(result.findings)
    assert finding.severity is Severity.CRITICAL and "0000:3b:00" in finding.message
    assert "told in words beside the logged Xids" in finding.message


def test_the_words_beside_a_log_without_memory_xids_decide_nothing():
    log = "[ 10.000100] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
    _, result = report(("dmesg.txt", log + "The DBE came back after a reboot.\n"))
    assert gh403(result.findings) == []


def test_log_records_are_never_read_as_words():
    lines = ["[ 5.1] NVRM: Xid (PCI:0000:3b:00): 64, Dynamic Page Retirement: Fatal error, unable to retire page",
             "Dec 7 10:00:01 host kernel: row remapping failed again after reset"]
    assert told_beside_log(lines, "dmesg.txt") == ({}, [])


@pytest.mark.parametrize("line", ["remapped rows " * 4000, "again reboot " * 4000,
                                  "retired pages " + "x" * 20000 + " grew", "Remapping Failure Occurred" * 3000])
def test_long_hostile_lines_cost_linear_time(line):
    started = time.perf_counter()
    memory_told(line[:500], 1)
    told_beside_log([line] * 3, "notes.txt")
    assert time.perf_counter() - started < 1.0


def test_a_recurrence_that_names_no_memory_and_no_xid_is_not_read():
    """'It crashed again after a reboot' tells of no memory: no reported log, the paste stays what it was."""
    snapshot, result = report(("notes.txt", "Training crashed again after a reboot of the node.\n"))
    assert snapshot.kernel_log is None
    assert gh403(result.findings) == []


def test_the_gpu_the_words_name_by_address_is_the_finding_s():
    notes = "GPU 3 (0000:b3:00.0) shows Xid 48 and Xid 64; its remapped rows went up from 3 to 5.\n"
    snapshot, result = report(("notes.txt", notes))
    (finding,) = gh403(result.findings)
    assert finding.subject.pci_address == "0000:b3:00.0"
    assert "Xid 64: the driver could not retire the page or remap the row" in finding.message
    assert all(f.subject.pci_address == "0000:b3:00.0" for f in result.findings if f.code == "GH301")


def test_words_about_two_gpus_decide_no_gpu():
    notes = ("GPU 0000:3b:00.0 had Xid 48.\nGPU 0000:b3:00.0 had Xid 95.\n"
             "After a reboot the uncorrectable errors came back.\n")
    _, result = report(("notes.txt", notes))
    assert gh403(result.findings) == []


def test_the_gpus_own_row_remapper_wins_over_a_remap_failure_told():
    smi = ("==============NVSMI LOG==============\n\nDriver Version                            : 535.104.05\n"
           "Attached GPUs                             : 1\nGPU 00000000:3B:00.0\n"
           "    Product Name                          : NVIDIA A100-SXM4-80GB\n"
           "    Remapped Rows\n        Correctable Error                 : 0\n"
           "        Uncorrectable Error               : 0\n        Pending                           : No\n"
           "        Remapping Failure Occurred        : No\n")
    snapshot, result = report(("nvidia-smi-q.txt", smi), ("notes.txt", "I think the row remapping failed.\n"))
    assert snapshot.gpus and snapshot.gpus[0].remapped_rows_failure is False
    assert gh403(result.findings) == [] and not [f for f in result.findings if f.code == "GH402"]


def test_a_logged_detail_xid_is_told_in_its_xid_s_finding():
    """Xid 171 (NVIDIA's catalogue: "see Xid 48") on the GPU of an Xid 48 is one GH301 finding with both lines."""
    log = DBE_LOG.splitlines()[0] + "\n" + (
        "[ 812.000150] NVRM: Xid (PCI:0000:3b:00): 171, pid=4410, name=python, Ch 00000008, Uncorrectable DRAM "
        "error.\n")
    _, result = report(("dmesg.txt", log))
    (finding,) = [f for f in result.findings if f.code == "GH301"]
    assert finding.labels["xid"] == "48" and "with Xid 171" in finding.message
    assert any(": 171," in line for line in finding.evidence[0].lines)
    assert gh403(result.findings) == []  # one DBE is a one-off, no replacement
