"""States a program's output shows rule causes out of a symptom's differential (knowledge/states_rule_out.csv,
checks/machine_state.py); a person's words never do, and words that a program's output contradicts yield to it.

The pastes below are written for these tests (hand-written in the tools' documented formats: nvidia-smi's table,
``lsmod``, ``ls -l /dev/nvidia*``, ``/proc/driver/nvidia/version``, ``docker info``), not taken from a case."""

from __future__ import annotations

import dataclasses

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import OPEN, RULED_OUT, SHOWN_BY, diagnose
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.machine_state import STATES, contradicted, held_states, ruled_out
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge.causes import state_exclusions, symptoms
from gpuhealth.model import ReportedFact, Severity, Skipped, Snapshot

SMI_FAILS = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
             "that the latest NVIDIA driver is installed and running.\n")
SMI_TABLE = """$ nvidia-smi
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-40GB          On  |   00000000:07:00.0 Off |                    0 |
| N/A   30C    P0             52W /  400W |       0MiB /  40960MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""
LSMOD = """$ lsmod | grep nvidia
nvidia_uvm           1437696  0
nvidia_drm             77824  0
nvidia_modeset       1302528  1 nvidia_drm
nvidia              56004608  2 nvidia_uvm,nvidia_modeset
"""
PROC_VERSION = """$ cat /proc/driver/nvidia/version
NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024
GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)
"""
DEV_NODES = """$ ls -l /dev/nvidia*
crw-rw-rw- 1 root root 195,   0 Dec  7 10:00 /dev/nvidia0
crw-rw-rw- 1 root root 195, 255 Dec  7 10:00 /dev/nvidiactl
crw-rw-rw- 1 root root 508,   0 Dec  7 10:00 /dev/nvidia-uvm
crw-rw-rw- 1 root root 508,   1 Dec  7 10:00 /dev/nvidia-uvm-tools
"""
TORCH_FALSE = '$ python -c "import torch; print(torch.cuda.is_available())"\nFalse\n'
ERROR_803 = ("$ python train.py\nRuntimeError: CUDA error: system has unsupported display driver / cuda driver "
             "combination\n")
WORDS_NOT_LOADED = "After the reboot the nvidia kernel module did not load.\n"


def report_of(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", text) for i, text in enumerate(texts)])
    return run_checks(snapshot)


def candidates(*texts: str) -> dict[str, object]:
    """cause id -> Candidate, over every finding's differential."""
    return {c.cause: c for f in report_of(*texts).findings for c in f.differential}


# --------------------------------------------------------------------------- the table


def test_every_state_of_the_table_has_a_reader_and_every_reader_a_row():
    assert {row.state for row in state_exclusions()} == set(STATES)


def test_every_row_is_sourced_and_rules_out_a_cause_of_a_symptom_it_may_apply_to():
    table = symptoms()
    for row in state_exclusions():
        assert row.why and row.source_title and row.source_url.startswith("https://")
        for cause in row.causes:
            open_to = [s for s in table.values() if s.id not in row.not_for | row.contradicts
                       and cause in {c.id for c in s.causes}]
            assert open_to, f"{row.state} rules out {cause} for no symptom"


# --------------------------------------------------------------------------- states rule causes out


def test_the_uvm_node_listed_rules_out_the_uvm_module_missing_with_its_reason_and_source():
    without = candidates(TORCH_FALSE)
    assert without["uvm-missing"].status == OPEN
    shown = candidates(TORCH_FALSE, DEV_NODES)["uvm-missing"]
    assert shown.status == RULED_OUT
    assert SHOWN_BY in shown.why and "/dev/nvidia-uvm" in shown.why
    assert "device-node-verification" in shown.source


def test_lsmod_listing_nvidia_rules_out_the_module_causes_of_nvidia_smi_failing():
    """The module is loaded while nvidia-smi cannot reach it: not a module that was not built or Secure Boot refused;
    what is left is what keeps a loaded module from answering."""
    without = candidates(SMI_FAILS)
    assert without["module-not-built"].status == OPEN and without["secure-boot-refused"].status == OPEN
    shown = candidates(SMI_FAILS, LSMOD)
    for cause in ("module-not-built", "secure-boot-refused"):
        assert shown[cause].status == RULED_OUT, cause
        assert "lsmod" in shown[cause].why
    assert shown["device-nodes-missing"].status == OPEN
    lead = next(f for f in report_of(SMI_FAILS, LSMOD).findings if f.differential)
    assert "not built" not in lead.message


def test_a_state_that_contradicts_the_symptom_is_another_moment_and_rules_nothing_out():
    """nvidia-smi failing and nvidia-smi answering in one paste: before and after a fix. The working table says
    nothing of why it failed."""
    shown = candidates(SMI_FAILS, SMI_TABLE)
    assert shown["module-not-built"].status == OPEN
    assert shown["secure-boot-refused"].status == OPEN


def test_nvidia_smi_answering_rules_out_the_module_causes_of_a_program_without_a_gpu():
    shown = candidates(TORCH_FALSE, SMI_TABLE)
    assert shown["driver-not-loaded"].status == RULED_OUT


def test_docker_info_listing_the_nvidia_runtime_rules_out_the_toolkit_not_configured():
    held = {"docker-info-nvidia-runtime": "docker info: Runtimes: nvidia runc"}
    assert "container-toolkit-missing" in ruled_out("container-no-gpu", held)
    assert ruled_out("container-no-gpu", {}) == {}


def test_not_for_keeps_a_loaded_module_from_ruling_out_nouveau_on_a_missing_gpu():
    held = {"nvidia-smi-answers": "nvidia-smi: lists 1 GPU(s)"}
    assert "nouveau-bound" in ruled_out("login-loop", held)
    assert "nouveau-bound" not in ruled_out("gpu-missing", held)
    assert contradicted("driver-unreachable", held)
    assert ruled_out("driver-unreachable", held) == {}


LSPCI_K = """$ lspci -nnk -d 10de:
07:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 40GB] [10de:20b0] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:134f]
\tKernel driver in use: nvidia
\tKernel modules: nvidiafb, nouveau, nvidia_drm, nvidia
"""
WORDS_FEWER = "nvidia-smi only shows one GPU but the server has two.\n"


def test_nvidia_smi_listing_every_gpu_on_the_bus_leaves_only_a_gpu_gone_from_the_bus():
    """Told that a GPU is missing, with nvidia-smi listing as many GPUs as lspci shows: every GPU on the bus was taken
    and initialised, so what is left is a GPU that is not on the bus at all (fallen off, or its link failed)."""
    assert "nvidia-smi-lists-every-pci-gpu" in held_states(analyze_texts([("p.txt", SMI_TABLE + LSPCI_K)])[0])
    shown = candidates(WORDS_FEWER, SMI_TABLE, LSPCI_K)
    for cause in ("rminit-failed", "pci-bar-failure", "nouveau-bound", "gpu-bound-to-vfio", "driver-gpu-unsupported"):
        assert shown[cause].status == RULED_OUT, cause
    assert shown["gpu-fallen-off-bus"].status == OPEN
    assert candidates(WORDS_FEWER)["rminit-failed"].status == OPEN


# --------------------------------------------------------------------------- words never rule out; they yield


def test_words_fill_no_state():
    """A fact read from a person's sentences is not machine output: held_states reads the machine-only snapshot."""
    snapshot = Snapshot(origin="evidence", kernel_modules=("nvidia",),
                        reported=(ReportedFact("kernel_modules", (), "the nvidia module is loaded",
                                               "lsmod shows nvidia", "paste.txt"),))
    assert "lsmod-lists-nvidia" not in held_states(snapshot)
    assert "lsmod-lists-nvidia" in held_states(dataclasses.replace(snapshot, reported=()))


def test_words_that_the_module_is_not_loaded_yield_to_its_version_file():
    told = report_of(WORDS_NOT_LOADED)
    assert any(f.code == "GH201" and f.severity is Severity.WARNING for f in told.findings)
    both = report_of(WORDS_NOT_LOADED, PROC_VERSION)
    assert not any(f.code == "GH201" for f in both.findings)
    assert not any(f.code == "GH201" for f in report_of(WORDS_NOT_LOADED, LSMOD).findings)


def test_the_driver_version_file_rules_out_the_module_not_loaded():
    """Without the PCI bus GH201 does not run, yet the module's own version file shows it loaded: "the module is not
    loaded" is ruled out by that file, not left "not checked"."""
    ruled = candidates(TORCH_FALSE, PROC_VERSION)["driver-not-loaded"]
    assert ruled.status == RULED_OUT
    assert "/proc/driver/nvidia/version" in ruled.why and "nv-procfs.c" in ruled.source
    assert candidates(TORCH_FALSE)["driver-not-loaded"].status == OPEN


def test_another_module_failing_to_load_beside_a_loaded_nvidia_is_not_healthy():
    """modprobe failing for nvidia_uvm while lsmod lists nvidia: the failure is machine output and stays a finding."""
    fails = "$ sudo modprobe nvidia-uvm\nmodprobe: ERROR: could not insert 'nvidia_uvm': Unknown symbol in module, " \
            "or unknown parameter (see dmesg)\n"
    lsmod = "$ lsmod | grep nvidia\nnvidia_modeset       1302528  0\nnvidia              56004608  1 nvidia_modeset\n"
    report = report_of(fails + lsmod)
    assert report.verdict != "HEALTHY"
    assert any(f.severity is Severity.CRITICAL for f in report.findings)


# --------------------------------------------------------------------------- elimination names the one left


def test_when_a_state_leaves_one_check_that_check_leads_by_elimination():
    """CUDA error 803 with nvidia-smi answering: the driver upgraded without a reload is ruled out (here by the
    nvidia-smi state alone: GH202 is made to have been skipped), and the two causes left are both GH603's."""
    snapshot, _ = analyze_texts([("paste.txt", ERROR_803 + SMI_TABLE)])
    skipped = [Skipped("GH202", "driver-library-mismatch", "not in the evidence given"),
               Skipped("GH603", "stale-libcuda", "not in the evidence given")]
    findings = diagnose([], skipped, set(REGISTRY), snapshot)
    lead = next(f for f in findings if f.differential)
    status = {c.cause: c for c in lead.differential}
    assert status["driver-library-mismatch"].status == RULED_OUT
    assert "nvidia-smi" in status["driver-library-mismatch"].why
    assert lead.code == "GH603"
    assert "most likely" in lead.message


@pytest.mark.parametrize("state", sorted(STATES))
def test_an_empty_snapshot_holds_no_state(state: str):
    assert STATES[state](Snapshot(origin="evidence")) is None
