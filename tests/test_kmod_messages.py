"""Building, signing and loading the nvidia kernel module: the message families of DKMS (dell/dkms dkms.in,
dkms_autoinstaller.in), akmods (rpmfusion/akmods akmods) and the kernel's signature check (kernel/module/signing.c,
security/lockdown/lockdown.c), each mapped to the check of its cause (GH503 headers missing, GH506 signature refused,
GH507 module not built).

The lines are our own, rendered from each program's format string with made-up kernel releases and driver versions
(the format strings are quoted in the catalogue rows' source titles); none is copied from a case."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import match_line
from gpuhealth.model import Report, Severity


def report(text: str, name: str = "paste.txt") -> Report:
    snapshot, _ = analyze_texts([(name, text)])
    return run_checks(snapshot)


def lead(text: str, name: str = "paste.txt") -> tuple[str, Severity | None]:
    result = report(text, name)
    if not result.findings:
        return "HEALTHY", None
    return result.findings[0].code, result.findings[0].severity


# ------------------------------------------------------------------------------------------------ DKMS (dkms.in)

# autoinstall: "Autoinstall on ${kernelver[0]} failed for module(s) ${failed_modules[*]}." with each module as
# "$m($status)"; the status is the exit code of the step that failed (dkms.in's table: 10 a failed build, 21
# prepare_kernel's "Your kernel headers for kernel ... cannot be found").
@pytest.mark.parametrize(("line", "code"), [
    ("Autoinstall on 6.8.0-51-generic failed for module(s) nvidia(21).", "GH503"),
    ("Autoinstall on 6.8.0-51-generic failed for module(s) v4l2loopback(10) nvidia(21).", "GH503"),
    ("dkms autoinstall on 6.5.0-14-generic/x86_64 failed for nvidia(21)", "GH503"),  # 3.0's wording
    ("Autoinstall on 6.11.0-9-generic failed for module(s) nvidia(10).", "GH507"),
    ("dkms autoinstall on 6.5.0-14-generic/x86_64 failed for nvidia(10)", "GH507"),
])
def test_autoinstall_exit_status_names_the_cause(line: str, code: str):
    assert lead(line + "\n") == (code, Severity.CRITICAL)


def test_autoinstall_failure_of_another_module_is_not_nvidias():
    """The module list names another module only: not a row of the nvidia families."""
    match = match_line("Autoinstall on 6.8.0-51-generic failed for module(s) v4l2loopback(21).")
    assert match is None or match.code != "GH503"


def test_autoinstall_closing_lines_are_known():
    """die 11's two lines: a failed autoinstall, never 'an error line gpuhealth does not know' (GH003)."""
    text = ("Error! One or more modules failed to install during autoinstall.\n"
            "Refer to previous errors for more information.\n")
    result = report(text)
    assert result.findings[0].code == "GH507"
    assert "GH003" not in {f.code for f in result.findings}


@pytest.mark.parametrize("line", [
    # dkms_autoinstaller.in (3.1+) and dkms_autoinstaller (3.0, through log_action_msg with the program's name)
    "Automatic installation of modules for kernel 6.9.7-200.fc40.x86_64 was skipped since the kernel headers for "
    "this kernel do not seem to be installed.",
    "dkms: autoinstall for kernel 5.15.0-91-generic was skipped since the kernel headers for this kernel do not "
    "seem to be installed",
])
def test_autoinstaller_skipped_for_missing_headers_is_gh503(line: str):
    assert lead(line + "\n") == ("GH503", Severity.CRITICAL)


def test_headers_missing_leads_the_build_failure_it_causes():
    """prepare_kernel's refusal and the build's failure in one paste: the headers are the cause (GH503 leads)."""
    text = ("Error! Your kernel headers for kernel 6.8.0-51-generic cannot be found at /lib/modules/6.8.0-51-generic/"
            "build or /lib/modules/6.8.0-51-generic/source.\n"
            "Please install the linux-headers-6.8.0-51-generic package or use the --kernelsourcedir option to tell "
            "DKMS where it's located.\n"
            "Autoinstall on 6.8.0-51-generic failed for module(s) nvidia(21).\n"
            "Error! One or more modules failed to install during autoinstall.\n")
    result = report(text)
    assert result.findings[0].code == "GH503"
    commands = {fix.command for fix in result.findings[0].fixes}
    assert "sudo apt-get install linux-headers-$(uname -r)" in commands


def test_a_build_failure_alone_is_gh507():
    text = ("Error! Bad return status for module build on kernel: 6.11.0-9-generic (x86_64)\n"
            "Consult /var/lib/dkms/nvidia/550.120/build/make.log for more information.\n")
    assert lead(text) == ("GH507", Severity.CRITICAL)


@pytest.mark.parametrize("line", [
    "Warning: Failed to sign module '/var/lib/dkms/nvidia/550.120/build/nvidia.ko'!",
    "Certificate file /var/lib/dkms/mok.pub not found and can't be generated, modules won't be signed",
    "Key file /var/lib/dkms/mok.key not found and can't be generated, modules won't be signed",
])
def test_dkms_could_not_sign_is_a_secure_boot_warning(line: str):
    """The module is built but unsigned: a warning of GH506 (refused only where signatures are enforced), not a
    refusal the kernel made."""
    result = report(line + "\n")
    assert (result.findings[0].code, result.findings[0].severity) == ("GH506", Severity.WARNING)
    assert "refused to load" not in result.findings[0].message


def test_dkms_sign_failure_with_secure_boot_and_a_refusal_is_critical():
    text = ("Warning: Failed to sign module '/var/lib/dkms/nvidia/550.120/build/nvidia.ko'!\n"
            "$ mokutil --sb-state\nSecureBoot enabled\n"
            "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")
    assert lead(text) == ("GH506", Severity.CRITICAL)


# --------------------------------------------------------------------------------------------- akmods (akmods)

def test_akmods_kernel_devel_missing_is_gh503():
    # akmods_echo's lines, as its log writes them ("akmods: " after the date)
    text = ("2026/12/01 10:00:01 akmods: Files needed for building modules against kernel\n"
            "2026/12/01 10:00:01 akmods: 6.11.4-301.fc41.x86_64 could not be found as the following\n"
            "2026/12/01 10:00:01 akmods: directories are missing:\n"
            "2026/12/01 10:00:01 akmods: /usr/src/kernels/6.11.4-301.fc41.x86_64/\n")
    result = report(text)
    assert (result.findings[0].code, result.findings[0].severity) == ("GH503", Severity.CRITICAL)
    assert "sudo dnf install kernel-devel-$(uname -r)" in {fix.command for fix in result.findings[0].fixes}


@pytest.mark.parametrize("text", [
    # akmods --kernels for a kernel without kernel-devel
    "Could not find files needed to compile modules for 6.11.4-301.fc41.x86_64\n"
    "Are the development files for kernel 6.11.4-301.fc41.x86_64 or the appropriate kernel-devel package installed?\n",
    "Is the correct kernel-devel package installed?                [FAILED]\n",
])
def test_akmods_other_headers_wordings(text: str):
    assert lead(text)[0] == "GH503"


@pytest.mark.parametrize("text", [
    "Checking kmods exist for 6.11.4-301.fc41.x86_64             [  OK  ]\n"
    "Building and installing nvidia-kmod                        [FAILED]\n",
    "akmods: Building rpms failed; see /var/cache/akmods/nvidia/560.35.03-1-for-6.11.4-301.fc41.x86_64.failed.log "
    "for details\n",
    "Ignoring nvidia-kmod as it failed earlier                    [WARNING]\n",
])
def test_akmods_build_failure_is_gh507(text: str):
    assert lead(text) == ("GH507", Severity.CRITICAL)


def test_akmods_successful_build_is_not_a_fault():
    text = ("Checking kmods exist for 6.11.4-301.fc41.x86_64             [  OK  ]\n"
            "Building and installing nvidia-kmod                        [  OK  ]\n")
    result = report(text)
    assert not any(f.severity == Severity.CRITICAL for f in result.findings)


# ------------------------------------------------------------------- the kernel: signing.c and lockdown.c

@pytest.mark.parametrize("reason", ["unsigned module", "module with unavailable key", "module with unsupported crypto"])
def test_every_reason_of_module_sig_check_is_a_refusal(reason: str):
    """module_sig_check: pr_notice("Loading of %s is rejected") with each of its three reasons."""
    assert lead(f"[    6.204512] Loading of {reason} is rejected\n", "dmesg.log") == ("GH506", Severity.CRITICAL)


@pytest.mark.parametrize("line", [
    "[  120.000001] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7",  # 5.6+
    "[  120.000001] Lockdown: unsigned module loading is restricted; see man kernel_lockdown.7",  # 5.4
])
def test_lockdown_refusal_with_modprobe_eperm_leads_gh506_over_gh201(line: str):
    """modprobe's EPERM is what the locked-down kernel answers: with the lockdown line, the refusal is the cause
    and GH201 (not loaded) is its symptom, not a blacklist."""
    text = ("$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Operation not permitted\n"
            f"$ sudo dmesg | tail -1\n{line}\n")
    result = report(text)
    assert (result.findings[0].code, result.findings[0].severity) == ("GH506", Severity.CRITICAL)


# ------------------------------------------------------------- lockdown without Secure Boot (lockdown.c's state)

EPERM = "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Operation not permitted\n"


@pytest.mark.parametrize("where", ["command line", "Kernel configuration", "securityfs"])
def test_locked_down_kernel_makes_modprobe_eperm_a_refusal(where: str):
    """lock_kernel_down's boot line, from each place lockdown.c names: modprobe's EPERM is its refusal (GH506 leads,
    critical), not a blacklist (GH201)."""
    text = f"[    0.000000] Kernel is locked down from {where}; see man kernel_lockdown.7\n" + EPERM
    result = report(text)
    first = result.findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)
    assert "locked down" in first.message
    assert "sudo modprobe nvidia" not in {fix.command for fix in first.fixes}  # it was run: EPERM is its answer


@pytest.mark.parametrize(("levels", "code"), [
    ("none [integrity] confidentiality", "GH506"),
    ("none integrity [confidentiality]", "GH506"),
    ("[none] integrity confidentiality", "GH201"),  # not locked down: EPERM says nothing of signatures
])
def test_sysfs_lockdown_level_decides(levels: str, code: str):
    text = f"$ cat /sys/kernel/security/lockdown\n{levels}\n" + EPERM
    assert lead(text)[0] == code


def test_lockdown_alone_is_no_fault():
    """A locked-down kernel whose nvidia module loads (signed) is fine: nothing critical without a failed load."""
    result = report("[    0.000000] Kernel is locked down from command line; see man kernel_lockdown.7\n", "dmesg.log")
    assert not any(f.severity == Severity.CRITICAL for f in result.findings)


def test_lockdown_lines_reads_the_level():
    from gpuhealth.evidence.facts import lockdown_lines

    assert lockdown_lines(["none integrity [confidentiality]"], "s")["install"].lockdown == "confidentiality"
    assert lockdown_lines(["[none] integrity confidentiality"], "s")["install"].lockdown == "none"
    booted = lockdown_lines(["[    0.0] Kernel is locked down from EFI Secure Boot mode; see man kernel_lockdown.7"],
                            "dmesg")["install"]
    assert booted.lockdown == "integrity" and "EFI Secure Boot mode" in (booted.lockdown_source or "")
    assert lockdown_lines(["lockdown is a word in a sentence"], "s") == {}


# ----------------------------------------------- a key enrolled, the module signed by another (modinfo vs mokutil)

# mokutil --list-enrolled prints each key as "[key N]", "SHA1 Fingerprint: ..." and OpenSSL's text of the
# certificate (mokutil src/efi_x509.c); modinfo prints the module's "signer:". Our own rendering of both.
LIST_ENROLLED = """$ mokutil --list-enrolled
[key 1]
SHA1 Fingerprint: 3a:0f:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22
Certificate:
    Data:
        Version: 3 (0x2)
        Serial Number:
            5d:0c:aa:bb
        Signature Algorithm: sha256WithRSAEncryption
        Issuer: O = gpubox, CN = akmods local signing key
        Validity
            Not Before: Jan  1 00:00:00 2026 GMT
            Not After : Dec 31 00:00:00 2125 GMT
        Subject: O = gpubox, CN = akmods local signing key
"""
SB_ON = "$ mokutil --sb-state\nSecureBoot enabled\n"
REJECTED = "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"


def signer(name: str) -> str:
    return f"$ modinfo nvidia | grep signer\nsigner:         {name}\n"


def test_module_signed_by_a_key_that_is_not_enrolled_says_so():
    result = report(SB_ON + signer("DKMS module signing key") + LIST_ENROLLED + REJECTED)
    first = result.findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)
    assert "'DKMS module signing key', which is none of the enrolled keys" in first.message
    lines = [line for evidence in first.evidence for line in evidence.lines]
    assert "enrolled: akmods local signing key" in lines


def test_mismatch_without_a_refusal_line_is_still_critical_under_secure_boot():
    """Secure Boot on, the module not loaded (lsmod has no nvidia), its signer none of the enrolled keys."""
    text = SB_ON + signer("DKMS module signing key") + LIST_ENROLLED + "$ lsmod | grep nvidia\n$ nvidia-smi\n" \
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest " \
        "NVIDIA driver is installed and running.\n"
    first = report(text).findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)
    assert "none of the enrolled keys" in first.message


def test_module_signed_by_the_enrolled_key_and_refused_points_at_the_enrolment():
    first = report(SB_ON + signer("akmods local signing key") + LIST_ENROLLED + REJECTED).findings[0]
    assert first.code == "GH506"
    assert "an enrolled key, and is still refused" in first.message


def test_enrolled_names_are_read_only_from_a_mokutil_listing():
    from gpuhealth.evidence.facts import module_key_lines

    subject = ["        Subject: O = gpubox, CN = some web server"]
    assert module_key_lines(subject, "openssl.txt") == {}  # a certificate, not the MOK list
    listed = module_key_lines(subject, "paste.txt: $ mokutil --list-enrolled")["install"]
    assert listed.enrolled_keys == ("some web server",)
    assert module_key_lines(["signer:         X"], "paste.txt: $ modinfo vboxdrv") == {}  # another module's


# ------------------------------------------------ DKMS named its signing certificate: enrolling it is the fix

DKMS_SIGNED = ("$ sudo dkms install nvidia/550.120\n"  # dkms.in prepare_mok/prepare_signing's own lines
               "Sign command: /usr/bin/kmodsign\n"
               "Signing key: /var/lib/shim-signed/mok/MOK.priv\n"
               "Public certificate (MOK): /var/lib/shim-signed/mok/MOK.der\n"
               "Signing module /var/lib/dkms/nvidia/550.120/build/nvidia.ko\n")


def test_refused_module_dkms_signed_gets_its_certificate_enrolled():
    first = report(DKMS_SIGNED + SB_ON + REJECTED).findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)
    assert "/var/lib/shim-signed/mok/MOK.der" in first.message
    commands = [fix.command for fix in first.fixes]
    assert commands == ["mokutil --test-key /var/lib/shim-signed/mok/MOK.der",
                        "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der", "sudo reboot"]
    notes = " ".join(fix.note or "" for fix in first.fixes)
    assert "console" in notes  # the MOK manager's step is a person's, at the next boot: the script says so


def test_dkms_certificate_does_not_apply_when_dkms_could_not_sign():
    text = DKMS_SIGNED + "Warning: Failed to sign module '/var/lib/dkms/nvidia/550.120/build/nvidia.ko'!\n" + SB_ON \
        + REJECTED
    commands = [fix.command for fix in report(text).findings[0].fixes]
    assert "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der" not in commands
    assert any(c.startswith("openssl req") for c in commands)  # an unsigned module: the generic route


@pytest.mark.parametrize("text", [
    # the kernel Makefile's check before an external module build, before and after 6.12's rewording
    "  ERROR: Kernel configuration is invalid.\n"
    "         include/generated/autoconf.h or include/config/auto.conf are missing.\n"
    "         Run 'make oldconfig && make prepare' on kernel src to fix it.\n",
    "***\n***  ERROR: Kernel configuration is invalid. The following files are missing:\n"
    "***    - include/generated/autoconf.h\n",
])
def test_unprepared_kernel_tree_is_headers_missing(text: str):
    assert lead(text) == ("GH503", Severity.CRITICAL)


def test_signer_and_enrolled_pieces_count_as_read():
    """The grep'd modinfo and mokutil pieces gave their facts: not "format not recognised" (GH002)."""
    result = report(SB_ON + signer("DKMS module signing key")
                    + "$ mokutil --list-enrolled | grep Subject:\n"
                    + "        Subject: O = gpubox, CN = akmods local signing key\n"
                    + REJECTED)
    assert result.findings[0].code == "GH506" and "none of the enrolled keys" in result.findings[0].message
    assert "GH002" not in {f.code for f in result.findings}


def test_a_whole_enrolled_listing_alone_is_recognised():
    from gpuhealth.evidence import identify

    assert identify(LIST_ENROLLED.split("\n", 1)[1]) == "mokutil"
    assert identify("signer:         DKMS module signing key\nsig_key:        5D:0C:AA:BB\n") == "modinfo-nvidia"


INSMOD_EPERM = "insmod: ERROR: could not insert module /lib/modules/6.1.90/extra/nvidia.ko: Operation not permitted\n"


def test_insmod_refusal_of_nvidia_is_read():
    """kmod's insmod ("could not insert module %s: %s"): a failed load, never HEALTHY."""
    assert lead(INSMOD_EPERM) == ("GH201", Severity.CRITICAL)


@pytest.mark.parametrize("asked", [
    "$ cat /proc/cmdline\nBOOT_IMAGE=/boot/vmlinuz-6.1.90 root=/dev/nvme0n1p1 ro lockdown=integrity\n",  # early_param
    '$ apiclient get settings.kernel.lockdown\n{"settings":{"kernel":{"lockdown":"integrity"}}}\n',  # Bottlerocket
    '[settings.kernel]\nlockdown = "confidentiality"\n',  # Bottlerocket's user data (TOML)
])
def test_lockdown_asked_for_at_boot_makes_eperm_a_refusal(asked: str):
    first = report(asked + INSMOD_EPERM).findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)


def test_lockdown_none_asked_for_leaves_eperm_to_gh201():
    assert lead('{"settings":{"kernel":{"lockdown":"none"}}}\n' + INSMOD_EPERM)[0] == "GH201"


@pytest.mark.parametrize("text", [
    # dkms 3.1+: diewarn's arguments, one a line
    "Warning: The /var/lib/dkms/nvidia/470.256.02/6.14.0-15-generic/x86_64/dkms.conf\n"
    "for module nvidia/470.256.02 includes a BUILD_EXCLUSIVE directive\n"
    "which does not match this kernel/arch/config.\n"
    "This indicates that it should not be built.\n",
    # dkms 3.0: one line
    "Error! The /var/lib/dkms/nvidia/470.256.02/6.14.0-15-generic/x86_64/dkms.conf for module nvidia includes a "
    "BUILD_EXCLUSIVE directive which does not match this kernel/arch/config.\n",
])
def test_build_exclusive_nvidia_is_not_built_for_this_kernel(text: str):
    assert lead(text) == ("GH507", Severity.CRITICAL)


# ------------------------------------------------------------------------------ lockdown in the reporter's words

# Our own sentences, in the words of man kernel_lockdown.7 and kernel-parameters.txt ("lockdown= [SECURITY]
# { integrity | confidentiality }"): a reported fact, quoted, which modprobe's or insmod's "Operation not permitted"
# for nvidia (a program's line) makes the refusal that explains the module not being loaded.
MODPROBE_EPERM = "modprobe: ERROR: could not insert 'nvidia': Operation not permitted\n"


@pytest.mark.parametrize("words", [
    "We run these nodes with kernel lockdown set to integrity.",
    "Lockdown mode is enabled on the host.",
    "As far as I know the kernel is locked down.",
    "We set lockdown=confidentiality in our AMI.",
])
@pytest.mark.parametrize("failure", [MODPROBE_EPERM, INSMOD_EPERM])
def test_lockdown_in_words_explains_the_programs_refusal(words: str, failure: str):
    result = report(words + "\n\n" + failure)
    first = result.findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)
    assert first.labels.get("reported") == "words"
    assert "GH201" in first.explains  # one fault: the module not loaded folds under its refusal
    assert any(e.source.endswith("(the reporter's words)") for e in first.evidence)
    assert "reporter's words" in first.message


@pytest.mark.parametrize("words", [
    "Is lockdown enabled?",
    "If lockdown is enabled, does the module still load",
    "On this host lockdown is none.",
    "I disabled lockdown and it works.",
    "Lockdown was enabled before the upgrade.",
])
def test_lockdown_not_stated_leaves_eperm_to_gh201(words: str):
    """Questions, conditions, a level that locks nothing and the past fix state no lockdown in force."""
    result = report(words + "\n\n" + MODPROBE_EPERM)
    assert result.findings[0].code == "GH201"
    assert "GH506" not in {f.code for f in result.findings}


def test_lockdown_in_words_without_a_refusal_stays_a_guess():
    """No program's refusal shown: nothing says the module was refused, so GH506 raises nothing critical and
    the module not loaded leads."""
    text = ("The kernel is locked down on this node.\n\n$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n")
    result = report(text)
    assert result.findings[0].code != "GH506"
    assert not any(f.code == "GH506" and f.severity is Severity.CRITICAL for f in result.findings)


def test_a_command_line_is_machine_output_and_a_sentence_is_not():
    from gpuhealth.evidence.facts import lockdown_lines

    cmdline = lockdown_lines(["BOOT_IMAGE=/boot/vmlinuz-6.1.90 root=/dev/nvme0n1p1 ro lockdown=integrity"], "cmdline")
    assert cmdline["install"].lockdown == "integrity"
    assert lockdown_lines(["lockdown=confidentiality"], "grub")["install"].lockdown == "confidentiality"
    assert lockdown_lines(["We set lockdown=confidentiality in our AMI."], "notes") == {}


def test_machine_lockdown_wins_over_words():
    text = ("$ cat /sys/kernel/security/lockdown\n[none] integrity confidentiality\n\n"
            "I think the kernel is locked down.\n\n" + MODPROBE_EPERM)
    result = report(text)
    assert result.findings[0].code == "GH201"
    assert "GH506" not in {f.code for f in result.findings}


def test_a_shown_refusal_is_named_and_explains_the_module_not_loaded():
    """Secure Boot's state known and modprobe's refusal shown: GH506 names the refusal (not the guess that the
    module must be signed) and the module not loaded (GH201) folds under it: one fault."""
    text = ("$ mokutil --sb-state\nSecureBoot enabled\n$ sudo modprobe nvidia\n"
            "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n$ lsmod | grep nvidia\n"
            "$ nvidia-smi\n"
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
            "NVIDIA driver is installed and running.\n")
    first = report(text).findings[0]
    assert (first.code, first.severity) == ("GH506", Severity.CRITICAL)
    assert "refused to load the nvidia module" in first.message
    assert {"GH201", "GH203"} <= set(first.explains)


# ------------------------------------------------- the module loader's "Unknown symbol" (kernel/module/main.c)
# simplify_symbols() prints "%s: Unknown symbol %s (err %d)" for each symbol the running kernel does not export, and
# the load fails. Lines rendered from that format string for this test.

def test_nvidia_uvm_with_an_unknown_symbol_is_uvm_missing_with_a_rebuild():
    text = "[  312.123456] nvidia_uvm: Unknown symbol radix_tree_preloads (err -2)\n"
    found = report(text, "dmesg.log")
    assert found.verdict != "HEALTHY"
    top = next(f for f in found.findings if f.code == "GH205")
    assert top.severity is Severity.CRITICAL
    commands = [f.command for f in top.fixes]
    assert "modinfo -F vermagic nvidia_uvm" in commands and commands[-1] == "sudo modprobe nvidia_uvm"


def test_nvidia_with_an_unknown_symbol_is_a_module_not_built_for_this_kernel():
    # the loader checks the signature before it resolves symbols (load_module: module_sig_check, then
    # simplify_symbols), so an unknown symbol is never Secure Boot's refusal: the module does not fit this kernel
    found = report("[    5.1] nvidia: Unknown symbol drm_gem_object_free (err -22)\n", "dmesg.log")
    top = found.findings[0]
    assert top.code == "GH507" and top.severity is Severity.CRITICAL
    assert not any("Secure Boot" in f.message for f in found.findings)
    assert "modinfo -F vermagic nvidia" in [f.command for f in top.fixes]
    assert match_line("nvidia_drm: Unknown symbol drm_fb_helper_fini (err -2)") is not None


def test_another_modules_unknown_symbol_is_not_nvidias():
    assert match_line("[  3.2] zfs: Unknown symbol spl_panic (err -2)") is None


def test_unknown_symbol_from_modprobe_rules_out_secure_boot():
    # kmod prints "Unknown symbol in module, or unknown parameter" for init_module's ENOENT; Secure Boot's refusal is
    # EKEYREJECTED ("Key was rejected by service"), so the usual first guess for a module that will not load is out
    found = next(f for f in report("modprobe: ERROR: could not insert 'nvidia': Unknown symbol in module, or unknown "
                                   "parameter (see dmesg)\n").findings if f.code == "GH201")
    ruled_out = {c.cause for c in found.differential if c.status == "ruled out"}
    leading = next(c for c in found.differential if c.status != "ruled out")
    assert "secure-boot-refused" in ruled_out and leading.cause == "module-not-built"
