"""Application errors by kind: which catalogue rows are which kind of CUDA/NCCL/driver error in a training log,
and what each kind means for the host (GH806).

The messages themselves live in ``signatures.csv`` only: a line is an application error when the row
:func:`~gpuhealth.knowledge.signatures.match_line` picks for it belongs to a kind here. ``app_errors.csv``
adds what a message does not carry: how GH806 groups the rows (``no-device``, ``cuda-oom``, ``nccl`` ...),
which checks explain or rule out each kind, the snapshot fields those checks read, and the commands to run
when the evidence given cannot decide. ``signatures`` lists row ids, or ``domain:<name>`` for every row of
that domain (all NCCL rows are the ``nccl`` kind).

The file is read once, lazily, on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from gpuhealth.knowledge import csv_rows, table_rows
from gpuhealth.knowledge.signatures import DOMAINS, MAX_LINE, Signature, match_line, signatures
from gpuhealth.records import record

__all__ = ["ErrorMeaning", "candidate_lines", "kind_of", "kind_of_line", "meanings"]

_COLUMNS = ("kind", "signatures", "summary", "related", "needs", "collect", "source_title", "source_url")


@record
class ErrorMeaning:
    kind: str  # "no-device"
    signatures: tuple[str, ...]  # the catalogue rows of this kind (domains expanded)
    summary: str  # what it means for the host, in one phrase
    related: tuple[str, ...]  # checks that explain or rule out this error
    needs: tuple[str, ...]  # snapshot fields those checks read
    collect: tuple[str, ...]  # what to run when the evidence given cannot decide
    source_title: str
    source_url: str


def meanings() -> dict[str, ErrorMeaning]:
    """Every kind, in file order."""
    return _table()[0]


def kind_of(signature_id: str) -> str | None:
    """The kind of a catalogue row, or None when the row is no application error."""
    return _table()[1].get(signature_id)


def kind_of_line(line: str) -> str | None:
    """The kind of error ``line`` shows: the kind of the row the catalogue picks for it, or None."""
    return _kind_of_line(line[:MAX_LINE])  # match_line reads no more than this; the cache keys stay small


@functools.lru_cache(maxsize=4096)
def _kind_of_line(line: str) -> str | None:
    # cached: the app-log sniff and its parser read the same lines, and logs repeat their errors
    found = match_line(line)
    return kind_of(found.id) if found is not None else None


def candidate_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) of every line of ``text`` that some row of a kind may match, in order.

    Each kind's row searches the whole text once (the catalogue's own compiled pattern; a pattern that starts
    with a literal is found at C speed), instead of the whole catalogue on every line: a 20 000-line log
    without errors costs a few passes. A hit is only a candidate (a bounded gap may span two lines);
    ``kind_of_line`` decides.
    """
    starts: set[int] = set()
    for sig in _kind_rows():
        for count, found in enumerate(sig.regex.finditer(text)):
            if count >= MAX_HITS_PER_ROW:
                break
            starts.add(text.rfind("\n", 0, found.start()) + 1)
    number, previous = 1, 0
    for start in sorted(starts):
        number += text.count("\n", previous, start)
        previous = start
        end = text.find("\n", start)
        yield number, text[start:end if end >= 0 else len(text)]


MAX_HITS_PER_ROW = 10_000  # a log repeating one error a million times yields this many candidate lines


@functools.cache
def _kind_rows() -> tuple[Signature, ...]:
    return tuple(sig for sig in signatures() if kind_of(sig.id) is not None)


def _split(value: str, separator: str = ";") -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(separator) if part.strip())


@functools.cache
def _table() -> tuple[dict[str, ErrorMeaning], dict[str, str]]:
    return _parse_rows(table_rows("app_errors.csv"))


def parse_table(text: str) -> tuple[dict[str, ErrorMeaning], dict[str, str]]:
    """``app_errors.csv`` text -> (kinds by name, kind by signature id); ValueError names the bad line."""
    return _parse_rows(csv_rows(text))


def _parse_rows(rows: list[dict[str, str]]) -> tuple[dict[str, ErrorMeaning], dict[str, str]]:
    known = {s.id: s for s in signatures()}
    kinds: dict[str, ErrorMeaning] = {}
    by_row: dict[str, str] = {}
    for number, row in enumerate(rows, start=2):
        where = f"app_errors.csv line {number}"
        if any(row.get(c) is None for c in _COLUMNS):
            raise ValueError(f"{where}: missing columns")
        kind = row["kind"].strip()
        if not kind or kind in kinds:
            raise ValueError(f"{where}: kind {kind!r} empty or repeated")
        ids: list[str] = []
        for entry in _split(row["signatures"]):
            if entry.startswith("domain:"):
                domain = entry.removeprefix("domain:")
                if domain not in DOMAINS:
                    raise ValueError(f"{where}: unknown domain {domain!r}")
                ids.extend(s.id for s in known.values() if s.domain == domain)
            elif entry in known:
                ids.append(entry)
            else:
                raise ValueError(f"{where}: unknown signature {entry!r}")
        for signature_id in ids:
            if by_row.setdefault(signature_id, kind) != kind:
                raise ValueError(f"{where}: signature {signature_id!r} is already kind {by_row[signature_id]!r}")
        kinds[kind] = ErrorMeaning(kind, tuple(dict.fromkeys(ids)), row["summary"].strip(), _split(row["related"]),
                                   _split(row["needs"]), _split(row["collect"], "\n"), row["source_title"].strip(),
                                   row["source_url"].strip())
    return kinds, by_row
