"""Fabric Manager's own messages say why it did not start, and GH210 leads with that reason and its fix.

The lines are written here from the shapes the sources give: Fabric Manager's log (/var/log/fabricmanager.log:
"[date] [ERROR] [tid N] message"), the unit's journal with its start script nvidia-fabricmanager-start.sh, the
NVLink 5 prerequisites of the NVIDIA Fabric Manager User Guide (ib_umad, the nvlsm package), and rdma-core's
libibumad umad_init warning as nvlsm prints it. Nothing here is copied from an evaluation case."""

from __future__ import annotations

import pytest

import mined_helpers
from gpuhealth.model import Finding, Report

FM_LOG = "[Mar 02 2025 09:12:44] [ERROR] [tid 4021] "
JOURNAL = "Mar 02 09:12:44 hgx-b200-07 "
FAILED = (f"{JOURNAL}systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, "
          "status=1/FAILURE\n"
          f"{JOURNAL}systemd[1]: nvidia-fabricmanager.service: Failed with result 'exit-code'.\n"
          f"{JOURNAL}systemd[1]: Failed to start NVIDIA fabric manager service.\n")


def report(text: str) -> Report:
    return mined_helpers.report(text, "paste.txt")


def gh210(text: str) -> Finding:
    result = report(text)
    assert result.findings and result.findings[0].code == "GH210", [(f.code, f.message) for f in result.findings]
    return result.findings[0]


def commands(finding: Finding) -> list[str]:
    return [f.command for f in finding.fixes]


@pytest.mark.parametrize("ending", ["cannot be started", "cannot start"])
def test_ib_umad_not_loaded_in_the_units_journal_names_the_module_and_its_fix(ending: str):
    text = (f"{JOURNAL}systemd[1]: Starting NVIDIA fabric manager service...\n"
            f"{JOURNAL}nvidia-fabricmanager-start.sh[3190]: Detected NVL5+ system\n"
            f'{JOURNAL}nvidia-fabricmanager-start.sh[3190]: Kernel module "ib_umad" has not been loaded, fabric '
            f"manager {ending}\n" + FAILED)
    finding = gh210(text)
    assert "ib_umad kernel module is not loaded" in finding.message
    fixes = commands(finding)
    assert "sudo modprobe ib_umad" in fixes
    assert "echo ib_umad | sudo tee /etc/modules-load.d/ib_umad.conf" in fixes
    # the version procedure is not this failure's fix
    assert not any("nvidia-fabricmanager-$(" in c for c in fixes)
    shown = [line for e in finding.evidence for line in e.lines]
    assert len(shown) == len(set(shown)), shown  # the journal's lines are not shown twice


def test_the_start_scripts_line_alone_is_enough():
    finding = gh210('Kernel module "ib_umad" has not been loaded, fabric manager cannot be started\n')
    assert "sudo modprobe ib_umad" in commands(finding)


def test_nvlsm_without_ib_umad_is_the_same_prerequisite_but_any_ibstat_warning_is_not():
    nvlsm = ("nvlsm: ibwarn: [15] umad_init: can't read ABI version from /sys/class/infiniband_mad/abi_version "
             "(No such file or directory): is ib_umad module loaded?\n")
    assert "sudo modprobe ib_umad" in commands(gh210(nvlsm))
    ibstat = nvlsm.replace("nvlsm: ", "")
    assert "GH210" not in {f.code for f in report(ibstat).findings}


def test_nvlsm_not_installed_names_the_package():
    text = (f"{JOURNAL}nvidia-fabricmanager-start.sh[3190]: Detected NVL5+ system\n"
            f"{JOURNAL}nvidia-fabricmanager-start.sh[3190]: /opt/nvidia/nvlsm/sbin/nvlsm does not exist. Please "
            'install "Nvidia NVLink Subnet Manager" (nvlsm) package\n' + FAILED)
    finding = gh210(text)
    assert "NVLink Subnet Manager" in finding.message
    by_family = {(f.family, f.command) for f in finding.fixes}
    assert ("debian", "sudo apt-get install nvlsm") in by_family and ("rhel", "sudo dnf install nvlsm") in by_family


def test_a_version_mismatch_in_fabric_managers_log_leads_with_the_versions():
    text = (FM_LOG + "fabric manager NVIDIA GPU driver interface version 570.86.15 don't match with driver "
            "version 570.124.06. Please update with matching NVIDIA driver package.\n")
    finding = gh210(text)
    assert "version differs" in finding.message
    assert "cat /sys/module/nvidia/version" in commands(finding)
    assert "sudo modprobe ib_umad" not in commands(finding)


def test_a_missing_nvswitch_is_not_read_as_a_missing_package():
    text = (FM_LOG + "detected number of NVSwitches don't match with any supported system topology, aborting "
            "fabric manager\n")
    finding = gh210(text)
    assert "NVSwitch" in finding.message
    assert any(c.startswith("lspci -nn -d 10de:") for c in commands(finding))
    assert not any("fabricmanager-$(" in c or "nvlsm" in c for c in commands(finding))


def test_the_start_scripts_exit_line_keeps_the_general_procedure():
    text = (f'{JOURNAL}nvidia-fabricmanager-start.sh[3190]: "/usr/bin/nv-fabricmanager -c '
            '/usr/share/nvidia/nvswitch/fabricmanager.cfg" failed! Exit code: 1\n' + FAILED)
    finding = gh210(text)
    assert any("nvidia-fabricmanager-$(" in c for c in commands(finding))


def test_no_nvswitch_stays_quiet():
    """NV_WARN_NOTHING_TO_DO: Fabric Manager's own word that the host has no NVSwitch (PCIe GPUs)."""
    text = (f"{JOURNAL}nvidia-fabricmanager-start.sh[3190]: Detected Pre-NVL5 system\n"
            f"{JOURNAL}nv-fabricmanager[3194]: request to query NVSwitch device information from NVSwitch driver "
            "failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n" + FAILED)
    assert "GH210" not in {f.code for f in report(text).findings}


def test_any_other_error_of_fabric_managers_log_is_its_word_not_an_unknown_line():
    text = (FM_LOG.replace("ERROR", "INFO") + "Fabric Manager version 570.86.15 is running with the following "
            "configuration options\n"
            + FM_LOG + "failed to open NVSwitch device index 3 with error NV_ERR_OPERATING_SYSTEM\n")
    result = report(text)
    codes = [f.code for f in result.findings]
    assert "GH003" not in codes, codes
    (finding,) = [f for f in result.findings if f.code == "GH210"]
    assert finding.severity.value == "warning"
    assert "failed to open NVSwitch device index 3" in finding.message
    assert "systemctl status nvidia-fabricmanager" in commands(finding)


def test_fabric_managers_error_beside_its_failed_unit_is_evidence_of_the_failure():
    text = FM_LOG + "failed to open NVSwitch device index 3 with error NV_ERR_OPERATING_SYSTEM\n" + FAILED
    finding = gh210(text)
    assert finding.severity.value == "critical"
    shown = [line for e in finding.evidence for line in e.lines]
    assert any("failed to open NVSwitch device" in line for line in shown)


def smi_q(name: str, state: str, count: int = 2) -> str:
    """nvidia-smi -q's header and, per GPU, its name and Fabric section."""
    gpus = "".join(f"GPU 00000000:{0x18 + 0x12 * i:02X}:00.0\n    Product Name                          : {name}\n"
                   f"    Persistence Mode                      : Enabled\n    Fabric\n"
                   f"        State                             : {state}\n"
                   f"        Status                            : N/A\n" for i in range(count))
    return ("==============NVSMI LOG==============\n\nTimestamp                                 : Mon Mar  3 10:00:00 "
            "2025\nDriver Version                            : 570.86.15\nCUDA Version                              "
            f": 12.8\n\nAttached GPUs                             : {count}\n" + gpus)


def reports(*texts: str) -> Report:
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks

    snapshot, _ = analyze_texts([(f"paste{i}.txt", text) for i, text in enumerate(texts)])
    return run_checks(snapshot)


def test_gpus_outside_the_fabric_are_not_healthy():
    result = report(smi_q("NVIDIA H100 80GB HBM3", "In Progress"))
    assert result.verdict != "HEALTHY"
    (finding,) = [f for f in result.findings if f.code == "GH210"]
    assert finding.severity.value == "warning" and "have not joined the NVLink fabric" in finding.message
    assert [e.lines for e in finding.evidence] == [("GPU 0 (NVIDIA H100 80GB HBM3): State: In Progress",
                                                    "GPU 1 (NVIDIA H100 80GB HBM3): State: In Progress")]


@pytest.mark.parametrize("state", ["Completed", "N/A"])
def test_gpus_in_the_fabric_or_without_one_raise_nothing(state: str):
    assert "GH210" not in {f.code for f in report(smi_q("NVIDIA H100 80GB HBM3", state)).findings}


def test_gpus_outside_the_fabric_beside_a_failed_unit_are_its_evidence():
    result = reports(smi_q("NVIDIA H100 80GB HBM3", "In Progress"), FAILED)
    (finding,) = [f for f in result.findings if f.code == "GH210"]
    assert finding.severity.value == "critical"
    assert any(e.source == "nvidia-smi -q (Fabric)" for e in finding.evidence)


NOTHING = (f"{JOURNAL}nv-fabricmanager[3194]: request to query NVSwitch device information from NVSwitch driver failed "
           "with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n" + FAILED)


@pytest.mark.parametrize("state", ["N/A", "In Progress"])
def test_nothing_to_do_on_nvlink5_gpus_is_the_subnet_manager_missing(state: str):
    result = reports(smi_q("NVIDIA B200", state), NOTHING)
    finding = result.findings[0]
    assert finding.code == "GH210" and finding.severity.value == "critical", [(f.code, f.message) for f in
                                                                               result.findings]
    assert "NVLink Subnet Manager" in finding.message
    assert ("debian", "sudo apt-get install nvlsm") in {(f.family, f.command) for f in finding.fixes}


def test_nothing_to_do_beside_gpus_waiting_for_the_fabric_is_nvswitches_not_seen():
    result = reports(smi_q("NVIDIA H100 80GB HBM3", "In Progress"), NOTHING)
    finding = result.findings[0]
    assert finding.code == "GH210" and finding.severity.value == "critical"
    assert "wait to join the NVLink fabric" in finding.message
    assert any(c.startswith("lspci -nn -d 10de:") for c in commands(finding))


def test_nothing_to_do_beside_pcie_gpus_stays_quiet():
    result = reports(smi_q("NVIDIA A40", "N/A"), NOTHING)
    assert "GH210" not in {f.code for f in result.findings}


@pytest.mark.parametrize("said", ["Job for nvidia-fabricmanager.service failed because the control process exited "
                                  "with error code.", "Job for nvidia-fabricmanager.service failed because a timeout "
                                  "was exceeded.", "A dependency job for nvidia-fabricmanager.service failed. See "
                                  "'journalctl -xe' for details."])
def test_systemctls_failed_start_job_is_fabric_manager_not_running(said: str):
    """systemd's own words after `systemctl start` (src/shared/bus-wait-for-jobs.c), not an unknown line."""
    text = ("$ sudo systemctl start nvidia-fabricmanager\n" + said + "\n"
            'See "systemctl status nvidia-fabricmanager.service" and "journalctl -xeu nvidia-fabricmanager.service" '
            "for details.\n")
    result = report(text)
    assert [f.code for f in result.findings][:1] == ["GH210"], [(f.code, f.message) for f in result.findings]
    assert "GH003" not in {f.code for f in result.findings}


def test_another_units_failed_job_is_not_fabric_managers():
    said = "Job for docker.service failed because the control process exited with error code.\n"
    assert "GH210" not in {f.code for f in report(said).findings}
