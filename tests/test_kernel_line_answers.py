"""Kernel-log and pasted-line answers that were wrong (field-report walkthrough F4, F5, F7, F8), on real lines from
tests/cases: each asserts what an engineer would say, with a near miss where one exists."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.fixsections import section_of
from gpuhealth.model import Finding, Report, Severity
from repo_paths import REPO

CASES = REPO / "tests" / "cases" / "dev"


def case_lines(case: str, name: str, *needles: str) -> str:
    """The lines of a case file holding one of ``needles`` (with their continuation lines), as the user pasted."""
    text = (CASES / case / name).read_text(encoding="utf-8")
    return text if not needles else "".join(line for line in text.splitlines(keepends=True)
                                            if any(n in line for n in needles))


def report(text: str, name: str = "paste.txt") -> Report:
    snapshot, _ = analyze_texts([(name, text)])
    return run_checks(snapshot)


def found(result: Report, code: str) -> Finding | None:
    return next((f for f in result.findings if f.code == code), None)


# ---------------------------------------------------------------- F4: NVRM "API mismatch" keeps its versions

def test_multi_line_api_mismatch_names_both_versions():
    """The versions sit on the message's continuation lines ("NVRM: this kernel module has the version ...")."""
    text = case_lines("driver-library-mismatch-bazzite-half-baked-update", "dmesg.log")
    finding = found(report(text, "dmesg.log"), "GH202")
    assert finding is not None
    assert "kernel module 570.144" in finding.message and "user space 570.153.02" in finding.message


def test_syslog_escaped_api_mismatch_names_both_versions():
    """rsyslog writes the newlines as #012 (ansible's journal dump in the slurm case)."""
    text = case_lines("driver-library-mismatch-slurm-appliance-535-530", "ansible.log", "API mismatch")
    finding = found(report(text, "kern.log"), "GH202")
    assert finding is not None and "kernel module 530.30.02, user space 535.54.03" in finding.message


def test_api_mismatch_without_versions_says_so_without_question_marks():
    finding = found(report("[   12.014918] NVRM: API mismatch: the client has the version\n", "dmesg.log"), "GH202")
    assert finding is not None and "?" not in finding.message


# ---------------------------------------------------------------- F7: an invalid BAR explains the failed probe

BAR_LOG = ("pci-bar-vm-bar1-64bit-mmio", "dmesg.log")


def test_invalid_bar_log_gets_no_secure_boot_side_note():
    text = case_lines(*BAR_LOG, "0000:14:00.0")
    result = report(text, "dmesg.log")
    assert found(result, "GH304") is not None
    assert all("Secure Boot" not in f.message for f in result.findings)
    assert all(c.cause != "secure-boot-refused" or c.status == "ruled out"
               for f in result.findings for c in f.differential)


def test_failed_probe_line_alone_is_the_probe_failure_not_a_refused_module():
    """Near miss: without the BAR line the driver core's probe line is GH305's own event for that GPU (it was read
    only as a pasted line, so GH305 "ran clean" and the report said HEALTHY); a loaded module was not refused."""
    line = next(line for line in case_lines(*BAR_LOG, "probe of").splitlines())
    result = report(line + "\n")
    finding = found(result, "GH305")
    assert finding is not None and finding.severity is Severity.CRITICAL
    assert finding.subject.pci_address == "0000:14:00.0" and "GH201" in finding.explains
    assert found(result, "GH201") is None
    assert all("Secure Boot" not in f.message for f in result.findings)


# ---------------------------------------------------------------- F8: a harmless taint line has nothing to fix

def test_module_verification_taint_line_alone_shows_no_fix():
    text = case_lines("not-a-fault-module-verification-taint-loaded", "dmesg.log", "module verification failed")
    result = report(text)
    assert result.findings and all(f.severity.value == "info" for f in result.findings)
    assert all(not f.fixes for f in result.findings), [f.fixes for f in result.findings]


def test_a_line_that_is_a_fault_keeps_its_fixes():
    """Near miss: "Key was rejected by service" is the same check's territory and does get the procedure."""
    result = report("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")
    assert any(f.fixes for f in result.findings)


# ---------------------------------------------------------------- F5: RmInitAdapter: look before the reboot

def test_rminit_adapter_lists_the_read_only_looks_before_the_reboot():
    text = case_lines("rminit-adapter-firmware-update-system76", "dmesg.log")
    finding = found(report(text, "dmesg.log"), "GH303")
    assert finding is not None
    sections = [section_of(f) for f in finding.fixes]
    reboot = next(i for i, f in enumerate(finding.fixes) if "reboot" in f.command)
    assert finding.fixes[reboot].disruptive
    assert sections[:reboot] and set(sections[:reboot]) == {"diagnostic"}
    looked = " ".join(f.command for f in finding.fixes[:reboot])
    assert "/lib/firmware/nvidia" in looked and "dmesg" in looked


# ---------------------------------------------------------------- F2: "Failed to open /dev/nvidiactl: No such device"

FIELD_LINES = REPO / "tests" / "data" / "fieldlines"  # hand-written, see its README


def test_nvidiactl_no_such_device_reads_as_the_module_not_loaded():
    text = (FIELD_LINES / "persistenced-nvidiactl-enodev.log").read_text(encoding="utf-8")
    result = report(text, "journal.log")
    assert result.verdict == "BROKEN", "the line was ignored (HEALTHY) or not understood"
    finding = found(result, "GH201")
    assert finding is not None and finding.severity.value == "critical"
    assert found(result, "GH003") is None
    # the commands that tell whether and why the module is not loaded: read-only (issue 22: never a modprobe to paste)
    commands = {f.command for f in finding.fixes}
    assert {"mokutil --sb-state", "dkms status"} <= commands
    assert not any("modprobe nvidia" in c for c in commands)
    assert not any("modprobe nvidia" in c.command for c in finding.differential)


def test_nvidiactl_missing_reads_as_device_nodes_missing():
    """Near miss: the node does not exist (ENOENT) is GH207. JPaulMora/Pyrit#36, NVIDIA's user-space driver."""
    result = report("NVIDIA: could not open the device file /dev/nvidiactl (No such file or directory).\n")
    assert found(result, "GH207") is not None and found(result, "GH201") is None
