"""Run registered checks over a snapshot. A check that raises becomes a finding; the rest still run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuhealth.checks import catalogue
from gpuhealth.checks.diagnosis import TOLD, diagnose
from gpuhealth.checks.registry import REGISTRY, CheckSpec, Draft, Expectations, Skip
from gpuhealth.knowledge.actions import of_check
from gpuhealth.model import DRAINING_IMPACTS, REPORTED_WORDS, Evidence, Finding, Report, Severity, Skipped, Snapshot

INTERNAL_ERROR = "GH001"


def run_checks(snapshot: Snapshot, expectations: Expectations | None = None,
               select: Iterable[str] | None = None) -> Report:
    catalogue.load()
    expectations = expectations or Expectations()
    chosen = [s for s in REGISTRY.values() if select is None or s.code in set(select)]
    findings, skipped = _run(snapshot, chosen, expectations)
    if snapshot.has_reported:  # facts or lines from a person's words: what rests on them stays below critical
        findings = _on_reported(snapshot, findings, _run(snapshot.machine_only(), chosen, expectations)[0])
    findings.sort(key=lambda f: (-f.severity.rank, f.code, str(f.subject)))
    # catalogue lines become findings; each symptom is folded under its confirmed cause or gets a differential
    findings = diagnose(findings, skipped, {s.code for s in chosen}, snapshot)
    return Report(snapshot, tuple(_words_never_drain(findings)), tuple(skipped), len(chosen))


def _words_never_drain(findings: list[Finding]) -> list[Finding]:
    """A finding that rests on a person's words and stays below critical (nothing the machine printed made it
    critical) does not drain: its impact is at most ``degraded``. Its check's row speaks of the fault seen; here
    nobody saw the machine show it. A told cause made critical by a program's own critical line keeps its impact."""
    return [replace(f, impact="degraded") if f.labels.get("reported") == "words" and f.severity is not Severity.CRITICAL
            and f.impact in DRAINING_IMPACTS else f for f in findings]


def _run(snapshot: Snapshot, chosen: list[CheckSpec],
         expectations: Expectations) -> tuple[list[Finding], list[Skipped]]:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for spec in sorted(chosen, key=lambda s: s.code):
        missing = [reason for name in spec.requires if (reason := _missing(snapshot, name, spec.code))]
        if missing:
            skipped.append(Skipped(spec.code, spec.slug, "; ".join(missing)))
            continue
        try:
            results = list(spec.function(snapshot, expectations))
        except Exception as exc:  # a bug in one check must not hide the others
            findings.append(_internal_error(spec, exc))
            continue
        for result in results:
            if isinstance(result, Skip):
                skipped.append(Skipped(spec.code, spec.slug, result.reason))
            else:
                findings.append(_stamp(spec, result))
    return findings, skipped


def _on_reported(snapshot: Snapshot, findings: list[Finding], machine: list[Finding]) -> list[Finding]:
    """Findings the programs' output alone does not raise (or raises lower) rest on the reporter's words: nobody saw
    the machine say it, so such a finding is at most a warning, and its evidence quotes the words."""
    seen: dict[tuple[str, str], int] = {}  # the highest each code raised per subject (a check may raise several)
    for f in machine:
        key = (f.code, str(f.subject))
        seen[key] = max(seen.get(key, -1), f.severity.rank)
    words = tuple(dict.fromkeys(fact.words for fact in snapshot.reported))[:4]
    out = []
    for finding in findings:
        if seen.get((finding.code, str(finding.subject)), -1) >= finding.severity.rank:
            out.append(finding)
            continue
        severity = Severity.WARNING if finding.severity is Severity.CRITICAL else finding.severity
        # the check quoted the words itself (or shows the lines of a person's words it read): no second quote
        shown = {line for e in finding.evidence for line in e.lines}
        quoted = not words or any(e.source == REPORTED_WORDS for e in finding.evidence) or set(words) <= shown
        evidence = _told_sources(snapshot, finding.evidence if quoted else (*finding.evidence,
                                                                             Evidence(REPORTED_WORDS, words)))
        out.append(replace(finding, severity=severity, evidence=evidence,
                           labels={**finding.labels, "reported": "words"},
                           **(_actions(finding.code, severity) if severity is not finding.severity else {})))
    return out


def _told_sources(snapshot: Snapshot, evidence: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """Evidence showing a line of a person's words says so in its source ("notes.txt (the reporter's words)")."""
    told = {m.line for m in snapshot.messages or () if m.reported}
    return tuple(replace(e, source=e.source + TOLD) if not e.source.endswith(TOLD) and e.source != REPORTED_WORDS
                 and any(line.strip() in told for line in e.lines) else e for e in evidence)


# The checks that judge Xids a person named in words (a kernel log of format REPORTED): for every other check that
# needs a kernel log there is none, so it is skipped, never passed.
READS_REPORTED_XIDS = frozenset({"GH301", "GH302", "GH307"})


def _missing(snapshot: Snapshot, name: str, code: str = "") -> str | None:
    """Why the evidence ``name`` is missing, or None when it is there.

    ``gpus`` is derived (NVML's view, else nvidia-smi's), so it is missing when empty and the reason is
    why neither tool answered; every other name is a snapshot field, missing when None.
    """
    if name == "kernel_log" and snapshot.kernel_log is not None and snapshot.kernel_log.reported \
            and code not in READS_REPORTED_XIDS:
        return "no kernel log: only Xids named in words (reported, not logged)"
    if name == "gpus":
        if snapshot.gpus:
            return None
        return (snapshot.unavailable.get("smi") or snapshot.unavailable.get("nvml")
                or "no GPU data: neither nvidia-smi nor NVML reported a GPU")
    if getattr(snapshot, name, None) is not None:
        return None
    return snapshot.unavailable.get(name) or _DEFAULT_REASONS.get(name, f"no {name.replace('_', ' ')} evidence")


# Evidence that only a user's paste carries: said so, rather than "no messages evidence".
_DEFAULT_REASONS = {
    "messages": "only with pasted error lines or a terminal session (gpuhealth analyze FILE)",
    "commands_given": "only with a pasted terminal session (gpuhealth analyze FILE)",
}


def _stamp(spec: CheckSpec, draft: Draft) -> Finding:
    action, impact = of_check(spec.code, draft.severity.value)
    return Finding(
        code=spec.code, slug=spec.slug, severity=draft.severity, message=draft.message,
        subject=draft.subject, evidence=draft.evidence, explanation=spec.explanation,
        fixes=draft.fixes, explains=draft.explains, differential=draft.differential, labels=draft.labels,
        last_seen=draft.last_seen, action=draft.action or action, impact=draft.impact or impact,
    )


def _internal_error(spec: CheckSpec, exc: Exception) -> Finding:
    import traceback

    internal = REGISTRY[INTERNAL_ERROR]
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return Finding(
        code=internal.code, slug=internal.slug, severity=Severity.WARNING,
        message=f"check {spec.code} ({spec.slug}) failed: {type(exc).__name__}: {exc}",
        evidence=(Evidence("gpuhealth", tuple(line.rstrip() for line in frames[-3:])),),
        explanation=internal.explanation, labels={"check": spec.code}, **_actions(INTERNAL_ERROR, Severity.WARNING),
    )


def _actions(code: str, severity: Severity) -> dict[str, str]:
    """``action=`` and ``impact=`` of a finding from its check's row (knowledge/actions.csv)."""
    action, impact = of_check(code, severity.value)
    return {"action": action, "impact": impact}
