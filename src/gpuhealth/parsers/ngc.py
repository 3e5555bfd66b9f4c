"""An NVIDIA NGC container's start-up driver check, read as the two facts it states (GH601).

The NGC containers' entrypoint (/opt/nvidia/entrypoint.d, the GPU driver version check) asks the host's driver for
its version (``nvidia-smi -i 0 --query-gpu=driver_version``) and compares it with the driver the container's CUDA
release bundles (CUDA_DRIVER_VERSION); when it is older and forward compatibility failed, it prints::

    ERROR: This container was built for NVIDIA Driver Release 560.35 or later, but
           version 535.183.01 was detected and compatibility mode is UNAVAILABLE.

The first number is the driver of the container's CUDA (the CUDA release whose bundled driver it is:
knowledge/cuda_drivers.csv), the second the host's kernel driver as that nvidia-smi query gave it. They fill the
fields a `docker run` of a CUDA image and that query fill, so GH601 names the CUDA, the driver and the driver branch
to install, as it does for an nvidia/cuda image.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import CudaState, SmiReport

_BUILT_FOR = "This container was built for NVIDIA Driver Release"
_NEEDS = lazy_re(r"This container was built for NVIDIA Driver Release (?P<needs>\d{2,3}\.\d{1,3}(?:\.\d{1,3})?) "
                 r"or later")
_DETECTED = lazy_re(r"\bversion (?P<found>\d{2,3}\.\d{1,3}(?:\.\d{1,3})?) was detected and compatibility mode is "
                    r"UNAVAILABLE")
MAX_LINES = 5000


def ngc_driver_lines(lines: list[str]) -> dict[str, Any]:
    """The container's CUDA and the host driver an NGC driver check names, as overlays: ``cuda`` (the container's
    CUDA, as an image's) and ``smi`` (the driver version its nvidia-smi query printed). Empty without that check."""
    for at, line in enumerate(lines[:MAX_LINES]):
        if _BUILT_FOR not in line:
            continue
        needs = _NEEDS.search(line[:300])
        found = next((m for m in (_DETECTED.search(n[:300]) for n in lines[at:at + 3]) if m), None)
        if needs is None or found is None:
            return {}
        from gpuhealth.knowledge.cuda_drivers import cuda_of_driver

        cuda = cuda_of_driver(needs["needs"])
        shown = f"{line.strip()[:200]} {found[0]}"
        fields: dict[str, Any] = {"smi": SmiReport(driver_version=found["found"], format="query", partial=True)}
        if cuda is not None:
            fields["cuda"] = CudaState(base_image=f"of an NGC release built for driver {needs['needs']}",
                                       base_image_cuda=cuda, image_command=shown)
        return fields
    return {}
