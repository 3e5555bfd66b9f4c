"""Module-level patterns are compiled on first use (gpuhealth/lazyre.py), and every one of them compiles.

A lazy pattern turns a bad regex from an import error into a first-use error, so this test compiles
every module-level pattern of every module in the package; it also checks the stand-in answers as the
compiled pattern does, and that importing the CLI's command path compiles none of them.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from typing import Any

import pytest

import gpuhealth
from gpuhealth.lazyre import LazyPattern, lazy_re

MODULES = sorted(m.name for m in pkgutil.walk_packages(gpuhealth.__path__, "gpuhealth.")
                 if not m.name.endswith("__main__"))


def lazy_patterns(value: Any, depth: int = 0) -> list[LazyPattern]:
    """The lazy patterns in a module global: directly, or inside tuples, lists, dicts and sets."""
    if isinstance(value, LazyPattern):
        return [value]
    if depth > 3:
        return []
    if isinstance(value, dict):
        return [p for v in (*value.keys(), *value.values()) for p in lazy_patterns(v, depth + 1)]
    if isinstance(value, (tuple, list, set, frozenset)):
        return [p for v in value for p in lazy_patterns(v, depth + 1)]
    return []


def test_every_module_level_pattern_compiles():
    found = 0
    for name in MODULES:
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            for pattern in lazy_patterns(value):
                try:
                    assert pattern.compiled.pattern == pattern.pattern
                except re.error as exc:
                    pytest.fail(f"{name}.{attribute}: {pattern.pattern!r}: {exc}")
                found += 1
    assert found >= 200  # the package's patterns are lazy: this test is not vacuous


def test_the_stand_in_answers_as_the_compiled_pattern():
    text = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\nsecond line"
    for pattern, flags in [(r"Xid \((?P<dev>[^)]{0,40})\): (?P<code>\d+)", 0), (r"^second", re.M),
                           (r"FALLEN", re.I), (r"\d+", 0), (r"nothing here", 0)]:
        lazy, real = lazy_re(pattern, flags), re.compile(pattern, flags)
        for method, args in [("search", (text,)), ("match", (text,)), ("fullmatch", (text,)),
                             ("findall", (text,)), ("sub", ("#", text)), ("subn", ("#", text)), ("split", (text,))]:
            got, want = getattr(lazy, method)(*args), getattr(real, method)(*args)
            if isinstance(want, re.Match):
                assert got is not None and (got.span(), got.groups()) == (want.span(), want.groups())
            else:
                assert got == want, (pattern, method)
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
        assert (lazy.groups, lazy.groupindex, lazy.flags, lazy.pattern) == \
               (real.groups, real.groupindex, real.flags, real.pattern)
    assert lazy_re(rb"\x00").search(b"a\x00") is not None  # bytes patterns too


def test_a_bad_pattern_fails_at_first_use():
    bad = lazy_re(r"(unclosed")
    with pytest.raises(re.error):
        bad.search("x")


def test_the_command_path_compiles_nothing_at_import():
    code = ("import gpuhealth.cli, gpuhealth.checks.engine, gpuhealth.collect, gpuhealth.analyze, sys\n"
            "from gpuhealth.lazyre import LazyPattern\n"
            "for m in list(sys.modules.values()):\n"
            "    if getattr(m, '__name__', '').startswith('gpuhealth'):\n"
            "        for k, v in vars(m).items():\n"
            "            if isinstance(v, LazyPattern) and '_compiled' in v.__dict__: print(m.__name__, k)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    # the registries check each check's code and slug, and each evidence kind's name, as they register (at import)
    registering = {"", "gpuhealth.checks.registry _CODE", "gpuhealth.checks.registry _SLUG",
                   "gpuhealth.evidence.registry _SLUG"}
    assert set(out.stdout.split("\n")) - registering == set()


def test_no_module_compiles_a_pattern_at_import():
    """A module-level ``re.compile`` (or ``re.search(...)`` with a string pattern) runs at every start-up of every
    command that imports its module, used or not: ``lazy_re`` instead. Registering a check or an evidence kind
    compiles its lazy code and slug patterns, which is through ``lazyre``, not module code, and allowed."""
    code = ("import importlib, pkgutil, re, sys\n"
            "import gpuhealth\n"
            "found = set()\n"
            "original = re._compile\n"
            "def spy(pattern, flags):\n"
            "    caller = sys._getframe(2)  # re._compile <- re.compile (or re.search ...) <- its caller\n"
            "    name = caller.f_globals.get('__name__', '')\n"
            "    if caller.f_code.co_name == '<module>' and name.startswith('gpuhealth'):\n"
            "        found.add(f'{name}:{caller.f_lineno}')\n"
            "    return original(pattern, flags)\n"
            "re._compile = spy\n"
            "for m in pkgutil.walk_packages(gpuhealth.__path__, 'gpuhealth.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n"
            "print('\\n'.join(sorted(found)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == [], out.stdout
