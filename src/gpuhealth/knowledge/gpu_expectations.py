"""Per-model defaults for what a healthy GPU shows: active NVLinks and PCIe link width.

``gpu_expectations.csv`` columns:

- ``pattern``: a regular expression searched (case-insensitively) in the product name as nvidia-smi
  and NVML print it (``NVIDIA H100 80GB HBM3``, ``A100-SXM4-40GB``, ``Tesla V100-SXM2-32GB``). Rows are
  tried in order; the first match wins, so specific patterns come first.
- ``nvlink_count``: active NVLinks per GPU on that board (empty: no default).
- ``pcie_width``: the PCIe link width the board should train at (empty: no default).
- ``source``: the real capture in ``tests/data/corpus`` that shows the value for that model.

The config file overrides any value per model name (docs/configuration.md). Read once, lazily.
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import guarded_re, has_folded, lazy_re
from gpuhealth.records import record


@record
class ModelDefaults:
    pattern: str
    nvlink_count: int | None
    pcie_width: int | None
    source: str

    def get(self, key: str) -> int | None:
        return {"nvlink_count": self.nvlink_count, "pcie_width": self.pcie_width}.get(key)


@functools.cache
def table() -> tuple[tuple[re.Pattern[str], ModelDefaults], ...]:
    rows = []
    for row in table_rows("gpu_expectations.csv"):
        defaults = ModelDefaults(
            pattern=row["pattern"],
            nvlink_count=int(row["nvlink_count"]) if row["nvlink_count"] else None,
            pcie_width=int(row["pcie_width"]) if row["pcie_width"] else None,
            source=row["source"],
        )
        rows.append((_pattern(row["pattern"]), defaults))
    return tuple(rows)


_SPECIAL = frozenset("\\.^$*+?{}[]|()")


def _pattern(pattern: str) -> re.Pattern[str]:
    """A row's pattern, compiled when first needed; one that is plain text (with ``^``/``$`` at most) is
    compiled only for a name that contains that text (most rows name other models)."""
    text = pattern.removeprefix("^").removesuffix("$")
    if text and text.isascii() and not _SPECIAL.intersection(text):
        return guarded_re(pattern, re.IGNORECASE, may=has_folded(text.lower()))
    return lazy_re(pattern, re.IGNORECASE)


def lookup(name: str | None) -> ModelDefaults | None:
    """The first row whose pattern matches the product name, or None."""
    if not name:
        return None
    return next((defaults for pattern, defaults in table() if pattern.search(name.strip())), None)
