"""``nvidia-smi nvlink -s`` (``--status``): per GPU, each link's speed, or why there is none."""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import NvlinkState, ParseError
from gpuhealth.parsers._values import number

_GPU = lazy_re(r"GPU (\d{1,6}): (.*?)\s*(?:\(UUID: ([^)]*)\))?")
_LINK = lazy_re(r"Link (\d{1,3}): (.*)")  # NVLink 5 has 18 links; three digits is plenty
# What nvidia-smi prints instead of links, in several spellings ("inActive" since 590), and the
# short reason stored for it. Anything else under a GPU, before its links, is kept as printed: an error of its own
# (NVML's "Unknown Error"), which GH408 shows.
_ERRORS = (
    ("all links are inactive", "all links are inactive"),
    ("mig mode", "not supported in MIG mode"),
    ("does not have or support nvlink", "not supported"),
)
# the reasons that are no fault: the GPU has no NVLink, or MIG mode hides it (GH408 says nothing of them)
BY_DESIGN = frozenset({"not supported in MIG mode", "not supported"})


def parse_smi_nvlink(text: str) -> tuple[NvlinkState, ...]:
    """Parse ``nvidia-smi nvlink -s``; a link printed ``<inactive>`` has speed None."""
    gpus: list[dict] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        gpu = _GPU.fullmatch(line)
        if gpu:
            gpus.append({"index": int(gpu[1]), "name": gpu[2] or None, "uuid": gpu[3] or None,
                         "links": {}, "error": None})
        elif not gpus:
            raise ParseError(f"not nvidia-smi nvlink -s output: {line[:60]!r}")
        elif link := _LINK.fullmatch(line):
            gpus[-1]["links"][int(link[1])] = number(link[2])  # "<inactive>" has no number
        elif gpus[-1]["error"] is None and not gpus[-1]["links"]:  # printed instead of the links, never after them
            gpus[-1]["error"] = _error(line)
    if not gpus:
        raise ParseError("no 'GPU n: <name> (UUID: ...)' line: not nvidia-smi nvlink -s output")
    return tuple(_state(values) for values in gpus)


def _error(line: str) -> str:
    lowered = line.lower()
    return next((reason for marker, reason in _ERRORS if marker in lowered), line)


def _state(values: dict) -> NvlinkState:
    links = values["links"]
    speeds = tuple(links.get(i) for i in range(max(links) + 1)) if links else ()
    return NvlinkState(
        gpu_index=values["index"], gpu_name=values["name"], uuid=values["uuid"],
        link_speeds_gbps=speeds, error=values["error"],
    )
