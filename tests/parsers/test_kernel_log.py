"""parse_kernel_log / parse_kernel_log_file / detect_log_format on the real corpus, hand-written lines
for the forms the corpus lacks, the chunked and parallel scan paths, and fuzzing.

Corpus files: gpud (dmesg iso/ctime, journalctl short-iso, /dev/kmsg, pstore), ml-engineering (Xid 63),
nvidia-bug-report-352.63 (dmesg with the 352 load banner). Everything in HAND_WRITTEN_* below is
hand-written, as noted at each place, from tests/data/reference/facts.md (section 1.1 line formats,
sections 3.3/3.4/4 messages; source keys OGKM, GPUD, XIDCAT) and corpus/issue-logs/THREADS.md.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_files, corpus_id
from gpuhealth.model import KernelLog, ParseError, normalize_pci_address
from gpuhealth.parsers import kernel_log
from gpuhealth.parsers.kernel_log import (
    FORMATS,
    detect_log_format,
    module_banner_version,
    parse_kernel_log,
    parse_kernel_log_file,
)

KINDS = {"xid", "sxid", "fallen_off_bus", "rminit_failed", "api_mismatch", "bar", "probe", "gsp", "nvrm", "aer",
         "module_signature",
         "soft_lockup", "hung_task", "oom_kill", "mlx5_fatal"}  # the host beside the GPUs (GH722, GH811, GH812)

KERNEL_LOGS = corpus_files(
    "gpud/*dmesg*", "gpud/kmsg__*", "gpud/pstore__*", "gpud/query_log_tail__dmesg.0.log",
    "ml-engineering/dmesg_xid63_row_remapper.txt", "nvidia-bug-report-352.63/dmesg.txt",
)

EXPECTED_FORMAT = {
    "gpud/accelerator_nvidia_error_xid__dmesg-with-xid-119.log": "dmesg-ctime",
    "gpud/accelerator_nvidia_nccl__dmesg.decode.iso.log": "dmesg-iso",
    "gpud/dmesg__dmesg.decode.iso.log.0": "dmesg-iso",
    "gpud/dmesg__dmesg.decode.iso.log.1": "dmesg-iso",
    "gpud/dmesg__dmesg.peermem.log.0": "dmesg-iso",
    "gpud/dmesg__journalctl-time-format-short-iso-2.log": "journal",
    "gpud/kmsg__kmsg.1.log": "kmsg",
    "gpud/kmsg__kmsg.2.peermem.log": "kmsg",
    "gpud/memory__dmesg.decode.iso.log": "dmesg-iso",
    "gpud/pstore__7530486857247_dmesg.txt": "pstore",
    "gpud/query_log_tail__dmesg.0.log": "dmesg-iso",
    "ml-engineering/dmesg_xid63_row_remapper.txt": "plain",
    "nvidia-bug-report-352.63/dmesg.txt": "dmesg",
}


def corpus(relative: str) -> Path:
    matches = [p for p in KERNEL_LOGS if corpus_id(p) == relative]
    if not matches:
        pytest.skip(f"{relative} not in the corpus")
    return matches[0]


def events(log: KernelLog, kind: str, xid: int | None = None):
    return [e for e in log.events if e.kind == kind and (xid is None or e.xid == xid)]


def count(log: KernelLog, kind: str, xid: int | None = None) -> int:
    """Lines of this kind (and Xid) in the whole log: ``events`` holds only a bounded sample per template."""
    return sum(g.count for g in log.tallies({kind}) if xid is None or g.xid == xid)


# --------------------------------------------------------------------------- whole corpus


def test_corpus_has_kernel_logs():
    assert len(KERNEL_LOGS) >= 13


@pytest.mark.parametrize("path", KERNEL_LOGS, ids=corpus_id)
def test_corpus_log_parses(path: Path):
    data = path.read_bytes()
    log = parse_kernel_log(data, corpus_id(path))
    assert log.source == corpus_id(path)
    assert log.format in FORMATS
    if corpus_id(path) in EXPECTED_FORMAT:
        assert log.format == EXPECTED_FORMAT[corpus_id(path)]
    assert detect_log_format(data) == log.format
    lines = data.decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    assert log.lines_scanned == len(lines)
    for event in log.events:
        assert event.kind in KINDS
        assert 1 <= event.line_number <= log.lines_scanned
        assert event.line == lines[event.line_number - 1].rstrip("\r")
        if event.pci_address is not None:
            assert normalize_pci_address(event.pci_address) == event.pci_address
        if log.format != "plain":
            assert event.timestamp
    # the same answer from text, from the file reader, and from the file reader in small chunks
    assert parse_kernel_log(data.decode("utf-8"), corpus_id(path)) == log
    assert parse_kernel_log_file(path, corpus_id(path)) == log


def test_hundreds_of_xid_13_and_some_xid_43():
    log = parse_kernel_log(corpus("gpud/dmesg__dmesg.decode.iso.log.0").read_bytes())
    assert count(log, "xid", 13) == 629
    assert len(events(log, "xid", 13)) < 629  # a sample per template: the first ones and the last
    xid43 = events(log, "xid", 43)
    assert len(xid43) == count(log, "xid", 43) == 7
    assert {e.pci_address for e in log.events} == {"0000:38:00.0"}
    first = log.events[0]
    assert (first.xid, first.pid, first.process, first.line_number) == (13, None, None, 1)  # pid='<unknown>'
    assert first.timestamp == "2025-01-21T02:21:33,498559+00:00"
    assert first.message == "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address"
    assert (xid43[0].pid, xid43[0].process, xid43[0].message) == (2815167, "pt_main_thread", "Ch 00000008")


def test_xid_48_63_94_sequence():
    log = parse_kernel_log(corpus("gpud/query_log_tail__dmesg.0.log").read_bytes())
    assert [e.xid for e in events(log, "xid")] == [48, 63] + [94] * 9
    dbe = events(log, "xid", 48)[0]
    assert dbe.pci_address == "0000:19:00.0"
    assert dbe.line_number == 11
    assert "double bit error (DBE)" in dbe.message
    assert events(log, "xid", 94)[1].process == "python3.10"
    assert not events(log, "nvrm")  # nvidia-peermem lines are not NVRM events


def test_xid_119_with_pci_address():
    log = parse_kernel_log(corpus("gpud/accelerator_nvidia_error_xid__dmesg-with-xid-119.log").read_bytes())
    gsp = events(log, "xid", 119)
    assert len(gsp) == 5
    assert gsp[0].pci_address == "0000:9b:00.0"
    assert (gsp[0].pid, gsp[0].process, gsp[0].timestamp) == (2024380, "nvidia-smi", "Sun Feb 23 16:24:18 2025")
    assert gsp[0].message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert gsp[-1].process == "gpud"
    # the RPC history dump is not an event; the "likely needs to be reset" notice is a GSP error
    assert [e.line_number for e in events(log, "gsp")] == [41]
    assert events(log, "gsp")[0].pci_address == "0000:9b:00.0"
    assert len(log.events) == 6


def test_xid_63_from_ml_engineering():
    log = parse_kernel_log(corpus("ml-engineering/dmesg_xid63_row_remapper.txt").read_text())
    (event,) = log.events
    assert (event.kind, event.xid, event.pci_address, event.pid, event.process) == (
        "xid", 63, "0000:10:1c.0", 1896, None)  # "pid=1896," without name=
    assert event.message.startswith("Row Remapper: New row marked for remapping")
    assert log.format == "plain"


def test_module_banner_550():
    log = parse_kernel_log(corpus("gpud/dmesg__dmesg.decode.iso.log.1").read_bytes())
    assert log.module_banners == (
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024",)
    assert module_banner_version(log.module_banners[0]) == ("550.90.07", "proprietary")
    assert log.events == ()  # nvswitch probe/open lines and the banner are not events


def test_pstore_two_banners():
    log = parse_kernel_log(corpus("gpud/pstore__7530486857247_dmesg.txt").read_bytes())
    assert len(log.module_banners) == 2
    assert {module_banner_version(b) for b in log.module_banners} == {("550.144.03", "proprietary")}


def test_352_banner_and_vga_warning_is_not_an_error():
    log = parse_kernel_log(corpus("nvidia-bug-report-352.63/dmesg.txt").read_bytes())
    assert [module_banner_version(b) for b in log.module_banners] == [("352.63", "proprietary")]
    # the only event: the unsigned module tainted the kernel (it loaded; not an error)
    assert [(e.kind, e.line_number) for e in log.events] == [("module_signature", 1045)]


def test_kmsg_and_journal_have_no_events():
    for name in ("gpud/kmsg__kmsg.1.log", "gpud/dmesg__journalctl-time-format-short-iso-2.log"):
        assert parse_kernel_log(corpus(name).read_bytes()).events == ()


# --------------------------------------------------------------------------- hand-written line forms


def test_old_xid_without_pci_prefix():
    # hand-written from facts.md 1.1 "Old format" (source GPUD kmsg.go; XIDCAT step 1 example)
    log = parse_kernel_log("[  100.000001] NVRM: Xid (0000:03:00): 14, Channel 00000001\n")
    (event,) = log.events
    assert (event.xid, event.pci_address, event.message, event.timestamp) == (
        14, "0000:03:00.0", "Channel 00000001", "100.000001")


def test_mig_tags():
    # hand-written from facts.md 1.1 "MIG attribution" (source OGKM kernel_rc.c)
    text = ("[ 5.1] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=77, name=python3, Ch 00000008\n"
            "[ 5.2] NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 94, pid=77, name=python3, Ch 00000009\n")
    first, second = parse_kernel_log(text).events
    assert (first.pci_address, first.detail, first.xid) == ("0000:01:00.0", "GPU-I:05", 94)
    assert (second.detail, second.pid, second.process) == ("GPU-I:05 GPU-CI:01", 77, "python3")


def test_unknown_pid_and_caused_by_previous_xid():
    # hand-written from facts.md 1.1 "Unknown process" (GPUD) and "Xid 45 root cause suffix" (OGKM)
    text = ("NVRM: Xid (PCI:0000:5a:00): 31, pid='<unknown>', name=<unknown>, Ch 00000010, intr 10000000.\n"
            "NVRM: Xid (PCI:0000:5a:00): 45, pid=2211, name=python, Ch 00000010 caused by previous Xid 31\n")
    mmu, cleanup = parse_kernel_log(text).events
    assert (mmu.pid, mmu.process) == (None, None)
    assert (cleanup.xid, cleanup.detail) == (45, "caused by previous Xid 31")


def test_nvlink5_xid_message():
    # hand-written from facts.md 1.1 "NVLink5 (Xid 144-150) format" (XIDCAT; GPUD kmsg.go)
    line = "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000)"
    (event,) = parse_kernel_log(line).events
    assert (event.xid, event.pci_address) == (149, "0018:01:00.0")
    assert event.message.startswith("NETIR_LINK_EVT Fatal XC0")


# hand-written from facts.md 1.1 (Xid 79 example, XIDCAT; "GPU has fallen off the bus." per device,
# OGKM osinit.c; multi-line block, OGKM osapi.c; old single line, GPUD kmsg.go) in dmesg form, where the
# printk continuation lines of one record are indented without a timestamp.
HAND_WRITTEN_FALLEN = """\
[ 1843.308140] NVRM: Xid (PCI:0000:5a:00): 79, pid=1911, name=python3, GPU has fallen off the bus.
[ 1843.308141] NVRM: GPU at PCI:0000:5a:00: GPU-6c9e3c8e-0f54-4b7c-9b85-5d4a0e3f2c11
[ 1843.308142] NVRM: GPU Board Serial Number: 1650124014249
[ 1843.308143] NVRM: GPU 0000:5a:00.0: GPU has fallen off the bus.
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.508145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.508146] nvidia 0000:b3:00.0: probe with driver nvidia failed with error -1
[ 1850.000000] NVRM: GPU at 0000:01:00.0 has fallen off the bus.
"""


def test_xid_79_and_fallen_off_bus_one_event_per_gpu():
    log = parse_kernel_log(HAND_WRITTEN_FALLEN)
    assert log.format == "dmesg"
    (xid79,) = events(log, "xid", 79)
    assert (xid79.pci_address, xid79.pid, xid79.message) == ("0000:5a:00.0", 1911, "GPU has fallen off the bus.")
    fallen = events(log, "fallen_off_bus")
    assert [(e.pci_address, e.line_number) for e in fallen] == [
        ("0000:5a:00.0", 4), ("0000:b3:00.0", 5), ("0000:01:00.0", 12)]
    block = fallen[1]
    assert (block.detail, block.xid, block.timestamp) == ("10de:26b5", 79, "1843.308145")
    assert block.message == ("The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen "
                             "off the bus and is not responding to commands.")
    # the driver core's failed-probe line (no NVRM tag) is the fallen GPU's probe event (GH302 explains GH305)
    (probe,) = events(log, "probe")
    assert (probe.pci_address, probe.line_number, probe.detail) == ("0000:b3:00.0", 11, "probe failed with error -1")
    assert len(log.events) == 5


def test_fallen_off_bus_split_over_journal_lines():
    # hand-written: the OGKM osapi.c block as journalctl -k prints it (one journal line per printed line;
    # corpus/issue-logs/THREADS.md, leptonai/gpud#1209)
    text = ("Jan 02 03:04:05 node7 kernel: NVRM: The NVIDIA GPU 0000:18:00.0\n"
            "Jan 02 03:04:05 node7 kernel: NVRM: (PCI ID: 10de:2901) installed in this system has\n"
            "Jan 02 03:04:05 node7 kernel: NVRM: fallen off the bus and is not responding to commands.\n")
    log = parse_kernel_log(text)
    assert log.format == "journal"
    (event,) = log.events
    assert (event.kind, event.pci_address, event.detail, event.timestamp) == (
        "fallen_off_bus", "0000:18:00.0", "10de:2901", "Jan 02 03:04:05")


def test_fallen_off_bus_in_one_kmsg_record():
    # hand-written: /dev/kmsg escapes the record's newlines as \x0a
    text = ("3,5012,1843308145,-;NVRM: The NVIDIA GPU 0000:18:00.0\\x0aNVRM: (PCI ID: 10de:2901) installed in "
            "this system has\\x0aNVRM: fallen off the bus and is not responding to commands.\n")
    log = parse_kernel_log(text)
    (event,) = log.events
    assert (log.format, event.kind, event.pci_address, event.timestamp) == (
        "kmsg", "fallen_off_bus", "0000:18:00.0", "1843.308145")


def test_fallen_off_bus_continuation_without_nvrm_tag():
    # hand-written: a paste where the continuation line lost its "NVRM:" tag
    text = "NVRM: The NVIDIA GPU 0000:02:00.0\nhas fallen off the bus and is not responding to commands.\n"
    (event,) = parse_kernel_log(text).events
    assert (event.kind, event.pci_address, event.line_number) == ("fallen_off_bus", "0000:02:00.0", 1)


def test_rminit_adapter_failed():
    # hand-written from facts.md 3.4 / 4 (OGKM osinit.c format "GPU <bdf>: RmInitAdapter failed! (%x:%x:%d)")
    text = ("[   15.100000] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x26:0xfffff90a:983)\n"
            "[   15.200000] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0\n")
    first, second = parse_kernel_log(text).events
    assert (first.kind, first.pci_address, first.detail) == ("rminit_failed", "0000:01:00.0", "0x26:0xfffff90a:983")
    assert (second.kind, second.detail) == ("rminit_failed", "minor 0")


def test_api_mismatch_one_line_and_split():
    # hand-written from facts.md 4 (OGKM osapi.c), once on one line and once as the driver wraps it
    one = ("NVRM: API mismatch: the client 'nvidia-smi' (pid 4242) has the version 550.90.07, but this kernel "
           "module has the version 550.54.15.  Please make sure that this kernel module and all NVIDIA driver "
           "components have the same version.\n")
    split = ("[  99.1] NVRM: API mismatch: the client 'nvidia-smi' (pid 4242) has the version 550.90.07, but\n"
             "[  99.1] NVRM: this kernel module has the version 550.54.15.  Please\n"
             "[  99.1] NVRM: make sure that this kernel module and all NVIDIA driver\n"
             "[  99.1] NVRM: components have the same version.\n")
    for text in (one, split):
        (event,) = parse_kernel_log(text).events
        assert (event.kind, event.detail, event.pid, event.process, event.line_number) == (
            "api_mismatch", "client 550.90.07, module 550.54.15", 4242, "nvidia-smi", 1)


def test_bar_invalid_with_pci_core_lines():
    # hand-written from facts.md 4 (OGKM nv-pci.c message) plus the Linux PCI core's BAR messages
    text = ("[    1.000000] pci 0000:01:00.0: [10de:1b80] type 00 class 0x030000\n"
            "[    1.100000] pci 0000:01:00.0: BAR 1: no space for [mem size 0x10000000 64bit pref]\n"
            "[    1.100001] pci 0000:01:00.0: BAR 1: failed to assign [mem size 0x10000000 64bit pref]\n"
            "[    1.100002] pci 0000:05:00.0: BAR 0: failed to assign [mem size 0x00004000]\n"
            "[    9.000000] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\n"
            "[    9.000000] NVRM: BAR1 is 0M @ 0x0 (PCI:0000:01:00.0)\n"
            "[    9.000001] NVRM: The system BIOS may have misconfigured your GPU.\n"
            "[    9.000002] nvidia: probe of 0000:01:00.0 failed with error -1\n")
    bars = events(parse_kernel_log(text), "bar")
    assert [(e.line_number, e.pci_address) for e in bars] == [
        (2, "0000:01:00.0"), (3, "0000:01:00.0"), (5, "0000:01:00.0")]  # not the non-GPU 0000:05:00.0
    assert bars[2].detail == "BAR1 is 0M @ 0x0"
    assert [bars[0].detail, bars[1].detail] == ["BAR 1 (256 MiB): no space", "BAR 1 (256 MiB): failed to assign"]


def test_request_mem_region_and_probe_failures():
    # hand-written from facts.md 4 (OGKM nv-pci.c, nv.c messages)
    text = ("NVRM: request_mem_region failed for 16M @ 0xf6000000. This can\n"
            "NVRM: occur when a driver such as rivatv is loaded and claims\n"
            "NVRM: ownership of the device's registers.\n"
            "NVRM: The NVIDIA probe routine was not called for 1 device(s).\n"
            "NVRM: This can occur when a driver such as:\n"
            "NVRM: nouveau, rivafb, nvidiafb or rivatv\n"
            "NVRM: was loaded and obtained ownership of the NVIDIA device(s).\n"
            "NVRM: No NVIDIA devices probed.\n"
            "NVRM: No NVIDIA GPU found.\n")
    log = parse_kernel_log(text)
    assert [(e.kind, e.line_number, e.detail) for e in log.events] == [
        ("bar", 1, "request_mem_region failed for 16M @ 0xf6000000"),
        ("probe", 4, "probe routine not called for 1 device(s)"),
        ("probe", 8, "no NVIDIA devices probed"),
        ("probe", 9, "no NVIDIA GPU found"),
    ]


def test_gpu_not_supported_by_open_module():
    # hand-written from facts.md 3.3 (OGKM osapi.c)
    text = ("NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1b80) installed in this system is not supported by "
            "open nvidia.ko because it does not include the required GPU System Processor (GSP).\n")
    (event,) = parse_kernel_log(text).events
    assert (event.kind, event.pci_address) == ("probe", "0000:01:00.0")
    assert "open kernel module" in event.detail


def test_gsp_and_other_nvrm_errors_are_conservative():
    # hand-written: GSP init failure and a VBIOS copy failure (shapes seen in issue threads), plus lines
    # that must NOT become events (an assertion, informational lines)
    text = ("NVRM: RmInitAdapter: Cannot initialize GSP firmware RM\n"
            "NVRM: GPU 0000:01:00.0: Failed to copy vbios to system memory.\n"
            "NVRM: nvAssertFailedNoLog: Assertion failed: 0 @ g_kern_bus_nvoc.h:2434\n"
            "NVRM: GPU at PCI:0000:01:00: GPU-6c9e3c8e-0f54-4b7c-9b85-5d4a0e3f2c11\n"
            "NVRM: Persistence mode is deprecated and will be removed in a future release.\n")
    log = parse_kernel_log(text)
    assert [(e.kind, e.line_number, e.pci_address) for e in log.events] == [
        ("gsp", 1, None), ("nvrm", 2, "0000:01:00.0")]


def test_issue_thread_shapes():
    # hand-written approximations of the line shapes corpus/issue-logs/THREADS.md points at (no thread text
    # copied): Bumblebee#554 (old fallen-off-bus line + invalid context), open-gpu-kernel-modules#1045 and
    # scitix/sichek#51 (NV_ERR_RESET_REQUIRED, GspRmAlloc failures)
    text = ("[   10.000000] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n"
            "[   10.100000] NVRM: os_pci_init_handle: invalid context!\n"
            "[   20.000000] NVRM: GPU0 rpcRmApiAlloc_GSP: GspRmAlloc failed: hClass=0x0000c86f; status=0x00000062\n"
            "[   20.100000] NVRM: GPU0 nvCheckFailedNoLog: Check failed: Reset required [NV_ERR_RESET_REQUIRED]\n"
            "[   20.200000] NVRM: GPU 0000:01:00.0: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062)\n")
    log = parse_kernel_log(text)
    assert [(e.kind, e.line_number, e.pci_address) for e in log.events] == [
        ("fallen_off_bus", 1, "0000:01:00.0"), ("gsp", 3, None), ("nvrm", 5, "0000:01:00.0")]


def test_sxid_and_its_continuation_lines():
    # hand-written from facts.md 1.1 "NVSwitch SXid" (OGKM common_nvswitch.h; GPUD sxid/kmsg.go)
    text = ("[  117.900000] nvidia-nvswitch3: open (major=510)\n"
            "[  117.984502] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted "
            "PRIV error (First)\n"
            "[  117.985304] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Severity 0 Engine instance 32 Sub-engine "
            "instance 00\n"
            "[  117.986807] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Data {0x00000000, 0x00000000}\n"
            "[  118.000000] nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 42 LTSSM Fault Up\n")
    log = parse_kernel_log(text)
    assert [(e.kind, e.xid, e.pci_address, e.detail, e.line_number) for e in log.events] == [
        ("sxid", 12028, "0000:05:00.0", "nvidia-nvswitch3", 2),
        ("sxid", 20034, "0000:07:00.0", "nvidia-nvswitch0", 5),
    ]
    assert log.events[0].message == "Non-fatal, Link 32 egress non-posted PRIV error (First)"


def test_open_module_banner():
    # hand-written from corpus/issue-logs/THREADS.md (NVIDIA/NVSentinel#155 shows the open banner shape)
    banner = ("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  "
              "(dvs-builder@U16-I1-N07-12-3)  Thu Jun  5 22:15:03 UTC 2025")
    log = parse_kernel_log(f"[    4.120000] {banner}\n")
    assert log.module_banners == (banner,)
    assert module_banner_version(banner) == ("570.158.01", "open")


@pytest.mark.parametrize("banner, expected", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  352.63  Sat Nov  7 21:25:42 PST 2015", ("352.63", "proprietary")),
    ("NVRM: loading NVIDIA UNIX aarch64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024",
     ("550.90.07", "proprietary")),
    ("NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  560.35.03  Release Build", ("560.35.03", "open")),
    ("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.90.07", (None, None)),
    ("", (None, None)),
])
def test_module_banner_version(banner, expected):
    assert module_banner_version(banner) == expected


def test_syslog_with_inner_kernel_timestamp_and_crlf():
    text = ("Jan  2 03:04:05 gpu01 kernel: [  812.123456] NVRM: Xid (PCI:0000:3b:00): 13, pid=9, name=a.out, "
            "Graphics Exception\r\n"
            "Jan  2 03:04:06 gpu01 systemd[1]: Started Session 4 of user root.\r\n")
    log = parse_kernel_log(text)
    (event,) = log.events
    assert log.format == "syslog"
    assert (event.timestamp, event.message) == ("Jan  2 03:04:05", "Graphics Exception")
    assert not event.line.endswith("\r")
    assert log.lines_scanned == 2


def test_utf16_export_is_read(tmp_path):
    text = "[  1.0] NVRM: Xid (PCI:0000:01:00): 63, pid=1, name=x, Row Remapper: New row marked\n"
    expected = parse_kernel_log(text).events
    assert len(expected) == 1
    assert parse_kernel_log(text.encode("utf-16")).events == expected
    path = tmp_path / "dmesg-utf16.txt"
    path.write_bytes(text.encode("utf-16"))
    assert parse_kernel_log_file(path).events == expected


# --------------------------------------------------------------------------- format detection


@pytest.mark.parametrize("text, expected", [
    ("[   12.345678] some message\n[   12.400000] another\n", "dmesg"),
    ("[  +0.000120] delta form\n", "dmesg"),
    ("kern  :info  : [    0.000000] Linux version 6.8.0\n", "dmesg"),
    ("2024-01-02T03:04:05,123456+00:00 some message\n", "dmesg-iso"),
    ("kern  :warn  : 2024-01-02T03:04:05,123456+00:00 some message\n", "dmesg-iso"),
    ("[Tue Jan  2 03:04:05 2024] some message\n", "dmesg-ctime"),
    ("Jan 02 03:04:05 host kernel: some message\n", "journal"),
    ("2024-01-02T03:04:05+0000 host kernel: some message\n", "journal"),
    ("-- Logs begin at Mon 2024-01-01 00:00:01 UTC. --\nJan 12 03:04:05 host kernel: some message\n", "journal"),
    ("Jan 12 03:04:05 host kernel: a\nJan 12 03:04:06 host kernel: b\n", "journal"),
    ("[  812.123456] host kernel: short-monotonic\n", "journal"),
    ("Jan  2 03:04:05 host kernel: some message\n", "syslog"),
    ("2024-01-02T03:04:05.123456+00:00 host kernel: some message\n", "syslog"),
    ("Jan 12 03:04:05 host kernel: a\nJan 12 03:04:06 host systemd[1]: b\n", "syslog"),
    ("6,1234,5678901,-;some message\n", "kmsg"),
    ("<4>[   12.300000] some message\n", "pstore"),
    ("NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception\n", "plain"),
    ("x", "plain"),
])
def test_detect_log_format(text, expected):
    assert detect_log_format(text) == expected
    assert detect_log_format(text.encode()) == expected


def test_timestamps_as_printed_per_format():
    body = "NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception"
    cases = {
        f"[  812.123456] {body}": "812.123456",
        f"<3>[  812.123456] {body}": "812.123456",
        f"[Tue Jan  2 03:04:05 2024] {body}": "Tue Jan  2 03:04:05 2024",
        f"kern  :warn  : 2024-01-02T03:04:05,123456+00:00 {body}": "2024-01-02T03:04:05,123456+00:00",
        f"2024-01-02T03:04:05+0000 node kernel: {body}": "2024-01-02T03:04:05+0000",
        f"6,1234,812123456,-;{body}": "812.123456",
        f"[  812.123456] [ T4242] {body}": "812.123456",
        body: None,
    }
    for line, stamp in cases.items():
        (event,) = parse_kernel_log(line).events
        assert (event.timestamp, event.xid, event.message) == (stamp, 13, "Graphics Exception"), line


@pytest.mark.parametrize("data", ["", "   \n\n\t", b"", b"\x00\x00\x00", b"\x00\n\x00 ",
                                  b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8, os.urandom(4096)])
def test_not_a_log(data):
    with pytest.raises(ParseError):
        parse_kernel_log(data)
    with pytest.raises(ParseError):
        detect_log_format(data)


def test_nul_padding_after_a_crash_is_still_a_log():
    text = b"[  1.0] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n" + b"\x00" * 70000 + b"\n"
    log = parse_kernel_log(text)
    assert [e.xid for e in log.events] == [79]
    assert parse_kernel_log(b"\x00" * 5000 + text).events[0].line_number == 1


def test_rejects_other_types():
    with pytest.raises(TypeError):
        parse_kernel_log(12)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- scan paths agree


def _mixed_log() -> bytes:
    parts = [p.read_bytes().rstrip(b"\n") + b"\n" for p in KERNEL_LOGS]
    return b"".join(parts) + HAND_WRITTEN_FALLEN.encode() + b"last line without newline NVRM: No NVIDIA GPU found."


@pytest.mark.parametrize("chunk", [64, 1000, 65536])
def test_small_chunks_give_the_same_answer(tmp_path, monkeypatch, chunk):
    data = _mixed_log() + b"\n" + b"x" * 5000 + b" NVRM: GPU 0000:07:00.0: Failed to load thing (long line)\n"
    path = tmp_path / "kern.log"
    path.write_bytes(data)
    expected = parse_kernel_log(data, str(path), workers=1)
    monkeypatch.setattr(kernel_log, "_CHUNK", chunk)
    assert parse_kernel_log_file(path, workers=1) == expected
    assert expected.events[-1].line_number == expected.lines_scanned
    assert expected.events[-1].kind == "nvrm"


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_parallel_scan_gives_the_same_answer(tmp_path, workers):
    data = _mixed_log() * 3
    path = tmp_path / "kern.log"
    path.write_bytes(data)
    expected = parse_kernel_log(data, "x", workers=1)
    assert parse_kernel_log(data, "x", workers=workers) == expected
    assert parse_kernel_log_file(path, "x", workers=workers) == expected
    assert count(expected, "xid", 13) == 3 * (629 + 16)


def test_parallel_scan_forks_and_falls_back(monkeypatch):
    if threading.active_count() > 1:
        pytest.skip("the parallel path is off in a threaded process")
    data = _mixed_log()
    expected = parse_kernel_log(data, workers=1)
    forks = []
    real_fork = os.fork

    def counting_fork():
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(kernel_log.os, "fork", counting_fork)
    assert parse_kernel_log(data, workers=4) == expected
    assert len(forks) == 3

    def failing_fork():
        raise OSError("no more processes")

    monkeypatch.setattr(kernel_log.os, "fork", failing_fork)
    assert parse_kernel_log(data, workers=4) == expected  # scanned in one process instead


def test_line_count_without_trailing_newline():
    assert parse_kernel_log("a\nb").lines_scanned == 2
    assert parse_kernel_log("a\nb\n").lines_scanned == 2
    assert parse_kernel_log("NVRM: No NVIDIA GPU found.").events[0].line_number == 1


# --------------------------------------------------------------------------- fuzzing

FRAGMENTS = [
    "NVRM: ", "Xid (", "PCI:0000:01:00", " GPU-I:05 GPU-CI:01", "): ", "79, ", "45, ", "pid=", "'<unknown>'",
    ", name=", "<unknown>", "caused by previous Xid 13", "The NVIDIA GPU 0000:b3:00.0", "(PCI ID: 10de:26b5)",
    "fallen off the bus", "RmInitAdapter failed! (", "API mismatch: the client '", "' (pid ", ") has the version ",
    ", but this kernel module has the version ", "This PCI I/O region assigned to your NVIDIA device is invalid:",
    "BAR1 is 0M @ 0x0", "request_mem_region failed for ", "nvidia-nvswitch1: SXid (PCI:0000:05:00.0): ",
    "Severity 0", "loading NVIDIA UNIX Open Kernel Module for x86_64  ", "570.1", "probe routine was not called for ",
    "GSP", " timeout", "\\x0a", "\n", "\r\n", " ", ".", "[  12.5] ", "6,1,2,-;", "<4>[ 1.0] ", "kern  :warn  : ",
    "2024-01-02T03:04:05,123456+00:00 ", "Jan 02 03:04:05 h kernel: ", "99999999999999999999", "\x00", "\xff",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_fuzz_bytes(data):
    try:
        log = parse_kernel_log(data)
    except ParseError:
        return
    assert log.format in FORMATS and all(e.kind in KINDS for e in log.events)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000))
def test_fuzz_text(text):
    try:
        detect_log_format(text)
        parse_kernel_log(text)
    except ParseError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=80))
def test_fuzz_nvrm_fragments(parts):
    try:
        log = parse_kernel_log("".join(parts))
    except ParseError:
        return
    for event in log.events:
        assert event.kind in KINDS and 1 <= event.line_number <= log.lines_scanned


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_fuzz_truncated_and_mutated_corpus(data):
    if not KERNEL_LOGS:
        pytest.skip("corpus missing")
    raw = bytearray(data.draw(st.sampled_from(KERNEL_LOGS)).read_bytes())
    start = data.draw(st.integers(0, len(raw)))
    end = data.draw(st.integers(start, len(raw)))
    piece = raw[start:end]
    for _ in range(data.draw(st.integers(0, 20))):
        if not piece:
            break
        piece[data.draw(st.integers(0, len(piece) - 1))] = data.draw(st.integers(0, 255))
    try:
        log = parse_kernel_log(bytes(piece))
    except ParseError:
        return
    assert log.lines_scanned >= len(log.events) and all(e.kind in KINDS for e in log.events)


# --------------------------------------------------------------------------- PCIe AER (GH703)
# The corpus holds no AER lines: these are hand-written in the format of the kernel's
# drivers/pci/pcie/aer.c messages (pre-6.x "Corrected error received: <address>", 6.x "Correctable error
# message received from <address>", old kernels' requester "id=", the device's "PCIe Bus Error" line).

AER_LOG = """\
[  100.000001] pcieport 0000:00:01.0: AER: Multiple Corrected error received: 0000:3b:00.0
[  100.000002] nvidia 0000:3b:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
[  100.000003] nvidia 0000:3b:00.0: AER:   device [10de:2330] error status/mask=00000001/0000e000
[  100.000004] nvidia 0000:3b:00.0: AER:    [ 0] RxErr
[  101.000000] pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0
[  101.000001] pci 0000:3b:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, \
(Requester ID)
[  102.000000] pcieport 0000:00:01.0: AER: Correctable error message received from 0000:3b:00.0
[  103.000000] pcieport 0000:00:01.0: AER: Corrected error received: id=3b00
[  104.000000] nvidia 0000:5d:00.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), \
type=Transaction Layer, (Requester ID)
[  105.000000] ACPI: _OSC: platform does not support [AER]
"""


def test_aer_events_severity_address_and_folding():
    found = events(parse_kernel_log(AER_LOG), "aer")
    assert [(e.line_number, e.pci_address, e.detail) for e in found] == [
        (1, "0000:3b:00.0", "Corrected"),
        (5, "0000:3b:00.0", "Uncorrected (Fatal)"),
        (7, "0000:3b:00.0", "Corrected"),  # 6.x spelling mapped
        (8, "0000:3b:00.0", "Corrected"),  # requester ID 0x3b00: bus 3b, device 0, function 0
        (9, "0000:5d:00.0", "Uncorrected (Non-Fatal)"),
    ]
    assert "type=Physical Layer" in found[0].message  # the device's line joins the root port's
    assert found[0].timestamp == "100.000001"


def test_aer_lines_are_found_by_the_file_scan(tmp_path):
    path = tmp_path / "kern.log"
    path.write_text("[    0.000000] Linux version 6.8.0\n" * 1000 + AER_LOG)
    log = parse_kernel_log_file(path, workers=1)
    assert len(events(log, "aer")) == 5 and events(log, "aer")[0].line_number == 1001


def test_module_signature_refusals_for_nvidia_only():
    """Hand-written from the kernel's messages (module signing, lockdown); the corpus has none."""
    text = (
        "[    5.100000] iwlwifi: module verification failed: signature and/or required key missing - tainting kernel\n"
        "[    6.200000] nvidia: module verification failed: signature and/or required key missing - tainting kernel\n"
        "[    6.300000] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7\n"
        "[    6.400000] nvidia_uvm: Required key not available\n"
    )
    events = [e for e in parse_kernel_log(text).events if e.kind == "module_signature"]
    assert [e.line_number for e in events] == [2, 4]
    assert events[0].timestamp is not None and "tainting kernel" in events[0].message
