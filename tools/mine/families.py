"""Which family a mined driver message belongs to: the first row of knowledge/mined_families.csv (hand-written, each
row cited to the driver source it was read from) whose components include the message's and whose words match it.
The last row (no components, no words) takes every message the others leave."""

from __future__ import annotations

import csv
import functools
import os
import re

FAMILIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "gpuhealth", "knowledge",
                        "mined_families.csv")


@functools.lru_cache(maxsize=1)
def _rules(table: str) -> tuple[tuple[str, frozenset[str], re.Pattern[str] | None], ...]:
    with open(table, encoding="utf-8", newline="") as handle:
        return tuple((row["family"], frozenset(filter(None, row["components"].split("|"))),
                      re.compile(row["words"]) if row["words"] else None) for row in csv.DictReader(handle))


def _prefixed(component: str, components: frozenset[str]) -> bool:
    """A component written "device-plugin-*" takes every component that starts so (a program's library packages)."""
    return any(c.endswith("*") and component.startswith(c[:-1]) for c in components)


def family_of(component: str, path: str, fmt: str, table: str = FAMILIES) -> str:
    """``table``: the families' CSV (the driver's by default; the container stack and installer have their own)."""
    for family, components, words in _rules(table):
        if (not components or component in components or _prefixed(component, components)) and (
                words is None or words.search(fmt)):
            return family
    raise ValueError(f"no family for {component} {path}: the last row of {table} must take every message")
