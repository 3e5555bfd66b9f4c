"""Fixes are data a renderer can trust: a command that runs as is, or a step / file edit marked as such, and every
reboot, module unload, GPU reset, driver removal or service restart flagged disruptive.

Three walks: every check's declared fixes (knowledge/fixes.csv, what a finding from a pasted line shows); every
catalogue row's real example line pasted alone (``gpuhealth analyze``), whatever check answers it; and every fix the
test hosts produce. The disruptive oracle reads each pipeline stage's program and arguments, written apart from
``model.DISRUPTIVE_COMMAND``'s regex.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks import catalogue
from gpuhealth.checks.diagnosis import documented_fixes
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.collect import collect
from gpuhealth.fixsections import PLACEHOLDER
from gpuhealth.knowledge.causes import RESERVED_CODES, causes
from gpuhealth.knowledge.fixes import check_fixes, load_fixes
from gpuhealth.knowledge.signatures import signatures
from gpuhealth.model import Fix
from hostcases import FakeHost, case_names, load_spec
from test_fix_sorting import _stages

catalogue.load()
HEADER = "code,family,kind,disruptive,command,note\n"


def _words(stage: str) -> list[str]:
    words = stage.split()
    while words and (words[0] in ("sudo", "time") or "=" in words[0]):
        words = words[1:]
    return words


def disrupts(command: str) -> bool:
    """The oracle: some stage reboots, unloads a module, resets a GPU, removes packages or the driver, stops or
    restarts a service, or kills processes."""
    for stage in _stages(command):
        words = _words(stage)
        if not words:
            continue
        program, args = words[0].rsplit("/", 1)[-1], set(words[1:])
        if program in ("reboot", "shutdown", "poweroff", "rmmod", "nvidia-uninstall", "kill", "pkill", "killall"):
            return True
        if (program == "modprobe" and args & {"-r", "--remove"}) or (
                program == "nvidia-smi" and args & {"-r", "--gpu-reset"}):
            return True
        if program in ("apt", "apt-get", "dnf", "yum", "zypper") and args & {"remove", "purge", "autoremove",
                                                                           "erase", "--purge"}:
            return True
        if program == "systemctl" and args & {"restart", "stop", "isolate", "reboot", "poweroff"}:
            return True
    return False


def assert_trustworthy(fix: Fix, where: str) -> None:
    """A command parses in bash and is no config line or package name; a step or edit says what to do in words;
    a disruptive command is flagged."""
    if fix.kind == "command":
        assert subprocess.run(["bash", "-n", "-c", fix.command], capture_output=True).returncode == 0, \
            f"{where}: {fix.command!r} is not a bash command line"
        assert fix.is_command, f"{where}: {fix.command!r}"
        assert fix.command.split()[0] not in ("blacklist", "options", "install"), f"{where}: a config line"
        assert disrupts(fix.command) <= fix.disruptive, f"{where}: {fix.command!r} is not flagged disruptive"
    else:
        assert fix.kind in ("step", "edit"), f"{where}: {fix!r}"
        # an instruction in words, or a command with a placeholder to fill in (`NCCL_DEBUG=INFO <program>`)
        assert len(fix.command.split()) >= 3 or PLACEHOLDER.search(fix.command), \
            f"{where}: {fix.command!r} is a fragment, not an instruction"
        if disrupts(fix.command):
            assert fix.disruptive, f"{where}: {fix.command!r} is not flagged disruptive"


DECLARED = [(code, i, fix) for code, fixes in sorted(check_fixes().items()) for i, fix in enumerate(fixes)]


def test_the_table_has_the_checks_that_pasted_lines_raise():
    codes = {s.code for s in signatures()} - {"GH901"}
    assert codes <= set(check_fixes()), f"no fixes declared for {sorted(codes - set(check_fixes()))}"
    assert {key.partition(":")[0] for key in check_fixes()} <= set(REGISTRY) | RESERVED_CODES
    # a keyed row (GH203:<row id>) names a catalogue row, or a cause of that check (GH205:<cause id>)
    keyed = {tuple(key.split(":", 1)) for key in check_fixes() if ":" in key}
    assert {row for code, row in keyed if row not in {s.id for s in signatures()}} <= {
        c.id for c in causes().values() if (c.code, c.id) in keyed}


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed here")
@pytest.mark.parametrize(("code", "index", "fix"), DECLARED, ids=[f"{c}-{i}" for c, i, _ in DECLARED])
def test_every_declared_fix_is_a_command_or_a_marked_step(code, index, fix):
    assert_trustworthy(fix, f"{code} fix {index + 1}")


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_check_shows_only_trustworthy_fixes_for_pasted_lines(code):
    """Before, GH206 showed `blacklist nouveau` and GH208 `nvidia-utils-<branch>` as fixes, GH509 ` / `."""
    for i, fix in enumerate(documented_fixes(REGISTRY[code])):
        assert_trustworthy(fix, f"{code} fix {i + 1}")


def test_disruptive_commands_are_flagged_whoever_wrote_them():
    for command in ("sudo reboot", "sudo rmmod nvidia_uvm", "sudo nvidia-smi -r -i 0", "sudo apt-get purge 'nvidia-*'",
                    "sudo systemctl restart docker", "sudo modprobe -r nouveau", "sudo dnf remove 'akmod-nvidia*'"):
        assert Fix(command).disruptive, command
    for command in ("sudo modprobe nvidia", "nvidia-smi -q -d ROW_REMAPPER", "sudo systemctl enable --now "
                    "nvidia-persistenced", "nvidia-smi -rgc", "grep -r nouveau /etc/modprobe.d"):
        assert not Fix(command).disruptive, command


PASTED = sorted({s.example for s in signatures()})


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed here")
def test_every_catalogue_line_pasted_alone_prints_only_trustworthy_fixes():
    """Every row's real example line, pasted as the only evidence: each fix of each finding."""
    bad = []
    for line in PASTED:
        snapshot, _ = analyze_texts([("paste.txt", line + "\n")])
        for finding in run_checks(snapshot).findings:
            for fix in finding.fixes:
                try:
                    assert_trustworthy(fix, f"{finding.code} on {line[:60]!r}")
                except AssertionError as error:
                    bad.append(str(error).splitlines()[0])
    assert not bad, "\n".join(sorted(set(bad)))


def test_every_test_host_fix_is_flagged_when_it_disrupts():
    for name in case_names():
        for finding in run_checks(collect(FakeHost(load_spec(name)))).findings:
            for fix in finding.fixes:
                if fix.kind == "command" and disrupts(fix.command):
                    assert fix.disruptive, (name, finding.code, fix.command)


@pytest.mark.parametrize(("row", "why"), [
    ("GH206,any,command,no,blacklist nouveau,", "not a command"),
    ("GH208,debian,command,no,nvidia-utils-535,", "not a command"),
    ("GH208,debian,command,no,sudo apt-get install nvidia-utils-<branch>,", "not a command"),
    ("GH202,any,command,no,sudo reboot,", "disruptive=yes"),
    ("GH802,any,command,no,sudo systemctl restart docker,", "disruptive=yes"),
    ("GH509,any,command,no,sudo apt-get remove --purge nvidia-driver-535,", "disruptive=yes"),
    ("GH803,any,step,no,--gpus all,", "in words"),
    ("GH201,any,command,no,sudo `modprobe` nvidia,", "backticks"),
    ("GH201,every,command,no,sudo modprobe nvidia,", "allowed values"),
])
def test_a_bad_row_is_refused(row, why):
    with pytest.raises(ValueError, match=why):
        load_fixes(HEADER + row + "\n")


def test_the_docs_page_lists_the_declared_fixes():
    from gpuhealth.checks.docgen import page

    text = page(REGISTRY["GH303"])
    assert "`sudo reboot` (disruptive)" in text
    assert text.index("ls /lib/firmware/nvidia") < text.index("`sudo reboot`")


def test_module_signing_signs_only_uncompressed_modules():
    # sign-file appends the signature to the file it is given, and the kernel checks it at the end of the
    # decompressed module (scripts/Makefile.modinst signs, then compresses): signing a .ko.xz or .ko.zst leaves a
    # module that fails verification. The loop's glob must stop at ".ko".
    signing = [fix.command for _, _, fix in DECLARED if "sign-file" in fix.command]
    assert signing
    for command in signing:
        assert "nvidia*.ko;" in command and ".ko*" not in command
        assert "/lib/modules/$(uname -r)/build/scripts/sign-file" in command  # Debian, Ubuntu and RHEL alike
