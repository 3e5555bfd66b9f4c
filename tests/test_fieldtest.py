"""Situations from the field reports (shared/field-reports), pasted as a user would, answered as the engineer would:
the right check leads, with exact fixes, and nothing reads HEALTHY. Each rule fires on the real line and stays
quiet on a near miss. Lines are real (sources beside them, or the catalogue row's own example)."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import match_line, signature
from gpuhealth.model import Finding, Severity

NVML_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"  # lyulyul/shine-cluster#30
KERNEL_SOURCE = signature("installer-no-kernel-source-tree").example  # NVIDIA nvidia-installer kernel.c
NO_NODES = "$ ls -l /dev/nvidia*\nls: cannot access '/dev/nvidia*': No such file or directory\n"  # coreutils ls
PERSISTENCED = signature("persistenced-no-device-files").example  # NVIDIA/ansible-role-nvidia-driver#3
TORCH_UNKNOWN = signature("torch-cuda-unknown-error").example  # pytorch/pytorch#159954


def findings(text: str) -> list[Finding]:
    snapshot, _ = analyze_texts([("paste.txt", text if text.endswith("\n") else text + "\n")])
    return run_checks(snapshot).findings


def by_code(text: str, code: str) -> Finding | None:
    return next((f for f in findings(text) if f.code == code), None)


def test_pasted_nvml_mismatch_gets_the_reboot_and_reload_fixes():
    found = by_code(NVML_MISMATCH, "GH202")
    assert found is not None and found.severity is Severity.CRITICAL
    commands = [f.command for f in found.fixes]
    assert commands[0] == "sudo reboot" and found.fixes[0].disruptive
    assert any("rmmod" in f.command and f.disruptive for f in found.fixes)
    assert "?" not in found.message  # no "kernel module ?, user space ?" when neither version is known


def test_nvml_mismatch_rule_is_quiet_on_another_nvml_failure():
    assert by_code("Failed to initialize NVML: Unknown Error", "GH202") is None


def test_installer_without_kernel_sources_is_missing_headers_with_exact_installs():
    assert match_line(KERNEL_SOURCE).cause == "kernel-headers-missing"
    found = by_code(KERNEL_SOURCE, "GH503")
    assert found is not None and found.severity is Severity.CRITICAL
    commands = [f.command for f in found.fixes]
    assert "sudo apt-get install linux-headers-$(uname -r)" in commands
    assert "sudo dnf install kernel-devel-$(uname -r)" in commands


def test_kernel_source_rule_is_quiet_on_the_installers_load_failure():
    got = match_line("ERROR: Unable to load the kernel module 'nvidia.ko'.")
    assert got is None or got.id != "installer-no-kernel-source-tree"


def test_no_device_files_at_all_is_critical_not_healthy():
    found = by_code(NO_NODES, "GH207")
    assert found is not None and found.severity is Severity.CRITICAL
    assert "sudo nvidia-modprobe -c 0 -u" in [f.command for f in found.fixes]


def test_device_files_present_with_module_state_unknown_raise_nothing():
    listed = "$ ls /dev/nvidia*\n/dev/nvidia0  /dev/nvidiactl  /dev/nvidia-modeset  /dev/nvidia-uvm\n"
    assert by_code(listed, "GH207") is None


def test_persistenced_without_device_files_leads_with_the_device_files():
    got = match_line(PERSISTENCED)
    assert got is not None and got.cause == "device-nodes-missing"
    found = by_code(PERSISTENCED, "GH207")
    assert found is not None and found.severity is Severity.CRITICAL


def test_torch_cuda_unknown_error_is_a_known_torch_failure_not_an_unknown_line():
    got = match_line(TORCH_UNKNOWN)
    assert got is not None and got.id == "torch-cuda-unknown-error"
    codes = {f.code for f in findings(TORCH_UNKNOWN)}
    assert "GH605" in codes and "GH003" not in codes


def test_torch_unknown_rule_is_quiet_on_the_cuda_runtime_unknown_error():
    got = match_line("RuntimeError: CUDA error: unknown error")
    assert got is not None and got.id != "torch-cuda-unknown-error"


def test_bare_secure_boot_refusal_gets_the_whole_signing_procedure():
    found = by_code("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", "GH506")
    assert found is not None and found.severity is Severity.CRITICAL
    commands = " ".join(f.command for f in found.fixes)
    assert "openssl req" in commands and "sudo mokutil --import MOK.der" in commands and "sign-file" in commands


def test_secure_boot_rule_is_quiet_on_other_load_failures_and_other_modules():
    assert by_code("modprobe: ERROR: could not insert 'nvidia': No such device", "GH506") is None
    other = by_code("modprobe: ERROR: could not insert 'vboxdrv': Key was rejected by service", "GH506")
    assert other is None or "nvidia" not in other.message


def test_docker_without_gpu_driver_gets_the_exact_configure_commands():
    # the catalogue row's real line (NVIDIA/nvidia-docker#1352): docker run --gpus all without the toolkit's runtime
    found = by_code(signature("docker-could-not-select-driver").example, "GH802")
    assert found is not None
    commands = [f.command for f in found.fixes]
    # the toolkit's install (NVIDIA's repository, the package), then Docker's runtime: GH802's rows of fixes.csv
    assert "sudo apt-get install -y nvidia-container-toolkit" in commands
    assert commands.index("sudo nvidia-ctk runtime configure --runtime=docker") > commands.index(
        "sudo apt-get install -y nvidia-container-toolkit")
    # no package names or bare flags as steps
    assert all(f.is_command and f.command.split()[0] in ("sudo", "curl") for f in found.fixes), commands


def test_no_nodes_on_a_host_with_no_nvidia_gpu_is_not_critical():
    """A host whose module list could not be read (a kernel without /proc/modules) and whose PCI bus holds no
    NVIDIA GPU has no /dev/nvidia* by nature: GH207 skips there, as on a host whose module list says no nvidia."""
    import dataclasses

    from gpuhealth.collect import collect
    from hostcases import FakeHost, load_spec

    snapshot = collect(FakeHost(load_spec("no-gpu")), origin="bundle")
    unknown_modules = dataclasses.replace(snapshot, kernel_modules=None, device_nodes=())
    report = run_checks(unknown_modules)
    assert not [f for f in report.findings if f.code == "GH207"]
    assert any(s.code == "GH207" and "no NVIDIA GPU" in s.reason for s in report.skipped)
