"""Checks that judge a cause from part of its evidence (pasted sessions without lspci, a filtered module list),
and what a partial listing may and may not claim. Lines are real (their threads are named beside them)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given

from fuzzing import FUZZ, mutated
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.facts import grep_pattern, secure_boot_lines
from gpuhealth.evidence.listings import embedded_rpm_packages
from gpuhealth.knowledge.signatures import scan_lines
from gpuhealth.model import Severity, Snapshot, grep_would_show
from gpuhealth.report.common import fold

# shelmangroup/coreos-gpu-installer#11: after a reboot nothing loaded the modules
NO_COMM = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
           "NVIDIA driver is installed and running.")
COREOS = f"$ nvidia-smi\n{NO_COMM}\n$ lsmod | grep nvidia\n$\n"
# timrichardson/Prime-Ubuntu-18.04 style: nouveau probing the GPU in the kernel log (kernel-nouveau-probe's example)
NOUVEAU_PROBE = "[    1.927542] nouveau 0000:01:00.0: NVIDIA GP107 (137000a1)"


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return snapshot, run_checks(snapshot)


def lead(report):
    """The first root cause, as the report (and the evaluation) shows it."""
    return fold(tuple(report.findings))[0].finding


def finding(report, code: str):
    return next((f for f in report.findings if f.code == code), None)


def skipped(report, code: str) -> str | None:
    return next((s.reason for s in report.skipped if s.code == code), None)


# --------------------------------------------------------------------------- grep-filtered module lists


@pytest.mark.parametrize(("command", "pattern"), [
    ("lsmod | grep nvidia", "nvidia"),
    ("sudo lsmod | grep -i NVIDIA", "nvidia"),
    ("lsmod | grep -E 'nvidia|nouveau'", "nvidia|nouveau"),
    ('lsmod | grep "nvidia\\|nouveau"', "nvidia\\|nouveau"),
    ("lsmod | grep -e nvidia -e nouveau", "nvidia|nouveau"),
    ("lsmod | grep -w nvidia", "=nvidia"),
    ("lsmod | grep -v nvidia", None),  # inverted: proves no absence
    ("lsmod | grep -c nvidia", None),  # a count
    ("lsmod | grep nvidia | head -3", None),  # piped on: lines may be cut
    ("lsmod | grep nvidia; uname -r", None),
    ("lsmod | grep 'unterminated", None),
])
def test_grep_pattern_of_a_module_listing(command, pattern):
    assert grep_pattern(command) == pattern


@pytest.mark.parametrize(("pattern", "name", "shown"), [
    ("nvidia", "nvidia_uvm", True), ("nvidia", "nouveau", False), ("nvidia|nouveau", "nouveau", True),
    ("nvidia\\|nouveau", "nouveau", True), ("^nvidia", "nvidia_drm", True), ("=nvidia", "nvidia_drm", False),
    ("=nvidia", "nvidia", True), ("NVIDIA", "nvidia", False),  # grep without -i is case-sensitive
    ("nvid.*", "nvidia", False),  # not a plain word: claims nothing
])
def test_grep_would_show(pattern, name, shown):
    assert grep_would_show(pattern, name) is shown


def test_a_filtered_list_knows_only_what_its_pattern_shows():
    snapshot = Snapshot(kernel_modules=(), kernel_module_filters=("nvidia",))
    assert snapshot.module_listed("nvidia") is False
    assert snapshot.module_listed("nouveau") is None
    assert Snapshot(kernel_modules=()).module_listed("nouveau") is False  # a whole list: not loaded


def test_lsmod_grep_nvidia_does_not_rule_out_nouveau():
    snapshot, report = report_of(("session.txt", COREOS))
    assert snapshot.kernel_module_filters == ("nvidia",)
    assert finding(report, "GH206") is None
    assert "filtered" in (skipped(report, "GH206") or "")
    lead = report.findings[0]
    nouveau = next(c for c in lead.differential if c.cause == "nouveau-bound")
    assert nouveau.status == "open"


def test_lsmod_grep_nvidia_leaves_the_kernel_log_to_gh206():
    _, report = report_of(("session.txt", COREOS), ("dmesg.txt", NOUVEAU_PROBE + "\n"))
    gh206 = finding(report, "GH206")
    assert gh206 is not None and gh206.severity is Severity.CRITICAL


def test_a_whole_module_list_still_rules_nouveau_out():
    lsmod = ("Module                  Size  Used by\nnvidia_uvm           1392640  0\n"
             "nvidia              56692736  1 nvidia_uvm\n")
    snapshot, report = report_of(("session.txt", COREOS), ("lsmod.txt", lsmod))
    assert snapshot.kernel_module_filters == ()
    assert skipped(report, "GH206") is None and finding(report, "GH206") is None


def test_a_grep_for_nouveau_says_nothing_about_nvidia():
    snapshot, _ = report_of(("session.txt", "$ lsmod | grep nouveau\n$\n"))
    assert snapshot.module_listed("nouveau") is False
    assert snapshot.module_listed("nvidia") is None


# --------------------------------------------------------------------------- GH201 without lspci


def test_gh201_leads_when_nvidia_smi_fails_and_no_module_is_loaded():
    _, report = report_of(("session.txt", COREOS))
    lead = report.findings[0]
    assert lead.code == "GH201" and lead.severity is Severity.CRITICAL
    assert "GH203" in lead.explains
    assert lead.differential and lead.differential[0].status == "open"


def test_gh201_stays_quiet_when_the_module_is_loaded():
    loaded = "$ lsmod | grep nvidia\nnvidia              56692736  1 nvidia_uvm\n"
    _, report = report_of(("session.txt", f"$ nvidia-smi\n{NO_COMM}\n{loaded}"))
    assert finding(report, "GH201") is None
    assert report.findings[0].code == "GH203"


def test_gh201_needs_a_sign_of_an_expected_driver_without_lspci():
    _, report = report_of(("session.txt", "$ lsmod | grep nvidia\n$\n"))
    assert finding(report, "GH201") is None
    assert "nothing in the evidence given shows" in (skipped(report, "GH201") or "")


def test_nvml_driver_not_loaded_names_the_module_not_loaded():
    # NVML_ERROR_DRIVER_NOT_LOADED (pynvml's NVMLError_DriverNotLoaded): the module is not loaded
    _, report = report_of(("trace.txt", "pynvml.nvml.NVMLError_DriverNotLoaded: Driver Not Loaded\n"))
    assert report.findings[0].code == "GH201"


# --------------------------------------------------------------------------- GH506 from part of its evidence

# NVIDIA/gpu-operator#1142: the driver container's installer, Secure Boot on, the default "Install without signing"
INSTALLER_SB = ("The target kernel has CONFIG_MODULE_SIG set, which means that it supports cryptographic signatures on "
                "kernel modules. On some systems, the kernel may refuse to load modules without a valid signature from "
                "a trusted key. This system also has UEFI Secure Boot enabled; many distributions enforce module "
                "signature verification on UEFI systems when Secure Boot is enabled. Would you like to sign the NVIDIA "
                "kernel module? (Answer: Install without signing)")
LOAD_EPERM = "Kernel module load error: Operation not permitted"
# matthieugras/Prime-Ubuntu-18.04#8 (journal); the taint line is kernel-module-verification-taint's example
PKCS7 = "Jun 27 16:31:00 user-UX310 kernel: [  861.501162] PKCS#7 signature not signed with a trusted key\n"
TAINT = "Jun 27 16:31:00 user-UX310 kernel: [  861.512000] nvidia: module verification failed: signature and/or " \
        "required key missing - tainting kernel\n"
LOCKDOWN = "[    0.000000] Kernel is locked down from EFI Secure Boot mode; see man kernel_lockdown.7"


@pytest.mark.parametrize(("line", "state"), [
    (INSTALLER_SB, "enabled"),
    ("SecureBoot enabled", "enabled"),  # mokutil --sb-state
    (LOCKDOWN, "enabled"),
    ("[    0.000000] secureboot: Secure boot enabled", "enabled"),
    ("SecureBoot disabled", "disabled"),
])
def test_secure_boot_state_in_the_tools_words(line, state):
    overlay = secure_boot_lines([line], "paste")
    assert overlay["install"].secure_boot == state


def test_secure_boot_state_not_read_from_advice():
    # login-loop-secure-boot-asus-dl-setup's advice names Secure Boot but states nothing about this host
    assert secure_boot_lines(["you might want to disable Secure Boot in bios settings before you install"], "p") == {}
    shim = secure_boot_lines(["SecureBoot enabled", "SecureBoot validation is disabled in shim"], "mokutil")
    assert shim["install"].secure_boot == "disabled"


def test_gh506_leads_when_secure_boot_refuses_the_installers_module():
    _, report = report_of(("driver-container.log", f"{INSTALLER_SB}\n{LOAD_EPERM}\n"))
    lead = report.findings[0]
    assert lead.code == "GH506" and lead.severity is Severity.CRITICAL
    assert "Operation not permitted" in lead.message


def test_operation_not_permitted_alone_does_not_blame_secure_boot():
    _, report = report_of(("driver-container.log", f"{LOAD_EPERM}\n"))
    assert finding(report, "GH506") is None
    assert "Secure Boot state" in (skipped(report, "GH506") or "")


def test_untrusted_signer_in_a_kernel_log_is_a_warning():
    _, report = report_of(("journal.log", PKCS7))
    gh506 = finding(report, "GH506")
    assert gh506 is not None and gh506.severity is Severity.WARNING
    assert report.verdict != "HEALTHY"


def test_untrusted_signer_with_secure_boot_enabled_is_a_refusal():
    _, report = report_of(("journal.log", PKCS7 + LOCKDOWN + "\n"))
    gh506 = finding(report, "GH506")
    assert gh506 is not None and gh506.severity is Severity.CRITICAL


def test_another_modules_rejection_is_not_nvidias():
    other = "[   12.345678] vboxdrv: Loading of unsigned module is rejected\n"
    _, report = report_of(("journal.log", other))
    assert finding(report, "GH506") is None
    _, report = report_of(("journal.log", "[   12.345678] Loading of unsigned module is rejected\n"))
    assert finding(report, "GH506") is not None  # names no module: nvidia may be the one


def test_untrusted_signer_with_nvidia_loaded_concerns_another_module():
    lsmod = "$ lsmod | grep nvidia\nnvidia              56692736  1 nvidia_uvm\n"
    _, report = report_of(("journal.log", PKCS7 + LOCKDOWN + "\n"), ("session.txt", lsmod))
    assert finding(report, "GH506") is None


@pytest.mark.parametrize("other", [TAINT, "[    0.000000] secureboot: Secure boot disabled\n"])
def test_untrusted_signer_that_loaded_anyway_is_no_finding(other):
    _, report = report_of(("journal.log", PKCS7 + other))
    assert finding(report, "GH506") is None


# `mokutil --test-key KEY`: the "not enrolled" / "already enrolled" lines are REAL, as printed in r-pufky/docs
# (docs/service/secure_boot/README.md, `mokutil --test-key /var/lib/dkms/mok.pub`); the pending one is the tool's
# own format (lcp/mokutil src/mokutil.c print_skip_message), filled in by hand.
NOT_ENROLLED = "/var/lib/dkms/mok.pub is not enrolled"
ENROLLED = "/var/lib/dkms/mok.pub is already enrolled"
PENDING = "/var/lib/dkms/mok.pub is already in the enrollment request"
NO_NVIDIA = "$ lsmod | grep -E 'nvidia|nouveau'\n$\n"


def _key_session(answer: str) -> str:
    return f"$ mokutil --sb-state\nSecureBoot enabled\n$ mokutil --test-key /var/lib/dkms/mok.pub\n{answer}\n"


@pytest.mark.parametrize(("answer", "said"), [(NOT_ENROLLED, "is not enrolled"),
                                              (PENDING, "waits in the enrollment request")])
def test_gh506_reads_mokutil_test_key_a_key_shim_does_not_trust(answer, said):
    """Secure Boot on, the nvidia module not loaded, and DKMS's signing key not (yet) trusted: a refusal, with the
    key's own line as evidence and its import (or the boot-time confirmation) as the first step."""
    _, report = report_of(("session.txt", _key_session(answer) + NO_NVIDIA))
    gh506 = finding(report, "GH506")
    assert gh506 is not None and gh506.severity is Severity.CRITICAL and said in gh506.message
    assert answer in [line for e in gh506.evidence for line in e.lines]
    first = gh506.fixes[0].command
    assert first == ("sudo mokutil --import /var/lib/dkms/mok.pub" if answer == NOT_ENROLLED else "sudo reboot")


def test_gh506_an_enrolled_key_is_not_a_refusal():
    _, report = report_of(("session.txt", _key_session(ENROLLED) + NO_NVIDIA))
    gh506 = finding(report, "GH506")
    assert gh506 is not None and gh506.severity is Severity.WARNING and "is enrolled" in gh506.message
    assert ENROLLED in [line for e in gh506.evidence for line in e.lines]


def test_gh506_an_untrusted_key_with_nvidia_loaded_is_no_finding():
    loaded = "$ lsmod | grep nvidia\nnvidia              56692736  1 nvidia_uvm\n"
    _, report = report_of(("session.txt", _key_session(NOT_ENROLLED) + loaded))
    assert finding(report, "GH506") is None


def test_mokutil_test_key_output_alone_is_read():
    """The output alone is mokutil evidence that was read (not an unreadable file); without the Secure Boot state
    GH506 says what it lacks."""
    snapshot, report = report_of(("test-key.txt", NOT_ENROLLED + "\n"))
    assert snapshot.install is not None and snapshot.install.signing_key_state == "not-enrolled"
    assert not snapshot.unrecognized_files and "mokutil --sb-state" in (skipped(report, "GH506") or "")


def test_secure_boot_and_an_unreachable_driver_rank_secure_boot_first():
    _, report = report_of(("notes.txt", f"mokutil --sb-state says SecureBoot enabled\n{NO_COMM}\n"))
    assert lead(report).code == "GH506" and "GH203" in lead(report).explains


def test_secure_boot_enabled_does_not_explain_a_version_mismatch():
    mismatch = "Failed to initialize NVML: Driver/library version mismatch"  # NVIDIA/nvidia-docker#1307
    _, report = report_of(("notes.txt", f"SecureBoot enabled\n{mismatch}\n"))
    assert finding(report, "GH506") is None
    assert lead(report).code == "GH202"


# --------------------------------------------------------------------------- GH507 from dkms status and uname -r

DKMS_35 = "$ dkms status\nnvidia, 535.113.01, 6.2.0-35-generic, x86_64: installed\n"
UNAME_36 = "$ uname -r\n6.2.0-36-generic\n"


def test_gh507_from_dkms_status_and_uname_with_the_driver_unreachable():
    _, report = report_of(("session.txt", f"$ nvidia-smi\n{NO_COMM}\n{DKMS_35}{UNAME_36}"))
    gh507 = lead(report)
    assert gh507.code == "GH507" and gh507.severity is Severity.CRITICAL
    assert "6.2.0-35-generic only" in gh507.message and "GH203" in gh507.explains


def test_gh507_from_dkms_status_and_uname_alone_is_a_warning():
    _, report = report_of(("session.txt", DKMS_35 + UNAME_36))
    gh507 = finding(report, "GH507")
    assert gh507 is not None and gh507.severity is Severity.WARNING


def test_gh507_quiet_when_dkms_installed_the_running_kernels_module():
    dkms = DKMS_35 + "nvidia, 535.113.01, 6.2.0-36-generic, x86_64: installed\n"
    _, report = report_of(("session.txt", f"$ nvidia-smi\n{NO_COMM}\n{dkms}{UNAME_36}"))
    assert finding(report, "GH507") is None


# --------------------------------------------------------------------------- driver packages named in other output

# gridhead/nvidia-auto-installer-for-fedora-linux#82: the helper lists the existing driver packages
NVAUTOINSTALL = """[ ★ ] LOOKING FOR EXISTING DRIVER PACKAGES...
      nvidia-libXNVCtrl-495.29.05-1.fc34.x86_64
      xorg-x11-drv-nvidia-cuda-libs-495.46-1.fc35.x86_64
[ ! ] A total of 2 driver packages were detected
"""


def test_driver_packages_named_in_a_tools_output_count_as_installed():
    overlay = embedded_rpm_packages(NVAUTOINSTALL.splitlines(), "session")
    names = {p.name: p.version for p in overlay["host_env"].packages}
    assert names == {"nvidia-libXNVCtrl": "495.29.05-1.fc34", "xorg-x11-drv-nvidia-cuda-libs": "495.46-1.fc35"}
    _, report = report_of(("session.txt", "$ sudo nvautoinstall driver\n" + NVAUTOINSTALL))
    assert lead(report).code == "GH509"


def test_packages_a_transaction_removes_are_not_installed():
    removed = ("Removed:\n  xorg-x11-drv-nvidia-3:495.46-1.fc35.x86_64\n"
               "  xorg-x11-drv-nvidia-3:510.47.03-1.fc35.x86_64\n")
    assert embedded_rpm_packages(removed.splitlines(), "dnf") == {}
    assert embedded_rpm_packages(["kernel-core-5.14.0-362.8.1.el9_3.x86_64"], "x") == {}  # not a driver package


# --------------------------------------------------------------------------- rows in other tools' words


@pytest.mark.parametrize(("line", "row"), [
    ("nvidia-smi utility not found. Probably driver is not installed.", "script-nvidia-smi-utility-not-found"),
    ("the installer says cannot find path to cc, make sure gcc is installed", "words-compiler-not-found"),
    ("ERROR: Unable to find the development tool `make` in your path", "installer-no-cc"),
    ("Error: NVIDIA kernel module is not loaded.", "words-nvidia-module-not-loaded"),
    ("the nouveau module is still loaded after blacklisting", "words-nouveau-loaded"),
    ("[25536.883206] nvidia: disagrees about version of symbol sme_me_mask", "kernel-nvidia-symbol-version-disagrees"),
])
def test_rows_match_their_tools_words(line, row):
    assert [sig.id for sig, _ in scan_lines([line])][:1] == [row]


@pytest.mark.parametrize("line", [
    "nvidia-smi utility found at /opt/bin/nvidia-smi",
    "make sure gcc is installed",
    "could not find cc1plus",  # a compiler part, not the compiler missing
    "cannot find makefile in /usr/src/nvidia-535",
    "The vboxdrv kernel module is not loaded.",  # VirtualBox's module, not NVIDIA's
    "nvidia: the nvidia_uvm kernel module is not loaded",  # GH205's
    "NVIDIA kernel module is loaded",
    "nouveau is not loaded",
    "nouveau was blacklisted and the initramfs rebuilt",
    "[25536.796295] ecc: disagrees about version of symbol __fentry__",  # another module
])
def test_rows_stay_quiet_on_near_misses(line):
    ids = {sig.id for sig, _ in scan_lines([line])}
    assert not ids & {"script-nvidia-smi-utility-not-found", "words-compiler-not-found",
                      "words-nvidia-module-not-loaded", "words-nouveau-loaded",
                      "kernel-nvidia-symbol-version-disagrees"}


def test_no_proc_driver_version_means_the_nvidia_module_is_not_loaded():
    proc = "$ cat /proc/driver/nvidia/version\ncat: /proc/driver/nvidia/version: No such file or directory\n"
    snapshot, report = report_of(("session.txt", f"$ nvidia-smi\n{NO_COMM}\n{proc}"))
    assert snapshot.module_listed("nvidia") is False
    assert snapshot.module_listed("nvidia_uvm") is None and snapshot.module_listed("nouveau") is None
    assert lead(report).code == "GH201"


# NVIDIA/gpu-driver-container#44: the installer built the module (100 %), then could not load it
UNABLE_TO_LOAD = ("ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel "
                  "module was built against the wrong or improperly configured kernel sources, with a version of gcc "
                  "that differs from the one used to build the target kernel, or if another driver, such as nouveau, "
                  "is present and prevents the NVIDIA kernel module from obtaining ownership of the NVIDIA device(s), "
                  "or no NVIDIA device installed in this system is supported by this NVIDIA Linux graphics driver "
                  "release.")


def test_a_built_module_that_does_not_load_is_a_load_failure_not_a_failed_build():
    _, report = report_of(("driver-container.log", "Building kernel modules\n  : [####] 100%\n" + UNABLE_TO_LOAD))
    first = lead(report)
    assert first.code == "GH201"
    assert first.differential[0].cause == "secure-boot-refused"


# --------------------------------------------------------------------------- robustness

SAMPLES = [COREOS, INSTALLER_SB + "\n" + LOAD_EPERM, PKCS7 + TAINT + LOCKDOWN, NVAUTOINSTALL, DKMS_35 + UNAME_36,
           UNABLE_TO_LOAD]


@given(mutated(SAMPLES))
@FUZZ
def test_line_facts_and_grep_reading_survive_fuzzing(text):
    lines = text.splitlines()
    assert isinstance(secure_boot_lines(lines, "fuzz"), dict)
    assert isinstance(embedded_rpm_packages(lines, "fuzz"), dict)
    for line in lines[:50]:
        pattern = grep_pattern(f"lsmod | grep {line[:200]}")
        if pattern is not None:
            assert isinstance(grep_would_show(pattern, "nvidia"), bool)
    snapshot, report = report_of(("fuzz.txt", text))
    assert report.verdict


@pytest.mark.parametrize("text", ["a" * 200_000, "nvidia-" + "1-" * 60_000 + ".x86_64", "SecureBoot " * 40_000,
                                  "lsmod | grep " + "'a|" * 30_000])
def test_long_lines_cost_linear_time(text):
    start = time.process_time()
    secure_boot_lines([text], "x")
    embedded_rpm_packages([text], "x")
    grep_pattern(text)
    assert time.process_time() - start < 2
