"""Program text as evidence (issue 21): a pasted Python script, shell script or Dockerfile, read for what it tells the
checks, into the snapshot fields the checks already read:

- the visibility variables it sets (``export CUDA_VISIBLE_DEVICES=1``, ``os.environ[...]``, ``ENV ...``) -> ``env``
  (GH608);
- the GPU indices it asks for (``torch.device("cuda:3")``, ``--device 3``) -> ``devices_requested`` (GH608);
- the PyTorch wheel it pins (``torch==2.1.0+cpu``, a download.pytorch.org/whl/cpu index) -> ``torch`` (GH605 for a
  CPU-only wheel, GH601 for its CUDA against the driver);
- the base image it builds on (``nvidia/cuda:12.4.1-...``, ``pytorch/pytorch:2.1.0-cuda12.1-...``) -> ``cuda``
  (GH601) and ``torch``;
- a Dockerfile's NVIDIA driver packages, driver installer or copied driver libraries -> ``host_env``'s
  ``image_driver_files`` (GH802: the toolkit mounts the host's driver files there).

A program that says none of these is no evidence about the GPU stack: its parse says so (ParseError), so a lone
script is never taken for a healthy host.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.evidence.facts import device_request_lines, env_lines, library_path_lines
from gpuhealth.evidence.registry import evidence_kind
from gpuhealth.model import CudaState, HostEnvironment, ParseError, TorchEnv

_SHOW = r"(?:cat|less|more|head|tail|bat)\s+"
MAX_PROGRAM_LINES = 5000


def _looks_like_program(text: str) -> bool:
    from gpuhealth.parsers.program import program_language  # here: most pieces are sniffed by a kind above

    return program_language(text) is not None


@evidence_kind("program-text", commands=(_SHOW + r"\S*(?:\.py|\.sh|Dockerfile\S*|Containerfile)(?:\s|$)",),
               priority=105, recognise=_looks_like_program)
def _program(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.program import parse_program_text

    program = parse_program_text(text)
    # comments are not read, but a job script's #SBATCH lines are its scheduler's options (the GPUs it asks for)
    lines = [line for line in program.lines if not line.startswith("#") or line.startswith(("#!", "#SBATCH"))]
    # the variables it sets, read in its own lines with their indentation (which says what runs after what)
    raw = [line for line in text.splitlines()[:MAX_PROGRAM_LINES] if not line.lstrip().startswith("#")]
    found: dict[str, Any] = {**env_lines(raw), **device_request_lines(lines)}
    torch = _torch(program)
    if torch is not None:
        found["torch"] = torch
    search = library_path_lines(lines)  # LD_LIBRARY_PATH it sets (a cuda-compat directory there: GH603)
    if (program.image_cuda and not program.image_torch) or search:
        image = program.image_cuda and not program.image_torch
        found["cuda"] = CudaState(base_image=program.base_images[0] if image and program.base_images else None,
                                  base_image_cuda=program.image_cuda if image else None, ld_library_path=search)
    if program.driver_files:  # the driver's user-space part in the image, where the toolkit mounts the host's (GH802)
        found["host_env"] = HostEnvironment(image_driver_files=program.driver_files, image_driver_source=source)
    if not found:
        raise ParseError(f"a {program.language} program that sets no GPU variable or library path, asks for no GPU "
                         "index, pins no torch wheel, builds on no CUDA image and puts no NVIDIA driver in its image")
    return found


def _torch(program: Any) -> TorchEnv | None:
    """The PyTorch the program installs: its pinned wheel (a local version "+cu118"/"+cpu" says the build, else the
    wheel index does), or a pytorch/pytorch base image's."""
    from gpuhealth.evidence.listings import torch_from_version

    if program.torch_pin:
        torch = torch_from_version(program.torch_pin)
        if "+" not in program.torch_pin and program.torch_index:
            return _with_index(torch, program.torch_index)
        return torch
    if program.torch_index:
        return _with_index(TorchEnv(installed=True), program.torch_index)
    if program.image_torch:
        return TorchEnv(torch_version=program.image_torch, torch_cuda_version=program.image_cuda, installed=True)
    return None


def _with_index(torch: TorchEnv, index: str) -> TorchEnv:
    from dataclasses import replace

    if index == "cpu":
        return replace(torch, cuda_available=False)
    if index.startswith("cu") and len(index) >= 4:
        return replace(torch, torch_cuda_version=f"{index[2:-1]}.{index[-1]}")
    return torch
