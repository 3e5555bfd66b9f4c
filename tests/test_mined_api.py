"""Error codes of the CUDA and NVML APIs and error lines of NCCL and DCGM, mined from their sources
(knowledge/mined/api_errors.csv, tools/mine/mine_api.py): every row is sound and finds itself, a line naming one pasted
alone is never HEALTHY nor only "unknown", the JSON carries the source, a row's cause leads where it should, and the
table is read only for a line that names such an API."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import subprocess
import sys

import pytest

import mined_helpers
from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge import mined_api, read_table
from gpuhealth.knowledge.causes import symptoms
from gpuhealth.model import Report, Severity
from gpuhealth.report import json_report
from repo_paths import REPO

MINER = REPO / "tools" / "mine" / "mine_api.py"
sys.path.insert(0, str(MINER.parent))
import mine_api  # noqa: E402  (the miner: its pinned PyTorch files)

ROWS = mined_api.errors()
# A printf conversion, filled the way NCCL would (independently of the miner's pattern builder).
SPEC = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q|I64)?([diouxXeEfgGcspm%])")
FILL = {"d": "1", "i": "1", "u": "7", "o": "7", "x": "1f", "X": "1F", "c": "c", "s": "x", "p": "0x1f", "%": "%",
        "m": "Operation not permitted"}


def example(row: mined_api.ApiError) -> str:
    """A log line naming the row's error, as the library's users see it."""
    if row.api == "nccl":
        fmt = SPEC.sub(lambda m: FILL.get(m.group(1), "1.5"), row.text)
        return f"node7:2201:2290 [3] {row.file.removeprefix('src/')}:{row.line} NCCL WARN {fmt}"
    if row.api.startswith("cuda"):
        return f"RuntimeError: CUDA error: {row.name}"
    if row.api == "nvml":
        return f"pynvml.nvml.{row.name}: {row.text}"
    if row.api == "pytorch":  # raised (RuntimeError, AssertionError) or warned (UserWarning) with its values
        return f"{row.name}: " + SPEC.sub(lambda m: FILL.get(m.group(1), "x"), row.text)
    return f"Error: {row.name}"


def report(text: str, name: str = "train.log") -> Report:
    return mined_helpers.report(text, name)


# ---------------------------------------------------------------- the table

def test_the_table_holds_every_source():
    counts = {api: sum(r.api == api for r in ROWS) for api in mined_api.REPORTERS}
    assert counts["cuda-driver"] > 80 and counts["cuda-runtime"] > 100 and counts["nvml"] > 25
    assert counts["nccl"] > 300 and counts["dcgm"] > 100 and counts["pytorch"] > 15


def test_every_row_compiles_finds_its_example_and_has_complete_provenance():
    ids = set()
    for row in ROWS:
        re.compile(row.pattern)
        line = example(row)
        assert re.search(row.pattern, line), (row.id, line)
        found = mined_api.lookup(line)
        assert found is not None and re.search(found.pattern, line), (row.id, line)
        assert row.source and row.file and row.line > 0 and row.first_tag and row.last_tag, row.id
        assert row.text, row.id
        assert row.id not in ids
        ids.add(row.id)
    assert all(r.number for r in ROWS if r.api not in ("nccl", "pytorch"))
    tags = mine_api.PYTORCH_TAGS
    for row in ROWS:  # PyTorch: its Python files at release tags; its C++ files pinned to the commit they were read at
        if row.api != "pytorch":
            continue
        if row.file in mine_api.PYTORCH_FUNCTIONS:
            assert row.first_tag in tags and row.last_tag in tags, row.id
            assert tags.index(row.first_tag) <= tags.index(row.last_tag), row.id
        else:
            assert (row.file, row.last_tag) in {(path, commit) for path, commit, _ in mine_api.PYTORCH_PINS}, row.id


def test_the_causes_name_real_checks_and_symptoms():
    catalogue.load()
    codes = set(REGISTRY)
    known = set(symptoms())
    pointed = [r for r in ROWS if r.code]
    assert len(pointed) > 30
    for row in pointed:
        assert row.code in codes, row.id
        assert not row.symptom or row.symptom in known, row.id
    with open(REPO / "tools" / "mine" / "api_causes.csv", encoding="utf-8", newline="") as handle:
        for cause in csv.DictReader(handle):
            assert cause["source_title"] and cause["source_url"].startswith("https://"), cause


# ---------------------------------------------------------------- analyze

def test_thirty_random_error_lines_pasted_alone_are_never_healthy_nor_only_unknown():
    picked = random.Random(21).sample(ROWS, 30)
    for row in picked:
        line = example(row) + "\n"
        result = report(line)
        assert result.verdict != "HEALTHY" or any(f.code == "GH309" for f in result.findings), line
        said = {f.code for f in result.findings}
        assert said - {"GH003", "GH004"}, (line, said)
        assert "GH003" not in said, (line, said)


def test_a_mined_code_says_who_reported_it_what_it_means_and_where_that_is_written():
    result = report("Error: DCGM_FR_NVLINK_DOWN\n")
    (finding,) = [f for f in result.findings if f.code == "GH309"]
    # the code confirms its cause (api_causes.csv: decides): GH408 leads with the fixes, this finding folds under it
    assert finding.severity is Severity.INFO and result.findings[0].code == "GH408" and result.findings[0].fixes
    assert finding.message.startswith("DCGM reported DCGM_FR_NVLINK_DOWN (14) (see GH408): NVLink is down")
    assert "DCGM suggests:" in finding.message
    document = json.loads(json_report.render(result))
    (gh309,) = [f for f in document["findings"] if f["code"] == "GH309"]
    row = mined_api.lookup("DCGM_FR_NVLINK_DOWN")
    assert gh309["labels"]["mined"] == row.id and gh309["labels"]["api"] == "dcgm"
    assert gh309["labels"]["source"] == f"NVIDIA/DCGM {row.tags} dcgmlib/dcgm_errors.h:{row.line}"
    assert not any(f.code == "GH003" for f in result.findings)


def test_a_cuda_enum_the_catalogue_lacks_is_explained_from_its_header():
    result = report("RuntimeError: CUDA error: CUDA_ERROR_CONTEXT_ALREADY_IN_USE\n")
    (finding,) = [f for f in result.findings if f.code == "GH309"]
    assert finding.message.startswith("the CUDA driver API reported CUDA_ERROR_CONTEXT_ALREADY_IN_USE (216)")
    assert "CUDA Toolkit" in finding.labels["source"] and "include/cuda.h" in finding.labels["source"]


def test_an_nccl_warning_the_catalogue_names_generically_gets_its_source_and_pointer():
    line = ("node7:2201:2290 [3] transport/net_ib/connect.cc:372 NCCL WARN NET/IB: mlx5dv_create_qp failed to "
            "create QP: Operation not permitted\n")
    result = report(line)
    (finding,) = [f for f in result.findings if f.code == "GH309"]
    assert finding.severity is Severity.INFO  # the catalogue's own NCCL finding leads; this one says which warning
    assert "(see GH720)" in finding.message and "NVIDIA/nccl" in finding.labels["source"]
    assert any(f.code == "GH806" for f in result.findings)
    # a verbs call NCCL wraps (src/misc/ibvwrap.cc's "Call to %s failed") points to the fabric too
    row = mined_api.lookup("h:1:1 [0] NCCL WARN Call to ibv_create_qp failed")
    assert row is not None and row.file == "src/misc/ibvwrap.cc" and row.code == "GH720"


def test_a_pytorch_message_the_catalogue_lacks_is_explained_from_its_source():
    """PyTorch's CUDA initialisation messages (torch/cuda/__init__.py, c10/cuda/CUDAFunctions.cpp): a line no
    signature names gets the row's check and the source line; the catalogue's rows keep precedence."""
    result = report("AssertionError: libcudart functions unavailable. It looks like you have a broken build?\n")
    (finding,) = [f for f in result.findings if f.code == "GH309"]
    assert finding.message.startswith("PyTorch reported an error (__init__.py) (see GH605): ")
    assert finding.labels["api"] == "pytorch"
    assert finding.labels["source"].startswith("pytorch/pytorch v1.13.0..v2.5.1 torch/cuda/__init__.py:")
    warned = report("UserWarning: The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70.\n")
    assert any(f.code == "GH309" and "(see GH606)" in f.message for f in warned.findings)
    # a line the catalogue knows is its row's: PyTorch's "driver too old" leads with GH601, not with GH309
    old = report("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version "
                 "10010). Please update your GPU driver\n")
    top = max(f.severity for f in old.findings)
    assert "GH601" in {f.code for f in old.findings if f.severity == top}
    assert not any(f.code == "GH309" for f in old.findings)  # quiet: the catalogue's row says it, with its cause


def test_a_cuda_extension_built_with_another_major_cuda_points_to_the_extension_check():
    """torch/utils/cpp_extension.py's CUDA_MISMATCH_MESSAGE, rendered from its format as RuntimeError prints it (its
    lines as lines), read at every pinned tag; the minor-version warning is only a warning, and points nowhere."""
    rows = {r.text: r for r in ROWS if r.api == "pytorch"}
    first = rows["The detected CUDA version (%s) mismatches the version that was used to compile"]
    assert (first.file, first.first_tag, first.last_tag) == ("torch/utils/cpp_extension.py", "v1.13.0", "v2.5.1")
    assert first.code == rows["PyTorch (%s). Please make sure to use the same CUDA versions."].code == "GH627"
    result = report("RuntimeError:\nThe detected CUDA version (11.8) mismatches the version that was used to compile\n"
                    "PyTorch (12.1). Please make sure to use the same CUDA versions.\n")
    mined = [f for f in result.findings if f.code == "GH309"]
    assert mined and all("(see GH627)" in f.message for f in mined), [f.message for f in result.findings]
    assert any(f.labels["source"].startswith("pytorch/pytorch v1.13.0..v2.5.1 torch/utils/cpp_extension.py:")
               for f in mined)
    minor = rows["The detected CUDA version (%s) has a minor version mismatch with the version that was used to "
                 "compile PyTorch (%s)."]
    assert minor.name == "UserWarning" and not minor.code


def test_a_message_of_one_release_only_keeps_that_release_as_its_range():
    """v1.13.0's _check_capability warned that a GPU needs a newer CUDA than the wheel's; later tags dropped it."""
    rows = {r.text: r for r in ROWS if r.api == "pytorch"}
    gone = rows["Found GPU%d %s which requires CUDA_VERSION >= %d to"]
    assert (gone.first_tag, gone.last_tag, gone.code) == ("v1.13.0", "v1.13.0", "GH606")
    line = "UserWarning: Found GPU0 Tesla K80 which requires CUDA_VERSION >= 11000 to\n"
    assert any(f.code == "GH309" and "(see GH606)" in f.message for f in report(line).findings)


def test_the_miner_reads_only_the_named_functions_messages_and_the_templates_they_format():
    """Hand-written module (no PyTorch text): a raise of a template's .format, a warn of a local template's % and of
    an f-string are read, each template line as its own message; a function not named is not read."""
    source = (
        'MISMATCH = """\nThe toolkit version ({0}) differs from\nthe build ({1}).\n"""\n'  # lines 1-4
        "def _check(a, b):\n"
        "    raise RuntimeError(MISMATCH.format(a, b))\n"
        "def _warn(x):\n"
        '    old = """\n    GPU%d is too old.\n    """\n'  # lines 8-10
        "    warnings.warn(old % (1,))\n"
        '    warnings.warn(f"device {x} is odd")\n'
        "def other():\n"
        '    raise ValueError("never read")\n')
    assert mine_api._python_messages(source, ("_check", "_warn")) == [
        (2, "error", "The toolkit version (%s) differs from"), (3, "error", "the build (%s)."),
        (9, "warning", "GPU%d is too old."), (12, "warning", "device %s is odd")]


def test_gh309_stays_quiet_on_a_training_log_without_errors():
    """Hand-written ordinary progress lines (no API's error text): GH309 does not fire."""
    quiet = report("Epoch 1/10: loss=0.4321 acc=0.91\nUsing device: cuda:0 (NVIDIA H100 80GB HBM3)\n"
                   "Saved checkpoint to ckpt/epoch1.pt\n")
    assert not any(f.code == "GH309" for f in quiet.findings)
    rows = {r.text: r for r in ROWS if r.api == "pytorch"}
    assert rows["Torch not compiled with CUDA enabled"].code == "GH605"
    assert rows["The NVIDIA driver on your system is too old (found version %s)."].code == "GH601"
    assert rows["Found GPU%d %s which is of cuda capability %d.%d."].code == "GH606"


def test_error_802_leads_to_fabric_manager_and_a_mismatch_to_gh202():
    for line, code in (("CUDA error: CUDA_ERROR_SYSTEM_NOT_READY\n", "GH210"),
                       ("cudaErrorSystemNotReady: system not yet initialized\n", "GH210"),
                       ("pynvml.NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.\n",
                        "GH202")):
        result = report(line)
        top = max(f.severity for f in result.findings)
        assert code in {f.code for f in result.findings if f.severity == top}, (line, [f.code for f in result.findings])
    rows = {r.name: r for r in ROWS}
    assert rows["CUDA_ERROR_SYSTEM_NOT_READY"].code == rows["cudaErrorSystemNotReady"].code == "GH210"
    assert rows["cudaErrorInsufficientDriver"].number == "35" and rows["cudaErrorInsufficientDriver"].code == "GH601"
    assert rows["NVML_ERROR_GPU_IS_LOST"].code == "GH302"


def test_analyze_without_api_lines_never_reads_the_table():
    probe = ("from gpuhealth.knowledge import mined_api\n"
             "print('READ' if mined_api._index.cache_info().currsize else 'NOT-READ', file=sys.stderr)")
    plain = mined_helpers.analyze_in_child("Failed to initialize NVML: Unknown Error\n", probe)
    assert "NOT-READ" in plain, plain[-500:]
    api = mined_helpers.analyze_in_child("Error: DCGM_FR_NVLINK_DOWN\n", probe)
    assert "READ" in api and "NOT-READ" not in api, api[-500:]


# ---------------------------------------------------------------- regenerate and compare

CHECKOUTS = REPO / "tools" / "mine" / "checkouts"
SOURCES = {"--cuda-include": os.environ.get("GPUHEALTH_MINE_CUDA_INCLUDE", str(CHECKOUTS / "cuda-include")),
           "--nvml": os.environ.get("GPUHEALTH_MINE_NVML", str(CHECKOUTS / "go-nvml")),
           "--nccl": os.environ.get("GPUHEALTH_MINE_NCCL", str(CHECKOUTS / "nccl")),
           "--dcgm": os.environ.get("GPUHEALTH_MINE_DCGM", str(CHECKOUTS / "DCGM")),
           "--pytorch": os.environ.get("GPUHEALTH_MINE_PYTORCH", str(CHECKOUTS / "pytorch"))}


@pytest.mark.skipif(not all(path and os.path.exists(path) for path in SOURCES.values()),
                    reason="no CUDA Toolkit include directory and NVIDIA/go-nvml, NVIDIA/nccl, NVIDIA/DCGM and "
                           "pytorch/pytorch checkouts (tools/mine/checkouts/{cuda-include,go-nvml,nccl,DCGM,pytorch} "
                           "or GPUHEALTH_MINE_CUDA_INCLUDE, _NVML, _NCCL, _DCGM, _PYTORCH; "
                           "CI has no network): the mined API table is not regenerated and compared")
def test_the_miner_regenerates_the_committed_table(tmp_path):
    out = tmp_path / "api_errors.csv"
    args = [a for option, path in SOURCES.items() for a in (option, path)]
    done = subprocess.run([sys.executable, str(MINER), *args, "--out", str(out)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_text(encoding="utf-8") == read_table(mined_api.TABLE)
    assert "WARN formats read" in done.stderr and "failure codes" in done.stderr and "return codes" in done.stderr


def test_the_check_is_registered():
    assert "gpuhealth.checks.api_messages" in catalogue.CHECK_MODULES
