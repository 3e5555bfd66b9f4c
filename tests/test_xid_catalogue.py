"""The Xid catalogue (knowledge/xid.csv via knowledge/xid.py): complete, sourced, and consistent with
the severity rule documented in xid.py and with facts.md table 1.3."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from importlib import resources

import pytest

from conftest import DATA
from gpuhealth.knowledge import xid
from gpuhealth.model import Severity

FACTS = DATA / "reference" / "facts.md"
SOURCE_KEYS = {"XIDCAT", "XIDARCH", "GPUD", "MODAL", "OGKM"}
BUCKETS = {"", "IGNORE", "RESTART_APP", "RESET_GPU", "RESTART_BM", "RESTART_VM", "RESTART_FM", "CHECK_MECHANICALS",
           "CHECK_UVM", "UPDATE_SWFW", "CONTACT_SUPPORT", "XID_154", "WORKFLOW_XID_45", "WORKFLOW_XID_48",
           "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR"}
COLUMNS = ["xid", "mnemonic", "meaning", "cause_class", "immediate_action", "investigatory_action", "severity",
           "application_class", "in_use", "source"]
# Codes whose severity is not the bucket rule's, as documented in xid.py.
OVERRIDES = {92, 157, 161, *range(162, 177)}


def raw_rows() -> list[dict[str, str]]:
    text = resources.files("gpuhealth.knowledge").joinpath("xid.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == COLUMNS
    return list(reader)


def rule(info: xid.XidInfo) -> str | None:
    action = info.immediate_action
    if action in {"RESET_GPU", "RESTART_BM", "RESTART_VM", "CHECK_MECHANICALS", "WORKFLOW_XID_48",
                  "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR"}:
        return "critical"
    if action == "CONTACT_SUPPORT":
        return "critical" if info.in_use else "warning"
    if action in {"RESTART_APP", "WORKFLOW_XID_45", "CHECK_UVM", "UPDATE_SWFW"}:
        return "warning"
    if action in {"IGNORE", "XID_154"}:
        return "info"
    return None


def test_one_row_per_code_1_to_176_no_duplicates():
    codes = [int(row["xid"]) for row in raw_rows()]
    assert len(codes) == len(set(codes))
    assert sorted(codes) == list(range(1, 177))
    assert [i.xid for i in xid.all_xids()] == list(range(1, 177))


@pytest.mark.parametrize("info", xid.all_xids(), ids=lambda i: f"xid{i.xid}")
def test_row_is_complete_and_sourced(info: xid.XidInfo):
    assert info.source and set(re.split(r";\s*", info.source)) <= SOURCE_KEYS
    assert info.severity in {Severity.INFO, Severity.WARNING, Severity.CRITICAL}
    assert info.severity.value in {"info", "warning", "critical"}
    assert info.immediate_action in BUCKETS
    assert info.mnemonic and info.meaning and info.cause_class
    assert re.fullmatch(r"[A-Z0-9_ /]+", info.mnemonic)
    if info.xid in OVERRIDES:
        assert rule(info) != info.severity.value or info.immediate_action == ""
    else:
        assert info.severity.value == rule(info)
    if not info.in_use:
        assert info.severity is not Severity.CRITICAL


def test_key_codes():
    assert xid.lookup(63).severity is Severity.INFO
    assert xid.lookup(79).severity is Severity.CRITICAL
    assert xid.lookup(79).immediate_action == "RESTART_BM"
    assert xid.lookup(13).application_class and xid.lookup(13).severity is Severity.WARNING
    for code in (13, 31, 43, 45, 69):
        assert xid.lookup(code).application_class, code
    for code in (48, 64, 74, 79, 95, 119, 120, 140):
        assert xid.lookup(code).severity is Severity.CRITICAL, code
    for code in (14, 43, 63, 154):
        assert xid.lookup(code).severity is Severity.INFO, code
    assert xid.lookup(92).severity is Severity.WARNING  # single-bit ECC rate: watch, not broken
    assert not xid.lookup(64).application_class and not xid.lookup(68).application_class
    assert xid.lookup(173).source == "OGKM"


def test_unknown_codes():
    for code in (0, -1, 177, 12028, 10**6):
        assert xid.lookup(code) is None


def test_rows_are_frozen():
    with pytest.raises(AttributeError):
        xid.lookup(13).severity = Severity.INFO  # type: ignore[misc]


def test_no_io_at_import():
    code = ("import gpuhealth.knowledge.xid as x; assert x._catalogue.cache_info().currsize == 0; "
            "x.lookup(13); assert x._catalogue.cache_info().currsize == 1")
    subprocess.run([sys.executable, "-c", code], check=True)


def _facts_rows() -> list[tuple[list[int], str]]:
    """(codes, immediate action) from facts.md table 1.3, codes like '70-72, 75-77' expanded."""
    text = FACTS.read_text(encoding="utf-8")
    section = text.split("### 1.3", 1)[1].split("### 1.4", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7 or not re.match(r"\d", cells[0]):
            continue
        codes: list[int] = []
        for part in re.split(r",\s*", cells[0]):
            low, _, high = part.partition("-")
            codes.extend(range(int(low), int(high or low) + 1))
        rows.append((codes, cells[5]))
    return rows


def test_matches_facts_table():
    rows = _facts_rows()
    assert len(rows) > 60
    covered = set()
    for codes, action in rows:
        covered.update(codes)
        if action in BUCKETS - {""}:
            for code in codes:
                assert xid.lookup(code).immediate_action == action, code
    assert covered == set(range(1, 177))
