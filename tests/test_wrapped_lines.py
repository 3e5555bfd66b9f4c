"""Lines a mail client or terminal wrapped (issue 21): an nvidia-smi table broken at 72-80 columns and an Xid line
broken before its number are joined back, so the table's GPU and the Xid event are not lost.

The tables and log lines are written for these tests in the forms the driver prints (nvidia-smi 535's table, the
kernel's `[ time] NVRM: Xid (PCI:...): n, ...` and journald's `Mon DD HH:MM:SS host kernel:` prefix); they are
wrapped here with textwrap the way a mail client wraps (between words, the blank dropped).
"""

from __future__ import annotations

import textwrap
import time

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.parsers.wrapped import unwrap_lines
from test_markdown_evidence import TABLE


def _mail_wrap(text: str, width: int) -> str:
    lines = []
    for line in text.splitlines():
        lines.extend(textwrap.wrap(line, width, break_on_hyphens=False) or [""])
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("width", [72, 76, 80])
def test_a_mail_wrapped_smi_table_is_read(width):
    wrapped = _mail_wrap(TABLE, width)
    assert len(wrapped.splitlines()) > len(TABLE.splitlines())  # the test's table really is wrapped
    snapshot, log = analyze_texts([("smi.txt", wrapped)])
    assert [(r.kind, r.note) for r in log] == [("smi-table", "")]
    assert [(g.name, g.pci_address) for g in snapshot.gpus] == [("NVIDIA A100-SXM4-80GB", "0000:3b:00.0")]


def test_a_wrapped_table_joins_back_to_its_rows():
    wrapped = _mail_wrap(TABLE, 72)
    joined = unwrap_lines(wrapped).splitlines()
    assert [line.split() for line in joined] == [line.split() for line in TABLE.splitlines()]


JOURNAL_XID = ("Dec 01 10:00:00 gpu-node-017.cluster.example.com kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, "
               "name=python, GPU has fallen off the bus.")


@pytest.mark.parametrize("wrapped", [
    _mail_wrap(JOURNAL_XID, 72),  # the head breaks after "NVRM: Xid", before the number
    "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00):\n79, pid=2211, name=python, GPU has fallen off the bus.\n",
    "[ 8123.456789] NVRM: Xid\n(PCI:0000:3b:00): 79, pid=2211, name=python, GPU has fallen off the bus.\n",
])
def test_an_xid_line_broken_before_its_number_keeps_its_event(wrapped):
    snapshot, _ = analyze_texts([("dmesg.txt", wrapped)])
    assert snapshot.kernel_log is not None and [e.xid for e in snapshot.kernel_log.xids] == [79]
    assert "GH302" in {f.code for f in run_checks(snapshot).findings}


@pytest.mark.parametrize("text", [
    TABLE + "\nThe GPU disappears after a few hours.\n",  # a whole table, then prose
    "| GPU | Driver |\n|-----|--------|\n| A100 | 535 |\nThis is what we run.\n",  # a markdown table, then prose
    "|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:3B:00.0 Off\n$ nvidia-smi -L\nGPU 0: NVIDIA A100\n",
    "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python, GPU has fallen off the bus.\n"
    "[ 8123.456800] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n",
    "NVRM: Xid errors are listed in NVIDIA's catalogue\nsee the docs\n",  # the next line does not complete a head
])
def test_lines_that_were_not_wrapped_stay_apart(text):
    assert unwrap_lines(text) == text


def test_unwrapping_is_linear():
    hostile = ["|" + "x" * 70 + "\n" + "y\n" * 100_000, ("NVRM: Xid (" + "a" * 60 + "\n") * 20_000,
               ("+" + "-" * 300 + "\n") * 5000 + ("| a\n" * 50_000), "|=" * 100_000 + "\n" + "b" * 100_000]
    start = time.process_time()
    for text in hostile:
        unwrap_lines(text)
    assert time.process_time() - start < 3.0


def test_a_dpkg_listing_header_is_not_a_table():
    # dpkg -l's header (dpkg's own text): rows starting with "|" and a "+++-====" rule, then the packages
    listing = ("Desired=Unknown/Install/Remove/Purge/Hold\n"
               "| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n"
               "|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n"
               "||/ Name           Version      Architecture Description\n"
               "+++-==============-============-============-==================================\n"
               "ii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface\n")
    assert unwrap_lines(listing) == listing


RMINIT = ("[   14.851311] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x22:0x56:667)\n"
          "[   14.851402] NVRM: GPU 0000:3b:00.0: rm_init_adapter failed, device minor number 0\n")


def test_a_wrapped_kernel_log_line_is_joined_between_two_records():
    wrapped = _mail_wrap(RMINIT, 72) + "[   15.000001] nvidia-uvm: Loaded the UVM driver, major device number 508.\n"
    assert len(wrapped.splitlines()) == 5  # the test's log really is wrapped
    assert unwrap_lines(wrapped).splitlines()[:2] == RMINIT.splitlines()


@pytest.mark.parametrize("text", [
    # the reporter's sentence after the last line of a pasted log is not the log's
    "[   14.851311] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x22:0x56:66\nThis started after the update.\n",
    # a long line (over 80 characters) was not wrapped at a mail client's width
    "[   14.851402] NVRM: GPU 0000:3b:00.0: rm_init_adapter failed, device minor number 0 (and more text)\n"
    "extra\n[   15.000001] NVRM: loading\n",
    # an indented line is a stack trace's or a listing's, not a wrapped piece
    "[   14.851311] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x22:0x56:667) xxx\n  indented\n"
    "[   15.000001] NVRM: loading\n",
])
def test_kernel_log_lines_that_were_not_wrapped_stay_apart(text):
    assert unwrap_lines(text) == text


def test_a_record_without_its_prefix_is_not_a_wrapped_piece():
    text = "[    5.200000] NVRM: The NVIDIA probe routine failed for 1 device(s).\n" \
           "NVRM: None of the NVIDIA devices were initialized.\n"
    assert unwrap_lines(text) == text
