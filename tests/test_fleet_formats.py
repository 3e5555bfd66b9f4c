"""The fleet formats of issue 4: nhc (Slurm/NHC), npd (node-problem-detector), prometheus (node_exporter
textfile collector) and junit (CI), their exit codes, and the deploy files that use them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO
from gpuhealth.bundle import RecordingHost
from gpuhealth.checks import catalogue
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.exits import CannotRun
from gpuhealth.model import Evidence, Finding, Report, Severity, Skipped, Snapshot, Subject
from gpuhealth.report import junit, nhc, npd, prometheus_text
from gpuhealth.report.formats import FORMATS, render
from hostcases import FakeHost, load_spec

CASES = ("h100x8-healthy", "h100x8-xid-ecc", "no-gpu", "driver-library-mismatch")
WRAPPER = REPO / "deploy" / "slurm" / "gpuhealth-nhc.sh"


@cache
def report_of(case: str) -> Report:
    return run_checks(collect(FakeHost(load_spec(case))))


def all_checks_run(findings=(), skipped=()) -> Report:
    catalogue.load()
    return Report(Snapshot(hostname="n1"), tuple(findings), tuple(skipped), len(REGISTRY))


NASTY = 'bad "quote" and \\backslash\nsecond line\x1b[0m'
NASTY_FINDING = Finding("GH306", "nvrm-errors", Severity.CRITICAL, NASTY, Subject(3, "0000:3b:00.0"),
                        evidence=(Evidence("dmesg", ("NVRM: <&> \x00 odd",)),), action="reboot", impact="node_unusable")


@pytest.fixture(autouse=True)
def _default_threshold(monkeypatch):
    monkeypatch.delenv(nhc.FAIL_ON_VARIABLE, raising=False)


def test_formats_are_registered():
    assert {FORMATS[n] for n in ("nhc", "npd", "prometheus", "junit")} == {
        "nhc", "npd", "prometheus_text", "junit"}


# --------------------------------------------------------------------------- which checks passed

def test_passed_checks_are_registered_unskipped_and_silent():
    report = report_of("h100x8-xid-ecc")
    passed = {s.code for s in junit.passed_checks(report)}
    assert "GH301" not in passed and not passed & {s.code for s in report.skipped}
    assert len(passed) + len({f.code for f in report.findings} | {s.code for s in report.skipped}) == len(REGISTRY)


def test_a_check_that_crashed_did_not_pass_and_a_selection_claims_nothing():
    crash = Finding("GH001", "internal-error", Severity.WARNING, "check GH302 (gpu-fallen-off-bus) failed: KeyError",
                    labels={"check": "GH302"},
                        action="contact_support", impact="none")  # as the engine makes it (checks/engine.py)
    assert "GH302" not in {s.code for s in junit.passed_checks(all_checks_run([crash]))}
    assert junit.passed_checks(Report(Snapshot(), checks_run=1)) == ()


# --------------------------------------------------------------------------- nhc

def test_nhc_healthy_prints_nothing_and_exits_0():
    assert render("nhc", report_of("h100x8-healthy")) == ("", 0)


@pytest.mark.parametrize("case", ["h100x8-xid-ecc", "driver-library-mismatch"])
def test_nhc_broken_prints_one_prefixed_line_and_fails(case):
    output, code = render("nhc", report_of(case))
    assert code == 2
    assert output.endswith("\n") and output.count("\n") == 1
    assert output.startswith("gpuhealth: ") and len(output.rstrip("\n")) <= nhc.MAX_LINE


def test_nhc_reason_names_the_root_cause_not_its_symptoms():
    output, _ = render("nhc", report_of("driver-library-mismatch"))
    assert output.startswith("gpuhealth: GH202 driver-library-mismatch impact=node_unusable action=reboot: "
                             "Driver/library version mismatch")
    assert "more" not in output  # GH203 is folded under GH202
    assert ("[GPU 0 0000:19:00.0] impact=gpu_unusable action=drain_then_reset: Xid 48"
            in render("nhc", report_of("h100x8-xid-ecc"))[0])


def test_nhc_degraded_does_not_drain_unless_configured(monkeypatch):
    # no GPU on a machine with nothing saying it should have one: impact none, never drains
    assert render("nhc", report_of("no-gpu")) == ("", 0)
    degraded = Finding("GH406", "thermal-slowdown", Severity.WARNING, "hot", Subject(0, "0000:19:00.0"),
                       action="hardware_inspection", impact="degraded")
    assert render("nhc", all_checks_run([degraded])) == ("", 0)
    for setting in ("degraded", "warning"):  # "warning": the setting's former name
        monkeypatch.setenv("GPUHEALTH_FAIL_ON", setting)
        output, code = render("nhc", all_checks_run([degraded]))
        assert code == 1 and output.startswith("gpuhealth: GH406 thermal-slowdown [GPU 0 0000:19:00.0] impact=degraded")
        assert render("nhc", report_of("no-gpu")) == ("", 0)
    monkeypatch.setenv("GPUHEALTH_FAIL_ON", "nonsense")  # an error naming the variable, not a silent default
    with pytest.raises(CannotRun, match="GPUHEALTH_FAIL_ON='nonsense'"):
        render("nhc", all_checks_run([degraded]))


def test_nhc_drains_on_impact_not_severity():
    """A critical finding about a user's environment (a CPU-only PyTorch) is reported, never drained on; a finding
    that makes a GPU unusable drains, and gpuhealth's own failure is exit 3, not a pass."""
    cpu_only = Finding("GH605", "torch-cannot-use-gpu", Severity.CRITICAL, "PyTorch is a CPU-only build",
                       action="fix_user_environment", impact="user_environment")
    assert render("nhc", all_checks_run([cpu_only])) == ("", 0)
    assert npd.exit_code(all_checks_run([cpu_only])) == npd.OK
    crash = Finding("GH001", "internal-error", Severity.WARNING, "check GH302 (gpu-fallen-off-bus) failed: boom",
                    action="contact_support", impact="none")
    output, code = render("nhc", all_checks_run([cpu_only, crash]))
    assert code == 3 and output.startswith("gpuhealth: could not judge: gpuhealth failed in a check")
    output, code = render("nhc", all_checks_run([cpu_only, crash, NASTY_FINDING]))
    assert code == 2 and output.startswith("gpuhealth: GH306 nvrm-errors [GPU 3 0000:3b:00.0] impact=node_unusable")


def test_nhc_line_is_one_line_without_control_characters_and_counts_the_rest():
    other = Finding("GH202", "driver-library-mismatch", Severity.CRITICAL, "mismatch",
                    action="reboot", impact="node_unusable")
    output = nhc.render(all_checks_run([NASTY_FINDING, other]))
    assert output.count("\n") == 1 and "\x1b" not in output
    assert output.rstrip("\n").endswith("(+1 more)")
    long = Finding("GH306", "nvrm-errors", Severity.CRITICAL, "x" * 1000, action="reboot", impact="node_unusable")
    assert len(nhc.render(all_checks_run([long, other])).rstrip("\n")) == nhc.MAX_LINE


def test_a_long_drain_reason_ends_at_a_clause_not_inside_a_word():
    # Slurm shows this line as the drained node's reason: "... a GPU reset or reboot clears it at 202..." (half
    # a timestamp) read as garbage. A cut line ends where a clause or word of the message ends.
    line = render("nhc", report_of("h100x8-xid-ecc"))[0].rstrip("\n")
    assert len(line) <= nhc.MAX_LINE and line.endswith("Double-bit (uncorrectable) ECC error..."), line
    words = " ".join(f"word{i}" for i in range(100))
    cut = nhc.shorten(words, 50)
    assert cut.endswith("...") and words.startswith(cut[:-3]) and words[len(cut) - 3] == " ", cut


# --------------------------------------------------------------------------- npd

@pytest.mark.parametrize(("case", "status"), [
    ("h100x8-healthy", npd.OK), ("no-gpu", npd.OK), ("h100x8-xid-ecc", npd.NON_OK),
    ("driver-library-mismatch", npd.NON_OK)])
def test_npd_exit_status_and_short_message(case, status):
    output, code = render("npd", report_of(case))
    assert code == status
    assert output.count("\n") == 1 and len(output.rstrip("\n").encode()) <= npd.MAX_MESSAGE
    assert output.startswith("gpuhealth: " + report_of(case).verdict)


def test_npd_unknown_when_gpuhealth_could_not_judge():
    everything_skipped = all_checks_run(skipped=[Skipped(c, s.slug, "kernel log not readable")
                                                 for c, s in REGISTRY.items()])
    assert npd.exit_code(everything_skipped) == npd.UNKNOWN
    assert npd.render(everything_skipped).startswith("gpuhealth: UNKNOWN: all")
    assert npd.exit_code(Report(Snapshot())) == npd.UNKNOWN  # nothing ran
    assert npd.exit_code(Report(Snapshot(), checks_run=1)) == npd.OK  # a selection that ran and passed
    crash = Finding("GH001", "internal-error", Severity.WARNING, "check GH302 (gpu-fallen-off-bus) failed: boom",
                    action="contact_support", impact="none")
    assert npd.exit_code(all_checks_run([crash])) == npd.UNKNOWN
    # a critical finding is a judgement even when gpuhealth also failed somewhere
    assert npd.exit_code(all_checks_run([NASTY_FINDING, crash])) == npd.NON_OK


def test_npd_message_is_cut_in_bytes():
    wide = Finding("GH306", "nvrm-errors", Severity.CRITICAL, "é" * 200, action="reboot", impact="node_unusable")
    output = npd.render(all_checks_run([wide]))
    assert len(output.rstrip("\n").encode()) <= 80 and output.rstrip("\n").endswith("...")


def test_every_check_code_has_a_class():
    catalogue.load()
    table = npd.classes()
    assert set(table.values()) <= set(npd.CLASSES)
    assert sorted(code for code in REGISTRY if code not in table) == []


# A draining finding of each class: (code, its slug, GPU or None, action, impact)
CLASS_FINDINGS = {
    "gpu": ("GH302", "gpu-fallen-off-bus", 3, "reset_gpu", "gpu_unusable"),
    "driver": ("GH202", "driver-library-mismatch", None, "reboot", "node_unusable"),
    "fabric": ("GH210", "fabric-manager-failed", None, "fix_host_software", "node_unusable"),
    "network": ("GH720", "infiniband-port-down", None, "hardware_inspection", "node_unusable"),
    "host": ("GH814", "disk-space-low", None, "fix_host_software", "node_unusable"),
}


@pytest.mark.parametrize("kind", npd.CLASSES)
def test_npd_class_condition_is_set_by_its_own_findings_only(kind):
    code, slug, gpu, action, impact = CLASS_FINDINGS[kind]
    assert npd.class_of(code) == kind
    finding = Finding(code, slug, Severity.CRITICAL, "it broke", Subject(gpu), action=action, impact=impact)
    report = all_checks_run([finding])
    for other in npd.CLASSES:
        output, status = render(f"npd-{other}", report)
        assert output.count("\n") == 1 and len(output.rstrip("\n").encode()) <= npd.MAX_MESSAGE
        if other == kind:  # set, with the action (and the GPU) first in the message
            where = f" GPU {gpu}" if gpu is not None else ""
            assert status == npd.NON_OK
            assert output.startswith(f"gpuhealth {kind}: {action}{where} ({code} {impact}): it broke"), output
        else:  # clear: another class's fault is not this condition's
            assert status == npd.OK and output.startswith(f"gpuhealth {other}: OK"), output
    healthy = all_checks_run()
    assert render(f"npd-{kind}", healthy)[1] == npd.OK


def test_npd_class_condition_is_unknown_when_gpuhealth_could_not_judge_and_counts_the_rest():
    assert npd.class_exit_code(Report(Snapshot()), "gpu") == npd.UNKNOWN
    two = [Finding("GH302", "gpu-fallen-off-bus", Severity.CRITICAL, "gone", Subject(g), action="reset_gpu",
                   impact="gpu_unusable") for g in (1, 2)]
    output = npd.render_class(all_checks_run(two), "gpu")
    assert output.startswith("gpuhealth gpu: reset_gpu GPU 1 (GH302 gpu_unusable, +1)")


def test_npd_class_formats_from_the_command_line():
    result = CliRunner().invoke(main, ["check", "--from", str(REPO / "examples" / "h100x8-xid-ecc.tar.gz"),
                                       "--format", "npd-gpu"])
    assert result.exit_code == npd.NON_OK and result.output.startswith("gpuhealth gpu: "), result.output
    result = CliRunner().invoke(main, ["check", "--from", str(REPO / "examples" / "h100x8-xid-ecc.tar.gz"),
                                       "--format", "npd-network"])
    assert result.exit_code == npd.OK and result.output.startswith("gpuhealth network: OK"), result.output


# --------------------------------------------------------------------------- prometheus

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_VALUE = r'(?:[^"\\\n]|\\[\\"n])*'
_PAIR = rf'[a-zA-Z_][a-zA-Z0-9_]*="{_VALUE}"'
_SAMPLE = re.compile(rf"({_NAME})(?:\{{({_PAIR}(?:,{_PAIR})*)\}})?"
                     r" (-?(?:\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\+Inf|-Inf|NaN))")
_HELP = re.compile(rf"# HELP ({_NAME}) (?:[^\\\n]|\\[\\n])*")
_TYPE = re.compile(rf"# TYPE ({_NAME}) (gauge|counter|untyped|summary|histogram)")
_LABEL = re.compile(rf'([a-zA-Z_][a-zA-Z0-9_]*)="({_VALUE})"')


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Strict: every line is HELP, TYPE or a sample of a family whose TYPE came first; no duplicates."""
    assert text.endswith("\n")
    typed: set[str] = set()
    samples, seen = [], set()
    for line in text[:-1].split("\n"):
        if match := _TYPE.fullmatch(line):
            assert match[1] not in typed
            typed.add(match[1])
        elif _HELP.fullmatch(line):
            continue
        else:
            match = _SAMPLE.fullmatch(line)
            assert match, f"not a valid exposition line: {line!r}"
            assert match[1] in typed, f"sample before its TYPE: {line!r}"
            labels = {k: re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], v)
                      for k, v in _LABEL.findall(match[2] or "")}
            key = (match[1], tuple(sorted(labels.items())))
            assert key not in seen, f"duplicate series: {line!r}"
            seen.add(key)
            samples.append((match[1], labels, float(match[3])))
    return samples


@pytest.mark.parametrize("case", CASES)
def test_prometheus_lines_are_all_valid_and_exit_0(case):
    report = report_of(case)
    output, code = render("prometheus", report)
    assert code == 0  # the verdict is in the metrics: the textfile must be replaced on a broken host too
    samples = parse_exposition(output)
    verdicts = {labels["verdict"]: value for name, labels, value in samples if name == "gpuhealth_verdict"}
    assert verdicts == {v: float(v == report.verdict) for v in ("HEALTHY", "DEGRADED", "BROKEN", "NO DIAGNOSIS")}
    skipped = {labels["code"] for name, labels, _ in samples if name == "gpuhealth_check_skipped"}
    passed = {labels["code"] for name, labels, _ in samples if name == "gpuhealth_check_passed"}
    assert skipped == {s.code for s in report.skipped} and not skipped & passed
    counts = {labels["severity"]: value for name, labels, value in samples if name == "gpuhealth_findings"}
    assert counts == {s.value: report.count(s) for s in Severity}
    assert any(name == "gpuhealth_last_run_timestamp_seconds" for name, _, _ in samples)


def test_prometheus_gpu_labels():
    samples = parse_exposition(prometheus_text.render(report_of("h100x8-xid-ecc"), now=1700000000))
    status = [labels for name, labels, _ in samples if name == "gpuhealth_check_status"]
    # Xid 48 with Xid 63/64 on the same GPU: NVIDIA's workflow drains the GPU, then resets it
    assert {"code": "GH301", "slug": "xid-errors", "severity": "critical", "gpu": "0",
            "pci_bus_id": "0000:19:00.0", "xid": "48", "action": "drain_then_reset", "impact": "gpu_unusable"} in status
    assert ("gpuhealth_last_run_timestamp_seconds", {}, 1700000000.0) in samples


def test_prometheus_escapes_label_values_and_merges_duplicate_series():
    twin = Finding("GH306", "nvrm-errors", Severity.CRITICAL, "another", Subject(3, "0000:3b:00.0"),
                   action="reboot", impact="node_unusable")
    weird_slug = Finding("GH2\\0", 'sl"ug', Severity.WARNING, "x", action="none", impact="degraded")
    output = prometheus_text.render(all_checks_run([NASTY_FINDING, twin, weird_slug]), now=1.5)
    assert "gpuhealth_finding_info" not in output and "message=" not in output  # no label holds prose
    assert 'code="GH2\\\\0",slug="sl\\"ug"' in output
    samples = parse_exposition(output)
    status = {labels["code"]: value for name, labels, value in samples if name == "gpuhealth_check_status"}
    assert status["GH306"] == 2  # two findings with the same labels are one series


def test_prometheus_output_parses_with_prometheus_client_when_installed():
    parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is not installed")
    output = prometheus_text.render(all_checks_run([NASTY_FINDING]), now=1.0)
    families = {f.name: f for f in parser.text_string_to_metric_families(output)}
    assert families["gpuhealth_check_status"].samples[0].labels["code"] == NASTY_FINDING.code
    for text in [output, *(prometheus_text.render(report_of(case)) for case in CASES)]:
        parsed = [(s.name, s.labels, s.value) for f in parser.text_string_to_metric_families(text) for s in f.samples]
        assert parsed == parse_exposition(text)


# --------------------------------------------------------------------------- junit

def junit_counts(root: ET.Element) -> dict[str, int]:
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    return {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases)}


@pytest.mark.parametrize("case", CASES)
def test_junit_counts_match_the_report(case):
    report = report_of(case)
    output, code = render("junit", report)
    assert code == report.exit_code
    root = ET.fromstring(output.encode())
    counts = junit_counts(root)
    for element in (root, root.find("testsuite")):
        assert {k: int(element.get(k)) for k in counts} == counts
    failing = [f for f in report.findings if f.severity is not Severity.INFO]
    assert counts["failures"] == len(failing) and counts["skipped"] == len(report.skipped)
    assert counts["tests"] == len(junit.passed_checks(report)) + len(report.findings) + len(report.skipped)


def test_junit_skipped_is_never_a_pass_and_info_passes_with_output():
    report = report_of("h100x8-xid-ecc")
    root = ET.fromstring(junit.render(report))
    by_name = {c.get("name"): c for c in root.iter("testcase")}
    skipped_case = by_name["GH103 gpu-count-below-expected"]
    assert skipped_case.find("skipped").get("message").startswith("no expected GPU count")
    assert len(list(skipped_case)) == 1  # only <skipped>: not a pass
    assert all(not name.startswith("GH103") for name, c in by_name.items() if c.find("skipped") is None)
    critical = next(c for c in root.iter("testcase") if c.find("failure") is not None)
    assert critical.get("classname") == "gpuhealth.kernel_log"
    assert critical.get("name").startswith("GH301 xid-errors [GPU 0 0000:19:00.0]: Xid 48")
    assert critical.find("failure").get("type") == "critical"
    assert "evidence: dmesg --time-format iso" in critical.find("failure").text
    assert "fix (disruptive): sudo nvidia-smi --gpu-reset -i 0" in critical.find("failure").text
    info = next(c for c in root.iter("testcase") if "Xid 63" in c.get("name"))
    assert info.find("failure") is None and "Xid 63" in info.find("system-out").text
    assert by_name["GH101 no-nvidia-gpu"].find("*") is None  # ran and passed


def test_junit_escapes_text_and_drops_characters_xml_cannot_hold():
    crash = Finding("GH001", "internal-error", Severity.WARNING, "check GH302 (gpu-fallen-off-bus) failed: <boom>",
                    labels={"check": "GH302"}, action="contact_support", impact="none")
    output = junit.render(all_checks_run([NASTY_FINDING, crash]))
    root = ET.fromstring(output)  # would raise on a raw \x1b or \x00
    failure = next(root.iter("failure"))
    assert failure.get("message").startswith('bad "quote" and \\backslash second line')
    assert "NVRM: <&> \\x00 odd" in failure.text and "\\x1b[0m" in failure.text
    error = next(root.iter("error"))
    assert "<boom>" in error.get("message") and root.find("testsuite").get("errors") == "1"
    assert not any(c.get("name") == "GH302 gpu-fallen-off-bus" for c in root.iter("testcase"))


def test_junit_marks_symptoms_with_their_root_cause():
    root = ET.fromstring(junit.render(report_of("driver-library-mismatch")))
    symptom = next(c for c in root.iter("testcase") if c.get("name").startswith("GH203"))
    assert "explained by GH202 driver-library-mismatch" in symptom.find("failure").text


# --------------------------------------------------------------------------- the CLI

def bundle_of(case: str, tmp_path: Path) -> str:
    recorder = RecordingHost(FakeHost(load_spec(case)), tmp_path / case, hostname="gpu-node-17")
    collect(recorder)
    recorder.finish()
    return str(tmp_path / case)


@pytest.mark.parametrize(("case", "codes"), [
    ("h100x8-healthy", {"nhc": 0, "npd": 0, "prometheus": 0, "junit": 0}),
    ("no-gpu", {"nhc": 0, "npd": 0, "prometheus": 0, "junit": 1}),
    ("h100x8-xid-ecc", {"nhc": 2, "npd": 1, "prometheus": 0, "junit": 2}),
    ("driver-library-mismatch", {"nhc": 2, "npd": 1, "prometheus": 0, "junit": 2}),
])
def test_cli_exit_codes(case, codes, tmp_path):
    bundle = bundle_of(case, tmp_path)
    for output_format, expected in codes.items():
        result = CliRunner().invoke(main, ["check", "--from", bundle, "--format", output_format])
        assert result.exit_code == expected, (output_format, result.output)
        if output_format == "nhc":
            # the NHC contract (docs/slurm-nhc.md): nothing at all on stdout when nothing drains
            assert (result.output == "") == (expected == 0), repr(result.output)
            assert expected == 0 or result.output.startswith("gpuhealth: ")
        if output_format == "prometheus":
            parse_exposition(result.output)
        if output_format == "junit":
            ET.fromstring(result.output.encode())


def test_cli_unreadable_bundle_still_exits_3(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"junk")
    result = CliRunner().invoke(main, ["check", "--from", str(tmp_path / "x.tar.gz"), "--format", "nhc"])
    assert result.exit_code == 3


# --------------------------------------------------------------------------- deploy files

def test_npd_plugin_config():
    config = json.loads((REPO / "deploy" / "kubernetes" / "npd-gpuhealth-plugin.json").read_text())
    assert config["plugin"] == "custom"
    plugin = config["pluginConfig"]
    assert {"invoke_interval", "timeout", "max_output_length", "concurrency"} <= set(plugin)
    assert plugin["max_output_length"] >= npd.MAX_MESSAGE
    # one condition per class, each set by its own rule running that class's format
    assert [c["type"] for c in config["conditions"]] == [npd.CONDITIONS[k] for k in npd.CLASSES]
    for kind in npd.CLASSES:
        rule = next(r for r in config["rules"] if r["condition"] == npd.CONDITIONS[kind])
        assert rule["type"] == "permanent" and rule["args"][-2:] == ["--format", f"npd-{kind}"]
        assert f"npd-{kind}" in FORMATS
        assert "--no-frameworks" in rule["args"]  # a periodic check never computes on the node's GPUs


def test_daemonset_mounts_host_paths_read_only():
    text = (REPO / "deploy" / "kubernetes" / "gpuhealth-daemonset.yaml").read_text()
    assert "kind: DaemonSet" in text and "nodeSelector:" in text and "tolerations:" in text
    for path in ("/proc", "/sys", "/dev", "/var/log"):
        assert re.search(rf"hostPath:\s*\n\s*path: {re.escape(path)}\n", text), path
    assert text.count("readOnly: true") >= 4
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed: the structure is not checked")
    documents = [d for d in yaml.safe_load_all(text) if d]
    daemonset = next(d for d in documents if d["kind"] == "DaemonSet")
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert all(m.get("readOnly") for m in container["volumeMounts"] if m["name"].startswith("host-"))


BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed: the wrapper script cannot be checked")


@needs_bash
def test_wrapper_script_parses():
    text = WRAPPER.read_text()
    assert "set -euo pipefail" in text and os.access(WRAPPER, os.X_OK)
    subprocess.run([BASH, "-n", str(WRAPPER)], check=True)


def fake_slurm(tmp_path: Path, state: str, reason: str, gpuhealth_rc: int, gpuhealth_out: str) -> dict[str, str]:
    """A fake scontrol that shows a node and logs updates, and a fake gpuhealth."""
    log = tmp_path / "updates.log"
    (tmp_path / "scontrol").write_text(
        "#!/usr/bin/env bash\n"
        'if [[ $1 == show ]]; then\n'
        f"  printf 'NodeName=n1 Arch=x86_64\\n   State={state} ThreadsPerCore=2\\n   Reason={reason}\\n'\n"
        f'else printf "%s\\n" "$*" >> {log}; fi\n')
    (tmp_path / "gpuhealth").write_text(
        f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" > {tmp_path / "args"}\n'
        f"printf '%s' {shlex.quote(gpuhealth_out)}\nexit {gpuhealth_rc}\n")
    # keep the test out of the real syslog: the fake logger notes its priority and message
    (tmp_path / "logger").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path / "syslog"}\n')
    for name in ("scontrol", "gpuhealth", "logger"):
        (tmp_path / name).chmod(0o755)
    path = f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return {"PATH": path, "SCONTROL": str(tmp_path / "scontrol"),
            "GPUHEALTH": str(tmp_path / "gpuhealth"), "NODENAME": "n1", "LOG": str(log)}


@needs_bash
@pytest.mark.skipif(shutil.which("timeout") is None, reason="coreutils timeout is not installed")
@pytest.mark.parametrize(("state", "reason", "rc", "out", "update"), [
    ("IDLE", "(null)", 2, "gpuhealth: GH301 xid-errors: Xid 48\n",
     'update nodename=n1 state=drain reason=gpuhealth: GH301 xid-errors: Xid 48'),
    ("IDLE+DRAIN", "bad fan [admin@2024-01-01T00:00:00]", 2, "gpuhealth: GH301 x\n", None),
    ("IDLE+DRAIN", "gpuhealth: GH301 x [root@2024-01-01T00:00:00]", 0, "", "update nodename=n1 state=resume"),
    ("IDLE+DRAIN", "bad fan [admin@2024-01-01T00:00:00]", 0, "", None),
    ("IDLE", "(null)", 0, "", None),
    ("IDLE", "(null)", 3, "gpuhealth: could not judge: gpuhealth failed in a check\n", None),
    # gpuhealth's own failure never resumes either: the node stays as the last judgement left it
    ("IDLE+DRAIN", "gpuhealth: GH301 x [root@2024-01-01T00:00:00]", 3, "", None),
])
def test_wrapper_drains_and_resumes_only_its_own(tmp_path, state, reason, rc, out, update):
    env = fake_slurm(tmp_path, state, reason, rc, out)
    result = subprocess.run([BASH, str(WRAPPER)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    log = Path(env["LOG"])
    assert (log.read_text().strip() if log.exists() else None) == update
    # the check it runs is read-only and bounded: no framework probe, every command under --timeout
    args = (tmp_path / "args").read_text().split()
    assert args[:6] == ["check", "--format", "nhc", "--no-frameworks", "--timeout", "10"], args
    assert args[6:] == ["--gpu-state", "/var/lib/gpuhealth/gpus-seen"], args
    syslog = (tmp_path / "syslog").read_text() if (tmp_path / "syslog").exists() else ""
    assert ("-p user.err" in syslog) == (rc == 3), syslog


@needs_bash
@pytest.mark.skipif(shutil.which("timeout") is None, reason="coreutils timeout is not installed")
@pytest.mark.parametrize("gpuhealth", ["missing", "typo"])
def test_wrapper_never_drains_on_gpuhealth_missing_or_mistyped(tmp_path, gpuhealth):
    """gpuhealth not installed (127) or a mistyped option (a usage error is gpuhealth's exit 3, never click's 2, which
    would read as critical): nothing changes, an error is logged."""
    env = fake_slurm(tmp_path, "IDLE", "(null)", 0, "")
    if gpuhealth == "missing":
        env["GPUHEALTH"] = str(tmp_path / "not-installed")
        result = subprocess.run([BASH, str(WRAPPER)], env=env, capture_output=True, text=True, timeout=30)
    else:
        env["GPUHEALTH"] = shutil.which("gpuhealth") or str(REPO / ".venv" / "bin" / "gpuhealth")
        result = subprocess.run([BASH, str(WRAPPER), "--gpu-cuont", "8"], env=env, capture_output=True, text=True,
                                timeout=60)
    assert result.returncode == 0, result.stderr
    assert not Path(env["LOG"]).exists()  # no scontrol update
    syslog = (tmp_path / "syslog").read_text()
    assert "-p user.err" in syslog and "left as it is" in syslog, syslog


def nhc_check_function() -> str:
    """The custom NHC check docs/slurm-nhc.md documents, as written there."""
    page = (REPO / "docs" / "slurm-nhc.md").read_text(encoding="utf-8")
    block = page.split("`/etc/nhc/scripts/gpuhealth.nhc`:\n\n```bash\n", 1)[1].split("```", 1)[0]
    assert "function check_gpuhealth()" in block
    return block


@needs_bash
@pytest.mark.parametrize(("rc", "out", "died", "err_logged"), [
    (0, "", None, False),
    (2, "gpuhealth: GH301 xid-errors [GPU 0] impact=gpu_unusable action=reset_gpu: Xid 48\n",
     "gpuhealth: GH301 xid-errors [GPU 0] impact=gpu_unusable action=reset_gpu: Xid 48", False),
    (3, "gpuhealth: could not judge: gpuhealth failed in a check\n", None, True),
    (127, "", None, True),
])
def test_the_documented_nhc_check_drains_only_on_a_finding(tmp_path, rc, out, died, err_logged):
    """The NHC form of docs/slurm-nhc.md, run with stand-ins for NHC's die and log and for gpuhealth: a finding that
    drains dies with gpuhealth's line; exit 3 and a missing gpuhealth never do, and are logged at error priority."""
    fake = tmp_path / "gpuhealth"
    fake.write_text(f"#!/usr/bin/env bash\nprintf '%s' {shlex.quote(out)}\nexit {rc}\n")
    fake.chmod(0o755)
    (tmp_path / "logger").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path / "syslog"}\n')
    (tmp_path / "logger").chmod(0o755)
    function = nhc_check_function().replace("/usr/local/bin/gpuhealth", str(fake) if rc != 127 else str(tmp_path / "x"))
    script = (f'die() {{ printf "%s\\n" "$2" > {tmp_path / "died"}; }}\nlog() {{ :; }}\n{function}\n'
              "check_gpuhealth; echo \"returned $?\"\n")
    env = {"PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    result = subprocess.run([BASH, "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert ((tmp_path / "died").read_text().strip() if (tmp_path / "died").exists() else None) == died
    assert result.stdout.strip() == ("returned 1" if died else "returned 0")
    syslog = (tmp_path / "syslog").read_text() if (tmp_path / "syslog").exists() else ""
    assert ("-p user.err" in syslog) == err_logged, syslog
