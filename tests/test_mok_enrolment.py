"""The MOK enrolment family, from the programs that print it (GH506): mokutil's answers for a key (--test-key,
--import's "SKIP:" lines, --list-new), Debian's update-secureboot-policy verdict on the DKMS key, DKMS's own signing
lines, and the kernel's refusals, against the control that shows enforcement off.

Every line is hand-written from its program's format string (no corpus sample holds them): lcp/mokutil
src/mokutil.c (test_key, issue_mok_request, print_skip_message, list_keys), Debian's shim-signed
update-secureboot-policy (setup_mok_validation), dell/dkms dkms.in v3.2.2 (prepare_signing, prepare_mok), the
kernel's kernel/module/signing.c and the lockdown LSM.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main
from gpuhealth.evidence.facts import module_key_lines, secure_boot_lines, signing_key_lines
from gpuhealth.parsers.install import parse_mokutil_test_key, parse_secureboot_policy_key

REFUSED = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"


def _analyzed(text: str) -> dict:
    result = CliRunner().invoke(main, ["analyze", "-", "--format", "json"], input=text)
    return json.loads(result.output)


def _gh506(text: str) -> dict:
    (finding,) = [f for f in _analyzed(text)["findings"] if f["code"] == "GH506"]
    return finding


def _commands(finding: dict) -> list[str]:
    return [fix["command"] for fix in finding.get("fixes", ())]


# --------------------------------------------------------------------------- mokutil's answers for a key

@pytest.mark.parametrize(("line", "answer"), [
    # --import (and --delete) print the skip message after "SKIP: " for a key they do not add to the request
    ("SKIP: /var/lib/shim-signed/mok/MOK.der is already enrolled", ("/var/lib/shim-signed/mok/MOK.der", "enrolled")),
    ("SKIP: /var/lib/dkms/mok.pub is already in the enrollment request", ("/var/lib/dkms/mok.pub", "pending")),
    ("SKIP: /etc/pki/akmods/certs/public_key.der is blocked in MokListX",
     ("/etc/pki/akmods/certs/public_key.der", "blocked")),
    ("SKIP: /var/lib/dkms/mok.pub is not in MokList", ("/var/lib/dkms/mok.pub", "not-enrolled")),
    ("Already in kernel trusted keyring. Skip /var/lib/dkms/mok.pub", ("/var/lib/dkms/mok.pub", "enrolled")),
    # --test-key --ca-check: the key's CA decides
    ("CA of /var/lib/dkms/mok.pub is already enrolled", ("/var/lib/dkms/mok.pub", "enrolled")),
    ("CA of /var/lib/dkms/mok.pub is blocked", ("/var/lib/dkms/mok.pub", "blocked")),
    # counterexamples: a bare "is blocked" is no mokutil answer, prose names no key file
    ("/var/lib/dkms/mok.pub is blocked", None),
    ("SKIP: the key is already enrolled", None),
    ("Already in kernel trusted keyring. Skip it", None),
])
def test_mokutil_answers_for_a_key(line, answer):
    assert parse_mokutil_test_key(line) == answer


@pytest.mark.parametrize(("line", "answer"), [
    ("  E: System's DKMS key is NOT installed in MOK.", ("/var/lib/dkms/mok.pub", "not-enrolled")),
    ("  [ OK ] System DKMS key is registered via MOK", ("/var/lib/dkms/mok.pub", "enrolled")),
    ("  [ OK ] System DKMS key found in /var/lib/dkms/mok.pub", None),  # found on disk says nothing of shim
    ("the DKMS key is NOT installed in MOK I think", None),
])
def test_update_secureboot_policy_verdict_on_the_dkms_key(line, answer):
    assert parse_secureboot_policy_key(line) == answer


def test_update_secureboot_policy_says_secure_boot_is_off():
    state = secure_boot_lines(["Secure Boot not enabled on this system."], "policy.txt")["install"]
    assert state.secure_boot == "disabled"
    assert secure_boot_lines(["Is Secure Boot not enabled on this system?"], "notes.txt") == {}


def test_import_that_asks_for_a_password_puts_the_key_in_the_request():
    lines = ["input password:", "input password again:"]
    state = signing_key_lines(lines, "s.txt: $ sudo mokutil --import /var/lib/dkms/mok.pub")["install"]
    assert (state.signing_key, state.signing_key_state) == ("/var/lib/dkms/mok.pub", "pending")
    assert signing_key_lines(lines, "s.txt: $ sudo mokutil --password") == {}  # no key imported


# --------------------------------------------------------------------------- key listings: whose keys they are

LISTING = ["[key 1]", "SHA1 Fingerprint: 12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0:12:34:56:78",
           "Certificate:", "    Data:", "        Issuer: CN = DKMS module signing key",
           "        Subject: CN = DKMS module signing key"]


def test_list_new_shows_keys_waiting_not_enrolled():
    state = module_key_lines(LISTING, "s.txt: $ mokutil --list-new")["install"]
    assert state.enrolled_keys is None
    assert state.signing_key_state == "pending" and "DKMS module signing key" in state.signing_key


@pytest.mark.parametrize("command", ["mokutil --dbx", "mokutil --list-delete", "mokutil --db", "mokutil --kek"])
def test_other_databases_are_no_enrolled_moks(command):
    assert module_key_lines(LISTING, f"s.txt: $ {command}") == {}


def test_list_enrolled_still_names_the_enrolled_keys():
    state = module_key_lines(LISTING, "s.txt: $ mokutil --list-enrolled")["install"]
    assert state.enrolled_keys == ("DKMS module signing key",) and state.signing_key_state is None


# --------------------------------------------------------------------------- end to end: gpuhealth analyze -

def test_a_key_waiting_in_the_request_is_confirmed_at_boot_not_replaced():
    paste = ("$ mokutil --sb-state\nSecureBoot enabled\n$ sudo modprobe nvidia\n" + REFUSED
             + "$ mokutil --list-new\n" + "\n".join(LISTING) + "\n")
    finding = _gh506(paste)
    assert finding["severity"] == "critical" and "mokutil --list-new" in finding["message"]
    assert _commands(finding) == ["sudo reboot"]  # no new key, no signing by hand: confirm the one waiting


def test_import_skipping_a_pending_key_says_so():
    paste = ("SecureBoot enabled\n$ sudo modprobe nvidia\n" + REFUSED
             + "$ sudo mokutil --import /var/lib/dkms/mok.pub\n"
               "SKIP: /var/lib/dkms/mok.pub is already in the enrollment request\n")
    finding = _gh506(paste)
    assert "waits in the enrollment request (mokutil --import)" in finding["message"]
    assert _commands(finding) == ["sudo reboot"]
    assert not [u for u in _analyzed(paste)["unavailable"] if "mokutil --import" in str(u)]


def test_debian_policy_check_names_the_dkms_key_to_enroll():
    paste = ("SecureBoot enabled\n" + REFUSED
             + "/usr/sbin/update-secureboot-policy: Checking status of DKMS module signing:\n"
               "  [ OK ] System DKMS key found in /var/lib/dkms/mok.pub\n"
               "  E: System's DKMS key is NOT installed in MOK.\n")
    finding = _gh506(paste)
    assert "(update-secureboot-policy)" in finding["message"]
    assert _commands(finding) == ["sudo mokutil --import /var/lib/dkms/mok.pub", "sudo reboot"]


@pytest.mark.parametrize("line", [
    "Binary /usr/src/linux-headers-6.8.0-45-generic/scripts/sign-file not found, modules won't be signed",
    "Binary update-secureboot-policy not found, modules won't be signed",
    "Kernel config /lib/modules/6.8.0-45-generic/build/.config not found, modules won't be signed",
    "openssl not found, can't generate key and certificate.",  # prepare_mok: no key made, the build goes unsigned
])
def test_dkms_that_could_not_sign_leaves_the_module_unsigned(line):
    alone = _gh506("Sign command: /usr/bin/kmodsign\n" + line + "\n")
    assert alone["severity"] == "warning"  # the module is unsigned; whether the kernel enforces is not shown
    assert any(line[:40] in text for e in alone["evidence"] for text in e["lines"])
    assert _gh506(line + "\nSecureBoot enabled\n" + REFUSED)["severity"] == "critical"
    # the generic DKMS line that it did sign is no such warning
    assert not [f for f in _analyzed("Signing module /var/lib/dkms/nvidia/550.120/build/nvidia.ko\n")["findings"]
                if f["code"] == "GH506" and f["severity"] != "info"]


@pytest.mark.parametrize("line", [
    "[    6.204512] Loading of unsigned module is rejected",
    "[  398.381052] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7",
    "[    6.204512] Loading of module with unavailable key is rejected",
])
def test_the_kernels_refusals_lead_with_gh506(line):
    report = _analyzed("$ sudo dmesg\n" + line + "\n")
    assert report["findings"][0]["code"] == "GH506" and report["findings"][0]["severity"] == "critical"


def test_tainting_kernel_means_enforcement_is_off_control():
    # kernel/module/signing.c: without enforcement a module with no trusted signature loads and taints the kernel
    paste = ("$ mokutil --sb-state\nSecureBoot disabled\n$ sudo dmesg | grep nvidia\n"
             "[    5.100000] nvidia: module verification failed: signature and/or required key missing - "
             "tainting kernel\n"
             "[    5.300000] nvidia-nvlink: Nvlink Core is being initialized, major device number 511\n")
    report = _analyzed(paste)
    assert not [f for f in report["findings"] if f["severity"] == "critical"]
    assert not [f for f in report["findings"] if f["code"] == "GH506"]


# --------------------------------------------------------------------------- the reporter's words

@pytest.mark.parametrize(("sentence", "row"), [
    ("I skipped the Enroll MOK step after installing the nvidia driver.", "told-mok-enrolment-skipped"),
    ("At the reboot I chose Continue boot instead of Enroll MOK, and nvidia-smi fails.", "told-mok-enrolment-skipped"),
    ("I never enrolled the key in the blue MOK manager screen.", "told-secure-boot-refused"),
    ("The MOK key was not enrolled, so the nvidia driver does not work.", "told-secure-boot-refused"),
    ("After the update I had to re-enroll the key before the nvidia driver worked.", "told-mok-had-to-enroll"),
    ("The akmods key is enrolled but the nvidia module is still rejected.", "told-enrolled-key-still-refused"),
])
def test_words_name_the_enrolment_as_the_cause_at_a_warning(sentence, row):
    report = _analyzed(sentence + "\n")
    lead = report["findings"][0]
    assert lead["code"] == "GH506" and lead["severity"] == "warning"  # words alone: never critical
    assert any("reporter's words" in e["source"] for e in lead["evidence"])


@pytest.mark.parametrize("sentence", [
    "Do I have to enroll the MOK key for the nvidia driver?",
    "I never had to enroll the key for the nvidia driver on this laptop.",
    "The key is enrolled and the nvidia module loads fine.",
    "If you missed the MOK manager screen, run update-secureboot-policy --enroll-key.",
    "Should I choose Continue boot in the MOK manager?",
])
def test_words_that_do_not_name_the_cause(sentence):
    assert not [f for f in _analyzed(sentence + "\n")["findings"] if f["code"] == "GH506"]


def test_secure_boot_told_on_beside_a_told_enrolment_is_not_overruled_by_words():
    # GH506 ran on the words' "Secure Boot enabled" alone and found nothing: that is no machine verdict, so the
    # enrolment the same person names must not be dropped (the report said HEALTHY on it)
    report = _analyzed("I had to re-enroll the MOK key to use the nvidia driver with secure boot enabled.\n")
    assert report["verdict"] != "HEALTHY"
    assert report["findings"][0]["code"] == "GH506"


def test_machine_output_wins_over_the_words():
    # the words say the enrolment was skipped; the machine shows the nvidia module loaded under Secure Boot
    paste = ("I skipped the Enroll MOK step after installing the nvidia driver.\n"
             "$ mokutil --sb-state\nSecureBoot enabled\n$ lsmod | grep nvidia\n"
             "nvidia_uvm           1466368  0\nnvidia              56655872  1 nvidia_uvm\n")
    assert not [f for f in _analyzed(paste)["findings"] if f["code"] == "GH506" and f["severity"] != "info"]


# ------------------------------------------------------------------- the fix: the key of the module's builder

DKMS_STATUS = "$ dkms status\nnvidia/550.120, 6.8.0-45-generic, x86_64: installed\n"
AKMOD_RPM = "$ rpm -qa | grep nvidia\nakmod-nvidia-550.120-1.fc40.x86_64\n"
OS_RELEASE = {"ubuntu": 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n'
                        'PRETTY_NAME="Ubuntu 24.04.1 LTS"\n',
              "debian": 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\nPRETTY_NAME="Debian GNU/Linux 12"\n'}


def _fixes_of(*pieces: tuple[str, str]) -> list[str]:
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks

    snapshot, _ = analyze_texts(list(pieces))
    (finding,) = run_checks(snapshot, select=["GH506"]).findings
    return [fix.command for fix in finding.fixes]


def test_akmods_enrolls_its_own_key():
    commands = _fixes_of(("session.txt", "SecureBoot enabled\n" + REFUSED + AKMOD_RPM))
    # akmods signs each kmod when it builds it: one built before the key was made stays unsigned until rebuilt
    assert commands == ["mokutil --test-key /etc/pki/akmods/certs/public_key.der", "sudo kmodgenca -a",
                        "sudo mokutil --import /etc/pki/akmods/certs/public_key.der", "sudo akmods --rebuild",
                        "sudo reboot"]


def test_ubuntu_dkms_enrolls_shim_signed_key():
    commands = _fixes_of(("os-release", OS_RELEASE["ubuntu"]), ("session.txt", "SecureBoot enabled\n" + REFUSED
                                                                + DKMS_STATUS))
    assert "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der" in commands
    assert not [c for c in commands if "/var/lib/dkms/mok.pub" in c or "sign-file" in c or "openssl" in c]


def test_dkms_elsewhere_enrolls_dkms_key():
    commands = _fixes_of(("os-release", OS_RELEASE["debian"]), ("session.txt", "SecureBoot enabled\n" + REFUSED
                                                                + DKMS_STATUS))
    assert commands == ["mokutil --test-key /var/lib/dkms/mok.pub", "sudo mokutil --import /var/lib/dkms/mok.pub",
                        "sudo reboot"]


def test_dkms_on_an_unknown_distribution_leaves_the_choice_to_the_reader():
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.fixscript import fix_script

    snapshot, _ = analyze_texts([("session.txt", "SecureBoot enabled\n" + REFUSED + DKMS_STATUS)])
    script = fix_script(run_checks(snapshot))
    live = [line for line in script.splitlines() if line.startswith("sudo ")]
    assert live == []  # each import is a choice between Ubuntu's key and DKMS's, the reboot completes only them
    assert "# sudo mokutil --import /var/lib/shim-signed/mok/MOK.der" in script
    assert "# sudo mokutil --import /var/lib/dkms/mok.pub" in script


def test_no_builder_shown_keeps_the_general_route():
    commands = _fixes_of(("session.txt", "SecureBoot enabled\n" + REFUSED))
    assert "sudo mokutil --import MOK.der" in commands  # a key of one's own, signed in with sign-file
    assert not [c for c in commands if "/etc/pki/akmods" in c or "/var/lib/dkms" in c]


# ------------------------------------------------------------------- the MOKs the kernel took in

BOOT_CERTS = (
    "[    0.912345] integrity: Loading X.509 certificate: UEFI:db\n"
    "[    0.912400] integrity: Loaded X.509 cert 'Microsoft Corporation: Windows UEFI CA 2023: "
    "aefc5fbbbe055d8f8daa585473499417ab5a5272'\n"
    "[    0.912500] integrity: Loading X.509 certificate: UEFI:MokListRT (MOKvar table)\n"
    "[    0.912700] integrity: Loaded X.509 cert 'gpubox Secure Boot Module Signature key: "
    "2e51c5f5b3dbfe6d3c9c0a7ba2b1e98f1f3a9f10'\n"
    "[    0.912800] integrity: Loading X.509 certificate: UEFI:MokListXRT (MOKvar table)\n"
    "[    0.912900] integrity: Loaded X.509 cert 'Revoked Key: 0123456789abcdef0123456789abcdef01234567'\n")


def test_the_kernel_names_the_moks_it_loaded_and_only_those():
    state = module_key_lines(BOOT_CERTS.splitlines(), "dmesg.log")["install"]
    assert state.enrolled_keys == ("gpubox Secure Boot Module Signature key",)  # not db's, not MokListX's
    assert module_key_lines(BOOT_CERTS.splitlines()[:2], "dmesg.log") == {}  # db alone: no MOK list shown


@pytest.mark.parametrize(("signer", "foreign"), [("DKMS module signing key", True),
                                                 ("gpubox Secure Boot Module Signature key", False)])
def test_a_module_signed_by_a_key_the_kernel_did_not_load(signer, foreign):
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks

    paste = "SecureBoot enabled\n$ sudo modprobe nvidia\n" + REFUSED
    modinfo = f"$ modinfo nvidia\nsigner:         {signer}\n"
    snapshot, _ = analyze_texts([("dmesg.log", BOOT_CERTS), ("modinfo.txt", modinfo), ("session.txt", paste)])
    (finding,) = run_checks(snapshot, select=["GH506"]).findings
    assert ("none of the enrolled keys (the kernel's MOK list at boot)" in finding.message) is foreign


@pytest.mark.parametrize(("state", "critical"), [("enabled", True), ("disabled", False)])
def test_an_untrusted_signer_is_refused_only_where_secure_boot_enforces(state, critical):
    # kernel/module/signing.c: "PKCS#7 signature not signed with a trusted key" is refused under enforcement; without
    # it the module loads and the kernel is tainted
    paste = (f"$ mokutil --sb-state\nSecureBoot {state}\n$ sudo dmesg | tail -1\n"
             "[  861.501162] PKCS#7 signature not signed with a trusted key\n")
    found = [f for f in _analyzed(paste)["findings"] if f["code"] == "GH506" and f["severity"] == "critical"]
    assert bool(found) is critical


# ------------------------------------------------------------------ each line alone (mokutil, update-secureboot-policy)
# mokutil's --sb-state lines from src/mokutil.c (sb_state_internal, main) of 0.4.0 to 0.7.2; update-secureboot-policy's
# from Debian shim-signed's script (setup_mok_validation). Each pasted alone.

def _alone(line: str) -> dict:
    return _analyzed(line + "\n")


@pytest.mark.parametrize("line", ["SecureBoot validation is disabled in shim", "Platform is in Setup Mode",
                                  "SecureBoot disabled\nPlatform is in Setup Mode",
                                  "SecureBoot enabled\nSecureBoot validation is disabled in shim"])
def test_shim_validation_off_or_setup_mode_is_read_as_not_enforced(line):
    report = _alone(line)
    assert report["verdict"] == "NO DIAGNOSIS"  # setup read: Secure Boot enforces nothing, no GPU shown
    assert not [f for f in report["findings"] if f["code"] in ("GH002", "GH003", "GH506")]  # every line read


@pytest.mark.parametrize("line", ["Cannot determine secure boot state.",
                                  "EFI variables are not supported on this system",
                                  'Failed to read "SetupMode" variable: No such file or directory'])
def test_mokutil_that_could_not_read_the_state_reads_as_neither(line):
    report = _alone(line)
    assert report["verdict"] != "HEALTHY"
    assert not [f for f in report["findings"] if f["code"] in ("GH002", "GH003", "GH506")]
    skipped = {s["code"]: s["reason"] for s in report["skipped"]}
    assert "could not read the Secure Boot state" in skipped["GH506"] and line[:20] in skipped["GH506"]
    # beside a refusal the state stays unknown: the refusal alone decides, never "Secure Boot is enabled/disabled"
    finding = _gh506(line + "\n" + REFUSED)
    assert "Secure Boot is enabled" not in finding["message"] and "Secure Boot is disabled" not in finding["message"]


def test_policy_says_the_dkms_key_is_not_enrolled_alone():
    # printed only once the SecureBoot variable read 1: Secure Boot is on, DKMS's key is not trusted yet
    finding = _gh506("  E: System's DKMS key is NOT installed in MOK.\n")
    assert finding["severity"] == "warning"  # the module's state is not shown
    assert "/var/lib/dkms/mok.pub is not enrolled (update-secureboot-policy)" in finding["message"]
    assert _commands(finding) == ["sudo mokutil --import /var/lib/dkms/mok.pub", "sudo reboot"]


def test_policy_says_an_nvidia_module_is_not_signed_with_the_enrolled_key():
    line = "  E: /var/lib/dkms/nvidia/550.120/6.8.0-45-generic/x86_64/module/nvidia.ko is not signed with the DKMS key"
    finding = _gh506(line + "\n")
    assert finding["severity"] == "warning" and "not signed with DKMS's key" in finding["message"]
    assert "sudo mokutil --import MOK.der" not in _commands(finding)  # the key is enrolled: no new one
    assert any("rebuild the nvidia module with DKMS" in c for c in _commands(finding))
    # another DKMS module's line is none of GH506's (a VirtualBox module is not the GPU's)
    other = ("  E: /var/lib/dkms/virtualbox/7.0.20/6.8.0-45-generic/x86_64/module/vboxdrv.ko is not signed with the "
             "DKMS key")
    assert not [f for f in _alone(other)["findings"] if f["code"] == "GH506"]


@pytest.mark.parametrize("line", ["Secure Boot not enabled on this system.",
                                  "The Secure Boot policy was already changed since last reboot; nothing to do.",
                                  "  [ OK ] All DKMS modules signed with the DKMS key",
                                  "  Some modules not signed with the DKMS key. Rebuild?."])
def test_policy_lines_alone_are_read_not_healthy(line):
    report = _alone(line)
    assert report["verdict"] == "NO DIAGNOSIS"
    assert not [f for f in report["findings"] if f["code"] in ("GH002", "GH003")]


def test_policy_state_lines_are_its_own_not_prose():
    from gpuhealth.parsers.install import secureboot_policy_line

    assert secureboot_policy_line("/usr/sbin/update-secureboot-policy: Checking status of DKMS module signing:") \
        == "enabled"
    assert secureboot_policy_line("All OK, nothing to do.") == "other"
    assert secureboot_policy_line("I checked the DKMS key and it is not signed") is None
    # with --enable, shim's validation was off: nothing enforced, no state read
    paste = ("$ sudo update-secureboot-policy --enable\n/usr/sbin/update-secureboot-policy: Checking status of DKMS "
             "module signing:\n  [ OK ] System DKMS key found in /var/lib/dkms/mok.pub\n")
    from gpuhealth.analyze import analyze_texts

    snapshot, _ = analyze_texts([("session.txt", paste)])
    assert (snapshot.install or None) is None or snapshot.install.secure_boot != "enabled"


# ------------------------------------------------------------------ words that name the tool get the tool's route
# Sentences written for these tests. akmods signs each kmod when it builds it, with /etc/pki/akmods' pair (Fedora's
# akmods 0.5.7 and later); DKMS with its key; Ubuntu's ubuntu-drivers installs the driver's DKMS packages, which sign
# with update-secureboot-policy's MOK.der.

def _told_gh506(text: str) -> dict:
    finding = _gh506(text)
    assert finding["severity"] == "warning" and any("reporter's words" in e["source"] for e in finding["evidence"])
    return finding


def test_words_saying_the_akmods_key_is_enrolled_and_still_refused_get_the_sources_causes():
    finding = _told_gh506("Secure Boot is on. The akmods key is enrolled but the nvidia module is still rejected.\n")
    assert "built before the key was made" in finding["message"] and "does not take MOKs in" in finding["message"]
    assert _commands(finding) == ["mokutil --test-key /etc/pki/akmods/certs/public_key.der",
                                  "modinfo -F signer nvidia", "sudo dmesg | grep -i x.509", "sudo akmods --rebuild",
                                  "sudo reboot"]  # no new key: the one enrolled is akmods'


@pytest.mark.parametrize(("words", "first_import"), [
    ("Secure Boot refuses the nvidia kmod that akmods built.",
     "sudo mokutil --import /etc/pki/akmods/certs/public_key.der"),
    ("I installed the driver with ubuntu-drivers and Secure Boot refuses the nvidia module.",
     "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der"),
])
def test_words_naming_the_builder_enroll_its_key(words, first_import):
    commands = _commands(_told_gh506(words + "\n"))
    assert first_import in commands
    assert not [c for c in commands if "openssl" in c or "sign-file" in c or c == "sudo mokutil --import MOK.der"]


def test_words_naming_dkms_on_an_unknown_distribution_leave_each_key_a_choice():
    finding = _told_gh506("Secure Boot is on and the nvidia module built by DKMS is not signed, so it does not load.\n")
    assert {"sudo mokutil --import /var/lib/shim-signed/mok/MOK.der",
            "sudo mokutil --import /var/lib/dkms/mok.pub"} <= set(_commands(finding))
    notes = {f["command"]: f.get("note", "") for f in finding["fixes"]}
    assert notes["sudo mokutil --import /var/lib/dkms/mok.pub"].startswith("only if")


@pytest.mark.parametrize("words", [
    "Secure Boot refuses the nvidia module.",  # no tool named
    "Secure Boot refuses the nvidia module; I tried both akmods and dkms.",  # two tools: which one built it is open
])
def test_words_naming_no_single_builder_keep_the_general_route(words):
    assert "sudo mokutil --import MOK.der" in _commands(_told_gh506(words + "\n"))


def test_the_fix_script_leaves_the_enrolment_to_the_person():
    # mokutil --import asks for a password; the reboot only completes it: both are the person's (fixsections)
    from click.testing import CliRunner as Runner

    script = Runner().invoke(main, ["fix", "-"], input="SecureBoot enabled\n" + REFUSED + AKMOD_RPM).output
    live = [line for line in script.splitlines() if line.startswith("sudo ")]
    assert "sudo kmodgenca -a" in live and "sudo akmods --rebuild" in live
    assert not [line for line in live if "mokutil --import" in line or line == "sudo reboot"]
    assert "# sudo mokutil --import /etc/pki/akmods/certs/public_key.der" in script


# ------------------------------------------------------------------ a re-enrolment told as the fix that worked

@pytest.mark.parametrize(("words", "confirmed"), [
    ("I had to re-enroll the MOK key for the nvidia driver.", True),
    ("We had to enroll the DKMS key again before the nvidia module loaded.", True),
    ("Re-enrolling the MOK key fixed the nvidia driver.", True),
    ("I had to re-enroll the MOK key, but the nvidia module is still rejected.", False),  # it did not work
    ("If I had to re-enroll the MOK key, would the nvidia driver load?", False),  # asked
    ("I never had to re-enroll the MOK key for the nvidia driver.", False),
    ("I had to enroll the MOK key for the nvidia driver.", False),  # a first enrolment may be the install's step
])
def test_a_re_enrolment_told_as_done_confirms_secure_boot(words, confirmed):
    from gpuhealth.parsers.prose_symptoms import told_symptoms

    found = {(t.cause, t.confirmed) for t in told_symptoms(words) if t.cause == "secure-boot-refused"}
    assert (("secure-boot-refused", True) in found) is confirmed
    if confirmed:
        assert "fix confirms" in _gh506(words + "\n")["message"]


# ------------------------------------------------------------------ Ubuntu's new MOK: made, waiting for its enrolment
# Ubuntu shim-signed's update-secureboot-policy --new-key ("Generating a new Secure Boot signing key:", writing
# /var/lib/shim-signed/mok/MOK.der) and its debconf templates (shim/secureboot_explanation, shim/enable_secureboot).

NOTE = ("Your system has UEFI Secure Boot enabled.\n\nUEFI Secure Boot requires additional configuration to work with "
        "third-party drivers.\n\nThe system will assist you in configuring UEFI Secure Boot. To permit the use of "
        "third-party drivers, a new Machine-Owner Key (MOK) has been generated. This key now needs to be enrolled in "
        "your system's firmware.\n")
NEW_KEY = ("Generating a new Secure Boot signing key:\nwriting new private key to '/var/lib/shim-signed/mok/MOK.priv'\n"
           "-----\n")


def test_the_enrolment_note_names_ubuntus_mok_to_enroll():
    finding = _gh506(NOTE)
    assert finding["severity"] == "warning" and "/var/lib/shim-signed/mok/MOK.der is not enrolled" in finding["message"]
    assert _commands(finding) == ["sudo mokutil --import /var/lib/shim-signed/mok/MOK.der", "sudo reboot"]


def test_a_new_key_beside_a_refusal_is_enrolled_not_replaced():
    finding = _gh506(NEW_KEY + "SecureBoot enabled\n" + REFUSED)
    assert finding["severity"] == "critical" and "update-secureboot-policy --new-key made it" in finding["message"]
    assert _commands(finding) == ["sudo mokutil --import /var/lib/shim-signed/mok/MOK.der", "sudo reboot"]
    # mokutil's own answer about the key says what it is now: enrolled, the note's request is over
    later = _analyzed(NEW_KEY + "SKIP: /var/lib/shim-signed/mok/MOK.der is already enrolled\n")
    assert not [f for f in later["findings"] if f["code"] == "GH506" and "not enrolled" in f["message"]]


def test_the_new_key_line_alone_is_read_not_healthy():
    report = _alone("Generating a new Secure Boot signing key:")
    assert report["verdict"] == "NO DIAGNOSIS"  # Ubuntu's --new-key makes it whatever the state: none is read
    assert not [f for f in report["findings"] if f["code"] in ("GH002", "GH003", "GH506")]


# ------------------------------------------------------------------ DKMS's own MOK, made for this build
# dell/dkms dkms.in prepare_mok (v3.0.4 to v3.2.2): a key made now is not enrolled yet.

@pytest.mark.parametrize(("lines", "key"), [
    ("Signing key: /var/lib/dkms/mok.key\nPublic certificate (MOK): /var/lib/dkms/mok.pub\n"
     "Certificate or key are missing, generating self signed certificate for MOK...\n", "/var/lib/dkms/mok.pub"),
    ("Signing key: /root/keys/mok.key\nPublic certificate (MOK): /root/keys/mok.der\n"
     "Certificate or key are missing, generating self signed certificate for MOK...\n", "/root/keys/mok.der"),
    ("Certificate or key are missing, generating them using update-secureboot-policy...\n",
     "/var/lib/shim-signed/mok/MOK.der"),
])
def test_a_key_dkms_made_for_this_build_is_enrolled_not_replaced(lines, key):
    finding = _gh506(lines + "SecureBoot enabled\n" + REFUSED)
    assert finding["severity"] == "critical" and f"{key} is not enrolled (DKMS made it" in finding["message"]
    assert _commands(finding) == [f"sudo mokutil --import {key}", "sudo reboot"]
    # the generic line that DKMS signed with an existing key says nothing of the key's enrolment
    existing = "Public certificate (MOK): /var/lib/dkms/mok.pub\nSigning module /var/lib/dkms/nvidia/nvidia.ko\n"
    assert "DKMS made it" not in _gh506(existing + "SecureBoot enabled\n" + REFUSED)["message"]
