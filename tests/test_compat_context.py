"""CUDA errors 804 and 803 read in their context: inside a container, or on a bare host.

The same line has two causes (NVIDIA's CUDA Compatibility guide, Forward Compatibility
<https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html>: forward compatibility is for data-center
GPUs, select NGC Server Ready RTX parts and Jetson only; cuda-compat-X-Y installs under /usr/local/cuda-X.Y/compat and
takes effect from LD_LIBRARY_PATH or ld.so.conf). Inside a container of an NVIDIA image, the image's compat libcuda
(/usr/local/cuda/compat) is enabled whenever it is newer than the host driver (the container toolkit's cuda-compat hook,
NVIDIA/nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat/cudacompat.go; the NGC entrypoint's driver check): the
host driver is older than the image's CUDA (GH601). On a bare host nothing enables it: a compat copy someone put on the
loader path was loaded (GH603).

Every paste here is written for these tests (no case of tests/cases): nvidia-smi headers in the format nvidia-smi
prints; the errors in the CUDA runtime's wording (cudaGetErrorString of cudaErrorCompatNotSupportedOnDevice and
cudaErrorSystemDriverMismatch); the banner lines as NVIDIA's images' entrypoint prints them (its echo statements, NGC
TensorFlow's nvidia_entrypoint.sh: "NVIDIA Release ... (build ...)", "Container image Copyright (c) ..., NVIDIA
CORPORATION"); the container toolkit's error prefix "nvidia-container-cli: " (NVIDIA/libnvidia-container).
"""

from __future__ import annotations

import json

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.container_run import container_line, container_run_lines, may_show_container
from gpuhealth.report.common import fold
from test_forward_compat import ERROR_803, ERROR_804, smi  # the same error lines and one-GPU nvidia-smi table

BANNER = """
=============
== PyTorch ==
=============

NVIDIA Release 24.10 (build 114410972)
PyTorch Version 2.5.0a0

Container image Copyright (c) 2024, NVIDIA CORPORATION & AFFILIATES. All rights reserved.

This container image and its contents are governed by the NVIDIA Deep Learning Container License.
"""


GEFORCE = smi("535.183.01", "12.2", "NVIDIA GeForce RTX 3090")


def lead(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", t) for i, t in enumerate(texts)])
    return fold(run_checks(snapshot).findings)[0].finding


def commands(finding) -> list[str]:
    return [f.command for f in finding.fixes]


# --------------------------------------------------------------------------- the lines that show a container


def test_the_lines_that_show_a_container():
    shown = [
        "NVIDIA Release 24.10 (build 114410972)",
        "Container image Copyright (c) 2016-2023, NVIDIA CORPORATION & AFFILIATES. All rights reserved.",
        "This container image and its contents are governed by the NVIDIA Deep Learning Container License.",
        "exec /opt/nvidia/nvidia_entrypoint.sh python train.py",
        "$ docker run --rm --gpus all myorg/trainer:latest",
        "sudo docker run -it --runtime=nvidia myimage",
        "user@box:~$ podman run --rm --device nvidia.com/gpu=all myimage",
        "nvidia-docker run --rm -it myimage",
        "singularity exec --nv image.sif python train.py",
        "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
        "ldconfig -p lists /usr/local/cuda/compat/libcuda.so.1 first",
        "              capabilities: [gpu]",  # Docker Compose's GPU reservation (docs.docker.com, GPU support)
        "    runtime: nvidia",  # Compose's older runtime key
        "  runtimeClassName: nvidia",  # a Kubernetes pod's runtime class
        "        nvidia.com/gpu: 1",  # a Kubernetes pod's GPU limit
    ]
    for line in shown:
        assert container_line(line) == line.strip(), line
    not_shown = [
        "docker run hello-world",  # a container without the GPUs says nothing of where CUDA ran
        "I use docker with --gpus all on another box",  # a sentence, not a command line
        "/opt/nvidia/nvlsm/sbin/nvlsm does not exist",  # Fabric Manager's host path, not the images' entrypoint
        "export LD_LIBRARY_PATH=/usr/local/cuda-12.9/compat:$LD_LIBRARY_PATH",  # a host's cuda-compat package
        "NVIDIA Release notes are online",
        "runtime: python3",
        "capabilities: [compute]",
    ]
    for line in not_shown:
        assert container_line(line) is None, line
    assert container_run_lines(BANNER.splitlines())["container_lines"][0].startswith("NVIDIA Release 24.10")
    assert container_run_lines(["nothing here"]) == {}
    assert may_show_container(BANNER) and not may_show_container("plain text about a GPU")


def test_a_banner_alone_is_still_no_diagnosis():
    # the container is context for other evidence, no answer about the host by itself
    snapshot, _ = analyze_texts([("banner.txt", BANNER)])
    assert snapshot.container_lines
    codes = {f.code for f in run_checks(snapshot).findings}
    assert "GH004" in codes and not codes & {"GH601", "GH603"}


# --------------------------------------------------------------------------- 804 on a bare host: a compat copy


def test_804_on_a_geforce_with_no_container_is_a_compat_libcuda_on_the_host():
    top = lead(GEFORCE + f"$ python train.py\n{ERROR_804}\n")
    assert top.code == "GH603" and top.severity is Severity.CRITICAL
    assert "GeForce RTX 3090" in top.message and "no container" in top.message
    assert "GH601" in top.explains  # the 804 the catalogue files under GH601 is this finding's symptom
    fixes = commands(top)
    assert {"ldconfig -p | grep libcuda", "ls -d /usr/local/cuda*/compat",
            "grep -rs compat /etc/ld.so.conf /etc/ld.so.conf.d"} <= set(fixes)
    assert any(f.kind == "step" and "Take the compat directory off the loader path" in f.command for f in top.fixes)
    first_disruptive = next(i for i, f in enumerate(top.fixes) if f.disruptive)
    assert all(not f.disruptive for f in top.fixes[:first_disruptive])  # the looks and the removal come first


def test_the_gpu_class_may_come_from_lspci():
    listing = ("$ lspci -nn | grep -i nvidia\n"
               "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation TU104 [GeForce RTX 2080] [10de:1e82] "
               "(rev a1)\n")
    top = lead(listing + f"$ ./app\n{ERROR_804}\n")
    assert top.code == "GH603" and top.severity is Severity.CRITICAL and "GeForce RTX 2080" in top.message


def test_a_geforce_named_only_in_words_leads_on_the_programs_own_804():
    top = lead(f"My card is a GeForce GTX 1080 Ti on Ubuntu 22.04.\n$ ./app\n{ERROR_804}\n")
    assert top.code == "GH603" and "GH601" in top.explains
    assert top.labels.get("reported") == "words"  # the GPU's class rests on the reporter's words
    assert any("the reporter's words" in e.source for e in top.evidence)
    # the 804 itself is the program's output: it shows the failure, so the finding is as grave as that line
    assert top.severity is Severity.CRITICAL


def test_a_data_center_gpu_or_no_gpu_named_keeps_gh601():
    for text in (smi("535.183.01", "12.2", "NVIDIA A100-SXM4-80GB") + f"{ERROR_804}\n", f"$ ./app\n{ERROR_804}\n"):
        top = lead(text)
        assert top.code == "GH601", text


def test_804_alone_says_both_causes_and_the_commands_that_decide():
    top = lead(f"$ python train.py\n{ERROR_804}\n")
    assert top.code == "GH601" and "GH603" in top.message and "bare host" in top.message
    fixes = commands(top)
    assert {"nvidia-smi", "ldconfig -p | grep libcuda", "ls -d /usr/local/cuda*/compat"} <= set(fixes)


# --------------------------------------------------------------------------- 804 in a container: the host driver


def test_804_in_an_ngc_container_on_a_geforce_with_an_old_driver_stays_gh601():
    top = lead(GEFORCE, BANNER + f"{ERROR_804}\n")
    assert top.code == "GH601" and top.severity is Severity.CRITICAL


def test_each_kind_of_container_line_keeps_gh601():
    for context in ("$ docker run --rm --gpus all myorg/trainer:latest\n",
                    "exec /opt/nvidia/nvidia_entrypoint.sh python train.py\n",
                    "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4\n",
                    "$ ls -l /usr/local/cuda/compat\nlibcuda.so.1 -> libcuda.so.550.54.15\n",
                    "$ cat compose.yaml\nservices:\n  app:\n    deploy:\n      resources:\n        reservations:\n"
                    "          devices:\n            - driver: nvidia\n              capabilities: [gpu]\n"
                    "$ docker compose up\n"):
        top = lead(GEFORCE, context + f"{ERROR_804}\n")
        assert top.code == "GH601", context


def test_a_compat_directory_set_on_the_host_still_leads_in_any_context():
    # the specific evidence wins: a cuda-compat-X-Y directory on the loader path is taken off (GH603)
    session = (GEFORCE + "$ export LD_LIBRARY_PATH=/usr/local/cuda-12.8/compat:$LD_LIBRARY_PATH\n"
               f"$ python train.py\n{ERROR_804}\n")
    assert lead(session).code == "GH603"


# --------------------------------------------------------------------------- 803: which user-space libcuda


def test_803_with_a_working_nvidia_smi_and_no_container_is_gh603():
    # nvidia-smi answering shows the module and NVML agree: a libcuda of another version is on the loader path
    top = lead(smi("550.54.15", "12.4", "NVIDIA GeForce RTX 4090") + f"$ python train.py\n{ERROR_803}\n")
    assert top.code == "GH603" and "GH901" in top.explains


def test_803_with_a_driver_upgrade_told_is_gh202():
    top = lead(f"I upgraded the nvidia driver yesterday and did not reboot yet.\n$ python train.py\n{ERROR_803}\n")
    assert top.code == "GH202"


def test_803_alone_keeps_the_causes_open_with_the_commands_that_decide():
    top = lead(f"{ERROR_803}\n")
    assert top.code == "GH901"
    causes = {c.cause for c in top.differential}
    assert {"compat-libcuda", "driver-library-mismatch", "stale-libcuda"} <= causes
    decide = " ; ".join(c.command for c in top.differential)
    assert "ldconfig -p | grep libcuda" in decide and "cat /proc/driver/nvidia/version" in decide


# --------------------------------------------------------------------------- end to end


def _analyze_stdin(text: str) -> dict:
    from click.testing import CliRunner

    from gpuhealth.cli import main

    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=text)
    return json.loads(result.stdout)


def test_end_to_end_through_analyze_stdin():
    bare = _analyze_stdin(GEFORCE + f"$ python train.py\n{ERROR_804}\n")
    assert bare["root_causes"][0]["key"].startswith("GH603")
    contained = _analyze_stdin(GEFORCE + BANNER + f"{ERROR_804}\n")
    assert contained["root_causes"][0]["key"].startswith("GH601")


# --------------------------------------------------------------------------- the libcuda on disk against the module

# apt's history.log as unattended-upgrades writes it (Start-Date, Commandline, Upgrade: pkg (old, new), End-Date)
UPGRADE_LOG = ("$ cat /var/log/apt/history.log\n"
               "Start-Date: 2024-05-02  06:25:14\n"
               "Commandline: /usr/bin/unattended-upgrade\n"
               "Upgrade: libnvidia-compute-535:amd64 (535.171.04-0ubuntu0.22.04.1, 535.183.01-0ubuntu0.22.04.1), "
               "nvidia-utils-535:amd64 (535.171.04-0ubuntu0.22.04.1, 535.183.01-0ubuntu0.22.04.1)\n"
               "End-Date: 2024-05-02  06:25:40\n")


def test_803_with_the_module_still_the_version_an_upgrade_replaced_is_gh202():
    # nvidia-smi answers with the old driver, the package log shows that driver upgraded since: the new libcuda is on
    # disk under the old module (a driver upgrade without a reboot, shown), whatever nvidia-smi said before it
    top = lead(smi("535.171.04", "12.2", "NVIDIA GeForce RTX 3090"), UPGRADE_LOG + f"$ python train.py\n{ERROR_803}\n")
    assert top.code == "GH202" and top.severity is Severity.CRITICAL
    assert "still 535.171.04" in top.message and "GH901" in top.explains
    assert "sudo reboot" in commands(top)
    # without the 803 nothing shows CUDA failing, and that nvidia-smi may predate the upgrade: a warning
    snapshot, _ = analyze_texts([("smi.txt", smi("535.171.04", "12.2", "NVIDIA GeForce RTX 3090")),
                                 ("history.log", UPGRADE_LOG)])
    gh202 = [f for f in run_checks(snapshot).findings if f.code == "GH202"]
    assert [f.severity for f in gh202] == [Severity.WARNING]
    # the module already the upgrade's version: the host rebooted, nothing to report
    snapshot, _ = analyze_texts([("smi.txt", smi("535.183.01", "12.2", "NVIDIA GeForce RTX 3090")),
                                 ("history.log", UPGRADE_LOG)])
    assert not [f for f in run_checks(snapshot).findings if f.code == "GH202"]


def test_a_stale_libcuda_newer_than_the_module_explains_an_804_outside_a_container():
    from dataclasses import replace

    from gpuhealth.model import CudaState

    proc = ("$ cat /proc/driver/nvidia/version\n"
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.07  Fri Mar 14 21:40:38 UTC 2025\n")
    loader = CudaState(libcuda_path="/usr/lib/x86_64-linux-gnu/libcuda.so.1", libcuda_target="libcuda.so.575.51.03",
                       libcuda_version="575.51.03")  # as the live check reads the link
    for context, code in (("", "GH603"), ("$ docker run --rm --gpus all myimage\n", "GH601")):
        snapshot, _ = analyze_texts([("proc.txt", proc), ("run.txt", context + f"{ERROR_804}\n")])
        snapshot = replace(snapshot, cuda=loader)
        top = fold(run_checks(snapshot).findings)[0].finding
        assert top.code == code, context
