"""The CUDA a program's own "your driver is too old for this CUDA" message says it uses (GH601).

Julia's CUDA.jl compares the CUDA it uses with the newest CUDA the driver supports and warns when the driver is older
(JuliaGPU/CUDA.jl v2.3.0 deps/compatibility.jl, v3.13.1 and v5.8.0 src/initialization.jl)::

    ┌ Warning: CUDA 11.0.0 is not supported by
    │ your driver (which supports up to 10.2)
    ┌ Warning: You are using CUDA toolkit 11.1.0 with a driver that only supports up to 10.2.
    ┌ Warning: You are using CUDA 12.2.0 with a driver that only supports up to 11.x.

and XLA (JAX, TensorFlow) names the CUDA of its ptxas, whose PTX the driver must JIT-compile (openxla/xla
nvptx_compiler.cc): "The NVIDIA driver's CUDA version is 12.2 which is older than the ptxas CUDA version (12.6.20)".
The first version is the program's CUDA: it fills the field a toolkit fills, so GH601 holds it to the driver the
evidence shows (the driver's branch that CUDA needs). The wrapped form is joined first (parsers/wrapped.py).
"""

from __future__ import annotations

from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import CudaState

_VERSION = r"\d{1,2}\.\d{1,2}(?:\.\d{1,3})?"
_MESSAGES = (  # (the program, its message with the CUDA it uses as "cuda")
    ("CUDA.jl", lazy_re(rf"\bCUDA (?P<cuda>{_VERSION}) is not supported by\s{{1,8}}your driver \(which supports up to "
                        rf"{_VERSION}\)")),
    ("CUDA.jl", lazy_re(rf"\bYou are using CUDA (?:toolkit )?(?P<cuda>{_VERSION}) with a driver that only supports up "
                        rf"to \d{{1,2}}\.(?:\d{{1,2}}|x)\b")),
    ("XLA's ptxas", lazy_re(rf"The NVIDIA driver's CUDA version is {_VERSION} which is older than the ptxas CUDA "
                            rf"version \((?P<cuda>{_VERSION})\)")),
)
MAX_LINES = 5000
MAX_LINE = 1000  # characters of a line that are read


def program_cuda_lines(lines: list[str]) -> dict[str, Any]:
    """The CUDA the first such message says its program uses, as a ``cuda`` overlay (``program_cuda``,
    ``program_name``, ``program_line``); empty without one."""
    for line in lines[:MAX_LINES]:
        if "CUDA" not in line or "driver" not in line:
            continue
        head = line[:MAX_LINE]
        for program, message in _MESSAGES:
            found = message.search(head)
            if found:
                return {"cuda": CudaState(program_cuda=found["cuda"], program_name=program,
                                          program_line=head.strip()[:300])}
    return {}
