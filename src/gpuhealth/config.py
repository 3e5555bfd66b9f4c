"""gpuhealth's one configuration: a TOML file with sections, read by `check`, `analyze`, `monitor`, `watch`,
`history`, `usage` and `serve` alike::

    [check]                      # what this host should have (the expectations)
    gpu_count = 8                # also the monitor's expected GPU count (rule gpu_count)
    [check.models."NVIDIA H100 80GB HBM3"]
    nvlink_count = 18
    [monitor]                    # sampling and history
    interval = "1s"
    [rules.temperature]          # alert rules
    threshold_c = 85
    [notify]                     # where alerts go
    webhook_url = "https://..."
    [serve]                      # the web server
    listen = "127.0.0.1:9835"

Layers, each overriding the one before: the defaults (monitor/defaults.toml and SERVE_DEFAULTS), the old
/etc/gpuhealth.toml (deprecated), the system file /etc/gpuhealth/config.toml, the user file
($XDG_CONFIG_HOME/gpuhealth/config.toml), the file given with ``--config``; the commands' flags override
all. Every key is described in docs/configuration.md; ``gpuhealth config show`` prints the merged result
with where each value came from.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuhealth.checks.registry import Expectations
from gpuhealth.records import record

SYSTEM_PATH = Path("/etc/gpuhealth/config.toml")
OLD_SYSTEM_PATH = Path("/etc/gpuhealth.toml")  # the expectations file before the one schema: still read
DEFAULT_PATH = OLD_SYSTEM_PATH  # the name this module gave it before
KNOWN_KEYS = {"gpu_count", "nvlink_count", "pcie_width", "xid_rate_per_hour", "models", "driver_params",
              "temperature_margin_c", "ib_exclude", "ib_port_count", "ib_rate_gbps", "instance_type"}
# what a [check.models."<product name>"] table may set
MODEL_KEYS = {"nvlink_count", "pcie_width", "temperature_slowdown_c", "temperature_shutdown_c"}
# [serve]: what `serve`'s flags of the same names default to
SERVE_DEFAULTS: dict[str, Any] = {"listen": "127.0.0.1:9835", "token_file": "", "check_rate": "30s",
                                  "request_timeout": "10s", "write_timeout": "10s"}
# the key each table of the monitor's old layout moved to
MOVED = {("rules", "gpu_count", "expected"): ("check", "gpu_count")}
SECTIONS = ("check", "monitor", "usage", "notify", "rules", "serve")

Warn = Callable[[str], None]


def user_path(environ: Any = None) -> Path:
    """``$XDG_CONFIG_HOME/gpuhealth/config.toml``; ``~/.config`` when the variable is unset or not absolute
    (as the XDG base directory specification says)."""
    base = (os.environ if environ is None else environ).get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        try:
            base = str(Path.home() / ".config")
        except RuntimeError:  # no HOME and no passwd entry (a container's random uid): no user file
            return Path("/nonexistent/gpuhealth/config.toml")
    return Path(base) / "gpuhealth" / "config.toml"


def _stderr(text: str) -> None:
    from gpuhealth.inert import one_line

    print(f"gpuhealth: {one_line(text)}", file=sys.stderr, flush=True)


@record  # not @dataclass: it compiles each method with exec, a third of this module's import (every command)
class Settings:
    """The merged configuration: ``values`` (section -> table, as TOML reads it), ``sources`` (a dotted key
    such as ``check.gpu_count`` -> the layer that set it: "default", "system file /etc/...", ...) and the
    files read, in order."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    files: list[tuple[str, Path]] = field(default_factory=list)

    def __getitem__(self, section: str) -> Any:
        return self.values[section]

    def expectations(self) -> Expectations:
        return expectations_from(self.values["check"], "[check]")

    def rules(self) -> dict[str, dict[str, Any]]:
        """The [rules.*] tables, the gpu_count rule expecting [check] gpu_count (unset: the most seen)."""
        return rules_with_count(self.values)

    def set_flag(self, key: str, value: Any, flag: str) -> None:
        """A command-line flag's value over every file (``check --gpu-count``)."""
        section, name = key.split(".", 1)
        self.values[section][name] = value
        self.sources[key] = f"flag {flag}"


def rules_with_count(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``values["rules"]`` with the one expected GPU count, ``check.gpu_count``, given to rule gpu_count."""
    rules = dict(values["rules"])
    count = values["check"].get("gpu_count")
    if count and "gpu_count" in rules:
        rules["gpu_count"] = {**rules["gpu_count"], "expected": count}
    return rules


def defaults() -> dict[str, Any]:
    from gpuhealth.monitor.config import defaults as monitor_defaults

    values = monitor_defaults()
    values["check"] = {}  # every expectation unset: nothing expected beyond the per-model defaults
    values["serve"] = dict(SERVE_DEFAULTS)
    return {name: values[name] for name in SECTIONS}


def load(config: Path | None = None, *, system: Path | None = None, old_system: Path | None = None,
         user: Path | None = None, warn: Warn = _stderr, check_only: bool = False) -> Settings:
    """Defaults, then the old and the new system file, the user file and ``config``, each over the one before.
    ValueError, one line naming the file and the key, for an unreadable file, an unknown key or a bad value;
    a file in an old layout is read and ``warn`` says, in one line, where its keys belong now. With
    ``check_only`` and no file to read, only [check] is filled in: `check` does not parse the monitor's
    defaults (start-up time)."""
    layers = [("old system file", OLD_SYSTEM_PATH if old_system is None else old_system),
              ("system file", SYSTEM_PATH if system is None else system),
              ("user file", user_path() if user is None else user)]
    found = [(label, path) for label, path in layers if path.is_file()]
    if config is not None:
        found.append(("--config", Path(config)))  # read even when it is no regular file: the reader says why
    if check_only and not found:
        return Settings({"check": {}})
    values = defaults()
    settings = Settings(values, {key: "default" for key, _value in _leaves(values)})
    for label, path in found:
        data = _normalise(read_toml(path), path, label, warn)
        _merge(values, data, str(path), settings.sources, f"{label} {path}", ())
        settings.files.append((label, path))
    expectations_from(values["check"], "[check]")  # the merged table must make sense too
    return settings


def read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from gpuhealth.evidence_input import InputError, read_config_text

    try:
        return tomllib.loads(read_config_text(path))  # refuses devices, times out FIFOs, bounds the size
    except InputError as exc:
        raise ValueError(str(exc)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc


def _normalise(data: dict[str, Any], path: Path, label: str, warn: Warn) -> dict[str, Any]:
    """A file in the one schema; an old layout (the expectations at the top level, the monitor's
    ``rules.gpu_count.expected``) moved into it, with one deprecation line, and checked."""
    from gpuhealth.monitor.config import validate

    validate(data, str(path))  # the bounded keys (durations, numbers), the deprecated ones too
    old = sorted(key for key in data if key in KNOWN_KEYS)
    if label == "old system file":
        warn(f"{path} is deprecated: move its keys under [check] in {SYSTEM_PATH} (see `gpuhealth config show`)")
    elif old:
        warn(f"{path}: top-level {', '.join(old)} is the old expectations layout, deprecated: write "
             f"{'it' if len(old) == 1 else 'them'} under [check]")
    if old:
        check = data.setdefault("check", {})
        if not isinstance(check, dict):
            raise ValueError(f"{path}: check must be a table: [check]")
        for key in old:
            if key in check:
                raise ValueError(f"{path}: {key} is set twice, at the top level and under [check]")
            check[key] = data.pop(key)
    for (section, table, key), (new_section, new_key) in MOVED.items():
        rule = data.get(section, {}).get(table) if isinstance(data.get(section), dict) else None
        if isinstance(rule, dict) and key in rule:
            value = rule.pop(key)
            warn(f"{path}: {section}.{table}.{key} is deprecated: write {new_section}.{new_key} "
                 "(one expected GPU count for check and monitor)")
            check = data.setdefault(new_section, {})
            if not isinstance(check, dict) or value == 0:  # 0 meant "the most seen": now unset
                continue
            if check.get(new_key, value) != value:
                raise ValueError(f"{path}: {section}.{table}.{key} = {value!r} and {new_section}.{new_key} = "
                                 f"{check[new_key]!r} disagree: keep {new_section}.{new_key} alone")
            check[new_key] = value
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; known: [{'], ['.join(SECTIONS)}] "
                         "(see docs/configuration.md)")
    if isinstance(data.get("check"), dict):
        expectations_from(data["check"], f"{path}: [check]")
    return data


def _merge(base: dict[str, Any], override: dict[str, Any], where: str, sources: dict[str, str], source: str,
           prefix: tuple[str, ...]) -> None:
    """``override`` into ``base`` in place, noting each value's ``source``. Outside [check] every key must
    exist in the defaults and keep its kind; [check] is validated by expectations_from, and its
    ``models``/``driver_params`` tables merge per name (a later file adds a model, or overrides one)."""
    for key, value in override.items():
        path = (*prefix, key)
        dotted = _dotted(path)
        if prefix == ("check",):
            if key in ("models", "driver_params") and isinstance(value, dict):
                merged = base.setdefault(key, {})
                merged.update(value)
            else:
                base[key] = value
            for leaf, _value in _leaves(value if isinstance(value, dict) else {}, path) or [(dotted, value)]:
                sources[leaf] = source
            continue
        if key not in base:
            known = ", ".join(sorted(base))
            raise ValueError(f"{where}: {'.'.join(prefix) or 'top level'}: unknown key {key!r}; known: {known}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"{where}: {dotted} must be a table")
            _merge(base[key], value, where, sources, source, path)
            continue
        _check_type(base[key], value, where, dotted)
        base[key] = value
        sources[dotted] = source


def _check_type(default: Any, value: Any, where: str, dotted: str) -> None:
    """A value of the default's kind: true/false, text, a list of text; numbers and durations are bounded by
    monitor.config.validate, which also takes a duration as seconds."""
    from gpuhealth.monitor.config import DURATIONS, _bound

    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, list):
        ok, kind = isinstance(value, list) and all(isinstance(item, str) for item in value), "a list of names"
    elif isinstance(default, (int, float)):
        ok, kind = number, "a number"
    elif _bound(DURATIONS, dotted) is not None:
        ok, kind = isinstance(value, str) or number, 'a duration ("30s", "10m") or seconds'
    else:
        ok, kind = isinstance(value, str), "text"
    if not ok:
        raise ValueError(f"{where}: {dotted} must be {kind}, not {value!r}")


def _quoted(part: str) -> str:
    import json

    return part if part and part.replace("_", "").replace("-", "").isalnum() and part.isascii() else json.dumps(part)


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(_quoted(part) for part in path)


def _leaves(table: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """(dotted key, value) of every value in ``table``, tables walked (an empty table is a value)."""
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out += _leaves(value, (*prefix, key))
        else:
            out.append((_dotted((*prefix, key)), value))
    return out


# --------------------------------------------------------------------------- [check]: the expectations


def expectations_from(data: dict[str, Any], where: str) -> Expectations:
    """The [check] table as Expectations; ValueError ``WHERE: key why`` for an unknown key or a bad value."""
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(KNOWN_KEYS))}")
    values = {key: _count(where, key, data.get(key))
              for key in sorted(KNOWN_KEYS - {"models", "driver_params", "ib_exclude", "instance_type"})}
    if values["xid_rate_per_hour"] == 0:
        raise ValueError(f"{where}: xid_rate_per_hour must be a positive integer")
    return Expectations(**values, models=_models(where, data.get("models", {})),
                        driver_params=_driver_params(where, data.get("driver_params")),
                        ib_exclude=_names(where, "ib_exclude", data.get("ib_exclude", [])),
                        instance_type=_instance_type(where, data.get("instance_type", "")))


def load_expectations(path: Path | None) -> Expectations:
    """The expectations of ``path`` alone (either layout), or of the configuration files when None (the
    monitor's and serve's full check without --config); ValueError says what is wrong."""
    if path is None:
        return load().expectations()
    data = _normalise(read_toml(path), path, "--config", lambda _text: None)
    return expectations_from(data.get("check", {}), str(path))


def _instance_type(where: str, value: object) -> str:
    """``instance_type = "Standard_ND96isr_H100_v5"``: the cloud's name for this VM (knowledge/platforms.csv)."""
    if not isinstance(value, str) or len(value) > 100 or not all(c.isalnum() or c in "._-" for c in value):
        raise ValueError(f"{where}: instance_type must be a cloud instance type such as p5.48xlarge")
    return value


def _count(where: str, key: str, value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{where}: {key} must be a non-negative integer")
    return value


def _names(where: str, key: str, value: object) -> tuple[str, ...]:
    """``ib_exclude = ["mlx5_4"]``: device names, as /sys/class/infiniband lists them."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v and "/" not in v for v in value):
        raise ValueError(f'{where}: {key} must be a list of device names such as ["mlx5_4"]')
    return tuple(value)


def _models(where: str, tables: object) -> dict[str, dict[str, int]]:
    """``[check.models."NVIDIA H100 80GB HBM3"] nvlink_count = 18``: per product name, as nvidia-smi prints it."""
    if not isinstance(tables, dict):
        raise ValueError(f'{where}: models must be tables: [check.models."<GPU name>"]')
    models: dict[str, dict[str, int]] = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f'{where}: models."{name}" must be a table of {", ".join(sorted(MODEL_KEYS))}')
        unknown = set(table) - MODEL_KEYS
        if unknown:
            raise ValueError(f'{where}: models."{name}": unknown key(s) {", ".join(sorted(unknown))}; '
                             f'known: {", ".join(sorted(MODEL_KEYS))}')
        models[name] = {key: _count(where, f'models."{name}".{key}', value) for key, value in table.items()}
    return models


def _driver_params(where: str, table: object) -> dict[str, str] | None:
    """``driver_params = { EnableMSI = 1 }``: /proc/driver/nvidia/params names and the values expected (GH804)."""
    if table is None:
        return None
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{where}: driver_params must be a table such as {{ EnableMSI = 1 }}")
    params = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{where}: driver_params.{name} must be an integer or a string")
        params[str(name)] = str(value)
    return params


# --------------------------------------------------------------------------- `gpuhealth config show`


SOURCE_COLUMN = 26  # where `config show` writes "# source" (a longer line: two blanks after it)


def show(settings: Settings) -> str:
    """The merged configuration as TOML that reads back, each value followed by where it came from."""
    lines = ["# gpuhealth's configuration: each value, then where it came from (a later layer wins):",
             "# the defaults, then the files read, in order:"]
    lines += [f"#   {label} {path}" for label, path in settings.files] or ["#   none"]
    lines += [f"# looked for: {OLD_SYSTEM_PATH} (deprecated), {SYSTEM_PATH},", f"#   {user_path()}, --config FILE"]
    for section in SECTIONS:
        table = settings.values[section]
        for header, rows in _tables(section, table):
            lines += ["", f"[{header}]"]
            width = SOURCE_COLUMN  # fixed: a key added elsewhere does not move every other line
            lines += [f"{_toml_line(key, value):<{width}}  # {settings.sources.get(dotted, 'default')}"
                      for key, value, dotted in rows]
        if section == "check":
            unset = sorted(KNOWN_KEYS - set(table) - {"models", "driver_params"})
            if unset:
                import textwrap  # only here: `config show`

                lines += ["# not set (nothing expected beyond the platform's and the per-model defaults):",
                          *textwrap.wrap(", ".join(unset), 100, initial_indent="#   ", subsequent_indent="#   ")]
    return "\n".join(lines) + "\n"


def _tables(section: str, table: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any, str]]]]:
    """``[rules.temperature]`` and the like: one header per table of values, its rows (key, value, dotted)."""
    if section == "rules":
        return [(f"rules.{name}", [(_quoted(key), value, f"rules.{name}.{_quoted(key)}")
                                   for key, value in rule.items()]) for name, rule in table.items()]
    # check.models."<name>" and check.driver_params: dotted keys under [check]
    return [(section, [(dotted, value, f"{section}.{dotted}") for dotted, value in _leaves(table)])]


def _toml_line(key: str, value: Any) -> str:
    return f"{key} = {_toml_value(value)}"


def _toml_value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's, control characters escaped
