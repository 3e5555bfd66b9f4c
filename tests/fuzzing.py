"""Shared fuzzing pieces for the parser tests: settings, mutated real files, the only-ParseError rule.

Every parser must turn any input into a result or a ParseError, never another exception. The
strategies start from real corpus text, because near-misses of the real format find more bugs than
random noise does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuhealth.model import ParseError

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_TOKEN = re.compile(r"[^\s|,:]+")


@st.composite
def mutated(draw: Any, texts: list[str], max_slice: int = 20000) -> str:
    """A slice of a real text, with a few edits and possibly one token replaced by junk or a huge number."""
    text = draw(st.sampled_from(texts))
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, min(len(text), start + max_slice)))
    text = text[start:end]
    for _ in range(draw(st.integers(0, 6))):
        pos = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 20))
        text = text[:pos] + draw(st.text(max_size=12)) + text[pos + cut:]
    tokens = list(_TOKEN.finditer(text))
    if tokens and draw(st.booleans()):
        token = draw(st.sampled_from(tokens))
        replacement = draw(st.text(max_size=40) | st.just("9" * 5000) | st.just("N/A") | st.just("[N/A]"))
        text = text[:token.start()] + replacement + text[token.end():]
    return text


def only_parse_error(parse: Callable[..., Any], text: Any, *args: Any) -> None:
    """Run ``parse``; a ParseError is an accepted answer, any other exception fails the test."""
    try:
        parse(text, *args)
    except ParseError:
        pass


def only_parse_errors(*parsers: Callable[..., Any]) -> Callable[[Any], None]:
    """One check that runs every parser on a text, each allowed to answer with a ParseError only."""

    def check(text: Any) -> None:
        for parse in parsers:
            only_parse_error(parse, text)

    return check


def fuzz_tests(check: Callable[[str], None], samples: list[str]) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two fuzz tests every parser's module has: any text, and real text mutated (``mutated``).
    ``test_fuzz_random_text, test_fuzz_mutated_real_files = fuzz_tests(only_parse_errors(parse_x), SAMPLES)``."""

    @FUZZ
    @given(st.text())
    def random_text(text: str) -> None:
        check(text)

    @FUZZ
    @given(mutated(samples))
    def mutated_real_files(text: str) -> None:
        check(text)

    return random_text, mutated_real_files
