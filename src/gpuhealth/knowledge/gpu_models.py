"""GPU models by product line, from ``gpu_models.csv`` (read on first use): the one table the reader of GPUs named in
words and in program output (parsers/gpu_mentions.named_gpus) and the checks that depend on the product line use.

A row is one model or family and how text names it (``match``, searched any case, bounded by the reader):

- ``line``: the product line of NVIDIA's CUDA GPUs list (developer.nvidia.com/cuda-gpus): ``geforce`` (GeForce and
  TITAN), ``workstation`` (NVIDIA RTX and Quadro), ``datacenter`` (Tesla and the data-center A/H/L/B parts);
- ``form``: ``sxm`` (a baseboard's module), ``pcie`` (a card), empty where the name is both (a bare "A100");
- ``cooling``: ``passive`` for the data-center cards with no fan of their own (their product briefs: a passive heat
  sink that needs the server's airflow);
- ``board``: the NVSwitch baseboard eight of them make (the platform of nvswitch_platforms.csv), if any;
- ``alone``: ``no`` for a short name ("T4", "A10", "H20") that names a GPU only beside NVIDIA/Tesla, a count or
  the word GPU.

Rows are searched in order: a model's specific forms ("A100 PCIe") stand before its bare name ("A100").
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["HINTS", "LINES", "GpuModel", "model_named", "models", "pattern"]

LINES = ("geforce", "workstation", "datacenter")
FORMS = ("sxm", "pcie", "")

# Literal words one of which every row's name holds (lower case): a text holding none names no model, and costs a few
# substring tests, not a search (tests/test_startup.py: a prefilter before any regex). ``models`` refuses a row
# whose pattern spells none of them.
HINTS = ("rtx", "gtx", "geforce", "titan", "quadro", "a100", "a800", "h100", "h800", "h200", "h20", "b200", "b300",
         "v100", "t4", "p4", "p100", "m4", "m60", "k40", "k80", "a2", "a10", "a16", "a30", "a40", "l4", "l20")


@record
class GpuModel:
    model: str
    line: str
    form: str
    passive: bool
    board: str
    alone: bool
    source: str


@functools.cache
def models() -> tuple[GpuModel, ...]:
    out = []
    for row in table_rows("gpu_models.csv"):
        match = row["match"].strip()
        if (row["line"] not in LINES or row["form"] not in FORMS or row["alone"] not in ("yes", "no")
                or not row["source"].strip() or not any(h in match.lower() for h in HINTS)):
            raise ValueError(f"gpu_models.csv: a row names a model, a match spelling one of HINTS, its line {LINES}, "
                             f"its form {FORMS}, alone yes/no and its source: {row}")
        out.append(GpuModel(row["model"].strip(), row["line"], row["form"], row["cooling"] == "passive",
                            row["board"].strip(), row["alone"] == "yes", row["source"].strip()))
    return tuple(out)


@functools.cache
def pattern() -> re.Pattern[str]:
    """One pattern of every row, each its own group ``r<i>``, bounded so that a name is a whole word ("p4d.24xlarge",
    "a2-highgpu" and "H200" hold no P4, A2 or H20); a plural "s" ("8 H20s", "A100's") is part of the name."""
    rows = [row["match"].strip() for row in table_rows("gpu_models.csv")]
    alternatives = "|".join(f"(?P<r{i}>{match})" for i, match in enumerate(rows))
    # every name starts with one of these letters: a position at any other is passed over before the alternatives
    # bounded by Latin letters and digits only: Chinese text names a model with no space ("8张H20显卡")
    return lazy_re(r"(?<![A-Za-z0-9_.-])(?=[abghklmnpqrtv])(?:" + alternatives + r")(?:'?s)?(?![A-Za-z0-9_-])",  # type: ignore[return-value]
                   re.IGNORECASE)


def model_named(name: str) -> GpuModel | None:
    """The row of a GPU name as a program prints it ("Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 3090");
    None for a name no row knows."""
    text = name[:200]
    lowered = text.lower()
    if not any(h in lowered for h in HINTS):
        return None
    found = pattern().search(text)
    if found is None:
        return None
    return models()[int(found.lastgroup[1:])] if found.lastgroup else None  # type: ignore[index]
