"""Each fixed procedure is written once: a check whose finding shows its table rows (``knowledge/fixes.csv``) takes
them from the table (``registry.table_fixes``), not from a copy in its code; and the "How to fix" prose above the rows
on its docs page names no command the rows do not have.

Found mechanically, not by reading: every command a check's code writes as a literal (in ``Fix(...)`` or
``fixes_for(...)``, directly, in a helper it calls, or through a module constant such as ``REBOOT``) is compared with
the table's rows for that check's code. A check may still write a fix that interpolates what it computed (a kernel
release, a bus address, a file it found): that text is no literal and is not compared.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge.fixes import check_fixes

catalogue.load()

CHECKS = Path(__file__).parent.parent / "src" / "gpuhealth" / "checks"
# A single command a check shares with its table rows is no procedure: a look or a reboot the check picks by what it
# saw (GH406 asks for the fans only when a GPU is hot). Two or more are a copy of the table's procedure.
MOST_SHARED = 1


def _literals(node: ast.AST, constants: dict[str, tuple[str, ...]]) -> list[str]:
    """The static command strings of a Fix/fixes_for argument: a string, a list or tuple of them, a starred or named
    module constant holding them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [text for element in node.elts for text in _literals(element, constants)]
    if isinstance(node, ast.Starred):
        return _literals(node.value, constants)
    if isinstance(node, ast.Name):
        return list(constants.get(node.id, ()))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "a " "b" split over lines, or a + b
        left, right = _literals(node.left, constants), _literals(node.right, constants)
        return [left[0] + right[0]] if len(left) == len(right) == 1 else []
    return []


def _fix_arguments(call: ast.Call) -> list[ast.AST]:
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    if name == "Fix":
        return [*call.args[:1], *(k.value for k in call.keywords if k.arg == "command")]
    if name == "fixes_for":
        return [*call.args[:3], *(k.value for k in call.keywords if k.arg in ("debian", "rhel", "anywhere"))]
    return []


def _module_constants(trees: list[ast.Module]) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Module-level names holding command strings (``ENABLE_PERSISTENCED``), and those holding a ``Fix`` (``REBOOT``,
    imported across the checks' modules), with its command."""
    strings: dict[str, tuple[str, ...]] = {}
    fixes: dict[str, str] = {}
    for tree in trees:
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            name, value = node.targets[0].id, node.value
            if isinstance(value, ast.Call) and _fix_arguments(value):
                texts = _literals(_fix_arguments(value)[0], strings)
                if texts:
                    fixes[name] = texts[0]
            elif texts := _literals(value, {}):
                strings[name] = tuple(texts)
    return strings, fixes


def _check_code(function: ast.FunctionDef) -> str | None:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "check":
            first = decorator.args[0]
            return first.value if isinstance(first, ast.Constant) else None
    return None


def written_commands() -> dict[str, set[str]]:
    """Check code -> the command literals its code (and every helper of its module it calls) writes as fixes."""
    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in sorted(CHECKS.glob("*.py"))]
    strings, fix_constants = _module_constants(trees)
    out: dict[str, set[str]] = {}
    for tree in trees:
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        own: dict[str, set[str]] = {}
        calls: dict[str, set[str]] = {}
        for name, function in functions.items():
            texts: set[str] = set()
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    for argument in _fix_arguments(node):
                        texts.update(_literals(argument, strings))
                    if isinstance(node.func, ast.Name) and node.func.id in functions:
                        calls.setdefault(name, set()).add(node.func.id)
                elif isinstance(node, ast.Name) and node.id in fix_constants:
                    texts.add(fix_constants[node.id])
            own[name] = texts
        for name, function in functions.items():
            code = _check_code(function)
            if code is None:
                continue
            reached, frontier = {name}, [name]
            while frontier:
                for callee in calls.get(frontier.pop(), ()):
                    if callee not in reached:
                        reached.add(callee)
                        frontier.append(callee)
            out.setdefault(code, set()).update(*(own[f] for f in reached))
    return out


WRITTEN = written_commands()
TABLE: dict[str, set[str]] = {}
for _key, _fixes in check_fixes().items():  # GH203:<row id> rows are GH203's too: its code may not copy them either
    TABLE.setdefault(_key.partition(":")[0], set()).update(f.command for f in _fixes)


def test_the_walk_finds_the_checks_and_their_literals():
    # the walk itself: it sees checks across the modules, helpers they call, and constants such as REBOOT
    assert len(WRITTEN) > 50
    assert "sudo reboot" in WRITTEN["GH508"]  # REBOOT, imported from checks/driver.py
    # a fix that takes what the check computed is a template with a slot (GH505's gcc-{major:number}), never
    # the same text as a table row
    assert [c for c in WRITTEN["GH505"] if c.startswith("sudo apt-get install gcc-")] == [
        "sudo apt-get install gcc-{major:number}"]
    assert "sudo dnf install gcc" in WRITTEN["GH505"]
    assert "dkms status nvidia" in WRITTEN["GH507"]  # in the check itself, beside its table rows


@pytest.mark.parametrize("code", sorted(TABLE))
def test_a_check_takes_its_procedure_from_the_table(code):
    shared = sorted(WRITTEN.get(code, set()) & TABLE[code])
    assert len(shared) <= MOST_SHARED, (
        f"{code} writes {shared} in its code and knowledge/fixes.csv lists them too: take them from the table "
        f"(registry.table_fixes({code!r}))")


# --------------------------------------------------------------------------- the "How to fix" prose and the table

def _prose_commands(code: str) -> list[str]:
    """The backticked spans of a check's "How to fix" that are commands of two words or more (``dkms status``), one
    line each; a name (`nvidia-smi`, `.run`), a path or a flag is prose."""
    from gpuhealth.model import Fix

    text = REGISTRY[code].docs.get("How to fix", "")
    spans = (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text))
    return [span for span in spans if len(span.split()) >= 2 and Fix(span).is_command]


@pytest.mark.parametrize("code", sorted(TABLE))
def test_a_command_in_the_docs_prose_is_one_of_the_checks_rows(code):
    """The docs page prints the prose above the table's rows: a command in the prose is a row (or part of one), so the
    two never give different commands for the same step (before: `cat /proc/driver/nvidia/version` above the row
    `cat /sys/module/nvidia/version`, `grep -i aer` above `grep -iE 'AER|PCIe Bus Error'`)."""
    rows = [" ".join(command.split()) for command in TABLE[code]]
    stray = [span for span in _prose_commands(code) if not any(span in row for row in rows)]
    assert not stray, f"{code}'s How to fix shows {stray}, which knowledge/fixes.csv does not list: add the row, " \
                      "or write the prose without a command"


def test_the_prose_walk_sees_commands_and_leaves_names():
    assert "sudo modprobe nvidia" in _prose_commands("GH201")
    assert "uname -r" in _prose_commands("GH201")  # a fragment of the row `... linux-headers-$(uname -r)`
    assert not any(span in ("nvidia-smi", ".run", "yum") for code in TABLE for span in _prose_commands(code))
