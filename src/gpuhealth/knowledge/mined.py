"""The NVIDIA driver's own error and warning messages, mined from its source (``mined/nvrm.csv``).

``tools/mine/mine_nvrm.py`` reads NVIDIA/open-gpu-kernel-modules at pinned release tags and writes one row per
distinct message: its format string, the pattern that recognises it, its level (error or warning), the component
its file belongs to, the family it is grouped in, and where it comes from (first and last tag, file:line at the
newest). ``mined_families.csv`` (hand-written, each row cited) says what a family means and which check and cause
it points to. docs/mined-messages.md says how to regenerate both.

The table is read only when a kernel log holds an NVRM line that neither a parser nor the signature catalogue
explains: ``lookup`` is the only entry point, and its first call parses the table (lazily, once) and indexes it by
each row's rarest fixed word, so a line is tried against the few rows that share one of its words.
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import read_table, table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

_WORD = lazy_re(r"[A-Za-z][A-Za-z0-9_]{3,}")  # the miner's index words (tools/mine/mine_nvrm.py: _WORD)


@record
class Family:
    """A group of mined messages with one meaning, and the check and cause it points to (when one is known)."""

    id: str
    severity: str  # for an error-level message of the family: "critical", "warning" or "info" (a notice)
    title: str
    meaning: str
    code: str  # the check the family points to ("" when none)
    cause: str  # knowledge/causes.csv id ("" when none)
    # "confirms": a message of the family decides its cause (the diagnosis confirms it, as a signature row's would);
    # "suggests": its messages are too generic for that, the cause only moves up a symptom's differential; "": no cause
    decides: str
    explains: tuple[str, ...]  # check codes whose findings a message of this family explains
    source_title: str
    source_url: str


@record
class MinedMessage:
    """One mined row: a message the driver prints, and where its source is."""

    id: str
    level: str  # "error" or "warning"
    component: str  # from the path: gsp, nv, unix (RM's OS layer), mem_mgr ...
    family: str
    key: str  # the rarest fixed word of the format, lower case: the index key
    fixed_chars: int  # letters and digits of fixed text: the more, the more specific the row
    format: str
    pattern: str
    repository: str  # owner/name on GitHub
    file: str
    line: int
    first_tag: str
    last_tag: str

    @property
    def file_line(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def tags(self) -> str:
        return self.first_tag if self.first_tag == self.last_tag else f"{self.first_tag}..{self.last_tag}"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repository}/blob/{self.last_tag}/{self.file}#L{self.line}"


@functools.lru_cache(maxsize=1)
def families() -> dict[str, Family]:
    return {row["family"]: Family(row["family"], row["severity"], row["title"], row["meaning"], row["code"],
                                  row["cause"], row["decides"], tuple(row["explains"].split()),
                                  row["source_title"], row["source_url"])
            for row in table_rows("mined_families.csv")}


TABLE = "mined/nvrm.csv"
COLUMNS = ("id", "level", "component", "family", "key", "fixed_chars", "format", "pattern", "repository", "file",
           "line", "first_tag", "last_tag", "tags")


def _lines_by_word(table: str) -> dict[str, tuple[str, ...]]:
    """A mined table's lines by index word (nvrm.csv here, tools.csv in mined_tools). A row is one line whose
    first five cells are never quoted (the miners write it so): the key is found by splitting at five commas,
    and only the rows tried are parsed as CSV. That keeps the first lookup at a few milliseconds (parsing all
    3,700 rows of nvrm.csv costs ~40)."""
    lines = read_table(table).splitlines()
    if tuple(lines[0].split(",")) != COLUMNS:
        raise ValueError(f"knowledge/{table}: the columns are not {', '.join(COLUMNS)}: regenerate it")
    index: dict[str, list[str]] = {}
    for line in lines[1:]:
        index.setdefault(line.split(",", 5)[4], []).append(line)
    return {word: tuple(found) for word, found in index.items()}


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    return _lines_by_word(TABLE)


def _message(line: str) -> MinedMessage:
    import csv

    r = dict(zip(COLUMNS, next(csv.reader([line])), strict=True))
    return MinedMessage(r["id"], r["level"], r["component"], r["family"], r["key"], int(r["fixed_chars"]),
                        r["format"], r["pattern"], r["repository"], r["file"], int(r["line"]), r["first_tag"],
                        r["last_tag"])


def messages() -> tuple[MinedMessage, ...]:
    """Every row, in the table's order (the tests and docs read them all; ``lookup`` parses only those it tries)."""
    lines = read_table(TABLE).splitlines()[1:]
    return tuple(_message(line) for line in lines)


# A conversion of a format, and the fixed words left around conversions: a row is tried (its pattern compiled and
# run) only on a line holding every one of its fixed words, a substring test per word.
_SPEC = lazy_re(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q|I64)?[diouxXeEfgGcsp%]")
_FIXED_WORD = lazy_re(r"[A-Za-z]{4,}")


@functools.lru_cache(maxsize=1024)
def _candidates(word: str) -> tuple[tuple[MinedMessage, tuple[str, ...]], ...]:
    """The rows under an index word, most specific first, each with the fixed words a line must hold."""
    rows = sorted(map(_message, _index().get(word, ())), key=lambda r: -r.fixed_chars)
    return tuple((row, tuple({w.lower() for w in _FIXED_WORD.findall(_SPEC.sub(" ", row.format))})) for row in rows)


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@functools.lru_cache(maxsize=2048)
def lookup(message: str) -> MinedMessage | None:
    """The mined row whose pattern matches the driver's message (the kernel log line's text, NVRM tag or not),
    the most specific one (the most fixed text) when several do; None when no row does."""
    lowered = message.lower()
    found = [c for word in {w.lower() for w in _WORD.findall(message)} for c in _candidates(word)]
    for row, words in sorted(found, key=lambda c: -c[0].fixed_chars):
        if all(w in lowered for w in words) and _compiled(row.pattern).search(message):
            return row
    return None
