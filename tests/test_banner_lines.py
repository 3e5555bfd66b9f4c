"""A program's one-line version banner is read wherever it is pasted (analyze.py ``_read_banners``, issue 21).

Hand-written evidence: the banners are the lines nvcc, /proc/driver/nvidia/version, nvidia-smi, /proc/version,
gcc, pip and collect_env print (parsers/banners.py names where each form is defined); the prose and the versions
are written for these tests.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from gpuhealth.analyze import VERSION_BANNERS, analyze_texts
from gpuhealth.cli import main
from smi_tables import a100_table

NVCC = "Cuda compilation tools, release 10.0, V10.0.130"
NVRM = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.54  Tue Aug 14 22:29:16 PDT 2018"
ISSUE_BODY = f"""Training fails at start on our lab server.

{NVCC}
{NVRM}

The program prints:
CUDA error: CUDA driver version is insufficient for CUDA runtime version
"""
SMI_TABLE = "Mon Dec  7 06:00:00 2026\n" + a100_table(bus="07", size=40, temp=31, watts=43) + "\n"


def _report(tmp_path, text: str) -> dict:
    path = tmp_path / "issue.md"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", "--format", "json", str(path)])
    return json.loads(result.stdout)


def _banners_read(log) -> list[str]:
    return [r.note for r in log if r.kind == VERSION_BANNERS]


def test_an_issue_body_quoting_nvcc_and_the_driver_gets_the_version_judgement(tmp_path):
    """nvcc 10.0 on driver 396.54 is below CUDA 10.0's minimum (410.48): a program's lines, so critical."""
    report = _report(tmp_path, ISSUE_BODY)
    finding = next(f for f in report["findings"] if f["code"] == "GH601")
    assert finding["severity"] == "critical"
    assert "the driver is 396.54" in finding["message"] and "CUDA 10.0" in finding["message"]
    assert report["verdict"] != "HEALTHY"


def test_the_banners_fill_the_fields_the_whole_output_readers_fill():
    snapshot, log = analyze_texts([("issue.md", ISSUE_BODY)])
    assert snapshot.driver is not None and snapshot.driver.version == "396.54"
    cuda = snapshot.cuda
    assert cuda is not None and (cuda.nvcc_release, cuda.nvcc_version) == ("10.0", "10.0.130")
    assert snapshot.reported == ()  # machine lines, not the reporter's words
    assert _banners_read(log) == ["nvcc --version, /proc/driver/nvidia/version"]


def test_kernel_gcc_and_torch_banners_in_prose():
    text = ("Here is my setup, copied from the terminal:\n"
            "Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, "
            "GNU ld (GNU Binutils for Ubuntu) 2.38) #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023\n"
            "gcc (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0\n"
            "torch                    2.1.0+cu121\n"
            "Is CUDA available: False\n"
            "Any idea why the module does not build?\n")
    snapshot, _ = analyze_texts([("issue.md", text)])
    assert snapshot.os is not None and snapshot.os.kernel_release == "5.15.0-91-generic"
    install = snapshot.install
    assert install is not None
    assert (install.kernel_release, install.kernel_compiler) == ("5.15.0-91-generic", "gcc 11.4.0")
    assert (install.gcc_version, install.gcc_present) == ("12.3.0", True)
    torch = snapshot.torch
    assert torch is not None
    assert (torch.torch_version, torch.torch_cuda_version, torch.cuda_available) == ("2.1.0+cu121", "12.1", False)


def test_a_sentence_quoting_a_version_is_not_a_banner():
    snapshot, log = analyze_texts([("note.txt", "I use CUDA 10.0 with driver 396.54 and it fails.\n")])
    assert _banners_read(log) == []
    assert snapshot.cuda is None or snapshot.reported_fact("cuda", "nvcc_release") is not None


def test_a_whole_output_parsed_as_such_is_not_read_again():
    """nvcc's whole output is the nvcc-version kind's; a whole nvidia-smi table is the table parser's."""
    nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2018 NVIDIA Corporation\n" + NVCC + "\n"
    snapshot, log = analyze_texts([("nvcc.txt", nvcc), ("smi.txt", SMI_TABLE)])
    assert [r.kind for r in log] == ["nvcc-version", "smi-table"]
    assert snapshot.smi is not None and snapshot.smi.format == "table" and len(snapshot.smi.gpus) == 1
    assert snapshot.sources["smi"] == "smi.txt" and snapshot.sources["cuda"] == "nvcc.txt"


def test_a_banner_pasted_above_an_smi_table_is_read_and_the_table_is_not():
    snapshot, log = analyze_texts([("issue.md", NVCC + "\n" + SMI_TABLE)])
    assert _banners_read(log) == ["nvcc --version"]  # not "nvidia-smi": its header row is the table's
    assert snapshot.cuda is not None and snapshot.cuda.nvcc_release == "10.0"
    assert snapshot.smi is not None and not snapshot.smi.partial and len(snapshot.smi.gpus) == 1


def test_a_field_an_earlier_piece_filled_wins():
    """The whole nvidia-smi table given first keeps its driver and GPUs; a later quoted header does not replace it."""
    header = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |\nit fails\n"
    snapshot, _ = analyze_texts([("smi.txt", SMI_TABLE), ("note.txt", "We see:\n" + header)])
    assert snapshot.smi is not None and snapshot.smi.driver_version == "535.104.05" and len(snapshot.smi.gpus) == 1


def test_banners_in_two_pieces_merge_as_the_whole_outputs_do():
    """``_merge`` decides between pieces: two driver banners quoted in prose end as two /proc files given alone."""
    newer = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Thu Aug 10 20:06:03 UTC 2023"
    quoted, _ = analyze_texts([("a.txt", f"old box:\n{NVRM}\n"), ("b.txt", f"new box:\n{newer}\n")])
    whole, log = analyze_texts([("a.txt", NVRM + "\n"), ("b.txt", newer + "\n")])
    assert [r.kind for r in log] == ["proc-version", "proc-version"]
    assert quoted.driver == whole.driver


def test_banners_in_prose_alone_only_list_the_setup(tmp_path):
    """nvcc's and gcc's version lines show what is installed, not GPUs working: never HEALTHY (GH005)."""
    text = f"My setup:\n{NVCC}\ngcc (Ubuntu 7.3.0-16ubuntu3) 7.3.0\nthanks\n"
    report = _report(tmp_path, text)
    assert report["verdict"] != "HEALTHY"
    assert any(f["code"] == "GH005" for f in report["findings"])


def test_a_few_line_version_output_with_another_programs_banner():
    """Four lines taken whole for /proc/driver/nvidia/version: its parser reads the driver, the banner reader nvcc's
    line beside it (and not the driver's line a second time)."""
    text = f"{NVRM}\n{NVCC}\nCUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
    snapshot, log = analyze_texts([("paste.txt", text)])
    assert [(r.kind, r.note) for r in log][:2] == [("proc-version", ""), (VERSION_BANNERS, "nvcc --version")]
    assert snapshot.driver is not None and snapshot.driver.version == "396.54"
    assert snapshot.cuda is not None and snapshot.cuda.nvcc_release == "10.0"
