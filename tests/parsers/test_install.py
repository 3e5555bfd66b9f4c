"""Install-readiness parsers: mokutil, dkms status, gcc --version, /proc/version, modinfo, cmdline, initramfs.

The corpus holds no mokutil, dkms, gcc, modinfo or lsinitramfs/lsinitrd output, so every sample here is
hand-written in the shapes those tools print (dkms 2 and 3 formats; Ubuntu, Debian and RHEL compilers).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import FUZZ, fuzz_tests, only_parse_error, only_parse_errors
from gpuhealth.model import DkmsEntry, ParseError
from gpuhealth.parsers.install import (
    parse_dkms_status,
    parse_gcc_version,
    parse_initramfs_listing,
    parse_kernel_cmdline_modules,
    parse_kernel_compiler,
    parse_modinfo,
    parse_mokutil_sb_state,
    parse_mokutil_test_key,
    parse_proc_version,
    secure_boot_from_efivar,
)

# --------------------------------------------------------------------------- mokutil


@pytest.mark.parametrize(("text", "state"), [
    ("SecureBoot enabled\n", "enabled"),
    ("SecureBoot disabled\n", "disabled"),
    ("SecureBoot disabled\nPlatform is in Setup Mode\n", "disabled"),
    ("SecureBoot enabled\nSecureBoot validation is disabled in shim\n", "disabled"),
    ("This system doesn't support Secure Boot\n", "unsupported"),
    # the second line of a state alone says the same (mokutil prints it only under that state)
    ("SecureBoot validation is disabled in shim\n", "disabled"),
    ("Platform is in Setup Mode\n", "disabled"),
])
def test_mokutil(text, state):
    assert parse_mokutil_sb_state(text) == state


@pytest.mark.parametrize("text", ["", "mokutil: command not found\n", "SecureBoot maybe\n",
                                  # mokutil could not read the state (lcp/mokutil src/mokutil.c): never a state
                                  "Cannot determine secure boot state.\n",
                                  "EFI variables are not supported on this system\n",
                                  'Failed to read "SetupMode" variable: No such file or directory\n'])
def test_mokutil_garbage(text):
    with pytest.raises(ParseError):
        parse_mokutil_sb_state(text)


def test_efivar():
    assert secure_boot_from_efivar(b"\x06\x00\x00\x00\x01") == "enabled"
    assert secure_boot_from_efivar(b"\x06\x00\x00\x00\x00") == "disabled"
    for bad in (b"", b"\x06\x00\x00\x00", b"\x06\x00\x00\x00\x07"):
        with pytest.raises(ParseError):
            secure_boot_from_efivar(bad)


# --------------------------------------------------------------------------- dkms status


def test_dkms_new_and_old_formats():
    text = ("nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed\n"
            "nvidia, 535.161.08, 5.15.0-107-generic, x86_64: built\n"
            "nvidia/550.90.07: added\n"
            "nvidia/535.161.08, 6.5.0-35-generic, x86_64: installed "
            "(WARNING! Diff between built and installed module!)\n")
    entries = parse_dkms_status(text)
    assert entries[0] == DkmsEntry("nvidia", "535.161.08", "5.15.0-105-generic", "x86_64", "installed")
    assert entries[1] == DkmsEntry("nvidia", "535.161.08", "5.15.0-107-generic", "x86_64", "built")
    assert entries[2] == DkmsEntry("nvidia", "550.90.07", None, None, "added")
    assert entries[3].installed and entries[3].kernel == "6.5.0-35-generic"
    assert not entries[1].installed


def test_dkms_empty_and_noise():
    assert parse_dkms_status("") == ()
    entries = parse_dkms_status("Error! Could not locate dkms.conf file.\nnvidia/535.161.08, 5.15.0-105-generic, "
                                "x86_64: installed\n")
    assert [e.kernel for e in entries] == ["5.15.0-105-generic"]
    with pytest.raises(ParseError):
        parse_dkms_status("Error! Could not locate dkms.conf file.\n")
    with pytest.raises(ParseError):
        parse_dkms_status("hello world\n")


# --------------------------------------------------------------------------- gcc and the kernel's compiler


@pytest.mark.parametrize(("text", "version"), [
    ("gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\nCopyright (C) 2021 Free Software Foundation, Inc.\n", "11.4.0"),
    ("gcc (GCC) 11.4.1 20231218 (Red Hat 11.4.1-3)\n", "11.4.1"),
    ("gcc (Debian 12.2.0-14) 12.2.0\n", "12.2.0"),
    ("gcc (GCC) 4.8.5 20150623 (Red Hat 4.8.5-44)\n", "4.8.5"),
])
def test_gcc_version(text, version):
    assert parse_gcc_version(text) == (version, text.splitlines()[0])


@pytest.mark.parametrize("text", ["", "bash: gcc: command not found\n", "GNU Make 4.3\n"])
def test_gcc_garbage(text):
    with pytest.raises(ParseError):
        parse_gcc_version(text)


@pytest.mark.parametrize(("text", "compiler"), [
    ("Linux version 5.15.0-105-generic (buildd@lcy02-amd64-001) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, "
     "GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP", "gcc 11.4.0"),
    ("Linux version 6.5.0-35-generic (buildd@lcy02-amd64-079) (x86_64-linux-gnu-gcc-12 (Ubuntu "
     "12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #35~22.04.1-Ubuntu", "gcc 12.3.0"),
    ("Linux version 3.10.0-1160.99.1.el7.x86_64 (mockbuild@kbuilder.bsys.centos.org) (gcc version 4.8.5 20150623 "
     "(Red Hat 4.8.5-44) (GCC) ) #1 SMP", "gcc 4.8.5"),
    ("Linux version 5.14.0-362.8.1.el9_3.x86_64 (mockbuild@x) (gcc (GCC) 11.4.1 20230605 (Red Hat 11.4.1-2), "
     "GNU ld version 2.35.2-42.el9) #1 SMP", "gcc 11.4.1"),
    ("Linux version 6.8.0 (me@host) (Ubuntu clang version 17.0.6 (9ubuntu1), Ubuntu LLD 17.0.6) #1 SMP",
     "clang 17.0.6"),
])
def test_kernel_compiler(text, compiler):
    assert parse_kernel_compiler(text) == compiler


@pytest.mark.parametrize("text", ["", "hello", "Linux version 6.1.0 (me@host) #1 SMP"])
def test_kernel_compiler_garbage(text):
    with pytest.raises(ParseError):
        parse_kernel_compiler(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("Linux version 4.4.0-31-generic (buildd@lgw01-16) (gcc version 5.3.1 20160413 (Ubuntu 5.3.1-14ubuntu2.1) ) "
     "#50-Ubuntu SMP Wed Jul 13 00:07:12 UTC 2016\n", ("4.4.0-31-generic", "gcc 5.3.1")),
    ("\nLinux version 6.5.0-35-generic (b@x) (x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, "
     "GNU ld) #35\n", ("6.5.0-35-generic", "gcc 12.3.0")),
    # a kernel line naming neither gcc nor clang: the release is still read, the compiler is unknown
    ("Linux version 6.1.0 (me@host) #1 SMP", ("6.1.0", None)),
])
def test_proc_version(text, expected):
    assert parse_proc_version(text) == expected


@pytest.mark.parametrize("text", ["", "Linux gpubox 5.15.0-105-generic #115-Ubuntu SMP x86_64 GNU/Linux",
                                  "Linux version 6.1.0 (a) #1\nLinux version 6.1.0 (a) #1\n"])
def test_proc_version_garbage(text):
    with pytest.raises(ParseError):
        parse_proc_version(text)


# --------------------------------------------------------------------------- modinfo, cmdline, initramfs


def test_modinfo_signed_and_unsigned():
    signed = parse_modinfo("filename:       /lib/modules/5.15.0-105-generic/updates/dkms/nvidia.ko\n"
                           "version:        535.161.08\nsig_id:         PKCS#7\n"
                           "signer:         DKMS module signing key\n")
    assert signed["signer"] == "DKMS module signing key"
    unsigned = parse_modinfo("filename:       /lib/modules/x/kernel/drivers/video/nvidia.ko\nlicense:        NVIDIA\n")
    assert "signer" not in unsigned
    with pytest.raises(ParseError):
        parse_modinfo("modinfo: ERROR: Module nvidia not found.\n")


def test_kernel_cmdline():
    blacklisted, options = parse_kernel_cmdline_modules(
        "BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=1 ro modprobe.blacklist=nouveau,nvidiafb rd.driver.blacklist=nouveau "
        "nouveau.modeset=0 nvidia-drm.modeset=1 quiet\n")
    assert blacklisted == ("nouveau", "nvidiafb")
    assert options == {"nouveau": "modeset=0", "nvidia_drm": "modeset=1"}
    assert parse_kernel_cmdline_modules("") == ((), {})


def test_initramfs_listings():
    debian = ("usr/lib/modules/6.1.0-21-amd64/kernel/drivers/gpu/drm/nouveau/nouveau.ko\n"
              "etc/modprobe.d/blacklist-nouveau.conf\nusr/lib/modprobe.d/aliases.conf\n")
    assert parse_initramfs_listing(debian) == (True, ("blacklist-nouveau.conf", "aliases.conf"))
    rhel = ("Image: /boot/initramfs-5.14.0.img: 40M\n========\n"
            "-rw-r--r--   1 root root 2437136 Nov  8 17:36 usr/lib/modules/5.14.0/kernel/drivers/gpu/drm/nouveau/"
            "nouveau.ko.xz\nlrwxrwxrwx   1 root root 7 Nov 14 10:13 lib -> usr/lib\n")
    assert parse_initramfs_listing(rhel) == (True, ())
    assert parse_initramfs_listing("usr/lib/modules/x/kernel/fs/ext4/ext4.ko\n") == (False, ())
    with pytest.raises(ParseError):
        parse_initramfs_listing("")


# REAL lines: "/var/lib/dkms/mok.pub is not enrolled" and "... is already enrolled" as printed in
# r-pufky/docs, docs/service/secure_boot/README.md (a Debian DKMS Secure Boot how-to, `mokutil --test-key
# /var/lib/dkms/mok.pub` with its output). The other answers are the tool's own printf formats (lcp/mokutil
# src/mokutil.c: test_key() and print_skip_message()), filled in by hand.
@pytest.mark.parametrize(("line", "answer"), [
    ("/var/lib/dkms/mok.pub is not enrolled\n", ("/var/lib/dkms/mok.pub", "not-enrolled")),
    ("/var/lib/dkms/mok.pub is already enrolled", ("/var/lib/dkms/mok.pub", "enrolled")),
    ("MOK.der is already in the enrollment request", ("MOK.der", "pending")),
    ("/etc/pki/akmods/certs/public_key.der is already in db", ("/etc/pki/akmods/certs/public_key.der", "enrolled")),
    ("signing_key.x509 is blocked in dbx", ("signing_key.x509", "blocked")),
    ("the key is not enrolled", None),  # prose names no key file
    ("my-key is not enrolled", None),
    ("SecureBoot enabled", None),
    ("/var/lib/dkms/mok.pub is not enrolled, says mokutil", None),
])
def test_mokutil_test_key(line, answer):
    assert parse_mokutil_test_key(line) == answer


# --------------------------------------------------------------------------- fuzzing

SAMPLES = [
    "SecureBoot enabled\nSecureBoot validation is disabled in shim\n",
    "nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed\nnvidia, 535.161.08, 5.15.0-107-generic, x86_64: built\n",
    "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\n",
    "Linux version 6.5.0-35-generic (b@x) (x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld) #35",
    "filename:       /lib/modules/x/nvidia.ko\nsigner:         key\n",
    "BOOT_IMAGE=/vmlinuz modprobe.blacklist=nouveau nouveau.modeset=0\n",
    "usr/lib/modules/x/kernel/drivers/gpu/drm/nouveau/nouveau.ko\netc/modprobe.d/blacklist-nouveau.conf\n",
    "/var/lib/dkms/mok.pub is not enrolled\n",
    "Linux version 4.4.0-31-generic (buildd@lgw01-16) (gcc version 5.3.1 20160413 (Ubuntu 5.3.1-14ubuntu2.1) ) #50",
    "gcc (Ubuntu 5.4.0-6ubuntu1~16.04.4) 5.4.0 20160609\nCopyright (C) 2015 Free Software Foundation, Inc.\n",
]
PARSERS = (parse_mokutil_sb_state, parse_dkms_status, parse_gcc_version, parse_kernel_compiler, parse_proc_version,
           parse_modinfo,
           parse_kernel_cmdline_modules, parse_initramfs_listing)


test_fuzz_random_text, test_fuzz_mutated_samples = fuzz_tests(only_parse_errors(*PARSERS), SAMPLES)


@FUZZ
@given(st.text(max_size=400))
def test_fuzz_test_key(text):
    only_parse_error(parse_mokutil_test_key, text)


@FUZZ
@given(st.binary(max_size=12))
def test_fuzz_efivar(data):
    only_parse_error(secure_boot_from_efivar, data)


def test_dkms_status_fails_fast_on_a_long_line_without_a_colon():
    """A long comma-separated line (a CSV header, say) once made the pattern backtrack exponentially:
    with that bug this test never finishes."""
    with pytest.raises(ParseError):
        parse_dkms_status("nvidia/535.1" + ", abc def" * 200)
