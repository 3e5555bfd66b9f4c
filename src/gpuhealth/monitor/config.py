"""The monitor's configuration: ``defaults.toml`` beside this file, overridden by the user's file."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

from gpuhealth.lazyre import lazy_re

_DURATION = lazy_re(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*")
_UNITS = {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(value: str | float | int) -> float:
    """Seconds from ``"30s"``, ``"10m"``, ``"4h"``, ``"30d"`` or a number; ValueError otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"negative duration {value}")
        return float(value)
    match = _DURATION.fullmatch(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration (examples: 30s, 10m, 4h, 30d)")
    return float(match[1]) * _UNITS[match[2]]


def _toml(text: str, origin: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{origin}: not valid TOML ({exc})") from exc


def defaults() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("defaults.toml").read_text(encoding="utf-8")
    return _toml(text, "defaults.toml")


def _merge(base: dict[str, Any], override: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if key not in base:
            raise ValueError(f"{where}: unknown key {key!r}; known: {', '.join(sorted(base))}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"{where}.{key}: must be a table")
            out[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            out[key] = value
    return out


def load_config(path: Path | None = None) -> dict[str, Any]:
    """Defaults merged with ``path``; ValueError names the file and the bad key."""
    config = defaults()
    if path is None:
        return config
    from gpuhealth.evidence_input import InputError, read_config_text

    try:
        text = read_config_text(path)  # refuses devices, times out FIFOs, bounds the size, names the file
    except InputError as exc:
        raise ValueError(str(exc)) from exc
    return _merge(config, _toml(text, str(path)), str(path))
