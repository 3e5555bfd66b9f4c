"""``--format junit``: JUnit XML for CI pipelines that validate a node image.

One ``<testcase>`` per check that ran and passed, one per finding (with its ``impact`` and ``action`` as
``<properties>`` and in the body; ``<failure>`` for critical and warning, ``<error>`` for gpuhealth's own
internal errors, a pass with ``<system-out>`` for info), and one ``<skipped>`` per skipped check: a skipped
check is never counted as passed. The exit code is the report's (0 healthy or info only, 1 warnings, 2 critical).

``passed_checks`` also serves the other fleet formats: a check passed when it is registered, ran
(the report ran every registered check), was not skipped, and produced no finding.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpuhealth import __version__
from gpuhealth.checks import catalogue
from gpuhealth.checks.engine import INTERNAL_ERROR
from gpuhealth.checks.registry import AREAS, REGISTRY, CheckSpec
from gpuhealth.inert import visible
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Finding, Report, Severity
from gpuhealth.report.common import fixes_for_host, fold

# Characters XML 1.0 cannot hold at all (kernel logs carry escape codes and NULs).
_NOT_XML = lazy_re("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
NAME_MESSAGE_CHARS = 100


def crashed_checks(report: Report) -> set[str]:
    """Codes of checks that raised inside gpuhealth (reported as GH001 findings)."""
    return {f.labels["check"] for f in report.findings if f.code == INTERNAL_ERROR and "check" in f.labels}


def passed_checks(report: Report) -> tuple[CheckSpec, ...]:
    """The checks that ran and passed: registered, not skipped, no finding, did not crash.

    Which checks ran is only known when the report ran all of them (``checks_run`` equals the
    registry's size); for a report of a selection this returns nothing rather than guess.
    """
    catalogue.load()
    if report.checks_run != len(REGISTRY):
        return ()
    judged = {f.code for f in report.findings} | {s.code for s in report.skipped} | crashed_checks(report)
    return tuple(spec for code, spec in sorted(REGISTRY.items()) if code not in judged)


def area_of(code: str) -> str:
    """``gpuhealth.<area>`` with the area as an identifier: ``gpuhealth.kernel_log``."""
    area = AREAS.get(code[:3], "other")
    return "gpuhealth." + re.sub(r"[^a-z0-9]+", "_", area.lower()).strip("_")


def xml_text(text: str) -> str:
    """Text XML can carry: characters XML 1.0 forbids become ``\\xNN``, and so do the C1 controls it allows (an
    8-bit CSI, U+009B, acts on a terminal that shows the report): ``inert.visible`` first."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m[0]):02x}", visible(text))


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _finding_name(finding: Finding) -> str:
    subject = "" if finding.subject.is_host else f" [{finding.subject}]"
    return f"{finding.code} {finding.slug}{subject}: {_one_line(finding.message, NAME_MESSAGE_CHARS)}"


def _finding_body(finding: Finding, report: Report, explained_by: Finding | None) -> str:
    lines = [f"{finding.severity.value.upper()} {finding.code} {finding.slug} [{finding.subject}]",
             f"impact: {finding.impact}; action: {finding.action}", finding.message]
    if explained_by is not None:
        lines.append(f"explained by {explained_by.code} {explained_by.slug}: {explained_by.message}")
    for evidence in finding.evidence:
        lines += [f"evidence: {evidence.source}", *(f"  {line}" for line in evidence.lines)]
    for fix in fixes_for_host(finding, report.snapshot):
        family = f"[{fix.family}] " if fix.family != "any" else ""
        disruptive = " (disruptive)" if fix.disruptive else ""
        note = f"  # {fix.note}" if fix.note else ""
        lines.append(f"fix{disruptive}: {family}{fix.command}{note}")
    lines.append(f"more: gpuhealth explain {finding.code}")
    return "\n".join(lines)


def _case(parent: ET.Element, code: str, name: str) -> ET.Element:
    return ET.SubElement(parent, "testcase", classname=xml_text(area_of(code)), name=xml_text(name), time="0")


def document(report: Report) -> ET.Element:
    """The ``<testsuites>`` tree (one ``<testsuite name="gpuhealth">``)."""
    explained_by = {id(s): c.finding for c in fold(report.findings) for s in c.symptoms}
    passed = {spec.code: spec for spec in passed_checks(report)}
    codes = sorted(set(passed) | {f.code for f in report.findings} | {s.code for s in report.skipped})

    suite = ET.Element("testsuite", name="gpuhealth")
    if report.snapshot.hostname:
        suite.set("hostname", xml_text(report.snapshot.hostname))
    properties = ET.SubElement(suite, "properties")
    for key, value in (("verdict", report.verdict), ("exit_code", str(report.exit_code)),
                       ("checks_run", str(report.checks_run)), ("tool_version", __version__),
                       ("origin", report.snapshot.origin), ("captured_at", report.snapshot.captured_at or "")):
        ET.SubElement(properties, "property", name=key, value=xml_text(value))

    failures = errors = 0
    for code in codes:
        if code in passed:
            _case(suite, code, f"{code} {passed[code].slug}")
        for finding in (f for f in report.findings if f.code == code):
            case = _case(suite, code, _finding_name(finding))
            # what to do and what it does to the node, as properties a program reads (pytest's testcase form)
            facts = ET.SubElement(case, "properties")
            for key in ("impact", "action"):
                ET.SubElement(facts, "property", name=key, value=getattr(finding, key))
            body = xml_text(_finding_body(finding, report, explained_by.get(id(finding))))
            if finding.severity is Severity.INFO:
                ET.SubElement(case, "system-out").text = body
                continue
            internal = finding.code == INTERNAL_ERROR
            outcome = ET.SubElement(case, "error" if internal else "failure",
                                    message=xml_text(_one_line(finding.message, 500)),
                                    type="internal-error" if internal else finding.severity.value)
            outcome.text = body
            errors += internal
            failures += not internal
        for skipped in (s for s in report.skipped if s.code == code):
            case = _case(suite, code, f"{code} {skipped.slug}")
            ET.SubElement(case, "skipped", message=xml_text(skipped.reason))

    counts = {"tests": str(len(suite.findall("testcase"))), "failures": str(failures), "errors": str(errors),
              "skipped": str(len(report.skipped)), "time": "0"}
    for key, value in counts.items():
        suite.set(key, value)
    root = ET.Element("testsuites", name="gpuhealth", **counts)
    root.append(suite)
    return root


def render(report: Report) -> str:
    root = document(report)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def exit_code(report: Report) -> int:
    """The report's own exit code: a CI job fails on warnings (1) and critical findings (2)."""
    return report.exit_code
