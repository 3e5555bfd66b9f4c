"""Tables of sourced facts (Xid catalogue, tool error messages); each row names its source."""

from __future__ import annotations

import os


def read_table(name: str) -> str:
    """One of this package's data files as text (UTF-8, universal newlines, as importlib.resources reads it).

    Read from beside this module, where an installed or checked-out package keeps it. importlib.resources is
    used only when that fails (a package inside a zip): importing it brings zipfile and tempfile, which cost
    every command's start-up.
    """
    try:
        with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        from importlib import resources

        return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
