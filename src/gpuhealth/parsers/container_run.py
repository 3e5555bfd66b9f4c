"""Lines that show a CUDA program ran inside a container: the context CUDA's errors 803 and 804 are read in.

CUDA error 804 (forward compatibility attempted on hardware that does not support it) and 803 (the libcuda loaded and
the kernel driver are different versions) each have two causes the error line alone cannot tell apart (NVIDIA's CUDA
Compatibility guide, Forward Compatibility: https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html):

- inside a container of an NVIDIA CUDA image, the image's own cuda-compat libcuda (``/usr/local/cuda/compat``) is put
  ahead of the host driver's whenever it is newer: by the NVIDIA Container Toolkit's cuda-compat hook, which writes
  an ``/etc/ld.so.conf.d/00-compat-*.conf`` naming that directory when the compat libcuda's major version is above
  the host driver's (NVIDIA/nvidia-container-toolkit, cmd/nvidia-cdi-hook/cudacompat/cudacompat.go), and by the NGC
  images' entrypoint, which checks the host driver against the image's CUDA at start. There the host driver is older
  than the image's CUDA (GH601);
- on a bare host, only a compat libcuda someone put on the loader path (a cuda-compat-X-Y directory on
  LD_LIBRARY_PATH or in ld.so.conf, a conda cuda-compat) is loaded instead of the driver's own (GH603).

So which one it is depends on whether the program ran in a container. The lines read here say it did, each by its
form, wherever it is pasted:

- the banner of NVIDIA's container images, printed by their entrypoint (``/opt/nvidia/nvidia_entrypoint.sh``):
  "Container image Copyright (c) 2016-2023, NVIDIA CORPORATION & AFFILIATES. All rights reserved.", "NVIDIA Release
  24.10 (build 114410972)", "This container image and its contents are governed by the NVIDIA Deep Learning Container
  License." (NVIDIA's NGC TensorFlow entrypoint, copy in houtoms/tensorflow nvidia_entrypoint.sh; the CUDA images'
  banner carries the same copyright and licence lines);
- a path of that entrypoint (``/opt/nvidia/nvidia_entrypoint.sh``, ``/opt/nvidia/entrypoint.d/``);
- a container started with the GPUs: ``docker|podman|nerdctl run|create|exec`` with ``--gpus``, ``--runtime=nvidia``,
  a CDI device ``nvidia.com/gpu=...`` or ``NVIDIA_VISIBLE_DEVICES``; ``nvidia-docker run``; ``singularity`` or
  ``apptainer`` ``run|exec|shell`` with ``--nv``;
- a manifest that runs it in a container with the GPUs: Docker Compose's GPU reservation ``capabilities: [gpu]`` (the
  Compose file must set it: Docker's "Run Docker Compose services with GPU access",
  https://docs.docker.com/compose/how-tos/gpu-support/) or its older ``runtime: nvidia``, a Kubernetes pod's
  ``nvidia.com/gpu: 1`` limit or ``runtimeClassName: nvidia``
  (https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/);
- the compat directory of NVIDIA's CUDA images, ``/usr/local/cuda/compat`` (the toolkit's hook adds that path; a
  cuda-compat package installed on a host lands in ``/usr/local/cuda-X.Y/compat``);
- a line of the NVIDIA Container Toolkit itself (``nvidia-container-cli: ...``, ``nvidia-container-runtime``,
  ``nvidia-cdi-hook``, its ``enable-cuda-compat`` hook), which only runs when a container starts.

A sentence that merely names Docker is not read: the forms above are program output, a command line or a path.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.lazyre import guarded_re, has, has_folded

__all__ = ["container_line", "container_run_lines", "may_show_container"]

MAX_LINE = 2000  # a command line may be long; nothing beyond this is read
MAX_LINES = 20_000
MAX_FOUND = 3  # lines kept as evidence

# NVIDIA's container images' banner (their entrypoint prints it at start)
_BANNER = guarded_re(
    r"^\s{0,8}(?:Container image Copyright \(c\) [\d, -]{4,20}NVIDIA CORPORATION"
    r"|NVIDIA Release \d{2}\.\d{2}(?:\.\d{1,3})? \(build \d{1,12}\)"
    r"|This container image and its contents are governed by the NVIDIA Deep Learning Container License)",
    may=has("Container image Copyright", "NVIDIA Release", "Deep Learning Container License"))
# the images' entrypoint, by its path
_ENTRYPOINT = guarded_re(r"/opt/nvidia/(?:nvidia_entrypoint\.sh|entrypoint\.d/)",
                         may=has("/opt/nvidia/nvidia_entrypoint.sh", "/opt/nvidia/entrypoint.d/"))
# a container engine's run of a container, at the start of a line (after a shell prompt, sudo)
_RUN = guarded_re(
    r"^\s{0,8}(?:[^\s$#>]{0,80}[$#>]\s{0,4})?(?:sudo\s{1,4}(?:-\S{1,20}\s{1,4}){0,4})?"
    r"(?:(?:docker|podman|nerdctl)\s{1,4}(?:container\s{1,4})?(?:run|create|exec)|nvidia-docker\s{1,4}run"
    r"|(?:singularity|apptainer)\s{1,4}(?:run|exec|shell))\s",
    may=has_folded("docker", "podman", "nerdctl", "singularity", "apptainer"))
# the GPUs asked of that container: Docker's --gpus, the nvidia runtime, a CDI device, the toolkit's variable,
# Singularity's / Apptainer's --nv
_GPUS = guarded_re(r"\s--gpus[=\s]|--runtime[=\s]{1,4}nvidia\b|nvidia\.com/gpu[=\s]|\bNVIDIA_VISIBLE_DEVICES=|\s--nv\b",
                   may=has("--gpus", "--runtime", "nvidia.com/gpu", "NVIDIA_VISIBLE_DEVICES", "--nv"))
# nvidia-docker runs every container with the NVIDIA runtime
_NVIDIA_DOCKER = guarded_re(r"\bnvidia-docker\s{1,4}run\s", may=has("nvidia-docker"))
# the compat directory of NVIDIA's CUDA images, the one the toolkit's cuda-compat hook adds to the loader's search path
# (cudaCompatPath); a cuda-compat package installed on a host lands in /usr/local/cuda-X.Y/compat instead
_IMAGE_COMPAT = guarded_re(r"/usr/local/cuda/compat(?![\w.-])", may=has("/usr/local/cuda/compat"))
# a manifest that runs the program in a container with the GPUs: Docker Compose's device reservation ("capabilities:
# [gpu]", which the Compose file must set; its older "runtime: nvidia"), a Kubernetes pod's GPU limit
# ("nvidia.com/gpu: 1") or its runtime class ("runtimeClassName: nvidia")
_MANIFEST = guarded_re(r"^\s{0,40}(?:-\s{1,4})?(?:capabilities:\s{0,4}\[\s{0,4}[\"']?gpu\b"
                       r"|runtime:\s{0,4}[\"']?nvidia[\"']?\s{0,4}$|runtimeClassName:\s{0,4}[\"']?nvidia\b"
                       r"|nvidia\.com/gpu:\s{0,20}[\"']?\d)",
                       may=has("capabilities:", "runtime:", "runtimeClassName:", "nvidia.com/gpu:"))
# the container toolkit's own programs, which run only as a container starts
_TOOLKIT = guarded_re(r"\bnvidia-container-cli: |\bnvidia-container-runtime(?:-hook)?\b|\bnvidia-cdi-hook\b"
                      r"|\benable-cuda-compat\b",
                      may=has("nvidia-container-", "nvidia-cdi-hook", "enable-cuda-compat"))


# literals one of which every line read here holds: a text without any is not scanned line by line
_LITERALS = ("Container image Copyright", "NVIDIA Release", "Deep Learning Container License", "/opt/nvidia/",
             "/usr/local/cuda/compat",
             "nvidia-container-", "nvidia-cdi-hook", "enable-cuda-compat", "docker", "podman", "nerdctl", "singularity",
             "apptainer", "capabilities:", "runtime:", "runtimeclassname:", "nvidia.com/gpu:")


def may_show_container(text: str) -> bool:
    """Whether ``text`` may hold a line read here (a substring test per literal: cheap on a long paste)."""
    lowered = text.lower()
    return any(literal.lower() in lowered for literal in _LITERALS)


def container_line(line: str) -> str | None:
    """The line, stripped, when it shows a program ran inside a container (see the module docstring), else None."""
    text = line[:MAX_LINE]
    if (_BANNER.match(text) or _ENTRYPOINT.search(text) or _TOOLKIT.search(text) or _IMAGE_COMPAT.search(text)
            or _MANIFEST.match(text)):
        return text.strip()
    if _RUN.match(text) and (_GPUS.search(text) or _NVIDIA_DOCKER.search(text)):
        return text.strip()
    return None


def container_run_lines(lines: list[str]) -> dict[str, Any]:
    """``{"container_lines": (...)}``: the first lines of these that show a container (at most MAX_FOUND); empty when
    none does."""
    found: list[str] = []
    for line in lines[:MAX_LINES]:
        shown = container_line(line)
        if shown and shown not in found:
            found.append(shown)
            if len(found) >= MAX_FOUND:
                break
    return {"container_lines": tuple(found)} if found else {}

