"""gpuhealth's own exit status and the one exception behind it (only click is imported, so every command
module can raise it without loading anything heavy).

Exit 0 healthy or info only, 1 warnings, 2 critical: the verdict. 3: gpuhealth itself could not run (a usage
error, input it cannot read, a crash), with one line on stderr naming the file or option and why.
"""

from __future__ import annotations

import click

EXIT_CANNOT_RUN = 3


class CannotRun(click.ClickException):
    """gpuhealth could not run: exit 3 with this one line. Every command raises this class, never its own."""

    exit_code = EXIT_CANNOT_RUN
