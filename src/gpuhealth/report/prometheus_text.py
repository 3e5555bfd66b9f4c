"""``--format prometheus``: node_exporter textfile-collector exposition (text format 0.0.4).

Written by hand (``prometheus_client`` is not a dependency). Every family is a gauge with HELP and
TYPE lines, always present so the set of names is stable; samples carry no timestamp (the textfile
collector refuses them). Label values escape backslash, double quote and newline; other control
characters become spaces. The exit code is 0 whenever the metrics were written, so that
``gpuhealth check --format prometheus > f.tmp && mv f.tmp f.prom`` replaces the file on a broken
host too: the verdict is in the metrics. See docs/prometheus-textfile.md.
"""

from __future__ import annotations

import time
from collections import Counter

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.junit import passed_checks

VERDICTS = ("HEALTHY", "DEGRADED", "BROKEN", "NO DIAGNOSIS")
_CONTROL = lazy_re(r"[\x00-\x08\x0b-\x1f\x7f]")

Labels = tuple[tuple[str, str], ...]


def escape_label_value(value: str) -> str:
    value = _CONTROL.sub(" ", value)
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _sample(name: str, labels: Labels, value: float) -> str:
    inner = ",".join(f'{key}="{escape_label_value(val)}"' for key, val in labels)
    number = str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))
    return f"{name}{{{inner}}} {number}" if labels else f"{name} {number}"


def _finding_labels(finding: Finding) -> Labels:
    gpu = "" if finding.subject.gpu_index is None else str(finding.subject.gpu_index)
    return (("code", finding.code), ("slug", finding.slug), ("severity", finding.severity.value),
            ("gpu", gpu), ("pci_bus_id", finding.subject.pci_address or ""), ("xid", finding.labels.get("xid", "")),
            ("action", finding.action), ("impact", finding.impact))


def families(report: Report, now: float | None = None) -> list[tuple[str, str, list[tuple[Labels, float]]]]:
    """(metric name, help, samples) for every family, in output order."""
    status = Counter(_finding_labels(f) for f in report.findings)
    skipped = Counter((("code", s.code), ("slug", s.slug)) for s in report.skipped)
    return [
        ("gpuhealth_check_status",
         "A finding of a gpuhealth check (1; more when several findings share these labels).",
         list(status.items())),
        ("gpuhealth_check_skipped",
         "A check gpuhealth could not run for lack of evidence: not checked, not passed.",
         list(skipped.items())),
        ("gpuhealth_check_passed", "A check that ran and found nothing.",
         [((("code", s.code), ("slug", s.slug)), 1) for s in passed_checks(report)]),
        ("gpuhealth_verdict", "The host's verdict: 1 for the current one, 0 for the others.",
         [((("verdict", v),), int(report.verdict == v)) for v in VERDICTS]),
        ("gpuhealth_findings", "Number of findings by severity.",
         [((("severity", s.value),), report.count(s)) for s in (Severity.CRITICAL, Severity.WARNING, Severity.INFO)]),
        ("gpuhealth_checks_run", "Number of checks gpuhealth ran (passed, found something, or skipped).",
         [((), report.checks_run)]),
        ("gpuhealth_last_run_timestamp_seconds", "When gpuhealth wrote these metrics, in seconds since the epoch.",
         [((), time.time() if now is None else now)]),
    ]


def render(report: Report, now: float | None = None) -> str:
    lines: list[str] = []
    for name, help_text, samples in families(report, now):
        lines += [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} gauge"]
        lines += [_sample(name, labels, value) for labels, value in samples]
    return "\n".join(lines) + "\n"


def exit_code(report: Report) -> int:
    """0: the metrics were written; the verdict travels in them, not in the exit code."""
    return 0
