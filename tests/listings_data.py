"""The real listing examples (tests/data/listings, see SOURCE.md there), shared by the listing tests and
the evidence-kind registry's table of examples."""

from __future__ import annotations

from pathlib import Path

from conftest import CORPUS, DATA

LISTINGS = DATA / "listings"


def listing(name: str) -> str:
    """A listing by ``kind/file`` under tests/data/listings, or ``corpus:path`` in the corpus."""
    if name.startswith("corpus:"):
        return (CORPUS / name.removeprefix("corpus:")).read_text(errors="replace")
    return (LISTINGS / name).read_text(errors="replace")


def listing_files() -> list[Path]:
    return sorted(p for p in LISTINGS.glob("*/*") if p.is_file())


# One real example per listing kind (a thread's paste), as the registry's example table wants them.
REAL_EXAMPLES: dict[str, str] = {
    "dpkg-list": "dpkg-list/nvidia-docker-1628_510-with-495-left.txt",
    "apt-list": "apt-list/rocker-versioned2-582_470.txt",
    "rpm-qa": "rpm-qa/negativo17-nvidia-driver-155.txt",
    "conda-list": "conda-list/pytorch-32369_cudatoolkit-10.1.txt",
    "pip-freeze": "pip-freeze/pytorch-collect-env-21406.txt",
    "library-path": "library-path/tensorflow-43947.txt",
    "ldconfig": "ldconfig/wsl-8587_grep-libcuda.txt",
    "ls-dev-nvidia": "ls-dev-nvidia/nvidia-container-toolkit-50.txt",
    "nvcc-version": "nvcc-version/cuda-wsl2-ubuntu-3.txt",
    "modinfo-nvidia": "modinfo-nvidia/optimus-manager-qt-27.txt",
    "modprobe-d": "modprobe-d/nvidia-driver-G06-52_50-nvidia.conf",
    "service-journal": "service-journal/gpu-operator-610_fabricmanager.txt",
    "container-cli-info": "container-cli-info/nvidia-docker-904.txt",
    "dcgmi": "corpus:ml-engineering/dcgmi-diag-r2_excerpt_faulty_node.txt",
    "dcgmi-dmon": "dcgmi-dmon/dcgm-263_xider.txt",
    "uname": "uname/nvidia-docker-365_uname-a.txt",
    "module-files": "module-files/nvidia-docker-365_find.txt",
    "jockey-list": "jockey-list/steam-for-linux-640_304-and-310.txt",
    "ps-listing": "ps-listing/forum-light-locker-xubuntu-1610_ps-auxf.txt",
    "ld-so-conf": "ld-so-conf/conda-forge-docker-images-135_ld.so.conf.txt",
    "docker-info": "docker-info/docker-for-linux-1531_grep-runtime.txt",
    "daemon-json": "daemon-json/docker-for-linux-1531_nvidia-default.json",
    "pod-manifest": "pod-manifest/k8s-device-plugin-readme_gpu-pod.yaml",
    # no public paste in reach had these with the fact under test: hand-written (see README.md there)
    "dnf-list": "dnf-list/handwritten_cuda-repo.txt",
    "pip-list": "pip-list/handwritten_torch-cpu.txt",
    "env": "env/handwritten_two-cudas.txt",
    "ls-cuda": "ls-cuda/handwritten_usr-local.txt",
    "systemctl-status": "systemctl-status/handwritten_fabricmanager-failed.txt",
    "containerd-config": "containerd-config/handwritten_v2-nvidia-not-default.toml",
    "crictl-info": "crictl-info/handwritten_nvidia-not-default.json",
    "kubectl-describe-node": "kubectl-describe-node/handwritten_gpu-node-no-gpu.txt",
    "crio-config": "crio-config/handwritten_crio-conf-crun-only.conf",
    "kubectl-describe-pod": "kubectl-describe-pod/handwritten_admission-devices-unavailable.txt",
}


def registry_examples() -> dict[str, tuple[str, str]]:
    """``kind -> (where it comes from, text)`` for tests/test_evidence_kinds.py's EXAMPLES."""
    return {kind: (f"tests/data/listings/{name}", listing(name)) for kind, name in REAL_EXAMPLES.items()}
