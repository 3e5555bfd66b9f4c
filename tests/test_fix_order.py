"""The text report and `gpuhealth fix` agree on the order of a finding's fixes: what the report lists first, the
script runs first (backups, read-only looks, changes, disruptive steps last, the check's order within each).

Both are read as a user sees them: the commands under each finding's ``fix:`` in the rendered report, and the
commands of the written script (live, or commented out for a placeholder or an unknown distribution).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from gpuhealth.model import Report
from gpuhealth.report import text
from hostcases import FakeHost, case_names, load_spec

CASES = Path(__file__).parent / "cases" / "dev"
# real pasted evidence whose checks list a read-only look or a reboot in the middle of a procedure
EVIDENCE_CASES = ["secure-boot-key-rejected-gdm-journal", "secure-boot-pkcs7-prime-select",
                  "secure-boot-mok-never-staged-startos", "driver-not-loaded-coreos-modules-not-reloaded",
                  "module-not-built-2204-image-on-2404-kernel", "nouveau-in-use-lspci-gtx970"]


def printed_fixes(report: Report) -> list[list[str]]:
    """Per finding, its commands and its ``step:``/``edit:`` lines as printed, in order."""
    buffer = io.StringIO()
    text.render(report, Console(file=buffer, width=400, highlight=False, color_system=None))
    findings: list[list[str]] = []
    inside = False
    for line in buffer.getvalue().splitlines():
        if line and not line.startswith(" "):
            findings.append([])
            inside = False
        elif line in ("    fix:", "    then:"):
            inside = True
        elif line.startswith(("    step: ", "    edit: ")):
            findings[-1].append(line.strip())
            inside = False
        elif inside and line.startswith("      ") and not line.strip().startswith("#"):
            findings[-1].append(line.strip())
        elif not line.startswith("      "):
            inside = False
    return [f for f in findings if f]


def report_commands(report: Report) -> list[list[str]]:
    """Each finding's commands under ``fix:`` (``then:`` after a step), in the order the text report prints them."""
    steps = ("step: ", "edit: ")
    return [c for c in ([x for x in fixes if not x.startswith(steps)] for fixes in printed_fixes(report)) if c]


def script_commands(script: str) -> list[str]:
    """The script's commands in order: live ones without the `|| true` a look gets, and those left commented out
    (the line after its ``# (why)``); verification lines are not fixes."""
    out: list[str] = []
    lines = script.splitlines()
    for i, line in enumerate(lines):
        if not line.strip() or line.startswith("#!") or line in ("set -euo pipefail",) or line.startswith(
                'echo "gpuhealth fix script'):
            continue
        if line.startswith("# ") and i > 0 and lines[i - 1].startswith("# (") and lines[i - 1].endswith(")"):
            out.append(line[2:])
        elif not line.startswith("#") and " || { echo " not in line:
            out.append(line.removesuffix(" || true"))
    return out


def assert_same_order(report: Report) -> None:
    script = script_commands(fix_script(report))
    for commands in report_commands(report):
        at = []
        for i, command in enumerate(commands):
            # a command listed for both families (unknown distribution) is there twice: its n-th time to the n-th
            places = [j for j, line in enumerate(script) if line == command]
            nth = commands[:i].count(command)
            assert len(places) > nth, f"{command!r} is in the report, not in the script"
            at.append(places[nth])
        assert at == sorted(at), f"report order {commands} differs from the script's"


def evidence_report(name: str) -> Report:
    folder = CASES / name
    texts = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.iterdir())
             if p.is_file() and p.suffix != ".toml" and p.name.lower() != "readme.md"]
    return run_checks(analyze_texts(texts)[0])


@pytest.mark.parametrize("name", case_names())
def test_report_and_script_agree_on_order_for_every_test_host(name):
    assert_same_order(run_checks(collect(FakeHost(load_spec(name)), origin="bundle")))


@pytest.mark.parametrize("name", EVIDENCE_CASES)
def test_report_and_script_agree_on_order_for_pasted_evidence(name):
    assert_same_order(evidence_report(name))


def test_a_reboot_listed_mid_procedure_is_last_in_both():
    # GH506's signing loop enrolls the key with a reboot before it signs and loads: the report showed the reboot
    # third while the script ran it last
    report = evidence_report("secure-boot-key-rejected-gdm-journal")
    commands = next(c for c in report_commands(report) if any("sign-file" in x for x in c))
    assert commands[-1] == "sudo reboot"
    # the key before its import, the import before the signing
    order = [next(i for i, c in enumerate(commands) if c.startswith(start))
             for start in ("openssl req", "sudo mokutil --import", "for m in")]
    assert order == sorted(order)


def test_secure_boot_script_loads_no_module_before_the_key_is_enrolled():
    # the MOK manager enrolls the key only at the next boot: a modprobe before the reboot is refused ("Key was
    # rejected by service") and its verification stopped the script before the reboot that enrolls the key
    report = evidence_report("secure-boot-key-rejected-gdm-journal")
    commands = next(c for c in report_commands(report) if any("sign-file" in x for x in c))
    assert not any("modprobe" in c for c in commands[:-1])
