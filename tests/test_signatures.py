"""The message-signature catalogue (knowledge/signatures.csv via knowledge/signatures.py).

Every row is checked against its own real example: the example matches the row's pattern, and
``match_line`` on the example answers that row or one that says the same thing (same cause, or same
symptom), so no row is shadowed by another. Every reference (symptom, cause, code) exists, every row
has a source, and every pattern runs in linear time on adversarial input.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import FUZZ, mutated
from gpuhealth.checks import catalogue
from gpuhealth.checks.diagnosis import NARROWED_BY
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge import signatures as sigmod
from gpuhealth.knowledge.causes import RESERVED_CODES, cause, symptoms
from gpuhealth.knowledge.signatures import Signature, match_line, scan_lines, signature, signatures

ROWS = signatures()
IDS = [s.id for s in ROWS]
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# An unbounded repeat of "anything" makes a search quadratic on a long line of near-misses.
UNBOUNDED_ANY = re.compile(r"(?<!\\)\.[*+]")
UNBOUNDED_NEGATED = re.compile(r"\[\^(?:\\.|[^\]\\])*\][*+]")
CHAR_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]")
# A group that is itself repeated and contains a repeat: the classic catastrophic-backtracking shape.
NESTED = re.compile(r"\((?:[^()\\]|\\.)*(?<!\\)[*+}](?:[^()\\]|\\.)*\)[*+{]")


def known_codes() -> set[str]:
    catalogue.load()
    return set(REGISTRY) | set(RESERVED_CODES)


def test_catalogue_is_large_and_ids_are_unique_slugs():
    assert len(ROWS) >= 200
    assert len(set(IDS)) == len(IDS)
    bad = [i for i in IDS if not SLUG.match(i)]
    assert not bad, bad


def test_csv_columns_are_the_documented_ones():
    text = resources.files("gpuhealth.knowledge").joinpath("signatures.csv").read_text(encoding="utf-8")
    assert csv.DictReader(io.StringIO(text)).fieldnames == list(sigmod._COLUMNS)


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_example_matches_its_own_pattern(sig: Signature):
    assert sig.regex.search(sig.example), f"{sig.id}: example does not match: {sig.example!r}"


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_example_is_not_shadowed(sig: Signature):
    got = match_line(sig.example)
    assert got is not None
    if got.id == sig.id:
        return
    if sig.cause:
        assert got.cause == sig.cause, f"{sig.id} is shadowed by {got.id} (cause {got.cause!r})"
    else:
        # a symptom row may lose only to a row of the same symptom, to a row of its narrower symptom (cuInit's unknown
        # error is CUDA failing to start, narrowed), or to a row that decides a cause (the line says more than the
        # symptom: "causes before symptoms")
        assert got.symptom in (sig.symptom, NARROWED_BY.get(sig.symptom)) or got.cause, \
            f"{sig.id} is shadowed by {got.id} (symptom {got.symptom!r})"


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_references_exist_and_code_follows_the_rule(sig: Signature):
    table = symptoms()
    assert sig.symptom in table, f"{sig.id}: unknown symptom {sig.symptom!r}"
    assert sig.code in known_codes(), f"{sig.id}: unknown code {sig.code}"
    if sig.cause:
        found = cause(sig.cause)
        assert sig.code == found.code, f"{sig.id}: code {sig.code} is not the cause's {found.code}"
        listed = {c.id for c in table[sig.symptom].causes}
        assert sig.cause in listed, f"{sig.id}: {sig.symptom} does not list cause {sig.cause}"
    else:
        assert sig.code in (table[sig.symptom].code, "GH806"), f"{sig.id}: code {sig.code}"


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_row_is_sourced_and_described(sig: Signature):
    assert sig.source_url.startswith("https://"), sig.source_url
    assert " " not in sig.source_url
    assert sig.source_title.strip()
    assert sig.summary.endswith("."), f"{sig.id}: the summary is one sentence ending with a full stop"
    assert sig.severity in sigmod.SEVERITIES
    assert "\n" not in sig.example


@pytest.mark.parametrize("sig", ROWS, ids=IDS)
def test_pattern_shape_is_linear(sig: Signature):
    outside_classes = CHAR_CLASS.sub("C", sig.pattern)
    assert not UNBOUNDED_ANY.search(outside_classes), f"{sig.id}: use a bounded gap like .{{0,80}}, not .* or .+"
    assert not UNBOUNDED_NEGATED.search(sig.pattern), f"{sig.id}: bound a negated class: [^x]{{0,80}}"
    assert not NESTED.search(sig.pattern), f"{sig.id}: nested quantifier"
    assert "\n" not in sig.pattern


def adversarial(sig: Signature) -> str:
    """200 KB without a newline, made of the row's own example cut into near-misses: each copy of
    the example loses its last 2 characters, so a pattern starts matching everywhere and never ends."""
    near = sig.example[:-2] if len(sig.example) > 4 else sig.example
    tokens = near.split() or [near]
    text = " ".join(tokens * (200_000 // (len(near) + 1) + 1))
    return text[:200_000]


def test_every_pattern_is_fast_on_adversarial_input():
    slow = []
    for sig in ROWS:
        text = adversarial(sig)
        start = time.process_time()
        sig.regex.search(text)
        sig.regex.search(text.replace(" ", ""))
        elapsed = time.process_time() - start
        if elapsed > 0.5:
            slow.append((sig.id, round(elapsed, 2)))
    assert not slow, slow


def test_match_line_bounds_long_lines():
    sig = signature("smi-cannot-communicate")
    line = "x" * (sigmod.MAX_LINE + 10) + sig.example
    assert match_line(line) is None  # beyond MAX_LINE: not looked at
    assert match_line(sig.example + "x" * 10 * sigmod.MAX_LINE) == sig


def test_match_line_prefers_a_decided_cause():
    # one line, two rows: the symptom row (could not insert) and the cause row (Key was rejected)
    got = match_line("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service")
    assert got is not None and got.cause == "secure-boot-refused" and got.code == "GH506"


def test_match_line_unknown_line():
    assert match_line("all good, 8 GPUs healthy") is None
    assert match_line("") is None


def test_scan_lines_keeps_order_and_caps_repeats():
    mismatch = signature("nvml-driver-library-mismatch").example
    nodev = signature("smi-no-devices").example
    lines = [nodev, "noise", *([mismatch] * (sigmod.MAX_PER_SIGNATURE + 30)), nodev + "\n"]
    found = scan_lines(lines)
    assert [s.id for s, _ in found[:2]] == ["smi-no-devices", "nvml-driver-library-mismatch"]
    assert sum(1 for s, _ in found if s.id == "nvml-driver-library-mismatch") == sigmod.MAX_PER_SIGNATURE
    assert found[-1] == (signature("smi-no-devices"), nodev)  # newline stripped


def test_scan_lines_streams_an_iterator():
    def lines():
        yield signature("modprobe-key-rejected").example
        yield "fine"
    assert [s.id for s, _ in scan_lines(lines())] == ["modprobe-key-rejected"]


def test_signature_lookup_and_unknown_id():
    assert signature("modprobe-key-rejected").cause == "secure-boot-refused"
    with pytest.raises(KeyError):
        signature("no-such-row")


def test_nothing_is_read_at_import():
    code = ("import gpuhealth.knowledge.signatures as s, gpuhealth.knowledge.causes as c;"
            "print(s._catalogue.cache_info().currsize, c._tables.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["0", "0"]


def test_bad_rows_are_refused():
    good = {c: "x" for c in sigmod._COLUMNS}
    good.update(domain="nvml", severity="critical", priority="")
    assert sigmod._row(dict(good), 2).id == "x"
    with pytest.raises(ValueError, match="domain"):
        sigmod._row({**good, "domain": "windows"}, 2)
    with pytest.raises(ValueError, match="severity"):
        sigmod._row({**good, "severity": "fatal"}, 2)
    with pytest.raises(ValueError, match="example is empty"):
        sigmod._row({**good, "example": " "}, 2)


EXAMPLES = [s.example for s in ROWS]


@FUZZ
@given(mutated(EXAMPLES, max_slice=2000))
def test_fuzz_match_line(text: str):
    for line in text.splitlines() or [text]:
        got = match_line(line)
        assert got is None or got.regex.search(line[:sigmod.MAX_LINE])


@FUZZ
@given(st.lists(mutated(EXAMPLES, max_slice=500) | st.text(max_size=200), max_size=40))
def test_fuzz_scan_lines(lines: list[str]):
    found = scan_lines(lines)
    assert len(found) <= len(lines)
    for sig, line in found:
        assert sig.regex.search(line)


@pytest.mark.parametrize("bad", [r"NVRM: .*failed", r"error (\w+ )+done", r"x[^:]+y", r"(?:ab+)*c"])
def test_pattern_lint_catches_backtracking_shapes(bad: str):
    outside = CHAR_CLASS.sub("C", bad)
    assert UNBOUNDED_ANY.search(outside) or NESTED.search(bad) or UNBOUNDED_NEGATED.search(bad)


@pytest.mark.parametrize("fine", [r"lib[\w.+-]{1,60}\.so", r"NVRM: .{0,80}failed", r"(?:Error|failure) 804"])
def test_pattern_lint_accepts_bounded_shapes(fine: str):
    outside = CHAR_CLASS.sub("C", fine)
    assert not (UNBOUNDED_ANY.search(outside) or NESTED.search(fine) or UNBOUNDED_NEGATED.search(fine))


def test_docs_page_is_current():
    from gpuhealth.knowledge import docgen
    page = (Path(__file__).resolve().parent.parent / "docs" / "signatures.md").read_text(encoding="utf-8")
    assert page == docgen.render(), "docs/signatures.md is stale: run `make docs`"


def test_every_decoded_tool_failure_that_had_a_fix_keeps_one():
    """nvidia-smi's exit codes 6 and 255 and NVML's 999 lost their fixes when decoding moved to the catalogue."""
    from gpuhealth.checks.registry import table_fixes
    from gpuhealth.knowledge.tool_errors import NVML_RETURN_CODES, SMI_EXIT_CODES

    for kind in (SMI_EXIT_CODES[6], SMI_EXIT_CODES[255], NVML_RETURN_CODES[999], "smi-no-devices"):
        assert table_fixes("GH203", kind=kind), kind
