"""A cause named in a person's words (knowledge/cause_phrases.csv, read by parsers/prose_symptoms.py): the cause's
check leads, as the reporter's words (at most a warning, the evidence says so), ahead of "an error line gpuhealth does
not know" (GH003), "only the setup" (GH005) and NO DIAGNOSIS (GH004); a check with machine evidence of its own (GH505's
two gcc versions) is strengthened by the words rather than joined by a second finding, and where that evidence says
otherwise it wins. The sentences are written for these tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import signature
from gpuhealth.knowledge.symptom_phrases import TOLD_PREFIX, state_causes, told_signature
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms

PROC_VERSION = ("Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc (Ubuntu 11.3.0-1ubuntu1~22.04) 11.3.0, "
                "GNU ld (GNU Binutils for Ubuntu) 2.38) #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023")
GCC_MINOR = "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"  # same major, another minor: the build warns and goes on
GCC_SAME = "gcc (Ubuntu 11.3.0-1ubuntu1~22.04) 11.3.0"


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def lead(report):
    return report.findings[0]


@pytest.mark.parametrize(("words", "code"), [
    ("After the kernel update the nvidia module was not built for the new kernel.", "GH507"),
    ("It seems to be a DKMS error, the driver is not there after the kernel upgrade.", "GH507"),
    ("There are no kernel headers for the running kernel on this box.", "GH503"),
    ("The nvidia kernel module is blacklisted by the laptop's power tool.", "GH201"),
    ("nouveau is still bound to the card after the driver install.", "GH206"),
    ("Secure Boot rejects the nvidia module because I never enrolled the MOK.", "GH506"),
    ("The installer refused to build the nvidia module because of a gcc version mismatch with the kernel.", "GH505"),
    ("Our 4-GPU node came up one GPU short after the reboot.", "GH102"),
])
def test_a_told_cause_leads_as_the_reporters_words(words, code):
    report = report_of(("notes.txt", words + "\n"))
    first = lead(report)
    assert first.code == code, [(f.code, f.message) for f in report.findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"
    assert any(words in line for e in first.evidence for line in e.lines)
    assert not {"GH003", "GH004", "GH005"} & {f.code for f in report.findings if f.severity is not Severity.INFO}


@pytest.mark.parametrize("words", [
    "If there are no kernel headers for the running kernel, install them first.",
    "Is nouveau still bound to the card?",
    "The nvidia module is not blacklisted.",
])
def test_a_cause_negated_asked_supposed_or_over_is_not_told(words):
    found = told_symptoms(words)
    assert not [t for t in found if t.cause], found


def test_the_words_strengthen_gcc_mismatchs_own_finding():
    """A minor gcc difference alone is information (the build warns and goes on); the reporter saying the build refused
    it makes the same finding a warning that leads, quoting the words, with the installers' override, not a second
    GH505."""
    machine = [("proc-version.txt", PROC_VERSION + "\n"), ("gcc.txt", GCC_MINOR + "\n")]
    alone = report_of(*machine)
    assert [f.severity for f in alone.findings if f.code == "GH505"] == [Severity.INFO]
    words = "DKMS refuses to build the nvidia module because the compiler differs from the one that built the kernel."
    told = report_of(*machine, ("notes.txt", words + "\n"))
    gh505 = [f for f in told.findings if f.code == "GH505"]
    assert len(gh505) == 1 and gh505[0] is lead(told)
    assert gh505[0].severity is Severity.WARNING and "refused" in gh505[0].message
    shown = [line for e in gh505[0].evidence for line in e.lines]
    assert words in shown and any("11.4.0" in line for line in shown)
    assert any("IGNORE_CC_MISMATCH=1" in f.command for f in gh505[0].fixes)


def test_gcc_versions_that_agree_win_over_the_words():
    words = "DKMS refuses to build the nvidia module because the compiler differs from the kernel's."
    report = report_of(("proc-version.txt", PROC_VERSION + "\n"), ("gcc.txt", GCC_SAME + "\n"),
                       ("notes.txt", words + "\n"))
    assert "GH505" not in {f.code for f in report.findings}


def test_a_told_cause_is_filed_under_its_stand_in_row():
    (found,) = [t for t in told_symptoms("There are no headers for this kernel.") if t.cause]
    sig = signature(f"{TOLD_PREFIX}{found.phrase}")
    assert (sig.cause, sig.code, sig.severity) == ("kernel-headers-missing", "GH503", "warning")
    assert sig.source_url.startswith("https://")
    with pytest.raises(KeyError):
        told_signature(f"{TOLD_PREFIX}no-such-family")


def test_the_causes_whose_check_overrules_the_words_are_named():
    assert state_causes() == {"module-not-built", "kernel-headers-missing", "gcc-mismatch", "nouveau-bound",
                              "secure-boot-refused", "persistence-off", "uvm-missing",
                              "pcie-link-degraded", "driver-library-mismatch", "fabric-manager-failed",
                              "memory-held-idle", "gsp-firmware-missing", "initramfs-stale",
                              "cuda-visible-devices-hides", "k8s-runtime-not-nvidia"}


def test_the_words_a_told_cause_needs_are_in_the_spelling_vocabulary():
    from gpuhealth.parsers.spelling import corrected, vocabulary

    known, _ = vocabulary()
    assert {"compiled", "headers", "blacklisted", "enrolled", "nvidia"} <= known
    assert corrected("the kernal headres are missing") == "the kernel headers are missing"
    # a retyped told cause is read from its corrected line, as the reporter's words
    report = report_of(("notes.txt", "The nvidia module is blaclisted on this laptop.\n"))
    assert lead(report).code == "GH201" and lead(report).labels.get("reported") == "words"


def test_long_words_are_not_corrected_two_edits_away():
    """Counterexamples to correcting at distance 2: real words the vocabulary lacks stay as typed."""
    from gpuhealth.parsers.spelling import corrected

    for line in ("the difference is the headless package", "its presence was noted", "listening on port 9400"):
        assert corrected(line) == line


def test_a_cause_told_above_a_listing_in_a_markdown_post_is_read():
    """A post's bold section labels ("**Description**") frame its sections: the sentences above a pasted os-release
    are the reporter's, read as such, not hidden behind the label as if it were the output's first line."""
    post = ("**Description**\n\nAfter the update the laptop boots to a black screen.\n\n"
            "Root cause: the NVIDIA DKMS module was not built for the new kernel after the update.\n\n"
            "**System info**\n\nNAME=\"Ubuntu\"\nVERSION=\"24.04.3 LTS (Noble Numbat)\"\nID=ubuntu\nID_LIKE=debian\n"
            "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nVERSION_ID=\"24.04\"\n")
    report = report_of(("post.md", post))
    assert lead(report).code == "GH507" and lead(report).labels.get("reported") == "words"


def test_a_finding_only_cause_lines_raised_keeps_the_causes_message():
    """GH507 is both the module-not-built cause's check and the install-failed symptom's code: a finding raised only by
    lines naming the cause is that cause's, not "the driver could not be built or installed; most likely no headers"."""
    report = report_of(("notes.txt", "The nvidia module was not built for the running kernel after the update.\n"))
    assert "most likely" not in lead(report).message and "not built" in lead(report).message
    machine = report_of(("modprobe.txt", "modprobe: FATAL: Module nvidia not found in directory "
                                         "/lib/modules/6.8.0-45-generic\n"))
    assert lead(machine).code == "GH507" and "could not be built or installed" not in lead(machine).message


def test_a_cause_named_beside_a_pasted_message_on_one_line_is_read():
    """A person pastes a program's message inside their own sentences: the catalogue reads the message, and the cause
    the next sentence names is read too (only a cause, in a sentence the catalogue does not match); it leads and
    explains the message's symptom."""
    line = ("When I run nvidia-smi I get: `NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
            "driver. Make sure that the latest NVIDIA driver is installed and running.` I think the cause is my "
            "failure to complete the MOK enrollment at the reboot.\n")
    report = report_of(("notes.txt", line))
    assert lead(report).code == "GH506" and "GH203" in lead(report).explains
    alone = report_of(("notes.txt", line.split(" I think")[0] + "\n"))
    assert "GH506" not in {f.code for f in alone.findings}


@pytest.mark.parametrize(("words", "code"), [
    ("升级内核以后，nvidia 模块没有为新内核编译。", "GH507"),
    ("服务器上没有安装内核头文件，所以驱动编译失败。", "GH503"),
    ("装完驱动之后 nouveau 仍然占用着显卡。", "GH206"),
    ("MOK 没有注册，所以 nvidia 驱动模块被拒绝。", "GH506"),
])
def test_a_cause_told_in_chinese_leads_as_the_reporters_words(words, code):
    report = report_of(("notes.txt", words + "\n"))
    assert lead(report).code == code, [(f.code, f.message) for f in report.findings]
    assert lead(report).severity is Severity.WARNING and lead(report).labels.get("reported") == "words"
