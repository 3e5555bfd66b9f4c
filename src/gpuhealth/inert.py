"""Text from evidence made inert before it reaches a terminal, a script comment or a log line.

Evidence is written by strangers: a process name in an Xid line is chosen by whoever started the process,
a bundle's hostname by whoever built the bundle. Printed raw, an escape sequence in it retitles the window
(OSC 0), writes the clipboard (OSC 52), clears the screen (CSI 2J) or hides the text after it (CSI 8m);
a newline in it ends a comment line in a generated script, so the next line runs.

Every text renderer passes evidence through ``visible`` (or ``one_line`` where the value must stay on one
line). Machine formats (JSON) keep the exact text: their consumers escape it themselves.
"""

from __future__ import annotations

import re

# C0 controls except TAB and LF, DEL, the C1 controls (U+0080..U+009F: CSI, OSC and ST have 8-bit forms),
# and the Unicode format characters that reorder or hide text (bidi overrides and isolates, zero-width
# joiners are left alone as they occur in names; the bidi controls never do in tool output).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``); tabs and newlines kept."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def one_line(text: str) -> str:
    """``text`` as one inert line: newlines and tabs too become escapes (a script comment, a header field)."""
    return _CONTROL_OR_NEWLINE.sub(_escape, text) if _CONTROL_OR_NEWLINE.search(text) else text
