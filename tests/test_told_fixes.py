"""A cause confirmed by the reporter's fix (knowledge/fix_phrases.csv, read by parsers/prose_symptoms.py): "blacklisting
nouveau fixed it", "it only worked after I installed the kernel headers", "the solution was to disable Secure Boot" are
evidence for the cause the fix addresses, and that cause leads over a cause merely named or supposed; a fix that did not
work, a suggestion, a question, a fix that only lasted and one of a later problem confirm nothing. Still the reporter's
words: at most a warning, and machine output that shows otherwise wins. The sentences are written for these tests
(hand-written, no case's text)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import ALREADY_APPLIED, FIX_CONFIRMED, FIX_WORKED
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.fixscript import fix_script
from gpuhealth.fixsections import section_of
from gpuhealth.knowledge.causes import causes
from gpuhealth.knowledge.symptom_phrases import FIXED_SUFFIX, fix_confirmed, phrases, told_signature
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms


def confirmed(words: str) -> set[str]:
    return {t.cause for t in told_symptoms(words) if t.cause and t.confirmed}


def named(words: str) -> set[str]:
    return {t.cause for t in told_symptoms(words) if t.cause and not t.confirmed}


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


@pytest.mark.parametrize(("words", "cause"), [
    # "X fixed it", "X did the trick", "only X helped"
    ("Blacklisting the nouveau driver did the trick.", "nouveau-bound"),
    ("In the end only installing linux-headers-$(uname -r) helped.", "kernel-headers-missing"),
    ("sudo dkms autoinstall solved it for me.", "module-not-built"),
    # "solved by X", "fixed it by X", "it only worked after X", "it works again after X"
    ("I finally fixed it by disabling Secure Boot in the firmware setup.", "secure-boot-refused"),
    ("Solved by starting nvidia-fabricmanager and enabling it at boot.", "fabric-manager-failed"),
    ("It works again after I reseated the card.", "gpu-fallen-off-bus"),
    ("It only worked after I installed the nvidia container toolkit.", "container-toolkit-missing"),
    # "the fix was X", "what fixed it was X", "SOLVED: X"
    ("The fix was to blacklist nouveau and rebuild the initramfs.", "nouveau-bound"),
    ("What finally fixed it was enrolling the MOK key at the blue screen.", "secure-boot-refused"),
    ("SOLVED: installed the kernel headers for the running kernel.", "kernel-headers-missing"),
    # what it acts on named first, the fix after: "nouveau, which I could only fix by blacklisting it"
    ("The desktop always came up on nouveau, which I fixed by blacklisting it.", "nouveau-bound"),
    # a habit told before the fix ("it would ...") is no supposition of the fix
    ("On most boots it would fall back to nouveau, which we only fixed by blacklisting it.", "nouveau-bound"),
    # "it failed until I X": the fix made it work
    ("cuInit kept returning CUDA_ERROR_UNKNOWN until we ran sudo modprobe nvidia-uvm.", "uvm-missing"),
    ("The installer failed every time until I installed the kernel headers.", "kernel-headers-missing"),
    # the culprit found: "it turned out to be X", "the culprit was X"
    ("In the end it turned out to be Secure Boot.", "secure-boot-refused"),
    ("The culprit was the nouveau driver all along.", "nouveau-bound"),
    ("原来是 nouveau 的问题", "nouveau-bound"),
    # airflow for a passive card, a full-width slot for a narrow link
    ("Strapping a blower fan to the passive card did the trick.", "passive-gpu-without-airflow"),
    ("Removing the USB risers fixed the slow transfers, the cards now link at x16.", "pcie-link-degraded"),
    # Chinese
    ("把 nouveau 屏蔽之后就好了", "nouveau-bound"),
    ("关掉 secure boot 以后问题解决了", "secure-boot-refused"),
])
def test_a_fix_that_worked_confirms_its_cause(words, cause):
    assert cause in confirmed(words), told_symptoms(words)


@pytest.mark.parametrize("words", [
    # did not work
    "Blacklisting nouveau did not help.",
    "Installing the kernel headers didn't fix it either.",
    "Even after I reseated the card it never worked.",
    # suggested, hoped, supposed
    "Try blacklisting nouveau first.",
    "You should install the kernel headers before running the installer.",
    "Disabling Secure Boot might fix it.",
    "Blacklisting nouveau would probably fix it, I guess.",
    "If you start the fabric manager it should work.",
    # asked
    "Did blacklisting nouveau fix it?",
    "Has anyone fixed this by reseating the card?",
    # only lasted: a fix that did not last confirms nothing (the problem is back)
    "Blacklisting nouveau worked for a while, but after the next update it broke again.",
    "Reseating the card fixed it temporarily.",
    # a different, later problem
    "Installing the kernel headers fixed the build, but now nvidia-smi fails with another error.",
    # ... also told in the next sentence of the same paragraph
    "Blacklisting nouveau fixed the black screen. Now I get CUDA error 999 in every PyTorch job.",
    "Reseating the card solved it. Two days later it fell off the bus again.",
    # a routine step followed by a working GPU is no fix of anything
    "After the driver update I rebooted and nvidia-smi works.",
    # the fix not done
    "Without blacklisting nouveau it works fine.",
    "Wait until I install the kernel headers, then try again.",
    # a culprit believed, not found; something too vague to name a cause
    "I think the problem was nouveau.",
    "Maybe it turned out to be Secure Boot, not sure.",
    "It turned out to be the card.",
])
def test_a_fix_that_failed_was_suggested_asked_or_did_not_last_confirms_nothing(words):
    assert not confirmed(words), told_symptoms(words)


@pytest.mark.parametrize(("words", "cause"), [
    # a cause told, then a fix that worked: the history of the cause is its confirmation
    ("The nvidia module was not built for the new kernel at first, but dkms autoinstall fixed it.", "module-not-built"),
    ("The driver broke after the kernel update, but dkms autoinstall fixed it.", "module-not-built"),
    # history in the next clause after ";" is seen
    ("Turned out the fabric manager was not running; starting it fixed it.", "fabric-manager-failed"),
    # the reporter found the cause
    ("It turned out that nouveau is still bound to the card.", "nouveau-bound"),
])
def test_a_cause_told_then_fixed_or_found_is_confirmed(words, cause):
    assert cause in confirmed(words), told_symptoms(words)


def test_a_symptom_over_after_a_semicolon_is_history():
    """"slow; X fixed that": the symptom is over (history after ";"), and the fix confirms its cause."""
    words = "nvidia-smi took ten seconds on every call; enabling persistence mode fixed that."
    found = told_symptoms(words)
    assert not [t for t in found if t.symptom], found
    assert confirmed(words) == {"persistence-off"}


@pytest.mark.parametrize(("words", "cause"), [
    ("I doubt the kernel headers are missing, they were installed with the kernel.", "kernel-headers-missing"),
    ("Not sure whether the fabric manager is not running on this node.", "fabric-manager-failed"),
    ("The GPU fell off the bus once in 2022.", "gpu-fallen-off-bus"),
    ("Two years ago the fabric manager was not running on this node.", "fabric-manager-failed"),
    ("At first I thought the kernel headers were missing, but installing them changed nothing.",
     "kernel-headers-missing"),
    ("We assumed the fabric manager was not running, yet its unit was active.", "fabric-manager-failed"),
])
def test_a_doubt_and_an_episode_years_ago_are_not_told(words, cause):
    assert cause not in {t.cause for t in told_symptoms(words)}, told_symptoms(words)


def test_a_dated_episode_that_goes_on_is_still_told():
    assert "gpu-fallen-off-bus" in named("Since we moved the server in 2022 the GPU falls off the bus every week.")
    assert "gpu-fallen-off-bus" in named("Not sure why, but GPU 2 fell off the bus during training.")
    # a year that dates the machine, not the episode
    assert "gpu-fallen-off-bus" in named("We bought the server in 2022 and GPU 3 fell off the bus this morning.")


def test_every_fix_row_is_a_known_causes_and_has_a_confirming_stand_in():
    rows = [row for row in phrases() if row.fix]
    assert len({row.cause for row in rows}) >= 10
    for row in rows:
        sig = told_signature(f"told:{row.id}{FIXED_SUFFIX}")
        assert fix_confirmed(sig.id) and sig.cause == row.cause and sig.severity == "warning"
        assert "fix confirms" in sig.summary and sig.source_url == row.source_url


def test_a_fix_confirmed_cause_leads_over_a_cause_merely_named():
    """Two causes in the reporter's words, both warnings: the one the reporter's fix confirms leads, whichever code
    sorts first, its evidence saying so; the one merely named stays, after it."""
    for words, lead, other in [
        ("I think nouveau is still bound to the card after the driver install.\n"
         "It only worked after I installed the kernel headers for the running kernel.\n", "GH503", "GH206"),
        ("The kernel headers were not installed for this kernel, I noticed.\n"
         "Most boots came up on nouveau, which I could only fix by blacklisting it.\n", "GH206", "GH503"),
    ]:
        report = report_of(("notes.txt", words))
        codes = [f.code for f in report.findings if f.severity is not Severity.INFO]
        assert codes[:2] == [lead, other], [(f.code, f.message) for f in report.findings]
        first = report.findings[0]
        assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"
        assert first.labels.get(FIX_CONFIRMED)
        assert any(FIX_WORKED in e.source for e in first.evidence)
        assert not report.findings[1].labels.get(FIX_CONFIRMED)


def test_the_fix_confirmed_cause_explains_the_machines_failure():
    """nvidia-smi's own failure (critical) beside a supposed cause and a fix that worked: the confirmed cause leads and
    explains the failure, as grave as the machine output shows; the supposed one does not lead."""
    smi = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
           "the latest NVIDIA driver is installed and running.\n")
    words = ("I suspect Secure Boot refuses the nvidia module.\n"
             "In the end, rebuilding the nvidia module with dkms autoinstall fixed it.\n")
    report = report_of(("session.txt", smi), ("notes.txt", words))
    first = report.findings[0]
    assert first.code == "GH507" and first.labels.get(FIX_CONFIRMED), [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.CRITICAL  # the machine output shows the failure it explains


def test_machine_output_that_shows_otherwise_wins_over_the_fix():
    """The nouveau check read an lsmod listing with the nvidia modules and no nouveau: it says so over words that merely
    name nouveau, and nothing is critical. Beside words that blacklisting nouveau fixed it, the listing agrees with
    them (nouveau gone): the finding tells the cause in the past, fixed per the reporter, never "nouveau is loaded"."""
    lsmod = ("$ lsmod | grep -E 'nvidia|nouveau'\n"
             "nvidia_uvm           1536000  0\n"
             "nvidia_drm             77824  2\n"
             "nvidia_modeset       1306624  3 nvidia_drm\n"
             "nvidia              56705024  45 nvidia_uvm,nvidia_modeset\n")
    alone = report_of(("notes.txt", "Blacklisting nouveau fixed it.\n"))
    assert alone.findings[0].code == "GH206" and "module list" not in alone.findings[0].message
    fixed = report_of(("session.txt", lsmod), ("notes.txt", "Blacklisting nouveau fixed it.\n"))
    merely = report_of(("session.txt", lsmod), ("notes.txt", "nouveau is still bound to the card.\n"))
    for report in (fixed, merely):
        gh206 = [f for f in report.findings if f.code == "GH206"]
        assert len(gh206) == 1, gh206
        assert all(f.severity is not Severity.CRITICAL for f in report.findings)
        assert "nouveau is loaded" not in gh206[0].message
    assert "the module list shows it not loaded" in [f for f in merely.findings if f.code == "GH206"][0].message
    assert [f for f in fixed.findings if f.code == "GH206"][0].message.startswith("the nouveau driver owned the GPU")


def test_analyze_from_stdin_leads_with_the_fix_confirmed_cause():
    paste = ("After the driver install from the vendor's store the screen stayed at 800x600.\n"
             "Maybe the kernel headers are missing, I did not check.\n"
             "I also read that Secure Boot refuses unsigned modules, but mine is off.\n"
             "The fix was to blacklist nouveau and rebuild the initramfs; after that the nvidia driver loads.\n")
    result = CliRunner().invoke(main, ["analyze", "-", "--format", "json"], input=paste)
    findings = json.loads(result.output)["findings"]
    first = findings[0]
    assert first["code"] == "GH206", [(f["code"], f["message"]) for f in findings]
    assert first["severity"] == "warning" and first["labels"].get(FIX_CONFIRMED)
    assert any("blacklist nouveau" in line for e in first["evidence"] for line in e["lines"])


# --------------------------------------------------------------------------- what a fix-confirmed cause's finding says

FIX_ROWS = [row for row in phrases() if row.fix]


def test_every_cause_a_fix_confirms_has_its_past_tense():
    for row in FIX_ROWS:
        known = causes()[row.cause]
        assert known.fixed, f"causes.csv {known.id}: no `fixed` (the cause in the past tense)"


@pytest.mark.parametrize("row", FIX_ROWS, ids=[row.id for row in FIX_ROWS])
def test_a_fix_confirmed_cause_is_told_in_the_past_and_its_fix_is_no_to_do(row):
    """The reporter's fix told alone (the row's first example, written for the table): the cause's finding says what was
    (causes.csv ``fixed``), not the check's present tense ("nouveau is loaded"), and its fixes are the cause's read-only
    deciding commands, the first saying that the fix is applied per the reporter. The script changes nothing for it."""
    report = report_of(("notes.txt", row.examples[0] + "\n"))
    known = causes()[row.cause]
    found = [f for f in report.findings if f.code == known.code and f.labels.get(FIX_CONFIRMED)]
    assert found, [(f.code, f.message) for f in report.findings]
    finding = found[0]
    assert finding.message.startswith(known.fixed) and "fixed, per the reporter" in finding.message
    assert [fix.command for fix in finding.fixes] == [part.strip() for part in known.decide.split(";")]
    assert finding.fixes[0].note == ALREADY_APPLIED and "already applied, per the reporter" in ALREADY_APPLIED
    assert all(section_of(fix) == "diagnostic" for fix in finding.fixes)
    script = fix_script(report)
    live = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    ours = {f"{fix.command} || true" for fix in finding.fixes}
    others = {f"{fix.command}" for f in report.findings if f is not finding for fix in f.fixes}
    assert not [line for line in live[1:-1] if line not in ours and not any(line.startswith(o) for o in others)]


def test_the_machines_own_message_stays_beside_the_reporters_fix():
    """Machine output that shows the cause (a kernel log line of nouveau bound to the GPU) keeps the check's message:
    it says what the machine printed. The fix is still not a to-do: the reporter says it is applied."""
    dmesg = "[    4.231] nouveau 0000:01:00.0: NVIDIA GA102 (172000a1)\n"
    report = report_of(("dmesg.txt", dmesg), ("notes.txt", "Blacklisting nouveau fixed it.\n"))
    gh206 = [f for f in report.findings if f.code == "GH206"]
    assert gh206 and gh206[0].labels.get(FIX_CONFIRMED), [(f.code, f.message) for f in report.findings]
    assert not gh206[0].message.startswith("the nouveau driver owned")
    assert gh206[0].fixes[0].note == ALREADY_APPLIED


@pytest.mark.parametrize("words", [
    "Reinstalling the driver fixed it.",
    "The reinstall fixed it.",
    "A clean reinstall of the NVIDIA driver solved it.",
    "What fixed it was reinstalling the nvidia driver.",
    "I purged everything and reinstalled nvidia-driver-535; now it works.",
])
def test_a_bare_driver_reinstall_confirms_no_cause(words):
    """A driver reinstall does the fixes of several causes at once (NVIDIA Driver Installation Guide: it builds the
    kernel module for the running kernel, installs matching user-space libraries, and the run-file installer offers to
    blacklist nouveau and to sign the module), so that it worked confirms none of them alone: the words confirm nothing,
    and no finding is labelled as confirmed by the reporter's fix. A reinstall that names its means ("with dkms") is
    that means' fix (fixed-module-rebuilt)."""
    assert not confirmed(words), told_symptoms(words)
    assert not [f for f in report_of(("notes.txt", words + "\n")).findings if f.labels.get(FIX_CONFIRMED)]
