"""Errors of the CUDA and NVML APIs, NCCL and DCGM, mined from their sources (``mined/api_errors.csv``).

``tools/mine/mine_api.py`` writes one row per documented error: the CUDA driver and runtime enums with their
documentation (CUDA Toolkit headers), NVML's return codes with their texts (nvidia-ml-py), NCCL's ``WARN`` format
strings (NVIDIA/nccl at pinned tags) and DCGM's ``DCGM_FR_*`` failure codes with their message and suggested action
(NVIDIA/DCGM). ``tools/mine/api_causes.csv`` (hand-written, cited) gives the check and symptom a row points to.
docs/mined-messages.md says how to regenerate it.

``lookup`` is the only entry point for ``analyze``: a line that names no such API (``mentions_api``) costs one regular
expression; the table is read on the first line that does (lazily, once) and indexed by enum name and by the longest
fixed word of NCCL's and DCGM's messages.
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import read_table
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

TABLE = "mined/api_errors.csv"
COLUMNS = ("id", "api", "name", "number", "key", "text", "pattern", "code", "symptom", "cause", "decides", "action",
           "source", "file", "line", "first_tag", "last_tag")
REPORTERS = {"cuda-driver": "the CUDA driver API", "cuda-runtime": "the CUDA runtime API", "nvml": "NVML",
             "nccl": "NCCL", "dcgm": "DCGM", "pytorch": "PyTorch"}
DOCS = {"cuda-driver": "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html",
        "cuda-runtime": "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
        "nvml": "https://pypi.org/project/nvidia-ml-py/"}

# A line worth looking up: it names a CUDA, NVML or DCGM error code, is an NCCL warning, or may be one of PyTorch's
# CUDA initialisation messages (each names cuda, libcudart, torch or the NVIDIA driver; the table is read once, then
# indexed).
_MENTIONS = lazy_re(r"NCCL WARN|CUDA_ERROR_[A-Z]|cudaError[A-Z]|NVML_ERROR_[A-Z]|NVMLError_[A-Z]|DCGM_FR_[A-Z]"
                    r"|(?i:cuda)|[Tt]orch|NVIDIA driver")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
_WHOLE = re.compile(r"(?<![\w\x01])[A-Za-z][A-Za-z0-9_]{3,}(?![\w\x01])")


@record
class ApiError:
    """One mined row: an error an API or library reports, what its documentation says, and where that is."""

    id: str
    api: str  # cuda-driver, cuda-runtime, nvml, nccl, dcgm
    name: str  # the enum name; for NCCL the source file that warns
    number: str
    text: str  # the documented description (CUDA), the error string (NVML), the format (NCCL), brief: message (DCGM)
    pattern: str
    code: str  # the check it points to ("" when none)
    symptom: str  # knowledge/symptoms.csv id ("" when none)
    cause: str  # knowledge/causes.csv id ("" when none)
    decides: str  # "confirms" (the error alone decides the cause), "suggests", or "" (no cause)
    action: str  # DCGM's suggested next step
    source: str  # repository or document
    file: str
    line: int
    first_tag: str
    last_tag: str

    @property
    def reporter(self) -> str:
        return REPORTERS.get(self.api, self.api)

    @property
    def tags(self) -> str:
        return self.first_tag if self.first_tag == self.last_tag else f"{self.first_tag}..{self.last_tag}"

    @property
    def where(self) -> str:
        return f"{self.source} {self.tags} {self.file}:{self.line}"

    @property
    def url(self) -> str:
        if self.source.startswith(("NVIDIA/", "pytorch/")):
            return f"https://github.com/{self.source}/blob/{self.last_tag}/{self.file}#L{self.line}"
        return DOCS.get(self.api, "")


def _row(cells: list[str]) -> ApiError:
    r = dict(zip(COLUMNS, cells, strict=True))
    return ApiError(r["id"], r["api"], r["name"], r["number"], r["text"], r["pattern"], r["code"], r["symptom"],
                    r["cause"], r["decides"], r["action"], r["source"], r["file"], int(r["line"]), r["first_tag"],
                    r["last_tag"])


def errors() -> tuple[ApiError, ...]:
    """Every row, in the table's order."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(read_table(TABLE))))
    if tuple(rows[0]) != COLUMNS:
        raise ValueError(f"knowledge/{TABLE}: the columns are not {', '.join(COLUMNS)}: regenerate it")
    return tuple(_row(cells) for cells in rows[1:])


def index_words(row: ApiError) -> set[str]:
    """The words a line must hold for the row to be tried: the enum name (and pynvml's exception name), or the
    longest fixed word of a message."""
    words = {row.name.lower()} if row.api not in ("nccl", "pytorch") else set()
    words |= {w.lower() for w in re.findall(r"\\b(\w+)\\b", row.pattern)}
    if row.api in ("nccl", "dcgm", "pytorch"):
        message = row.text.split(": ", 1)[-1] if row.api == "dcgm" else row.text  # DCGM's: "brief: message"
        # whole words only: "nvmlDeviceGetCount%s()" prints a longer word than its fixed part
        fixed = _WHOLE.findall(re.sub(r"%[-+ #0-9.*]*[a-zA-Z]+", "\x01", message))
        words.add(max(fixed, key=len).lower() if fixed else "warn")  # every NCCL line holds "WARN"
    return words


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, tuple[ApiError, ...]]:
    index: dict[str, list[ApiError]] = {}
    for row in errors():
        for word in index_words(row):
            index.setdefault(word, []).append(row)
    return {word: tuple(rows) for word, rows in index.items()}


@functools.lru_cache(maxsize=1)
def by_id() -> dict[str, ApiError]:
    return {row.id: row for row in errors()}


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def mentions_api(line: str) -> bool:
    return _MENTIONS.search(line) is not None


@functools.lru_cache(maxsize=2048)
def lookup(line: str) -> ApiError | None:
    """The mined row that names this line's error, the one with the most fixed text when several match; None when
    the line names no API error or no row matches it."""
    if not mentions_api(line):
        return None
    index = _index()
    found = {row.id: row for word in {w.lower() for w in _WORD.findall(line)} for row in index.get(word, ())}
    # an enum name is exact; among messages the longest (the most fixed text) is the most specific
    for row in sorted(found.values(), key=lambda r: (r.api == "nccl", -len(r.text))):
        if _compiled(row.pattern).search(line):
            return row
    return None
