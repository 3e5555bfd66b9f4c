"""The snapshot fields a program's version banner fills (parsers/banners.py reads the lines), as that program's
whole-output reader fills them: ``nvcc --version`` the CUDA toolkit, ``/proc/driver/nvidia/version`` the driver,
nvidia-smi's header row or ``-q`` version lines an nvidia-smi excerpt, ``/proc/version`` and ``uname -a`` the
kernel release (and the compiler that built it), ``gcc --version`` the compiler, pip's torch row, collect_env's
lines and a printed ``torch.cuda.is_available()`` PyTorch. These are a program's lines, not a person's words: the
checks judge them at full severity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from gpuhealth.model import CudaState, DriverInfo, InstallState, OsInfo, SmiReport, TorchEnv
from gpuhealth.parsers.banners import Banner, read_banners

__all__ = ["banner_fields"]


def banner_fields(text: str, filled: Collection[str] = ()) -> tuple[dict[str, Any], tuple[Banner, ...]]:
    """The fields the banners in ``text`` fill, without those in ``filled`` (what the piece's own kind read: a
    whole output is not read a second time line by line), and the banners that filled them. Within one text the
    first banner to give a value keeps it; between pieces analyze's ``_merge`` decides."""
    fields: dict[str, Any] = {}
    used: list[Banner] = []
    for banner in read_banners(text):
        given = {key: value for key, value in _fields(banner).items() if key not in filled}
        for key, value in given.items():
            fields[key] = _fill(fields[key], value) if key in fields else value
        if given:
            used.append(banner)
    return fields, tuple(used)


def _fields(banner: Banner) -> dict[str, Any]:
    value = banner.value
    program = banner.program
    if program == "nvcc --version":
        return {"cuda": CudaState(nvcc_release=value("release"), nvcc_version=value("version"))}
    if program in ("/proc/driver/nvidia/version", "nvidia-container-cli info"):
        return {"driver": DriverInfo(version=value("version"), flavour=value("flavour"), banner=value("banner"),
                                     compiler=value("compiler"))}
    if program in ("nvidia-smi", "nvidia-smi -q"):  # an excerpt: it names no GPU (GH102 must not count them missing)
        return {"smi": SmiReport(driver_version=value("driver"), cuda_version=value("cuda"),
                                 format="table" if program == "nvidia-smi" else "query", partial=True)}
    if program == "/proc/version":
        release = value("release")
        return {"os": OsInfo(kernel_release=release),
                "install": InstallState(kernel_release=release, kernel_compiler=value("compiler"))}
    if program == "uname -a":
        release = value("release")
        return {"os": OsInfo(kernel_release=release, architecture=value("arch")),
                "install": InstallState(kernel_release=release)}
    if program == "gcc --version":
        return {"install": InstallState(gcc_present=True, gcc_version=value("version"), gcc_banner=value("banner"))}
    if program in ("pip list", "pip freeze"):
        from gpuhealth.evidence.listings import torch_from_version

        return {"torch": torch_from_version(value("version") or "")}
    if program == "collect_env":
        return {"torch": _collect_env(banner)}
    if program == "torch.cuda.is_available()":  # what that process saw, not which torch it is
        return {"torch": TorchEnv(cuda_available=value("value") == "True")}
    return {}


def _collect_env(banner: Banner) -> TorchEnv:
    version, available, cuda = banner.value("torch"), banner.value("available"), banner.value("torch_cuda")
    if version:
        from gpuhealth.evidence.listings import torch_from_version

        return torch_from_version(version)
    return TorchEnv(cuda_available=None if available is None else available == "true", torch_cuda_version=cuda)


def _fill(current: Any, new: Any) -> Any:
    """``current`` with what it lacks taken from ``new`` (two banners of one record: /proc/version and gcc's)."""
    if not dataclasses.is_dataclass(current) or type(current) is not type(new):
        return current
    missing = {f.name: getattr(new, f.name) for f in dataclasses.fields(current)
               if getattr(current, f.name) in (None, ()) and getattr(new, f.name) not in (None, ())}
    return dataclasses.replace(current, **missing) if missing else current
