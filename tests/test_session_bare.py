"""A GPU tool's command pasted without its prompt starts a block, as a prompt would (parsers/session.py);
messages that begin with the tool's name do not. Lines from NVIDIA/DCGM#263 (a paste without prompts)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.parsers.session import prompt_command, split_session

PASTE = """nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader
0, None
1, Reset

dcgmi dmon  -c 1 -e 230
#Entity    XIDER
ID
GPU 0      0
GPU 1      120
"""


@pytest.mark.parametrize("line", ["nvidia-smi", "nvidia-smi -q", "sudo nvidia-smi -L", "dcgmi dmon  -c 1 -e 230",
                                  "dkms status", "lspci -nnk", "systemctl status nvidia-persistenced", "uname -r",
                                  "nvidia-smi topo -m"])
def test_a_bare_tool_command_is_a_prompt(line):
    assert prompt_command(line) == ("shell", line)


@pytest.mark.parametrize("line", ["nvidia-smi: command not found", "modprobe: ERROR: could not insert 'nvidia'",
                                  "nvidia-smi has failed because it couldn't communicate with the driver",
                                  "dmesg: read kernel buffer failed: Operation not permitted",
                                  "lspci shows the card but nvidia-smi does not", "dkms is installed"])
def test_messages_that_start_with_a_tool_name_are_output(line):
    assert prompt_command(line) is None


def test_a_paste_without_prompts_splits_at_the_commands():
    blocks = split_session(PASTE)
    assert [b.command for b in blocks] == ["nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader",
                                           "dcgmi dmon  -c 1 -e 230"]
    assert "GPU 1      120" in blocks[1].output


def test_the_dcgmi_xid_column_is_read_once_its_command_is_known():
    snapshot, _ = analyze_texts([("session.txt", PASTE)])
    report = run_checks(snapshot)
    assert report.verdict != "HEALTHY"
    assert report.findings[0].code == "GH301" and "120" in report.findings[0].message
