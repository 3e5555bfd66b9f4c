"""Evidence read for what it lacks (issue 21): a pasted listing that shows a GPU with no driver bound, a unit that is
missing, stopped or failed, or /dev without nvidia-uvm gives a finding with its cause; the complete twin of each
(driver in use, unit active, nvidia-uvm present) stays quiet. The listings are in tests/data/listings (SOURCE.md and
README.md there say where each comes from and which are hand-edited)."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import KINDS, identify, load
from gpuhealth.model import Report, Severity
from listings_data import listing

load()

NO_DRIVER = "lspci-k/handwritten_no-driver-in-use.txt"
DRIVER_IN_USE = "lspci-k/gpu-passthrough-6_nnk.txt"
NO_UVM = "ls-dev-nvidia/handwritten_no-uvm.txt"
WITH_UVM = "ls-dev-nvidia/vowstar-overlay-6.txt"
FM_NOT_FOUND = "systemctl-status/handwritten_fabricmanager-not-found.txt"
PD_NOT_FOUND = "systemctl-status/handwritten_persistenced-not-found.txt"
A100_LSPCI = "corpus:gpud/nvidia-query__lspci.nn.a100"  # an HGX A100: NVSwitch bridges on the bus


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(pieces)
    return run_checks(snapshot)


def _listed(*names: str) -> Report:
    return _report(*((name, listing(name)) for name in names))


def _codes(report: Report) -> dict[str, list]:
    found: dict[str, list] = {}
    for finding in report.findings:
        found.setdefault(finding.code, []).append(finding)
    return found


def _worst(report: Report) -> Severity | None:
    return max((f.severity for f in report.findings), key=lambda s: s.rank, default=None)


# --------------------------------------------------------------------------- driver binding (lspci -k)

def test_lspci_k_reads_the_modules_able_to_drive_each_device():
    devices = KINDS["lspci"].parse(listing(NO_DRIVER), NO_DRIVER)["pci_devices"]
    assert [(d.address, d.kernel_driver, d.kernel_modules) for d in devices] == [
        ("0000:01:00.0", None, ("nouveau", "nvidia_drm", "nvidia")),
        ("0000:01:00.1", "snd_hda_intel", ("snd_hda_intel",))]


def test_a_gpu_without_a_driver_in_use_is_gh201_critical():
    report = _listed(NO_DRIVER)
    [gh201] = _codes(report)["GH201"]
    assert gh201.severity is Severity.CRITICAL and report.verdict != "HEALTHY"
    assert "No driver is bound to the NVIDIA GPU" in gh201.message
    assert any("0000:01:00.0" in line and "no 'Kernel driver in use'" in line
               for e in gh201.evidence for line in e.lines)
    assert any(f.command == "sudo modprobe nvidia" for f in gh201.fixes)


def test_the_complete_twin_with_the_driver_in_use_stays_quiet():
    report = _listed(DRIVER_IN_USE)
    assert "GH201" not in _codes(report) and _worst(report) is None


def test_lspci_without_k_says_nothing_of_the_binding():
    """Plain `lspci -nn` prints neither line: a device without a driver line is not known to have none."""
    plain = "\n".join(line for line in listing(NO_DRIVER).splitlines() if not line.startswith(" "))
    report = _report(("lspci -nn", plain))
    assert "GH201" not in _codes(report)


def test_a_gpu_held_for_passthrough_or_by_nouveau_is_not_gh201s():
    vfio = listing(DRIVER_IN_USE).replace("Kernel driver in use: nvidia", "Kernel driver in use: vfio-pci")
    assert "GH201" not in _codes(_report(("lspci -nnk", vfio)))
    nouveau = _listed("lspci-k/negativo17-nvidia-driver-73_nouveau-in-use.txt")
    assert "GH201" not in _codes(nouveau) and "GH206" in _codes(nouveau)


def test_no_nvidia_module_among_those_able_to_drive_the_gpu_is_said():
    only_nouveau = listing(NO_DRIVER).replace("Kernel modules: nouveau, nvidia_drm, nvidia", "Kernel modules: nouveau")
    [gh201] = _codes(_report(("lspci -nnk", only_nouveau)))["GH201"]
    assert any("no nvidia module is installed for the running kernel" in line
               for e in gh201.evidence for line in e.lines)
    [with_nvidia] = _codes(_listed(NO_DRIVER))["GH201"]
    assert not any("no nvidia module is installed" in line for e in with_nvidia.evidence for line in e.lines)


def test_a_module_list_with_nvidia_loaded_leaves_the_unbound_gpu_to_the_driver_checks():
    lsmod = "Module                  Size  Used by\nnvidia              40706048  0\n"
    report = _report(("lspci -nnk", listing(NO_DRIVER)), ("lsmod", lsmod))
    assert "GH201" not in _codes(report)


# --------------------------------------------------------------------------- unit state (systemctl status)

def test_a_missing_fabric_manager_unit_is_gh210():
    assert identify(listing(FM_NOT_FOUND)) == "systemctl-status"
    report = _listed(FM_NOT_FOUND)
    [gh210] = _codes(report)["GH210"]
    assert gh210.severity is Severity.WARNING and report.verdict != "HEALTHY"
    assert "Fabric Manager is not installed" in gh210.message and "NVSwitch" in gh210.message
    assert any(f.command == "sudo systemctl enable --now nvidia-fabricmanager" for f in gh210.fixes)


def test_a_missing_fabric_manager_on_an_nvswitch_system_is_critical():
    [gh210] = _codes(_listed(FM_NOT_FOUND, A100_LSPCI))["GH210"]
    assert gh210.severity is Severity.CRITICAL
    assert any("could not be found" in line for e in gh210.evidence for line in e.lines)


def test_a_missing_fabric_manager_on_a_pcie_gpu_host_is_quiet():
    assert "GH210" not in _codes(_listed(FM_NOT_FOUND, DRIVER_IN_USE))


def test_an_active_fabric_manager_is_quiet():
    active = ("● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
              "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled; "
              "vendor preset: enabled)\n"
              "     Active: active (running) since Mon 2024-01-08 10:00:01 UTC; 5min ago\n")  # hand-written twin
    assert "GH210" not in _codes(_report(("systemctl status nvidia-fabricmanager", active)))


def test_a_missing_or_failed_persistence_daemon_is_gh604():
    [missing] = _codes(_listed(PD_NOT_FOUND))["GH604"]
    assert missing.severity is Severity.INFO  # a laptop does well without it; the GPUs are not known
    assert "nvidia-persistenced is not installed" in missing.message
    [failed] = _codes(_listed("systemctl-status/handwritten_persistenced-failed.txt"))["GH604"]
    assert failed.severity is Severity.WARNING and "nvidia-persistenced failed" in failed.message
    assert any("Failed to query NVIDIA devices" in line for e in failed.evidence for line in e.lines)
    active = _listed("systemctl-status/bottlerocket-core-kit-122_persistenced-active.txt")
    assert "GH604" not in _codes(active)


# --------------------------------------------------------------------------- the device-node set (/dev/nvidia*)

def test_dev_without_nvidia_uvm_is_gh207():
    report = _listed(NO_UVM)
    [gh207] = _codes(report)["GH207"]
    assert gh207.severity is Severity.WARNING and report.verdict != "HEALTHY"
    assert "/dev/nvidia-uvm is missing" in gh207.message and "nvidia_uvm" in gh207.message
    assert any(f.command == "sudo nvidia-modprobe -c 0 -u" for f in gh207.fixes)


def test_dev_with_nvidia_uvm_is_quiet():
    assert "GH207" not in _codes(_listed(WITH_UVM))


def test_a_listing_of_named_files_proves_no_node_missing():
    session = "$ ls -l /dev/nvidia0 /dev/nvidiactl\n" + "\n".join(
        line for line in listing(NO_UVM).splitlines() if line.endswith(("/dev/nvidia0", "/dev/nvidiactl"))) + "\n"
    assert "GH207" not in _codes(_report(("session.txt", session)))
    globbed = "$ ls -l /dev/nvidia*\n" + listing(NO_UVM)
    assert "GH207" in _codes(_report(("session.txt", globbed)))


def test_nvidia_uvm_known_unloaded_is_gh205s_not_gh207s():
    lsmod = ("Module                  Size  Used by\nnvidia_modeset       1159168  0\n"
             "nvidia              40706048  1 nvidia_modeset\n")
    found = _codes(_report(("ls -al /dev/nvidia*", listing(NO_UVM)), ("lsmod", lsmod)))
    assert "GH207" not in found and "nvidia_uvm" in found["GH205"][0].message
