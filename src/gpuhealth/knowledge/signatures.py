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

import functools
import re
from collections.abc import Callable, Iterable

from gpuhealth.knowledge import read_table, table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["DOMAINS", "MAX_LINE", "MAX_PER_SIGNATURE", "SEVERITIES", "Signature", "match_line", "match_retyped", "rank",
           "scan_lines", "signature", "signatures"]

DOMAINS = frozenset({
    "nvidia-smi", "nvml", "modprobe", "kernel", "dkms", "installer", "xorg", "cuda-driver", "cuda-runtime",
    "pytorch", "tensorflow", "jax", "cupy", "nccl", "loader", "container", "kubernetes", "fabricmanager", "gsp",
    "persistenced", "mig", "package", "julia", "systemd",
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
    """The row with this id (KeyError when there is none); for ``told:<id>``, the stand-in row of a sentence naming a
    cause in words (knowledge/symptom_phrases.told_signature), so the checks read it as a line naming that cause."""
    if signature_id.startswith("told:"):
        from gpuhealth.knowledge.symptom_phrases import told_signature  # only for a paste that named a cause

        return told_signature(signature_id)
    if signature_id.startswith("shown:"):  # a package tool's line showing an update's new kernel (os_upgrade.py)
        from gpuhealth.knowledge.symptom_phrases import shown_signature

        return shown_signature(signature_id)
    return _by_id()[signature_id]


# Rows whose id starts with this read a person's sentence ("the nouveau module is still loaded after blacklisting"),
# not a program's message: a finding that rests on them alone is reported, at most a warning (checks/diagnosis.py).
WORDS_PREFIX = "words-"


def is_words_row(signature_id: str) -> bool:
    """Whether the catalogue row ``signature_id`` reads a person's words (its id starts with ``words-``, or it is a told
    cause's stand-in row, ``told:``)."""
    return signature_id.startswith((WORDS_PREFIX, "told:"))


def match_line(line: str) -> Signature | None:
    """The most specific row matching ``line``: a decided cause before a symptom, then the higher
    priority, then the longer pattern (a longer pattern says more), then file order."""
    line = line[:MAX_LINE]
    return most_specific((sig for _, sig in _candidates(line)), lambda sig: _regex(sig.pattern).search(line))


def most_specific(rows: Iterable[Signature], matches: Callable[[Signature], object]) -> Signature | None:
    """Of ``rows``, the one of highest ``rank`` that ``matches`` (the first such in file order); None when none does."""
    best: tuple[tuple[int, int, int, int], Signature] | None = None
    for sig in rows:
        if not matches(sig):
            continue
        key = rank(sig)
        if best is None or key > best[0]:
            best = (key, sig)
    return best[1] if best else None


def match_retyped(line: str) -> Signature | None:
    """The row ``match_line`` would pick for ``line`` had its capitals been kept: a person retyping a message ("i get
    unknown runtime specified nvidia") does not keep the case the program printed. Every row is tried without regard
    to case, picked by its literals as ``match_line`` picks them. Only for a person's words (analyze.py); a line with
    letters outside ASCII is not tried (case folding there is Unicode's, not the literals')."""
    line = line[:MAX_LINE]
    if not line.isascii():
        return None
    rows = _catalogue()
    table = _prefilter()
    lowered = line.lower()
    picked = set(table.always)
    for key in {lowered[i:i + ANCHOR] for i in range(len(lowered) - ANCHOR + 1)} & table.by_anchor.keys():
        picked.update(table.by_anchor[key])
    kept = (rows[index] for index in sorted(picked) if (literals := table.literals[index][0]) is None
            or any(literal.lower() in lowered for literal in literals))
    return most_specific(kept, lambda sig: _folded_regex(sig.pattern).search(line))


@functools.cache
def _folded_regex(pattern: str) -> re.Pattern[str]:
    """One row's pattern compiled without regard to case (``match_retyped``), on first use."""
    _regex(pattern)  # a bad pattern says so as the case-sensitive one does
    return re.compile(pattern, re.IGNORECASE)


def rank(sig: Signature) -> tuple[int, int, int, int]:
    """How specific a row is, the order ``match_line`` picks by (higher is more specific): a decided cause,
    then the priority, then the longer pattern, then the earlier row. Callers weighing several matched
    lines (``tool_errors.decode``) use it too, so there is one ranking."""
    return (1 if sig.cause else 0, sig.priority, len(sig.pattern), -_position()[sig.id])


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
def _position() -> dict[str, int]:
    return {sig.id: index for index, sig in enumerate(_catalogue())}


@functools.cache
def _catalogue() -> tuple[Signature, ...]:
    # The rows as read when knowledge/_tables/ was written (see knowledge.table_rows), while the file still reads so.
    try:
        from gpuhealth.knowledge._tables import signatures as written
    except ImportError:
        written = None
    if written is not None and written.TEXT == read_table("signatures.csv"):
        return tuple(Signature(*values) for values in written.SIGNATURES)
    return parse_catalogue(table_rows("signatures.csv"))


def parse_catalogue(rows: list[dict[str, str]]) -> tuple[Signature, ...]:
    """The signatures of ``signatures.csv``'s rows (``csv.DictReader``'s), checked; ValueError names a bad row."""
    found: list[Signature] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, start=2):
        sig = _row(row, number)
        if sig.id in seen:
            raise ValueError(f"signatures.csv: id {sig.id!r} appears twice")
        seen.add(sig.id)
        found.append(sig)
    return tuple(found)


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


@record
class _Prefilter:  # (a record, not a NamedTuple: defining one of those compiles code at import)
    literals: tuple[tuple[tuple[str, ...] | None, bool], ...]  # per row: its literals (None: always run), folded
    by_anchor: dict[str, tuple[int, ...]]  # a literal's first ANCHOR characters, lower-cased -> rows
    always: tuple[int, ...]  # rows without literals


@functools.cache
def _prefilter() -> _Prefilter:
    literals: list[tuple[tuple[str, ...] | None, bool]] = []
    by_anchor: dict[str, list[int]] = {}
    always: list[int] = []
    for index, sig in enumerate(_catalogue()):
        found = known_literals(sig.pattern)
        if found is None:
            literals.append((None, False))
            always.append(index)
            continue
        texts, folded = found
        literals.append((tuple(t.lower() for t in texts) if folded else texts, folded))
        for text in texts:
            by_anchor.setdefault(text[:ANCHOR].lower(), []).append(index)
    return _Prefilter(tuple(literals), {k: tuple(v) for k, v in by_anchor.items()}, tuple(always))


def known_literals(pattern: str) -> tuple[tuple[str, ...], bool] | None:
    """``required_literals(pattern)``, read from knowledge/_tables when the pattern is a shipped row's (worked out when
    the tables were written: reading the pattern here would compile its tokenizer)."""
    known = _written_literals()
    return known[pattern] if pattern in known else required_literals(pattern)


@functools.cache
def _written_literals() -> dict[str, tuple[tuple[str, ...], bool] | None]:
    from gpuhealth.knowledge._tables import signatures as written

    return getattr(written, "LITERALS", {})


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
    if pattern.startswith("(?") and not pattern.startswith(("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?P<")):
        return None  # another global flag (verbose, dotall...): its text is not read literally
    alternatives = _alternatives(pattern)
    if alternatives is None:
        return None
    literals = []
    for tokens in alternatives:
        best = _longest_run(tokens)
        if best is None or len(best) < ANCHOR:
            return None
        if folded and not best.isascii():
            return None  # case folding of non-ASCII letters is not str.lower()'s: leave it to the regex
        literals.append(best)
    return tuple(literals), folded


# One token of a pattern, by its group: 1 an escape, 2 a class (a "]" first in it is literal), 3 "(", 4 ")",
# 5 "|", 6 a quantifier (with its lazy or possessive mark), 7 one of ". ^ $", 8 a run of plain characters,
# 9 anything else (a lone "[", "]", "{", "}", or a trailing backslash).
_TOKEN = lazy_re(r"(\\[\s\S])|(\[\^?\]?(?:\\[\s\S]|[^\]\\])*\])|(\()|(\))|(\|)|((?:[*+?]|\{\d*(?:,\d*)?\})[?+]?)"
                    r"|([.^$])|([^\\\[\]().^$*+?{}|]+)|([\s\S])")
_ESCAPE, _CLASS, _OPEN, _CLOSE, _BAR, _QUANTIFIER, _ANCHOR_CHAR, _PLAIN, _STRAY = range(1, 10)


def _alternatives(pattern: str) -> list[list[tuple[int, str]]] | None:
    """The top-level tokens of each top-level alternative (a group is its ``_OPEN`` token alone, its
    contents dropped); None when a group or class is unbalanced."""
    alternatives: list[list[tuple[int, str]]] = [[]]
    depth = 0
    for match in _TOKEN.finditer(pattern):
        kind, text = match.lastindex or _STRAY, match.group()
        if kind == _STRAY and text in ("[", "\\"):
            return None  # an unclosed class, a trailing backslash
        if kind == _OPEN:
            depth += 1
            if depth == 1:
                alternatives[-1].append((kind, text))
        elif kind == _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0:
            if kind == _BAR:
                alternatives.append([])
            else:
                alternatives[-1].append((kind, text))
    return alternatives if depth == 0 else None


def _top_level_alternatives(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|`` (the tests compare each part with Python's own parse)."""
    parts, depth, start = [], 0, 0
    for match in _TOKEN.finditer(pattern):
        kind = match.lastindex
        depth += 1 if kind == _OPEN else -1 if kind == _CLOSE else 0
        if kind == _BAR and depth == 0:
            parts.append(pattern[start:match.start()])
            start = match.end()
    parts.append(pattern[start:])
    return parts


def _longest_run(tokens: list[tuple[int, str]]) -> str | None:
    """The longest run of plain characters among an alternative's top-level tokens, a character followed
    by a quantifier left out; None when a token cannot be read (a numeric or named escape)."""
    best = run = ""
    last = len(tokens) - 1
    for index, (kind, text) in enumerate(tokens):
        if kind == _ESCAPE:
            text = text[1]
            if text in _CLASS_ESCAPES:
                run = ""
                continue
            if text.isalnum() or not text.isascii():  # \n, \x41, \1, \N{...}: not read here
                return None
        elif kind != _PLAIN:
            run = ""
            continue
        if index < last and tokens[index + 1][0] == _QUANTIFIER:
            run += text[:-1]  # its last character is optional or repeated: that ends the run
            if len(run) > len(best):
                best = run
            run = ""
            continue
        run += text
        if len(run) > len(best):
            best = run
    return best
