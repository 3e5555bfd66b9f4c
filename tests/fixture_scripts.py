"""The fix script of every fixture: each test host's (the live check's path) and each evaluation case's, dev
and sealed (analyze's)."""

from __future__ import annotations

from functools import cache

from caseset import load_all
from gpuhealth.advice_commands import _evidence
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.fixscript import fix_script
from hostcases import FakeHost, case_names, load_spec


@cache
def all_scripts() -> dict[str, str]:
    """"host NAME" / "case NAME" -> its fix script (built once per test session)."""
    scripts = {f"host {name}": fix_script(run_checks(collect(FakeHost(load_spec(name))))) for name in case_names()}
    for case in [*load_all("dev"), *load_all("sealed")]:  # safety holds for every case, sealed too
        scripts[f"case {case.name}"] = fix_script(run_checks(_evidence(tuple(map(str, case.evidence)))))
    return scripts
