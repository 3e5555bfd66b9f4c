"""The monitor's configuration: ``defaults.toml`` beside this file, overridden by the user's file."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from gpuhealth.lazyre import lazy_re

_DURATION = lazy_re(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*")
_UNITS = {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
DAY = 86400.0

# Every duration (seconds) and number of the config has bounds; outside them the value is an error that
# names its key (an interval of 0, nan or 1e-9 s spun at 100 % CPU, inf crashed the monitor, -1 retries
# killed the webhook thread). ``rules.*`` applies to every rule. A key in ZERO_OFF may also be 0: off.
DURATIONS: dict[str, tuple[float, float]] = {
    "monitor.interval": (0.05, 3600.0),
    "monitor.check_every": (10.0, 30 * DAY),
    "monitor.nvml_timeout": (0.1, 60.0),
    "monitor.raw_keep": (600.0, 366 * DAY),
    "monitor.rollup_keep": (3600.0, 3660 * DAY),
    "monitor.capture_every": (60.0, 30 * DAY),
    "monitor.correlate_every": (1.0, 3600.0),
    "monitor.ports_every": (10.0, DAY),
    "notify.webhook_timeout": (0.1, 60.0),
    "rules.*.for": (0.0, 30 * DAY),
    "rules.*.clear_for": (0.0, 30 * DAY),
    "rules.*.window": (1.0, DAY),
    "rules.*.drop_within": (1.0, DAY),
    "rules.*.quiet_for": (0.0, 30 * DAY),
    "rules.*.renotify_every": (0.0, 30 * DAY),
    "serve.check_rate": (0.0, DAY),
    "serve.request_timeout": (0.5, 300.0),
    "serve.write_timeout": (1.0, 300.0),
}
ZERO_OFF = frozenset({"monitor.check_every", "monitor.capture_every", "monitor.correlate_every",
                      "monitor.ports_every"})
# (lowest, highest, whole numbers only)
NUMBERS: dict[str, tuple[float, float, bool]] = {
    "monitor.held_mib": (0, 10_000_000, False),
    "monitor.capture_keep": (0, 1000, True),
    "usage.price_per_gpu_hour": (0, 1_000_000, False),
    "notify.webhook_retries": (0, 10, True),
    "rules.*.threshold_c": (0, 200, False),
    "rules.*.slowdown_margin_c": (0, 100, False),
    "rules.*.hysteresis_c": (0, 100, False),
    "rules.*.above_share": (0, 1, False),
    "rules.*.load_util_pct": (0, 100, False),
    "rules.*.load_power_w": (0, 10_000, False),
    "rules.*.busy_pct": (0, 100, False),
    "rules.*.clear_pct": (0, 100, False),
    "rules.*.active_pct": (0, 100, False),
    "rules.*.expected": (0, 1024, True),
}


def parse_duration(value: str | float | int) -> float:
    """Seconds from ``"30s"``, ``"10m"``, ``"4h"``, ``"30d"`` or a number; ValueError otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a duration (examples: 30s, 10m, 4h, 30d)")
        if value < 0:
            raise ValueError(f"negative duration {value}")
        return float(value)
    match = _DURATION.fullmatch(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration (examples: 30s, 10m, 4h, 30d)")
    return float(match[1]) * _UNITS[match[2]]


def show_seconds(seconds: float) -> str:
    """``0.05`` -> ``50ms``, ``3600`` -> ``1h``: a bound as the config would write it."""
    for unit, size in (("d", DAY), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size or (unit == "s" and seconds == 0):
            return f"{seconds / size:g}{unit}"
    return f"{seconds * 1000:g}ms"


def _bound(table: dict[str, Any], key: str) -> Any:
    """The bound of ``monitor.interval`` or ``rules.xid.for`` (through ``rules.*.for``), else None."""
    if key in table:
        return table[key]
    parts = key.split(".")
    return table.get(f"{parts[0]}.*.{parts[-1]}") if len(parts) == 3 and parts[0] == "rules" else None


def check_duration(key: str, value: str | float | int) -> float:
    """Seconds of config key ``key`` (``monitor.interval``), within its bounds; ValueError naming neither the
    key nor the file (the caller adds them) otherwise."""
    seconds = parse_duration(value)
    low, high = _bound(DURATIONS, key) or (0.0, math.inf)
    if not low <= seconds <= high and not (seconds == 0 and key in ZERO_OFF):
        off = " (or 0: off)" if key in ZERO_OFF else ""
        raise ValueError(f"{value!r} is out of range: between {show_seconds(low)} and {show_seconds(high)}{off}")
    return seconds


def _check_number(key: str, value: Any) -> None:
    low, high, whole = _bound(NUMBERS, key)
    kind = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
        raise ValueError(f"{value!r} is not {kind}")
    if not low <= value <= high:  # NaN fails this too
        raise ValueError(f"{value!r} is out of range: {kind} from {low:g} to {high:g}")


def validate(config: dict[str, Any], origin: str) -> dict[str, Any]:
    """Every bounded key of ``config`` within its bounds; ValueError ``FILE: key = value: why`` otherwise."""
    def walk(table: dict[str, Any], prefix: str) -> None:
        for name, value in table.items():
            key = f"{prefix}{name}"
            if isinstance(value, dict):
                walk(value, f"{key}.")
                continue
            try:
                if _bound(DURATIONS, key) is not None:
                    check_duration(key, value)
                elif _bound(NUMBERS, key) is not None:
                    _check_number(key, value)
            except ValueError as exc:
                raise ValueError(f"{origin}: {key}: {exc}") from None

    walk(config, "")
    return config


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
    # read as a file, as the knowledge tables are: importlib.resources cost `gpuhealth --help` 10 ms to import
    text = Path(__file__).with_name("defaults.toml").read_text(encoding="utf-8")
    return _toml(text, "defaults.toml")


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The defaults, merged with ``path`` when given (no other file: the system and user files are
    gpuhealth.config.load's); ValueError names the file and the bad key."""
    from gpuhealth.config import defaults as all_defaults
    from gpuhealth.config import load

    if path is None:
        return all_defaults()
    return load(path, system=_NOWHERE, old_system=_NOWHERE, user=_NOWHERE, warn=lambda _text: None).values


_NOWHERE = Path("/nonexistent/gpuhealth/config.toml")  # a layer not read
