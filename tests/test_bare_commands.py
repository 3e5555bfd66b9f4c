"""A GPU tool's command line pasted without its prompt inside a terminal session starts a block, and
``--format=csv,noheader`` output takes its columns from the command. The session is the one posted in
NVIDIA/DCGM#263 (GPU 1 stuck after a GSP error: recovery action Reset, DCGM's last Xid 120)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given

from fuzzing import FUZZ, mutated
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.facts import env_lines, visible_devices_set
from gpuhealth.parsers.session import split_session
from gpuhealth.report.common import fold

DCGM_263 = """\
# GPU=1 stuck in EBUSY state because some GSP issue
nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader
0, None
1, Reset
2, None
3, None

dcgmi dmon  -c 1 -e 230
#Entity    XIDER
ID
GPU 0      0
GPU 1      120
GPU 2      0
GPU 3      0

$ dcgmi  health -c -j
{
        "body" :
        {
                "Overall Health" :
                {
                        "value" : "Healthy"
                }
        },
        "header" :
        [
                "Health Monitor Report"
        ]
}
"""


def test_prompt_less_gpu_tool_lines_split_a_session():
    commands = [b.command for b in split_session(DCGM_263)]
    assert commands == [None, "nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader",
                        "dcgmi dmon  -c 1 -e 230", "dcgmi  health -c -j"]


@pytest.mark.parametrize("line", [
    "nvidia-smi shows 8 GPUs but torch sees 7",  # prose: neither an option nor a subcommand follows
    "nvidia-smi: command not found",
    "dcgmi is installed but the host engine is not running",
])
def test_prose_about_the_tools_does_not_split(line):
    text = f"$ uname -r\n5.15.0-91-generic\n{line}\nmore words\n"
    assert [b.command for b in split_session(text)] == ["uname -r"]


def test_a_text_without_prompts_is_not_split_by_a_bare_command():
    text = "nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5c1d2e3f-0a1b-2c3d-4e5f-60718293a4b5)\n"
    assert [b.command for b in split_session(text)] == [None]


def test_noheader_csv_takes_its_columns_from_the_command_and_the_xid_leads():
    snapshot, log = analyze_texts([("session.txt", DCGM_263)])
    kinds = {r.kind for r in log}
    assert {"smi-csv", "dcgmi-dmon", "dcgmi"} <= kinds
    assert [g.recovery_action for g in snapshot.gpus][:2] == ["None", "Reset"]
    report = run_checks(snapshot)
    codes = {f.code for f in report.findings}
    assert {"GH301", "GH404"} <= codes
    assert fold(report.findings)[0].finding.code == "GH301"
    assert report.verdict != "HEALTHY"


def test_csv_with_its_header_is_read_as_before():
    text = "$ nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv\nindex, gpu_recovery_action\n0, None\n"
    snapshot, _ = analyze_texts([("s", text)])
    assert [g.recovery_action for g in snapshot.gpus] == ["None"]


# --------------------------------------------------------------------------- bounds: fuzz and adversarial input

@FUZZ
@given(mutated([DCGM_263, "$ export CUDA_VISIBLE_DEVICES=1\nCUDA_VISIBLE_DEVICES='' python x.py\n"]))
def test_split_and_assignments_never_raise(text):
    blocks = split_session(text)
    assert blocks
    for block in blocks:
        visible_devices_set(block.command or "")
    env_lines(text.splitlines())


def test_long_adversarial_lines_stay_fast():
    lines = ["nvidia-smi " + "-a " * 3000, "dcgmi dmon " + "x" * 100_000,
             "export CUDA_VISIBLE_DEVICES" * 5000, "CUDA_VISIBLE_DEVICES= " * 5000]
    start = time.process_time()
    split_session("$ uname -r\n" + "\n".join(lines))
    env_lines(lines)
    assert time.process_time() - start < 2.0
