"""Lines a mail client or a terminal wrapped, joined back where their own format shows the break.

A paste that went through a mail client is wrapped at 72-80 columns; a terminal narrower than the output wraps it
too. Most wrapped lines cannot be told from two lines, so only formats whose records show where they end are
joined:

- an ``nvidia-smi`` table: its rule lines (``+----+----+``) give its width and every row starts and ends with
  ``|``, so inside such a table a row that does not end with ``|`` (or falls short of the width), followed by a
  line that starts with neither ``|`` nor ``+``, was broken (the table's parser refuses such a box, and the GPU it
  shows is lost); a rule line cut in its run of dashes is joined to the rest of the run;
- the driver's Xid line, ``NVRM: Xid (PCI:<address>): <n>, ...`` (NVIDIA's Xid catalogue; open-gpu-kernel-modules
  prints it from ``nvErrorLog_va``): a line that holds ``NVRM: Xid`` without the full head, followed by a line that
  completes it, was broken before the Xid's number (a long journald prefix pushes the head past column 72), and the
  kernel-log parser loses the event;
- a kernel-log line of the GPU stack (``NVRM``, ``nvidia``, ``Xid``, AER...): every record starts with its prefix
  (``[   12.345678]``, ``Dec  1 10:00:00 host``), so a line of 60 to 80 characters (the width it was wrapped at)
  followed by up to three unprefixed, unindented lines (none a record of its own: ``NVRM: ...``, ``modprobe: ...``)
  and then the next record was broken; at the end of the log
  the pieces are joined only when they do not start like a sentence (the reporter's words after the paste);
- a program's "your driver is too old for this CUDA" message (the catalogue's GH601 rows: CUDA.jl's "CUDA X is not
  supported by / your driver (which supports up to Y)", which CUDA.jl's own format string breaks, XLA's, the CUDA
  runtime's "insufficient" text): a line followed by one whose rest completes such a message across the break (a
  logger's continuation mark, Julia's ``│``, dropped) was one line; the message decides, so nothing else is joined.

A break at a blank (a mail client wraps between words and drops the blank) is joined with one blank; a break in a run
of ``-``/``=`` (a rule cut by a terminal) is joined with none. Linear, one pass; at most ``MAX_SEGMENTS`` lines join.
"""

from __future__ import annotations

import functools
import typing

from gpuhealth.lazyre import lazy_re
from gpuhealth.parsers.session import prompt_command

if typing.TYPE_CHECKING:
    from gpuhealth.knowledge.signatures import Signature

__all__ = ["MAX_SEGMENTS", "MAX_WRAPPED", "MIN_WRAPPED", "unwrap_lines"]

MAX_SEGMENTS = 4  # a line wrapped into more pieces than this is not a wrapped line
MAX_JOINED = 4096  # characters of a joined line
# nvidia-smi's rule lines ("+----+----+", "|====+====|"), not a markdown table's ("|---|---|": its rows vary in width)
_RULE = lazy_re(r"[ \t]{0,8}(?:\+[-=+]{10,400}\+|\|=[-=+|]{10,400}\|)\s*$")
# A kernel log's line prefix: dmesg's "[   12.345678]", dmesg -T's "[Mon Dec  1 10:00:00 2026]", syslog's and
# journald's "Dec  1 10:00:00 host", an ISO time.
LOG_PREFIX = lazy_re(r"\s{0,4}(?:\[\s{0,12}\d{1,10}\.\d{1,9}\]|"
                      r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]|"
                      r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)")
_RECORD_HEAD = lazy_re(r"[\w.-]{1,40}(?:\[\d{1,10}\])?: ")  # "NVRM: ", "modprobe: ": a record without its prefix
_SENTENCE = lazy_re(r"[A-Z][a-z]")  # a capitalised word: a sentence of the reporter's, unless a log line follows
_LOG_WORDS = ("NVRM", "nvidia", "Xid", "AER", "pcieport", "nouveau")  # lines of the GPU stack: the others are not read
MIN_WRAPPED, MAX_WRAPPED = 60, 80  # a wrapped piece filled the width: a mail client wraps at 72-80 columns, a
# terminal at 80 (a longer line was not wrapped at those widths)
_RULE_MARKS = ("+-", "+=", "++", "|-", "|=", "|+")  # a rule line holds one ([+|] then [-=+]: _RULE, _RULE_START)
_RULE_START = lazy_re(r"[ \t]{0,8}[+|][-=+]{10,400}$")
_RULE_END = lazy_re(r"[-=+]{1,400}[+|]\s*$")
_XID_HEAD = lazy_re(r"NVRM: Xid \([^)\n]{1,160}\):?\s{0,8}\d{1,6}\b")
_CONTINUATION = lazy_re(r"[ \t]{0,8}[│┃][ \t]?")  # Julia's logger marks a message's later lines with "│ "
_TOO_OLD_WINDOW = 400  # characters either side of the break a driver-too-old message is looked for in


def unwrap_lines(text: str) -> str:
    """``text`` with wrapped nvidia-smi table rows, Xid lines and GPU kernel-log lines joined (see the module
    docstring); the text itself when it has none."""
    if "|" not in text and "Xid" not in text and "NVRM" not in text and "nvidia" not in text and "CUDA" not in text:
        return text
    lines = text.splitlines()
    out: list[str] = []
    changed = False
    width = 0  # the width of the table being read: its last whole rule line's
    # What the text holds decides which joins can happen at a line of it as given (not glued): a rule or a table row
    # needs a rule's marks, an Xid line "NVRM: Xid", a log record one of the GPU stack's words; without them only a
    # driver-too-old message naming CUDA can cross a break (an `nvidia-smi -q`: its lines are not each looked at)
    joinable = (("+" in text or "|" in text) and any(mark in text for mark in _RULE_MARKS)) or "NVRM: Xid" in text
    logs = any(word in text for word in _LOG_WORDS)
    i = 0
    while i < len(lines):
        line = given = lines[i]
        i += 1
        segments = 1
        while i < len(lines) and segments < MAX_SEGMENTS and len(line) < MAX_JOINED:
            if segments == 1 and not (joinable or width) and "CUDA" not in line and "CUDA" not in lines[i]:
                break
            joined = _joined(line, lines[i], width)
            if joined is None:
                break
            line, i, segments, changed = joined, i + 1, segments + 1, True
        if segments == 1 and i < len(lines) and logs:
            run = _log_continuation(line, lines, i)
            if run:
                for piece in lines[i:i + run]:
                    line = _glue(line, piece, 0)
                i, changed = i + run, True
        if (joinable or line is not given) and _RULE.match(line):
            width = len(line.rstrip())
        elif line.lstrip()[:1] not in ("|", "+"):
            width = 0  # the table ended
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "") if changed else text


def _log_continuation(line: str, lines: list[str], at: int) -> int:
    """How many lines from ``at`` continue the kernel-log ``line`` a mail client or terminal wrapped: the record
    starts with a log prefix and names the GPU stack; each wrapped piece filled the width (``MIN_WRAPPED`` to
    ``MAX_WRAPPED`` characters); the pieces (at most ``MAX_SEGMENTS - 1``) have no prefix, indentation or prompt and
    are followed by the next prefixed line, or, when they do not start like a sentence, by a blank line or the end."""
    if not MIN_WRAPPED <= len(line) <= MAX_WRAPPED or not LOG_PREFIX.match(line) or not any(
            w in line for w in _LOG_WORDS):
        return 0
    run = 0
    previous = line
    while at + run < len(lines):
        piece = lines[at + run]
        if not piece.strip() or LOG_PREFIX.match(piece):
            break
        own_line = (piece[:1] in (" ", "\t", "|", "+") or _RECORD_HEAD.match(piece) is not None
                    or prompt_command(piece) is not None)
        if run == MAX_SEGMENTS - 1 or not MIN_WRAPPED <= len(previous) <= MAX_WRAPPED or own_line:
            return 0
        previous = piece
        run += 1
    sandwiched = at + run < len(lines) and lines[at + run].strip() != ""
    return run if run and (sandwiched or not _SENTENCE.match(lines[at])) else 0


def _joined(line: str, following: str, width: int) -> str | None:
    """``line`` and ``following`` as the one line they were, or None when ``following`` is a line of its own.
    ``width``: the table's width (0 outside a table)."""
    head, tail = line.lstrip(), following.strip()
    if not tail:
        return None
    glued = None
    if width and head[:1] == "|" and tail[:1] not in ("|", "+"):  # a row of the table
        short = len(line.rstrip()) + len(tail) < width + 2  # the rest of the row fits its width
        if line.rstrip()[-1:] != "|" or short:
            glued = _glue(line, following, width)
    elif _RULE_START.match(line) and _RULE_END.match(following):  # a rule line cut in its run of "-" or "="
        glued = line.rstrip() + tail
    elif "NVRM: Xid" in line and _XID_HEAD.search(line) is None:
        glued = _glue(line, following, 0)
        glued = glued if _XID_HEAD.match(glued, line.rfind("NVRM: Xid")) else None
    elif "CUDA" in line or "CUDA" in following:
        glued = _too_old_joined(line, following)
    if glued is None or prompt_command(following) is not None:  # a command typed after a cut-off paste
        return None
    return glued


def _glue(line: str, following: str, width: int) -> str:
    """The two pieces of a wrapped line: a rule cut mid-run joins as it was; words join with the blank the wrap ate,
    or in a table, with the blanks that bring the row to the table's width (the wrap broke in a column's padding)."""
    end, start = line.rstrip()[-1:], following.lstrip()[:1]
    rest = following.strip()
    if end in "-=" and start == end:
        return line.rstrip() + rest
    if line.endswith((" ", "\t")):  # format=flowed mail keeps the blank at the end of the wrapped line
        return line + following.lstrip()
    return line + " " * max(1, width - len(line) - len(rest)) + rest


def _too_old_joined(line: str, following: str) -> str | None:
    """``line`` and ``following`` joined when a "driver too old for this CUDA" message (a GH601 row of the catalogue)
    starts in ``line`` and ends in ``following``: with the blank the break ate, or with none (a terminal breaks inside
    a word). None when no such message crosses the break."""
    mark = _CONTINUATION.match(following)
    rest = following[mark.end():] if mark else following.lstrip()
    head = line.rstrip()
    for glue in (" ", ""):
        glued = head + glue + rest
        start = max(0, len(head) - _TOO_OLD_WINDOW)
        window = glued[start:len(head) + len(glue) + _TOO_OLD_WINDOW]
        folded = window.lower()
        for sig, literals in _too_old_rows():
            if literals is not None and not any(text in folded for text in literals):
                continue  # none of the words every match holds: the regex cannot match
            found = sig.regex.search(window)  # compiled here, on a row's first use
            if found and found.start() < len(head) - start < found.end():
                return glued
    return None


@functools.cache
def _too_old_rows() -> tuple[tuple[Signature, tuple[str, ...] | None], ...]:
    """The catalogue's GH601 rows: each row, and the literals (lower-cased) one of which every match holds (None:
    none known, the regex always runs). A row's regex is compiled only when a window holds one of its literals (most
    pastes with "CUDA" in them hold none: compiling the 16 rows was a tenth of an analysis's start-up)."""
    from gpuhealth.knowledge.signatures import known_literals, signatures

    rows = []
    for sig in signatures():
        if sig.code == "GH601":
            found = known_literals(sig.pattern)
            rows.append((sig, tuple(text.lower() for text in found[0]) if found else None))
    return tuple(rows)
