"""The check engine and registry: codes, docs, skips, internal errors, and the docs/checks/ pages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuhealth.checks import catalogue, docgen
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import DOC_SECTIONS, REGISTRY, Draft, Expectations, check
from gpuhealth.model import Severity, Snapshot

REPO = Path(__file__).resolve().parent.parent
catalogue.load()


def test_every_check_has_a_unique_code_slug_and_all_doc_sections():
    assert len({s.slug for s in REGISTRY.values()}) == len(REGISTRY)
    for spec in REGISTRY.values():
        assert all(spec.docs[s].strip() for s in DOC_SECTIONS), spec.code


def test_docs_checks_are_up_to_date():
    directory = REPO / "docs" / "checks"
    for name, text in docgen.pages().items():
        path = directory / name
        assert path.exists() and path.read_text() == text, f"docs/checks/{name} is stale: run `make docs`"
    listed = {p.name for p in directory.glob("GH*.md")}
    assert listed == {n for n in docgen.pages() if n.startswith("GH")}


def test_a_check_without_its_evidence_is_skipped_with_the_reason():
    snapshot = Snapshot(unavailable={"kernel_log": "kernel log not readable: run as root"})
    report = run_checks(snapshot, select=["GH301"])
    assert report.findings == ()
    assert report.skipped[0].reason == "kernel log not readable: run as root"
    assert report.verdict == "HEALTHY" and report.exit_code == 0


def test_evidence_only_a_paste_carries_is_skipped_with_words_a_user_understands():
    """A live host has no pasted lines: the skip says where such evidence comes from, not "no messages evidence"."""
    needs_messages = [code for code, spec in REGISTRY.items() if "messages" in spec.requires]
    assert needs_messages
    reasons = {skip.reason for skip in run_checks(Snapshot(), select=needs_messages).skipped}
    assert reasons and all("gpuhealth analyze" in reason for reason in reasons), reasons


def test_a_check_that_raises_becomes_a_finding_and_others_still_run():
    @check("GH099", "test-explodes", "test only")
    def explodes(snapshot, expect):
        """
        What:
        x
        Why it matters:
        x
        How to fix:
        x
        Exceptions:
        x
        """
        raise RuntimeError("boom")

    try:
        report = run_checks(Snapshot(env={}), select=["GH099", "GH002"])
    finally:
        del REGISTRY["GH099"]
    assert [f.code for f in report.findings] == ["GH001"]
    assert "boom" in report.findings[0].message
    assert report.checks_run == 2


def test_registering_a_code_twice_or_without_docs_fails():
    with pytest.raises(ValueError, match="twice"):
        check("GH101", "another-slug", "x")(lambda s, e: ())
    with pytest.raises(ValueError, match="lacks sections"):
        check("GH098", "undocumented", "x")(lambda s, e: ())


def test_exit_codes_follow_the_worst_severity():
    from gpuhealth.checks.engine import _stamp

    spec = REGISTRY["GH101"]  # any check but GH002/GH004, whose findings set the verdict themselves
    for severity, code in ((Severity.INFO, 0), (Severity.WARNING, 1), (Severity.CRITICAL, 2)):
        from gpuhealth.model import Report

        report = Report(Snapshot(), (_stamp(spec, Draft(severity, "m")),))
        assert report.exit_code == code


def test_imports_run_one_way():
    """model <- host/nvml <- collect <- checks <- report <- cli; the core never imports monitor/web,
    and only nvml.py imports pynvml."""
    layers = {"model": 0, "exits": 0, "parsers": 1, "knowledge": 1, "host": 1, "nvml": 1, "bundle": 2, "evidence": 2,
              "evidence_input": 2, "collect": 3, "active": 3, "analyze": 3, "checks": 4, "report": 5,
              "drift": 5,
              "recommend": 5, "fixscript": 5, "fixsections": 1, "lazyre": 0,
              "advice_commands": 6, "monitor": 6, "web": 6, "config": 6, "config_command": 7,
              "cli": 7, "__main__": 8}
    src = REPO / "src" / "gpuhealth"
    for path in src.rglob("*.py"):
        module = path.relative_to(src).parts[0].removesuffix(".py")
        if module in ("__init__",):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] == "pynvml":
                    assert path.name == "nvml.py", f"{path} imports pynvml"
                if not name.startswith("gpuhealth."):
                    continue
                target = name.split(".")[1]
                # the command line is the top layer; config is the one configuration of every command ([check],
                # [monitor], [serve]...), so it sits beside monitor and web, and only they and the command line read it
                if module not in ("cli", "monitor", "web", "config", "config_command"):
                    assert target not in ("monitor", "web"), f"{path} imports {name}"
                if module in layers and target in layers:
                    assert layers[target] <= layers[module], f"{path} ({module}) imports {name} ({target})"


def test_one_cannot_run_class():
    """Exit 3 ("gpuhealth could not run") has one exception class, gpuhealth.exits.CannotRun: cli, the advice
    commands, monitor, serve and fleet each defined their own (CannotRun twice, MonitorCannotRun, ServeCannotRun,
    FleetError), so a caller could not catch "could not run" as one thing."""
    defined = []
    for path in (REPO / "src" / "gpuhealth").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("ClickException") for b in node.bases):
                defined.append(f"{path.name}:{node.name}")
    assert defined == ["exits.py:CannotRun"]
    from gpuhealth.exits import EXIT_CANNOT_RUN, CannotRun
    assert CannotRun("x").exit_code == EXIT_CANNOT_RUN == 3


def test_expectations_gpu_count():
    from gpuhealth.model import PciDevice

    snapshot = Snapshot(pci_devices=(PciDevice("0000:01:00.0", "10de", "2330", "0302"),))
    report = run_checks(snapshot, Expectations(gpu_count=8), select=["GH103"])
    assert report.findings[0].severity is Severity.CRITICAL
    assert "1 NVIDIA GPU(s) on the PCI bus, 8 expected" in report.findings[0].message
    assert run_checks(snapshot, Expectations(gpu_count=1), select=["GH103"]).findings == ()
