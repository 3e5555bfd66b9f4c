"""``--format nhc``: the contract of a Slurm ``HealthCheckProgram`` / LBNL NHC check.

What drains is decided by each finding's ``impact``, never its severity (knowledge/actions.csv, docs/actions.md):

* ``node_unusable`` or ``gpu_unusable``: prints ONE line, ``gpuhealth: <code> <slug> [<GPU>] impact=<impact>
  action=<action>: <message>[ (+N more)]``, at most ``MAX_LINE`` characters, and exits 2.
* ``degraded`` drains only when ``GPUHEALTH_FAIL_ON=degraded`` says so (``warning``, its former name, is read the
  same): the same line, exit 1. ``user_environment`` (a user's PyTorch, a library path) and ``none`` never drain.
* Nothing drains, but gpuhealth could not judge the node (a check failed inside gpuhealth, no check ran, every check
  skipped): one line ``gpuhealth: could not judge: <why>`` and exit 3, gpuhealth's own failure, which the wrapper
  and the NHC check in docs/slurm-nhc.md log at error priority and never drain on.
* Otherwise (healthy, info, warnings that do not drain): prints nothing and exits 0.

The ``gpuhealth:`` prefix lets the wrapper (deploy/slurm/gpuhealth-nhc.sh) resume only the nodes gpuhealth itself
drained. See docs/slurm-nhc.md.
"""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import DRAINING_IMPACTS, Finding, Report
from gpuhealth.report.common import fold

PREFIX = "gpuhealth:"
MAX_LINE = 200
FAIL_ON_VARIABLE = "GPUHEALTH_FAIL_ON"
INTERNAL_ERROR = "GH001"  # checks.engine.INTERNAL_ERROR (not imported: the engine brings every check with it)
COULD_NOT_JUDGE = 3  # gpuhealth's own failure: logged, never drained on
_CONTROL = lazy_re(r"[\x00-\x1f\x7f]")


def draining_impacts(value: str | None = None) -> tuple[str, ...]:
    """The impacts that take the node out of service: node_unusable and gpu_unusable, and degraded when
    ``GPUHEALTH_FAIL_ON`` is ``degraded`` (or ``warning``, its former name). Unset or ``critical`` (the
    default's former name) means the default; another value is an error naming the variable (exit 3):
    ``warnings``, a typo, silently meant the default (gpuhealth.envvars)."""
    from gpuhealth.envvars import choice

    chosen = choice(FAIL_ON_VARIABLE, None if value is None else {FAIL_ON_VARIABLE: value})
    return (*DRAINING_IMPACTS, "degraded") if chosen in ("degraded", "warning") else DRAINING_IMPACTS


def problems(report: Report, impacts: tuple[str, ...] | None = None) -> list[Finding]:
    """The findings that fail the node, root causes first (symptoms folded under them are left out)."""
    impacts = impacts or draining_impacts()
    failing = [f for f in report.findings if f.impact in impacts]
    if not failing:
        return []
    leads = [c.finding for c in fold(report.findings) if c.finding.impact in impacts]
    return leads or failing


def could_not_judge(report: Report) -> str | None:
    """Why gpuhealth could not judge this node, or None when it could."""
    internal = [f for f in report.findings if f.code == INTERNAL_ERROR]
    if internal:
        return f"gpuhealth failed in a check: {one_line(internal[0].message)}"
    if report.checks_run == 0:
        return "no check ran"
    if not report.findings and report.checks_run <= len({s.code for s in report.skipped}):
        reason = f": {one_line(report.skipped[0].reason)}" if report.skipped else ""
        return f"all {report.checks_run} checks skipped{reason}"
    return None


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
    return (f"{finding.code} {finding.slug}{subject} impact={finding.impact} action={finding.action}: "
            f"{one_line(finding.message)}")


def render(report: Report, impacts: tuple[str, ...] | None = None, limit: int = MAX_LINE) -> str:
    found = problems(report, impacts)
    if not found:
        unknown = could_not_judge(report)
        return shorten(f"{PREFIX} could not judge: {unknown}", limit) + "\n" if unknown else ""
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return shorten(f"{PREFIX} {headline(found[0])}", limit - len(more)) + more + "\n"


def exit_code(report: Report, impacts: tuple[str, ...] | None = None) -> int:
    """2 when the node or a GPU is unusable, 1 when only ``degraded`` findings drain (``GPUHEALTH_FAIL_ON``), 3 when
    nothing drains but gpuhealth could not judge, else 0 (the node stays in service)."""
    found = problems(report, impacts)
    if found:
        return 2 if any(f.impact in DRAINING_IMPACTS for f in found) else 1
    return COULD_NOT_JUDGE if could_not_judge(report) else 0
