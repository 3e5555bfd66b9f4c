"""NCCL's "Call to ibv_reg_mr failed" (NVIDIA/nccl src/misc/ibvwrap.cc) is an RDMA memory registration failure: the
locked-memory limit or nvidia-peermem (NCCL's troubleshooting guide), a warning of GH806 that names that cause, not a
critical hang blamed on Fabric Manager; and a line GH806 numbered is shown once under "evidence:". The lines are
written from NCCL's format string ("Call to " name " failed with error %s") with a made-up host prefix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.knowledge.signatures import match_line
from gpuhealth.model import Severity

PREFIX = "gpu-node-3:20817:20910 [0] NCCL WARN "
LINES = [PREFIX + "Call to ibv_reg_mr failed with error Cannot allocate memory",
         PREFIX + "Call to ibv_reg_mr_iova2 failed with error Bad address",
         PREFIX + "Call to ibv_reg_dmabuf_mr failed with error Operation not supported"]


@pytest.mark.parametrize("line", LINES)
def test_every_registration_call_is_the_registration_row(line):
    row = match_line(line)
    assert row is not None and row.id == "nccl-ib-memory-registration" and row.cause == "rdma-memory-registration"


def _analyzed(text: str) -> str:
    result = CliRunner().invoke(main, ["analyze", "-"], input=text)
    return result.output


def test_a_lone_registration_failure_is_a_warning_naming_memlock_and_peermem():
    snapshot, _ = analyze_texts([("nccl.log", LINES[0] + "\n")])
    report = run_checks(snapshot)
    assert report.verdict == "DEGRADED"
    (gh806,) = [f for f in report.findings if f.code == "GH806"]
    assert gh806.severity is Severity.WARNING
    assert "register" in gh806.message and "nvidia-peermem" in gh806.message and "ulimit -l" in gh806.message
    assert {"ulimit -l", "lsmod | grep nvidia_peermem"} <= {fix.command for fix in gh806.fixes}
    text = _analyzed(LINES[0] + "\n")
    assert "Fabric Manager" not in text and "fabricmanager" not in text
    assert text.count("Call to ibv_reg_mr failed with error") == 1, text


def test_a_line_gh806_numbered_is_shown_once():
    line = "The training crashed with CUDA_ERROR_ILLEGAL_ADDRESS after two hours and I do not know why."
    text = _analyzed(line + "\n")
    assert "GH806" in text and text.count("CUDA_ERROR_ILLEGAL_ADDRESS after two hours") == 1, text
