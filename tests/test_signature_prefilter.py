"""The signature catalogue's literal prefilter gives the same answers as running every regex.

``match_line`` runs only the rows whose required literal a line contains (knowledge/signatures.py). That is
exact when every match of a row's regex contains one of its literals; these tests check it three ways:
each literal is a run of plain characters in Python's own parse of the pattern; on every example, and
on each example with one character deleted or its case changed, ``match_line`` equals the brute force
(every regex, in file order); and over every line of the test corpora and eval cases, every line a row's
regex matches has that row among the prefilter's candidates.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, REPO
from fuzzing import FUZZ, mutated
from gpuhealth.knowledge import signatures as sigmod
from gpuhealth.knowledge.signatures import Signature, match_line, required_literals, signatures

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # Python 3.10
    import sre_parse  # type: ignore[no-redef]

ROWS = signatures()
IDS = [s.id for s in ROWS]
EXAMPLES = [s.example for s in ROWS]


def brute_force(line: str) -> Signature | None:
    """The rule ``match_line`` implements, the slow way: every row's regex, best key wins."""
    line = line[:sigmod.MAX_LINE]
    best = None
    for index, sig in enumerate(ROWS):
        if re.search(sig.pattern, line):
            key = (1 if sig.cause else 0, sig.priority, len(sig.pattern), -index)
            if best is None or key > best[0]:
                best = (key, sig)
    return best[1] if best else None


def candidates(line: str) -> set[int]:
    return {index for index, _ in sigmod._candidates(line[:sigmod.MAX_LINE])}


def literal_runs(alternative: str, folded: bool) -> list[str]:
    """Runs of consecutive single characters at the top level of Python's parse of ``alternative``."""
    parsed = sre_parse.parse(("(?i)" if folded else "") + alternative)
    runs, run = [], ""
    for op, value in parsed:
        if op is sre_parse.LITERAL:
            run += chr(value)
        else:
            runs.append(run)
            run = ""
    runs.append(run)
    return runs


def test_most_rows_have_a_literal():
    # the prefilter is only worth having when few rows are always run
    assert sum(required_literals(s.pattern) is None for s in ROWS) <= len(ROWS) // 10


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_literals_are_plain_runs_of_the_parsed_pattern(sig: Signature):
    found = required_literals(sig.pattern)
    if found is None:
        return
    literals, folded = found
    body = sig.pattern.removeprefix("(?i)") if folded else sig.pattern
    alternatives = sigmod._top_level_alternatives(body)
    assert len(alternatives) == len(literals)
    assert "|".join(alternatives) == body  # type: ignore[arg-type]
    for alternative, literal in zip(alternatives, literals, strict=True):
        re.compile(alternative)  # a split inside a group or class would not compile
        # a top-level "|" left inside would parse as a branch: no run would hold the literal
        runs = literal_runs(alternative, folded)
        assert any(literal.lower() in run.lower() if folded else literal in run for run in runs), \
            f"{sig.id}: {literal!r} is not a plain run of {alternative!r}: {runs}"


def test_the_reader_refuses_what_it_does_not_read():
    assert required_literals(r"(?x)NVRM: Xid") is None  # verbose: spaces are not literal
    assert required_literals(r"abc\x41def") is None  # a numeric escape
    assert required_literals(r"ab|NVRM: Xid") is None  # an alternative without a usable literal
    assert required_literals(r"(NVRM: Xid") is None  # unbalanced
    assert required_literals("(?i)\u212aelvin sign") is None  # case folding beyond ASCII
    assert required_literals(r"NVRM: Xids?, 79") == (("NVRM: Xid",), False)  # the quantified "s" is dropped
    assert required_literals(r"(?i)Xid [0-9]+ (?:at|on) GPU \d") == ((" GPU ",), True)  # the longest run
    assert required_literals(r"[|]pipe in a class|NVMLError_x") == (("pipe in a class", "NVMLError_x"), False)


def one_char_variants(text: str) -> list[str]:
    out = []
    for i in range(len(text)):
        out.append(text[:i] + text[i + 1:])
        out.append(text[:i] + text[i].swapcase() + text[i + 1:])
    return out


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_same_answer_as_brute_force_on_the_example(sig: Signature):
    assert match_line(sig.example) == brute_force(sig.example)
    regex = re.compile(sig.pattern)
    for variant in one_char_variants(sig.example):  # near misses of the row's own literal
        if regex.search(variant):
            assert ROWS.index(sig) in candidates(variant), f"{sig.id}: {variant!r} matches but was filtered out"


def test_same_answer_as_brute_force_on_odd_lines():
    lines = ["", "    ", "x" * 5000, "NVRM", "nvrm: xid (pci:0000:3b:00): 79,",
             "FAILED TO INITIALIZE NVML: DRIVER/LIBRARY VERSION MISMATCH",
             "Failed to initialize NVML: Driver/library version mismatch \u212a",
             "\u017fomething: Required key not available", "caf\u00e9 NVRM: Xid (PCI:0000:3b:00): 79, pid=1"]
    lines += [e.upper() for e in EXAMPLES] + [e.lower() for e in EXAMPLES] + ["\u00e9 " + e for e in EXAMPLES]
    for line in lines:
        assert match_line(line) == brute_force(line), line


def corpus_lines() -> list[str]:
    lines: set[str] = set()
    for root in (CORPUS, REPO / "tests" / "cases"):
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix not in (".md", ".gz", ".tgz", ".xz", ".bz2"):
                text = path.read_bytes()[:4_000_000].decode("utf-8", "replace")
                lines.update(line[:sigmod.MAX_LINE] for line in text.splitlines())
    return sorted(lines)


def test_no_corpus_line_a_regex_matches_is_filtered_out():
    """Over every distinct line of the corpora: a line that a row's regex matches has the row among its
    candidates. Each regex searches the joined text (``^`` per line) once, then only lines it matches."""
    lines = corpus_lines()
    assert len(lines) > 5000
    joined = "\n".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    picked = [candidates(line) for line in lines]
    missed, matched = [], 0
    for index, sig in enumerate(ROWS):
        if re.search(r"\(\?<?[=!]|\\[AZ]", sig.pattern):
            # a lookaround or \A/\Z can see past a line's end in the joined text: search line by line
            regex = re.compile(sig.pattern)
            for at, line in enumerate(lines):
                if regex.search(line):
                    matched += 1
                    if index not in picked[at]:
                        missed.append((sig.id, line))
            continue
        regex = re.compile(sig.pattern, re.MULTILINE)
        pos = 0
        while (found := regex.search(joined, pos)) is not None:
            at = _line_of(starts, found.start())
            if regex.search(lines[at]):
                matched += 1
                if index not in picked[at]:
                    missed.append((sig.id, lines[at]))
            pos = starts[at + 1]
    assert not missed, missed[:10]
    assert matched > 300  # the corpora do hold catalogued lines: the test is not vacuous


def _line_of(starts: list[int], position: int) -> int:
    import bisect

    return bisect.bisect_right(starts, position) - 1


@FUZZ
@given(mutated(EXAMPLES, max_slice=300) | st.text(max_size=120))
def test_fuzz_same_answer_as_brute_force(text: str):
    for line in text.splitlines()[:5] or [text]:
        assert match_line(line) == brute_force(line)


def test_nothing_is_compiled_before_use_and_little_after_one_line():
    code = ("import gpuhealth.knowledge.signatures as s;"
            "a = s._regex.cache_info().currsize;"
            "s.match_line('NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.');"
            "print(a, s._regex.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    before, after = map(int, out.stdout.split())
    assert before == 0
    assert 0 < after <= 10, after
