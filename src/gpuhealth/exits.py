"""gpuhealth's own exit status and the one exception behind it (only click and the small ``inert`` are imported,
so every command module can raise it without loading anything heavy).

Exit 0 healthy or info only, 1 warnings, 2 critical: the verdict. 3: gpuhealth itself could not run (a usage
error, input it cannot read, a crash), with one line on stderr naming the file or option and why.
"""

from __future__ import annotations

import click

from gpuhealth.inert import one_line

EXIT_CANNOT_RUN = 3


class CannotRun(click.ClickException):
    """gpuhealth could not run: exit 3 with this one line. Every command raises this class, never its own.

    The line often quotes input (a file name, a parse error's text): it is made inert (one line, control
    characters shown as escapes) here, once for every message."""

    exit_code = EXIT_CANNOT_RUN

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))
