"""Each check's fixes as data (``fixes.csv``): what a finding shows when no check judged the evidence itself.

A finding raised by a pasted line alone (``Key was rejected by service``), or a confirmed cause that leads a
symptom, gets its check's fixes from this table. They used to be the backticked fragments of the check's
"How to fix" text, which could be config lines (``blacklist nouveau``), package names or bare flags, and were
never marked disruptive.

A row is one fix, in the order shown: ``code``, ``family`` (debian, rhel or any), ``kind``, ``disruptive``
(yes/no), ``command`` and an optional ``note``. ``code`` is a check code (``GH206``), or a check code and the id of
the ``signatures.csv`` row its finding decoded (``GH203:nvml-gpu-is-lost``: GH203's fixes for a failed nvidia-smi or
NVML call, per decoded error; ``registry.table_fixes("GH203", kind=...)``). ``kind`` is explicit:

- ``command``: a command line that runs as is in bash (its program is one gpuhealth knows, no placeholder);
- ``step``: an instruction in words, or a command holding a placeholder (``<index>``) to fill in first;
- ``edit``: a change to a file, described in words (which file, which line).

The loader refuses a row whose ``command`` is not a command, or that reboots, unloads a module, resets a GPU,
removes the driver or restarts a service (``model.DISRUPTIVE_COMMAND``) without ``disruptive=yes``. The docs
pages (``make docs``) list each check's rows under its "How to fix". Read once, lazily, on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from gpuhealth.knowledge import table_rows
from gpuhealth.model import DISRUPTIVE_COMMAND, FIX_KINDS, Fix, ParseError, fix_kind

__all__ = ["check_fixes", "fixes_of", "is_fix_key", "load_fixes"]

_FAMILIES = ("debian", "rhel", "any")
_SLUG = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_COLUMNS = ["code", "family", "kind", "disruptive", "command", "note"]


def load_fixes(text: str, name: str = "fixes.csv") -> dict[str, tuple[Fix, ...]]:
    """The table's fixes per check code, in row order; ParseError (a ValueError) naming the row for a bad one."""
    import csv
    import io

    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames != _COLUMNS:
        raise ParseError(f"{name}: the columns must be {', '.join(_COLUMNS)}")
    return _fixes_from(reader, name)


def _fixes_from(rows: Iterable[dict[str, str]], name: str) -> dict[str, tuple[Fix, ...]]:
    table: dict[str, list[Fix]] = {}
    for number, row in enumerate(rows, start=2):
        if list(row) != _COLUMNS:
            raise ParseError(f"{name} line {number}: the columns must be {', '.join(_COLUMNS)}")
        fix = _fix(row, f"{name} line {number}")
        if any(f.command == fix.command and f.family == fix.family for f in table.get(row["code"], ())):
            raise ParseError(f"{name} line {number}: {row['code']} lists {fix.command!r} twice")
        table.setdefault(row["code"], []).append(fix)
    return {code: tuple(fixes) for code, fixes in table.items()}


def is_fix_key(key: str) -> bool:
    """``GH203``, ``GH203:<signatures.csv row id>`` or ``GH205:<causes.csv id>`` (a slug: lower-case words joined by
    ``-``)."""
    code, colon, row = key.partition(":")
    slug = all(part and _SLUG.issuperset(part) for part in row.split("-"))
    return len(code) == 5 and code.startswith("GH") and code[2:].isdecimal() and (not colon or slug)


def _fix(row: dict[str, str], where: str) -> Fix:
    code, family, kind, command = row["code"], row["family"], row["kind"], row["command"]
    if not is_fix_key(code):
        raise ParseError(f"{where}: {code!r} is no check code (GH203, or GH203:<signatures.csv row id>)")
    if family not in _FAMILIES or kind not in FIX_KINDS or row["disruptive"] not in ("yes", "no"):
        raise ParseError(f"{where}: family, kind or disruptive is not one of the allowed values")
    if not command.strip() or "\n" in command or "`" in command:
        raise ParseError(f"{where}: a fix is one line without backticks")
    if kind == "command" and fix_kind(command) != "command":
        raise ParseError(f"{where}: {command!r} is not a command that runs as is (a known program, no placeholder)")
    if kind != "command" and len(command.split()) < 3:
        raise ParseError(f"{where}: a {kind} must say what to do in words, not {command!r}")
    disruptive = row["disruptive"] == "yes"
    if DISRUPTIVE_COMMAND.search(command) and not disruptive:
        raise ParseError(f"{where}: {command!r} reboots, unloads, resets, removes, restarts or holds every GPU: "
                         "disruptive=yes")
    return Fix(command, family, disruptive, row["note"], kind)


@functools.cache
def _rows_by_code() -> dict[str, list[dict[str, str]]]:
    # the rows pre-parsed in _tables/fixes.py while fixes.csv reads as when they were written (knowledge.table_rows)
    rows: dict[str, list[dict[str, str]]] = {}
    for row in table_rows("fixes.csv"):
        rows.setdefault(row.get("code") or "", []).append(row)
    return rows


@functools.cache
def fixes_of(code: str) -> tuple[Fix, ...]:
    """Check ``code``'s fixes from the table (none when it has no row). Only this code's rows are checked and
    built: a check's finding asks for its own (``registry.table_fixes``), and a run raises a few findings."""
    rows = _rows_by_code().get(code, [])
    return _fixes_from(rows, "fixes.csv").get(code, ()) if rows else ()


def check_fixes() -> dict[str, tuple[Fix, ...]]:
    """Every check code's fixes (for the docs and the tests), every row checked; a key ``GH203:<row id>`` holds the
    fixes for one decoded error."""
    return _fixes_from(table_rows("fixes.csv"), "fixes.csv")
