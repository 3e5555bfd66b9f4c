"""Decided is decided (issue 22): a decisive fact closes the differential, a root cause folds every symptom it explains
whatever order the checks ran in, and "paste these next" asks only for read-only commands that would change the answer.

Evidence: real pastes of tests/cases (pytorch/pytorch#49325's collect_env with 1.7.1+cpu; NVIDIA/nvidia-docker#365's
session, no nvidia module for the running kernel; a Secure Boot journal), the real collect_env of pytorch/pytorch#84365
(tests/data/corpus/pytorch-collect-env: 1.12.1+cu113, CUDA not available) and gpud's real lspci of an A10 host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth.checks.diagnosis import diagnose, next_commands, read_only, split_commands
from gpuhealth.cli import main
from gpuhealth.knowledge.causes import symptoms
from gpuhealth.model import Finding, Severity, Skipped, Snapshot
from gpuhealth.report.common import fold

TESTS = Path(__file__).resolve().parent
CASES = TESTS / "cases" / "dev"
PLUS_CPU = CASES / "cpu-only-pytorch-plus-cpu-49325" / "collect_env.txt"
MODULE_NOT_BUILT = CASES / "module-not-built-runfile-kernel-upgrade" / "session.txt"
TORCH_NO_CUDA = TESTS / "data" / "corpus" / "pytorch-collect-env" / "pytorch-issue-84365_could-not-collect.txt"
LSPCI_A10 = TESTS / "data" / "corpus" / "gpud" / "nvidia-query__lspci.nn.a10"
SECURE_BOOT = CASES / "secure-boot-key-rejected-gdm-journal" / "journal.log"


def analyze_json(*paths: Path) -> dict:
    result = CliRunner().invoke(main, ["analyze", "--format", "json", *map(str, paths)])
    return json.loads(result.stdout)


def finding(document: dict, code: str) -> dict:
    return next(f for f in document["findings"] if f["code"] == code)


def test_a_plus_cpu_version_confirms_the_cpu_build_and_closes_the_differential():
    document = analyze_json(PLUS_CPU)
    gh605 = finding(document, "GH605")
    assert gh605["labels"] == {"decided": "torch-cpu-build"}
    top = gh605["differential"][0]
    assert (top["cause"], top["status"]) == ("torch-cpu-build", "confirmed")  # was "open"
    assert "PyTorch version: 1.7.1+cpu" in top["why"]
    assert not any(c["status"] == "open" for c in gh605["differential"])
    assert document["root_causes"][0]["key"] == "GH605@host"
    assert document["next_commands"] == []  # it asked for four commands, sudo modprobe nvidia among them
    assert [f["command"] for f in gh605["fixes"]][0].startswith("pip install --force-reinstall torch")
    text = CliRunner().invoke(main, ["analyze", str(PLUS_CPU)]).stdout
    assert "cause: the installed PyTorch is a CPU-only build" in text and "Paste these next" not in text


@pytest.mark.parametrize("order", [(MODULE_NOT_BUILT, TORCH_NO_CUDA, LSPCI_A10), (TORCH_NO_CUDA, LSPCI_A10,
                                                                                   MODULE_NOT_BUILT)])
def test_the_framework_symptom_folds_under_the_module_not_built(order):
    """No nvidia module for the running kernel (GH507) and PyTorch that cannot use the GPU (GH605): GH507 explains
    the module not loaded, a cause of GH605, so GH605 is its symptom, not a second root."""
    document = analyze_json(*order)
    codes = {f["code"] for f in document["findings"]}
    assert {"GH507", "GH605"} <= codes
    assert document["root_causes"] == [{"key": "GH507@host", "explains": ["GH203@host", "GH605@host"]}]
    assert "GH605" in finding(document, "GH507")["explains"]
    assert all(read_only(c) for c in document["next_commands"])


def _finding(code: str, severity: Severity, explains: tuple[str, ...] = ()) -> Finding:
    return Finding(code, code.lower(), severity, f"{code} message", explains=explains,
                   action="fix_host_software", impact="node_unusable")


@pytest.mark.parametrize("reverse", [False, True])
def test_a_root_folds_what_it_explains_whatever_the_order(reverse):
    gh507 = _finding("GH507", Severity.CRITICAL, ("GH201", "GH203"))
    gh605 = _finding("GH605", Severity.CRITICAL)
    findings = [gh605, gh507] if reverse else [gh507, gh605]
    out = diagnose(findings, [Skipped("GH201", "module-not-loaded", "needs lsmod")], {"GH507", "GH605"},
                   Snapshot(origin="evidence"))
    (root,) = fold(tuple(out))
    assert root.finding.code == "GH507" and [s.code for s in root.symptoms] == ["GH605"]


def test_a_refused_signature_leads_and_asks_nothing_more():
    document = analyze_json(SECURE_BOOT)
    assert document["root_causes"][0]["key"] == "GH506@host"
    assert document["next_commands"] == []


def test_the_commands_that_decide_only_read():
    """Every deciding command of the cause table only reads (`sudo modprobe nvidia` was one: it changes the host)."""
    for symptom in symptoms().values():
        for cause in symptom.causes:
            for command in split_commands(cause.decide):
                assert read_only(command), f"{cause.id}: {command}"
    for command in ("sudo modprobe nvidia", "sudo nvidia-modprobe -u -c=0", "sudo dkms autoinstall",
                    "sudo systemctl restart nvidia-persistenced", "sudo nvidia-smi -r -i 0", "sudo reboot",
                    "pip install torch", "echo 1 > /sys/bus/pci/rescan", "sudo ldconfig"):
        assert not read_only(command), command
    for command in ("lsmod | grep nvidia", "modinfo -F signer nvidia", "dkms status", "ldconfig -p | grep cuda",
                    "systemctl status nvidia-fabricmanager", "nvidia-smi -q | grep -A2 Fabric"):
        assert read_only(command), command


def test_next_commands_leave_out_what_changes_the_host():
    from gpuhealth.model import Candidate

    candidate = Candidate("driver-not-loaded", "t", "GH201", "open", "why", "lsmod | grep nvidia; sudo modprobe nvidia")
    found = _finding("GH605", Severity.CRITICAL)
    from dataclasses import replace

    assert next_commands([replace(found, differential=(candidate,))]) == ["lsmod | grep nvidia"]
