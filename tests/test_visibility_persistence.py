"""GH608 from pasted evidence (a visibility variable set in a script, a session or prose; MIG splitting the
GPUs) and GH604 from the container toolkit's timeout and a health agent's line. Real lines from the threads
named beside them; each rule also has a near miss that must stay quiet."""

from __future__ import annotations

import pytest

from conftest import CORPUS
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.facts import visible_devices_set
from gpuhealth.knowledge.signatures import match_line
from gpuhealth.model import Severity
from gpuhealth.report.common import fold
from repo_paths import REPO


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def lead(report) -> str:
    return fold(report.findings)[0].finding.code


def finding(report, code: str):
    found = [f for f in report.findings if f.code == code]
    return found[0] if found else None


# tensorflow/tensorflow#22816 (prose, spaces around '=' as the user typed it)
TF_EMPTY = ("However, the model runs extremely faster than before when I use the command "
            "`export CUDA_VISIBLE_DEVICES = '' `, in addition, I cannot find any program information with "
            "`nvidia-smi`.")
# pytorch/pytorch#130181
MIG_ASSERT = ('"device >= 0 && device < num_gpus INTERNAL ASSERT FAILED" with torch 2.5.0.dev20240705+cu121 on 2 GPU '
              "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb")
TORCH_ASSERT = ('"device >= 0 && device < num_gpus INTERNAL ASSERT FAILED" with torch 2.5.0.dev20240705+cu121 on 2 GPU '
                "NVIDIA-A100-SXM4-80GB")
# ollama/ollama#4814: two A100 80GB with MIG mode Enabled
MIG_TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 510.108.03   Driver Version: 510.108.03   CUDA Version: 11.6     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A100 80G...  Off  | 00000000:05:00.0 Off |                   On |
| N/A   44C    P0    66W / 300W |     48MiB / 81920MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA A100 80G...  Off  | 00000000:86:00.0 Off |                   On |
| N/A   34C    P0    67W / 300W |     45MiB / 81920MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+
"""


@pytest.mark.parametrize(("text", "found"), [
    ("export CUDA_VISIBLE_DEVICES=1", {"CUDA_VISIBLE_DEVICES": "1"}),  # thuml/Autoformer#25
    (TF_EMPTY, {"CUDA_VISIBLE_DEVICES": ""}),
    ('CUDA_VISIBLE_DEVICES="" python train.py', {"CUDA_VISIBLE_DEVICES": ""}),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "2"', {"CUDA_VISIBLE_DEVICES": "2"}),
    ("docker run -e NVIDIA_VISIBLE_DEVICES=all image", {"NVIDIA_VISIBLE_DEVICES": "all"}),
    # near misses: a read, not an assignment; another variable; a value the paste does not show
    ("echo $CUDA_VISIBLE_DEVICES", {}), ("MY_CUDA_VISIBLE_DEVICES=3", {}), ("export CUDA_VISIBLE_DEVICES=$GPU", {}),
])
def test_visible_devices_assignments(text, found):
    assert visible_devices_set(text) == found


def test_empty_visibility_in_prose_leads_without_a_gpu_count():
    report = report_of(("report.txt", TF_EMPTY + "\n"))
    assert lead(report) == "GH608"
    assert finding(report, "GH608").severity is Severity.WARNING


def test_an_index_is_not_judged_when_the_gpu_count_is_unknown():
    report = report_of(("run.sh", "export CUDA_VISIBLE_DEVICES=1\npython run.py\n"))
    assert finding(report, "GH608") is None


def test_an_index_beyond_the_gpus_in_a_session_is_judged():
    session = ("$ export CUDA_VISIBLE_DEVICES=2\n$ nvidia-smi -L\n"
               "GPU 0: NVIDIA GeForce RTX 2070 SUPER (UUID: GPU-0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6)\n")
    report = report_of(("session.txt", session))
    gh608 = finding(report, "GH608")
    assert gh608 is not None and "index 2" in gh608.message


def test_mig_named_in_a_failing_line_leads_and_explains_the_symptom():
    report = report_of(("report.txt", MIG_ASSERT + "\n"))
    assert lead(report) == "GH608"
    gh608 = finding(report, "GH608")
    assert gh608.severity is Severity.WARNING and "GH605" in gh608.explains


def test_the_same_assert_without_mig_stays_the_torch_symptom():
    report = report_of(("report.txt", TORCH_ASSERT + "\n"))
    assert finding(report, "GH608") is None
    assert lead(report) == "GH605"


def test_mig_enabled_on_several_gpus_is_information():
    report = report_of(("nvidia-smi.txt", MIG_TABLE))
    gh608 = finding(report, "GH608")
    assert gh608 is not None and gh608.severity is Severity.INFO
    assert lead(report) == "GH608"


def test_mig_disabled_is_quiet():
    table = MIG_TABLE.replace("Enabled", "Disabled")
    assert finding(report_of(("nvidia-smi.txt", table)), "GH608") is None


def test_one_mig_device_selected_is_quiet():
    snapshot, _ = analyze_texts([("nvidia-smi.txt", MIG_TABLE),
                                 ("s", "$ export CUDA_VISIBLE_DEVICES=MIG-4f8e2c1a-0b3d-5e6f-8a9b-0c1d2e3f4a5b\n")])
    assert finding(run_checks(snapshot), "GH608") is None


# --------------------------------------------------------------------------- GH604

# NVIDIA/nvidia-container-toolkit#202, NVIDIA/nvidia-docker#723 (without "rpc")
CTK_TIMEOUT = "nvidia-container-cli: initialization error: driver rpc error: timed out: unknown."
CTK_TIMEOUT_OLD = "nvidia-container-cli: initialization error: driver error: timed out"
# Azure/cyclecloud-slurm-workspace#349
AGENT = "Persistence Mode not set for GPU: 0, Restart nvidia-persistenced or Reboot the system."


@pytest.mark.parametrize(("line", "row"), [
    (CTK_TIMEOUT, "ctk-driver-timed-out"), (CTK_TIMEOUT_OLD, "ctk-driver-timed-out"),
    (AGENT, "healthagent-persistence-not-set"),
    ("Persistence Mode not set for GPU 0", "healthagent-persistence-not-set"),
])
def test_persistence_rows_match(line, row):
    sig = match_line(line)
    assert sig is not None and sig.id == row and sig.code == "GH604"


@pytest.mark.parametrize("line", [
    "nvidia-container-cli: initialization error: driver error: failed to process request",
    "Persistence Mode set for GPU 0", "Persistence Mode : Enabled",
])
def test_persistence_rows_near_misses(line):
    sig = match_line(line)
    assert sig is None or sig.code != "GH604"


def test_container_timeout_leads_with_persistence_at_the_symptoms_severity():
    report = report_of(("session.txt", f"$ docker run --runtime=nvidia --rm nvidia/cuda nvidia-smi\n{CTK_TIMEOUT}\n"))
    assert lead(report) == "GH604"
    assert finding(report, "GH604").severity is Severity.CRITICAL


def test_health_agent_line_is_a_persistence_warning():
    report = report_of(("healthagent.log", AGENT + "\n"))
    assert lead(report) == "GH604" and finding(report, "GH604").severity is Severity.WARNING


def test_an_unjudged_index_leaves_the_cause_open_in_the_differential():
    # thuml/Autoformer#25: the script exports CUDA_VISIBLE_DEVICES=1; the paste shows PyTorch seeing no GPU
    session = ("$ export CUDA_VISIBLE_DEVICES=1\n"
               "$ python -c 'import torch; print(torch.cuda.is_available())'\nFalse\n")
    report = report_of(("session.txt", session))
    assert finding(report, "GH608") is None
    assert any(s.code == "GH608" and "how many GPUs" in s.reason for s in report.skipped)
    (gh605,) = [f for f in report.findings if f.code == "GH605"]
    visibility = [c for c in gh605.differential if c.code == "GH608"]
    assert visibility and visibility[0].status == "open"


def test_mig_devices_listed_by_nvidia_smi_l_are_information():
    text = (CORPUS / "nvidia-gpu-exporter" / "list_gpus_8xH100_mig.txt").read_text()
    report = report_of(("nvidia-smi-L.txt", text))
    gh608 = finding(report, "GH608")
    assert gh608 is not None and gh608.severity is Severity.INFO
    assert "MIG devices" in gh608.evidence[0].lines[0]


# A pasted `nvidia-smi -q` alone: no systemctl state. Real captures: Azure HPC diagnostics (8x A100, all Disabled)
# and gpud's 8x H100 (all Enabled); the MIG case is ollama/ollama#4814 (tests/cases).
A100_DISABLED = "azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out"
H100_ENABLED = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid"
MIG_CASE = REPO / "tests" / "cases" / "dev" / "mig-one-instance-visible-ollama-4814" / "nvidia-smi.txt"
GEFORCE_TABLE = REPO / "tests" / "cases" / "dev" / "persistence-mode-idle-p0-rtx3070-shine-cluster-54" / "session.txt"


def pasted(path) -> object:
    return report_of((path.name, path.read_text(encoding="utf-8", errors="replace")))


def test_pasted_datacenter_smi_with_persistence_off_warns():
    report = pasted(CORPUS / A100_DISABLED)
    found = finding(report, "GH604")
    assert found is not None and found.severity is Severity.WARNING, "8x A100 with persistence off said HEALTHY"
    assert "not in the evidence given" in found.message and report.verdict == "DEGRADED"
    assert found.fixes[0].command == "sudo systemctl enable --now nvidia-persistenced"


def test_pasted_smi_with_persistence_on_is_quiet():
    assert finding(pasted(CORPUS / H100_ENABLED), "GH604") is None


def test_mig_gpus_with_persistence_off_leave_the_lead_to_the_mig_finding():
    report = pasted(MIG_CASE)
    assert finding(report, "GH604").severity is Severity.INFO
    assert lead(report) == "GH608"


def test_a_pasted_table_with_persistence_off_names_the_paste_as_its_evidence():
    # lyulyul/shine-cluster#54: idle GeForce cards at P0 with Persistence-M Off; GeForce stays information
    report = pasted(GEFORCE_TABLE)
    found = finding(report, "GH604")
    assert found.severity is Severity.INFO and lead(report) == "GH604"
    assert found.evidence[0].source == "session.txt: $ nvidia-smi"  # the user's paste, not an nvidia-smi -q
