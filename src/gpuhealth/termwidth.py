"""The width text is laid out for (issue 24: reports and tables in 80 columns).

On a terminal, its width; ``COLUMNS``, when set to a number, wins (as for rich and most tools). Piped
(stdout not a terminal, no ``COLUMNS``), nothing is wrapped: a line stays whole for grep, for a file, and
for whatever reads it next. Commands are never wrapped at any width (the renderers keep them whole).
"""

from __future__ import annotations

import os
import shutil
import sys

UNWRAPPED = 10_000  # a rich Console's width that wraps nothing: what a pipe gets


def columns() -> int | None:
    """The terminal's width (or ``COLUMNS``), or None when output is piped: lay text out unwrapped."""
    value = os.environ.get("COLUMNS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):  # a closed or replaced stdout: treat as piped
        pass
    return None


def console_width() -> int:
    """The width to give a rich Console: the terminal's, or ``UNWRAPPED`` when piped."""
    return columns() or UNWRAPPED


def fitted(line: str, hang: str = "    ") -> str:
    """``line`` wrapped to the terminal's width, each continuation under ``hang`` (a long path is broken where the
    line ends); piped, the line as it is."""
    width = columns()
    if width is None or len(line) <= width:
        return line
    import textwrap  # only for a line too long for the terminal

    return "\n".join(textwrap.wrap(line, width, subsequent_indent=hang, break_on_hyphens=False)) or line
