"""How people describe a symptom in their own words: the table behind the prose reader (parsers/prose_symptoms.py).

A user who writes "nvidia-smi takes forever" or "the GPU memory stays occupied after the program ends" shows a
symptom of ``symptoms.csv`` as surely as a program's error line does, but in words no program prints. Each row of
``symptom_phrases.csv`` is one *family* of such wordings, not one sentence:

- ``subject`` and ``predicate``: two regular expressions (over lower-cased text) that must both match in one sentence,
  in either order, at most ``window`` characters apart ("nvidia-smi ... slow", "slow nvidia-smi"); a row may have
  only one of them ("login loop"). Synonyms are alternatives inside each.
- ``literals``: words (";"-separated, lower case) one of which every match contains: the index that lets a paste
  without any of them cost one substring test per literal.
- ``context``: optional, a pattern the whole line must also contain (memory wordings need a GPU in sight);
  ``unless``: optional, a pattern that drops the sentence (memory kept by PyTorch's own caching allocator is not
  memory held after the program ended); ``yields_to``: symptom ids whose match in the same sentence takes precedence
  ("nvidia-smi hangs for 5 seconds" is the slow family's, not the hang family's).
- ``ordered``: "yes" when the subject must come before the predicate ("the GPU disappears"; in "the message
  disappeared after the GPU update" something else disappeared).
- ``machine_wins``: "yes" when the symptom is a state a snapshot shows (memory held, nouveau loaded): where its own
  check read the machine output given and found nothing, the machine output wins over the words (checks/diagnosis.py).
  "no" for what happens at other times (overheating under load, a slowdown, a hang).
- ``examples`` and ``counterexamples`` (" ¦ "-separated): sentences the family must and must not read as the
  symptom (tests/knowledge/test_symptom_phrases.py); ``source_title`` and ``source_url``: the document that describes
  the symptom and its causes.

A family in Chinese is a row of its own (id ending in "-zh", the same symptom and source as the English row whose
wordings it translates), so each language's patterns stay readable; its Latin words use ``(?<![a-z])``/``(?![a-z])``
rather than ``\b``, which sees no boundary between a Latin and a CJK character. Korean ("-ko") and Japanese ("-ja")
families are rows the same way. The English rows' ``\b`` is compiled as a boundary of Latin words
(``latin_bounded``), so "我的GPU overheats" and "GPU가 overheats" are read as the English sentence would be.

A person also names the CAUSE itself: "the module was not built for the new kernel", "there are no headers for this
kernel", "DKMS refuses to build because the compiler differs from the kernel's", "nouveau is still bound to the card".
Those families are rows of the sibling table ``cause_phrases.csv``, read by the same reader with the same columns,
except that a row names a ``cause`` (a ``causes.csv`` id) instead of a symptom, and ``machine_wins`` says whether the
cause's own check, having read the machine output given and found nothing, overrules the words. Each cites how the
cause is named in its source (NVIDIA's installation guide, the installer's, DKMS's or the kernel's own messages, the
cause's page). A told cause is the reporter's words: analyze files its sentence under a stand-in catalogue row
(:func:`told_signature`, id ``told:<row id>``) of the cause's check, at most a warning (checks/diagnosis.py).
``yields_to`` names symptom or cause ids ("the module was not built because the headers are missing" is the headers'
family's).

A person also says what FIXED it: "blacklisting nouveau fixed it", "it only worked after I installed the kernel
headers", "the solution was to disable Secure Boot". A fix that worked is evidence for the cause that fix addresses,
stronger than a cause merely named. The rows of ``fix_phrases.csv`` (same columns, ``fix``) are the fix actions of
causes in words, each cited to the same source as the cause's own fix (NVIDIA's installation guide for blacklisting
nouveau, installing the headers, rebuilding with DKMS, signing or disabling Secure Boot; the Fabric Manager guide for
starting it ...): the subject is what the action acts on, the predicate the verb. The frames that say the fix worked ("X
fixed it", "solved by X", "after X it works", "the fix was X") are the reader's; it files such a sentence as confirmed
by the reporter's fix (``Told.confirmed``), under the stand-in row ``told:<row id>+fixed`` (:data:`FIXED_SUFFIX`), which
the diagnosis ranks above a cause merely named (checks/diagnosis.py). A cause family's own sentence followed by a fix
that worked ("the fabric manager was not running; starting it fixed it") is confirmed the same way.

Negation, questions that only ask, hypotheticals and history are the reader's, not the table's. The table is read
once, on first use, and each pattern is compiled on its own first use.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["FIXED_SUFFIX", "SEPARATOR", "SHOWN_PREFIX", "TOLD_PREFIX", "Phrase", "fix_confirmed", "literal_rows",
           "literals", "phrases", "shown_signature", "state_causes", "state_symptoms", "told_signature"]

SEPARATOR = " ¦ "  # between the examples of one cell
TOLD_PREFIX = "told:"  # the id of a told cause's stand-in catalogue row: "told:told-module-not-built"
# the id of the stand-in row of a program's line showing a family's event (a package tool's log of a kernel installed
# by an update: parsers/os_upgrade.py): machine output, not the reporter's words
SHOWN_PREFIX = "shown:"
# added to a told cause's stand-in id where the reporter says a fix of it worked ("told:fixed-module-rebuilt+fixed")
FIXED_SUFFIX = "+fixed"
_REQUIRED = ("id", "literals", "examples", "source_title", "source_url")


@record
class Phrase:
    id: str  # "smi-slow"
    symptom: str  # a symptoms.csv id
    literals: tuple[str, ...]  # one of them is in every line the row matches
    subject: re.Pattern[str] | None
    predicate: re.Pattern[str] | None
    window: int  # the most characters between the subject's and the predicate's matches
    ordered: bool  # the subject comes first
    context: re.Pattern[str] | None  # the line must also match it
    unless: re.Pattern[str] | None  # a sentence matching it is not this symptom
    yields_to: tuple[str, ...]  # symptom ids that take the sentence when they match it too
    examples: tuple[str, ...]
    counterexamples: tuple[str, ...]
    source_title: str
    source_url: str
    cause: str = ""  # cause_phrases.csv: the causes.csv id the family names ("" for a symptom's family)
    machine_wins: bool = False
    fix: bool = False  # fix_phrases.csv: the family is a fix of its cause, read only where the reporter says it worked

    @property
    def key(self) -> str:
        """What the family tells: its cause, else its symptom (one sentence tells each at most once)."""
        return self.cause or self.symptom


def phrases() -> tuple[Phrase, ...]:
    """Every row, in file order."""
    return _table()[0]


def literals() -> tuple[str, ...]:
    """The literals of every row (lower case, each once): a line that holds none of them matches no row."""
    return _table()[1]


@functools.cache
def literal_rows() -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each literal with the positions (in :func:`phrases`) of the rows it indexes: a line is tested once per literal,
    not once per row and literal."""
    index: dict[str, list[int]] = {}
    for position, row in enumerate(phrases()):
        for literal in row.literals:
            index.setdefault(literal, []).append(position)
    return tuple((literal, tuple(positions)) for literal, positions in index.items())


def state_symptoms() -> frozenset[str]:
    """The symptom ids a snapshot shows as a state (``machine_wins``)."""
    return _table()[2]


def state_causes() -> frozenset[str]:
    """The told causes whose check, having read the machine output and found nothing, overrules the words."""
    return frozenset(row.cause for row in phrases() if row.cause and row.machine_wins)


def told_signature(signature_id: str):
    """The stand-in catalogue row (``signatures.Signature``) of a sentence a cause family read: the cause's check,
    at most a warning (the reporter's words), the family's source; with :data:`FIXED_SUFFIX`, of a sentence saying a fix
    of the cause worked. KeyError for an id no family has."""
    return _told_rows()[signature_id]


def fix_confirmed(signature_id: str) -> bool:
    """Whether the line filed under ``signature_id`` is the reporter saying a fix of its cause worked."""
    return signature_id.startswith(TOLD_PREFIX) and signature_id.endswith(FIXED_SUFFIX)


@functools.cache
def _told_rows() -> dict:
    # "point to", not "name": a row reads the cause stated ("the module was not built") and the event that produces it
    # ("after the dnf update nvidia-smi fails") alike
    named = _stand_ins(TOLD_PREFIX, "words", "The reporter's words point to the cause: {}")
    fixed = _stand_ins(TOLD_PREFIX, "words", "The reporter's fix confirms the cause: {}")
    return {**named, **{f"{key}{FIXED_SUFFIX}": replace(sig, id=f"{key}{FIXED_SUFFIX}") for key, sig in fixed.items()}}


def shown_signature(signature_id: str):
    """The stand-in catalogue row of a program's line showing the event a cause family tells ("Setting up
    linux-image-6.8.0-45-generic", dnf's "Install kernel-5.14.0-503...": an update installed a new kernel): the cause's
    check, a warning (the event is not the failure; beside one it names the cause), the family's source. KeyError for
    an id no family has."""
    return _shown_rows()[signature_id]


@functools.cache
def _shown_rows() -> dict:
    return _stand_ins(SHOWN_PREFIX, "package",
                      "A package tool's output shows an update that installed a new kernel: {}")


def _stand_ins(prefix: str, source: str, message: str) -> dict:
    """One stand-in catalogue row per cause family: its cause's check, a warning, ``message`` with the cause's title,
    the family's first example and source."""
    from gpuhealth.knowledge.causes import causes
    from gpuhealth.knowledge.signatures import Signature

    known = causes()
    return {f"{prefix}{row.id}": Signature(
        f"{prefix}{row.id}", source, "", "", row.cause, known[row.cause].code, "warning",
        message.format(known[row.cause].title), row.examples[0], row.source_title, row.source_url)
        for row in phrases() if row.cause}


# A boundary of Latin words: a CJK character, kana or Hangul is a word character to Python's \w but no part of an
# English word, so "我的GPU overheats" and "GPU가 overheats" have a boundary where \b sees none. An ASCII-scoped \b
# sees it: its word characters are [0-9A-Za-z_]. (A class of the Latin-1 and Latin Extended letters gave accented
# letters their due, but each \b spelled as two look-arounds with that class took re about 0.3 ms to compile, and a
# row holds dozens: 0.1-0.2 s of the first paste's time, against 0.02 ms for this one. The English rows' words are
# ASCII; an accented letter next to one now ends the word.)
LATIN_BOUNDARY = r"(?a:\b)"


def latin_bounded(pattern: str) -> str:
    """``pattern`` with each ``\\b`` (outside a character class) made a boundary of Latin words that CJK text beside a
    word does not hide; still one character looked at on each side, so the pattern's cost is unchanged.

    Read token by token (an escape, a class's opening with its "^" and a first "]", a "]"), not character by
    character: loading the families reads about 120 KB of patterns, and a loop over each character cost about 20 ms of
    a prose paste's first analysis."""
    if "\\b" not in pattern:
        return pattern
    out: list[str] = []
    last = 0
    in_class = False
    for token in _CLASS_OR_ESCAPE.finditer(pattern):
        text = token.group()
        if text[0] == "\\":
            if text == "\\b" and not in_class:
                out += (pattern[last:token.start()], LATIN_BOUNDARY)
                last = token.end()
        elif text[0] == "[":
            # outside a class: an opening, whose "^" and first "]" are its own; inside: a "[" member, and a "]" after
            # it (taken with it here) closes the class
            in_class = not in_class or not text.endswith("]")
        else:
            in_class = False
    out.append(pattern[last:])
    return "".join(out)


# an escape (a backslash and the character after it, if any), a class's opening with its "^" and a first "]", a "]"
_CLASS_OR_ESCAPE = lazy_re(r"\\[\s\S]?|\[\^?\]?|\]")


def _compiled(pattern: str, where: str) -> re.Pattern[str] | None:
    """The row's pattern, compiled on its first use: a line reaches a row's patterns only when it holds one of the
    row's literals, so a paste compiles the few rows it could match, not all 300 (about 90 ms). A bad pattern is a
    test failure (tests/test_symptom_phrases.py matches every row's examples), not a user's."""
    return lazy_re(latin_bounded(pattern)) if pattern else None


def _split(cell: str, separator: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in cell.split(separator) if part.strip())


@functools.cache
def _table() -> tuple[tuple[Phrase, ...], tuple[str, ...], frozenset[str]]:
    from gpuhealth.knowledge.causes import causes, symptoms

    known = symptoms()
    known_causes = causes()
    rows: list[Phrase] = []
    states: set[str] = set()
    for name in ("symptom_phrases.csv", "cause_phrases.csv", "fix_phrases.csv"):
        for number, row in enumerate(table_rows(name), start=2):
            row = {k: (v or "").strip() for k, v in row.items() if k is not None}
            rows.append(_phrase(row, f"{name} line {number}", known, known_causes, rows))
            if name == "fix_phrases.csv":
                rows[-1] = replace(rows[-1], fix=True)
            if rows[-1].machine_wins and not rows[-1].cause:
                states.add(rows[-1].symptom)
    return tuple(rows), tuple(dict.fromkeys(lit for r in rows for lit in r.literals)), frozenset(states)


def _phrase(row: dict[str, str], where: str, known: dict, known_causes: dict, rows: list[Phrase]) -> Phrase:
    """One row of either table, checked: a symptom's family names a known symptom, a cause's family a known cause."""
    for column in _REQUIRED:
        if not row.get(column):
            raise ValueError(f"{where}: {column} is empty")
    cause = row.get("cause", "")
    if "cause" in row and cause not in known_causes:
        raise ValueError(f"{where}: unknown cause {cause!r}")
    if "cause" not in row and row.get("symptom", "") not in known:
        raise ValueError(f"{where}: unknown symptom {row.get('symptom', '')!r}")
    if not (row.get("subject") or row.get("predicate")):
        raise ValueError(f"{where}: a row needs a subject or a predicate")
    if any(r.id == row["id"] for r in rows):
        raise ValueError(f"{where}: id {row['id']!r} appears twice")
    for flag in ("ordered", "machine_wins"):
        if row.get(flag) not in ("yes", "no"):
            raise ValueError(f"{where}: {flag} must be yes or no")
    yields = _split(row.get("yields_to", ""), ";")
    if any(y not in known and y not in known_causes for y in yields):
        raise ValueError(f"{where}: yields_to names an unknown symptom or cause")
    return Phrase(row["id"], row.get("symptom", ""), _split(row["literals"].lower(), ";"),
                  _compiled(row.get("subject", ""), where), _compiled(row.get("predicate", ""), where),
                  int(row.get("window") or 0), row.get("ordered") == "yes", _compiled(row.get("context", ""), where),
                  _compiled(row.get("unless", ""), where), yields, _split(row["examples"], SEPARATOR.strip()),
                  _split(row.get("counterexamples", ""), SEPARATOR.strip()), row["source_title"], row["source_url"],
                  cause, row["machine_wins"] == "yes")
