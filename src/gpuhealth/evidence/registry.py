"""The evidence-kind registry: what a piece of pasted or attached text is, and what it tells the checks.

Every kind of evidence `gpuhealth analyze` reads (an ``nvidia-smi -q`` report, ``dkms status``, ``lspci``,
a kernel log...) is registered here once, the way checks are registered in ``checks/registry.py``.
A kind declares:

- ``name``: a stable slug (``"dkms-status"``), shown by ``analyze -v`` and used in the tests;
- ``commands``: regular expressions for the command lines that produce it. A pasted terminal session
  is routed by its command first. Each pattern is matched (``re.match``, so anchored at the start)
  against the *normalised* command: the first command of a pipeline, with ``sudo``, ``env VAR=...``,
  ``time`` and the program's directory removed and blanks collapsed
  (``sudo /usr/bin/nvidia-smi  -q | less`` -> ``nvidia-smi -q``; see :func:`normalise_command`);
- ``recognise(text) -> bool``: a content sniff, for whole files and for blocks whose command is
  unknown. It must be cheap (look at the head of the text) and must never raise;
- ``parse(text, source) -> dict``: snapshot field overlays, e.g. ``{"install": InstallState(dkms=...)}``.
  Keys are ``Snapshot`` field names; ``analyze`` merges the overlays of every piece into one snapshot
  (dataclass fields given are laid over what is there, tuples are concatenated, dicts updated, the
  richest ``smi`` report is kept). ``source`` names the file or command, for evidence lines. A parser
  may raise ``ParseError`` (the piece is then reported as "looked like X, but ..."), nothing else;
- ``priority``: content sniffs run from the highest priority down, so a specific kind must rank above
  a loose one (``smi-xml`` 1000 ... ``kernel-log`` 120, ``app-log`` 100). Among kinds whose command
  pattern matches, the highest priority whose ``recognise`` accepts the text wins.

How to add a kind: write the parser in ``parsers/`` (pure, text in, model out, fuzzed), then in any
module of this package (every module named in ``KIND_MODULES`` is imported by :func:`load`)::

    from gpuhealth.evidence.registry import evidence_kind

    @evidence_kind("dkms-status", commands=(r"dkms status",), recognise=_looks_like_dkms, priority=420)
    def _dkms(text: str, source: str) -> dict[str, Any]:
        return {"install": InstallState(dkms=parse_dkms_status(text))}

and add a real example of its output to ``tests/test_evidence_kinds.py``'s table (the test checks that
every registered kind has one, that it is recognised and that it parses).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from gpuhealth.lazyre import guarded_re, lazy_re
from gpuhealth.records import record

Recognise = Callable[[str], bool]
Parse = Callable[[str, str], dict[str, Any]]


@record
class EvidenceKind:
    name: str
    commands: tuple[re.Pattern[str], ...]
    recognise: Recognise
    parse: Parse
    priority: int
    doc: str = ""
    # the lines the kind's program prints, known by their form: read by its parser even where the output repeats them
    # (p2pBandwidthLatencyTest's "Device=0 CANNOT Access Peer Device=2" lines and its connectivity matrix say the same)
    owns: Callable[[str], bool] | None = None

    def produced_by(self, command: str) -> bool:
        """True when the normalised ``command`` is one that prints this kind."""
        return any(p.match(command) for p in self.commands)


KINDS: dict[str, EvidenceKind] = {}


_SLUG_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def is_slug(text: str) -> bool:
    """``[a-z0-9]+(?:-[a-z0-9]+)*`` in full, without compiling a pattern at every start-up."""
    return all(part and _SLUG_CHARACTERS.issuperset(part) for part in text.split("-"))


def register(name: str, *, commands: Iterable[str] = (), recognise: Recognise, parse: Parse,
             priority: int = 300, owns: Callable[[str], bool] | None = None) -> EvidenceKind:
    """Register one kind (see the module docstring); a name registered twice is a bug."""
    if not is_slug(name):
        raise ValueError(f"bad evidence kind name: {name!r}")
    if name in KINDS:
        raise ValueError(f"evidence kind registered twice: {name}")
    kind = EvidenceKind(name, tuple(_command_pattern(c) for c in commands), recognise, parse, priority, owns=owns)
    KINDS[name] = kind
    _ORDER.clear()
    return kind


def _command_pattern(pattern: str) -> re.Pattern[str]:
    """A kind's command pattern, compiled on first use; behind a test of the words a command it matches starts with,
    where its text names them ("nvidia-smi\\b...", "(?:cat|less|grep\\b.*?)\\s+..."): routing one command asked
    every kind's patterns, and compiled all of them (about 80, 5-10 ms of a session's first analysis). The words are
    read on the first command asked, not at start-up (evidence without a command never needs them)."""
    return guarded_re(pattern, may=_StartsWithItsWords(pattern), at_start=True)


class _StartsWithItsWords:
    """A guard: the command starts with one of the words its pattern's text begins with (``_leading_words``, read on
    first use); every command passes where the text names none."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.words: tuple[str, ...] | None = None
        self.read = False

    def __call__(self, command: str) -> bool:
        if not self.read:
            self.words, self.read = _leading_words(self.pattern), True
        return self.words is None or command.startswith(self.words)


_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def _leading_words(pattern: str) -> tuple[str, ...] | None:
    """The texts one of which a string that ``pattern`` matches at its start begins with: the plain characters that
    begin the pattern, or each alternative of a group that begins it (a group not made optional); None when one of
    them begins with syntax (a class, an escape, a group)."""
    if pattern.startswith("(?:"):
        alternatives, end = _alternatives_until_close(pattern, 3)
        if alternatives is None or pattern[end:end + 1] in ("?", "*", "+", "{"):
            return None
    else:
        alternatives, end = _alternatives_until_close(pattern, 0)
        if alternatives is None or end != len(pattern):
            return None
    runs = []
    for alternative in alternatives:
        run = ""
        for index, char in enumerate(alternative):
            if char in _SPECIAL:
                break
            if alternative[index + 1:index + 2] in ("?", "*", "+", "{"):
                break  # the character is optional or repeated: the run ends before it
            run += char
        if not run:
            return None
        runs.append(run)
    return tuple(runs)


def _alternatives_until_close(pattern: str, start: int) -> tuple[list[str] | None, int]:
    """The top-level alternatives from ``start`` to the ``)`` that closes them (with ``start`` 0: to the end), and the
    index after that ``)``; None for an unbalanced group or class."""
    alternatives, depth, begin, i = [], 0, start, start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i += 1 + pattern.startswith("^", i + 1)
            i += pattern.startswith("]", i)
            while i < len(pattern) and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            if i >= len(pattern):
                return None, i
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                if start == 0:
                    return None, i  # a ")" that closes nothing
                alternatives.append(pattern[begin:i])
                return alternatives, i + 1
            depth -= 1
        elif char == "|" and depth == 0:
            alternatives.append(pattern[begin:i])
            begin = i + 1
        i += 1
    if start != 0 or depth != 0:
        return None, i
    alternatives.append(pattern[begin:])
    return alternatives, len(pattern)


def evidence_kind(name: str, *, commands: Iterable[str] = (), recognise: Recognise,
                  priority: int = 300, owns: Callable[[str], bool] | None = None) -> Callable[[Parse], Parse]:
    """Decorator form of :func:`register`: the decorated function is the kind's parser."""

    def wrap(parse: Parse) -> Parse:
        register(name, commands=commands, recognise=recognise, parse=parse, priority=priority, owns=owns)
        return parse

    return wrap


_ORDER: list[EvidenceKind] = []
_LOADED = False


# The modules of this package that register kinds, named here rather than found by a scan of the package
# (pkgutil and its directory listing cost every analysis' start-up); tests/test_evidence_kinds.py checks the
# list against the package's files.
KIND_MODULES = ("banners", "builtin", "containers", "facts", "listings", "package_logs", "program", "prose",
                "toolchain")


def load() -> None:
    """Import every module of this package once: importing a module registers its kinds."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for name in KIND_MODULES:
        importlib.import_module(f"gpuhealth.evidence.{name}")


def ordered() -> list[EvidenceKind]:
    """Every kind, highest priority first (ties by name, so the order never depends on import order)."""
    load()
    if not _ORDER:
        _ORDER.extend(sorted(KINDS.values(), key=lambda k: (-k.priority, k.name)))
    return _ORDER


def identify(text: str) -> str | None:
    """The name of the kind ``text`` is, by content alone, or None."""
    kind = sniff(text)
    return kind.name if kind else None


def sniff(text: str, candidates: Iterable[EvidenceKind] | None = None) -> EvidenceKind | None:
    for kind in ordered() if candidates is None else candidates:
        if kind.recognise(text):
            return kind
    return None


def route(command: str | None, text: str) -> EvidenceKind | None:
    """The kind of a block: by its command when a kind claims it and accepts the text, else by content."""
    if command:
        normal = normalise_command(command)
        claimed = [k for k in ordered() if k.produced_by(normal)]
        found = sniff(text, claimed)
        if found is not None:
            return found
    return sniff(text)


def kinds_for_command(command: str) -> list[str]:
    """Names of the kinds a command line prints, highest priority first."""
    normal = normalise_command(command)
    return [k.name for k in ordered() if k.produced_by(normal)]


_PREFIX_WORDS = {"sudo", "time", "env", "command", "exec", "nohup", "doas"}
_ASSIGN = lazy_re(r"[A-Za-z_][A-Za-z0-9_]*=")


def normalise_command(command: str) -> str:
    """The first command of a pipeline, without sudo/env/time prefixes and the program's directory."""
    first = re.split(r"\s*(?:\|\|?|&&|;)\s*", command.strip(), maxsplit=1)[0]
    import shlex  # here, not at import: most evidence names no command

    try:
        words = shlex.split(first, posix=True)
    except ValueError:  # an unbalanced quote: split on blanks instead
        words = first.split()
    prefix = ""
    while words and (words[0] in _PREFIX_WORDS or _ASSIGN.match(words[0]) or
                     (words[0].startswith("-") and len(words) > 1)):
        prefix = words[0] if words[0] in _PREFIX_WORDS else prefix
        words = words[1:]  # "sudo -E", "env A=1", "LD_LIBRARY_PATH=x python"
    if not words or (words[0].startswith("-") and prefix):
        return prefix  # "env", "sudo env -0", "env | grep CUDA": the prefix word was the command itself
    words[0] = words[0].rsplit("/", 1)[-1]
    return " ".join(words)
