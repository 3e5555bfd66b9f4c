"""Program text people paste: a Python script, a shell script or a Dockerfile. Pure functions, text in, values out.

What such text can tell about the GPU stack, beside the environment variables and device indices the evidence
layer reads from any line: the PyTorch wheel it pins (``pip install torch==2.1.0+cu118``, a ``--index-url`` of
download.pytorch.org/whl/cpu) and the base image it builds on (``FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04``,
``FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime``). Every pattern is linear-time over lines cut at MAX_LINE.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError
from gpuhealth.records import record

MAX_LINES = 5000
MAX_LINE = 4096

_SHEBANG = lazy_re(r"^#!\s*/(?:usr/)?bin/(?:env\s+)?(?:ba|z|da|k)?sh\b")
_PYTHON_LINE = lazy_re(r"^(?:import [A-Za-z_][\w.]*|from [A-Za-z_][\w.]* import |def \w+\(|class \w+[(:]|"
                       r"if __name__ == )")
_DOCKER_FROM = lazy_re(r"^FROM\s+(?:--platform=\S+\s+)?(?P<image>[^\s#]+)", re.I)
_DOCKER_INSTRUCTION = lazy_re(r"^(?:RUN|ENV|WORKDIR|COPY|ADD|CMD|ENTRYPOINT|ARG|LABEL|EXPOSE|USER|SHELL)\b", re.I)
_TRACEBACK = "Traceback (most recent call last)"

# `torch==2.1.0+cu118`, `torch==2.1.0`, in a pip command or a requirements line (not torchvision, not torch-xyz)
_TORCH_PIN = lazy_re(r"(?<![\w.-])torch\s*==\s*(?P<version>\d+\.\d+(?:\.\d+)?(?:\+(?:cu\d{2,3}|cpu|rocm[\d.]+))?)"
                     r"(?![\w.+-])")
_TORCH_INDEX = lazy_re(r"download\.pytorch\.org/whl/(?:nightly/)?(?P<flavour>cpu|cu\d{2,3}|rocm[\d.]+)\b")
# nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04, nvcr.io/nvidia/cuda:11.8.0-base-ubuntu22.04
_CUDA_IMAGE = lazy_re(r"(?:^|/)nvidia/cuda:(?P<version>\d{1,2}\.\d{1,2}(?:\.\d{1,3})?)\b")
# pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime
_PYTORCH_IMAGE = lazy_re(r"(?:^|/)pytorch/pytorch:(?P<torch>\d+\.\d+(?:\.\d+)?)-cuda(?P<cuda>\d{1,2}\.\d{1,2})\b")


def image_cuda(image: str) -> str | None:
    """The CUDA version an NVIDIA CUDA image reference brings (``nvidia/cuda:12.4.1-runtime-ubuntu22.04`` -> "12.4.1"),
    else None."""
    found = _CUDA_IMAGE.search(image[:MAX_LINE])
    return found["version"] if found else None


@record
class ProgramText:
    """What a pasted program says about the GPU stack."""

    language: str  # "python", "shell" or "dockerfile"
    lines: tuple[str, ...] = ()  # its lines, cut to MAX_LINE (the evidence layer reads variables and devices in them)
    torch_pin: str | None = None  # "2.1.0+cu118": the torch version it installs
    torch_index: str | None = None  # "cpu", "cu118": the download.pytorch.org wheel index it installs from
    base_images: tuple[str, ...] = ()  # the images it builds FROM
    image_cuda: str | None = None  # the CUDA version of an nvidia/cuda or pytorch/pytorch base image
    image_torch: str | None = None  # the torch version of a pytorch/pytorch base image
    # a Dockerfile's NVIDIA driver packages it installs and driver library files it copies into the image
    # (image_driver_files below)
    driver_files: tuple[str, ...] = ()


def _content(text: str, limit: int) -> list[str]:
    return [line.strip()[:MAX_LINE] for line in text.splitlines()[:limit] if line.strip()]


def program_language(text: str) -> str | None:
    """"python", "shell" or "dockerfile" when the head of ``text`` is such a program, else None (cheap)."""
    head = text[:16384]
    if _TRACEBACK in head or ">>> " in head:
        return None  # a traceback or an interactive session: what a program printed, not the program
    lines = _content(head, 200)
    if not lines:
        return None
    if _SHEBANG.match(lines[0]):
        return "python" if "python" in lines[0] else "shell"
    instructions = [x for x in lines if not x.startswith("#")]
    if instructions and _DOCKER_FROM.match(instructions[0]) and any(_DOCKER_INSTRUCTION.match(x)
                                                                     for x in instructions[1:]):
        return "dockerfile"
    if sum(1 for x in lines if _PYTHON_LINE.match(x)) >= 2:
        return "python"
    return None


def parse_program_text(text: str) -> ProgramText:
    """The program's language, lines, torch pin, wheel index and base images. ParseError when it is no program."""
    if not isinstance(text, str):
        raise ParseError("program text must be text")
    language = program_language(text)
    if language is None:
        raise ParseError("not a Python script, shell script or Dockerfile")
    lines = tuple(_content(text, MAX_LINES))
    pin = index = image_cuda = image_torch = None
    images: list[str] = []
    for line in lines:
        if line.startswith("#") and not line.startswith("#!"):
            continue
        if (found := _TORCH_PIN.search(line)) and pin is None:
            pin = found["version"]
        if (found := _TORCH_INDEX.search(line)) and index is None:
            index = found["flavour"]
        if language == "dockerfile" and (found := _DOCKER_FROM.match(line)):
            image = found["image"]
            images.append(image)
            if (cuda := _CUDA_IMAGE.search(image)) and image_cuda is None:
                image_cuda = cuda["version"]
            if (torch := _PYTORCH_IMAGE.search(image)) and image_torch is None:
                image_torch, image_cuda = torch["torch"], image_cuda or torch["cuda"]
    driver = image_driver_files(lines) if language == "dockerfile" else ()
    return ProgramText(language, lines, pin, index, tuple(dict.fromkeys(images)), image_cuda, image_torch, driver)


# What a Dockerfile must not put in its image: the NVIDIA driver's user-space part, which the NVIDIA Container
# Toolkit mounts from the host at run time, matched to the host's kernel module (libnvidia-container: the driver's
# libraries and binaries are injected from the host; NVIDIA/nvidia-docker#1287, the maintainer: a driver package in
# the image conflicts with them). Its packages, per distribution (Ubuntu's nvidia-graphics-drivers packages, NVIDIA's
# CUDA repositories' cuda-drivers and nvidia-driver-*, RHEL's and Fedora's nvidia-driver-libs and
# xorg-x11-drv-nvidia-cuda-libs); the `cuda` and `cuda-<X>-<Y>` meta-packages install the driver too (CUDA
# Installation Guide for Linux, Meta Packages: cuda-toolkit-<X>-<Y> is the one without it); the driver's .run
# installer; its library files copied in.
_DRIVER_PACKAGE = lazy_re(r"(?:libnvidia-(?!container)[a-z0-9][a-z0-9.-]{0,40}|nvidia-utils(?:-[\w.]{1,20})?|"
                          r"nvidia-compute-utils(?:-[\w.]{1,20})?|nvidia-driver(?!-assistant)(?:-[\w.-]{1,40})?|"
                          r"nvidia-headless(?:-[\w.-]{1,40})?|cuda-drivers(?:-[\w.]{1,20})?|"
                          r"xorg-x11-drv-nvidia(?:-[\w.-]{1,40})?|cuda(?:-\d{1,2}-\d{1,2})?)(?:[=:][\w.:~+-]{1,60})?")
_INSTALLER = lazy_re(r"(?:^|\s)(?:apt-get|apt|yum|dnf|microdnf|zypper|tdnf)\s+(?:-\S+\s+)*install\b")
_RUNFILE = lazy_re(r"NVIDIA-Linux-[\w.-]{1,60}\.run\b")
_DRIVER_LIBRARY = lazy_re(r"\blib(?:cuda|nvidia-[a-z0-9-]{1,40})\.so(?:\.[\d.*]{1,20})?")
_COPY = lazy_re(r"^(?:COPY|ADD)\s", re.I)
_RUN = lazy_re(r"^RUN\s", re.I)
MAX_INSTRUCTION = 16384


def _instructions(lines: tuple[str, ...]) -> list[str]:
    """A Dockerfile's instructions, each one line: a line ending in a backslash continues on the next."""
    found: list[str] = []
    current = ""
    for line in lines:
        if line.startswith("#"):
            continue
        current = (current + " " + line.rstrip("\\").strip())[:MAX_INSTRUCTION] if current else line.rstrip("\\")
        if not line.endswith("\\"):
            found.append(current.strip())
            current = ""
    if current:
        found.append(current.strip())
    return found


def image_driver_files(lines: tuple[str, ...]) -> tuple[str, ...]:
    """The NVIDIA driver packages a Dockerfile's RUN instructions install, the driver's .run installer they run and
    the driver library files its COPY/ADD instructions copy (``libcuda.so.1``, ``libnvidia-ml.so.535.54.03``), in
    their order, each once."""
    found: list[str] = []
    for instruction in _instructions(lines):
        if _RUN.match(instruction):
            for command in instruction.replace("&&", ";").replace("||", ";").split(";"):
                if _INSTALLER.search(command):
                    found += [token for token in command.split() if _DRIVER_PACKAGE.fullmatch(token)]
            found += [match.group() for match in _RUNFILE.finditer(instruction)]
        elif _COPY.match(instruction):
            found += [match.group() for match in _DRIVER_LIBRARY.finditer(instruction)]
    return tuple(dict.fromkeys(found))[:20]
