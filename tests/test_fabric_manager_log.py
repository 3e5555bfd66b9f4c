"""Fabric Manager's own log read as Fabric Manager's, and CUDA's error 802 named by the platform the evidence shows.

Every line here is written for this test from the shapes the sources give, not copied from an evaluation case:
- Fabric Manager's log, /var/log/fabricmanager.log: "[Mon DD YYYY HH:MM:SS] [LEVEL] [tid N] message" (NVIDIA Fabric
  Manager User Guide, Fabric Manager Config Options: LOG_LEVEL, LOG_FILE_NAME), as DigitalOcean's support page on
  error 802 ("How do I fix a system not initialized error on multi-GPU Droplets?") quotes its lines, and as people
  paste it with the time stamp (or the thread id too) cut off;
- error 802 in its forms: the runtime's enum name and number (CUDA Runtime API, cudaErrorSystemNotReady), the driver
  API's (CUDA_ERROR_SYSTEM_NOT_READY), PyTorch's cudaGetDeviceCount warning (c10/cuda/CUDAFunctions.cpp), NCCL's
  "Cuda failure 802" WARN line and an NGC container's start-up banner (both as the DigitalOcean page quotes them);
- nvidia-smi -L lines in the form nvidia-smi prints them, for an HGX H100 board and for a GeForce card.
"""

from __future__ import annotations

import pytest

import mined_helpers
from gpuhealth.analyze import analyze_texts
from gpuhealth.model import Finding, Report, Severity

STAMP = "[Jun 03 2025 08:14:02] "
INFO = STAMP + "[INFO] [tid 2210] "
ERROR = STAMP + "[ERROR] [tid 2210] "
STARTED = INFO + "Fabric Manager version 550.127.05 is running with the following configuration options\n"
CONFIGURED = INFO + "Successfully configured all the available NVSwitches to route GPU NVLink traffic.\n"

PYTORCH_802 = ("/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: "
               "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
               "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized "
               "(Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)\n")


def report(text: str) -> Report:
    return mined_helpers.report(text, "paste.txt")


def kinds(text: str) -> list[str | None]:
    _, recognised = analyze_texts([("fabricmanager.log", text)])
    return [r.kind for r in recognised]


def gh210(result: Report) -> Finding:
    assert result.findings and result.findings[0].code == "GH210", [(f.code, f.message) for f in result.findings]
    return result.findings[0]


def commands(finding: Finding) -> list[str]:
    return [f.command for f in finding.fixes]


# --------------------------------------------------------------------------- the log itself

def test_a_healthy_log_is_fabric_managers_and_raises_nothing():
    text = STARTED + INFO + "Logging level = 4\n" + CONFIGURED
    assert kinds(text) == ["fabricmanager-log"]
    result = report(text)
    assert result.verdict == "HEALTHY", [(f.code, f.message) for f in result.findings]
    assert "GH210" not in {s.code for s in result.skipped}  # it ran on the log (the service set the fabric up)


def test_the_older_success_line_counts_too():
    text = STARTED + INFO + "Successfully configured all the available GPUs and NVSwitches.\n"
    assert report(text).verdict == "HEALTHY"


def test_a_log_that_says_neither_success_nor_error_is_not_healthy():
    """A start-up cut short (or a stretch of INFO lines) says nothing of the fabric: never HEALTHY."""
    result = report(STARTED + INFO + "Logging level = 4\n")
    assert result.verdict == "NO DIAGNOSIS"


def test_an_error_after_the_success_line_is_not_healthy():
    text = STARTED + CONFIGURED + ERROR + "detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id " \
        "00000000:86:00.0 physical id 3 port 61\n"
    result = report(text)
    assert result.verdict != "HEALTHY"
    finding = gh210(result)
    assert "non-fatal error 12028" in finding.message
    assert "GH003" not in {f.code for f in result.findings}


@pytest.mark.parametrize("level", ["WARNING", "INFO"])
def test_warning_and_info_lines_are_the_logs_own(level: str):
    text = STARTED + STAMP + f"[{level}] [tid 2210] a line of the log at this level\n" + CONFIGURED
    assert kinds(text) == ["fabricmanager-log"]
    assert not [f for f in report(text).findings if f.code in ("GH002", "GH003")]


@pytest.mark.parametrize("prefix", [ERROR, "[ERROR] [tid 2210] ", "[ERROR] "])
def test_an_error_line_of_fabric_manager_is_never_unknown_however_it_was_cut(prefix: str):
    text = prefix + "fabric manager could not finish the configuration of the NVSwitches on this node\n"
    result = report(text)
    codes = [f.code for f in result.findings]
    assert "GH003" not in codes, codes
    finding = gh210(result)
    assert finding.severity is Severity.WARNING  # nothing says it is down: its word, and the looks that decide
    assert "systemctl status nvidia-fabricmanager" in commands(finding)


def test_a_bare_error_line_of_another_program_is_not_claimed():
    """Without Fabric Manager's thread id, only a line naming Fabric Manager, an NVSwitch or NVLink is its."""
    result = report("[ERROR] connection to the license server was refused\n")
    assert "GH210" not in {f.code for f in result.findings}


def test_a_version_mismatch_in_the_log_keeps_its_own_fix():
    text = STARTED + ERROR + ("fabric manager NVIDIA GPU driver interface version 550.127.05 don't match with driver "
                              "version 550.90.07. Please update with matching NVIDIA driver package.\n")
    finding = gh210(report(text))
    assert finding.severity is Severity.CRITICAL
    assert "sudo systemctl start nvidia-fabricmanager" in commands(finding)
    assert any("apt-cache madison" in c for c in commands(finding))


def test_the_log_routed_by_its_command():
    _, recognised = analyze_texts([("session.txt", "$ sudo tail -n 20 /var/log/fabricmanager.log\n" + STARTED
                                    + CONFIGURED)])
    assert "fabricmanager-log" in [r.kind for r in recognised]


# --------------------------------------------------------------------------- error 802

@pytest.mark.parametrize("line", [
    PYTORCH_802,
    "CUDA error at train.cu:88 code=802(cudaErrorSystemNotReady) \"cudaSetDevice(0)\"\n",
    "cuInit returned CUDA_ERROR_SYSTEM_NOT_READY\n",
    "gpu-07:31122:31180 [3] transport/nvls.cc:254 NCCL WARN Cuda failure 802 'system not yet initialized'\n",
    "ERROR: The NVIDIA Driver is present, but CUDA failed to initialize.  GPU functionality will not be available.\n"
    "   [[ System not yet initialized (error 802) ]]\n",
])
def test_every_form_of_802_leads_with_fabric_manager(line: str):
    result = report(line)
    finding = gh210(result)
    assert finding.severity is Severity.CRITICAL
    assert "error 802" in finding.message
    assert not [f for f in result.findings if f.code == "GH003"]


def _smi_list(name: str, count: int) -> str:
    return "$ nvidia-smi -L\n" + "".join(f"GPU {i}: {name} (UUID: GPU-{i:08x}-1111-2222-3333-444455556666)\n"
                                         for i in range(count))


def test_802_with_no_platform_names_the_looks_that_decide_first():
    finding = gh210(report(PYTORCH_802))
    assert "not in the evidence" in finding.message
    fixes = commands(finding)
    assert fixes[:2] == ["systemctl status nvidia-fabricmanager", "nvidia-smi -q | grep -A2 -i fabric"]
    assert "sudo systemctl enable --now nvidia-fabricmanager" in fixes  # the usual cause's procedure follows


def test_802_on_an_hgx_board_names_the_board():
    text = _smi_list("NVIDIA H100 80GB HBM3", 8) + "$ python train.py\n" + PYTORCH_802
    finding = gh210(report(text))
    assert finding.severity is Severity.CRITICAL
    assert "HGX H100" in finding.message and "not in the evidence" not in finding.message
    assert "sudo systemctl enable --now nvidia-fabricmanager" in commands(finding)


def test_802_on_a_named_instance_type_names_the_instance():
    text = "$ curl -s http://169.254.169.254/latest/meta-data/instance-type\np4d.24xlarge\n$ python train.py\n" \
        + PYTORCH_802
    finding = gh210(report(text))
    assert "p4d" in finding.message


def test_802_on_a_pcie_card_is_only_the_hypothesis_with_the_looks_that_decide():
    """A negative: the GPU list shows a GeForce card, which no NVSwitch board carries. Fabric Manager is then named as
    the hypothesis, with the two looks that decide it, and nothing is installed."""
    text = _smi_list("NVIDIA GeForce RTX 4090", 1) + "$ python train.py\n" + PYTORCH_802
    finding = gh210(report(text))
    assert "only the hypothesis" in finding.message
    assert "GeForce RTX 4090" in finding.message
    assert commands(finding) == ["systemctl status nvidia-fabricmanager", "nvidia-smi -q | grep -A2 -i fabric"]


def test_802_while_the_service_runs_resets_the_gpus_and_restarts_it():
    status = ("● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
              "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled)\n"
              "     Active: active (running) since Tue 2025-06-03 08:14:06 UTC; 2h ago\n")
    snapshot, _ = analyze_texts([("status.txt", status), ("train.log", PYTORCH_802)])
    from gpuhealth.checks.engine import run_checks

    finding = gh210(run_checks(snapshot))
    assert "while nvidia-fabricmanager is active" in finding.message
    fixes = commands(finding)
    assert "sudo nvidia-smi -r" in fixes and "sudo systemctl restart nvidia-fabricmanager" in fixes
    assert not any("apt-get install" in c for c in fixes)


# --------------------------------------------------------------------------- NVSwitch boards Fabric Manager cannot see

NOTHING_TO_DO = ("Jun 03 08:14:02 node-3 nv-fabricmanager[3194]: request to query NVSwitch device information from "
                 "NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n")


@pytest.mark.parametrize("name", ["NVIDIA H20", "NVIDIA A800-SXM4-80GB", "NVIDIA H800 80GB HBM3"])
def test_nothing_to_do_on_an_nvswitch_board_is_nvswitches_not_seen(name: str):
    """Eight SXM GPUs of an HGX board (H20, A800 and H800 boards too) carry NVSwitches: Fabric Manager finding none
    there is not the harmless answer of a PCIe host."""
    finding = gh210(report(_smi_list(name, 8) + "$ journalctl -u nvidia-fabricmanager\n" + NOTHING_TO_DO))
    assert finding.severity is Severity.CRITICAL
    assert "found no NVSwitch" in finding.message and "8 x " in finding.message


def test_nothing_to_do_on_one_sxm_gpu_stays_quiet():
    """One GPU of a board (a VM given part of it) makes no platform: Fabric Manager's answer is left as it is."""
    result = report(_smi_list("NVIDIA H20", 1) + "$ journalctl -u nvidia-fabricmanager\n" + NOTHING_TO_DO)
    assert "GH210" not in {f.code for f in result.findings if f.severity is Severity.CRITICAL}


def test_802_on_eight_h20_names_the_board():
    finding = gh210(report(_smi_list("NVIDIA H20", 8) + "$ python train.py\n" + PYTORCH_802))
    assert "HGX H20" in finding.message


# --------------------------------------------------------------------------- the platform from nvidia-smi topo -m

@pytest.mark.parametrize("matrix", ["ml-engineering/topo-m_8xA100_NV12.txt", "ml-engineering/topo-m_8xH100_NV18.txt"])
def test_802_beside_an_nvswitch_topology_names_the_fabric(matrix: str, corpus):
    """Real nvidia-smi topo -m outputs (the corpus, with their source notes): every GPU pair bonded by 12 or 18
    NVLinks is an NVSwitch system."""
    text = "$ nvidia-smi topo -m\n" + (corpus / matrix).read_text() + "$ python train.py\n" + PYTORCH_802
    finding = gh210(report(text))
    assert "every GPU pair joined by NVLink" in finding.message, finding.message
    assert "sudo systemctl enable --now nvidia-fabricmanager" in commands(finding)


def test_two_gpus_on_a_bridge_are_no_nvswitch_topology():
    """A pair joined by an NVLink bridge (H100 NVL: NV12) is no NVSwitch system: two GPUs decide nothing."""
    matrix = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\nGPU0     X      NV12    0-31    0\n"
              "GPU1    NV12     X      0-31    0\n")
    finding = gh210(report("$ nvidia-smi topo -m\n" + matrix + "$ python train.py\n" + PYTORCH_802))
    assert "every GPU pair joined by NVLink" not in finding.message


# --------------------------------------------------------------------------- Fabric Manager of another version

PROC_VERSION = ("$ cat /proc/driver/nvidia/version\nNVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  "
                "Fri May 31 09:35:42 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
DPKG = ("$ dpkg -l | grep -i nvidia\n"
        "ii  nvidia-driver-550-server  550.90.07-0ubuntu0.22.04.1  amd64  NVIDIA Server Driver metapackage\n"
        "ii  nvidia-fabricmanager-550  {fm}-1  amd64  Fabric Manager for NVSwitch based systems.\n")


def _mismatch(result: Report) -> list[Finding]:
    return [f for f in result.findings if f.code == "GH210" and "is not the loaded driver's version" in f.message]


def test_a_fabric_manager_package_of_another_version_than_the_module():
    (finding,) = _mismatch(report(PROC_VERSION + DPKG.format(fm="550.127.05")))
    assert finding.severity is Severity.WARNING  # no platform shown: the condition, named
    assert "550.127.05" in finding.message and "550.90.07" in finding.message
    assert any("apt-cache madison" in c for c in commands(finding))


def test_the_same_mismatch_on_an_hgx_board_is_critical_and_on_a_geforce_is_not():
    (board,) = _mismatch(report(_smi_list("NVIDIA H100 80GB HBM3", 8) + PROC_VERSION + DPKG.format(fm="550.127.05")))
    assert board.severity is Severity.CRITICAL
    (card,) = _mismatch(report(_smi_list("NVIDIA GeForce RTX 4090", 1) + PROC_VERSION + DPKG.format(fm="550.127.05")))
    assert card.severity is Severity.INFO


def test_a_fabric_manager_of_the_drivers_version_raises_nothing():
    assert not _mismatch(report(PROC_VERSION + DPKG.format(fm="550.90.07")))


def test_the_rpm_package_and_the_logs_version_line_are_read_too():
    rpm = ("$ rpm -qa | grep -i nvidia\nnvidia-fabric-manager-550.127.05-1.x86_64\n"
           "nvidia-driver-550.90.07-1.el9.x86_64\n")
    assert _mismatch(report(PROC_VERSION + rpm))
    log = "$ sudo cat /var/log/fabricmanager.log\n" + STARTED + ERROR + "fabric manager exiting on an error\n"
    (finding,) = _mismatch(report(PROC_VERSION + log))  # its log names 550.127.05
    assert finding.severity is Severity.CRITICAL  # beside its own error line


def test_a_unit_shown_running_is_not_contradicted_by_a_package_version():
    status = ("$ systemctl status nvidia-fabricmanager\n"
              "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
              "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled)\n"
              "     Active: active (running) since Tue 2025-06-03 08:14:06 UTC; 2h ago\n")
    assert not _mismatch(report(PROC_VERSION + DPKG.format(fm="550.127.05") + status))


# --------------------------------------------------------------------------- the look that decides, pasted back

def _grep_fabric(state: str, status: str, count: int = 8) -> str:
    """`nvidia-smi -q | grep -A2 -i fabric` as grep prints it: each GPU's Fabric section, "--" between them."""
    block = (f"    Fabric\n        State                             : {state}\n"
             f"        Status                            : {status}\n")
    return "$ nvidia-smi -q | grep -A2 -i fabric\n" + "--\n".join([block] * count)


def test_the_fabric_excerpt_gpuhealth_asks_for_is_read():
    result = report(_grep_fabric("In Progress", "N/A"))
    finding = gh210(result)
    assert "8 GPU(s) have not joined the NVLink fabric" in finding.message
    assert "(None)" not in " ".join(line for e in finding.evidence for line in e.lines)
    assert not [f for f in result.findings if f.code in ("GH002", "GH004")]


def test_every_gpu_in_the_fabric_raises_nothing():
    result = report(_grep_fabric("Completed", "Success"))
    assert result.verdict == "HEALTHY", [(f.code, f.message) for f in result.findings]


def test_802_beside_gpus_waiting_for_the_fabric_is_critical_with_their_states():
    finding = gh210(report(_grep_fabric("In Progress", "N/A") + "$ python train.py\n" + PYTORCH_802))
    assert finding.severity is Severity.CRITICAL
    assert any("State: In Progress" in line for e in finding.evidence for line in e.lines)


def test_802_beside_the_nvswitch_drivers_probe_lines_names_the_fabric():
    """The kernel's NVSwitch driver prints a probe line per NVSwitch (open-gpu-kernel-modules linux_nvswitch.c,
    nvswitch_probe): machine output that the host has NVSwitches."""
    dmesg = ("$ sudo dmesg | grep -i nvswitch\n"
             "[    6.412398] nvidia-nvswitch: Probing device 0000:05:00.0, Vendor Id = 0x10de, Device Id = 0x22a3, "
             "Class = 0x68000\n[    6.431100] nvidia-nvswitch0: using MSI\n"
             "[    6.512398] nvidia-nvswitch: Probing device 0000:06:00.0, Vendor Id = 0x10de, Device Id = 0x22a3, "
             "Class = 0x68000\n")
    finding = gh210(report(dmesg + "$ python train.py\n" + PYTORCH_802))
    assert "NVSwitch driver probed" in finding.message and "2 NVSwitch device(s)" in finding.message
    assert "not in the evidence" not in finding.message


def test_a_failed_unit_on_eight_h20s_is_critical():
    """An H20's name holds no SXM word: the board is known from the eight GPUs (nvswitch_platforms.csv), so the failed
    unit is the fault it is on any HGX board, not a quiet (HEALTHY) report."""
    status = ("$ systemctl status nvidia-fabricmanager\n"
              "× nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
              "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled)\n"
              "     Active: failed (Result: exit-code) since Wed 2025-06-04 10:15:55 UTC; 1min ago\n")
    finding = gh210(report(_smi_list("NVIDIA H20", 8) + status))
    assert finding.severity is Severity.CRITICAL
