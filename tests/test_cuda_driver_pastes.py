"""GH601 (CUDA newer than the driver) on the forms people paste the driver's side in: a whole `nvidia-smi -q`, its
version lines alone (`nvidia-smi -q | grep -i version`), the table cut after its header line; and the CUDA side as
`nvcc --version` or PyTorch's `torch.version.cuda`.

The driver's side is cut from real captures in tests/data/corpus (the way `grep`/`head` cut them); the `nvcc` output
is the real one tests/parsers/test_cuda.py holds. Putting a driver of one host beside a toolkit of another is the
test's own scenario."""

from __future__ import annotations

import pytest

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import identify
from gpuhealth.model import Severity, Snapshot
from gpuhealth.parsers.smi_query import parse_smi_query
from gpuhealth.parsers.smi_table import parse_smi_table

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")

Q_460 = "azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out"  # Driver 460.32.03, CUDA 11.2, 8 GPUs
TABLE_525 = "gpud/accelerator_nvidia_query__nvidia-smi.525.125.06.out.0.valid"  # Driver 525.125.06, CUDA 12.0
A100_LSPCI = "gpud/nvidia-query__lspci.nn.a100"
NVCC_13 = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
           "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
           "Build cuda_13.0.r13.0/compiler.36424714_0\n")


def read(name: str) -> str:
    return (CORPUS / name).read_text(errors="replace")


def grep_i(text: str, word: str) -> str:
    """What `grep -i <word>` prints."""
    return "".join(line + "\n" for line in text.splitlines() if word.lower() in line.lower())


def head(text: str, lines: int) -> str:
    return "".join(line + "\n" for line in text.splitlines()[:lines])


def session(*blocks: tuple[str, str]) -> Snapshot:
    text = "".join(f"$ {command}\n{output}" for command, output in blocks)
    return analyze_texts([("paste.txt", text)])[0]


def gh601(snapshot: Snapshot):
    report = run_checks(snapshot, select=["GH601"])
    return list(report.findings), [s.reason for s in report.skipped]


def test_the_version_lines_of_nvidia_smi_q_are_read():
    lines = grep_i(read(Q_460), "version")
    assert lines.startswith("Driver Version") and identify(lines) == "smi-query"
    report = parse_smi_query(lines)
    assert (report.driver_version, report.cuda_version, report.partial) == ("460.32.03", "11.2", True)


def test_a_table_cut_after_its_header_is_read_as_versions_without_gpus():
    cut = head(read(TABLE_525), 3)
    assert identify(cut) == "smi-table"
    report = parse_smi_table(cut)
    assert (report.driver_version, report.cuda_version, report.gpus, report.partial) == ("525.125.06", "12.0", (),
                                                                                        True)


@pytest.mark.parametrize("smi", [
    pytest.param(lambda: ("nvidia-smi -q", read(Q_460)), id="whole-q"),
    pytest.param(lambda: ('nvidia-smi -q | grep -i version', grep_i(read(Q_460), "version")), id="q-version-lines"),
])
def test_nvcc_newer_than_a_pasted_q_driver_is_critical(smi):
    (finding,), _ = gh601(session(smi(), ("nvcc --version", NVCC_13)))
    assert finding.severity is Severity.CRITICAL
    assert "CUDA 13.0.88 (nvcc on PATH) needs driver >= 580" in finding.message and "460.32.03" in finding.message


def test_nvcc_newer_than_a_cut_table_header_is_critical_and_no_gpu_counts_as_missing():
    snap = session(("nvidia-smi | head -3", head(read(TABLE_525), 3)), ("nvcc -V", NVCC_13),
                   ("lspci -nn", read(A100_LSPCI)))
    (finding,), _ = gh601(snap)
    assert finding.severity is Severity.CRITICAL and "the driver is 525.125.06" in finding.message
    report = run_checks(snap, select=["GH102"])
    assert report.findings == () or list(report.findings) == []
    assert "excerpt" in report.skipped[0].reason


def test_torch_built_for_a_newer_cuda_than_the_driver_is_critical():
    snap = session(("nvidia-smi", head(read(TABLE_525), 3)),
                   ('python -c "import torch; print(torch.__version__, torch.version.cuda)"', "2.9.0+cu130 13.0\n"))
    assert snap.torch is not None and snap.torch.torch_cuda_version == "13.0"
    (finding,), _ = gh601(snap)
    assert finding.severity is Severity.CRITICAL and "CUDA 13.0 (PyTorch's CUDA) needs driver >= 580" in finding.message
    commands = [f.command for f in finding.fixes]
    assert any("download.pytorch.org/whl/cu<XY>" in c for c in commands)
    assert not any("cuda-toolkit" in c for c in commands)  # no toolkit was in question


def test_torch_within_the_driver_s_cuda_family_is_quiet():
    """PyTorch brings its own runtime: CUDA 12.1 on a 525 driver runs by minor-version compatibility."""
    snap = session(("nvidia-smi", head(read(TABLE_525), 3)),
                   ('python -c "import torch; print(torch.version.cuda)"', "12.1\n"))
    found, skipped = gh601(snap)
    assert found == [] and skipped == []


@pytest.mark.parametrize("output", ["None\n", "Traceback (most recent call last):\nModuleNotFoundError: No module "
                                    "named 'torch'\n", "12.1.0.dev 3 words more\n"])
def test_torch_version_cuda_that_is_no_version_sets_nothing(output):
    snap = session(('python -c "import torch; print(torch.version.cuda)"', output))
    assert snap.torch is None or snap.torch.torch_cuda_version is None


def test_the_host_line_names_the_driver_nvidia_smi_printed():
    """Before: "driver not in the evidence given" beside nvidia-smi's own "Driver Version: 525.125.06"."""
    from gpuhealth.report.common import host_line, host_summary

    snap = session(("nvidia-smi", read(TABLE_525)))
    assert host_line(snap).startswith("driver 525.125.06 (nvidia-smi) · CUDA 12.0 max")
    excerpt = session(("nvidia-smi -q | grep -i version", grep_i(read(Q_460), "version")))
    assert dict(host_summary(excerpt))["GPUs (driver)"].endswith("in an excerpt (not the driver's whole list)")
