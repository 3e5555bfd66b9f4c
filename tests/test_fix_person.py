"""An action is a promise: `gpuhealth fix` runs nothing live that needs a person. A command that bypasses a safety check
(IGNORE_CC_MISMATCH=1), opens an editor, asks for a password (mokutil --import, passwd) or starts an interactive
installer is a comment in the script, whoever wrote it; so is a choice ("only if ...") such as `systemctl isolate`,
which ends the desktop session the script may run in. The sweep renders every command of every fix family (the fixes
table, every check's code, the causes' fixes, every test host's findings) through the script and reads its live lines
with an oracle written apart from ``fixsections.NEEDS_PERSON``: a new row cannot bring such a line back.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import gpuhealth
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from gpuhealth.knowledge.causes import causes
from gpuhealth.knowledge.fixes import check_fixes
from gpuhealth.model import Finding, Fix, OsInfo, Report, Severity, Snapshot
from hostcases import FakeHost, case_names, load_spec
from test_fix_once import written_commands
from test_fix_sorting import _stages

SRC = Path(gpuhealth.__file__).parent
UBUNTU = OsInfo(id="ubuntu", id_like=("debian",), version_id="22.04")
ROCKY = OsInfo(id="rocky", id_like=("rhel",), version_id="9.4")
BYPASS_FLAGS = {"--nogpgcheck", "--allow-unauthenticated", "--force-yes", "--no-check-certificate", "--insecure",
                "--disable-validation", "--no-cc-version-check"}
EDITORS = {"nano", "vi", "vim", "nvim", "emacs", "gedit", "sudoedit", "visudo", "vipw", "vigr"}
MOKUTIL_ASKS = {"--import", "--delete", "--reset", "--password", "--clear-password", "--enable-validation",
                "--disable-validation", "--revoke-import", "--revoke-delete"}
SILENT = {"-s", "--silent", "--no-questions", "--ui=none"}


def needs_a_person(command: str) -> str:
    """The oracle: what in ``command`` a script must not run unread ("" when nothing), stage by stage."""
    for stage in _stages(command.split("#", 1)[0]):
        words = stage.split()
        if words[:2] == ["sudo", "-e"]:
            return "editor"
        while words and (words[0] in ("sudo", "env", "time", "export") or "=" in words[0] or
                         (words[0].startswith("-") and words[:1] != ["-"])):
            if words[0].startswith("IGNORE_CC_MISMATCH="):
                return "bypass"
            words = words[1:]
        if not words:
            continue
        program, args = words[0].rsplit("/", 1)[-1], words[1:]
        if set(args) & BYPASS_FLAGS or program == "setenforce" and args[:1] == ["0"]:
            return "bypass"
        if program in EDITORS or (program == "systemctl" and "edit" in args) or (program == "crontab" and "-e" in args):
            return "editor"
        if program in ("passwd", "chpasswd", "gpasswd") or (program == "mokutil" and set(args) & MOKUTIL_ASKS):
            return "password"
        runs = program in ("nvidia-installer", "nvidia-uninstall") or program.endswith(".run") or (
            program in ("sh", "bash") and args and args[0].endswith(".run"))
        if runs and not set(args) & SILENT:
            return "installer"
    return ""


def live_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def script_of(fix: Fix, code: str = "GH999") -> str:
    finding = Finding(code, "test", Severity.WARNING, "test", fixes=(fix,), action="none", impact="degraded")
    return fix_script(Report(Snapshot(os=ROCKY if fix.family == "rhel" else UBUNTU), findings=(finding,)))


def _filled(template: str) -> str:
    """A check's command template with each slot filled as the check fills it ("{keyfile:path}" -> a path)."""
    return re.sub(r"\{(\w+)(?::\w+)?\}", "/var/lib/x", template)


def every_fix() -> list[tuple[str, Fix]]:
    """(where, fix) for every command of every fix family: the table's rows with their notes, every literal a check's
    code writes (slots filled, no note: the script must hold it back by its text alone) and every cause's fix."""
    found = [(f"fixes.csv {key}", fix) for key, fixes in sorted(check_fixes().items()) for fix in fixes]
    found += [(f"{code}'s code", Fix(_filled(text), "any")) for code, texts in sorted(written_commands().items())
              for text in sorted(texts)]
    found += [(f"causes.csv {cause.id}", Fix(cause.fix, "any")) for cause in causes().values() if cause.fix]
    found += [(f"{path.name}'s literal", Fix(_filled(text), "any")) for path, text in _sudo_literals()]
    return found


def _sudo_literals() -> list[tuple[Path, str]]:
    """Every string constant of the checks and of recommend that starts like a command run as root ("sudo ..."): the
    walk above misses a template passed through a helper (``slotted``) or held in a module's tuple."""
    paths = [*sorted(SRC.joinpath("checks").glob("*.py")), SRC / "recommend.py"]
    return [(path, node.value) for path in paths for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("sudo ")]


FIXES = every_fix()


def test_the_sweep_sees_every_family_and_the_forms_it_looks_for():
    where = {w.split()[0] for w, _ in FIXES}
    assert {"fixes.csv", "causes.csv", "install.py's", "recommend.py's"} <= where and len(FIXES) > 300
    forms = {needs_a_person(fix.command) for _, fix in FIXES} - {""}
    # the forms are there, in the families, written as data or code: the sweep below is no empty promise
    assert forms == {"bypass", "editor", "password", "installer"}, forms


def test_no_fix_of_any_family_runs_live_what_needs_a_person():
    bad = []
    for where, fix in FIXES:
        for line in live_lines(script_of(fix)):
            if needs_a_person(line):
                bad.append(f"{where}: {line} ({needs_a_person(line)})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", case_names())
def test_no_test_host_script_runs_live_what_needs_a_person(name):
    script = fix_script(run_checks(collect(FakeHost(load_spec(name)))))
    assert not [line for line in live_lines(script) if needs_a_person(line)]


@pytest.mark.parametrize(("command", "reason"), [
    ("export IGNORE_CC_MISMATCH=1  # before a .run install or dkms autoinstall", "bypasses a safety check"),
    ("sudo IGNORE_CC_MISMATCH=1 sh NVIDIA-Linux-x86_64-470.82.01.run --silent", "bypasses a safety check"),
    ("sudo dnf install --nogpgcheck nvidia-driver", "bypasses a safety check"),
    ("sudo mokutil --import /var/lib/shim-signed/mok/MOK.der", "asks for a password"),
    ("sudo mokutil --disable-validation", "bypasses a safety check"),
    ("sudo systemctl edit --full nvidia-persistenced", "opens an editor"),
    ("sudo sh NVIDIA-Linux-*.run --no-opengl-files", "interactive installer"),
    ("sudo /usr/bin/nvidia-uninstall", "interactive installer"),
    # programs the model does not take for shell at all (model.SHELL_PROGRAMS): an instruction, a comment either way
    ("sudo passwd root", "an instruction, not a command"),
    ("sudo nano /etc/default/grub", "an instruction, not a command"),
    ("sudo nvidia-installer --update", "an instruction, not a command"),
])
def test_a_command_that_needs_a_person_is_a_comment_saying_why(command, reason):
    fix = Fix(command, "any")  # a trailing "# ..." is the fix's note
    script = script_of(fix)
    assert needs_a_person(command), command  # the oracle agrees that it needs a person
    assert f"\n# {fix.command}\n" in script and reason in script, script
    assert not [line for line in live_lines(script) if fix.command in line]


@pytest.mark.parametrize("command", [
    "mokutil --sb-state", "sudo mokutil --list-enrolled", "ls /var/log/nvidia-installer.log",
    "sudo sh NVIDIA-Linux-x86_64-535.183.01.run --silent --dkms", "sudo dkms autoinstall -k $(uname -r)",
    "grep -E 'IGNORE|nano' /var/log/nvidia-installer.log", "sudo dracut --force",
])
def test_a_command_a_script_may_run_stays_live(command):
    assert not needs_a_person(command)
    assert any(line.startswith(command) for line in live_lines(script_of(Fix(command, "any"))))


def test_the_compiler_override_is_a_choice_with_its_reason():
    """GH505's override, the code's own Fix: its note makes it a choice, and says what the override skips."""
    from gpuhealth.checks import install

    assert install._CC_OVERRIDE.startswith("only if") and "skips the compiler check" in install._CC_OVERRIDE
    script = script_of(Fix("export IGNORE_CC_MISMATCH=1", "any", note=install._CC_OVERRIDE), code="GH505")
    assert "# export IGNORE_CC_MISMATCH=1" in script and "a choice the script cannot make" in script


# --------------------------------------------------------------------------- GH508: isolate, then a reboot

SET_DEFAULT = Fix("sudo systemctl set-default multi-user.target", "any",
                  note="compute servers: no desktop at the next boot")
ISOLATE = next(f for f in check_fixes()["GH508"] if "isolate" in f.command)
REBOOT = Fix("sudo reboot", "any", disruptive=True)


def _gh508(*fixes: Fix) -> str:
    finding = Finding("GH508", "display-server-on-gpu", Severity.WARNING, "test", fixes=fixes,
                      action="fix_host_software", impact="degraded")
    return fix_script(Report(Snapshot(os=UBUNTU), findings=(finding,)))


def test_isolate_is_never_live_the_reboot_starts_the_default_target():
    script = _gh508(SET_DEFAULT, ISOLATE, REBOOT)
    live = live_lines(script)
    assert "sudo systemctl set-default multi-user.target" in live and live[-1] == "sudo reboot"
    assert not [line for line in live if "isolate" in line]
    assert "# sudo systemctl isolate multi-user.target" in script
    assert "the reboot at the end starts multi-user.target" in script


def test_isolate_without_a_reboot_is_the_persons_choice():
    """Without the reboot the isolate is still what ends the desktop session the script may run in: a choice."""
    script = _gh508(SET_DEFAULT, ISOLATE)
    assert "# sudo systemctl isolate multi-user.target" in script and "a choice the script cannot make" in script
    assert ISOLATE.note.startswith("only if") and "desktop" in ISOLATE.note


def test_isolate_to_another_target_than_the_default_set_is_no_reboots_alternative():
    """The reboot starts the default target: an isolate to another target is not done by it, it stays a choice."""
    other = Fix("sudo systemctl isolate rescue.target", "any", disruptive=True, note=ISOLATE.note)
    script = _gh508(SET_DEFAULT, other, REBOOT)
    assert "# sudo systemctl isolate rescue.target" in script and "a choice the script cannot make" in script
    assert "the reboot at the end starts" not in script


def test_the_desktop_host_script_sets_the_default_and_reboots_without_isolating():
    script = fix_script(run_checks(collect(FakeHost(load_spec("centos7-desktop-mixed-install")))))
    live = live_lines(script)
    assert "sudo systemctl set-default multi-user.target" in live and live[-1] == "sudo reboot"
    assert not [line for line in live if "isolate" in line]
