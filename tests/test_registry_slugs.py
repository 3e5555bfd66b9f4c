"""A check's code and slug are each registered once (checks/registry.py looks a slug up, not over every check)."""

from __future__ import annotations

import pytest

from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY, check


def _unused_code() -> str:
    return next(f"GH{n}" for n in range(999, 100, -1) if f"GH{n}" not in REGISTRY)


def test_a_slug_registered_twice_is_refused_and_nothing_is_registered():
    catalogue.load()
    taken = REGISTRY["GH201"].slug
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="registered twice"):
        check(_unused_code(), taken, "a second check under a slug in use")(lambda snapshot: iter(()))
    assert REGISTRY == before


def test_a_code_registered_twice_is_refused():
    catalogue.load()
    with pytest.raises(ValueError, match="registered twice"):
        check("GH201", "a-slug-nobody-uses", "a second check under a code in use")(lambda snapshot: iter(()))


def test_every_registered_check_has_its_own_slug():
    catalogue.load()
    slugs = [spec.slug for spec in REGISTRY.values()]
    assert len(slugs) == len(set(slugs)) > 50
