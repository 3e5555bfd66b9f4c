"""os-release, redhat-release, /proc/modules + lsmod, and modprobe.d parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import corpus_files, corpus_id
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import OsInfo, ParseError
from gpuhealth.parsers.system import (
    parse_modprobe_blacklist,
    parse_os_release,
    parse_proc_modules,
    parse_redhat_release,
)

LSMOD_FILES = corpus_files("**/lsmod*", "**/proc_modules*")
# Real modprobe.d files kept in the repository (the corpus has none): a packaged one (openSUSE's
# nvidia-driver-G06, tests/data/listings) and two users posted (negativo17/nvidia-driver#75 in tests/data/listings;
# tests/cases, driver-parameters-obsolete-pat-610).
# The corpus has no os-release file either; the os-release texts above are tested one by one.
REPO_TESTS = Path(__file__).resolve().parent.parent
MODPROBE_FILES = sorted((REPO_TESTS / "data" / "listings" / "modprobe-d").glob("*.conf")) + [
    REPO_TESTS / "cases" / "dev" / "driver-parameters-obsolete-pat-610" / "modprobe.d-nvidia.conf"]

# --------------------------------------------------------------------------- os-release (hand-written)

# Hand-written in the shape Ubuntu 22.04 ships /etc/os-release.
UBUNTU_2204 = """\
PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
UBUNTU_CODENAME=jammy
"""

# Hand-written in the shape Rocky Linux 9 ships /etc/os-release.
ROCKY_9 = """\
NAME="Rocky Linux"
VERSION="9.3 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.3"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.3 (Blue Onyx)"
ANSI_COLOR="0;32"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
"""


def test_os_release_ubuntu():
    assert parse_os_release(UBUNTU_2204) == OsInfo(
        id="ubuntu", id_like=("debian",), version_id="22.04", pretty_name="Ubuntu 22.04.4 LTS")
    assert parse_os_release(UBUNTU_2204).family == "debian"


def test_os_release_rocky():
    info = parse_os_release(ROCKY_9)
    assert info == OsInfo(id="rocky", id_like=("rhel", "centos", "fedora"), version_id="9.3",
                          pretty_name="Rocky Linux 9.3 (Blue Onyx)")
    assert info.family == "rhel"


def test_os_release_quoting_and_comments():
    # Hand-written: single quotes, escapes, a comment, CRLF, and no PRETTY_NAME (falls back to NAME).
    text = "# comment\r\nNAME='Debian GNU/Linux'\r\nID=debian\r\nVERSION_ID=\"12\"\r\nX=\"a \\\"q\\\"\"\r\n"
    info = parse_os_release(text)
    assert (info.id, info.version_id, info.pretty_name, info.id_like) == ("debian", "12", "Debian GNU/Linux", ())


@pytest.mark.parametrize("text", ["", "hello\n", "CentOS Linux release 7.9.2009 (Core)\n", "FOO=bar\n"])
def test_not_os_release(text: str):
    with pytest.raises(ParseError):
        parse_os_release(text)


# --------------------------------------------------------------------------- redhat-release (hand-written)


@pytest.mark.parametrize(
    ("line", "os_id", "version", "family"),
    [
        # Hand-written release lines in the form these distributions print.
        ("CentOS Linux release 7.9.2009 (Core)", "centos", "7.9.2009", "rhel"),
        ("Red Hat Enterprise Linux Server release 7.9 (Maipo)", "rhel", "7.9", "rhel"),
        ("Red Hat Enterprise Linux release 8.9 (Ootpa)", "rhel", "8.9", "rhel"),
        ("Rocky Linux release 9.3 (Blue Onyx)", "rocky", "9.3", "rhel"),
        ("AlmaLinux release 9.4 (Seafoam Ocelot)", "almalinux", "9.4", "rhel"),
        ("CentOS Stream release 9", "centos", "9", "rhel"),
        ("Fedora release 39 (Thirty Nine)", "fedora", "39", "rhel"),
        ("Some Linux release 1.0", None, "1.0", "other"),
    ],
)
def test_redhat_release(line: str, os_id: str | None, version: str, family: str):
    info = parse_redhat_release(line + "\n")
    assert (info.id, info.version_id, info.pretty_name, info.family) == (os_id, version, line, family)


@pytest.mark.parametrize("text", ["", "\n\n", "ID=ubuntu\n", "release\n", "hello world\n"])
def test_not_redhat_release(text: str):
    with pytest.raises(ParseError):
        parse_redhat_release(text)


# --------------------------------------------------------------------------- /proc/modules and lsmod


def test_corpus_has_lsmod():
    assert LSMOD_FILES


@pytest.mark.parametrize("path", LSMOD_FILES, ids=corpus_id)
def test_module_list_corpus_file(path: Path):
    modules = parse_proc_modules(path.read_text(errors="replace"))
    assert modules
    assert "Module" not in modules
    assert len(modules) == len(set(modules))


def test_lsmod_nvidia_modules():
    (path,) = [p for p in LSMOD_FILES if p.name == "lsmod.nvidia.out"]
    modules = parse_proc_modules(path.read_text())
    assert {"nvidia", "nvidia_modeset", "nvidia_drm"} <= set(modules)
    assert modules[:3] == ("nvidia_drm", "nvidia_modeset", "nvidia")
    assert "nvidia_uvm" not in modules
    assert len(modules) == 75  # 76 lines, one of them the header


def test_proc_modules_format():
    # Hand-written in /proc/modules form (name size refcount deps state address taint).
    text = (
        "nvidia_uvm 1404928 0 - Live 0x0000000000000000 (POE)\n"
        "nvidia_drm 77824 2 - Live 0x0000000000000000 (POE)\n"
        "nvidia_modeset 1306624 3 nvidia_drm, Live 0x0000000000000000 (POE)\n"
        "nvidia 56717312 49 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
        "nouveau 2281472 0 - Loading 0x0000000000000000\n"
    )
    assert parse_proc_modules(text) == ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia", "nouveau")


@pytest.mark.parametrize("text", ["", "Module                  Size  Used by\n", "hello world\n", "nvidia\n"])
def test_not_a_module_list(text: str):
    with pytest.raises(ParseError):
        parse_proc_modules(text)


# --------------------------------------------------------------------------- modprobe.d (hand-written)

# Hand-written: what NVIDIA's installer and distro packages write to /etc/modprobe.d/.
NOUVEAU_CONF = """\
# generated by nvidia-installer
blacklist nouveau
options nouveau modeset=0
"""


def test_blacklist_nouveau():
    assert parse_modprobe_blacklist(NOUVEAU_CONF) == (("nouveau",), {"nouveau": "modeset=0"})


def test_install_false_alias_off_and_options():
    # Hand-written: several files concatenated, with other blocking forms and options lines.
    text = """\
install nouveau /bin/false
alias lbm-nouveau off
install nvidia /sbin/modprobe --ignore-install nvidia && /bin/true
options nvidia NVreg_PreserveVideoMemoryAllocations=1
options nvidia NVreg_TemporaryFilePath=/var/tmp
options nvidia-drm modeset=1 \\
    fbdev=1
softdep nvidia pre: ecdh_generic
blacklist nvidiafb
install rivafb /usr/bin/true
"""
    blacklisted, options = parse_modprobe_blacklist(text)
    assert blacklisted == ("nouveau", "lbm_nouveau", "nvidiafb", "rivafb")
    assert options == {
        "nvidia": "NVreg_PreserveVideoMemoryAllocations=1 NVreg_TemporaryFilePath=/var/tmp",
        "nvidia_drm": "modeset=1 fbdev=1",
    }


def test_grep_output_form():
    # Hand-written: `grep -r nouveau /etc/modprobe.d/` output.
    text = (
        "/etc/modprobe.d/blacklist-nvidia-nouveau.conf:blacklist nouveau\n"
        "/etc/modprobe.d/blacklist-nvidia-nouveau.conf:options nouveau modeset=0\n"
    )
    assert parse_modprobe_blacklist(text) == (("nouveau",), {"nouveau": "modeset=0"})


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n"])
def test_empty_modprobe_content(text: str):
    assert parse_modprobe_blacklist(text) == ((), {})


@pytest.mark.parametrize("text", ["hello world\n", "ID=ubuntu\nNAME=x\n", "nvidia 123 0\n"])
def test_not_modprobe_content(text: str):
    with pytest.raises(ParseError):
        parse_modprobe_blacklist(text)


def test_real_modprobe_files_are_read():
    assert len(MODPROBE_FILES) == 3 and all(p.is_file() for p in MODPROBE_FILES)
    files = {p.name: p.read_text() for p in MODPROBE_FILES}
    _, packaged = parse_modprobe_blacklist(files["nvidia-driver-G06-52_50-nvidia.conf"])
    assert "NVreg_DeviceFileMode=0660" in packaged["nvidia"].split()  # three options lines, joined
    _, posted = parse_modprobe_blacklist(files["modprobe.d-nvidia.conf"])  # options continued over lines with \\
    assert posted["nvidia"].split()[0] == "NVreg_UsePageAttributeTable=1"
    blacklisted, options = parse_modprobe_blacklist(files["negativo17-nvidia-driver-75_nvidia.conf"])
    assert blacklisted == ("nouveau",) and "nouveau" not in options  # blacklist and `install nouveau /bin/true`


# --------------------------------------------------------------------------- fuzzing

_TEXTS = [p.read_text(errors="replace") for p in LSMOD_FILES + MODPROBE_FILES]
_TEXTS += [UBUNTU_2204, ROCKY_9, NOUVEAU_CONF, "CentOS Linux release 7.9.2009 (Core)\n"]
_PARSERS = (parse_os_release, parse_redhat_release, parse_proc_modules, parse_modprobe_blacklist)




test_fuzz_random_text, test_fuzz_mutated_inputs = fuzz_tests(only_parse_errors(*_PARSERS), _TEXTS)
