"""diff, explain, check --from, recommend and fix (issue 12 points 2-4 and 6), through the command line."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from conftest import CORPUS
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.drift import diff, render, run_of
from hostcases import FakeHost, load_spec

BUG_REPORT_352 = CORPUS / "nvidia-bug-report-352.63" / "nvidia-bug-report.log"
LSPCI_A100 = CORPUS / "gpud" / "nvidia-query__lspci.nn.a100"
SMI_LIST_A100 = CORPUS / "gpud" / "nvidia-query__nvidia-smi.nvlink.status.a100"


def run_for(name: str):
    return run_of(run_checks(collect(FakeHost(load_spec(name)), captured_at="t")))


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, list(args), input=stdin)


# --------------------------------------------------------------------------- diff


def test_diff_lists_xid48_as_a_new_critical_finding_first():
    changes = diff(run_for("h100x8-healthy"), run_for("h100x8-xid-ecc"))
    new = [c for c in changes if c.kind == "finding-new"]
    xid48 = next(c for c in new if c.message.startswith("Xid 48"))
    assert xid48.severity == "critical" and xid48.worse
    assert changes[0] is xid48  # the worst first
    xid63 = next(c for c in new if c.message.startswith("Xid 63"))
    assert xid63.severity == "info" and not xid63.worse
    text = render(changes).splitlines()
    assert re.match(r"WORSE +critical +new +GH301 \[GPU \d+ [0-9a-f:.]+\] Xid 48", text[0])
    assert changes.index(xid48) < changes.index(xid63)


def test_diff_resolved_findings_carry_their_severity():
    changes = diff(run_for("h100x8-xid-ecc"), run_for("h100x8-healthy"))
    resolved = [c for c in changes if c.kind == "finding-resolved"]
    assert resolved and all(c.severity for c in resolved) and not any(c.worse for c in changes)
    assert resolved[0].severity == "critical"  # worst first among the resolved too
    assert "better" in render(changes).splitlines()[0]


def test_diff_driver_break_is_one_change_not_one_per_gpu():
    changes = diff(run_for("h100x8-healthy"), run_for("driver-library-mismatch"))
    assert not [c for c in changes if c.kind == "gpu-vanished"]
    state = [c for c in changes if c.kind == "driver-state"]
    assert len(state) == 1 and state[0].worse and "(8 before)" in state[0].message
    assert "mismatch" in state[0].message.lower()
    assert any(c.kind == "finding-new" and c.subject.startswith("GH202@") and c.severity == "critical"
               for c in changes)


# --------------------------------------------------------------------------- explain, check --from


@pytest.mark.parametrize("words", [["79"], ["xid", "79"], ["Xid79"], ["xid-79"]])
def test_explain_an_xid_number(words):
    result = invoke("explain", *words)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS")
    assert "What to do now: reboot the machine" in result.output
    assert "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in result.output
    assert "GH302" in result.output and "RESTART_BM" not in result.output


def test_explain_xid_48_says_the_workflow_in_words():
    result = invoke("explain", "xid", "48")
    assert "follow NVIDIA's Xid 48 workflow" in result.output and "WORKFLOW_XID_48" not in result.output


def test_explain_unknown_xid_and_check_still_work():
    assert invoke("explain", "999").exit_code == 3
    result = invoke("explain", "GH206")
    assert result.exit_code == 0 and result.output.startswith("GH206 nouveau-loaded")


def test_check_from_a_file_that_is_not_a_bundle_suggests_analyze(tmp_path):
    log = tmp_path / "README.md"
    log.write_text("# not a bundle\n")
    result = invoke("check", "--from", str(log))
    assert result.exit_code == 3
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"gpuhealth analyze {log}" in lines[0] and "not a gpuhealth bundle" in lines[0]
    assert "tar" not in lines[0].lower().replace(".tar.gz", "")
    assert invoke("recommend", "--from", str(log)).exit_code == 3


def test_every_command_opens_a_bundle_the_same_way(tmp_path):
    """check, recommend, fix and diff open --from through advice_commands.open_bundle: one line, exit 3, the
    same words for a log given instead of a bundle and for a damaged archive."""
    log = tmp_path / "dmesg.txt"
    log.write_text("[ 1.0] NVRM: loading\n")
    broken = tmp_path / "bundle.tar.gz"
    broken.write_bytes(b"\x1f\x8b not really gzip")
    for path in (log, broken):
        said = set()
        for args in (["check", "--from"], ["recommend", "--from"], ["fix", "--from"]):
            result = invoke(*args, str(path))
            assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1, (args, result.output)
            said.add(result.output.strip())
        assert len(said) == 1, said
    damaged = invoke("diff", str(broken), str(broken))
    assert damaged.exit_code == 3 and damaged.output.strip() in said


# --------------------------------------------------------------------------- root causes from evidence


def test_lspci_two_gpus_and_smi_list_one_is_one_finding_without_a_driver_claim(tmp_path):
    """Real lines: two A100s of a gpud `lspci -nn` capture, and GPU 0 of its `nvidia-smi -L`."""
    lspci = tmp_path / "lspci.txt"
    lspci.write_text("".join([line + "\n" for line in LSPCI_A100.read_text().splitlines() if "10de:" in line][:2]))
    smi = tmp_path / "smi-L.txt"
    smi.write_text(next(line for line in SMI_LIST_A100.read_text().splitlines() if line.startswith("GPU 0:")) + "\n")
    document = json.loads(invoke("analyze", "--format", "json", str(lspci), str(smi)).output)
    critical = [f for f in document["findings"] if f["severity"] == "critical"]
    assert len(critical) == 1 and critical[0]["code"] == "GH102"
    assert "no driver bound" not in json.dumps(document)
    assert "which one is missing is unknown" in critical[0]["message"]


def test_352_bug_report_does_not_ask_for_modules_that_branch_lacked():
    result = invoke("fix", str(BUG_REPORT_352))
    assert result.exit_code == 0, result.output
    assert "nvidia_modeset" not in result.output and "nvidia_drm" not in result.output
    assert "sudo modprobe nvidia_uvm" in result.output  # nvidia-uvm existed: still asked for


def test_fix_from_evidence_sorts_modprobe_as_a_change(tmp_path):
    result = invoke("fix", str(BUG_REPORT_352))
    script = result.output
    assert "sudo modprobe nvidia_uvm || true" not in script
    assert script.index("# Changes") < script.index("sudo modprobe nvidia_uvm")


# --------------------------------------------------------------------------- recommend


def recommend_json(*args: str) -> dict:
    result = invoke("recommend", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# One GPU per architecture, Kepler to Blackwell: (GPU, architecture, branch, flavour). Branches and flavours
# from knowledge/drivers.csv: Kepler's last branch is 470, Maxwell/Pascal/Volta's 580 (proprietary only),
# Turing and newer take the Long Term Support branch 580 with the open modules (the default from R560),
# Blackwell needs them.
ARCHITECTURES = [
    ("10de:102d", "Kepler", 470, "proprietary"),
    ("Tesla M60", "Maxwell", 580, "proprietary"),
    ("10de:15f8", "Pascal", 580, "proprietary"),
    ("Tesla V100-PCIE-16GB", "Volta", 580, "proprietary"),
    ("Tesla T4", "Turing", 580, "open"),
    ("A100-SXM4-40GB", "Ampere", 580, "open"),
    ("NVIDIA GeForce RTX 4090", "Ada", 580, "open"),
    ("H100 80GB HBM3", "Hopper", 580, "open"),
    ("10de:2901", "Blackwell", 580, "open"),
]


@pytest.mark.parametrize(("gpu", "architecture", "branch", "flavour"), ARCHITECTURES)
def test_recommend_for_a_planned_gpu_of_every_architecture(gpu, architecture, branch, flavour):
    document = recommend_json("--gpu", gpu, "--os", "ubuntu-22.04")
    assert document["gpus"][0]["architecture"] == architecture
    assert (document["branch"]["number"], document["flavour"]) == (branch, flavour)
    assert document["cuda_max"] and document["wheel_index"].startswith("https://download.pytorch.org/whl/cu")
    assert document["install"]["distro"] == "Ubuntu 22.04"
    package = f"nvidia-driver-{branch}-server" + ("-open" if flavour == "open" else "")
    assert any(package in c["text"] for c in document["install"]["commands"])


def test_kepler_ends_at_470_and_blackwell_needs_open_modules():
    kepler = recommend_json("--gpu", "Tesla K80")
    assert kepler["branch"]["number"] == 470 and kepler["cuda_max"] == "11.4"
    blackwell = recommend_json("--gpu", "rtx 5090")
    assert blackwell["flavour"] == "open" and blackwell["gpus"][0]["open_modules"] == "required"
    assert any("open kernel modules" in note for note in blackwell["notes"])


def test_recommend_rhel_plan_and_the_same_gpu_by_id_and_name():
    by_id = recommend_json("--gpu", "10de:2330", "--os", "rocky-9")
    by_name = recommend_json("--gpu", "H100 80GB HBM3", "--os", "rocky-9")
    assert by_id["branch"] == by_name["branch"] and by_id["install"] == by_name["install"]
    assert any("nvidia-driver:580-open" in c["text"] for c in by_id["install"]["commands"])


def test_recommend_unknown_or_ambiguous_gpu_is_one_line_exit_3():
    result = invoke("recommend", "--gpu", "RTX 6000")  # Quadro RTX 6000 (Turing) or RTX 6000 Ada
    assert result.exit_code == 3 and "did you mean" in result.output and len(result.output.splitlines()) == 1
    assert invoke("recommend", "--gpu", "Voodoo 5").exit_code == 3
    assert recommend_json("--gpu", "A100")["gpus"][0]["architecture"] == "Ampere"  # every A100 is one answer


def test_recommend_from_an_lspci_paste():
    document = recommend_json(str(LSPCI_A100))
    assert document["gpus"][0]["architecture"] == "Ampere" and document["gpus"][0]["count"] == 8
    assert (document["branch"]["number"], document["flavour"]) == (580, "open")
    assert document["install"]["commands"]  # no distribution known: the .run route
    result = invoke("recommend", "-", stdin=LSPCI_A100.read_text())
    assert result.exit_code == 0 and "open kernel modules" in result.output


def test_recommend_text_has_no_fact_base_keys_and_commands_unwrapped():
    result = invoke("recommend", "--gpu", "H100 80GB HBM3", "--os", "rocky-9")
    assert not re.search(r"\bFACTS\b|facts\.md|\bDCDRV\b|\bCUDARN\b", result.output)
    repo = "sudo dnf config-manager --add-repo https://developer.download.nvidia.com/compute/cuda/repos/rhel9/"
    assert any(line.strip().startswith(repo) and line.strip().endswith(".repo") for line in result.output.splitlines())
    lines = result.output.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("# "):
            assert lines[i + 1].strip() and not lines[i + 1].strip().startswith("#")


def test_recommend_names_each_source_document_once():
    source = recommend_json("--gpu", "NVIDIA A10")["branch"]["source"]
    assert source.count("supported-drivers-and-cuda-toolkit-versions.html") == 1
    assert "(615 and 620 editions)" in source
