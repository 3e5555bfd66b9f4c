"""The last driver branch that supports each NVIDIA GPU, by PCI device ID: ``legacy_gpus.csv``, then the architecture.

``legacy_gpus.csv`` (generated: ``make mine-legacy SUPPORTED_GPUS=PATH`` runs ``tools/mine/mine_legacy_gpus.py``;
edit the miner, never the table; tests/test_legacy_branches.py regenerates and compares where the JSON is present)
lists every device ID whose last branch NVIDIA names in its driver package (``supported-gpus.json``, the README's
"Appendix A. Supported NVIDIA GPU Products"):
the 71.86.xx, 96.43.xx, 173.14.xx, 304.xx, 340.xx, 367.xx (GRID K1, K2, K340), 390.xx and 470.xx legacy branches.
A device ID not in it takes its architecture's last branch (``drivers.csv`` ``last_branch``, from
``gpus.csv``'s ranges): 580 for Maxwell, Pascal and Volta (NVIDIA's deprecation schedule: "the release 580 series
will be the last to support GPUs based on the Maxwell, Pascal, and Volta architectures"). No answer: a GPU that
today's branches support, or a device ID nobody here knows.

GPU names (:func:`devices_named`): NVIDIA's product names of ``legacy_gpus.csv`` ("GeForce 9800 GTX/9800 GTX+" is
two names) and the names of ``gpu_names.csv`` (pci.ids and nvidia-smi names), each to the device IDs it names;
only device IDs that have a last branch are indexed, since only those can be too old for a driver. A model named
without its board ("K40", "Tesla P100") names every board NVIDIA's names add a letter or a form to (K40c, K40m;
P100-PCIE-16GB, P100-SXM2-16GB).
"""

from __future__ import annotations

import bisect
import functools

from gpuhealth.knowledge import table_rows
from gpuhealth.records import record

__all__ = ["LastBranch", "branch_number", "devices_keyed", "devices_named", "last_branch", "name_key", "name_keys",
           "name_starts", "word_key"]


@record
class LastBranch:
    device_id: str  # 4 lower-case hex digits
    label: str  # as NVIDIA writes the branch: "340.xx", "71.86.xx"
    number: int  # the branch's major version: 340, 71
    name: str | None  # NVIDIA's product name for the device ID, when the table gives one
    basis: str  # "device": the device ID's own row; "architecture": its architecture's last branch
    source: str  # the table's source column (document keys: knowledge.sources.cite)


def branch_number(label: str) -> int | None:
    """``340.xx`` -> 340, ``71.86.xx`` -> 71; None when the label is not a branch."""
    head = label.strip().split(".")[0]
    return int(head) if head.isdigit() and len(head) <= 3 else None


def last_branch(device_id: str | None) -> LastBranch | None:
    """The last driver branch that supports an NVIDIA PCI device ID; None when a current branch does (or unknown)."""
    from gpuhealth.knowledge.gpus import lookup, normalize_device_id

    key = normalize_device_id(device_id)
    if key is None:
        return None
    row = _table().get(key)
    if row is not None:
        return row
    model = lookup(key)
    if model is None:
        return None
    from gpuhealth.knowledge.drivers import architecture

    arch = architecture(model.architecture)
    if arch is None or arch.last_branch is None:
        return None
    return LastBranch(key, f"{arch.last_branch}.xx", arch.last_branch, None, "architecture",
                      arch.sources.get("last_branch", ""))


@functools.cache
def _table() -> dict[str, LastBranch]:
    rows: dict[str, LastBranch] = {}
    for number, row in enumerate(table_rows("legacy_gpus.csv"), start=2):
        branch = branch_number(row["last_branch"])
        if branch is None or not row["last_branch"].endswith(".xx") or len(row["device_id"]) != 4:
            raise ValueError(f"legacy_gpus.csv line {number}: bad row {row!r}")
        if row["device_id"] in rows:
            raise ValueError(f"legacy_gpus.csv line {number}: device ID {row['device_id']} appears twice")
        if not row["source"].strip():
            raise ValueError(f"legacy_gpus.csv line {number}: no source")
        rows[row["device_id"]] = LastBranch(row["device_id"], row["last_branch"], branch, row["name"] or None,
                                            "device", row["source"])
    return rows


def name_keys(name: str) -> list[str]:
    """The name keys of one table name: NVIDIA writes boards that share a device ID as one name with slashes
    ("GeForce 9800 GTX/9800 GTX+", "Quadro FX 330/GeForce PCX 5300"); each part is a name, and a part that is only
    a model number takes the family words of the first ("GeForce 6600 LE/6600" -> "GeForce 6600")."""
    parts = [p.split() for p in name.split("/") if p.strip()]
    if not parts:
        return []
    family = [w for w in parts[0][:-1] if not w[:1].isdigit()] if len(parts[0]) > 1 else []
    keys = []
    for words in parts:
        if family and words[0][:1].isdigit():
            words = family + words
        key = name_key(" ".join(words))
        if key and key not in keys:
            keys.append(key)
    return keys


def name_key(text: str) -> str:
    """A name's key: its words' keys joined (case, spaces, punctuation and NVIDIA/GeForce/Tesla ignored)."""
    return "".join(word_key(w) for w in text.split())


def _names() -> dict[str, tuple[str, ...]]:
    """Name key -> the device IDs (that have a last branch) it names."""
    return _index()[0]


def name_starts() -> frozenset[str]:
    """The keys of the words a name can start with (after NVIDIA, GeForce, Tesla): "9800", "gtx", "quadro", "k80"."""
    return _index()[1]


@functools.cache
def _index() -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    """The name index and the keys of the words names start with, built once, from both name tables."""
    from gpuhealth.knowledge.gpus import all_rows

    index: dict[str, list[str]] = {}
    starts: set[str] = set()

    def add(name: str, device: str) -> None:
        for key in name_keys(name):
            for each in (key, *_aliases(key)):
                if device not in index.setdefault(each, []):
                    index[each].append(device)
        for part in name.split("/"):
            for word in part.split()[:3]:
                key = word_key(word)
                starts.add(key)
                starts.add(_without_board(key))  # "K40m" starts a name; so does "K40", its model without the board

    for device, row in _table().items():
        add(row.name or "", device)
    # gpus.csv ranges of an architecture that has a last branch (Fermi to Volta): their names count too
    ended = [(r.first, r.last) for r in all_rows() if _architecture_ends(r.architecture)]
    for row in table_rows("gpu_names.csv"):
        device = row["device_id"]
        if device in _table() or (len(device) == 4 and _in_ranges(int(device, 16), ended)):
            add(row["name"], device)
    starts.discard("")
    return {key: tuple(devices) for key, devices in index.items()}, frozenset(starts)


# The series words people leave out ("a 1080 Ti", "my K2000"): a key without them still names the board when what is
# left has letters and digits (a bare number, "770", names nothing).
_SERIES = ("gtx", "gts", "gt", "quadro", "nvs")


def _aliases(key: str) -> tuple[str, ...]:
    for series in _SERIES:
        rest = key.removeprefix(series)
        if rest != key and any(c.isdigit() for c in rest) and any(c.isalpha() for c in rest):
            return (rest,)
    return ()


def _architecture_ends(name: str) -> bool:
    from gpuhealth.knowledge.drivers import architecture

    arch = architecture(name)
    return arch is not None and arch.last_branch is not None


def _in_ranges(value: int, ranges: list[tuple[int, int]]) -> bool:
    return any(first <= value <= last for first, last in ranges)


def devices_named(text: str) -> tuple[str, ...]:
    """The device IDs (with a last branch) whose name is ``text`` (ignoring case, spaces, punctuation and the words
    NVIDIA, GeForce, Tesla): ``9800GTX+`` -> the 9800 GTX and GTX+ boards; () when no such GPU has that name."""
    from gpuhealth.knowledge.gpus import MAX_NAME

    if len(text) > MAX_NAME:
        return ()
    return devices_keyed(name_key(text))


_NOISE_WORDS = frozenset({"nvidia", "tesla", "geforce"})


# ASCII punctuation and blanks dropped from a key (str.translate: a table lookup per character, no per-character Python)
_DROP = str.maketrans("", "", "".join(chr(c) for c in range(128) if not chr(c).isalnum()))


def word_key(word: str) -> str:
    """One word's part of a name key (gpus._name_key applied to a single word, without a regular expression)."""
    lowered = word.lower()
    return "" if lowered in _NOISE_WORDS else lowered.translate(_DROP)


def devices_keyed(key: str) -> tuple[str, ...]:
    """The device IDs (with a last branch) a name key names (``9800gtx``); a model named without its board letter or
    form (``k40`` for the K40c, K40m, K40s and K40t; ``p100`` for the P100-PCIE-16GB and P100-SXM2-16GB) names every
    such board."""
    if not key:
        return ()
    return _names().get(key) or _boards_of(key)


# What NVIDIA's names add to a model for its boards: a letter or two (K40c, K40m, K40st, K20Xm), a form and memory
# (P100-PCIE-16GB, V100-SXM2-32GB, V100-DGXS-32GB, V100-FHHL-16GB) or the memory alone (Tesla M40 24GB)
_BOARD = ("pcie", "sxm", "dgxs", "fhhl", "smx")
MAX_BOARDS = 24


def _is_board(rest: str) -> bool:
    if 1 <= len(rest) <= 2 and rest.isalpha():
        return True
    return rest.startswith(_BOARD) or (rest.endswith("gb") and rest[:-2].isdigit())


def _without_board(key: str) -> str:
    """``k40m`` -> ``k40``, ``p100pcie16gb`` -> ``p100``: a key without the board part NVIDIA's name adds."""
    for form in _BOARD:
        at = key.find(form, 1)
        if at > 0 and key[at - 1].isdigit():
            return key[:at]
    if key[-1:].isalpha() and key[-3:-2].isdigit() and key[-2:-1].isalpha():
        return key[:-2]
    if key[-1:].isalpha() and key[-2:-1].isdigit():
        return key[:-1]
    return key


def _boards_of(key: str) -> tuple[str, ...]:
    """The device IDs of the boards of the model ``key`` names (its key and a board part): () unless the key is a
    model number (letters and digits, ending in a digit)."""
    if len(key) < 3 or not key[-1].isdigit() or not any(c.isalpha() for c in key):
        return ()
    keys = _sorted_keys()
    found: list[str] = []
    at = bisect.bisect_left(keys, key)
    while at < len(keys) and keys[at].startswith(key) and len(found) < MAX_BOARDS:
        if _is_board(keys[at][len(key):]):
            found += [d for d in _names()[keys[at]] if d not in found]
        at += 1
    return tuple(found)


@functools.cache
def _sorted_keys() -> list[str]:
    return sorted(_names())
