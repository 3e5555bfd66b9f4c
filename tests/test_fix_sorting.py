"""`gpuhealth fix` sorts every fix command of the check catalogue right: read-only diagnostics apart from
commands that change the host (`modprobe nvidia` loads a module: a change).

The commands come from two places, so none is missed: every ``Fix(...)`` / ``fixes_for(...)`` literal in
the checks' source (read with ``ast``), and every fix the test hosts produce (commands built at run time).
The expected answer comes from an oracle written differently from fixscript's regexes: each stage of a
pipeline is judged by its program and arguments.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from gpuhealth.fixsections import PLACEHOLDER, section_of
from gpuhealth.model import Finding, Fix, OsInfo, Report, Severity, Snapshot
from hostcases import FakeHost, case_names, load_spec

CHECKS = Path(__file__).parent.parent / "src" / "gpuhealth" / "checks"

ALWAYS_READ = {"ls", "cat", "grep", "tail", "head", "sort", "dmesg", "lspci", "lsmod", "modinfo", "journalctl",
               "uname", "numactl", "du", "df", "findmnt", "nvidia-bug-report.sh", "gpuhealth", "python3", "tr", "cut",
               "fuser", "lsof", "id"}
SMI_WRITES = {"-pm", "-pl", "-c", "--gpu-reset", "-r", "mig", "-mig", "-e", "-ac", "-rac", "-lgc", "-rgc",
              "--persistence-mode", "--compute-mode"}


def _stage_reads_only(stage: str) -> bool:
    words = stage.split()
    while words and words[0] in ("sudo", "time"):
        words = words[1:]
    if not words or re.search(r"(?<![0-9&])>", stage):
        return False
    program, args = words[0], words[1:]
    first = args[0] if args else ""
    if program in ALWAYS_READ:
        return program != "python3" or first == "-c"
    rules = {
        "dkms": first == "status",
        "ldconfig": first == "-p",
        "rpm": first.startswith("-q"),
        "dpkg": first in ("-S", "-l", "-L"),
        "dpkg-query": True,
        "systemctl": first in ("status", "is-active", "is-enabled"),
        "mokutil": first in ("--sb-state", "--list-enrolled", "--test-key"),
        "ipmitool": first == "sdr" or args[:2] == ["sel", "list"],
        # DCGM's levels 3 and 4 are stress tests that hold every GPU for tens of minutes: after the drain
        "dcgmi": first == "diag" and not re.search(r"(?:-r|--run)\s*[34]\b", stage),
        "nvidia-smi": first == "nvlink" or not (set(args) & SMI_WRITES),
        "nvcc": args == ["--version"],
        "gcc": args == ["--version"],
        "make": args == ["--version"],
        # prints one word (a variable, "${VAR-}" blanked as quoted text); a pipe to tee is its own stage
        "echo": len(args) == 1 and ">" not in args[0],
    }
    return rules.get(program, False)


def _stages(command: str) -> list[str]:
    """The pipeline's stages, split at |, &&, || and ; outside quotes; quoted text is blanked."""
    stages, current, quote = [], "", ""
    for char in command:
        if quote:
            quote = "" if char == quote else quote
            current += "x"
        elif char in "'\"":
            quote = char
            current += "x"
        elif char in "|&;":
            stages.append(current)
            current = ""
        else:
            current += char
    return [s for s in [*stages, current] if s.strip()]


def reads_only(command: str) -> bool:
    """Every stage of the pipeline only reads."""
    return all(_stage_reads_only(stage) for stage in _stages(command))


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its values stand in as a GPU index
        return "".join(v.value if isinstance(v, ast.Constant) else "-i 0" for v in node.values)
    return None


def catalogue_commands() -> set[str]:
    """Every fix command written literally in the checks' source."""
    found: set[str] = set()
    for path in CHECKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name == "Fix" and node.args and (text := _literal(node.args[0])):
                found.add(text)
            elif name == "fixes_for":
                for value in [*node.args, *(k.value for k in node.keywords)]:
                    for item in getattr(value, "elts", ()):
                        if text := _literal(item):
                            found.add(text)
    return found


def host_commands() -> set[str]:
    found: set[str] = set()
    for name in case_names():
        for finding in run_checks(collect(FakeHost(load_spec(name)))).findings:
            found.update(f.command for f in finding.fixes)
    return found


ALL = sorted(catalogue_commands() | host_commands())


def test_the_catalogue_was_read():
    assert len(ALL) > 100
    assert "sudo modprobe nvidia" in ALL and any(c.startswith("sudo dmesg") for c in ALL)


@pytest.mark.parametrize("command", ALL)
def test_every_fix_command_is_sorted_right(command):
    fix = Fix(command)
    filled = Fix(PLACEHOLDER.sub("0", fix.command))  # "-i <index>": a command once the placeholder is filled
    if not filled.is_command:
        assert section_of(fix) != "diagnostic", "an instruction is never a read-only diagnostic"
        return
    expected_read_only = reads_only(filled.command)
    assert (section_of(fix) == "diagnostic") == expected_read_only, (section_of(fix), fix.command)


def test_modprobe_nvidia_is_a_change_not_a_diagnostic():
    finding = Finding("GH201", "driver-not-loaded", Severity.CRITICAL, "m",
                      fixes=(Fix("sudo modprobe nvidia", note="read the error it prints"),
                             Fix("sudo dmesg | grep -i nvrm")), action="reboot", impact="node_unusable")
    script = fix_script(Report(Snapshot(os=OsInfo(id="ubuntu")), (finding,), (), 1))
    diagnostics, changes = script.index("Look first"), script.index("# Changes")
    assert diagnostics < script.index("sudo dmesg | grep -i nvrm || true") < changes
    assert script.index("\nsudo modprobe nvidia\n") > changes
    assert "sudo modprobe nvidia || true" not in script


@pytest.mark.parametrize("command, section", [
    # a word inside grep's pattern is no command: the search changes nothing
    ("grep -rsnE '^[[:space:]]*install[[:space:]]+nvidia' /etc/modprobe.d", "diagnostic"),
    ("sudo cat '/etc/modprobe.d/remove me.conf'", "diagnostic"),
    # what happens outside the quotes still counts
    ("grep -rs 'nvidia' /etc/modprobe.d > /etc/modprobe.d/list", "change"),
    ("cat '/tmp/x' | sudo tee /etc/modprobe.d/nvidia.conf", "change"),
    ("sudo rm '/etc/modprobe.d/blacklist-nvidia.conf'", "change"),
])
def test_quoted_patterns_of_read_only_programs(command, section):
    assert section_of(Fix(command, "any")) == section
