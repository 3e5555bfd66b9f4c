"""The expectations file: what an operator says a host should have. TOML, all keys optional::

    gpu_count = 8
    nvlink_count = 18            # active NVLinks per GPU
    pcie_width = 16
    xid_rate_per_hour = 10
    temperature_margin_c = 5     # GH406: this close to the slowdown threshold is reported
    [models."NVIDIA H100 80GB HBM3"]
    nvlink_count = 18
    temperature_slowdown_c = 87  # GH406, when the GPU does not print its own (or to override it)

Every key is described in docs/configuration.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuhealth.checks.registry import Expectations

DEFAULT_PATH = Path("/etc/gpuhealth.toml")
KNOWN_KEYS = {"gpu_count", "nvlink_count", "pcie_width", "xid_rate_per_hour", "models", "driver_params",
              "temperature_margin_c"}
# what a [models."<product name>"] table may set
MODEL_KEYS = {"nvlink_count", "pcie_width", "temperature_slowdown_c", "temperature_shutdown_c"}


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
    from gpuhealth.evidence_input import InputError, read_config_text

    try:
        data = tomllib.loads(read_config_text(path))  # refuses devices, times out FIFOs, bounds the size
    except InputError as exc:
        raise ValueError(str(exc)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(KNOWN_KEYS))}")
    values = {key: _count(path, key, data.get(key)) for key in sorted(KNOWN_KEYS - {"models", "driver_params"})}
    if values["xid_rate_per_hour"] == 0:
        raise ValueError(f"{path}: xid_rate_per_hour must be a positive integer")
    return Expectations(**values, models=_models(path, data.get("models", {})),
                        driver_params=_driver_params(path, data.get("driver_params")))


def _count(path: Path, key: str, value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{path}: {key} must be a non-negative integer")
    return value


def _models(path: Path, tables: object) -> dict[str, dict[str, int]]:
    """``[models."NVIDIA H100 80GB HBM3"] nvlink_count = 18``: per product name, as nvidia-smi prints it."""
    if not isinstance(tables, dict):
        raise ValueError(f'{path}: models must be tables: [models."<GPU name>"]')
    models: dict[str, dict[str, int]] = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f'{path}: models."{name}" must be a table of {", ".join(sorted(MODEL_KEYS))}')
        unknown = set(table) - MODEL_KEYS
        if unknown:
            raise ValueError(f'{path}: models."{name}": unknown key(s) {", ".join(sorted(unknown))}; '
                             f'known: {", ".join(sorted(MODEL_KEYS))}')
        models[name] = {key: _count(path, f'models."{name}".{key}', value) for key, value in table.items()}
    return models


def _driver_params(path: Path, table: object) -> dict[str, str] | None:
    """``driver_params = { EnableMSI = 1 }``: /proc/driver/nvidia/params names and the values expected (GH804)."""
    if table is None:
        return None
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{path}: driver_params must be a table such as {{ EnableMSI = 1 }}")
    params = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{path}: driver_params.{name} must be an integer or a string")
        params[str(name)] = str(value)
    return params
