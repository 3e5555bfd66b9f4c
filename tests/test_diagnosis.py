"""Honest verdicts, catalogue lines as findings, the differential, and the checks added with them
(GH003, GH004, GH209, GH210, GH414, GH612, GH706). Evidence is real: lines and files of tests/cases/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import next_commands, split_commands
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.model import PciDevice, Severity, Snapshot

CASES = Path(__file__).parent / "cases" / "dev"
NO_COMM = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
           "NVIDIA driver is installed and running.")  # NVIDIA/nvidia-docker#988
KEY_REJECTED = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def codes(report) -> list[str]:
    return [f.code for f in report.findings]


def case_report(name: str):
    folder = CASES / name
    return report_of(*[(p.name, p.read_text(errors="replace")) for p in sorted(folder.iterdir())
                       if p.name != "case.toml"])


# --------------------------------------------------------------------------- honest verdict


def test_nothing_understood_is_no_diagnosis_with_exit_3():
    result = CliRunner().invoke(main, ["analyze", "-"], input="lunch at noon\nremember the milk\n")
    assert result.exit_code == 3
    assert "NO DIAGNOSIS" in result.output and "gpuhealth snapshot" in result.output
    assert "HEALTHY" not in result.output


def test_a_file_not_read_beside_clean_evidence_is_no_all_clear(tmp_path):
    # ollama/ollama#4814: a clean nvidia-smi (MIG on, nothing wrong) beside the user's words, which analyze cannot read
    folder = CASES / "mig-one-instance-visible-ollama-4814"
    words = tmp_path / "report.txt"
    words.write_text((folder / "report.txt").read_text())
    smi = str(folder / "nvidia-smi.txt")
    alone = CliRunner().invoke(main, ["analyze", smi])
    assert alone.exit_code == 0 and "HEALTHY" in alone.output  # everything given was read: an all-clear is honest
    both = CliRunner().invoke(main, ["analyze", smi, str(words)])
    assert both.exit_code == 3, both.output
    assert both.output.lstrip().startswith("NO DIAGNOSIS") and "HEALTHY" not in both.output
    assert "1 file was not read: a fault may be there" in both.output


def test_an_unknown_error_line_is_never_healthy():
    report = report_of(("paste", "| NVIDIA-SMI 535.161.08   Driver Version: 535.161.08   CUDA Version: 12.2 |\n"),
                       ("paste2", "foo: fatal: the frobnicator refused to start\n"))
    assert report.verdict != "HEALTHY"
    (unknown,) = [f for f in report.findings if f.code == "GH003"]
    assert unknown.severity is Severity.WARNING and "frobnicator" in unknown.evidence[0].lines[0]


def test_an_exception_name_alone_on_its_line_is_one_error_with_the_message_below():
    # Python prints `raise RuntimeError("\\n" + text)` as the name, then the message on the next line (written here)
    head = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
    known = report_of(("paste", head + "RuntimeError:\n  CUDA error: no kernel image is available for execution on "
                                       "the device\n"))
    assert "GH606" in codes(known) and "GH003" not in codes(known)  # the name adds nothing to a known message
    unknown = report_of(("paste", head + "RuntimeError:\n  the frobnicator refused to start\n"))
    (finding,) = [f for f in unknown.findings if f.code == "GH003"]
    assert finding.evidence[0].lines == ("RuntimeError: the frobnicator refused to start",)


def test_lines_that_say_nothing_failed_are_not_errors():
    report = report_of(("paste", "$ make\n0 errors, 0 warnings\nbuild finished without errors\n"))
    assert "GH003" not in codes(report)


def test_evidence_mode_collapses_the_skipped_list():
    result = CliRunner().invoke(main, ["analyze", "-"], input=f"$ nvidia-smi\n{NO_COMM}\n")
    assert "checks need evidence you did not give; -v lists them" in result.output
    assert "Skipped (" not in result.output


# --------------------------------------------------------------------------- catalogue lines and the differential


def test_a_line_that_names_the_cause_leads_and_folds_the_symptom():
    report = report_of(("paste", f"$ nvidia-smi\n{NO_COMM}\n$ sudo modprobe nvidia\n{KEY_REJECTED}\n"))
    lead = report.findings[0]
    assert lead.code == "GH506" and lead.severity is Severity.CRITICAL
    assert "GH203" in lead.explains and not lead.differential


def test_a_symptom_without_its_cause_leads_with_a_ranked_differential():
    report = report_of(("paste", f"$ nvidia-smi\n{NO_COMM}\n$ uname -r\n6.2.0-36-generic\n"))
    lead = report.findings[0]
    assert lead.code == "GH203" and lead.severity is Severity.CRITICAL
    ranked = lead.differential
    assert len(ranked) >= 3 and all(c.status == "open" for c in ranked[:-2])
    assert [c.cause for c in ranked][:3] == ["module-not-built", "secure-boot-refused", "nouveau-bound"]
    # the line itself rules two out (knowledge/rules_out.csv): nvidia-smi ran, and a mismatch has its own message
    assert {c.cause: c.status for c in ranked[-2:]} == {"driver-library-mismatch": "ruled out",
                                                        "nvidia-smi-missing": "ruled out"}
    assert ranked[0].title in lead.message and ranked[1].title not in lead.message  # only the likeliest is named
    commands = next_commands(report.findings, report.snapshot.commands_given)
    assert "dkms status" in commands and "uname -r" not in commands  # already given


def test_evidence_rules_causes_out_and_confirms_them():
    lsmod = ("$ lsmod\nModule                  Size  Used by\nnvidia_uvm           1437696  0\n"
             "nvidia  56463360  1 nvidia_uvm\n")
    report = report_of(("paste", f"$ nvidia-smi\n{NO_COMM}\n{lsmod}"))
    lead = next(f for f in report.findings if f.code == "GH203")
    status = {c.cause: c.status for c in lead.differential}
    assert status["nouveau-bound"] == "ruled out" and lead.differential[-1].status == "ruled out"


def test_json_carries_the_differential_and_the_next_commands():
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=f"$ nvidia-smi\n{NO_COMM}\n")
    document = json.loads(result.stdout)
    lead = document["findings"][0]
    first = lead["differential"][0]
    assert set(first) == {"cause", "title", "code", "status", "why", "command"}
    assert first["status"] == "open" and first["title"] in lead["message"]
    assert "dkms status" in document["next_commands"]


def test_torch_false_after_is_available_is_the_symptom():
    report = report_of(("paste", ">>> import torch\n>>> torch.cuda.is_available()\nFalse\n"))
    assert report.findings[0].code == "GH605" and report.findings[0].differential


def test_commands_split_outside_quotes():
    assert split_commands("dkms status; uname -r") == ["dkms status", "uname -r"]
    assert split_commands('python -c "import torch; print(1)"; nvidia-smi') == [
        'python -c "import torch; print(1)"', "nvidia-smi"]


# --------------------------------------------------------------------------- the new checks: fire and stay quiet


@pytest.mark.parametrize(("case", "code"), [
    ("fabric-manager-missing-802-bandwidthtest", "GH210"),
    ("memory-held-idle-crashed-program-pytorch-910", "GH414"),
    ("cuda-library-missing-libcudnn8-trtpro-171", "GH612"),
    ("nccl-acs-plx-gdr-crash-nccl-304", "GH706"),
])
def test_new_check_fires_on_its_case(case, code):
    assert code in codes(case_report(case))


def test_fabric_manager_nothing_to_do_is_quiet():
    assert "GH210" not in codes(case_report("not-a-fault-fabricmanager-nothing-to-do-a40"))


def test_gh209_from_pci_ids_and_the_driver_version():
    kepler = PciDevice("0000:01:00.0", "10de", "1004", "0300", name="GeForce GTX 780")  # GK110: Kepler
    from gpuhealth.model import DriverInfo
    broken = run_checks(Snapshot(pci_devices=(kepler,), driver=DriverInfo(version="535.161.08")), select=["GH209"])
    assert broken.findings and "Kepler" in broken.findings[0].message and "470" in broken.findings[0].message
    fine = run_checks(Snapshot(pci_devices=(kepler,), driver=DriverInfo(version="470.239.06")), select=["GH209"])
    assert fine.findings == () and not fine.skipped


@pytest.mark.parametrize(("case", "lead", "explained"), [
    ("driver-gpu-unsupported-gt710-talos-535", "GH209", "GH305"),  # 470.xx Legacy line, split over lines
    ("driver-gpu-unsupported-blackwell-needs-open-modules", "GH209", "GH303"),
    ("driver-gpu-unsupported-gt1030-open-module-560", "GH209", "GH305"),
    ("nouveau-blocking-nvidia-nixos-y50", "GH206", "GH305"),  # only a kernel log: no lsmod, no lspci
    ("nouveau-nova-core-bound-runfile", "GH206", "GH305"),
])
def test_the_cause_leads_and_explains_the_probe_failure(case, lead, explained):
    findings = case_report(case).findings
    assert findings[0].code == lead
    assert explained in findings[0].explains and explained in codes(case_report(case))


def test_gh305_says_what_the_probe_said():
    # NVIDIA/aicr#1858: one H100 of eight failed its probe; "the driver probed no GPU" would be false
    messages = {str(f.subject): f.message for f in case_report("fewer-gpus-than-pci-h100-faulty-probe-azure").findings
                if f.code == "GH305"}
    # one failed probe is one finding: the driver's count line names no GPU, it is the summary of the one it named
    assert messages == {"000a:00:00.0": "The NVIDIA driver's probe failed: GPU not supported by the 580.126.09 "
                                        "driver release, probe routine failed for 1 device(s)"}


@pytest.mark.parametrize(("case", "code"), [
    ("nvidia-uvm-missing-331-uvm-package", "GH205"),
    ("nvidia-uvm-missing-build-failed-384-swap", "GH205"),
    ("nvidia-uvm-missing-nvidia-docker-uvm-not-loaded", "GH205"),
    ("dev-nodes-missing-uvm-after-reboot-docker", "GH207"),
    ("dev-nodes-missing-k8s-nvidia0-lstat", "GH207"),
])
def test_uvm_and_device_node_lines_lead(case, code):
    assert codes(case_report(case))[0] == code


def test_gh206_ignores_old_kernel_log_lines_when_lsmod_shows_no_nouveau():
    snapshot, _ = analyze_texts([("lsmod.txt", "Module                  Size  Used by\nnvidia  56000000  0\n"),
                                 ("dmesg.log", "[ 5.1] NVRM: GPU 0000:01:00.0 is already bound to NovaCore.\n")])
    assert "GH206" not in codes(run_checks(snapshot, select=["GH206"]))


def test_gh414_quiet_when_the_gpu_works():
    text = (CASES / "memory-held-idle-crashed-program-pytorch-910/nvidia-smi.txt").read_text()
    busy = text.replace("|      0%      Default |", "|     97%      Default |", 1)
    assert "GH414" not in codes(report_of(("nvidia-smi.txt", busy)))


def test_gh612_quiet_without_loader_errors():
    report = report_of(("paste", "$ python -c 'import torch; print(torch.cuda.is_available())'\nTrue\n"))
    assert "GH612" not in codes(report)


def test_gh706_acs_alone_warns_with_a_failure_is_critical():
    acs = (CASES / "nccl-acs-plx-gdr-crash-nccl-304/session.txt").read_text()
    only_acs = "\n".join(line for line in acs.splitlines() if "ACSCtl" in line or line.startswith("$"))
    (warning,) = [f for f in report_of(("s.txt", only_acs)).findings if f.code == "GH706"]
    assert warning.severity is Severity.WARNING
    failing = report_of(("s.txt", only_acs + "\nNCCL WARN Call to ibv_reg_mr failed\n"))
    assert [f.severity for f in failing.findings if f.code == "GH706"] == [Severity.CRITICAL]
    iommu_only = report_of(("cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on\n"))
    assert "GH706" not in codes(iommu_only)


# One real line each, as users paste them into tickets (the catalogue rows cite their threads).
PASTED_ERRORS = {
    "GH203": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.",
    "GH506": "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service",
    "GH612": "ImportError: libcudnn.so.8: cannot open shared object file: No such file or directory",
    "GH202": "Failed to initialize NVML: Driver/library version mismatch",
    "GH507": "Error! Bad return status for module build on kernel: 6.5.0-14-generic (x86_64)",
}


@pytest.mark.parametrize("code", sorted(PASTED_ERRORS))
def test_one_pasted_error_line_leads_with_its_cause_and_is_never_healthy(code: str) -> None:
    """The DKMS line used to be taken for a kernel log ("on kernel: 6.5.0" looked like "host kernel: ..."),
    so no check judged it and the verdict was HEALTHY."""
    report = report_of(("paste.txt", PASTED_ERRORS[code] + "\n"))
    assert report.verdict != "HEALTHY"
    assert codes(report)[0] == code


def test_gh901_carries_a_symptom_with_no_check_of_its_own_and_stays_quiet_without_it() -> None:
    """The X server's line (catalogue row xorg-failed-load-kernel-module, from a public thread) shows the
    login-loop symptom; no check owns it, so GH901 leads with the ranked causes."""
    line = "[    20.412] (EE) NVIDIA: Failed to load the NVIDIA kernel module. Please check your\n"
    report = report_of(("Xorg.0.log", line))  # its timestamp made it look like a kernel log: it was HEALTHY
    (finding,) = [f for f in report.findings if f.code == "GH901"]
    assert finding.severity is Severity.CRITICAL and finding.differential
    assert codes(report)[0] == "GH901"
    quiet = report_of(("paste.txt", "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"))
    assert "GH901" not in codes(quiet)


def test_the_checks_that_judge_catalogue_lines_declare_that_they_read_messages():
    """diagnose() overrules a catalogue line only for a check that reads snapshot.messages, as its registry
    entry says (it was a hard-coded code list); a check reading only the kernel log judges no pasted line."""
    from gpuhealth.checks import catalogue
    from gpuhealth.checks.diagnosis import judges_lines
    from gpuhealth.checks.registry import REGISTRY

    catalogue.load()
    assert {c for c in REGISTRY if judges_lines(c)} >= {"GH209", "GH210", "GH612", "GH706"}
    assert not judges_lines("GH301") and not judges_lines("GH999")
    # GH210 let "NV_WARN_NOTHING_TO_DO" pass on a host without NVSwitches: its line is not re-raised
    assert "GH210" not in codes(case_report("not-a-fault-fabricmanager-nothing-to-do-a40"))


# The fields whose declaration has a consumer: diagnose() lets a check that declares `messages` judge the
# catalogue lines filed under its code, and one that declares `kernel_log` the lines of a parsed kernel log.
# (Other fields a check reads, such as `sources` or `smi`, need no declaration: `requires` skips, nothing else.)
JUDGED_FIELDS = ("messages", "kernel_log")


def _snapshot_reads() -> dict[tuple[str, str], tuple[set[str], set[tuple[str, str]]]]:
    """(module, function) -> (the snapshot fields it reads as ``snapshot.X``/``self.X``, what it calls), for
    every function of the core; calls by plain name or imported name, and ``snapshot.method()`` (model.py)."""
    import ast

    from repo_paths import REPO

    src = REPO / "src" / "gpuhealth"
    functions: dict[tuple[str, str], tuple[set[str], set[tuple[str, str]]]] = {}
    for path in src.rglob("*.py"):
        module = ".".join(("gpuhealth", *path.relative_to(src).with_suffix("").parts))
        tree = ast.parse(path.read_text())
        imported = {a.asname or a.name: (n.module, a.name) for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("gpuhealth") for a in n.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            reads, calls = functions.setdefault((module, node.name), (set(), set()))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
                    if sub.value.id in ("snapshot", "self"):
                        reads.add(sub.attr)
                    if sub.value.id == "snapshot":
                        calls.add(("gpuhealth.model", sub.attr))
                elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                    calls.add(imported.get(sub.func.id, (module, sub.func.id)))
    return functions


def test_every_check_declares_the_judged_fields_it_reads():
    """A check that reads snapshot.messages or snapshot.kernel_log (itself or through its helpers) declares
    it in `requires` or `reads`: GH206 read the catalogue's nouveau lines undeclared, so diagnose() re-raised a
    line GH206 had weighed; GH201, GH506, GH507, GH806 and GH004 read messages undeclared too."""
    from gpuhealth.checks import catalogue
    from gpuhealth.checks.registry import REGISTRY

    catalogue.load()
    functions = _snapshot_reads()

    def reach(key: tuple[str, str], seen: set[tuple[str, str]]) -> set[str]:
        if key in seen or key not in functions:
            return set()
        seen.add(key)
        reads, calls = functions[key]
        return reads.union(*(reach(call, seen) for call in calls))

    assert "messages" in reach(("gpuhealth.checks.driver", "nouveau_loaded"), set())  # the walk sees helpers
    undeclared = {code: sorted(set(JUDGED_FIELDS) & reach((spec.function.__module__, spec.function.__name__), set())
                               - set(spec.requires + spec.reads)) for code, spec in REGISTRY.items()}
    assert {code: fields for code, fields in undeclared.items() if fields} == {}


def test_gh206_weighs_a_pasted_nouveau_line_the_module_list_contradicts():
    """GH206 now judges its catalogue lines: a pasted line says nouveau held the GPU while the full module list
    shows it unloaded. The line is never dropped (an error line is never HEALTHY): the check itself calls it a
    warning that asks to confirm nouveau stays off, not "nouveau is loaded"; the symptom the line shows (the
    driver unreachable) still makes the report's finding as grave as that symptom."""
    from gpuhealth.checks.driver import nouveau_loaded
    from gpuhealth.checks.registry import Expectations

    lsmod = ("Module                  Size  Used by\nnvidia_drm             77824  0\n"
             "nvidia              56000512  1 nvidia_drm\nnvidia_uvm           1966080  0\n")
    words = "the nouveau driver is still loaded after I rebooted\n"
    snapshot, _ = analyze_texts([("lsmod.txt", lsmod), ("note.txt", words)])
    (draft,) = nouveau_loaded(snapshot, Expectations())
    assert draft.severity is Severity.WARNING and "shows it not loaded now" in draft.message
    report = run_checks(snapshot)
    (finding,) = [f for f in report.findings if f.code == "GH206"]
    assert "shows it not loaded now" in finding.message and finding.severity is not Severity.INFO
    assert [line for e in finding.evidence for line in e.lines] == [words.strip()]
    # no module list: the line is all there is, and it is a person's words (a words-* row): reported, below critical
    alone = report_of(("note.txt", words))
    (told,) = [f for f in alone.findings if f.code == "GH206"]
    assert told.severity is Severity.WARNING and told.labels.get("reported") == "words"
    assert any(e.source.endswith("(the reporter's words)") for e in told.evidence)


def test_pasted_lines_become_evidence_one_way():
    """GH003, the catalogue's findings, GH206 and the evidence checks share checks.registry.line_evidence:
    one Evidence per source, each line once, at most six per source (GH003 once listed a repeated line twice)."""
    from gpuhealth.checks.registry import line_evidence
    from gpuhealth.model import MessageLine

    lines = [MessageLine(f"error {i % 8}", "a.log") for i in range(20)] + [MessageLine("error x", "b.log")]
    assert [(e.source, e.lines) for e in line_evidence(lines)] == [
        ("a.log", tuple(f"error {i}" for i in range(6))), ("b.log", ("error x",))]
    text = "frobnicator: fatal error: widget 7 failed\n"
    snapshot, _ = analyze_texts([("app.log", text * 3)])
    (finding,) = [f for f in run_checks(snapshot).findings if f.code == "GH003"]
    assert [len(e.lines) for e in finding.evidence] == [1]


def test_a_row_that_decodes_one_error_brings_its_own_fixes():
    # containerd's CRI error (pkg/cri/server/helpers.go, getSandboxRuntime's format; the kubelet event around it is
    # written here): the fix is in containerd's configuration, not Docker's daemon.json
    line = ('Warning  FailedCreatePodSandBox  kubelet  Failed to create pod sandbox: rpc error: code = Unknown desc = '
            'failed to get sandbox runtime: no runtime for "nvidia" is configured\n')
    report = report_of(("events.txt", line))
    (found,) = [f for f in report.findings if f.code == "GH802"]
    commands = [f.command for f in found.fixes]
    assert "sudo nvidia-ctk runtime configure --runtime=containerd" in commands
    assert not any("docker" in c for c in commands)
    # a row without keyed fixes keeps the check's own
    docker = report_of(("run.txt", "docker: Error response from daemon: unknown or invalid runtime name: nvidia.\n"))
    assert "sudo nvidia-ctk runtime configure --runtime=docker" in [f.command for f in
                                                                    next(x for x in docker.findings
                                                                         if x.code == "GH802").fixes]
