"""One way to put a value into a command: templates with named slots, each slot a declared shape.

Every command gpuhealth prints may be pasted as root, and the values in it often come from evidence: a
kernel release a bundle names, a library path a pasted ``ldconfig -p`` row gives, a file name in a
bundle's ``/etc/ld.so.conf.d``. Evidence is written by strangers, so a value never reaches a command as
text pasted into it. A fix is a *template* whose slots are ``{name}`` (the slot's shape is its name) or
``{name:shape}``; :func:`quoted` is the one function that puts a value into a slot. It

- checks the value against its shape (a kernel release is ``[A-Za-z0-9._+~-]+``, a path is absolute and
  holds no shell metacharacter, ...): what a real value of that kind looks like, never "anything but ;";
- quotes it with ``shlex.quote``, so that even a shape that allowed a metacharacter could not break out.

A value that fails its shape is not written at all: the slot becomes a placeholder (``<kernel release>``),
so the fix is a step to fill in by hand, and its note says why ("the evidence's kernel release is not a
plausible kernel release: check it by hand"). A value that is unknown (``None``) becomes the same
placeholder without the warning. Values gpuhealth computed itself (a GPU index it counted) take the same
path: one path, so that no command is ever formatted from a variable anywhere else (tests/test_commands.py
walks the source and every fix row for that).
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import LazyPattern, lazy_re
from gpuhealth.model import Fix
from gpuhealth.records import record


@record  # a frozen dataclass that compiles nothing at import (records.py)
class Shape:
    what: str  # the value in words, for the placeholder and the note: "kernel release"
    pattern: LazyPattern  # compiled on first use: a command fills few of the shapes (start-up)

    def fits(self, value: str) -> bool:
        return self.pattern.fullmatch(value) is not None


def _shape(what: str, pattern: str) -> Shape:
    return Shape(what, lazy_re(pattern, re.ASCII))


# Every shape starts with a letter, a digit or "/": a value can never be read as an option ("-rf").
SHAPES: dict[str, Shape] = {
    "kernel": _shape("kernel release", r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}"),
    "pci": _shape("PCI address", r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"),
    "index": _shape("GPU index", r"[0-9]{1,4}"),
    "package": _shape("package name", r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}"),
    "module": _shape("kernel module name", r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"),
    # absolute, and only characters that need no quoting (shlex's safe set without "@" and "%")
    "path": _shape("absolute path", r"/[A-Za-z0-9._+=,:/-]{0,4095}"),
    # mokutil's key: a path, absolute or relative to where the command runs
    "keyfile": _shape("key file path", r"[A-Za-z0-9./][A-Za-z0-9._+=,:/-]{0,4095}"),
    "file": _shape("file name", r"[A-Za-z0-9][A-Za-z0-9._+-]{0,254}"),
    "version": _shape("driver version", r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}"),
    "branch": _shape("driver branch", r"[0-9]{2,4}"),
    "cuda": _shape("CUDA version", r"[0-9]{1,2}\.[0-9]{1,2}"),
    "number": _shape("number", r"[0-9]{1,9}(?:\.[0-9]{1,6})?"),
    "variable": _shape("environment variable name", r"[A-Za-z_][A-Za-z0-9_]{0,127}"),
    "code": _shape("gpuhealth check code", r"GH[0-9]{3}"),
    "nvreg_name": _shape("NVreg parameter name", r"[A-Za-z][A-Za-z0-9_]{0,63}"),
    # RegistryDwords values hold "key=value;key=value": quoting keeps the ";" a character
    "nvreg_value": _shape("NVreg parameter value", r"[A-Za-z0-9][A-Za-z0-9_.,:;=+/-]{0,255}"),
}

# A slot: {name} or {name:shape}; "${VAR}" is shell, "{,.bak}" is brace expansion, neither is a slot.
SLOT = lazy_re(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)(?::([a-z_]+))?\}")


# shlex.quote's own test for a word that needs no quotes
_NEEDS_NO_QUOTES = lazy_re(r"[\w@%+=:,./-]+", re.ASCII)


class Implausible(ValueError):
    """A value that does not have its slot's shape."""

    def __init__(self, shape: str, name: str = "") -> None:
        self.shape = shape
        what = SHAPES[shape].what
        if name and name != shape:  # {libcuda_path:path}: "the libcuda path is not a plausible absolute path"
            super().__init__(f"the {name.replace('_', ' ')} is not a plausible {what}: check it by hand")
        else:
            super().__init__(f"the {what} is not a plausible one: check it by hand")


def quoted(shape: str, value: object) -> str:
    """THE way a value enters a command: checked against ``shape`` (a key of :data:`SHAPES`), then quoted.
    Raises :class:`Implausible` when it does not fit, ``KeyError`` for an undeclared shape."""
    text = str(value)
    if not SHAPES[shape].fits(text):
        raise Implausible(shape)
    if _NEEDS_NO_QUOTES.fullmatch(text):  # what shlex.quote returns unchanged, without importing it at start-up
        return text
    import shlex  # here: most values need no quotes (tests/test_startup.py keeps shlex out of `analyze`)

    return shlex.quote(text)


def slot_shape(name: str, shape: str | None) -> str:
    """The declared shape of slot ``{name}`` / ``{name:shape}``; ``KeyError`` when none is declared."""
    shape = shape or name
    if shape not in SHAPES:
        raise KeyError(f"slot {{{name}}} has no declared shape (gpuhealth.commands.SHAPES)")
    return shape


def undeclared_slots(template: str) -> list[str]:
    """The slots of ``template`` whose shape is not declared (a test walks every fix row with this)."""
    return [m[0] for m in SLOT.finditer(template) if (m[2] or m[1]) not in SHAPES]


def fill(template: str, **values: object) -> tuple[str, list[str]]:
    """``template`` with each slot filled through :func:`quoted`: (the text, why a slot was left open). A slot
    whose value is missing, ``None`` or implausible stays open as a placeholder (``<kernel release>``)."""
    why: list[str] = []

    def one(match: re.Match[str]) -> str:
        shape = slot_shape(match[1], match[2])
        value = values.get(match[1])
        if value is not None:
            try:
                return quoted(shape, value)
            except Implausible:
                refused = str(Implausible(shape, match[1]))
                if refused not in why:
                    why.append(refused)
        return f"<{SHAPES[shape].what if match[1] == shape else match[1].replace('_', ' ')}>"

    return SLOT.sub(one, template), why


def fix(template: str, family: str = "any", disruptive: bool = False, note: str = "", **values: object) -> Fix:
    """A :class:`Fix` from a template: runnable when every slot was filled, else a step to finish by hand whose note
    says which value was refused."""
    text, why = fill(template, **values)
    return Fix(text, family, disruptive, "; ".join(x for x in (*why, note) if x))


def filled(template: Fix, **values: object) -> Fix:
    """A fix row written as a template (``nvidia-smi nvlink -e -i {index}``) with its slots filled."""
    if not SLOT.search(template.command):
        return template
    return fix(template.command, template.family, template.disruptive, template.note, **values)
