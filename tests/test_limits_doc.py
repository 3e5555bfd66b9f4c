"""docs/limits.md promises each limit with the constant that enforces it: the two must say the same.

A row of a limits table whose "where" column names constants (`host.MAX_READ_BYTES`) and whose default begins
with a number (a size in KiB, MiB or GiB, a count, or seconds) is checked against each constant it names: a limit
changed in the code and not in the docs (or the other way round) fails here. Rows whose default is not one
number ("0 / 128 KiB", "`--timeout`") are not read.
"""

from __future__ import annotations

import importlib
import re

from conftest import REPO

LIMITS = REPO / "docs" / "limits.md"
UNITS = {"KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "s": 1, "": 1}
_CONSTANT = re.compile(r"`((?:[a-z_]+\.)+)([A-Z][A-Z0-9_]+)`")
_DEFAULT = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(KiB|MiB|GiB|s)?(?![\w/])")


def promised() -> list[tuple[str, str, float]]:
    """(module, constant, value) of each limits row that states one number for the constants it names."""
    rows = []
    for line in LIMITS.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-"}:
            continue
        default, where = cells[1], cells[-1]
        number = _DEFAULT.match(default)
        if number is None or " / " in default:
            continue
        value = float(number[1].replace(",", "")) * UNITS[number[2] or ""]
        rows += [(f"gpuhealth.{module.rstrip('.')}", name, value) for module, name in _CONSTANT.findall(where)]
    return rows


def test_every_limit_the_docs_state_is_the_codes():
    rows = promised()
    assert len(rows) >= 30  # the bundle, JSON, command, monitor and serve tables: not vacuous
    wrong = []
    for module, name, value in rows:
        actual = getattr(importlib.import_module(module), name, None)
        if actual is None or float(actual) != value:
            wrong.append(f"{module}.{name}: docs/limits.md says {value:g}, the code {actual!r}")
    assert wrong == []


def test_a_host_file_read_has_the_one_cap_the_docs_state():
    """One cap for every file a host (live or bundle) reads; the per-kind caps are those of the JSON documents."""
    from gpuhealth import bundle, host, limits

    rows = {(module, name): value for module, name, value in promised()}
    assert rows[("gpuhealth.host", "MAX_READ_BYTES")] == host.MAX_READ_BYTES == 64 * 1024 ** 2
    assert bundle.MAX_MEMBER_BYTES == max(host.MAX_READ_BYTES, host.MAX_OUTPUT_BYTES)
    for name in ("MAX_MANIFEST_BYTES", "MAX_NVML_JSON_BYTES", "MAX_ENV_JSON_BYTES", "MAX_SAVED_RUN_BYTES"):
        assert rows[("gpuhealth.limits", name)] == getattr(limits, name)
