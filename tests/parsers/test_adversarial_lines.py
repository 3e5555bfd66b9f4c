"""Every parser on adversarial lines: long runs of repeated tokens without a newline, within a time budget.

A regular expression that backtracks (``a.*b`` searched in a line of ``a``, ``\\s*X`` over a run of
blanks, nested or overlapping quantifiers) turns a hostile line of a few hundred KB into minutes of CPU.
The tokens are the words of each module's own patterns plus generic ones (blanks, digits, separators);
the seeds are real line starts, so that a pattern's later parts are reached too. A linear parser takes
milliseconds on these; a quadratic one takes seconds.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

import gpuhealth.knowledge
import gpuhealth.parsers
from gpuhealth import analyze
from gpuhealth.model import ParseError

LENGTH = 20_000  # characters per adversarial line in the sweep: a quadratic pattern already takes seconds
LONG = 200_000  # the cases named in the issue, and the commonest shapes, at full size
BUDGET_S = 0.3  # CPU seconds per input: a linear pass over 20 KB takes a few ms
GENERIC = (" ", "\t", "a", "0", "0x0 ", ":", "|", ",", "=", "a,", "a ", "a:", "a=b ", "-", ".", "[", "(",
           "x ", "0.", "a0", "GPU0 ", "NVRM: ", ": ", "] ", "[0] ")
# Real line starts: what a pattern needs to see before the run (so its later parts are reached).
SEEDS = ("", "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=", "NVRM: ", "[   12.345678] NVRM: GPU at PCI:0000:3b:00: ",
         "GPU 00000000:3B:00.0", "    Product Name                    : ", "| 0  NVIDIA H100 80GB HBM3   On  | ",
         "3b:00.0 3D controller: NVIDIA Corporation Device [10de:2330] (rev a1)",
         "0000:3b:00.0 VGA compatible controller: ", "gcc ", "nvidia/550.90.07, 6.5.0, x86_64: ",
         "Red Hat Enterprise Linux release ", "cuInit ", "DistBackendError ", "PyTorch version: ", "GPU0 ",
         "name, index, pci.bus_id", "nvidia 0000:3b:00.0: AER: ", "pcieport 0000:00:01.0: AER: ")


def _is_text_parser(function: Callable[..., Any]) -> bool:
    parameters = list(inspect.signature(function).parameters.values())
    if not parameters or parameters[0].annotation not in ("str", "str | None", "str | bytes"):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind is p.KEYWORD_ONLY for p in parameters[1:])


def _modules() -> list[Any]:
    found = []
    for package in (gpuhealth.parsers, gpuhealth.knowledge):
        for info in pkgutil.iter_modules(package.__path__):
            found.append(importlib.import_module(f"{package.__name__}.{info.name}"))
    return found + [analyze]


def _functions() -> list[tuple[str, Callable[..., Any], Any]]:
    functions = []
    for module in _modules():
        for name, value in vars(module).items():
            if (inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_")
                    and _is_text_parser(value)):
                functions.append((f"{module.__name__.rsplit('.', 1)[-1]}.{name}", value, module))
    return functions


def _patterns(module: Any) -> list[re.Pattern[Any]]:
    patterns: list[re.Pattern[Any]] = []

    def visit(value: Any, depth: int = 0) -> None:
        if isinstance(value, re.Pattern):
            patterns.append(value)
        elif isinstance(value, (tuple, list)) and depth < 3:
            for item in value:
                visit(item, depth + 1)
        elif isinstance(value, dict) and depth < 3:
            for item in value.values():
                visit(item, depth + 1)

    for value in vars(module).values():
        visit(value)
    return patterns


def _words(module: Any) -> list[str]:
    """The words of the module's own patterns, as runs of ``cuInit x `` (the issue's case) are made of."""
    words: set[str] = set()
    for pattern in _patterns(module):
        source = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
        words.update(re.findall(r"[A-Za-z_]{2,}", source))
    return [f"{word} x " for word in sorted(words)[:60]]


def _run(function: Callable[..., Any], text: str) -> float:
    """CPU seconds this process spent: backtracking burns CPU, while time other processes hold the CPU (a loaded
    CI machine, parallel test runs) does not count against the budget."""
    start = time.process_time()
    try:
        function(text)
    except (ParseError, LookupError):  # a parser's refusal, a lookup's "no such id": answers, in time
        pass
    return time.process_time() - start


FUNCTIONS = _functions()


def test_every_parser_module_is_covered() -> None:
    covered = {name.split(".")[0] for name, _, _ in FUNCTIONS}
    assert {"app_log", "kernel_log", "lspci", "smi_query", "smi_table", "smi_xml", "install", "system",
            "host_env", "analyze"} <= covered, covered


@pytest.mark.parametrize(("name", "function", "module"), FUNCTIONS, ids=[name for name, _, _ in FUNCTIONS])
def test_parser_is_linear_on_repeated_tokens(name: str, function: Callable[..., Any], module: Any) -> None:
    cases = [(seed, token) for seed in SEEDS for token in GENERIC] + [("", word) for word in _words(module)]
    slow = []
    for seed, token in cases:
        text = seed + token * (LENGTH // len(token))
        elapsed = _run(function, text)
        if elapsed > BUDGET_S:
            elapsed = _run(function, text)  # timed again before it counts: another process may have had the CPU
        if elapsed > BUDGET_S:
            slow.append(f"{seed!r} + {token!r} * {LENGTH // len(token)}: {elapsed:.2f} s")
            if len(slow) >= 3:
                break
    assert not slow, f"{name} backtracks:\n" + "\n".join(slow)


@pytest.mark.parametrize(("text", "budget_s"), [
    ("cuInit x " * (400_000 // 9), 1.0),  # the issue's case: 220 s before the fix
    ("DistBackendError " * (LONG // 17), 1.0),
    (" " * LONG, 1.0),
])
def test_app_log_issue_cases(text: str, budget_s: float) -> None:
    from gpuhealth.parsers.app_log import looks_like_app_log, parse_app_log

    assert _run(parse_app_log, text) < budget_s
    assert _run(looks_like_app_log, text) < budget_s


@pytest.mark.parametrize("tail", [" " * LONG, "0" * LONG, "a" * LONG, "name=" * (LONG // 5), ", " * (LONG // 2)])
def test_kernel_log_long_xid_line(tail: str) -> None:
    from gpuhealth.parsers.kernel_log import parse_kernel_log

    text = "[   12.345678] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=" + tail + "\n"
    assert _run(lambda t: parse_kernel_log(t, "x"), text) < 1.0


def test_identify_on_a_long_line_is_fast() -> None:
    assert _run(analyze.identify, "cuInit x " * (LONG // 9)) < 1.0
    assert _run(analyze.identify, " " * LONG) < 1.0


@pytest.mark.parametrize(("function_path", "text"), [
    ("gpuhealth.parsers.cuda:parse_ldconfig",
     "1 libs found in cache\n\tlibcuda.so.1 (libc6,x86-64) => /a" + " " * LONG + "x"),
    ("gpuhealth.parsers.install:parse_modinfo", "filename: /x\nversion:" + " " * LONG + "z"),
])
def test_a_run_of_blanks_before_the_last_character(function_path: str, text: str) -> None:
    """`.*?\\s*$` tries every blank run to the end of the line: quadratic (seconds at 200 KB) before the fix."""
    module, name = function_path.split(":")
    assert _run(getattr(importlib.import_module(module), name), text) < 1.0
