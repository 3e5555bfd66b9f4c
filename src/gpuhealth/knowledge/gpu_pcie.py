"""Each GPU model's own PCIe link: the generation and width it can train at, from NVIDIA's documents.

``gpu_pcie.csv`` columns:

- ``pattern``: a regular expression searched (case-insensitively) in a person's words naming the model
  ("4x H100 80GB PCIe", "a Tesla T4"); rows are tried in order, so specific patterns come first.
- ``name``: the model's name as NVIDIA writes it.
- ``pcie_gen``, ``pcie_width``: the generation and width of the board's host interface.
- ``source``: the NVIDIA document (its title and address) that gives them, and what it says. A board whose
  generation and width no NVIDIA document could be shown to state has no row: a wrong value here turns a
  healthy link stated in words into a finding.

Read once, lazily. A PCIe link stated in words ("stuck at Gen2 x16") is judged against these (evidence/prose.py).
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

MAX_TEXT = 200_000  # the words searched for a model name


@record
class BoardLink:
    pattern: str
    name: str
    pcie_gen: int
    pcie_width: int
    source: str


@functools.cache
def table() -> tuple[tuple[re.Pattern[str], BoardLink], ...]:
    return tuple((lazy_re(row["pattern"], re.IGNORECASE),
                  BoardLink(row["pattern"], row["name"], int(row["pcie_gen"]), int(row["pcie_width"]), row["source"]))
                 for row in table_rows("gpu_pcie.csv"))


def boards_named(text: str) -> tuple[BoardLink, ...]:
    """The models of the table that ``text`` names, each once, in the table's order; a name matched by an earlier
    (more specific) row is not counted again."""
    if not isinstance(text, str):
        return ()
    rest = text[:MAX_TEXT]
    found: list[BoardLink] = []
    for pattern, board in table():
        if pattern.search(rest):
            found.append(board)
            rest = pattern.sub(" ", rest)
    return tuple(found)
