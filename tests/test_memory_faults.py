"""GH403 reads failing GPU memory from the kernel log (knowledge/memory_faults.csv): a failed retirement or remap
(Xid 64), an escaped uncorrectable error (Xid 140), or an uncorrectable error that comes back on the same GPU after
a driver load; it then leads, with the GPU's Xids folded under it. A one-off DBE with its recorded repair stays
GH301's. The logs are hand-written from documented forms (tests/data/memfault/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.knowledge.xid import MEMORY_ROLES, lookup, memory_roles
from gpuhealth.model import Severity
from gpuhealth.parsers.kernel_log import parse_kernel_log

DATA = Path(__file__).parent / "data" / "memfault"


def analyze_json(*paths: Path) -> dict:
    result = CliRunner().invoke(main, ["analyze", "--format", "json", *map(str, paths)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


def lead(document: dict) -> str:
    roots = document.get("root_causes", [])
    return roots[0]["key"].split("@", 1)[0] if roots else "none"


def findings(document: dict, code: str) -> list[dict]:
    return [f for f in document["findings"] if f["code"] == code]


def test_every_memory_row_is_a_memory_xid_with_a_role_and_a_source():
    roles = memory_roles()
    assert {64, 140, 48, 94, 95} <= roles.keys()
    for code, role in roles.items():
        assert role.role in MEMORY_ROLES and role.why and role.source_url.startswith("https://docs.nvidia.com/")
        assert lookup(code).cause_class.startswith("memory / ECC")
    assert roles[64].role == roles[140].role == "failure"
    assert roles[63].role == "detail"  # a recorded repair is never the fault itself


def test_the_parser_keeps_each_driver_load_line():
    text = (DATA / "dbe-again-after-reboot.log").read_text()
    log = parse_kernel_log(text, source="dmesg")
    assert log.driver_loads == (1, 4)
    assert len(log.module_banners) == 2


def test_a_dbe_with_its_recorded_retirement_in_one_boot_stays_a_one_off():
    document = analyze_json(DATA / "dbe-retired-one-boot.log")
    assert lead(document) == "GH301"
    assert findings(document, "GH403") == []


@pytest.mark.parametrize("name, xid", [("dbe-retirement-failed.log", "64"), ("ecc-escape.log", "140")])
def test_a_failed_or_escaped_repair_is_failing_memory_and_leads(name, xid):
    document = analyze_json(DATA / name)
    assert lead(document) == "GH403"
    (finding,) = findings(document, "GH403")
    assert finding["severity"] == "critical" and "memory is failing" in finding["message"]
    assert finding["labels"]["xid"] == xid
    assert "0000:8a:00" in finding["message"]
    commands = " ".join(f["command"] for f in finding["fixes"])
    assert "dcgmi diag -r 3" in commands and "nvidia-bug-report.sh" in commands and "--gpu-reset" in commands
    # the Xids are its symptoms, folded under it
    (root,) = [r for r in document["root_causes"] if r["key"].startswith("GH403")]
    assert root["explains"] and all(key.startswith("GH301") for key in root["explains"])


def test_an_uncorrectable_error_after_a_driver_load_on_the_same_gpu_recurs():
    document = analyze_json(DATA / "dbe-again-after-reboot.log")
    assert lead(document) == "GH403"
    (finding,) = findings(document, "GH403")
    assert "came back after the driver loaded again at line 4 " in finding["message"]
    shown = [line for e in finding["evidence"] for line in e["lines"]]
    assert any(line.startswith("2: ") for line in shown) and any(line.startswith("5: ") for line in shown)


@pytest.mark.parametrize("name", ["dbe-two-gpus-across-reboot.log", "dbe-twice-one-boot.log"])
def test_errors_on_two_gpus_or_within_one_boot_are_not_a_recurrence(name):
    document = analyze_json(DATA / name)
    assert findings(document, "GH403") == []
    assert lead(document) == "GH301"


def test_two_files_are_not_placed_one_after_the_other():
    """A driver load in one file cannot be placed among the other file's Xids (each numbers its own lines)."""
    snapshot, _ = analyze_texts([("before.log", (DATA / "dbe-retired-one-boot.log").read_text()),
                                 ("after.log", (DATA / "dbe-again-after-reboot.log").read_text().split("\n", 3)[3])])
    assert snapshot.kernel_log.driver_loads == ()
    assert not [f for f in run_checks(snapshot).findings if f.code == "GH403"]


def test_a_failure_xid_in_words_is_at_most_a_warning():
    words = "After the crash dmesg showed Xid 48 and then Xid 64 on the GPU, unable to retire the page.\n"
    snapshot, _ = analyze_texts([("notes.txt", words)])
    assert snapshot.kernel_log is not None and snapshot.kernel_log.reported
    (finding,) = [f for f in run_checks(snapshot).findings if f.code == "GH403"]
    assert finding.severity is Severity.WARNING and "reported in words" in finding.message


def test_without_gpus_or_a_fault_gh403_is_skipped_not_passed():
    snapshot, _ = analyze_texts([("dmesg.log", (DATA / "dbe-retired-one-boot.log").read_text())])
    report = run_checks(snapshot)
    assert not [f for f in report.findings if f.code == "GH403"]
    assert [s for s in report.skipped if s.code == "GH403"]


SMI_Q = CORPUS / "ml-engineering" / "nvidia-smi-q_excerpt_A100_510.73.08_remapped_rows_pending.txt"
NO_SPARE = "            None                          : 0 bank(s)"


def test_the_row_remapper_histogram_none_is_read_from_text_and_xml():
    from gpuhealth.parsers.smi_query import parse_smi_query
    from gpuhealth.parsers.smi_xml import parse_smi_xml

    text = SMI_Q.read_text()
    assert NO_SPARE in text
    assert parse_smi_query(text).gpus[0].remapped_rows_banks_none == 0
    assert parse_smi_query(text.replace(NO_SPARE, NO_SPARE.replace(": 0", ": 3"))).gpus[0].remapped_rows_banks_none == 3
    xml = (CORPUS / "telegraf-nvidia-smi" / "a10g.xml").read_text()
    assert "<row_remapper_histogram_none>0 bank(s)" in xml
    assert parse_smi_xml(xml).gpus[0].remapped_rows_banks_none == 0


def test_banks_without_spare_rows_warn_before_the_failure():
    """The real excerpt (no bank without spares) says nothing of it; the same with 3 such banks (our edit) warns."""
    text = SMI_Q.read_text()
    quiet, _ = analyze_texts([("nvidia-smi-q.txt", text)])
    assert not [f for f in run_checks(quiet).findings if f.code == "GH402"]
    worn, _ = analyze_texts([("nvidia-smi-q.txt", text.replace(NO_SPARE, NO_SPARE.replace(": 0", ": 3")))])
    (finding,) = [f for f in run_checks(worn).findings if f.code == "GH402"]
    assert finding.severity is Severity.WARNING and "3 memory bank(s) have no spare row left" in finding.message


def test_the_failing_gpu_folds_only_its_own_xids(tmp_path):
    """Xid 64 on one GPU and a DBE on another: the other GPU's Xid 48 stays a root of its own."""
    log = (DATA / "dbe-retirement-failed.log").read_text() + (
        "[ 9001.100200] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected on "
        "GPU in the framebuffer at partition 2, subpartition 0.\n")
    (tmp_path / "dmesg.log").write_text(log)
    document = analyze_json(tmp_path / "dmesg.log")
    assert lead(document) == "GH403"
    (root,) = [r for r in document["root_causes"] if r["key"].startswith("GH403")]
    assert root["explains"] and all("0000:8a:00" in key for key in root["explains"])
    assert any(r["key"].startswith("GH301") and "0000:3b:00" in r["key"] for r in document["root_causes"])


def test_a_gpu_at_the_page_retirement_limit_warns():
    """64 retired pages, the documented maximum, warn (hand-written excerpt in nvidia-smi -q's layout); 63 do not."""
    def excerpt(sbe: int, dbe: int) -> str:
        return ("==============NVSMI LOG==============\n\nDriver Version                            : 470.82.01\n"
                "Attached GPUs                             : 1\nGPU 00000000:00:04.0\n"
                "    Product Name                          : Tesla V100-SXM2-16GB\n"
                "    Retired Pages\n"
                f"        Single Bit ECC                    : {sbe}\n"
                f"        Double Bit ECC                    : {dbe}\n"
                "        Pending Page Blacklist            : No\n")

    def gh402(text: str) -> list:
        snapshot, _ = analyze_texts([("nvidia-smi-q.txt", text)])
        assert snapshot.gpus and snapshot.gpus[0].retired_pages_dbe is not None
        return [f for f in run_checks(snapshot).findings if f.code == "GH402"]

    assert gh402(excerpt(40, 23)) == []
    (finding,) = gh402(excerpt(40, 24))
    assert finding.severity is Severity.WARNING and "64 pages retired" in finding.message
