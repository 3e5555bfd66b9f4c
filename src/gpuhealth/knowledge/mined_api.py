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

# a CUDA driver API call's failure with its number ("cuInit returned 802"): the line need not say "CUDA" (a call is
# cuXxx; the libraries, cuDNN, cuBLAS, cuFFT, are not calls)
_DRIVER_CALL_FAILED = (r"\bcu[A-Z][a-z][A-Za-z0-9_]{1,60}(?:\([^()\n]{0,60}\))?:? "
                       r"(?i:returned|returns|failed|fails|results?) ")
# A line worth looking up: it names a CUDA, NVML or DCGM error code, is an NCCL warning, or may be one of PyTorch's
# CUDA initialisation messages (each names cuda, libcudart, torch or the NVIDIA driver; the table is read once, then
# indexed).
_MENTIONS = lazy_re(r"NCCL WARN|CUDA_ERROR_[A-Z]|cudaError[A-Z]|NVML_ERROR_[A-Z]|NVMLError_[A-Z]|DCGM_FR_[A-Z]"
                    r"|(?i:cuda)|[Tt]orch|NVIDIA driver|(?<![\w])ERROR_[A-Z]|" + _DRIVER_CALL_FAILED)
_WORD = lazy_re(r"[A-Za-z][A-Za-z0-9_]{3,}")
_WHOLE = lazy_re(r"(?<![\w\x01])[A-Za-z][A-Za-z0-9_]{3,}(?![\w\x01])")


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


@functools.cache
def errors() -> tuple[ApiError, ...]:
    """Every row, in the table's order; read once (the index, the other spellings and ``by_id`` each ask for them, and
    reading the 350 KB table cost about 25 ms a time)."""
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


# ------------------------------------------------------------------ other spellings of the same enums
# The CUDA enums are printed in more spellings than their C names, and people name them in words. Each spelling below
# maps to the same row (its enum name or number, looked up in a dict), so the row's check and cause lead as they do
# for the C name. cuda-python prints the enum's repr, ``cudaError_t.cudaErrorInsufficientDriver`` or
# ``<CUresult.CUDA_ERROR_SYSTEM_NOT_READY: 802>``, and cuda.core's CUDAError the name from cuGetErrorName/
# cudaGetErrorName (NVIDIA/cuda-python cuda_core/cuda/core/experimental/_utils/cuda_utils.pyx: ``f"{name}: {expl}"``):
# the C names, which the index above already finds. Not found by it:
# - the runtime enum's name without its ``cudaError`` prefix after a CUDA error word ("CUDAError InsufficientDriver",
#   "CUDA error: SystemNotReady");
# - the number, only where the words next to it tie it to CUDA: "CUDA error 35", "cuda runtime error (35)", "CUDA
#   failure 35:", "CUDA_ERROR 999", a CUDA call's "cudaGetDeviceCount returned 35" / "cuInit returned 802", or a line
#   naming CUDA whose number stands beside an error word and a word of the enum's own name ("802 system error").
#   A bare number is never read.
# NVML's enum name without its NVML_ prefix, as go-nvml prints a Return when it cannot ask the library for the text
# ("failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND": NVIDIA/go-nvml pkg/nvml/return.go, fallbackErrorStringFunc),
# which the Kubernetes device plugin, DCGM exporter and GPU operator log. A line that names CUDA and not NVML may mean
# a CUDA_ERROR_ name shortened the same way, and a generic name (ERROR_TIMEOUT) another program's: read only beside
# the word NVML.
_GO_NVML = lazy_re(r"(?<![\w])(?P<name>ERROR_[A-Z][A-Z0-9_]{1,60})(?![\w])")
_NVML_WORD = lazy_re(r"(?i:nvml)")
_CUDA_WORD = lazy_re(r"(?i:cuda)|" + _DRIVER_CALL_FAILED)
_STEM = lazy_re(r"(?<![\w.])(?i:cuda)[ _]?(?:[Rr]untime|[Dd]river)?[ _]?(?:Error|Exception|ERROR|error)"
                r"(?:::|\.|:? {1,3})(?P<stem>[A-Z][a-z][A-Za-z0-9]{1,60})(?![\w])")
_NUMBER_AFTER_WORD = lazy_re(r"(?<![\w.])(?i:cuda)[ _-]?(?i:(?:runtime|driver)[ _-]?)?(?i:error|failure|err)(?i:s)?"
                             r"[ :=#(]{0,4}(?i:(?:code|number|no\.?)[ :=#(]{0,3})?(?P<n>\d{1,3})(?![\w.]|\.\d)")
_NUMBER_FROM_CALL = lazy_re(r"(?<![\w.])(?P<call>cu(?:da)?[A-Z][a-z][A-Za-z0-9_]{1,60})(?:\([^()\n]{0,60}\))?:? "
                            r"(?i:returned|returns|failed with|fails with|results? in)(?i: error)?(?i: code)?:? ?"
                            r"(?P<n>\d{1,3})(?![\w.]|\.\d)")
_NUMBER = lazy_re(r"(?<![\w.])(?P<n>\d{1,3})(?![\w.]|\.\d)")
_ERROR_NEAR = lazy_re(r"(?i:\b(?:error|err|code|fail\w{0,4}|returned)\b)")
_DRIVER_HINT = lazy_re(r"CUDA_ERROR|CUresult|\bcu[A-Z]\w|(?i:driver api)")
_ENUM_WORD = lazy_re(r"[A-Z][a-z]+|[A-Z]{2,}(?![a-z])")
_GENERIC_WORDS = frozenset({"error", "cuda", "code", "failed"})
NEAR = 40  # characters each side of a number in which its enum's words are looked for


@functools.lru_cache(maxsize=1)
def _by_spelling() -> tuple[dict[str, ApiError], dict[str, dict[str, ApiError]], dict[str, ApiError]]:
    """The CUDA rows by lower-cased runtime stem ("insufficientdriver") and by number per API; NVML's by name."""
    stems: dict[str, ApiError] = {}
    numbers: dict[str, dict[str, ApiError]] = {"cuda-driver": {}, "cuda-runtime": {}}
    nvml = {row.name: row for row in errors() if row.api == "nvml"}
    for row in errors():
        if row.api == "cuda-runtime" and row.name.startswith("cudaError"):
            stems[row.name.removeprefix("cudaError").lower()] = row
        if row.api in numbers and row.number.isdigit():
            numbers[row.api].setdefault(row.number, row)
    return stems, numbers, nvml


# go-nvml names that other software uses too (Windows' ERROR_NOT_FOUND, ERROR_TIMEOUT): NVML's only on a line naming it
_GENERIC_GO_NAMES = frozenset(f"ERROR_{n}" for n in (
    "UNINITIALIZED", "INVALID_ARGUMENT", "NOT_SUPPORTED", "NO_PERMISSION", "ALREADY_INITIALIZED", "NOT_FOUND",
    "INSUFFICIENT_SIZE", "TIMEOUT", "OPERATING_SYSTEM", "IN_USE", "MEMORY", "NO_DATA", "UNKNOWN", "DEPRECATED",
    "INSUFFICIENT_RESOURCES"))


def _go_nvml(name: str, line: str) -> ApiError | None:
    names_nvml = _NVML_WORD.search(line) is not None
    if (_CUDA_WORD.search(line) or name in _GENERIC_GO_NAMES) and not names_nvml:
        return None
    return _by_spelling()[2].get(f"NVML_{name}")


def enum_words(row: ApiError) -> set[str]:
    """The words of an enum's own name, lower-cased: CUDA_ERROR_SYSTEM_NOT_READY -> {system, ready}."""
    name = row.name.removeprefix("cudaError").removeprefix("CUDA_ERROR_").replace("_", " ")
    return {w.lower() for w in _ENUM_WORD.findall(name.title() if name.isupper() else name)
            if len(w) >= 4 and w.lower() not in _GENERIC_WORDS}


def _numbered(number: str, line: str) -> ApiError | None:
    """The row of CUDA error ``number``: the driver API's where the line names the driver API (or only it has the
    number), else the runtime's (what "CUDA error N" prints: cudaGetErrorString's callers)."""
    numbers = _by_spelling()[1]
    driver, runtime = numbers["cuda-driver"].get(number), numbers["cuda-runtime"].get(number)
    if driver is not None and (runtime is None or _DRIVER_HINT.search(line)):
        return driver
    return runtime


def named_error(line: str) -> ApiError | None:
    """``lookup``'s row, except that an enum named in another spelling is more specific than a PyTorch message
    ("CUDA initialization fails with 802 system error" is error 802, not PyTorch's "CUDA initialization" warning)."""
    row = lookup(line)
    if row is None or row.api == "pytorch":
        return by_spelling(line) or row
    return row


def by_spelling(line: str) -> ApiError | None:
    """The CUDA or NVML row a line names in a spelling other than the C enum name (see above); None when it names
    none."""
    line = line[:1000]
    go = _GO_NVML.search(line) if "ERROR_" in line else None
    if go is not None and (row := _go_nvml(go["name"], line)) is not None:
        return row
    if not _CUDA_WORD.search(line):
        return None
    stem = _STEM.search(line)
    if stem is not None and (row := _by_spelling()[0].get(stem["stem"].lower())) is not None:
        return row
    for pattern in (_NUMBER_AFTER_WORD, _NUMBER_FROM_CALL):
        found = pattern.search(line)
        if found is not None and (row := _numbered(found["n"], line)) is not None:
            return row
    return _number_beside_its_words(line)


def _number_beside_its_words(line: str) -> ApiError | None:
    """"CUDA initialization fails with 802 system error": a number with an error word and a word of its enum's own
    name within NEAR characters."""
    lowered = line.lower()
    for found in _NUMBER.finditer(line):
        near = lowered[max(0, found.start() - NEAR):found.end() + NEAR]
        if not _ERROR_NEAR.search(near):
            continue
        for api in ("cuda-runtime", "cuda-driver"):
            row = _by_spelling()[1][api].get(found["n"])
            if row is not None and any(re.search(rf"\b{word}", near) for word in enum_words(row)):
                return row
    return None
