"""`check --stage`: which checks run before and after the driver install."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuhealth.bundle import RecordingHost
from gpuhealth.checks.stages import codes_for
from gpuhealth.cli import main
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec


def test_stage_sets():
    pre, post, everything = codes_for("preinstall"), codes_for("postinstall"), codes_for(None)
    assert everything is None
    assert {"GH101", "GH206", "GH501", "GH503", "GH506", "GH507", "GH801"} <= pre
    assert {"GH814", "GH817"} <= pre and not {"GH720", "GH813", "GH816"} & pre  # the install's disk and clock
    assert {"GH720", "GH811", "GH814", "GH816", "GH817"} <= post
    assert not {c for c in pre if c.startswith(("GH3", "GH4", "GH6"))} - {"GH304", "GH305"}
    assert "GH503" not in post and "GH507" in post and "GH301" in post and "GH605" in post
    with pytest.raises(ValueError, match="unknown stage"):
        codes_for("midinstall")


def test_preinstall_on_a_host_before_the_install(tmp_path):
    recorder = RecordingHost(FakeHost(load_spec("ubuntu-before-install")), tmp_path / "b")
    collect(recorder)
    recorder.finish()
    result = CliRunner().invoke(main, ["check", "--from", str(tmp_path / "b"), "--stage", "preinstall",
                                       "--format", "json"])
    doc = json.loads(result.output)
    ran = {f["code"] for f in doc["findings"]} | {s["code"] for s in doc["skipped"]}
    assert ran <= codes_for("preinstall")
    assert {"GH501", "GH503"} <= {f["code"] for f in doc["findings"]}
