"""Which NVIDIA driver a CUDA toolkit needs, from ``cuda_drivers.csv``
(NVIDIA's CUDA release notes and CUDA Compatibility guide).

Two kinds of row, each with its source:

- ``toolkit``: the Linux x86_64 driver bundled with each toolkit release (GA, Update N); a toolkit's
  version only names its minor release reliably (``12.4.131`` does not say which update), so the
  judgement uses the GA row, the lowest driver of that minor release.
- ``family``: minor-version compatibility (CUDA 11 and newer): any toolkit of the major family runs,
  with a limited feature set, on a driver meeting the family's minimum (12.x: >= 525). Before CUDA 11
  a toolkit needs its bundled driver.

Backward compatibility is the other rule: anything built with an older toolkit runs on a newer driver.
The file is read once, lazily (``knowledge.read_table``).
"""

from __future__ import annotations

import functools

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["DriverRequirement", "families", "family_minimum", "minor_releases", "requirement", "version_key"]


@record
class DriverRequirement:
    cuda: str  # "12.4" or the family "12"
    release: str  # "GA", "Update 1", "" for a family row
    driver_min: str
    note: str
    source: str


_VERSION = lazy_re(r"\d{1,9}(?:\.\d{1,9})*")


def version_key(version: str | None) -> tuple[int, ...]:
    """``535.161.08`` -> (535, 161, 8); ``12.4`` -> (12, 4); anything without a number -> ()."""
    match = _VERSION.match((version or "").strip())
    return tuple(int(n) for n in match[0].split(".")) if match else ()


@functools.cache
def _rows() -> tuple[DriverRequirement, ...]:
    return tuple(
        DriverRequirement(row["cuda"], row["release"] or ("" if row["kind"] == "family" else "GA"),
                          row["driver_min"], row["note"], row["source"])
        for row in table_rows("cuda_drivers.csv"))


def family_minimum(cuda_version: str | None) -> DriverRequirement | None:
    """The minor-version-compatibility minimum for a toolkit's major family (CUDA 11+), or None."""
    key = version_key(cuda_version)
    if not key:
        return None
    return next((r for r in _rows() if not r.release and r.cuda == str(key[0])), None)


def requirement(cuda_version: str | None) -> DriverRequirement | None:
    """The driver bundled with the GA release of this toolkit's minor version (``12.4.131`` -> 12.4 GA:
    550.54.14), or None for a version the table does not list."""
    key = version_key(cuda_version)
    if len(key) < 2:
        return None
    minor = f"{key[0]}.{key[1]}"
    rows = [r for r in _rows() if r.release and r.cuda == minor]
    ga = [r for r in rows if r.release == "GA"]
    if not (ga or rows):
        return None
    return min(ga or rows, key=lambda r: version_key(r.driver_min))


def families() -> tuple[DriverRequirement, ...]:
    """The minor-version-compatibility rows (CUDA 11, 12, 13), oldest family first."""
    return tuple(sorted((r for r in _rows() if not r.release), key=lambda r: version_key(r.cuda)))


@functools.cache
def minor_releases() -> tuple[DriverRequirement, ...]:
    """One row per toolkit minor version, the one :func:`requirement` judges by (its GA), oldest first (worked out once:
    the checks ask for it several times a run, and each time it scanned the table once per minor version)."""
    minors = dict.fromkeys(r.cuda for r in sorted(_rows(), key=lambda r: version_key(r.cuda)) if r.release)
    return tuple(row for minor in minors if (row := requirement(minor)) is not None)


def cuda_of_driver(driver: str | None) -> str | None:
    """The CUDA release a driver is bundled with (560.35 -> 12.6: 12.6 Update 1 bundles 560.35.03), else the newest
    release whose GA driver it reaches; None below every release the table lists."""
    key = version_key(driver)
    if not key:
        return None
    exact = [r for r in _rows() if r.release and version_key(r.driver_min)[:len(key)] == key]
    if exact:
        return max(exact, key=lambda r: version_key(r.cuda)).cuda
    reached = [r for r in _rows() if r.release == "GA" and version_key(r.driver_min) <= key]
    return max(reached, key=lambda r: version_key(r.cuda)).cuda if reached else None
