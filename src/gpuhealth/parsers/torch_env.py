"""PyTorch's ``python -m torch.utils.collect_env`` report to :class:`TorchEnv`.

The report is ``Key: value`` lines; a few values run on below their key (``GPU models and
configuration:`` lists ``GPU 0: ...`` lines, ``cuDNN version: Probably one of the following:`` lists
library paths). ``Could not collect``, ``N/A`` and ``None`` mean unknown.
"""

from __future__ import annotations

import textwrap

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError, TorchEnv

_KEY_LINE = lazy_re(r"^(?P<key>[A-Za-z][A-Za-z0-9 ./()_-]*?):(?:\s+(?P<value>.*?))?\s*$")
_GPU_LINE = lazy_re(r"^\s*GPU\s+(?P<index>\d+):\s*(?P<name>.+?)\s*$")
_CUDNN_LIB = lazy_re(r"libcudnn\.so\.(?P<version>\d+(?:\.\d+)*)\s*$")
_VERSION = lazy_re(r"^\d+(?:\.\d+)+")
_UNKNOWN = {"could not collect", "n/a", "none", "", "no cuda", "unknown"}
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


# words of a person's sentence, never of a report field's name ("I tried this: nothing changed")
_PERSON = frozenset({"i", "i'm", "i've", "my", "we", "our", "you", "it", "this", "that", "tried", "but"})


def report_line(line: str) -> bool:
    """Whether a line is one of the report's own ``Key: value`` fields (``Clang version: Could not collect``), however
    sentence-like its value: a key of at most six words, none of them a person's."""
    match = _KEY_LINE.match(line.strip())
    if match is None:
        return False
    key = match["key"].lower().split()
    return 0 < len(key) <= 6 and not _PERSON.intersection(key)


def _known(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in _UNKNOWN else value


def _cudnn(value: str | None, continuation: list[str]) -> str | None:
    """A cuDNN version from the value (``8.5.0``, ``8302``, one library path) or the listed paths.

    With several candidate libraries the distinct versions are joined with ``" or "`` (``7.6.2 or 7.6.5``).
    """
    value = _known(value)
    candidates = [value] if value and not value.lower().startswith("probably") else []
    if value is None or value.lower().startswith("probably"):
        candidates += [line.strip() for line in continuation]
    versions: dict[str, None] = {}
    for candidate in candidates:
        lib = _CUDNN_LIB.search(candidate)
        if lib:
            versions.setdefault(lib["version"], None)
        elif _VERSION.match(candidate) or candidate.isdigit():
            versions.setdefault(candidate, None)
    # libcudnn.so.7 is only the major-version link of libcudnn.so.7.6.5: keep the fuller one
    distinct = [v for v in versions if not any(w.startswith(v + ".") for w in versions)]
    return " or ".join(distinct) if distinct else None


def parse_collect_env(text: str) -> TorchEnv:
    """torch version, the CUDA it was built with, whether CUDA is available, GPU names, driver,
    cuDNN, OS and Python version (the version number only: ``3.8.11``)."""
    if not isinstance(text, str):
        raise ParseError("collect_env output must be text")
    values: dict[str, str] = {}
    following: dict[str, list[str]] = {}
    key: str | None = None
    # textwrap.dedent: a report pasted indented (into an issue, a ticket) still has its keys at column 0
    for line in textwrap.dedent(text.replace("\r\n", "\n")).split("\n"):
        if line.startswith("[") or line.strip().startswith("Versions of relevant libraries"):
            key = None
            continue
        match = _KEY_LINE.match(line)
        if match and not _GPU_LINE.match(line) and not line[:1].isspace():
            key = match["key"].strip()
            values.setdefault(key, match["value"] or "")
            following.setdefault(key, [])
            continue
        if not line.strip():
            if key is not None and following.get(key):
                key = None  # a blank line ends a list that has started
            continue
        if key is not None:
            following[key].append(line)

    if "PyTorch version" not in values and "Is CUDA available" not in values:
        raise ParseError("no 'PyTorch version:' or 'Is CUDA available:' line")

    available_text = (_known(values.get("Is CUDA available")) or "").lower()
    available = True if available_text in _TRUE else False if available_text in _FALSE else None

    gpu_key = "GPU models and configuration"
    gpu_lines = [values.get(gpu_key, "")] + following.get(gpu_key, [])
    gpus = tuple(m["name"] for m in (_GPU_LINE.match(line) for line in gpu_lines) if m)

    python = _known(values.get("Python version"))
    return TorchEnv(
        torch_version=_known(values.get("PyTorch version")),
        torch_cuda_version=_known(values.get("CUDA used to build PyTorch")),
        cuda_available=available,
        gpu_names=gpus,
        driver_version=_known(values.get("Nvidia driver version")),
        cudnn_version=_cudnn(values.get("cuDNN version"), following.get("cuDNN version", [])),
        os=_known(values.get("OS")),
        python_version=python.split()[0] if python else None,
    )
