"""The report formats `--format` offers. Each renderer module is imported only when chosen.

A renderer is ``render(report) -> str``; a format may also define its own exit code (a scheduler's
health-check contract is not ours), as ``exit_code(report) -> int`` in the same module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuhealth.model import Report

# name -> module under gpuhealth.report ("text" is rendered by the CLI straight to the terminal)
FORMATS: dict[str, str] = {
    "text": "text",
    "json": "json_report",
    "markdown": "markdown",
    "nhc": "nhc",
    "npd": "npd",
    # one node-problem-detector condition per class of checks (report/npd.py): "module:class"
    **{f"npd-{kind}": f"npd:{kind}" for kind in ("gpu", "driver", "fabric", "network", "host")},
    "prometheus": "prometheus_text",
    "junit": "junit",
}
FORMAT_NAMES = tuple(FORMATS)


def render(name: str, report: Report) -> tuple[str, int]:
    """The report in format ``name``, and the exit code that format calls for."""
    module_name, _, kind = FORMATS[name].partition(":")
    module = importlib.import_module(f"gpuhealth.report.{module_name}")
    if kind:  # npd-<class>
        return module.render_class(report, kind), module.class_exit_code(report, kind)
    exit_code = getattr(module, "exit_code", None)
    return module.render(report), exit_code(report) if exit_code else report.exit_code
