"""The catalogue of message signatures: one sourced row per error message that tools print.

Each row of ``signatures.csv`` says: this line (a Python regex applied with ``.search()`` to ONE line)
is the symptom ``symptom`` and, when the line alone decides it, the cause ``cause`` (both ids from
``causes.csv`` / ``symptoms.csv``). ``code`` is the check code the finding is reported under: the
cause's code when a cause is set, else the symptom's (GH806 for lines that only say "this failed").
Every row carries a real ``example`` line, as the machine wrote it, and the source it was read from;
the tests check that every example matches its own row and is not shadowed by another row.

Both live ``check`` (decoding nvidia-smi and NVML failures, see ``tool_errors``) and ``analyze``
(decoding pasted lines) read this one table, so each fact lives in one place.

Patterns must run in linear time: they start with a literal, and use bounded gaps (``.{0,80}``)
instead of ``.*``; a test runs every pattern on 200 KB of adversarial input. Lines longer than
``MAX_LINE`` characters are cut before matching, which bounds the work per line.

The file is read once, lazily, on first use; nothing is read or compiled at import time.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

__all__ = ["DOMAINS", "MAX_LINE", "MAX_PER_SIGNATURE", "SEVERITIES", "Signature", "match_line", "rank",
           "scan_lines", "signature", "signatures"]

DOMAINS = frozenset({
    "nvidia-smi", "nvml", "modprobe", "kernel", "dkms", "installer", "xorg", "cuda-driver", "cuda-runtime",
    "pytorch", "tensorflow", "jax", "cupy", "nccl", "loader", "container", "kubernetes", "fabricmanager", "gsp",
    "persistenced", "mig", "package",
})
SEVERITIES = ("info", "warning", "critical")
MAX_LINE = 4096  # characters of one line that are matched; the rest of a longer line is ignored
MAX_PER_SIGNATURE = 20  # scan_lines reports at most this many lines per signature
_COLUMNS = ("id", "domain", "pattern", "symptom", "cause", "code", "severity", "priority", "summary", "example",
            "source_title", "source_url")


@dataclass(frozen=True)
class Signature:
    id: str  # stable slug, e.g. "modprobe-key-rejected"
    domain: str  # one of DOMAINS
    pattern: str  # Python regex, .search() on one line, linear time
    symptom: str  # a symptom id (causes.py)
    cause: str  # a cause id when the line alone decides the cause, else ""
    code: str  # the check code the finding is reported under
    severity: str  # info | warning | critical
    summary: str  # one plain sentence for the user
    example: str  # a real line as machine-written
    source_title: str
    source_url: str
    priority: int = 0  # breaks ties between rows that match the same line: higher wins

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled()[self.id]


def signatures() -> tuple[Signature, ...]:
    """Every row, in file order."""
    return _catalogue()


def signature(signature_id: str) -> Signature:
    """The row with this id (KeyError when there is none)."""
    return _by_id()[signature_id]


def match_line(line: str) -> Signature | None:
    """The most specific row matching ``line``: a decided cause before a symptom, then the higher
    priority, then the longer pattern (a longer pattern says more), then file order."""
    line = line[:MAX_LINE]
    best: tuple[tuple[int, int, int, int], Signature] | None = None
    compiled = _compiled()
    for sig in _catalogue():
        if compiled[sig.id].search(line) is None:
            continue
        key = rank(sig)
        if best is None or key > best[0]:
            best = (key, sig)
    return best[1] if best else None


def rank(sig: Signature) -> tuple[int, int, int, int]:
    """How specific a row is, the order ``match_line`` picks by (higher is more specific): a decided cause,
    then the priority, then the longer pattern, then the earlier row. Callers weighing several matched
    lines (``tool_errors.decode``) use it too, so there is one ranking."""
    return (1 if sig.cause else 0, sig.priority, len(sig.pattern), -_position()[sig.id])


def scan_lines(lines: Iterable[str]) -> list[tuple[Signature, str]]:
    """Every line that a row matches, with its row, in input order. At most ``MAX_PER_SIGNATURE``
    lines are kept per row, so a log repeating one error a million times stays small."""
    found: list[tuple[Signature, str]] = []
    counts: dict[str, int] = {}
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        sig = match_line(line)
        if sig is None:
            continue
        seen = counts.get(sig.id, 0)
        if seen >= MAX_PER_SIGNATURE:
            continue
        counts[sig.id] = seen + 1
        found.append((sig, line[:MAX_LINE]))
    return found


def _row(row: dict[str, str], number: int) -> Signature:
    where = f"signatures.csv line {number}"
    missing = [c for c in _COLUMNS if c not in row or row[c] is None]
    if missing:
        raise ValueError(f"{where}: missing columns {missing}")
    values = {c: row[c].strip() for c in _COLUMNS}
    for required in ("id", "domain", "pattern", "symptom", "code", "severity", "summary", "example",
                     "source_title", "source_url"):
        if not values[required]:
            raise ValueError(f"{where}: {required} is empty")
    if values["domain"] not in DOMAINS:
        raise ValueError(f"{where}: unknown domain {values['domain']!r}")
    if values["severity"] not in SEVERITIES:
        raise ValueError(f"{where}: severity must be one of {SEVERITIES}, not {values['severity']!r}")
    priority = int(values.pop("priority") or 0)
    # the example is kept exactly as written (leading spaces can be part of a real line)
    values["example"] = row["example"].rstrip("\r\n")
    return Signature(priority=priority, **values)


@functools.cache
def _position() -> dict[str, int]:
    return {sig.id: index for index, sig in enumerate(_catalogue())}


@functools.cache
def _catalogue() -> tuple[Signature, ...]:
    text = resources.files("gpuhealth.knowledge").joinpath("signatures.csv").read_text(encoding="utf-8")
    rows: list[Signature] = []
    seen: set[str] = set()
    for number, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        sig = _row(row, number)
        if sig.id in seen:
            raise ValueError(f"signatures.csv: id {sig.id!r} appears twice")
        seen.add(sig.id)
        rows.append(sig)
    return tuple(rows)


@functools.cache
def _by_id() -> dict[str, Signature]:
    return {sig.id: sig for sig in _catalogue()}


@functools.cache
def _compiled() -> dict[str, re.Pattern[str]]:
    compiled: dict[str, re.Pattern[str]] = {}
    for sig in _catalogue():
        try:
            compiled[sig.id] = re.compile(sig.pattern)
        except re.error as exc:
            raise ValueError(f"signatures.csv: {sig.id}: bad pattern: {exc}") from exc
    return compiled
