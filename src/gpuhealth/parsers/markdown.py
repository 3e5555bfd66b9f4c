"""Markdown around pasted evidence: an issue body or a forum post holds the evidence in fenced code blocks.

People paste a session, a log or an ``nvidia-smi`` table into an issue between fences (```` ``` ```` or ``~~~``,
with or without a language tag such as ``console`` or ``shell``, indented when inside a list item), fold it into
``<details>`` blocks, or quote it with ``> ``. Read as one text, the prose around the evidence hides it: a sniff
sees the prose at the head, a session's last command takes the prose after it for output, and two fenced
listings in one file become one unreadable piece. :func:`split_markdown` gives the parts: each fence's content
(dedented by the fence's own indentation) is a part of its own, the prose between fences is a part, and quoted
lines lose their ``>`` markers. The fences follow CommonMark's rules: an opening run of three or more backticks
or tildes, a closing run of the same character at least as long; a fence left open runs to the end of the text.

A ``>`` at a line's start is a quote only where it cannot be a shell's continuation prompt (PS2): not right after
a prompt line or a line ending in a backslash. Bounded: texts up to ``MAX_MARKDOWN_CHARS``, one pass over the lines.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import guarded_re, has, has_folded, lazy_re
from gpuhealth.parsers.session import prompt_command
from gpuhealth.records import record

__all__ = ["MAX_MARKDOWN_CHARS", "Part", "is_fold_tag", "split_markdown"]

MAX_MARKDOWN_CHARS = 4 * 1024 * 1024  # larger texts are files, not posts
MAX_QUOTE_DEPTH = 4  # "> > > text": nested quotes lose this many markers at most
_FENCE = lazy_re(r"(?P<indent>[ \t]{0,16})(?P<fence>`{3,64}|~{3,64})[ \t]*(?P<info>[^`\n]{0,200}?)[ \t]*$")
# Lines that are only GitHub's folding tags: <details>, </details>, and <summary>...</summary> inside a fold (an
# nvidia-smi -x report has a <summary> element of its own, outside any <details>).
_FOLD_TAG = lazy_re(r"[ \t]{0,16}(?:</?(?:details|summary)\b[^<>\n]{0,200}>[^<>\n]{0,300}){1,6}$", re.I)
_DETAILS = guarded_re(r"[ \t]{0,16}<details\b", re.I, may=has_folded("<details"))
_QUOTE = guarded_re(r"[ \t]{0,3}>(?!>)[ \t]?", may=has(">"))


@record
class Part:
    """One part of a markdown text: a fence's content (``fenced``) or the prose between fences."""

    label: str  # "fenced at line 5" / "line 1", for the evidence's name
    text: str
    fenced: bool = False
    info: str = ""  # the fence's language tag ("console", "shell", "")


def split_markdown(text: str) -> list[Part] | None:
    """The parts of a markdown text, or None when it has no fence, folding tag or quoted line (read it as it is)."""
    if len(text) > MAX_MARKDOWN_CHARS or not any(mark in text for mark in ("```", "~~~", "<details", "<DETAILS", ">")):
        return None
    original = text.splitlines()
    lines = _dequoted(original)
    structured = lines is not original  # quote markers were taken off
    parts: list[Part] = []
    prose: list[str] = []
    prose_start = 1
    fence: tuple[str, str, int, str] | None = None  # the open fence: (marker, indentation, line number, tag)
    content: list[str] = []
    folds = 0  # <details> tags seen: a <summary> line is a fold's only after one
    for number, line in enumerate(lines, 1):
        if fence is not None:
            stripped = line.strip()
            if stripped[:1] == fence[0][0] and stripped == fence[0][0] * len(stripped) and len(stripped) >= len(
                    fence[0]):
                parts.append(Part(f"fenced at line {fence[2]}", "\n".join(content), True, fence[3]))
                fence, content, prose_start = None, [], number + 1
            else:
                content.append(_dedent(line, fence[1]))
            continue
        m = _FENCE.match(line)
        if m is not None:
            _flush(parts, prose, prose_start)
            fence = (m["fence"], m["indent"], number, m["info"].strip().lower())
            content, prose, structured = [], [], True
            continue
        folds += 1 if _DETAILS.match(line) else 0
        if folds and _FOLD_TAG.match(line):  # a folding tag ends the text before it; its summary is prose of its own
            _flush(parts, prose, prose_start)
            parts.append(Part(f"line {number}", line.strip()))
            prose, prose_start, structured = [], number + 1, True
            continue
        if not prose:
            prose_start = number
        prose.append(line)
    if fence is not None:  # left open: it runs to the end of the text
        parts.append(Part(f"fenced at line {fence[2]}", "\n".join(content), True, fence[3]))
    _flush(parts, prose, prose_start)
    if not structured:
        return None
    return [p for p in parts if p.text.strip()] or None


def is_fold_tag(text: str) -> bool:
    """Whether a part is only a folding tag line (``<details>``, ``<summary>nvidia-smi</summary>``): a label."""
    return "\n" not in text.strip() and bool(_FOLD_TAG.match(text.strip()))


def _flush(parts: list[Part], prose: list[str], start: int) -> None:
    if any(line.strip() for line in prose):
        parts.append(Part(f"line {start}", "\n".join(prose)))


def _dedent(line: str, indent: str) -> str:
    """A fenced line without the spaces its fence was indented by (a fence inside a list item)."""
    cut = 0
    while cut < len(indent) and cut < len(line) and line[cut] in " \t":
        cut += 1
    return line[cut:]


def _dequoted(lines: list[str]) -> list[str]:
    """The lines with markdown quote markers taken off (the same list when no line is quoted). A ``>`` after a
    prompt line or a line ending in a backslash is the shell's continuation prompt (PS2): kept, with the ``>``
    lines that follow it."""
    out: list[str] = []
    changed = False
    state = ""  # "quote" inside a quoted run, "ps2" inside continuation lines
    previous = ""
    for line in lines:
        m = _QUOTE.match(line)
        if m is None:
            state, previous = "", line
            out.append(line)
            continue
        if state == "ps2" or (state == "" and _continues(previous)):
            state, previous = "ps2", line
            out.append(line)
            continue
        for _ in range(MAX_QUOTE_DEPTH):
            line = line[m.end():]
            m = _QUOTE.match(line)
            if m is None:
                break
        out.append(line)
        state, changed = "quote", True
    return out if changed else lines


def _continues(line: str) -> bool:
    """Whether a ``>`` on the next line would be the shell asking for the rest of this command."""
    stripped = line.rstrip()
    return stripped.endswith("\\") or (bool(stripped) and prompt_command(stripped) is not None)
