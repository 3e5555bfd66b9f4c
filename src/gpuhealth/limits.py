"""Limits on untrusted input, enforced before the work (docs/limits.md lists them all).

JSON from a bundle or a saved run comes from another machine. ``json.loads`` builds every object at
once, so a 16 MiB document of ``[{},{},...]`` would cost gigabytes, and deep nesting ends in a
``RecursionError``. ``load_json`` refuses both by counting before it parses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_JSON_CONTAINERS = 500_000  # objects + arrays in one document (overcounted: brackets in strings count)
MAX_JSON_ITEMS = 2_000_000  # commas + containers: bounds the scalars too
MAX_JSON_DEPTH = 64  # nesting; gpuhealth's own documents stay under 12

# Per document kind: the most bytes read before parsing.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_NVML_JSON_BYTES = 16 * 1024 * 1024
MAX_ENV_JSON_BYTES = 4 * 1024 * 1024
MAX_SAVED_RUN_BYTES = 64 * 1024 * 1024


class InputLimitError(ValueError):
    """Untrusted input past a limit, or malformed: the message names the file and the reason."""


def load_json(path: Path, max_bytes: int, what: str = "JSON") -> Any:
    """Parse ``path`` as JSON within ``max_bytes``, the container/item counts and the nesting depth."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise InputLimitError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    if len(data) > max_bytes:
        raise InputLimitError(f"{path}: {what} larger than {max_bytes} bytes; refused")
    return parse_json(data, str(path), what)


def parse_json(data: bytes | str, name: str, what: str = "JSON") -> Any:
    """``json.loads`` with the counts checked first (C-speed ``count``) and the depth checked after."""
    raw = data.encode("utf-8", errors="replace") if isinstance(data, str) else data
    containers = raw.count(b"{") + raw.count(b"[")
    if containers > MAX_JSON_CONTAINERS or containers + raw.count(b",") > MAX_JSON_ITEMS:
        raise InputLimitError(f"{name}: {what} has too many elements (more than {MAX_JSON_CONTAINERS} objects "
                              f"and arrays or {MAX_JSON_ITEMS} items); refused")
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise InputLimitError(f"{name}: {what} nested deeper than {MAX_JSON_DEPTH} levels; refused") from exc
    except ValueError as exc:
        raise InputLimitError(f"{name}: not valid {what} ({_short(exc)})") from exc
    if depth(value) > MAX_JSON_DEPTH:
        raise InputLimitError(f"{name}: {what} nested deeper than {MAX_JSON_DEPTH} levels; refused")
    return value


def depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion (the input is untrusted)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, level)
        if level > MAX_JSON_DEPTH:
            return level
        stack.extend((child, level + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def _short(exc: Exception, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."
