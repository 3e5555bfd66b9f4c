"""``nvidia-smi -L``: one line per GPU, then one indented line per MIG device it holds."""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Gpu, ParseError, SmiReport

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-63d1e50a-...)"; very old drivers may print no UUID.
_GPU = lazy_re(r"GPU (\d{1,6}): (.*?)\s*(?:\(UUID: ([^)]*)\))?")
# "  MIG 1g.10gb     Device  0: (UUID: MIG-4d0efb7d-...)" (R450 printed "MIG-GPU-<uuid>/1/0").
_MIG = lazy_re(r"MIG\s+\S+\s+Device\s+\d{1,6}:.*")


def parse_smi_list(text: str) -> SmiReport:
    """Parse ``nvidia-smi -L``; every non-blank line must be a GPU, MIG device or warning line."""
    gpus: list[dict] = []
    warnings: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if gpu := _GPU.fullmatch(line):
            gpus.append({"index": int(gpu[1]), "name": gpu[2] or None, "uuid": gpu[3] or None,
                         "mig_devices": 0, "source": "nvidia-smi -L"})
        elif _MIG.fullmatch(line):
            if not gpus:
                raise ParseError("MIG device line before any GPU line")
            gpus[-1]["mig_devices"] += 1
        elif line.upper().startswith("WARNING"):
            warnings.append(line)
        else:
            raise ParseError(f"not nvidia-smi -L output: {line[:60]!r}")
    if not gpus:
        raise ParseError("no 'GPU n: <name> (UUID: ...)' line: not nvidia-smi -L output")
    return SmiReport(gpus=tuple(Gpu(**values) for values in gpus), warnings=tuple(warnings), format="list")
