"""``--format nhc``: the contract of a Slurm ``HealthCheckProgram`` / LBNL NHC check.

* Healthy (nothing at or above the drain threshold): prints nothing and exits 0.
* Unhealthy: prints ONE line, ``gpuhealth: <code> <slug> [<GPU>]: <message>[ (+N more)]``, at most
  ``MAX_LINE`` characters, and exits with the report's exit code (2 critical; 1 when warnings drain).

The ``gpuhealth:`` prefix lets the wrapper (deploy/slurm/gpuhealth-nhc.sh) resume only the nodes
gpuhealth itself drained. Critical findings drain; warnings do not, unless the environment variable
``GPUHEALTH_FAIL_ON=warning`` says so (``critical``, the default, or unset; another value is an error,
exit 3, see gpuhealth.envvars). Info never drains.
See docs/slurm-nhc.md.
"""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.common import fold

PREFIX = "gpuhealth:"
MAX_LINE = 200
FAIL_ON_VARIABLE = "GPUHEALTH_FAIL_ON"
_CONTROL = lazy_re(r"[\x00-\x1f\x7f]")


def fail_threshold(value: str | None = None) -> Severity:
    """The lowest severity that counts as a problem: ``critical`` unless set to ``warning``."""
    from gpuhealth.envvars import choice

    chosen = choice(FAIL_ON_VARIABLE, None if value is None else {FAIL_ON_VARIABLE: value})
    return Severity.WARNING if chosen == "warning" else Severity.CRITICAL


def problems(report: Report, threshold: Severity | None = None) -> list[Finding]:
    """The findings that fail the node, root causes first (symptoms folded under them are left out)."""
    threshold = threshold or fail_threshold()
    failing = [f for f in report.findings if f.severity.rank >= threshold.rank]
    if not failing:
        return []
    leads = [c.finding for c in fold(report.findings) if c.finding.severity.rank >= threshold.rank]
    return leads or failing


def one_line(text: str) -> str:
    """Whitespace collapsed, control characters dropped: safe as a Slurm drain reason."""
    return " ".join(_CONTROL.sub(" ", text).split())


def shorten(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, ending with "..." when cut. Slurm shows the line as the drained
    node's reason, where a cut inside a word ("clears it at 202...") reads as garbage: the cut falls where a
    clause ("; ", " - ", ", ") or else a word ends, as long as that keeps at least half the room."""
    if len(text) <= limit:
        return text
    room = max(limit - 3, 0)
    head = text[:room]
    for separator in ("; ", " - ", ", ", " "):
        end = room if separator == " " and text[room] == " " else head.rfind(separator)
        if end >= room // 2:
            return head[:end].rstrip(" ;,-") + "..."
    return head + "..."


def headline(finding: Finding) -> str:
    subject = "" if finding.subject.is_host else f" [{finding.subject}]"
    return f"{finding.code} {finding.slug}{subject}: {one_line(finding.message)}"


def render(report: Report, threshold: Severity | None = None, limit: int = MAX_LINE) -> str:
    found = problems(report, threshold)
    if not found:
        return ""
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return shorten(f"{PREFIX} {headline(found[0])}", limit - len(more)) + more + "\n"


def exit_code(report: Report, threshold: Severity | None = None) -> int:
    """0 when the node stays in service; otherwise the report's exit code (2 critical, 1 warning)."""
    return report.exit_code if problems(report, threshold) else 0
