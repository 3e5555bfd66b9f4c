"""Terminal sessions: split on prompts into (command, output) blocks; no false splits in logs and tables."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS
from fuzzing import FUZZ, mutated
from gpuhealth.parsers.session import Block, looks_like_session, prompt_command, split_session


@pytest.mark.parametrize(("line", "expected"), [
    ("$ nvidia-smi -L", ("shell", "nvidia-smi -L")),
    ("# nvidia-smi", ("shell", "nvidia-smi")),
    ("# dkms status", ("shell", "dkms status")),
    ("user@host:~$ lsmod | grep nvidia", ("shell", "lsmod | grep nvidia")),
    ("root@gpu-node-3:/home/ubuntu# modprobe nvidia", ("shell", "modprobe nvidia")),
    ("[root@host ~]# mokutil --sb-state", ("shell", "mokutil --sb-state")),
    ("[user@rocky9 build]$ uname -r", ("shell", "uname -r")),
    ("(venv) $ python -c 'import torch'", ("shell", "python -c 'import torch'")),
    ("(base) user@box:~/proj$ nvcc --version", ("shell", "nvcc --version")),
    ("user@box ~ % nvidia-smi", ("shell", "nvidia-smi")),
    ("bash-4.2$ cat /proc/driver/nvidia/version", ("shell", "cat /proc/driver/nvidia/version")),
    (">>> torch.cuda.is_available()", ("python", "torch.cuda.is_available()")),
    ("In [3]: torch.cuda.device_count()", ("python", "torch.cuda.device_count()")),
    ("$", ("shell", "")),
])
def test_prompt_styles(line, expected):
    assert prompt_command(line) == expected


@pytest.mark.parametrize("line", [
    "# This is a comment",
    "# blacklist nouveau",
    "#options nvidia NVreg_PreserveVideoMemoryAllocations=1",
    "[    5.123456] nvidia: module license 'NVIDIA' taints kernel.",
    "[Tue Dec  1 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
    "| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |",
    "+-----------------------------------------------------------------------------+",
    "Dec 01 10:00:00 host kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08",
    "systemd[1]: Started user@1000.service - User Manager for UID 1000.",
    "$5.00 is the price",
    "Traceback (most recent call last):",
    "...",
])
def test_lines_that_are_not_prompts(line):
    assert prompt_command(line) is None


def test_a_session_becomes_blocks():
    text = ("user@box:~$ nvidia-smi\n"
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
            "user@box:~$ lsmod | grep nvidia\n"
            "user@box:~$ sudo modprobe nvidia\n"
            "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
            ">>> import torch\n>>> torch.cuda.is_available()\nFalse\n"
            "In [2]: torch.cuda.device_count()\nOut[2]: 0\n")
    blocks = split_session(text)
    assert [(b.command, b.output, b.language) for b in blocks] == [
        ("nvidia-smi", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "shell"),
        ("lsmod | grep nvidia", "", "shell"),
        ("sudo modprobe nvidia", "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", "shell"),
        ("import torch", "", "python"),
        ("torch.cuda.is_available()", "False", "python"),
        ("torch.cuda.device_count()", "0", "python"),
    ]
    assert [b.line for b in blocks] == [1, 3, 4, 6, 7, 9]


def test_python_continuation_lines_join_the_statement():
    blocks = split_session(">>> for i in range(2):\n...     print(i)\n...\n0\n1\n")
    assert blocks == [Block("for i in range(2):\nprint(i)", "0\n1", 1, "python")]


def test_text_before_the_first_prompt_is_its_own_block():
    blocks = split_session("my GPU does not work, see below\n$ nvidia-smi -L\nNo devices were found\n")
    assert [(b.command, b.output) for b in blocks] == [(None, "my GPU does not work, see below"),
                                                      ("nvidia-smi -L", "No devices were found")]


@pytest.mark.parametrize("name", ["nvidia-bug-report-352.63/dmesg.txt", "nvidia-bug-report-352.63/nvidia-smi_-q.txt",
                                  "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid",
                                  "nvidia-bug-report-352.63/lspci_-nn.txt"])
def test_real_files_are_not_sessions(name):
    text = (CORPUS / name).read_text(errors="replace")
    assert not looks_like_session(text)
    assert split_session(text) == [Block(None, text)]


REAL = [(CORPUS / n).read_text(errors="replace")[:20000] for n in
        ("nvidia-bug-report-352.63/dmesg.txt", "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid")]
REAL.append("user@box:~$ nvidia-smi\nNo devices were found\n# dkms status\nnvidia/535: installed\n>>> 1\n1\n")


@given(mutated(REAL) | st.text(max_size=400))
@FUZZ
def test_splitting_survives_any_text(text):
    blocks = split_session(text)
    assert blocks
    for block in blocks:
        if block.language == "shell":  # output lines are the text's lines (splitlines also splits on \x85)
            assert all(line in text for line in block.output.split("\n"))
