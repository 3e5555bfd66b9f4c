"""A Dockerfile that puts the NVIDIA driver's user-space part in its image (GH802, cause image-ships-driver-libs): the
NVIDIA Container Toolkit mounts the host's driver files (libcuda.so.1, libnvidia-ml.so.1, nvidia-smi) into the
container at run time, so an image's own copies break the mount or shadow the host's (NVIDIA/nvidia-docker#1287). The
Dockerfiles are written here, in the forms the distributions' package names and the CUDA Installation Guide's
meta-packages take (cuda and cuda-<X>-<Y> install the driver, cuda-toolkit-<X>-<Y> does not)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.program import image_driver_files, parse_program_text


def _gh802(text: str, name: str = "Dockerfile") -> list:
    snapshot, _ = analyze_texts([(name, text)])
    return [f for f in run_checks(snapshot).findings if f.code == "GH802"]


@pytest.mark.parametrize("dockerfile, shipped", [
    # a manylinux-style image that installs NVIDIA's driver packages from the CUDA repository, across continued lines
    ("FROM quay.io/pypa/manylinux2014_x86_64\nRUN yum install -y \\\n    cuda-toolkit-12-3 \\\n"
     "    nvidia-driver-latest-dkms cuda-drivers && yum clean all\n",
     ("nvidia-driver-latest-dkms", "cuda-drivers")),
    # Ubuntu's driver libraries, pinned, beside ordinary packages
    ("FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y --no-install-recommends python3 "
     "libnvidia-compute-535=535.183.01-0ubuntu1 nvidia-utils-535\n",
     ("libnvidia-compute-535=535.183.01-0ubuntu1", "nvidia-utils-535")),
    # the cuda meta-package pulls the driver
    ("FROM ubuntu:22.04\nRUN apt-get install -y cuda-12-4\n", ("cuda-12-4",)),
    # the driver's own installer, and libraries copied from a host
    ("FROM rockylinux:9\nCOPY libcuda.so.1 libnvidia-ml.so.1 /usr/lib64/\n"
     "RUN sh /tmp/NVIDIA-Linux-x86_64-550.90.07.run --no-kernel-module --silent\n",
     ("libcuda.so.1", "libnvidia-ml.so.1", "NVIDIA-Linux-x86_64-550.90.07.run")),
])
def test_the_driver_in_the_image_is_found_and_named(dockerfile, shipped):
    assert parse_program_text(dockerfile).driver_files == shipped
    (found,) = _gh802(dockerfile)
    assert found.severity is Severity.WARNING and found.labels.get("decided") == "image-ships-driver-libs"
    assert shipped[0] in found.message
    assert any("cuda-toolkit-<X>-<Y>" in fix.command for fix in found.fixes)


@pytest.mark.parametrize("dockerfile", [
    # the way NVIDIA's images do it: the toolkit, cuDNN and the compat package, no driver
    "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN apt-get install -y cuda-toolkit-12-4 libcudnn9-cuda-12 "
    "cuda-compat-12-4\n",
    # the Python bindings and the container toolkit's own library are not the driver
    "FROM python:3.11\nRUN pip install nvidia-ml-py cuda-python && apt-get install -y libnvidia-container1\n",
    # a comment and a package search name the driver without installing it
    "FROM ubuntu:22.04\n# do not apt-get install nvidia-driver-535 here: the toolkit mounts it\n"
    "RUN apt-cache search nvidia-driver-535\n",
])
def test_an_image_without_the_driver_is_no_finding(dockerfile):
    assert parse_program_text(dockerfile).driver_files == ()
    assert not _gh802(dockerfile)


def test_a_host_script_installing_the_driver_is_no_image_matter():
    script = "#!/bin/bash\nset -e\nsudo apt-get install -y nvidia-driver-535\nexport CUDA_VISIBLE_DEVICES=0\n"
    assert parse_program_text(script).driver_files == ()
    assert not _gh802(script, "install.sh")


def test_the_reader_is_bounded_on_a_long_continued_instruction():
    lines = ("RUN apt-get install -y \\",) + ("libfoo \\",) * 5000 + ("cuda-drivers",)
    assert image_driver_files(lines) == ()  # the instruction is cut at its limit, in linear time


def test_end_to_end_through_analyze_stdin():
    from click.testing import CliRunner

    from gpuhealth.cli import main

    text = ("FROM ubuntu:22.04\n"
            "RUN apt-get update && apt-get install -y nvidia-utils-535 && rm -rf /var/lib/apt/lists/*\n")
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=text)
    assert '"GH802"' in result.output and "nvidia-utils-535" in result.output
