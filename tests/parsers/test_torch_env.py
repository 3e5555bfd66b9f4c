"""parse_collect_env over every PyTorch collect_env report in the corpus, edge cases, and fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError, TorchEnv
from gpuhealth.parsers.torch_env import parse_collect_env

COLLECT_ENV_FILES = corpus_files("pytorch-collect-env/*.txt")
DIR = CORPUS / "pytorch-collect-env"


def parse(name: str) -> TorchEnv:
    return parse_collect_env((DIR / name).read_text())


def test_corpus_has_collect_env():
    assert len(COLLECT_ENV_FILES) >= 11


@pytest.mark.parametrize("path", COLLECT_ENV_FILES, ids=corpus_id)
def test_corpus_file_parses(path: Path):
    env = parse_collect_env(path.read_text(errors="replace"))
    assert env.torch_version and env.torch_version[0].isdigit()
    assert isinstance(env.cuda_available, bool)
    assert env.os
    assert env.python_version and env.python_version[0].isdigit()
    for name in env.gpu_names:
        assert name and not name.startswith("GPU ")
    if env.cuda_available:
        assert env.gpu_names and env.driver_version


def test_a5000_x8():
    env = parse("pytorch-issue-84873_A5000x8_510.73.08.txt")
    assert env == TorchEnv(
        torch_version="1.11.0+cu115",
        torch_cuda_version="11.5",
        cuda_available=True,
        gpu_names=("NVIDIA RTX A5000",) * 8,
        driver_version="510.73.08",
        cudnn_version="8.4.0",
        os="Ubuntu 18.04.6 LTS (x86_64)",
        python_version="3.7.13",
    )


def test_could_not_collect():
    env = parse("pytorch-issue-84365_could-not-collect.txt")
    assert env.cuda_available is False
    assert env.torch_version == "1.12.1+cu113"
    assert env.torch_cuda_version == "11.3"
    assert env.gpu_names == ()
    assert env.driver_version is None
    assert env.cudnn_version == "7.6.5 or 8.0.5"


def test_single_line_gpu_and_cudnn_path():
    env = parse("pytorch-issue-74056_2080Ti_440.64.txt")
    assert env.gpu_names == ("GeForce RTX 2080 Ti",)
    assert env.cudnn_version == "7.0.5"
    assert env.python_version == "3.9.9+"
    env = parse("pytorch-issue-91351_A5000_515.65.01.txt")
    assert (env.gpu_names, env.driver_version, env.torch_version) == (
        ("NVIDIA RTX A5000",), "515.65.01", "1.14.0a0+410ce96")


def test_yes_means_available_and_old_fields():
    env = parse("pytorch-issue-15135_1080Tix3_390.48.txt")
    assert env.cuda_available is True
    assert env.gpu_names == ("GeForce GTX 1080 Ti",) * 3
    assert (env.torch_version, env.torch_cuda_version, env.python_version) == ("1.0.0", "9.0.176", "2.7")
    assert env.os == "Ubuntu 16.04.4 LTS"
    assert env.cudnn_version == "7.0.4 or 7.0.5"


def test_mixed_gpus_and_major_only_cudnn_link():
    env = parse("pytorch-issue-65652_3090x2+TITAN-Vx2_455.45.01.txt")
    assert env.gpu_names == ("GeForce RTX 3090", "GeForce RTX 3090", "TITAN V", "TITAN V")
    assert env.cudnn_version == "7.6.2 or 7.6.5 or 7.5.0"  # libcudnn.so.7 is only the major link
    env = parse("pytorch-issue-73228_3090+2080Ti_510.54.txt")
    assert env.gpu_names == ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 2080 Ti")
    assert env.cudnn_version == "8.3.1"


def test_cpu_only_build_and_mig():
    # Hand-written in the shape of newer collect_env output: CPU-only wheel, then a MIG listing.
    cpu = (
        "Collecting environment information...\nPyTorch version: 2.3.1+cpu\nIs debug build: False\n"
        "CUDA used to build PyTorch: None\nROCM used to build PyTorch: N/A\n\n"
        "OS: Ubuntu 22.04.4 LTS (x86_64)\nPython version: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]"
        " (64-bit runtime)\nIs CUDA available: False\nCUDA runtime version: No CUDA\n"
        "GPU models and configuration: No CUDA\nNvidia driver version: No CUDA\ncuDNN version: No CUDA\n"
    )
    assert parse_collect_env(cpu) == TorchEnv(
        torch_version="2.3.1+cpu", torch_cuda_version=None, cuda_available=False, gpu_names=(),
        driver_version=None, cudnn_version=None, os="Ubuntu 22.04.4 LTS (x86_64)", python_version="3.10.12",
    )
    mig = (
        "PyTorch version: 2.4.0+cu121\nIs CUDA available: True\nCUDA used to build PyTorch: 12.1\n"
        "GPU models and configuration: \nGPU 0: NVIDIA H100 80GB HBM3\n  MIG 3g.40gb     Device  0:\n"
        "GPU 1: NVIDIA H100 80GB HBM3\n\nNvidia driver version: 550.90.07\ncuDNN version: 8.9.2\n"
    )
    env = parse_collect_env(mig)
    assert env.gpu_names == ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert (env.driver_version, env.cudnn_version, env.torch_cuda_version) == ("550.90.07", "8.9.2", "12.1")


@pytest.mark.parametrize("text", ["", "hello\n", "OS: Ubuntu\nGCC version: 11\n"])
def test_not_collect_env(text: str):
    with pytest.raises(ParseError):
        parse_collect_env(text)


# --------------------------------------------------------------------------- fuzzing

_TEXTS = [p.read_text(errors="replace") for p in COLLECT_ENV_FILES] or ["PyTorch version: 2.0.0\n"]




test_fuzz_random_text, test_fuzz_mutated_corpus = fuzz_tests(only_parse_errors(parse_collect_env), _TEXTS)


def test_indented_paste():
    text = "    PyTorch version: 2.1.0\n    Is CUDA available: True\n    GPU models and configuration:\n" \
           "    GPU 0: NVIDIA A100-SXM4-80GB\n"
    env = parse_collect_env(text)
    assert (env.torch_version, env.cuda_available, env.gpu_names) == ("2.1.0", True, ("NVIDIA A100-SXM4-80GB",))
