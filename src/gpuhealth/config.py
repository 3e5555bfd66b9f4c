"""The expectations file: what an operator says a host should have. TOML, all keys optional::

    gpu_count = 8
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuhealth.checks.registry import Expectations

DEFAULT_PATH = Path("/etc/gpuhealth.toml")
KNOWN_KEYS = {"gpu_count"}


def load_expectations(path: Path | None) -> Expectations:
    """Read ``path`` (or the default file when it exists); ValueError says what is wrong."""
    if path is None:
        if not DEFAULT_PATH.is_file():
            return Expectations()
        path = DEFAULT_PATH
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(KNOWN_KEYS)}")
    count = data.get("gpu_count")
    if count is not None and (not isinstance(count, int) or count < 0):
        raise ValueError(f"{path}: gpu_count must be a non-negative integer")
    return Expectations(gpu_count=count)
