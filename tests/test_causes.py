"""The symptom -> candidate causes table (knowledge/symptoms.csv, causes.csv via knowledge/causes.py)."""

from __future__ import annotations

import pytest

from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge import causes as causes_mod
from gpuhealth.knowledge.causes import RESERVED_CODES, cause, causes, symptoms

# The symptoms issue 9 names, under the ids the catalogue and analyze use.
REQUIRED = {"driver-unreachable", "module-refuses-to-load", "torch-no-gpu", "container-no-gpu", "gpu-missing",
            "job-hang", "cuda-library-missing", "login-loop", "gpu-runtime-error"}


def known_codes() -> set[str]:
    catalogue.load()
    return set(REGISTRY) | set(RESERVED_CODES)


def test_required_symptoms_exist():
    assert REQUIRED <= set(symptoms())


@pytest.mark.parametrize("symptom_id", sorted(symptoms()))
def test_symptom_is_complete(symptom_id: str):
    symptom = symptoms()[symptom_id]
    assert symptom.title and symptom.severity in ("info", "warning", "critical")
    assert symptom.code in known_codes()
    assert len(symptom.causes) >= 3, "a differential needs candidates"
    assert [c.prior for c in symptom.causes] == list(range(1, len(symptom.causes) + 1))
    assert all(c.symptom == symptom_id for c in symptom.causes)


@pytest.mark.parametrize("cause_id", sorted(causes()))
def test_cause_is_complete(cause_id: str):
    found = cause(cause_id)
    assert found.id == cause_id
    assert found.code in known_codes(), f"{cause_id}: unknown code {found.code}"
    assert found.title.strip() and not found.title.endswith(".")
    for text in (found.confirm, found.rule_out, found.decide):
        assert text.strip()
    assert found.source_url.startswith("https://")
    assert found.symptom in symptoms()
    assert found in symptoms()[found.symptom].causes  # cause() answers the first listing


def test_driver_unreachable_is_critical_and_led_by_the_common_causes():
    symptom = symptoms()["driver-unreachable"]
    assert symptom.severity == "critical" and symptom.code == "GH203"
    ids = [c.id for c in symptom.causes]
    assert {"module-not-built", "secure-boot-refused", "driver-library-mismatch", "nouveau-bound"} <= set(ids)
    assert cause("secure-boot-refused").code == "GH506"


def test_a_cause_shared_by_two_symptoms_has_a_rank_under_each():
    ranks = {s.id: next(c.prior for c in s.causes if c.id == "secure-boot-refused")
             for s in symptoms().values() if any(c.id == "secure-boot-refused" for c in s.causes)}
    assert len(ranks) >= 2
    assert ranks["module-refuses-to-load"] == 1


def test_unknown_cause_raises():
    with pytest.raises(KeyError):
        cause("gremlins")


def test_tables_refuse_bad_references(monkeypatch: pytest.MonkeyPatch):
    real = causes_mod._read

    def fake(name: str) -> list[dict[str, str]]:
        rows = real(name)
        if name == "symptoms.csv":
            rows[0] = {**rows[0], "causes": rows[0]["causes"] + ";gremlins"}
        return rows

    monkeypatch.setattr(causes_mod, "_read", fake)
    causes_mod._tables.cache_clear()
    try:
        with pytest.raises(ValueError, match="unknown cause 'gremlins'"):
            causes_mod._tables()
    finally:
        causes_mod._tables.cache_clear()
