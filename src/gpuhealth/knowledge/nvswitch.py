"""Platforms whose GPUs talk through NVSwitch, from ``nvswitch_platforms.csv`` (read on first use).

On such a system CUDA does not start until Fabric Manager has set the NVSwitches up (NVIDIA Fabric Manager User
Guide): a program that cannot initialise CUDA there has Fabric Manager not running among its likeliest causes,
and nowhere else. A row is one platform and how evidence names it (``kind``):

- ``gpu``: a GPU name as nvidia-smi prints it ("NVIDIA A100-SXM4-80GB"), counted: only ``min_gpus`` or more GPUs
  of that name make the platform (the 4-GPU HGX boards join their SXM GPUs without NVSwitch).
- ``system``: a system's name (a DMI product name, "DGXA100 920-23687-2531-001"; "DGX H100", "HGX A100").
- ``instance``: a cloud instance type ("p4d.24xlarge", "Standard_ND96asr_v4", "a2-highgpu-8g", "BM.GPU4.8").

Each row cites the guide's list of NVSwitch systems or the cloud vendor's page for the instance type.
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["KINDS", "NvswitchRow", "gpus_on_nvswitch", "named_nvswitch_platform", "rows"]

KINDS = ("gpu", "system", "instance")
MAX_TEXT = 200_000  # a name is searched in at most this much of one text (a longer paste: its head)


@record
class NvswitchRow:
    platform: str
    kind: str
    pattern: object  # a lazy_re pattern, searched any case
    min_gpus: int
    source: str


@functools.cache
def rows() -> tuple[NvswitchRow, ...]:
    out = []
    for row in table_rows("nvswitch_platforms.csv"):
        platform, kind, match = row["platform"].strip(), row["kind"].strip(), row["match"].strip()
        if not platform or kind not in KINDS or not match or not row["source"].strip():
            raise ValueError(f"nvswitch_platforms.csv: a row names a platform, its kind {KINDS}, a match and "
                             f"its source: {row}")
        count = row["min_gpus"].strip()
        if kind == "gpu" and not count.isdigit():
            raise ValueError(f"nvswitch_platforms.csv: a gpu row says how many GPUs make the platform: {row}")
        if kind != "gpu" and not any(hint in match.lower().replace("\\", "") for hint in HINTS):
            raise ValueError(f"nvswitch_platforms.csv: a {kind} row's match spells none of HINTS: {row}")
        out.append(NvswitchRow(platform, kind, lazy_re(match, re.IGNORECASE), int(count) if count else 0,
                               row["source"].strip()))
    return tuple(out)


# Words one of which every system and instance name holds (lower case): a text holding none names no platform, and
# costs a few substring tests, not a search per row (the rows' patterns, searched case-blind over a 73 KB nvidia-smi
# -q, were 30 ms of analyze). ``rows`` refuses a system or instance row whose pattern spells none of them.
HINTS = ("dgx", "hgx", "gx-2", "xlarge", "nd96", "a2-", "a3-", "bm.gpu")


def named_nvswitch_platform(text: str) -> tuple[NvswitchRow, str] | None:
    """The first system or instance row whose name ``text`` holds, and the name as written; None when none."""
    text = text[:MAX_TEXT]
    lowered = text.lower()
    if not any(hint in lowered for hint in HINTS):
        return None
    for row in rows():
        if row.kind == "gpu":
            continue
        found = row.pattern.search(text)  # type: ignore[attr-defined]
        if found:
            return row, found.group(0)
    return None


def gpus_on_nvswitch(names: list[str] | tuple[str, ...]) -> tuple[NvswitchRow, str] | None:
    """The gpu row that ``names`` (every GPU nvidia-smi lists, one name each) make: at least its ``min_gpus`` GPUs
    of its name. None for fewer (a 4-GPU board, a VM given part of the board, a partial listing) or other GPUs."""
    for row in rows():
        if row.kind != "gpu":
            continue
        matching = [name for name in names if row.pattern.search(name[:200])]  # type: ignore[attr-defined]
        if matching and len(matching) >= row.min_gpus:
            return row, f"{len(matching)} x {matching[0].strip()}"
    return None
