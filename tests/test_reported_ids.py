"""Identifiers named in a person's words or in any line that is no kernel log: Xids and SXids named in prose,
markdown and titles (parsers/reported_xids.py), and CUDA errors in the spellings other than their C enum name
(knowledge/mined_api.by_spelling). Every example line here is hand-written in the shapes the docstrings cite."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main
from gpuhealth.knowledge import mined_api
from gpuhealth.parsers.reported_xids import reported_xids


def named(line: str) -> list[tuple[str, int]]:
    found, _ = reported_xids([line], "notes.txt")
    return [(e.kind, e.xid) for e in found["kernel_log"].events] if found else []


def analyze(tmp_path: Path, **files: str) -> dict:
    """``gpuhealth analyze --format json`` on the files (name: text), in name order."""
    paths = []
    for name, text in sorted(files.items()):
        path = tmp_path / name.replace("_", ".")
        path.write_text(text)
        paths.append(str(path))
    result = CliRunner().invoke(main, ["analyze", "--format", "json", *paths])
    return json.loads(result.stdout)


def lead(document: dict) -> str:
    roots = document.get("root_causes", [])
    return roots[0]["key"].split("@", 1)[0] if roots else "none"


def finding(document: dict, code: str) -> dict:
    (found,) = [f for f in document["findings"] if f["code"] == code]
    return found


# ---------------------------------------------------------------- Xids in words

@pytest.mark.parametrize(("line", "expected"), [
    ("the kernel log shows an Xid 31 MMU fault", [("xid", 31)]),
    ("Xid 48 / 171: uncorrectable DBE", [("xid", 48), ("xid", 171)]),
    ("repeated Xid 79 since Monday", [("xid", 79)]),
    ("we get Xids 63 and 64 on GPU 2", [("xid", 63), ("xid", 64)]),
    ("Xid error 13, 31 and 43 after the update", [("xid", 13), ("xid", 31), ("xid", 43)]),
    ("- **XID: 79** (GPU fell off)", [("xid", 79)]),
    ("## [BUG] node crashes with `Xid 119`", [("xid", 119)]),
    ("xid=48 in the exporter alert", [("xid", 48)]),
    ("the switch logged SXid 12028 twice", [("sxid", 12028)]),
    ("got xid79 and Xid-48 again", [("xid", 79), ("xid", 48)]),
    ("We don't know why, the log shows Xid 79", [("xid", 79)]),
])
def test_an_xid_named_in_words_is_read(line, expected):
    assert named(line) == expected


@pytest.mark.parametrize("line", [
    "pxid 79 and xidle 48",  # inside words
    "the xid-related counter is 79",  # a compound word
    "XID0x1f",
    "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 79",  # a metric's name
    "XID 0x1f of the window",  # hexadecimal: an X11 resource id
    "xid 2.5 was released",  # a version
    "postgres xid 123456 wrapped around",  # too large for an Xid
    "Xid errors: 0",  # none
    "there is no Xid 79 in the log",  # denied
    "please check whether Xid 48 appears",  # asked about
    "[ 12.3] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.",  # the driver's own line
    "NVRM: Xid (PCI:0000:dc:00): 45, pid=9, Ch 00000010, caused by previous Xid 13",
])
def test_false_friends_are_not_xids(line):
    assert named(line) == []


def test_a_reported_kernel_log_says_it_is_words():
    found, lines = reported_xids(["job died", "dmesg had Xid 13 / 43 in it"], "notes.txt")
    log = found["kernel_log"]
    assert log.reported and log.format == "reported" and "reporter's words" in log.source
    assert lines == ["dmesg had Xid 13 / 43 in it"] and {e.line_number for e in log.events} == {2}


def test_prose_xid_48_leads_with_its_catalogue_meaning_below_critical(tmp_path):
    document = analyze(tmp_path, notes_txt="After some hours the job dies; the kernel log shows Xid 48 on the A100.\n")
    assert lead(document) == "GH301"
    xid = finding(document, "GH301")
    assert xid["severity"] == "warning"  # a logged Xid 48 is critical; said in words it is not
    assert "Double-bit (uncorrectable) ECC error" in xid["message"]
    assert "reported in words, not logged" in xid["message"]
    assert "the reporter's words" in xid["evidence"][0]["source"]
    assert not any(f["severity"] == "critical" for f in document["findings"])
    assert not any(f["code"] in ("GH002", "GH003", "GH004") for f in document["findings"])


def test_prose_xid_79_is_gh302_as_a_warning(tmp_path):
    document = analyze(tmp_path, notes_txt="Every few days we get Xid 79 and the GPU disappears.\n")
    assert lead(document) == "GH302"
    assert finding(document, "GH302")["severity"] == "warning"
    assert "reported in words" in finding(document, "GH302")["message"]


def test_a_reported_log_leaves_the_other_kernel_log_checks_skipped(tmp_path):
    document = analyze(tmp_path, notes_txt="we see Xid 13 a lot\n")
    skipped = {s["code"]: s["reason"] for s in document["skipped"]}
    for code in ("GH303", "GH703", "GH704", "GH812"):  # RmInitAdapter, AER, Xid storms, the OOM killer
        assert "only Xids named in words" in skipped[code], code


DMESG = ("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics Exception: "
         "ESR 0x405840=0x1\n")


@pytest.mark.parametrize("names", [("a_dmesg.log", "b_notes.txt"), ("b_dmesg.log", "a_notes.txt")])
def test_a_real_kernel_log_wins_over_an_xid_named_in_words(tmp_path, names):
    log_name, notes_name = names
    document = analyze(tmp_path, **{log_name.replace(".", "_"): DMESG,
                                    notes_name.replace(".", "_"): "We keep seeing Xid 79 on this box.\n"})
    codes = {f["code"] for f in document["findings"]}
    assert "GH302" not in codes  # the prose's Xid 79 is set aside: the machine's log shows Xid 13
    assert "Xid 13" in finding(document, "GH301")["message"]
    assert "reported" not in finding(document, "GH301")["message"]


# ---------------------------------------------------------------- CUDA errors in other spellings

@pytest.mark.parametrize(("line", "name"), [
    # cuda-python's enum reprs: the C name behind the class name (the index already finds them)
    ("cudaError_t.cudaErrorInsufficientDriver", "cudaErrorInsufficientDriver"),
    ("<CUresult.CUDA_ERROR_SYSTEM_NOT_READY: 802>", "CUDA_ERROR_SYSTEM_NOT_READY"),
    # the runtime name without its cudaError prefix, after a CUDA error word
    ("CUDAError InsufficientDriver", "cudaErrorInsufficientDriver"),
    ("CUDA error: SystemNotReady", "cudaErrorSystemNotReady"),
    # numbers tied to CUDA by the words right before them
    ("RuntimeError: CUDA error 35", "cudaErrorInsufficientDriver"),
    ("cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version", None),
    ("CUDA failure 35: something", "cudaErrorInsufficientDriver"),
    ("CUDA error code=802", "cudaErrorSystemNotReady"),
    ("CUDA_ERROR 999", "CUDA_ERROR_UNKNOWN"),
    # a call's number: the driver API's for a cuXxx call, the runtime's for a cudaXxx one
    ("cuInit returned 802", "CUDA_ERROR_SYSTEM_NOT_READY"),
    ("cuInit(0) returned error 802", "CUDA_ERROR_SYSTEM_NOT_READY"),
    ("cudaGetDeviceCount returned 100", "cudaErrorNoDevice"),
    # a number beside an error word and a word of its enum's own name, on a line naming CUDA
    ("CUDA initialization fails with 802 system error", "cudaErrorSystemNotReady"),
])
def test_a_cuda_error_in_another_spelling_is_its_row(line, name):
    row = mined_api.named_error(line)
    if name is None:  # the line's words may match a message row first: its number is still error 35
        row = mined_api.by_spelling(line)
        assert row is not None and row.number == "35"
        return
    assert row is not None and row.name == name, (line, row)


@pytest.mark.parametrize("line", [
    "I have CUDA 11.8 and 2 GPUs",
    "CUDA 12.2 error while building",  # a version
    "the server has 802 system files",  # no CUDA word
    "error 802 in the build",  # a bare number
    "cuBLAS failed with 3 handles in CUDA",  # a library, not a driver call; "3 handles" names no enum
    "cuDNN returned 3",
    "CUDA error: out of memory",  # words, not a stem (the catalogue reads the message itself)
    "my cuda install has 802 system files",  # no error word beside the number
])
def test_numbers_and_words_not_tied_to_a_cuda_error_are_not_read(line):
    assert mined_api.by_spelling(line) is None


@pytest.mark.parametrize(("line", "code"), [
    ("CUDA initialization fails with 802 system error\n", "GH210"),
    ("cuInit returned 802\n", "GH210"),
    ("CUDAError InsufficientDriver\n", "GH601"),
    ("RuntimeError: CUDA error 35\n", "GH601"),
    ("the node says NVML_ERROR_GPU_IS_LOST\n", "GH302"),
])
def test_another_spelling_leads_as_its_c_name_does(tmp_path, line, code):
    document = analyze(tmp_path, notes_txt=line)
    codes = {f["code"] for f in document["findings"]}
    assert code in codes and lead(document) in (code, "GH610"), (line, lead(document), codes)
    assert "GH003" not in codes  # never an unknown line


def test_the_enum_words_are_the_names_own():
    rows = {r.name: r for r in mined_api.errors()}
    assert mined_api.enum_words(rows["CUDA_ERROR_SYSTEM_NOT_READY"]) == {"system", "ready"}
    assert mined_api.enum_words(rows["cudaErrorInsufficientDriver"]) == {"insufficient", "driver"}


# ---------------------------------------------------------------- cost

@pytest.mark.parametrize("line", ["xid " * 5000, "Xid 1/" * 3000 + "x", "Xid " + ": " * 4000 + "7",
                                  "CUDA error " * 4000, "cuda 1 error " * 3000, "cuInit(" * 3000 + " returned 8"])
def test_long_hostile_lines_cost_linear_time(line):
    started = time.perf_counter()
    reported_xids([line] * 3, "notes.txt")
    mined_api.by_spelling(line)
    assert time.perf_counter() - started < 1.0


# ---------------------------------------------------------------- NVML's names as go-nvml prints them

@pytest.mark.parametrize(("line", "name"), [
    ("Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_LIBRARY_NOT_FOUND"),
    ("error getting device handle for index 0: ERROR_GPU_IS_LOST", "NVML_ERROR_GPU_IS_LOST"),
    ("nvml.Init() returned ERROR_TIMEOUT", "NVML_ERROR_TIMEOUT"),  # a generic name beside the word NVML
])
def test_go_nvml_names_are_nvml_rows(line, name):
    row = mined_api.named_error(line)
    assert row is not None and row.name == name


@pytest.mark.parametrize("line", [
    "WaitForSingleObject failed: ERROR_TIMEOUT",  # a generic name, no NVML on the line
    "cuCtxCreate: CUDA says ERROR_NOT_SUPPORTED",  # CUDA's, maybe: not NVML's
    "MY_ERROR_GPU_IS_LOST",  # inside a word
])
def test_other_error_names_are_not_nvml(line):
    assert mined_api.by_spelling(line) is None or not mined_api.by_spelling(line).name.startswith("NVML")


def test_a_go_nvml_name_leads_as_the_c_name(tmp_path):
    document = analyze(tmp_path, plugin_log="E0101 00:00:00.000000 1 main.go:1] error: ERROR_GPU_IS_LOST\n")
    assert lead(document) == "GH302"


def test_the_xid_reader_is_imported_only_for_a_paste_naming_an_xid():
    import mined_helpers

    probe = mined_helpers.imported("gpuhealth.parsers.reported_xids")
    assert "NOT-MINED" in mined_helpers.analyze_in_child("RuntimeError: CUDA error: out of memory\n", probe)
    said = mined_helpers.analyze_in_child("the log shows Xid 79\n", probe)
    assert "MINED" in said and "NOT-MINED" not in said
