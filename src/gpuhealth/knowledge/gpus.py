"""NVIDIA PCI device IDs to GPU architecture and compute capability, from ``gpus.csv``.

Each row is an inclusive range of device IDs (vendor 10de) whose every listed device is named, in
pci.ids, after a chip of one architecture and one compute capability. Columns:

- ``first_id``, ``last_id``: 4 lower-case hex digits, inclusive. Rows never overlap.
- ``chips``: the pci.ids chip names in the range (``GA100``, ``GA102 GA104`` ...). The chip prefix gives
  the architecture: GF Fermi, GK Kepler, GM Maxwell, GP Pascal, GV Volta, TU Turing, GA Ampere,
  AD Ada, GH Hopper, GB Blackwell.
- ``architecture``, ``compute_capability`` (empty when unknown).
- ``source``: where the ID-to-chip mapping comes from (PCIIDS: the pci.ids excerpt of version 2026.08.22
  in ``tests/data/corpus/pciids``). ``cc_source``: where the compute capability comes from (CUDA release notes for
  Turing and newer; "not confirmed" for older chips, whose values are common knowledge only).

How the ranges were made: the vendor block of pci.ids was read in ID order; consecutive devices whose
chip name has the same architecture and compute capability form one range, and a device of another
architecture, or a name without a chip (chipsets, old Tesla-architecture parts), ends it. An ID that pci.ids
does not list yet but falls inside a range takes that range's answer; IDs outside every range are
unknown (``lookup`` returns None). HDMI audio and USB functions of a GPU share its chip name, so they fall
inside ranges too: callers look up display-class devices (class 03xx) only.

The file is read once, lazily (``knowledge.read_table``).
"""

from __future__ import annotations

import bisect
import functools
import re

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["ARCHITECTURES", "GpuModel", "all_rows", "device_id_for", "lookup", "model_names", "name_for",
           "normalize_device_id"]

# Oldest first: the order in which driver branches drop them.
ARCHITECTURES = ("Fermi", "Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper",
                 "Blackwell")

_DEVICE_ID = lazy_re(r"^(?:0x)?(?P<id>[0-9a-fA-F]{4})(?:10de)?$", re.IGNORECASE)


@record
class GpuModel:
    """What a device ID tells: the architecture and compute capability, and where they come from."""

    device_id: str  # 4 lower-case hex digits
    architecture: str
    compute_capability: str | None  # "8.0"; None when unknown
    chips: tuple[str, ...]  # pci.ids chip names of the range the ID falls in
    source: str
    cc_source: str

    @property
    def cc_confirmed(self) -> bool:
        return self.compute_capability is not None and not self.cc_source.startswith(("not confirmed", "unknown"))


@record
class GpuRange:
    first: int
    last: int
    chips: tuple[str, ...]
    architecture: str
    compute_capability: str | None
    cc_source: str
    source: str


def normalize_device_id(text: str | None) -> str | None:
    """``2330``, ``0x2330`` or nvidia-smi's ``0x233010DE`` -> ``2330``; None when not a device ID."""
    match = _DEVICE_ID.match((text or "").strip())
    return match["id"].lower() if match else None


def lookup(device_id: str | None) -> GpuModel | None:
    """The architecture of an NVIDIA PCI device ID, or None when it is in no range of the table."""
    key = normalize_device_id(device_id)
    if key is None:
        return None
    rows, firsts = _table()
    value = int(key, 16)
    at = bisect.bisect_right(firsts, value) - 1
    if at < 0 or value > rows[at].last:
        return None
    row = rows[at]
    return GpuModel(key, row.architecture, row.compute_capability, row.chips, row.source, row.cc_source)


def all_rows() -> tuple[GpuRange, ...]:
    """Every range, in ID order."""
    return _table()[0]


@functools.cache
def _table() -> tuple[tuple[GpuRange, ...], list[int]]:
    rows = []
    for number, row in enumerate(table_rows("gpus.csv"), start=2):
        if row["architecture"] not in ARCHITECTURES:
            raise ValueError(f"gpus.csv line {number}: unknown architecture {row['architecture']!r}")
        rows.append(GpuRange(
            first=int(row["first_id"], 16), last=int(row["last_id"], 16), chips=tuple(row["chips"].split()),
            architecture=row["architecture"], compute_capability=row["compute_capability"] or None,
            cc_source=row["cc_source"], source=row["source"]))
    rows.sort(key=lambda r: r.first)
    for before, after in zip(rows, rows[1:], strict=False):
        if before.last >= after.first or before.first > before.last:
            raise ValueError(f"gpus.csv: ranges {before.first:04x}-{before.last:04x} and "
                             f"{after.first:04x}-{after.last:04x} overlap or are reversed")
    return tuple(rows), [r.first for r in rows]


# ------------------------------------------------------------------ model names (gpu_names.csv)

MAX_NAME = 120  # the longest model name is under 60 characters; longer input is no name (and not scanned)
_NAME_NOISE = lazy_re(r"\b(?:nvidia|tesla|geforce)\b|[^a-z0-9]+")


def _name_key(name: str) -> str:
    return _NAME_NOISE.sub("", name.lower())


def _names_run(name: str, key: str) -> bool:
    """Whether ``key`` is a run of whole words of ``name`` ("a100" is in "A100-SXM4-40GB", not in "RTX A1000")."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in ("nvidia", "tesla", "geforce")]
    return any("".join(words[i:j]) == key for i in range(len(words)) for j in range(i + 1, len(words) + 1))


@functools.cache
def model_names() -> dict[str, tuple[str, str]]:
    """Name key -> (name as nvidia-smi or pci.ids prints it, device ID), from ``gpu_names.csv``.

    The table (made by tests/make_gpu_names.py) holds NVIDIA's product names with their PCI device IDs
    (open-gpu-kernel-modules README, Turing and newer), names from real nvidia-smi captures, and pci.ids
    model names for older GPUs. A name on several device IDs keeps its first row.
    """
    names: dict[str, tuple[str, str]] = {}
    for row in table_rows("gpu_names.csv"):
        names.setdefault(_name_key(row["name"]), (row["name"], row["device_id"]))
    return names


def name_for(device_id: str | None) -> str | None:
    """The model name of a PCI device ID (the first the name table gives it), or None."""
    key = normalize_device_id(device_id)
    if key is None:
        return None
    return next((shown for shown, found in model_names().values() if found == key), None)


def device_id_for(text: str) -> tuple[str | None, list[str]]:
    """A PCI ID (``10de:2330``, ``2330``) or a model name (``H100 80GB HBM3``) -> (device ID, candidates).

    A name matches exactly (ignoring case, spaces, punctuation, "NVIDIA"/"Tesla"/"GeForce"), so every name
    ``nvidia-smi -L`` prints resolves; else as the names that contain it, when they are all one
    architecture and compute capability (``4090`` is the desktop, laptop and D boards: one answer for
    recommend). ``candidates`` lists the names that matched when there is no single answer.
    """
    raw = text.strip()
    if len(raw) > MAX_NAME:
        return None, []
    match = re.fullmatch(r"(?i)(?:10de:|0x)([0-9a-f]{4})", raw)
    if match:
        return match[1].lower(), []
    key = _name_key(raw)
    names = model_names()
    if key in names:
        return names[key][1], []
    bare = _name_key(re.sub(r"(?i)\s*\d+\s*GB$", "", raw))  # "Tesla M40 24GB": nvidia-smi adds the memory size
    if bare != key and bare in names:
        return names[bare][1], []
    partial = [(shown, device) for shown, device in names.values() if key and _names_run(shown, key)]
    if not partial and re.fullmatch(r"(?i)[0-9a-f]{4}", raw):  # "2330": a bare device ID ("A100" is a name)
        return raw.lower(), []
    kinds = {(m.architecture, m.compute_capability) if m else None for m in (lookup(d) for _, d in partial)}
    if partial and len(kinds) == 1 and None not in kinds:
        return partial[0][1], []
    return None, sorted(shown for shown, _ in partial)
