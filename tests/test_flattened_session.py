"""Flattened pastes (issue 21): a terminal session whose newlines a mail archive, a forum or a chat lost is split
back into its (command, output) blocks where the evidence registry recognises each output as its command's.

The examples are written here in the shapes such pastes take (a Launchpad bug report mirrored on a mail archive
runs `cat /proc/version`, `gcc --version` and `lsb_release -rd` into one line); the versions and host names are
made up for the tests. The negatives are prose that names commands, which must stay prose.
"""

from __future__ import annotations

import time

import pytest

from gpuhealth.analyze import analyze_texts, printed_by
from gpuhealth.checks.engine import run_checks
from gpuhealth.parsers.session import MAX_FLAT_CHECKS, split_session

# Written for this test in the shape of a mail archive's copy of a Launchpad report (newlines lost).
XENIAL = ("cat /proc/version Linux version 4.4.0-36-generic (buildd@lcy01-07) (gcc version 5.3.1 20160413 (Ubuntu "
          "5.3.1-14ubuntu2.1) ) #55-Ubuntu SMP Thu Aug 11 18:01:55 UTC 2016 gcc --version gcc (Ubuntu "
          "5.4.0-6ubuntu1~16.04.2) 5.4.0 20160609 lsb_release -rd Description: Ubuntu 16.04.1 LTS Release: 16.04")


def _pairs(text: str) -> list[tuple[str | None, str]]:
    return [(b.command, b.output) for b in split_session(text, printed_by)]


def test_a_flattened_session_becomes_its_blocks():
    assert _pairs(XENIAL) == [
        ("cat /proc/version", "Linux version 4.4.0-36-generic (buildd@lcy01-07) (gcc version 5.3.1 20160413 (Ubuntu "
                              "5.3.1-14ubuntu2.1) ) #55-Ubuntu SMP Thu Aug 11 18:01:55 UTC 2016"),
        ("gcc --version", "gcc (Ubuntu 5.4.0-6ubuntu1~16.04.2) 5.4.0 20160609"),
        # a plain command (options only) ends the output before it once one is proven; its own output is not read
        (None, "lsb_release -rd Description: Ubuntu 16.04.1 LTS Release: 16.04"),
    ]


def test_prompts_and_a_sentence_before_the_commands_are_taken_off():
    text = ("Here is what I see: user@gpu1:~$ uname -r 5.15.0-91-generic user@gpu1:~$ nvidia-smi -L GPU 0: NVIDIA "
            "A100-SXM4-80GB (UUID: GPU-5c1d2e3f-0a1b-2c3d-4e5f-60718293a4b5) user@gpu1:~$ sudo dkms status "
            "nvidia/535.104.05, 5.15.0-91-generic, x86_64: installed")
    assert _pairs(text) == [
        (None, "Here is what I see:"),
        ("uname -r", "5.15.0-91-generic"),
        ("nvidia-smi -L", "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5c1d2e3f-0a1b-2c3d-4e5f-60718293a4b5)"),
        ("sudo dkms status", "nvidia/535.104.05, 5.15.0-91-generic, x86_64: installed"),  # the module is output
    ]


def test_lines_around_a_flattened_line_stay_their_own_blocks():
    text = f"My driver build fails after the update.\n{XENIAL}\nAny idea?\n"
    pairs = _pairs(text)
    assert pairs[0] == (None, "My driver build fails after the update.")
    assert [c for c, _ in pairs[1:4]] == ["cat /proc/version", "gcc --version", None]
    assert pairs[4] == (None, "Any idea?")  # not the output of lsb_release


@pytest.mark.parametrize("text", [
    "Please run nvidia-smi and lspci and send the output",
    "make sure gcc --version matches; cat /proc/version says Linux version 5.4 on that box",
    "I tried nvidia-smi -L to list GPUs but it printed nothing, and dkms status is empty",
    "uname -r shows the new kernel, lsmod | grep nvidia shows nothing",
    "[   12.345678] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05; modprobe nvidia failed",
    "The gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 compiler is the default",
])
def test_prose_that_names_commands_is_not_split(text):
    assert _pairs(text) == [(None, text)]


def test_a_session_with_its_newlines_splits_as_before():
    text = ("user@box:~$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5c1d2e3f-0a1b-2c3d-4e5f-60718293a4b5)\n"
            "user@box:~$ uname -r\n5.15.0-91-generic\nuser@box:~$ lsmod | grep nvidia\nnvidia  56442880  0\n")
    assert split_session(text, printed_by) == split_session(text)


def test_a_flattened_gcc_mismatch_paste_gives_gh505():
    snapshot, log = analyze_texts([("session.txt", XENIAL)])
    kinds = {r.kind for r in log}
    assert {"kernel-version", "gcc-version"} <= kinds
    assert snapshot.install is not None
    assert snapshot.install.kernel_compiler == "gcc 5.3.1" and snapshot.install.gcc_version == "5.4.0"
    assert "GH505" in {f.code for f in run_checks(snapshot).findings}


def test_the_same_paste_with_its_newlines_gives_the_same_facts():
    with_newlines = XENIAL.replace(" gcc --version ", "\n$ gcc --version\n").replace(
        "cat /proc/version ", "$ cat /proc/version\n").replace(" lsb_release -rd ", "\n$ lsb_release -rd\n")
    flat, _ = analyze_texts([("a", XENIAL)])
    lines, _ = analyze_texts([("b", with_newlines)])
    assert flat.install == lines.install
    assert flat.os is not None and lines.os is not None and flat.os.kernel_release == lines.os.kernel_release


def test_adversarial_flattened_lines_stay_fast():
    lines = ["gcc --version " * 20_000, "cat /proc/version Linux version " * 8000,
             "nvidia-smi -L GPU 0: " * 10_000, "sudo " * 40_000 + "dkms status", "$ " * 50_000 + "uname -r 5.4",
             ("lspci -k " + "-v " * 300) * 200]
    start = time.process_time()
    for line in lines:
        split_session(line, printed_by)
    split_session("\n".join(lines), printed_by)
    assert time.process_time() - start < 3.0


def test_the_judgements_per_text_are_bounded():
    calls = []

    def counting(command: str, output: str) -> bool:
        calls.append(command)
        return False

    split_session("\n".join(["nvidia-smi -q x lspci -k y dkms status z"] * 5000), counting)
    assert len(calls) <= MAX_FLAT_CHECKS


@pytest.mark.parametrize("text", [
    "root@plex:~# dmesg | grep NVRM\n[    6.252567] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06\n",
    "$ dmesg | grep -i xid\n[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python, GPU has fallen "
    "off the bus.\n",
    "$ journalctl -k | grep NVRM\n",
])
def test_a_prompt_line_with_one_command_is_a_command_line(text):
    # a pipeline's last program takes its argument ("grep NVRM" is not "grep" printing "NVRM"), and a prompt line
    # holds a flattened session only when two or more commands are on it
    assert split_session(text, printed_by) == split_session(text)


def test_a_comment_after_a_command_holds_its_output():
    # a write-up's "cmd # what it printed" (the annotation is the command's output, transcribed)
    text = "# versions\nuname -r # 5.15.0-94-generic\ndkms status nvidia # nvidia/570.133.07, 5.15.0-94-generic, " \
           "x86_64: installed\n"
    assert [(c, o) for c, o in _pairs(text) if c] == [
        ("uname -r", "5.15.0-94-generic"),
        ("dkms status nvidia", "nvidia/570.133.07, 5.15.0-94-generic, x86_64: installed")]


def test_an_unproven_command_after_a_prompt_only_ends_the_output_before_it():
    # `lsmod | grep nvidia` flattened runs three module lines together: the lsmod reader would take the first for
    # the whole list and call the others not loaded, so that block is not read as lsmod's; it still ends the
    # /proc/driver/nvidia/version output before it
    text = ("$ cat /proc/driver/nvidia/version NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
            "01:15:15 UTC 2023 $ lsmod | grep nvidia nvidia_uvm 1437696 0 nvidia_drm 77824 0 nvidia 56442880 2 "
            "nvidia_uvm $ nvidia-smi -L GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5c1d2e3f-0a1b-2c3d-4e5f-60718293a4b5)")
    pairs = _pairs(text)
    assert pairs[0] == ("cat /proc/driver/nvidia/version",
                        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023")
    assert pairs[1] == (None, "lsmod | grep nvidia nvidia_uvm 1437696 0 nvidia_drm 77824 0 nvidia 56442880 2 "
                              "nvidia_uvm")
    assert pairs[2][0] == "nvidia-smi -L"
    snapshot, _ = analyze_texts([("flat.txt", text)])
    assert snapshot.driver is not None and snapshot.driver.version == "535.104.05"
    assert "GH201" not in {f.code for f in run_checks(snapshot).findings}  # no module called unloaded


def test_the_cheap_first_look_never_misses_what_the_pattern_finds():
    """_names_a_program runs before the costly _FLAT_CANDIDATE search: over the repository's real outputs and the
    flattened lines here, wherever the pattern finds a candidate the first look says yes (it may say yes more often)."""
    from conftest import DATA
    from gpuhealth.parsers.session import _FLAT_CANDIDATE, _names_a_program

    texts = [p.read_text(encoding="utf-8", errors="replace")[:200_000] for p in sorted(DATA.rglob("*.txt"))[:400]]
    texts += ["cat /proc/version Linux version 5.15.0 (gcc version 11.4.0) gcc --version gcc (Ubuntu) 11.4.0",
              "$ sudo -E /usr/bin/x86_64-linux-gnu-gcc-12 --version x86_64-linux-gnu-gcc-12 (Debian 12.2.0) 12.2.0"]
    found = [t for t in texts if _FLAT_CANDIDATE.search(t)]
    assert found and all(_names_a_program(t) for t in found)
    assert not _names_a_program("Product Name : NVIDIA H100 80GB HBM3\nAccounting Mode : Disabled\n")
