"""Regular expressions compiled on first use: ``lazy_re`` in place of ``re.compile`` at module level.

Why: the parsers and checks hold about 250 module-level patterns, and one command uses few of them (a
``check --from`` of an 8-GPU bundle about 40): compiling all of them at import was a large part of the
command's start-up. ``lazy_re(pattern, flags)`` returns a stand-in that compiles on its first method or
attribute use and from then on hands out the compiled pattern's own bound methods (cached on the
instance, so a hot loop pays one dictionary lookup, as with a compiled pattern).

It is duck-typed: ``search``, ``match``, ``fullmatch``, ``finditer``, ``findall``, ``sub``, ``subn``,
``split``, ``groups``, ``groupindex``, ``flags`` all work; ``isinstance(x, re.Pattern)`` is False and the
``re`` module's functions (``re.sub(PATTERN, ...)``) need ``.compiled``. A bad pattern raises
``re.error`` at first use rather than at import; tests/test_lazyre.py compiles every module-level
pattern of the package so that stays a test failure, not a user's.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

__all__ = ["LazyPattern", "lazy_re"]


class LazyPattern:
    """A pattern compiled on first use (see the module docstring)."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags

    @property
    def compiled(self) -> re.Pattern[Any]:
        """The compiled pattern (compiled now if it was not yet)."""
        found = self.__dict__.get("_compiled")
        if found is None:
            found = self.__dict__["_compiled"] = re.compile(self.pattern, self._flags)
        return cast("re.Pattern[Any]", found)

    def __getattr__(self, name: str) -> Any:
        # Called only for names not found normally: the first use of each method. Keep the compiled
        # pattern's attribute on the instance, so later lookups find it directly.
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled, name)
        self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return f"lazy_re({self.pattern!r}, {self._flags!r})"


def lazy_re(pattern: AnyStr, flags: int | re.RegexFlag = 0) -> re.Pattern[AnyStr]:
    """A pattern compiled on first use; typed as the compiled pattern it stands in for."""
    return cast("re.Pattern[AnyStr]", LazyPattern(pattern, int(flags)))
