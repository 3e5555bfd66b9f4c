"""parse_program_text: the language, the torch pin and wheel index, the base image; only ParseError escapes."""

from __future__ import annotations

import pytest

from conftest import DATA
from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError
from gpuhealth.parsers.program import parse_program_text, program_language

PROGRAMS = sorted(p for p in (DATA / "programs").iterdir() if p.name.startswith("handwritten_"))
_TEXTS = [p.read_text() for p in PROGRAMS]


def _program(name: str):
    return parse_program_text((DATA / "programs" / name).read_text())


def test_a_dockerfile_names_its_base_image_and_the_wheel_index():
    program = _program("handwritten_dockerfile-cuda12-pip-cu124.Dockerfile")
    assert (program.language, program.base_images, program.image_cuda) == (
        "dockerfile", ("nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04",), "12.4.1")
    assert (program.torch_pin, program.torch_index) == ("2.3.0", "cu124")


def test_a_shell_script_and_a_python_script():
    assert _program("handwritten_autoformer-25_script.sh").language == "shell"
    python = _program("handwritten_cpu-wheel.py.txt")
    assert (python.language, python.torch_pin, python.torch_index) == ("python", "2.1.0+cpu", "cpu")


def test_a_pytorch_base_image_says_torch_and_cuda():
    program = parse_program_text("FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime\nRUN pip install x\n")
    assert (program.image_torch, program.image_cuda) == ("2.1.0", "12.1")


@pytest.mark.parametrize("text", [
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nimport torch\nimport os\n",  # a program's output
    ">>> import torch\n>>> import os\n",  # an interactive session
    "torchvision==0.16.0\ntorch-scatter==2.1.2\n",  # no torch pin, no program
    "FROM\n", "", "just words\n"])
def test_what_is_no_program(text):
    assert program_language(text) is None or text.startswith("torchvision")
    with pytest.raises(ParseError):
        parse_program_text(text)


def test_refuses_non_text():
    with pytest.raises(ParseError):
        parse_program_text(None)  # type: ignore[arg-type]


test_fuzz_random_text, test_fuzz_mutated_programs = fuzz_tests(only_parse_errors(parse_program_text), _TEXTS)
