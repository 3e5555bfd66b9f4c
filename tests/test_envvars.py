"""Environment variables with a closed set of values: an unknown value is an error naming the variable and
its values (exit 3, nothing on stdout), never a silent default. GPUHEALTH_FAIL_ON=warnings (a typo) used to
mean critical: a Slurm node with warnings stayed in service."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from conftest import REPO
from gpuhealth.cli import main
from gpuhealth.envvars import CHOICES
from gpuhealth.exits import CannotRun
from gpuhealth.report import nhc

BUNDLE = str(REPO / "examples" / "h100x8-xid-ecc.tar.gz")


@pytest.mark.parametrize(("name", "value"), [("GPUHEALTH_FAIL_ON", "warnings"), ("GPUHEALTH_FAIL_ON", "crit"),
                                             ("GPUHEALTH_DEBUG", "maybe")])
def test_an_unknown_value_fails_before_any_work_naming_the_variable_and_its_values(name, value):
    result = CliRunner().invoke(main, ["check", "--from", BUNDLE, "--format", "nhc"], env={name: value})
    assert result.exit_code == 3
    assert result.stdout == ""  # no drain reason: the NHC wrapper logs exit 3 and changes nothing
    (line,) = result.stderr.splitlines()
    assert f"{name}='{value}'" in line and ", ".join(CHOICES[name]) in line


@pytest.mark.parametrize(("value", "degraded_drains"), [("degraded", True), (" Warning ", True),
                                                        ("critical", False), ("", False)])
def test_the_known_values_and_unset_pick_what_drains(value, degraded_drains):
    assert ("degraded" in nhc.draining_impacts(value)) is degraded_drains
    result = CliRunner().invoke(main, ["check", "--from", BUNDLE, "--format", "nhc"],
                                env={"GPUHEALTH_FAIL_ON": value})
    assert result.exit_code == 2 and result.stdout.startswith("gpuhealth: GH301")  # an unusable GPU drains always


def test_the_formats_refuse_a_typo_too():
    with pytest.raises(CannotRun, match="GPUHEALTH_FAIL_ON='warnings'"):
        nhc.draining_impacts("warnings")
