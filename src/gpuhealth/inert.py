"""Text from evidence made inert before it reaches a terminal, a script comment or a log line.

Evidence is written by strangers: a process name in an Xid line is chosen by whoever started the process,
a bundle's hostname by whoever built the bundle. Printed raw, an escape sequence in it retitles the window
(OSC 0), writes the clipboard (OSC 52), clears the screen (CSI 2J) or hides the text after it (CSI 8m);
a newline in it ends a comment line in a generated script, so the next line runs.

Every text renderer passes evidence through ``visible`` (or ``one_line`` where the value must stay on one
line); whatever prints with rich makes its Console with ``console()``, which passes every rendered segment
through ``visible``. Machine formats (JSON, the webhook body) keep the exact text: their consumers escape it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpuhealth.lazyre import lazy_re

if TYPE_CHECKING:
    from rich.console import Console

# C0 controls except TAB and LF, DEL, the C1 controls (U+0080..U+009F: CSI, OSC and ST have 8-bit forms),
# and the Unicode format characters that reorder or hide text (bidi overrides and isolates, zero-width
# joiners are left alone as they occur in names; the bidi controls never do in tool output).
_CONTROL = lazy_re("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = lazy_re("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``); tabs and newlines kept."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def one_line(text: str) -> str:
    """``text`` as one inert line: newlines and tabs too become escapes (a script comment, a header field)."""
    return _CONTROL_OR_NEWLINE.sub(_escape, text) if _CONTROL_OR_NEWLINE.search(text) else text


def console(**options: Any) -> Console:
    """A rich Console whose printed text is inert: every segment of text passes through ``visible``.

    rich keeps ESC (it drops only BEL, BS, VT, FF and CR), so a sequence ended by ST still works when
    evidence is printed through a plain Console. This one escapes control characters in whatever it
    renders (a report line, a table cell, a live view), while rich's own styles and cursor moves (emitted
    from styles and control segments, never from text) are untouched. A plain string (a table cell) is
    escaped before rich measures it, so its column is as wide as what is shown. Every command that prints evidence
    with rich makes its Console here. ``markup`` is off unless asked for: markup in evidence (``[link=…]``)
    would be interpreted; a caller that passes ``markup=True`` escapes what it interpolates.
    """
    global _InertConsole
    if _InertConsole is None:
        _InertConsole = _console_class()
    options.setdefault("markup", False)
    return _InertConsole(**options)


_InertConsole: Any = None  # the class, made on first use: rich is not imported with this module


def _console_class() -> type:
    from rich.console import Console as RichConsole
    from rich.segment import Segment

    class InertConsole(RichConsole):
        def render_str(self, text: str, **options: Any) -> Any:  # a str is escaped before it is measured
            return super().render_str(visible(text), **options)

        def render(self, renderable: Any, options: Any = None) -> Iterator[Segment]:
            for segment in super().render(renderable, options):
                if segment.control is None and _CONTROL.search(segment.text):
                    yield Segment(visible(segment.text), segment.style)
                else:
                    yield segment

    return InertConsole
