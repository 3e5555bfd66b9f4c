"""The signature catalogue read against words that lost their punctuation: a linked thread's title slug.

A slug (parsers/linked_titles.py) keeps a message's words and drops the rest: "Failed to initialize NVML:
Driver/library version mismatch" becomes "failed to initialize nvml driver library version mismatch", "couldn't"
becomes "couldnt", "NVIDIA-SMI" "nvidia smi". Both sides are normalised the same general way, so that no row is
written for slugs: the words are lower-cased with every run of other characters one blank (``title_words``), and each
row's pattern has the punctuation it spells made optional, case-insensitively (``loose_pattern``). The row that
matches is the catalogue's own, picked by ``signatures.rank`` as ``match_line`` picks.

Cost: only when a slug was found; the words are at most ``MAX_WORDS`` characters, and a row's loose pattern is
compiled once, on first use, and only for words that hold the letters of one of the row's required literals.
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge.signatures import Signature, known_literals, most_specific, signatures

__all__ = ["MAX_WORDS", "loose_pattern", "match_title", "title_words"]

MAX_WORDS = 300  # characters of a title read

# punctuation a pattern spells as a literal (outside a class): a slug has a blank, or nothing, in its place
_PUNCTUATION = frozenset("!\"#%&',-/:;<=>@`~.()[]{}|*+?^$\\_")
_UNESCAPED_LITERALS = frozenset("!\"#%&',-/:;<=>@`~_")
_QUANTIFIERS = frozenset("?*+{")
_OPTIONAL = " ?"
LONG_LITERAL = 15  # letters of a phrase that make a row's start-of-line anchor unneeded in a title


def title_words(text: str) -> str:
    """``text`` as a slug's words: lower-case, apostrophes dropped ("couldn't" is "couldnt"), every other run of
    characters that are not letters or digits one blank."""
    text = text[:MAX_WORDS].lower().replace("'", "").replace("\u2019", "")
    return " ".join("".join(c if c.isalnum() else " " for c in text).split())


def match_title(words: str) -> Signature | None:
    """The most specific catalogue row whose pattern, with its punctuation made optional, matches the words of a
    title (normalised by ``title_words``); None when none does."""
    words = title_words(words)
    if not words:
        return None
    rows = signatures() if not words.isascii() else (sig for sig in signatures() if _may_match(sig.pattern, words))
    return most_specific(rows, lambda sig: (regex := _loose_regex(sig.pattern)) and regex.search(words))


def _may_match(pattern: str, words: str) -> bool:
    """Whether ``words`` (ASCII) hold every run of letters and digits of one of the pattern's required literals: a
    row whose literals' runs are not all there cannot match, and its loose pattern is not compiled (compiling all of
    them took about 60 ms, for the one or two a title matches)."""
    required = _required_runs(pattern)
    return required is None or any(all(run in words for run in runs) for runs in required)


@functools.cache
def _required_runs(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    """Per required literal of ``pattern`` (``signatures.known_literals``: every match holds one of them), its runs of
    letters and digits, lower-cased; None when the pattern has none to offer (its row is always tried).

    Sound for the loose pattern too: ``loose_pattern`` keeps every letter and digit that the pattern spells outside
    a class as it is (case aside: words and literals are both lower case here) and only makes the punctuation and
    blanks between them optional, so a slug the loose pattern matches holds each run of the literal's letters and
    digits. A literal outside ASCII is left to the regex (case folding there is not ``str.lower``'s)."""
    found = known_literals(pattern)
    if found is None:
        return None
    out = []
    for literal in found[0]:
        runs = tuple("".join(c if c.isalnum() else " " for c in literal.lower()).split())
        if not runs or not literal.isascii():
            return None
        out.append(runs)
    return tuple(out)


@functools.cache
def _loose_regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(loose_pattern(pattern), re.IGNORECASE)
    except re.error:
        return None  # a rewrite the engine refuses: the row is not read against titles


def loose_pattern(pattern: str) -> str:
    """``pattern`` with each punctuation literal (escaped, unescaped, or a class of punctuation only) made an optional
    blank, and a lone ``.`` optional: the pattern as it would read a slug. Syntax (groups, classes with letters,
    quantifiers, anchors) is kept."""
    pattern = pattern[:10_000]
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == " ":  # optional too: a blank beside punctuation, or beside a part that matched nothing, is one blank
            out.append(_OPTIONAL)
            i += 1
        elif c == "^" and _long_literal(pattern, i + 1):
            i += 1  # a title has words before the message: a long phrase needs no anchor to be specific
        elif c == "\\" and i + 1 < n:
            escaped = pattern[i + 1]
            if escaped in "Sw":  # a path, or a name with "_" in it (NVreg_...): the slug made its punctuation blanks
                out.append("." if escaped == "S" else "[\\w ]")
                i += 2
            elif escaped in _PUNCTUATION:
                out.append(_OPTIONAL)
                i = _after_quantifier(pattern, i + 2)
            else:
                out.append(pattern[i:i + 2])
                i += 2
        elif c == "[":
            end = _class_end(pattern, i)
            body = pattern[i + 1:end]
            if body.startswith("^") or not any(ch.isalnum() for ch in body):
                out.append(pattern[i:end + 1] if body.startswith("^") else _OPTIONAL)  # a negation is kept
                i = end + 1 if body.startswith("^") else _after_quantifier(pattern, end + 1)
            else:  # letters and punctuation ("[0-9a-f:.]", "[\\w.+-]"): a slug has a blank where the punctuation was
                spaced = " " not in body and any(ch in _UNESCAPED_LITERALS or ch == "." for ch in body)
                out.append(f"[{_with_blank(body)}]" if spaced else pattern[i:end + 1])
                i = end + 1
        elif pattern.startswith(("(?<=", "(?<!", "(?=", "(?!"), i):
            end = _group_end(pattern, i)  # a lookaround is kept as written (a lookbehind must keep its width)
            out.append(pattern[i:end])
            i = end
        elif c == "(" and pattern.startswith("(?", i):
            end = _group_opening_end(pattern, i)
            out.append(pattern[i:end])
            i = end
        elif c == "{":
            end = pattern.find("}", i)
            end = n - 1 if end < 0 else end
            out.append(pattern[i:end + 1])
            i = end + 1
        elif c == "." and not (i + 1 < n and pattern[i + 1] in _QUANTIFIERS):
            out.append(".?")
            i += 1
        elif c in _UNESCAPED_LITERALS:
            out.append(_OPTIONAL)
            i = _after_quantifier(pattern, i + 1)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _with_blank(body: str) -> str:
    """A class's body with a blank added, before a last ``-`` (which would otherwise start a range)."""
    return body[:-1] + " -" if body.endswith("-") and not body.endswith("\\-") else body + " "


def _long_literal(pattern: str, start: int) -> bool:
    """Whether ``pattern`` goes on at ``start`` with at least ``LONG_LITERAL`` letters before any syntax."""
    letters = 0
    for c in pattern[start:start + 200]:
        if c.isalpha():
            letters += 1
        elif c not in " '-/:,":
            break
    return letters >= LONG_LITERAL


def _group_end(pattern: str, start: int) -> int:
    """The index after the ``)`` closing the group opened at ``start`` (classes and escapes skipped)."""
    depth, i = 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i) + 1
            continue
        depth += {"(": 1, ")": -1}.get(c, 0)
        i += 1
        if depth == 0:
            return i
    return len(pattern)


def _class_end(pattern: str, start: int) -> int:
    """The index of the ``]`` closing the class opened at ``start`` (the last index when it is not closed)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i
        i += 1
    return len(pattern) - 1


def _group_opening_end(pattern: str, start: int) -> int:
    """The index after a ``(?...`` group's opening syntax: ``(?:``, ``(?=``, ``(?<!``, ``(?P<name>``, ``(?i)`` ..."""
    i = start + 2
    if pattern.startswith(("P<", "P="), i):
        close = pattern.find(">" if pattern[i + 1] == "<" else ")", i)
        return len(pattern) if close < 0 else close + 1
    if pattern.startswith(("<=", "<!"), i):
        return i + 2
    if i < len(pattern) and pattern[i] in ":=!>":
        return i + 1
    while i < len(pattern) and (pattern[i].isalpha() or pattern[i] == "-"):
        i += 1
    return i + 1 if i < len(pattern) and pattern[i] in ":)" else i


def _after_quantifier(pattern: str, i: int) -> int:
    """The index after a quantifier at ``i`` (and its lazy or possessive mark), or ``i`` when there is none."""
    if i < len(pattern) and pattern[i] in "?*+":
        i += 1
    elif pattern.startswith("{", i):
        close = pattern.find("}", i)
        if close < 0:
            return i
        i = close + 1
    if i < len(pattern) and pattern[i] in "?+":
        i += 1
    return i
