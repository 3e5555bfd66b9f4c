"""Line splitting shared by the listing parsers: the one place that bounds pasted text before any pattern
sees it (how many lines are read, how long a line may be)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice

from gpuhealth.model import ParseError


def text_lines(text: object, what: str, *, max_lines: int, max_line: int,
               strip: Callable[[str], str] | None = None) -> list[str]:
    """The first ``max_lines`` lines of ``text``, each cut at ``max_line`` characters and then passed through
    ``strip`` (``str.strip``, ``str.rstrip``) when given. ``\\r\\n`` and a lone ``\\r`` end a line like
    ``\\n``. ParseError ``"<what> must be text"`` for anything but a str."""
    if not isinstance(text, str):
        raise ParseError(f"{what} must be text")
    lines = (line[:max_line] for line in islice(text.splitlines(), max_lines))
    return [strip(line) for line in lines] if strip is not None else list(lines)
