"""The text report (issue 12): reading order, commands never wrapped, steps apart from commands, no
internal codes, one screen without a GPU; and root-cause folding on the real test hosts."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.model import Fix, Report, Severity
from gpuhealth.report import text
from gpuhealth.report.common import fixes_for_host, fold
from hostcases import FakeHost, case_names, load_spec

SRC = Path(__file__).parent.parent / "src" / "gpuhealth"
INTERNAL = re.compile(r"WORKFLOW_|RESTART_APP|RESET_GPU|RESTART_BM|CONTACT_SUPPORT|CHECK_MECHANICALS|"
                      r"\bFACTS\b|facts\.md|\bDCDRV\b|\bCUDARN\b|\bXIDCAT\b|\bSGJ\b|\bOGKM\b")


def report_for(name: str, spec: dict | None = None) -> Report:
    return run_checks(collect(FakeHost(spec or load_spec(name)), origin="bundle"))


def rendered(report: Report, width: int = 80, verbose: bool = False) -> str:
    """What a pipe receives: rich picks 80 columns when stdout is not a terminal."""
    buffer = io.StringIO()
    text.render(report, Console(file=buffer, width=width, highlight=False, color_system=None), verbose=verbose)
    return buffer.getvalue()


# --------------------------------------------------------------------------- layout


def test_order_verdict_findings_host_skipped_closing():
    output = rendered(report_for("h100x8-xid-ecc"))
    lines = output.rstrip("\n").splitlines()
    assert lines[0].strip().startswith("BROKEN (")
    first_finding = next(i for i, line in enumerate(lines) if re.match(r"(CRITICAL|WARNING |INFO    ) GH", line))
    host = next(i for i, line in enumerate(lines) if " · " in line and "GPUs" in line)
    skipped = next(i for i, line in enumerate(lines) if line.startswith("Skipped "))
    assert 0 < first_finding < host < skipped < len(lines) - 1 and "by reason" in lines[skipped]
    assert re.fullmatch(r"\d+ critical(, \d+ warning)?(, \d+ info)? on 8 GPUs; run `gpuhealth fix` for a script",
                        lines[-1])
    # a GPU has a finding, so the GPU table follows the host line
    assert lines[host + 1].split()[:2] == ["GPU", "Name"]
    # skipped checks: one line per reason, each with its count
    for line in lines[skipped + 1:len(lines) - 2]:  # a reason too long for the line continues under its text
        assert re.match(r"  +\d+ ", line) or line.startswith("     ") and line.strip(), line


def test_healthy_host_has_no_gpu_table_unless_verbose():
    report = report_for("h100x8-healthy")
    quiet, verbose = rendered(report), rendered(report, verbose=True)
    assert "PCI address" not in quiet and "PCI address" in verbose
    assert quiet.rstrip().splitlines()[-1].startswith("no problems found on 8 GPUs")
    assert len(verbose.splitlines()) > len(quiet.splitlines())


def test_no_gpu_output_fits_one_screen():
    output = rendered(report_for("no-gpu"))
    assert len(output.rstrip("\n").splitlines()) <= 25, output
    assert "no NVIDIA GPU" in output


def test_no_gpu_check_command_fits_one_screen(tmp_path):
    """`gpuhealth check` (what `make run` runs) on a recorded no-GPU host, through the command line."""
    from gpuhealth.bundle import RecordingHost

    recorder = RecordingHost(FakeHost(load_spec("no-gpu")), tmp_path / "bundle")
    collect(recorder)
    recorder.finish()
    result = CliRunner().invoke(main, ["check", "--from", str(tmp_path / "bundle")])
    assert result.exit_code in (0, 1), result.output
    assert len(result.output.rstrip("\n").splitlines()) <= 25, result.output


@pytest.mark.parametrize("name", case_names())
def test_commands_are_never_wrapped_and_comments_sit_above(name):
    report = report_for(name)
    lines = rendered(report, width=40).splitlines()
    stripped = [line.strip() for line in lines]
    for cause in fold(report.findings):
        for fix in fixes_for_host(cause.finding, report.snapshot):
            one_line = " ".join(fix.command.split())
            if fix.is_command:  # the whole command on a line of its own, however narrow the terminal or pipe
                assert one_line in stripped, one_line
            else:
                assert not any(s == one_line for s in stripped), f"a step printed like a command: {one_line}"
    for i, line in enumerate(stripped):
        if line.startswith("#"):  # a comment (wrapped: a run of comment lines) sits right above its command
            after = next((s for s in stripped[i + 1:] if not s.startswith("#")), "")
            assert after and after not in ("fix:", "then:"), line
        assert not re.search(r"\S\s+# ", line) or line.startswith(("explains", "evidence")) or "'" in line, line


def test_prose_fixes_are_steps_and_shell_fixes_are_commands():
    assert Fix("reseat the GPU and check its riser or cable").kind == "step"
    assert Fix("restart the application; if it recurs, run it under compute-sanitizer").kind == "step"
    assert Fix("sudo nvidia-smi --gpu-reset -i <index>").kind == "step"  # a placeholder: not pasteable as is
    assert Fix("sudo modprobe nvidia").kind == "command"
    assert Fix("printf 'blacklist nouveau\\n' | sudo tee /etc/modprobe.d/x.conf").kind == "command"
    moved = Fix("export CC=gcc-12  # before a .run install")
    assert (moved.command, moved.note, moved.kind) == ("export CC=gcc-12", "before a .run install", "command")
    output = rendered(report_for("h100x8-topology-degraded"))
    assert "    step: reseat the GPU and check or replace its riser and cable (disruptive)" in output


@pytest.mark.parametrize("name", case_names())
def test_no_internal_codes_in_the_report(name):
    output = rendered(report_for(name), verbose=True)
    assert not INTERNAL.search(output), INTERNAL.search(output)


def test_xid_action_said_in_words():
    output = rendered(report_for("h100x8-xid-ecc"))
    assert "follow NVIDIA's Xid 48 workflow" in output and "WORKFLOW_XID_48" not in output


def test_no_fact_base_keys_in_the_sources():
    """Sources are named as documents with their addresses, never by the fact base's private keys."""
    for path in SRC.rglob("*"):
        if path.suffix in (".py", ".csv", ".md", ".toml") and path.name != "sources.py":
            found = re.search(r"\bFACTS\b|facts\.md|\bDCDRV\b", path.read_text(encoding="utf-8"))
            assert found is None, f"{path.relative_to(SRC)}: {found[0]}"


@pytest.mark.parametrize(("column", "words"), [
    ("not confirmed (common knowledge of Linux packaging)", "not confirmed (common knowledge of Linux packaging)"),
    ("Debian wiki (NvidiaGraphicsDrivers)", "Debian wiki (NvidiaGraphicsDrivers)"),
    ("FACTS 2.1 (Ubuntu wiki (Secure Boot))", "Ubuntu wiki (Secure Boot)"),
    ("FACTS 5 (Arch wiki); Debian (x)", "Arch wiki; Debian (x)"),
    ("FACTS 3.3 (DCDRV kernel-modules)", "NVIDIA, Driver Installation Guide: kernel modules "
     "<https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html>"),
])
def test_a_citation_renders_whole(column, words):
    """Only the parenthesis the fact-base reference opened goes; a title's own closing one stays."""
    from gpuhealth.knowledge.sources import cite
    assert cite(column) == words


# --------------------------------------------------------------------------- root causes lead


def leaders(report: Report) -> list[str]:
    return [c.finding.code for c in fold(report.findings)]


def test_nouveau_leads_and_drops_the_symptoms_fixes():
    report = report_for("nouveau-holds-gpu")
    causes = fold(report.findings)
    assert causes[0].finding.code == "GH206"
    assert "GH201" in {s.code for s in causes[0].symptoms}
    assert "GH201" not in leaders(report)
    output = rendered(report)
    assert "modprobe nvidia" not in output and "kernel-devel" not in output
    # GH206 and GH501 share their four fixes: printed once
    assert output.count("blacklist-nouveau.conf") == 1 and output.count("sudo dracut --force") == 1
    assert "fix: the commands listed above" in output


def test_secure_boot_refusal_leads_the_module_not_loaded():
    spec = load_spec("rocky-initramfs-stale-unsigned")
    spec["modules"] = [m for m in spec["modules"] if m != "nouveau"]  # the same host without nouveau
    for device in spec["pci"]:
        device["driver"] = None
    report = report_for("", spec)
    causes = fold(report.findings)
    assert causes[0].finding.code == "GH506", leaders(report)
    assert "GH201" in {s.code for s in causes[0].symptoms}


def test_missing_dkms_build_leads_the_module_not_loaded():
    report = report_for("debian-kernel-update-lost-driver")
    causes = fold(report.findings)
    assert causes[0].finding.code == "GH507" and "GH201" in {s.code for s in causes[0].symptoms}
    assert "GH201" not in leaders(report)


def test_driver_library_mismatch_leads():
    causes = fold(report_for("driver-library-mismatch").findings)
    assert causes[0].finding.code == "GH202" and {s.code for s in causes[0].symptoms} == {"GH203"}


def test_a_cause_leads_even_when_sorted_after_its_symptom():
    from gpuhealth.model import Finding

    symptom = Finding("GH201", "a", Severity.CRITICAL, "symptom", explains=("GH203",),
                      action="reboot", impact="node_unusable")
    detail = Finding("GH203", "b", Severity.CRITICAL, "detail", action="reboot", impact="node_unusable")
    cause = Finding("GH206", "c", Severity.WARNING, "cause", explains=("GH201",), action="none", impact="degraded")
    other = Finding("GH604", "d", Severity.WARNING, "other", action="none", impact="degraded")
    causes = fold((symptom, detail, other, cause))
    assert [c.finding.code for c in causes] == ["GH206", "GH604"]
    assert [s.code for s in causes[0].symptoms] == ["GH201", "GH203"]
    loop = fold((Finding("GH1", "x", Severity.INFO, "a", explains=("GH2",), action="none", impact="none"),
                 Finding("GH2", "y", Severity.WARNING, "b", explains=("GH1",), action="none", impact="degraded")))
    assert [c.finding.code for c in loop] == ["GH2"]  # a loop: the most severe leads, nothing is lost


def test_json_root_causes_follow_the_fold():
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input="")
    assert result.exit_code in (0, 1, 2, 3)
    report = report_for("nouveau-holds-gpu")
    from gpuhealth.report.json_report import document

    assert document(report)["root_causes"][0]["key"].startswith("GH206@")
    json.dumps(document(report))


def test_the_one_line_host_summary_leaves_the_json_host_labels_alone():
    from gpuhealth.report.json_report import document

    report = report_for("h100x8-healthy")
    assert document(report)["host"]["CUDA (driver max)"] == "12.2"
    assert "· CUDA 12.2 max · 8 GPUs" in rendered(report)
