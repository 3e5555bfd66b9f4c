"""``--format json``: a versioned document (schema in docs/report-json.md)."""

from __future__ import annotations

import json
from typing import Any

from gpuhealth import __version__
from gpuhealth.model import Report, to_jsonable
from gpuhealth.report.common import JSON_SCHEMA_VERSION, fold, gpu_rows, host_summary, next_commands


def document(report: Report) -> dict[str, Any]:
    snapshot = report.snapshot
    causes = fold(report.findings)
    return {
        "schema": "gpuhealth-report",
        "schema_version": JSON_SCHEMA_VERSION,
        "tool_version": __version__,
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "counts": {s: sum(1 for f in report.findings if f.severity.value == s)
                   for s in ("critical", "warning", "info")},
        "host": {label: value for label, value in host_summary(snapshot)},
        "origin": snapshot.origin,
        "captured_at": snapshot.captured_at,
        "gpus": gpu_rows(snapshot),
        "findings": [to_jsonable(f) for f in report.findings],
        "root_causes": [{"key": c.finding.key, "explains": [s.key for s in c.symptoms]} for c in causes],
        "skipped": [to_jsonable(s) for s in report.skipped],
        "unavailable": snapshot.unavailable,
        "next_commands": next_commands(report),
    }


def render(report: Report) -> str:
    return json.dumps(document(report), indent=2, sort_keys=False)
