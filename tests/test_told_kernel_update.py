"""A kernel update told as a story ("after upgrading the kernel the driver no longer loads", "booting the previous
kernel works") is the reporter's statement of the cause "the nvidia module was not built for the running kernel"
(knowledge/cause_phrases.csv, NVIDIA's driver installation guide: DKMS or a precompiled package builds the module per
kernel). GH507 then leads, ahead of GH201's and GH203's generic differentials; Secure Boot shown enabled with a refused
key still leads with GH506; a question or a fixed past does not name the cause. The sentences are written for these
tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms

SMI_FAILS = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")
MODPROBE_NO_DEVICE = "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': No such device\n"


def findings_of(text: str):
    snapshot, _ = analyze_texts([("notes.txt", text)])
    return run_checks(snapshot).findings


@pytest.mark.parametrize("story", [
    "After upgrading the kernel to 6.8.0-45 the nvidia driver no longer loads.",
    "A new kernel was installed by unattended-upgrades last night and now nvidia-smi fails.",
    "Since the kernel was updated to 5.14.0-503 the driver won't load.",
    "The nvidia module stopped loading after the kernel update, booting the previous kernel works fine.",
    "Selecting the older kernel in grub, nvidia-smi works again.",
    # the kernel named by the two versions it went between, the driver by its version
    "Upgrading from kernel 5.4.0-99 to -100 broke the 470.82 driver.",
    "Going from kernel 6.8.0-45 to 6.8.0-47 broke a workstation using NVIDIA's driver version 535.",
    "After updating from Linux kernel 5.15.0-20 to 5.15.0-21 the nvidia module won't load.",
    # the same family in Chinese, Japanese and Korean (cause_phrases.csv told-kernel-update-broke-module-zh/-ja/-ko)
    "昨晚内核自动升级到 5.14.0-503，今天 nvidia-smi 就报错了。",
    "カーネルを5.15.0-105にアップグレードしたら、GPUが認識されなくなりました。",
    "커널을 업그레이드한 뒤로 nvidia 드라이버가 작동하지 않습니다.",
])
def test_a_kernel_update_story_alone_names_the_module_not_built_as_words(story):
    findings = findings_of(story + "\n")
    first = findings[0]
    assert first.code == "GH507", [(f.code, f.message) for f in findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"


@pytest.mark.parametrize("machine", [SMI_FAILS, MODPROBE_NO_DEVICE])
def test_the_story_leads_over_the_generic_differential_of_a_failing_driver(machine):
    findings = findings_of("After upgrading the kernel the nvidia driver no longer loads.\n" + machine)
    assert findings[0].code == "GH507", [(f.code, f.message) for f in findings]
    # the machine output shows the failure, the words its cause: GH201/GH203 fold under GH507, not beside it
    assert {"GH201", "GH203"} & set(findings[0].explains)
    assert not any("Secure Boot" in f.message for f in findings)


def test_without_a_story_the_same_failure_keeps_its_differential():
    findings = findings_of("Will a kernel update break the nvidia driver?\n" + SMI_FAILS)
    assert findings[0].code == "GH203"
    assert not any(f.code == "GH507" for f in findings)


def test_secure_boot_shown_refusing_the_key_still_leads():
    findings = findings_of("After the kernel update the nvidia driver no longer loads.\n$ mokutil --sb-state\n"
                           "SecureBoot enabled\n$ sudo modprobe nvidia\n"
                           "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")
    assert findings[0].code == "GH506", [(f.code, f.message) for f in findings]


@pytest.mark.parametrize("words", [
    "Will a kernel update break the nvidia driver?",
    "After reinstalling the driver for the new kernel it works.",
    "I updated the kernel and the driver loads fine.",
    "Booting the previous kernel does not work either.",
])
def test_a_question_a_fixed_past_or_a_working_driver_names_no_cause(words):
    assert not [t for t in told_symptoms(words) if t.cause == "module-not-built"]


@pytest.mark.parametrize(("words", "cause"), [
    ("After the update to 3.0.0-25-generic the nvidia driver isn't working anymore.", "module-not-built"),
    ("There is no kmod-nvidia for the new kernel.", "module-not-built"),
    ("kmod-nvidia-open is not available for kernel 5.14.0-611 yet, so the driver does not load.", "module-not-built"),
    ("The nvidia driver 470 does not build against kernel 6.8.", "driver-too-old-for-kernel"),
    ("Rebuilding the module with dkms did nothing, only the newer driver 550 works with this kernel.",
     "driver-too-old-for-kernel"),
])
def test_a_release_a_missing_kmod_or_a_driver_too_old_is_named(words, cause):
    assert cause in [t.cause for t in told_symptoms(words)]


@pytest.mark.parametrize("words", [
    "After upgrading to 3.10 the nvidia driver is not working.",  # Python's 3.10 is no kernel release
    "If there is no kmod for the new kernel, dnf keeps the old one.",
    "The driver builds against kernel 6.8 without problems.",
])
def test_no_kernel_release_no_missing_kmod_no_failed_build_is_named(words):
    assert not [t for t in told_symptoms(words) if t.cause in {"module-not-built", "driver-too-old-for-kernel"}]


VERSION_PAIR = ("After the kernel went from 3.0.0-24 to 3.0.0-25 my driver 295.59 broke. Rebuilding it did nothing. "
                "I installed driver 304.43 and it worked.\n")


def test_a_version_pair_story_names_the_driver_too_old_for_the_kernel():
    # the later sentence names the narrower cause: the rebuilt module still fails, so the source is too old
    told = [t.cause for t in told_symptoms(VERSION_PAIR) if t.cause]
    assert told == ["driver-too-old-for-kernel"], told
    first = findings_of(VERSION_PAIR)[0]
    assert first.code == "GH507" and "does not build against this newer kernel" in first.message
    assert first.severity is Severity.WARNING


def test_the_driver_the_words_replaced_is_not_the_installed_one():
    from gpuhealth.parsers.prose import version_statements

    drivers = [s.value for s in version_statements(VERSION_PAIR) if s.thing == "driver"]
    assert drivers == ["304.43"]  # not 295.59: the kernel's "to 3.0.0-25" does not make the broken driver current
    assert [s.value for s in version_statements("I had installed driver 470 before. Now I run driver 535.")
            if s.thing == "driver"] == ["535"]


@pytest.mark.parametrize("words", [
    "Upgrading from kernel 5.4.0-99 to -100 broke the wifi driver; the 470.82 nvidia driver loads fine.",
    "Will going from kernel 6.8.0-45 to 6.8.0-47 break the 535 driver?",
    "Upgrading from kernel 5.4.0-99 to -100 broke the 470.82 driver, but a newer driver fixed it.",
])
def test_a_versioned_kernel_step_that_broke_something_else_or_is_asked_is_not_the_cause(words):
    assert not [t for t in told_symptoms(words) if t.cause == "module-not-built"]


@pytest.mark.parametrize("words", [
    "内核升级以后，nvidia 驱动一切正常。",
    "カーネルを更新してもnvidiaドライバは問題なく動いています。",
    "커널을 업데이트하면 드라이버가 작동하지 않나요?",
])
def test_a_kernel_update_told_fine_or_asked_in_cjk_is_not_the_cause(words):
    assert not [t for t in told_symptoms(words) if t.cause == "module-not-built"]
