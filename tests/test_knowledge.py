"""The package's tables pre-parsed (knowledge/_tables/, read by knowledge.table_rows): current, and the same
rows as parsing the table."""

from __future__ import annotations

import os

import pytest

import gpuhealth.knowledge as knowledge
from gpuhealth.knowledge import csv_rows, read_table, table_names, table_rows, table_source

TABLES = os.path.join(os.path.dirname(knowledge.__file__), "_tables")


def test_the_written_tables_are_current():
    """Rewrite them with `make tables` when a table changes."""
    written = sorted(n for n in os.listdir(TABLES) if n.endswith(".py") and n != "__init__.py")
    expected = []
    for name in table_names():
        source = table_source(name)
        if source is None:
            continue
        module = name.removesuffix(".csv") + ".py"
        expected.append(module)
        with open(os.path.join(TABLES, module), encoding="utf-8") as handle:
            assert handle.read() == source, f"knowledge/_tables/{module} is stale: run `make tables`"
    assert written == expected
    assert "signatures.py" in written and "xid.py" in written


@pytest.mark.parametrize("name", table_names())
def test_a_table_reads_as_parsing_it_would(name: str):
    rows = table_rows(name)
    assert rows == csv_rows(read_table(name)) and rows
    assert table_rows(name) is not rows and table_rows(name)[0] is not rows[0]  # fresh dicts: callers may change them


def test_a_table_that_changed_since_it_was_written_is_parsed(monkeypatch: pytest.MonkeyPatch):
    text = read_table("xid.csv")
    changed = text.replace("\n1,", "\n1,CHANGED_", 1)
    assert changed != text
    monkeypatch.setattr(knowledge, "read_table", lambda name: changed if name == "xid.csv" else text)
    rows = table_rows("xid.csv")
    assert rows == csv_rows(changed) and rows[0]["mnemonic"].startswith("CHANGED_")


def test_a_table_without_a_written_copy_is_parsed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(knowledge, "read_table", lambda name: "a,b\n1,2\n3\n")
    assert table_rows("new-table.csv") == [{"a": "1", "b": "2"}, {"a": "3", "b": None}]


def test_every_signature_patterns_literals_are_written_as_worked_out():
    from gpuhealth.knowledge._tables import signatures as written
    from gpuhealth.knowledge.signatures import required_literals, signatures

    assert {sig.pattern for sig in signatures()} <= set(written.LITERALS)
    for pattern, literals in written.LITERALS.items():
        assert literals == required_literals(pattern)
