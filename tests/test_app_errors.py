"""knowledge/app_errors.csv: application-error kinds are groups of catalogue rows (one place per message), and
tool_errors.decode weighs several lines with the catalogue's own ranking."""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import FUZZ
from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge.app_errors import candidate_lines, kind_of, kind_of_line, meanings, parse_table
from gpuhealth.knowledge.signatures import match_line, rank, signature, signatures
from gpuhealth.knowledge.tool_errors import decode
from gpuhealth.model import Snapshot
from gpuhealth.parsers.app_log import looks_like_app_log, parse_app_log

HEADER = "kind,signatures,summary,related,needs,collect,source_title,source_url\n"


def test_every_kind_is_complete():
    catalogue.load()
    fields = {f.name for f in dataclasses.fields(Snapshot)}
    for kind, meaning in meanings().items():
        assert meaning.signatures, kind
        assert meaning.summary and meaning.source_url.startswith("https://"), kind
        assert all(code in REGISTRY for code in meaning.related), kind
        assert set(meaning.needs) <= fields, kind
        assert meaning.collect, kind


def test_every_nccl_row_is_the_nccl_kind():
    assert all(kind_of(s.id) == "nccl" for s in signatures() if s.domain == "nccl")


@pytest.mark.parametrize("kind", sorted(meanings()))
def test_each_rows_own_example_is_its_kind(kind):
    for signature_id in meanings()[kind].signatures:
        example = signature(signature_id).example
        picked = match_line(example)
        # the catalogue may pick a more specific row for an example; its kind is then that row's
        assert kind_of_line(example) == kind_of(picked.id)
        if picked.id == signature_id:
            assert kind_of_line(example) == kind


def test_lines_outside_every_kind_are_no_application_error():
    assert kind_of_line("epoch 3 step 200 loss 0.31") is None
    assert kind_of_line("[ 5.1] nvidia: module verification failed: signature and/or required key missing - "
                        "tainting kernel") is None


@pytest.mark.parametrize(("body", "reason"), [
    ("x,no-such-row,s,,,c,t,https://e\n", "unknown signature"),
    ("x,domain:nope,s,,,c,t,https://e\n", "unknown domain"),
    ("x,cuda-no-device,s,,,c,t,https://e\nx,cuda-assert,s,,,c,t,https://e\n", "repeated"),
    ("x,cuda-no-device,s,,,c,t,https://e\ny,cuda-no-device,s,,,c,t,https://e\n", "already kind"),
])
def test_bad_tables_are_refused(body, reason):
    with pytest.raises(ValueError, match=reason):
        parse_table(HEADER + body)


def test_decode_picks_the_most_specific_line_whatever_the_order():
    # two nvidia-smi/NVML rows that decide no cause, each picked by match_line for its own example
    rows = [s for s in signatures() if s.domain in ("nvidia-smi", "nvml") and not s.cause
            and match_line(s.example) == s]
    first, second = rows[0], rows[-1]
    expected = max(first, second, key=rank)
    assert first != second
    assert decode(f"{first.example}\n{second.example}").kind == expected.id
    assert decode(f"{second.example}\n{first.example}").kind == expected.id


def test_rank_is_match_lines_order():
    line = "Failed to initialize NVML: Unknown Error"
    matching = [s for s in signatures() if s.regex.search(line)]
    assert match_line(line) == max(matching, key=rank)


def _naive(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.split("\n"), 1) if line.strip() and kind_of_line(line)]


_EXAMPLES = [signature(s).example for m in meanings().values() for s in m.signatures]


@FUZZ
@given(st.lists(st.sampled_from(_EXAMPLES) | st.text(max_size=80), max_size=25))
def test_the_whole_text_prefilter_finds_exactly_the_lines_a_line_by_line_scan_finds(lines):
    text = "\n".join(lines).replace("\r\n", "\n")
    found = [(e.line_number, e.message) for e in parse_app_log(text)]
    assert found == [(n, line[:500]) for n, line in _naive(text)]


def test_a_long_log_without_errors_is_one_pass_per_row():
    text = "\n".join(f"epoch 1 step {i} loss {i * 0.001:.3f} lr 0.0001" for i in range(20_000))
    start = time.process_time()
    assert list(candidate_lines(text)) == [] and not looks_like_app_log(text)
    assert time.process_time() - start < 5  # was the whole catalogue on every line: ~10 s on the shared CI box


def test_a_line_another_check_leads_is_not_repeated_by_gh806():
    """One finding per pasted line: a row that names GH202 is GH202's; an out-of-memory row has no other check."""
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks

    mismatch = "Failed to initialize NVML: Driver/library version mismatch"  # NVIDIA/nvidia-docker#1497 wording
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
           "79.11 GiB of which 2.94 MiB is free.")
    snapshot, _ = analyze_texts([("paste", f"{mismatch}\n{oom}\n")])
    report = run_checks(snapshot)
    by_code = {f.code: f for f in report.findings}
    assert "GH202" in by_code
    gh806 = [f for f in report.findings if f.code == "GH806"]
    assert len(gh806) == 1 and "cuda-oom" in gh806[0].message
    assert all("mismatch" not in line for e in gh806[0].evidence for line in e.lines)
