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

The file is read once, lazily, on first use; nothing is read or compiled at import time. Patterns are
compiled one by one, only when a line could match them: each row's *required literals* (text that every
match must contain, found by ``required_literals``) are looked for with plain substring tests first, so a
line runs only the few regexes whose literal it contains. The answer is the same as running every
regex (a test compares both over every example and the test corpora); a row whose pattern has no safe
literal is always run.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Iterable
from typing import NamedTuple

from gpuhealth.knowledge import read_table
from gpuhealth.records import record

__all__ = ["DOMAINS", "MAX_LINE", "MAX_PER_SIGNATURE", "SEVERITIES", "Signature", "match_line", "scan_lines",
           "signature", "signatures"]

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


@record
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
        return _regex(self.pattern)


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
    for index, sig in _candidates(line):
        if _regex(sig.pattern).search(line) is None:
            continue
        key = (1 if sig.cause else 0, sig.priority, len(sig.pattern), -index)
        if best is None or key > best[0]:
            best = (key, sig)
    return best[1] if best else None


def _candidates(line: str) -> Iterable[tuple[int, Signature]]:
    """The rows (with their file index) whose regex could match ``line``: every row without literals,
    and each row one of whose required literals ``line`` contains (lower-cased for ``(?i)`` rows).

    Each literal is indexed by its first ``ANCHOR`` characters, lower-cased: the line's own slices of that
    length pick the few rows worth a substring test, so the cost per line does not grow with the table.
    """
    rows = _catalogue()
    table = _prefilter()
    if not line.isascii():
        # Unicode case folding (re.IGNORECASE) maps some non-ASCII letters to ASCII ones (the Kelvin sign
        # to "k") where str.lower() does not: such a line runs every case-insensitive row.
        for index, (literals, folded) in enumerate(table.literals):
            if literals is None or folded or any(literal in line for literal in literals):
                yield index, rows[index]
        return
    lowered = line.lower()
    keys = {lowered[i:i + ANCHOR] for i in range(len(lowered) - ANCHOR + 1)}
    picked = set(table.always)
    for key in keys & table.by_anchor.keys():
        picked.update(table.by_anchor[key])
    for index in sorted(picked):
        literals, folded = table.literals[index]
        text = lowered if folded else line
        if literals is None or any(literal in text for literal in literals):
            yield index, rows[index]


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
def _catalogue() -> tuple[Signature, ...]:
    text = read_table("signatures.csv")
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
def _regex(pattern: str) -> re.Pattern[str]:
    """One row's compiled pattern, compiled on first use (keyed by the pattern text)."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"signatures.csv: bad pattern {pattern!r}: {exc}") from exc


class _Prefilter(NamedTuple):
    literals: tuple[tuple[tuple[str, ...] | None, bool], ...]  # per row: its literals (None: always run), folded
    by_anchor: dict[str, tuple[int, ...]]  # a literal's first ANCHOR characters, lower-cased -> rows
    always: tuple[int, ...]  # rows without literals


@functools.cache
def _prefilter() -> _Prefilter:
    literals: list[tuple[tuple[str, ...] | None, bool]] = []
    by_anchor: dict[str, list[int]] = {}
    always: list[int] = []
    for index, sig in enumerate(_catalogue()):
        found = required_literals(sig.pattern)
        if found is None:
            literals.append((None, False))
            always.append(index)
            continue
        texts, folded = found
        literals.append((tuple(t.lower() for t in texts) if folded else texts, folded))
        for text in texts:
            by_anchor.setdefault(text[:ANCHOR].lower(), []).append(index)
    return _Prefilter(tuple(literals), {k: tuple(v) for k, v in by_anchor.items()}, tuple(always))


_SPECIAL = frozenset(".^$*+?{}[]()|\\")
_QUANTIFIERS = frozenset("*+?{")
_CLASS_ESCAPES = frozenset("dDwWsSbBAZ")  # a class or a zero-width assertion: not literal, but safe to step over
ANCHOR = 4  # characters of a literal that index it; also the shortest literal used


def required_literals(pattern: str) -> tuple[tuple[str, ...], bool] | None:
    """Literal text that every match of ``pattern`` contains: one string per top-level alternative (a
    match contains at least one of them), and whether the pattern is case-insensitive (``(?i)``).

    Conservative by design: None (no prefilter, the regex always runs) for anything this small reader is
    unsure of: other global flags, numeric or named escapes, an alternative with no literal run of
    ``ANCHOR`` characters. Inside an alternative only top-level runs of plain characters count;
    a character followed by a quantifier ends the run and is not part of it; groups and classes are
    stepped over whole.
    """
    folded = False
    if pattern.startswith("(?i)"):
        folded, pattern = True, pattern[4:]
    if pattern.startswith("(?"):
        if pattern.startswith(("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?P<")):
            pass  # a group, handled below
        else:
            return None  # another global flag (verbose, dotall...): its text is not read literally
    literals = []
    for alternative in _top_level_alternatives(pattern):
        if alternative is None:
            return None
        best = _longest_run(alternative)
        if best is None or len(best) < ANCHOR:
            return None
        if folded and not best.isascii():
            return None  # case folding of non-ASCII letters is not str.lower()'s: leave it to the regex
        literals.append(best)
    return (tuple(literals), folded) if literals else None


def _top_level_alternatives(pattern: str) -> list[str | None]:
    """``pattern`` split at its top-level ``|`` ([None] when a group or class is unbalanced)."""
    parts: list[str | None] = []
    depth, start, i = 0, 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            end = _class_end(pattern, i)
            if end is None:
                return [None]
            i = end + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return [None]
        elif char == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    if depth != 0:
        return [None]
    parts.append(pattern[start:])
    return parts


def _class_end(pattern: str, start: int) -> int | None:
    """Index of the ``]`` closing the class opened at ``start`` (a ``]`` first in the class is literal)."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i
        i += 1
    return None


def _group_end(pattern: str, start: int) -> int | None:
    """Index of the ``)`` closing the group opened at ``start``."""
    depth, i = 0, start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            end = _class_end(pattern, i)
            if end is None:
                return None
            i = end + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _atoms(alternative: str) -> Iterable[str | None]:
    """The alternative's top-level atoms: a literal character, or None for anything else (a class, a
    group, an anchor, an escape class, a quantified atom). Raises ValueError for what it does not read."""
    i = 0
    while i < len(alternative):
        char = alternative[i]
        if char == "\\":
            if i + 1 >= len(alternative):
                raise ValueError("trailing backslash")
            nxt = alternative[i + 1]
            if nxt in _CLASS_ESCAPES:
                atom: str | None = None
            elif nxt.isalnum() or not nxt.isascii():  # \n, \x41, \1, \N{...}: not read here
                raise ValueError(f"escape \\{nxt}")
            else:
                atom = nxt
            i += 2
        elif char == "[":
            end = _class_end(alternative, i)
            if end is None:
                raise ValueError("unbalanced class")
            atom, i = None, end + 1
        elif char == "(":
            end = _group_end(alternative, i)
            if end is None:
                raise ValueError("unbalanced group")
            atom, i = None, end + 1
        elif char in _SPECIAL:  # . ^ $ and a quantifier with nothing before it
            atom, i = None, i + 1
        else:
            atom, i = char, i + 1
        if i < len(alternative) and alternative[i] in _QUANTIFIERS:
            atom = None  # optional or repeated: not a fixed character of every match
            i = _skip_quantifier(alternative, i)
        yield atom


def _skip_quantifier(text: str, i: int) -> int:
    """The index after the quantifier at ``i`` (and its lazy or possessive mark)."""
    if text[i] == "{":
        end = text.find("}", i)
        i = len(text) if end < 0 else end + 1
    else:
        i += 1
    if i < len(text) and text[i] in "?+":
        i += 1
    return i


def _longest_run(alternative: str) -> str | None:
    """The longest run of consecutive literal atoms (None when the alternative cannot be read)."""
    best: list[str] = []
    run: list[str] = []
    try:
        for atom in _atoms(alternative):
            if atom is None:
                run = []
                continue
            run.append(atom)
            if len(run) > len(best):
                best = run  # the same list: it keeps growing while the run does
    except ValueError:
        return None
    return "".join(best)
