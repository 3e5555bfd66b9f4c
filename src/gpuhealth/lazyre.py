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

``guarded_re(pattern, flags, may=...)`` adds a cheap necessary test: ``may(text)`` must be True for every
text the pattern finds a match in. ``search``, ``match``, ``fullmatch``, ``findall`` and ``finditer`` on a
text ``may`` refuses answer "no match" without compiling or running the pattern. With ``at_start=True`` the
guard need only hold for texts the pattern matches at their start, and guards ``match`` and ``fullmatch``
alone. Sniffing a piece of
evidence asks dozens of kinds "is this yours?", and most answer no: with a guard, a kind whose literal
text is absent costs a substring test instead of a compile. ``has(...)``, ``has_folded(...)`` and
``starts(...)`` build the usual guards; tests/test_startup.py checks every guard of the package against
strings its pattern matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, AnyStr, cast

__all__ = ["GUARDED", "GuardedPattern", "LazyPattern", "guarded_re", "has", "has_folded", "lazy_re", "starts"]


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


class GuardedPattern(LazyPattern):
    """A lazy pattern behind a necessary test (see the module docstring)."""

    def __init__(self, pattern: str, flags: int, may: Callable[[str], bool], at_start: bool = False) -> None:
        super().__init__(pattern, flags)
        self.may = may
        self.at_start = at_start
        GUARDED.append(self)

    # With a position argument the guard (written for whole texts) is not consulted.
    def search(self, string: str, *args: int) -> re.Match[str] | None:
        return self.compiled.search(string, *args) if args or self.at_start or self.may(string) else None

    def match(self, string: str, *args: int) -> re.Match[str] | None:
        return self.compiled.match(string, *args) if args or self.may(string) else None

    def fullmatch(self, string: str, *args: int) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, *args) if args or self.may(string) else None

    def findall(self, string: str, *args: int) -> list[Any]:
        return self.compiled.findall(string, *args) if args or self.at_start or self.may(string) else []

    def finditer(self, string: str, *args: int) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, *args) if args or self.at_start or self.may(string) else iter(())

    def __repr__(self) -> str:
        return f"guarded_re({self.pattern!r}, {self._flags!r})"


GUARDED: list[GuardedPattern] = []  # every guarded pattern made, for the tests


def guarded_re(pattern: str, flags: int | re.RegexFlag = 0, *, may: Callable[[str], bool],
               at_start: bool = False) -> re.Pattern[str]:
    """A lazy pattern that is not compiled or run on a text ``may`` refuses; ``may(text)`` must be True for
    every text the pattern finds a match in (``at_start``: matches at its start; only match/fullmatch guarded)."""
    return cast("re.Pattern[str]", GuardedPattern(pattern, int(flags), may, at_start))


def has(*needles: str) -> Callable[[str], bool]:
    """A guard: the text contains one of ``needles`` (for a pattern every match of which contains one)."""
    if len(needles) == 1:
        needle = needles[0]
        return lambda text: needle in text

    def may(text: str) -> bool:
        for needle in needles:  # (a loop: a generator costs more than the few substring tests)
            if needle in text:
                return True
        return False
    return may


def has_folded(*needles: str) -> Callable[[str], bool]:
    """``has`` for a case-insensitive pattern: lower-case ASCII ``needles``, looked for in the lower-cased text.
    A text with non-ASCII characters always passes: Unicode case folding (the Kelvin sign matches "k") is
    not ``str.lower()``."""
    if any(not needle.isascii() or needle != needle.lower() for needle in needles):
        raise ValueError(f"has_folded needs lower-case ASCII needles: {needles!r}")

    def may(text: str) -> bool:
        if not text.isascii():
            return True
        lowered = text.lower()
        for needle in needles:
            if needle in lowered:
                return True
        return False
    return may


def starts(*prefixes: str) -> Callable[[str], bool]:
    """A guard: the text starts with one of ``prefixes`` (for a pattern anchored at the start, without re.M)."""
    return lambda text: text.startswith(prefixes)
