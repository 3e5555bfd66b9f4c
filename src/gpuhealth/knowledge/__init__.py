"""Tables of sourced facts (Xid catalogue, tool error messages); each row names its source."""

from __future__ import annotations

import importlib
import os


def read_table(name: str) -> str:
    """One of this package's data files as text (UTF-8, universal newlines, as importlib.resources reads it).

    Read from beside this module, where an installed or checked-out package keeps it. importlib.resources is
    used only when that fails (a package inside a zip): importing it brings zipfile and tempfile, which cost
    every command's start-up.
    """
    try:
        with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        from importlib import resources

        return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")



def table_rows(name: str) -> list[dict[str, str]]:
    """The rows of one of this package's ``.csv`` tables, as ``csv.DictReader`` gives them (fresh dicts).

    A table is not parsed at each start-up: its rows come pre-parsed from ``_tables/<name>.py`` (written by
    ``write_tables``, bytecode compiled with the package) while the table still reads as it did when that
    was written; a table that does not is parsed here (tests/test_knowledge.py checks that they are current).
    Parsing the tables was ~4 % of ``check``'s instructions and ~8 % of ``analyze``'s (signatures.csv: 139 KB).
    """
    text = read_table(name)
    try:
        cached = importlib.import_module(f"{__name__}._tables.{name.removesuffix('.csv')}")
    except ImportError:  # a table added since: parsed below
        cached = None
    if cached is not None and cached.TEXT == text and hasattr(cached, "ROWS"):
        header = cached.HEADER
        return [dict(zip(header, row, strict=True)) for row in cached.ROWS]
    return csv_rows(text)


def csv_rows(text: str) -> list[dict[str, str]]:
    """``list(csv.DictReader(io.StringIO(text)))``."""
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def table_source(name: str) -> str | None:
    """The text of ``_tables/<name>.py`` for one of this package's tables: its text, header and rows, and for
    ``signatures.csv`` the required literals of every pattern (``signatures.required_literals``). None for a
    table with a row of more cells than its header has (``csv.DictReader`` keeps those under the key None)."""
    rows = csv_rows(read_table(name))
    header = tuple(rows[0]) if rows else ()
    if not rows or any(tuple(row) != header for row in rows):
        return None
    lines = [f'"""Written by gpuhealth.knowledge.write_tables(): {name} pre-parsed (see knowledge.table_rows).',
             'Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""',
             "# ruff: noqa", "# fmt: off", "", f"TEXT = {read_table(name)!r}", "", f"HEADER = {header!r}"]
    if name != "signatures.csv":  # (its catalogue is written read, below: nothing asks for its rows)
        lines += ["", "ROWS = ("]
        lines += [f"    {tuple(row.values())!r}," for row in rows]
        lines.append(")")
    else:
        import dataclasses

        from gpuhealth.knowledge.signatures import parse_catalogue, required_literals

        catalogue = parse_catalogue(rows)
        lines += ["", "# the rows as signatures.parse_catalogue reads them: Signature's fields in order",
                  "SIGNATURES = ("]
        lines += [f"    {dataclasses.astuple(sig)!r}," for sig in catalogue]
        lines.append(")")
        patterns = dict.fromkeys(sig.pattern for sig in catalogue)
        lines += ["", "# each pattern's required literals (signatures.required_literals)", "LITERALS = {"]
        lines += [f"    {pattern!r}: {required_literals(pattern)!r}," for pattern in patterns]
        lines.append("}")
    return "\n".join(lines) + "\n"


def table_names() -> list[str]:
    return sorted(n for n in os.listdir(os.path.dirname(__file__)) if n.endswith(".csv"))


def write_tables() -> list[str]:
    """Write ``_tables/`` afresh from the tables (``make tables``); the files written."""
    target = os.path.join(os.path.dirname(__file__), "_tables")
    os.makedirs(target, exist_ok=True)
    for old in os.listdir(target):
        if old.endswith(".py") and old != "__init__.py":
            os.remove(os.path.join(target, old))
    with open(os.path.join(target, "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write('"""The package\'s tables pre-parsed, one module per table (knowledge.table_rows)."""\n')
    written = []
    for name in table_names():
        source = table_source(name)
        if source is not None:
            path = os.path.join(target, name.removesuffix(".csv") + ".py")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(source)
            written.append(path)
    return written

