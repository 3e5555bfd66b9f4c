"""The tables of symptom and cause wordings (knowledge/symptom_phrases.csv, cause_phrases.csv): every row cites its
source, names a known symptom (or cause), reads its own examples as that symptom (or cause) and none of its
counterexamples, and its literals index every example."""

from __future__ import annotations

import pytest

from gpuhealth.knowledge import causes, symptom_phrases
from gpuhealth.knowledge.symptom_phrases import phrases
from gpuhealth.parsers.prose_symptoms import told_symptoms

ROWS = phrases()


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_every_row_cites_a_source_and_names_a_symptom(row):
    assert row.source_title.strip() and row.source_url.startswith("https://")
    assert row.cause in causes.causes() if row.cause else row.symptom in causes.symptoms()
    assert row.examples and row.counterexamples, "a family is tested both ways"
    assert row.subject is not None or row.predicate is not None


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_every_rows_patterns_compile(row):
    # they compile on first use (a paste compiles only the rows its literals reach): a bad one must fail here
    for pattern in (row.subject, row.predicate, row.context, row.unless):
        if pattern is not None:
            pattern.search("")  # compiles it: re.error fails the test


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_every_row_reads_its_examples_and_not_its_counterexamples(row):
    for example in row.examples:
        found = told_symptoms(example)
        assert row.key in [t.cause or t.symptom for t in found], example
        if row.fix:  # a fix row reads only a fix the reporter says worked
            assert any(t.cause == row.cause and t.confirmed for t in found), example
        assert any(literal in example.lower() for literal in row.literals), f"no literal indexes {example!r}"
    for counter in row.counterexamples:
        found = told_symptoms(counter)
        if row.fix:  # a fix that did not work, suggested, asked about or that did not last confirms nothing
            assert not [t for t in found if t.cause == row.cause and t.confirmed], counter
            continue
        # a family's counterexample names no symptom or cause now; one whose cause a fix that worked confirms (the
        # history "the module was not built, but dkms autoinstall fixed it") is that confirmation, not a mention
        assert row.key not in [t.cause or t.symptom for t in found if not t.confirmed], counter


def test_the_states_a_snapshot_shows_are_named():
    assert symptom_phrases.state_symptoms() == {"gpu-memory-held", "nouveau-despite-blacklist"}


def test_a_bad_row_is_refused(monkeypatch: pytest.MonkeyPatch):
    real = symptom_phrases.table_rows

    def rows(name: str) -> list[dict[str, str]]:
        found = real(name)
        found[0] = {**found[0], "symptom": "gremlins"}
        return found

    monkeypatch.setattr(symptom_phrases, "table_rows", rows)
    symptom_phrases._table.cache_clear()
    try:
        with pytest.raises(ValueError, match="unknown symptom 'gremlins'"):
            symptom_phrases.phrases()
    finally:
        symptom_phrases._table.cache_clear()
