"""gpuhealth.commands: the one way a value enters a command (issue 25, "What to build" 1).

A slot's value is checked against the slot's declared shape and quoted; a value that fails it leaves a
placeholder and a note, never a live command. Two walks keep it the only way: every fix row (the table's and
the ones the checks compute for every test host) has only declared slots and none left unfilled, and no code
formats a command from a variable (f-string, ``%``, ``.format``, ``+``, ``.replace``) outside this module.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from gpuhealth import commands
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.commands import Implausible, fill, filled, quoted, undeclared_slots
from gpuhealth.fixsections import PLACEHOLDER
from gpuhealth.knowledge.fixes import check_fixes
from gpuhealth.model import Fix
from hostcases import FakeHost, case_names, load_spec

SRC = Path(__file__).resolve().parent.parent / "src" / "gpuhealth"


@pytest.mark.parametrize("shape, good, bad", [
    ("kernel", ["5.15.0-107-generic", "6.8.0-1015-aws", "5.14.0-427.el9_4.x86_64", "6.1.0+rpt-rpi-v8", "6.9~rc1"],
     ["5.15$(touch x)", "5.15 -rf", "-k", "", "5.15;id", "5.15\n", "a" * 200]),
    ("pci", ["0000:3b:00.0", "3b:00.0", "00000000:17:00.0"], ["0000:3b:00.0;id", "3b:00", "0000:3b:00.8"]),
    ("index", ["0", "7", "15"], ["-1", "0 1", "x", "12345"]),
    ("path", ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "/etc/ld.so.conf.d/988_cuda-11.conf"],
     ["/x/$(touch /tmp/x)/libcuda.so", "/ -rf --no-preserve-root /x/libcuda.so", "relative/libcuda.so",
      "/etc/ld.so.conf.d/cuda-11.8;touch M;.conf", "/etc/ld.so.conf.d/cuda 11.8.conf", "/a`id`", "/a\nb"]),
    ("package", ["nvidia-driver-550", "cuda-toolkit-12-4", "libnvidia-compute-550"], ["-y", "a b", "x;y"]),
    ("module", ["nvidia_uvm", "nvidia-drm"], ["nvidia uvm", "-r", "nvidia;id"]),
    ("version", ["550.54.15", "570.124.06"], ["550", "550.54.15 x", "550.$(id)"]),
    ("nvreg_value", ["1", "0x1", "RMUseSwI2c=0x01;RMI2cSpeed=100"], ["1' ; touch Q ; echo '", "1 2", "'"]),
    ("variable", ["CUDA_VISIBLE_DEVICES"], ["A-B", "1A", "A;id"]),
])
def test_shapes_take_real_values_and_refuse_the_rest(shape, good, bad):
    for value in good:
        assert quoted(shape, value) in (value, f"'{value}'"), value
    for value in bad:
        with pytest.raises(Implausible):
            quoted(shape, value)


def test_a_value_is_quoted_with_shlex():
    # a shape may allow a character the shell reads (a ~ or a ; inside a RegistryDwords value): quoted, it is text
    assert quoted("kernel", "6.9~rc1") == "'6.9~rc1'"
    assert quoted("nvreg_value", "a=1;b=2") == "'a=1;b=2'"
    assert quoted("index", 3) == "3"


def test_an_implausible_value_leaves_a_placeholder_and_says_why():
    fix = commands.fix("sudo dkms autoinstall -k {kernel}", kernel="6.8$(touch /tmp/x)")
    assert fix.command == "sudo dkms autoinstall -k <kernel release>" and not fix.is_command
    assert fix.note == "the kernel release is not a plausible one: check it by hand"
    named = commands.fix("sudo rm {libcuda_path:path} && sudo ldconfig", note="only if unowned",
                         libcuda_path="/ -rf --no-preserve-root /x/libcuda.so.550.54.15")
    assert named.command == "sudo rm <libcuda path> && sudo ldconfig"
    assert named.note == "the libcuda path is not a plausible absolute path: check it by hand; only if unowned"


def test_an_unknown_value_is_a_placeholder_without_a_warning():
    fix = commands.fix("sudo nvidia-smi --gpu-reset -i {index}", disruptive=True, index=None)
    assert (fix.command, fix.note, fix.kind, fix.disruptive) == (
        "sudo nvidia-smi --gpu-reset -i <GPU index>", "", "step", True)
    assert commands.fix("sudo nvidia-smi --gpu-reset -i {index}", index=2).command == "sudo nvidia-smi --gpu-reset -i 2"


def test_shell_braces_are_not_slots_and_undeclared_slots_are_refused():
    text = "sudo cp /boot/initrd.img-$(uname -r){,.bak} && dpkg-query -W -f='${Package}\\n'"
    assert fill(text) == (text, [])
    with pytest.raises(KeyError, match="no declared shape"):
        fill("rm {nonsense}", nonsense="x")
    assert undeclared_slots("a {index} {x:path} {y:nope} {nope}") == ["{y:nope}", "{nope}"]


def test_a_template_row_is_filled_through_the_slots():
    row = Fix("nvidia-smi nvlink -e -i {index}", "any", note="counters")
    assert filled(row, index=3) == Fix("nvidia-smi nvlink -e -i 3", "any", note="counters")
    assert filled(row, index="3; reboot").command == "nvidia-smi nvlink -e -i <GPU index>"


# --------------------------------------------------------------------------- every fix row


def test_every_table_row_has_only_declared_slots():
    rows = [(key, fix.command) for key, fixes in check_fixes().items() for fix in fixes]
    assert len(rows) > 150
    assert not [(key, text) for key, text in rows if undeclared_slots(text)]


def test_every_template_constant_in_the_checks_has_declared_slots():
    from gpuhealth.checks.gpu_state import PORT_ABOVE
    from gpuhealth.checks.kernel_log import ACTION_FIXES
    from gpuhealth.checks.topology import NVLINK_FIXES

    templates = [PORT_ABOVE, *(f.command for fixes in ACTION_FIXES.values() for f in fixes),
                 *(f.command for f in NVLINK_FIXES)]
    assert any(commands.SLOT.search(t) for t in templates)
    assert not [t for t in templates if undeclared_slots(t)]


@pytest.mark.parametrize("name", case_names())
def test_no_computed_fix_keeps_a_slot(name):
    """The checks fill every slot: a report's fix holds no ``{name}`` (a placeholder for a person is ``<...>``)."""
    report = run_checks(collect(FakeHost(load_spec(name))))
    left = [(f.code, fix.command) for f in report.findings for fix in f.fixes if commands.SLOT.search(fix.command)]
    assert not left
    # and a fix with a placeholder is never a runnable command
    assert not [fix.command for f in report.findings for fix in f.fixes
                if fix.is_command and PLACEHOLDER.search(fix.command)]


# --------------------------------------------------------------------------- no other way in

# Calls whose first argument (or whose debian=/rhel=/anywhere= lists) are command text.
_COMMAND_CALLS = {"Fix", "Command", "fixes_for", "slotted", "fix", "fill", "filled", "_command"}


def _formatted(node: ast.AST) -> str | None:
    """Why ``node`` builds a text from a variable, or None: a constant, a name or an attribute is a template."""
    if isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values):
        return "an f-string"
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return "+ or %"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format",
                                                                                                    "replace", "join"):
        return f".{node.func.attr}()"
    if isinstance(node, ast.IfExp):
        return _formatted(node.body) or _formatted(node.orelse)
    if isinstance(node, (ast.List, ast.Tuple)):
        return next((why for e in node.elts if (why := _formatted(e))), None)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _formatted(node.elt)
    return None


def _command_arguments(call: ast.Call) -> list[ast.AST]:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in _COMMAND_CALLS or (name == "fix" and not isinstance(func, ast.Attribute)):
        return []
    if name == "fixes_for":
        return [*call.args, *(k.value for k in call.keywords if k.arg in ("debian", "rhel", "anywhere"))]
    return call.args[:1] + [k.value for k in call.keywords if k.arg in ("command", "text", "template")]


def _starts_like_a_command(node: ast.JoinedStr) -> bool:
    """``f"sudo ..."``: a root command built beside its Fix (returned by a helper, kept in a variable). Messages
    and evidence labels name programs too (``f"nvcc --version: {exc}"``): only sudo is sure to be a command."""
    first = node.values[0] if node.values else None
    return isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("sudo ")


def formatted_commands() -> list[str]:
    """Every place in src/gpuhealth where a command's text is made from a variable outside gpuhealth.commands."""
    found: dict[str, str] = {}  # "file:line" -> why, once per line
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "commands.py" or "_tables" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for argument in _command_arguments(node):
                    why = _formatted(argument)
                    if why:
                        found.setdefault(f"{path.relative_to(SRC)}:{argument.lineno}", why)
            elif isinstance(node, ast.JoinedStr) and _starts_like_a_command(node) and any(
                    isinstance(v, ast.FormattedValue) for v in node.values):
                # a command built beside its Fix (returned by a helper, kept in a variable)
                found.setdefault(f"{path.relative_to(SRC)}:{node.lineno}", "an f-string that starts like a command")
    return sorted(f"{where}: {why}" for where, why in found.items())


def test_no_command_is_formatted_from_a_variable():
    assert formatted_commands() == []


def test_the_walk_sees_what_it_forbids(tmp_path, monkeypatch):
    # the walk itself: each way of formatting a command is found (a walk that found nothing would pass above)
    package = tmp_path / "gpuhealth"
    package.mkdir()
    (package / "bad.py").write_text(
        'Fix(f"sudo rm {path}", "any")\n'
        'fixes_for(debian=[f"sudo apt-get install linux-headers-{k}" for k in names])\n'
        'Fix(row.command.replace("{index}", str(index)))\n'
        'Fix("sudo modprobe " + module)\n'
        'port = f"sudo lspci -vv -s {address} | grep LnkSta"\n'
        'message = f"nvidia-smi reports {count} GPUs"\n'  # words, not a command: "reports" is no option
        'slotted("sudo rm {conf_file:path}", conf_file=f)\n')  # the one way: not found
    monkeypatch.setattr(sys.modules[__name__], "SRC", package)
    found = formatted_commands()
    assert [line.split(":")[1] for line in found] == ["1", "2", "3", "4", "5"]
