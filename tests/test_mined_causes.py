"""A mined message whose family points to a cause acts in the diagnosis like a signature row (checks/mined_causes.py):
a family that CONFIRMS its cause makes the cause lead (its code first, confirmed, the mined source in its labels) and
folds the mined check's finding and the symptom under it; a family that only SUGGESTS its cause ranks it in the
symptom's differential without confirming it; a signature row that names the same line wins."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest
from rich.console import Console

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge import mined, mined_api, mined_tools
from gpuhealth.knowledge.causes import causes
from gpuhealth.knowledge.signatures import match_line
from gpuhealth.model import Report, Severity
from gpuhealth.report import json_report, text
from gpuhealth.report.common import fold

# A printf conversion filled the way the printing program would (independently of the miners' pattern builders).
SPEC = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q|I64)?([diouxXeEfgGcspm%])")
FILL = {"d": "1", "i": "1", "u": "7", "o": "7", "x": "1f", "X": "1F", "c": "c", "s": "nvidia", "p": "0x1f", "%": "%"}
SMI_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
              "NVIDIA driver is installed and running.")


def render(fmt: str) -> str:
    return SPEC.sub(lambda m: FILL.get(m.group(1), "1.5"), fmt)


def report(text: str, name: str = "paste.txt") -> Report:
    snapshot, _ = analyze_texts([(name, text)])
    return run_checks(snapshot)


def text_report(result: Report) -> str:
    buffer = io.StringIO()
    text.render(result, Console(file=buffer, width=400, highlight=False, color_system=None))
    return buffer.getvalue()


def lead(result: Report):
    return fold(result.findings)[0].finding


def document(result: Report) -> dict:
    return json.loads(json_report.render(result))


def test_every_family_says_whether_it_confirms_or_suggests_its_cause():
    """The decides column: set exactly where a cause is, and to one of the two words."""
    for table in (mined.families(), mined_tools.families()):
        for family in table.values():
            assert family.decides == ("" if not family.cause else family.decides), family.id
            assert family.decides in (("confirms", "suggests") if family.cause else ("",)), family.id
    for row in mined_api.errors():
        assert row.decides in (("confirms", "suggests") if row.cause else ("",)), row.id
        assert not row.cause or causes()[row.cause].code, row.id


# ---------------------------------------------------------------- the driver's table (GH308)

def _driver_row() -> mined.MinedMessage:
    """An error-level row of a confirming driver family whose rendered line no signature row names."""
    families = mined.families()
    return next(row for row in mined.messages() if families[row.family].decides == "confirms"
                and row.level == "error" and "conflicting kernel module" in row.format
                and match_line(f"NVRM: {render(row.format)}") is None)


def test_a_driver_line_of_a_confirming_family_makes_its_cause_lead():
    row = _driver_row()
    family = mined.families()[row.family]
    result = report(f"[    5.104021] NVRM: {render(row.format)}\n", "dmesg.txt")
    first = lead(result)
    assert first.code == family.code == "GH305"
    assert first.labels["mined"] == row.id and first.labels["mined_by"] == "GH308"
    assert first.labels["mined_source"] == f"{row.repository} {row.tags} {row.file_line}"
    (gh308,) = [f for f in result.findings if f.code == "GH308"]
    assert gh308.severity is Severity.INFO  # folded under the cause, not a second finding of the same fault
    (top,) = [f for f in document(result)["findings"] if f["code"] == "GH305"]
    assert top["labels"]["mined_source"].startswith("NVIDIA/open-gpu-kernel-modules ")


# ---------------------------------------------------------------- the API table (GH309)

def test_an_api_error_that_confirms_its_cause_leads_with_it_in_text_and_json():
    line = "nvmlDeviceGetHandleByIndex() failed: NVML_ERROR_RESET_REQUIRED"
    row = mined_api.lookup(line)
    assert row is not None and row.decides == "confirms" and row.cause == "gpu-reset-required"
    assert match_line(line) is None  # no signature row: the mined row decides
    result = report(line + "\n", "train.log")
    first = lead(result)
    assert first.code == "GH404" and first.severity is not Severity.INFO
    assert [(c.cause, c.status) for c in first.differential] == [("gpu-reset-required", "confirmed")]
    top = document(result)["findings"][0]
    assert top["code"] == "GH404" and top["labels"]["mined"] == row.id and top["labels"]["mined_by"] == "GH309"
    assert top["labels"]["mined_source"] == row.where
    assert top["differential"][0]["status"] == "confirmed"
    assert [f.severity for f in result.findings if f.code == "GH309"] == [Severity.INFO]
    shown = text_report(result)
    assert shown.index("GH404") < shown.index("GH309") and f"cause: the GPU needs a reset before it can be used (the " \
        f"line: {line} (NVML, {row.where}))" in shown


def test_an_api_line_and_the_symptom_line_lead_with_the_cause_and_fold_the_symptom():
    """NVML's "driver not loaded" beside nvidia-smi's "couldn't communicate": the module not loaded (GH201) leads;
    GH203 folds under it, and so does the GH309 finding for the same line."""
    text = f"nvmlInit() failed: NVML_ERROR_DRIVER_NOT_LOADED\n{SMI_FAILED}\n"
    assert match_line(text.splitlines()[0]) is None
    result = report(text, "session.txt")
    (group, *_) = fold(result.findings)
    assert group.finding.code == "GH201" and group.finding.severity is Severity.CRITICAL
    assert {"GH203", "GH309"} <= {f.code for f in group.symptoms}
    assert [g.finding.code for g in fold(result.findings) if g.finding.severity is Severity.CRITICAL] == ["GH201"]
    (gh203,) = [f for f in document(result)["findings"] if f["code"] == "GH203"]
    assert gh203["severity"] == "critical" and "GH201" in document(result)["findings"][0]["code"]


def test_an_api_error_that_only_suggests_ranks_its_cause_without_confirming_it():
    """DCGM's Xid failure code suggests an Xid that blames the GPU (an application's Xid does not): first among the
    open causes of the run-time failure it shows, not confirmed."""
    line = "Error: DCGM_FR_XID_ERROR"
    row = mined_api.lookup(line)
    assert row is not None and row.decides == "suggests" and match_line(line) is None
    result = report(line + "\n", "train.log")
    differential = [c for f in result.findings for c in f.differential]
    assert differential, [f.code for f in result.findings]
    assert not any(c.status == "confirmed" for c in differential)
    xid = next(c for c in differential if c.cause == row.cause == "xid-hardware-error")
    assert xid.status == "open" and xid.why.startswith("suggested by the line: ")
    assert next(c for c in differential if c.status == "open") is xid


# ---------------------------------------------------------------- the toolkit and installer table (GH310)

INSTALLER_LINE = ("ERROR: The kernel source path '/usr/src/linux-headers-6.8.0-45-generic' does not exist.  Please "
                  "make sure you have installed the kernel source files for your kernel and that they are properly "
                  "configured")


def test_an_installer_line_of_a_suggesting_family_moves_its_cause_up_without_confirming_it():
    """The installer's signing failure suggests Secure Boot refused the module (it does not say the kernel refused
    it): beside nvidia-smi's failure, that cause (third by prior) leads GH203's open causes, unconfirmed, and the GH310
    finding explains no symptom of its own."""
    row = next(r for r in mined_tools.messages() if r.format.startswith("Failed to sign precompiled kernel module"))
    family = mined_tools.families()[row.family]
    assert family.decides == "suggests" and family.cause == "secure-boot-refused"
    line = f"ERROR: {render(row.format)}"
    assert match_line(line) is None
    result = report(f"{line}\n{SMI_FAILED}\n", "session.txt")
    (gh203,) = [f for f in result.findings if f.code == "GH203"]
    top = gh203.differential[0]
    assert (top.cause, top.status) == ("secure-boot-refused", "open") and top.why.startswith("suggested by the line: ")
    assert not any(c.status == "confirmed" for c in gh203.differential)
    assert [f.explains for f in result.findings if f.code == "GH310"] == [()]
    assert "most likely: Secure Boot refused the unsigned nvidia module (suggested by the line: ERROR: Failed to sign" \
        in text_report(result)


@pytest.fixture
def kernel_source_confirms(monkeypatch):
    """The toolkit's and installer's table has one confirming family (nouveau), and its one message is a signature
    row: to see the same mechanism on this table, the kernel-source family is made to confirm (its messages are
    left as mined)."""
    real = mined_tools.families()
    patched = {k: (replace(v, decides="confirms") if k == "installer-kernel-source" else v) for k, v in real.items()}
    monkeypatch.setattr(mined_tools, "families", lambda: patched)
    return patched["installer-kernel-source"]


def test_an_installer_line_of_a_confirming_family_leads_and_folds_the_symptom(kernel_source_confirms):
    family = kernel_source_confirms
    row = mined_tools.lookup(INSTALLER_LINE)
    assert row is not None and row.family == family.id and match_line(INSTALLER_LINE) is None
    alone = report(INSTALLER_LINE + "\n", "installer.log")
    first = lead(alone)
    assert first.code == family.code == "GH503"
    assert [(c.cause, c.status) for c in first.differential] == [(family.cause, "confirmed")]
    assert first.labels["mined"] == row.id and first.labels["mined_family"] == family.id
    assert first.labels["mined_source"] == f"{row.repository} {row.tags} {row.file_line}"
    (gh310,) = [f for f in alone.findings if f.code == "GH310"]
    assert gh310.severity is Severity.INFO and any(f.code == "GH310" for f in fold(alone.findings)[0].symptoms)
    top = document(alone)["findings"][0]
    assert top["code"] == "GH503" and top["labels"]["mined_by"] == "GH310"


def test_without_the_confirming_column_the_same_line_does_not_confirm():
    """The decision is the table's: as mined (the family suggests), the line confirms nothing."""
    result = report(INSTALLER_LINE + "\n", "installer.log")
    assert not any(c.status == "confirmed" for f in result.findings for c in f.differential)
    assert not any("mined_by" in f.labels for f in result.findings)


def test_a_signature_row_wins_over_a_mined_row_on_the_same_line():
    """The installer's nouveau message is a row of both tables: the hand-verified signature row files it; no mined
    stand-in is made for it."""
    row = next(r for r in mined_tools.messages() if r.family == "installer-nouveau")
    line = f"ERROR: {render(row.format)} system.  This driver is incompatible with nouveau."
    assert match_line(line) is not None
    result = report(line + "\n", "installer.log")
    assert not any(f.code == "GH310" for f in result.findings)
    assert not any("mined_by" in f.labels for f in result.findings)
    assert lead(result).code == "GH206"
