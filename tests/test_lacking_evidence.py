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


def _lead(report: Report):
    """The leading finding: the first root cause in the report's rendered order."""
    from gpuhealth.report.common import fold

    return fold(report.findings)[0].finding


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
    assert any("not found (not installed)" in line for e in gh210.evidence for line in e.lines)


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


# --------------------------------------------------------------------------- nvidia-smi field states (ERR!, errors)

SMI_HEADER = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.85.12    Driver Version: 525.85.12    CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A40          On   | 00000000:44:00.0 Off |                    0 |
|  0%   30C    P8    14W / 300W |      0MiB / 46068MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
"""
# Hand-written in the form public pastes show for a GPU the driver can no longer read (every reading ERR!, the name
# too; the row layout of the 79-column table above), and its complete twin.
ERR_ROW = """\
|   1  ERR!                On   | 00000000:83:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 46068MiB |    ERR!      Default |
|                               |                      |                 ERR! |
+-------------------------------+----------------------+----------------------+
"""
OK_ROW = """\
|   1  NVIDIA A40          On   | 00000000:83:00.0 Off |                    0 |
|  0%   29C    P8    15W / 300W |      0MiB / 46068MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
"""
# Azure/azhpc-diagnostics#77: one ERR! (the power reading) that "is transient and there's no action to be taken";
# its GPU row as posted, under the header above
POWER_ERR_ROW = """\
|   1  Tesla V100-PCIE...  On   | 00008ED0:00:00.0 Off |                    0 |
| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
"""


def test_the_table_keeps_which_values_were_errors():
    gpus = KINDS["smi-table"].parse(SMI_HEADER + ERR_ROW, "nvidia-smi")["smi"].gpus
    assert gpus[0].field_errors == () and gpus[1].name is None
    assert gpus[1].field_errors[:4] == ("Name: ERR!", "Volatile Uncorr. ECC: ERR!", "Fan: ERR!", "Temp: ERR!")


def test_a_gpu_with_errors_in_every_value_is_gh404_critical():
    report = _report(("nvidia-smi", SMI_HEADER + ERR_ROW))
    [gh404] = _codes(report)["GH404"]
    assert gh404.severity is Severity.CRITICAL and report.verdict == "BROKEN"
    assert gh404.subject.pci_address == "0000:83:00.0"
    assert "nvidia-smi cannot read the GPU" in gh404.message and "stopped answering" in gh404.message
    assert [f.command for f in gh404.fixes] == ["sudo nvidia-smi --gpu-reset -i 1", "sudo reboot"]
    # its fan's ERR! is part of it, not a fan fault of its own
    assert "GH410" in gh404.explains


def test_the_complete_twin_and_a_single_transient_err_stay_quiet():
    assert _worst(_report(("nvidia-smi", SMI_HEADER + OK_ROW))) is None
    power = _report(("nvidia-smi", SMI_HEADER + POWER_ERR_ROW))
    assert "GH404" not in _codes(power) and _worst(power) is None


def test_query_values_that_are_errors():
    real = listing("corpus:gpud/accelerator_nvidia_query__nvidia-smi-query.535.154.05.out.3.valid")
    # a healthy 8-GPU report: "Addressing Mode : Unknown Error" on every GPU is a field 535 does not know
    gpus = KINDS["smi-query"].parse(real, "nvidia-smi -q")["smi"].gpus
    assert gpus[0].field_errors == ("addressing mode: Unknown Error",)
    assert "GH404" not in _codes(_report(("nvidia-smi -q", real)))
    # the same report with the first GPU's readings failing (hand-edited: the values NVML's error string replaces)
    lost = real.splitlines(keepends=True)
    for number in (80, 107, 151, 160):  # fan speed, utilization, temperature, power draw of GPU 0
        key = lost[number - 1].split(" : ")[0]
        lost[number - 1] = f"{key} : Unknown Error\n"
    [gh404] = _codes(_report(("nvidia-smi -q", "".join(lost))))["GH404"]
    assert gh404.severity is Severity.CRITICAL and "cannot read the GPU (5 values are errors)" in gh404.message


def test_csv_values_the_driver_asks_a_reset_for():
    csv = "index, name, temperature.gpu, power.draw\n0, NVIDIA H100 80GB HBM3, [GPU requires reset], 70.00 W\n"
    [gpu] = KINDS["smi-csv"].parse(csv, "nvidia-smi --query-gpu")["smi"].gpus
    assert gpu.field_errors == ("temperature.gpu: [GPU requires reset]",)
    [gh404] = _codes(_report(("nvidia-smi --query-gpu", csv)))["GH404"]
    assert gh404.severity is Severity.CRITICAL and "GPU requires reset" in gh404.message
    lost = csv.replace("[GPU requires reset]", "[GPU is lost]")
    [gone] = _codes(_report(("nvidia-smi --query-gpu", lost)))["GH404"]
    assert "The GPU is lost" in gone.message and [f.command for f in gone.fixes] == ["sudo reboot"]


# --------------------------------------------------------------------------- library search paths (ld.so.conf)

def test_ld_so_conf_files_naming_two_cudas_are_gh602():
    name = "ld-so-conf/handwritten_head-two-cudas.txt"
    entries = KINDS["ld-so-conf"].parse(listing(name), name)["cuda"].ld_so_conf
    assert [(e.file, e.directory) for e in entries] == [
        ("/etc/ld.so.conf.d/cuda-11-8.conf", "/usr/local/cuda-11.8/lib64"),
        ("/etc/ld.so.conf.d/988_cuda-12.conf", "/usr/local/cuda-12/targets/x86_64-linux/lib")]
    [gh602] = _codes(_listed(name))["GH602"]
    assert gh602.severity is Severity.WARNING and "CUDA 11.8, 12" in gh602.message
    assert any(f.command == "sudo rm /etc/ld.so.conf.d/cuda-11-8.conf" for f in gh602.fixes)  # the older one


def test_each_cat_of_a_conf_file_is_named_by_its_command_and_they_add_up():
    session = ("$ cat /etc/ld.so.conf.d/cuda.conf\n/usr/local/cuda-11.8/lib64\n"
               "$ cat /etc/ld.so.conf.d/988_cuda-12.conf\n/usr/local/cuda-12.1/targets/x86_64-linux/lib\n")
    report = _report(("session.txt", session))
    [gh602] = _codes(report)["GH602"]
    assert {line for e in gh602.evidence for line in e.lines} == {
        "/etc/ld.so.conf.d/cuda.conf: /usr/local/cuda-11.8/lib64",
        "/etc/ld.so.conf.d/988_cuda-12.conf: /usr/local/cuda-12.1/targets/x86_64-linux/lib"}


def test_one_cuda_in_the_loader_configuration_is_quiet():
    one = "\n".join(line for line in listing("ld-so-conf/handwritten_head-two-cudas.txt").splitlines()
                    if "11" not in line) + "\n"
    report = _report(("head /etc/ld.so.conf.d/*", one))
    assert "GH602" not in _codes(report) and _worst(report) is None
    assert identify(listing("ld-so-conf/conda-forge-docker-images-135_ld.so.conf.txt")) == "ld-so-conf"
    assert identify("/usr/local/cuda-11.8/lib64/libcudart.so.11.0\n/usr/local/cuda-12.1/lib64/libcudart.so.12\n") \
        != "ld-so-conf"  # a list of library files (find's) is no loader configuration


# --------------------------------------------------------------------------- the GPU list against the indices asked for

# yandex-research/tab-ddpm#20: the reporter's code and its error, as posted (the host's GPU count is not in the thread)
TAB_DDPM_20 = """\
import torch
device = torch.device("cuda:1")
a = torch.tensor([1, 2, 3])
a.to(device)  # Fails

RuntimeError: CUDA error: invalid device ordinal
CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
"""
# hand-written: `nvidia-smi -L` of a one-GPU host (the thread's confirmed situation: "cuda:1" fails where only GPU 0
# exists; the fix was "cuda:0")
ONE_GPU = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
TWO_GPUS = ONE_GPU + "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-66666666-7777-8888-9999-000000000000)\n"


def test_the_indices_programs_ask_for_are_read():
    from gpuhealth.evidence.facts import device_requests

    def asked(line: str) -> list[tuple[int, str]]:
        return [(r.index, r.text) for r in device_requests([line])]

    assert asked('device = torch.device("cuda:1")') == [(1, "cuda:1")]
    assert asked("python train.py --device cuda:3") == [(3, "--device cuda:3")]
    assert asked("torch.cuda.set_device(opt.gpu_id)") == []
    assert asked("torch.cuda.set_device(2)") == [(2, "set_device(2)")]
    assert asked('with tf.device("/device:GPU:2"):') == [(2, "device:GPU:2")]
    # an image tag, a version and a GPU count are no index
    assert asked("FROM nvidia/cuda:12.1.0-runtime-ubuntu22.04") == [] and asked("torchrun --gpus 4 x.py") == []


def test_an_index_beyond_the_gpus_the_host_has_is_gh608():
    report = _report(("nvidia-smi -L", ONE_GPU), ("traceback.txt", TAB_DDPM_20))
    lead = _lead(report)
    assert lead.code == "GH608" and "asks for GPU 1 (cuda:1), but it can see 1 GPU(s)" in lead.message
    assert "GH610" in lead.explains
    # the complete twin: two GPUs, so cuda:1 exists
    assert "GH608" not in _codes(_report(("nvidia-smi -L", TWO_GPUS), ("traceback.txt", TAB_DDPM_20)))


def test_an_index_is_counted_among_the_gpus_cuda_visible_devices_keeps():
    session = ("$ nvidia-smi -L\n" + TWO_GPUS + "$ CUDA_VISIBLE_DEVICES=1 python train.py --device cuda:1\n"
               "RuntimeError: CUDA error: invalid device ordinal\n")
    [gh608] = _codes(_report(("session.txt", session)))["GH608"]
    assert "it can see 1 GPU(s): the only valid index is 0 (a single GPU is device 0)" in gh608.message
    assert "CUDA_VISIBLE_DEVICES=1 renumbers the GPUs it keeps from 0" in gh608.message
    assert any("CUDA_VISIBLE_DEVICES=1 keeps 1 GPU(s)" in line for e in gh608.evidence for line in e.lines)
    fine = session.replace("--device cuda:1", "--device cuda:0")
    assert "GH608" not in _codes(_report(("session.txt", fine)))


def test_an_index_without_the_gpu_count_is_not_judged():
    report = _report(("traceback.txt", TAB_DDPM_20))
    assert any(s.code == "GH608" and "how many GPUs it sees" in s.reason for s in report.skipped)
    # what GH608 shows is the "invalid device ordinal" symptom with its causes open, not a judgement of the index
    [gh608] = _codes(report)["GH608"]
    assert "can see" not in gh608.message
    assert gh608.differential and all(c.status == "open" for c in gh608.differential)


# --------------------------------------------------------------------------- program text (issue 21 item 4)

def _program(name: str) -> tuple[str, str]:
    from conftest import DATA

    return name, (DATA / "programs" / name).read_text()


def test_a_script_exporting_an_index_the_host_lacks_is_gh608():
    script = _program("handwritten_autoformer-25_script.sh")
    assert identify(script[1]) == "program-text"
    [gh608] = _codes(_report(("nvidia-smi -L", ONE_GPU), script))["GH608"]
    assert gh608.severity is Severity.WARNING and "CUDA_VISIBLE_DEVICES=1: index 1 is not a GPU" in gh608.message
    assert "GH608" not in _codes(_report(("nvidia-smi -L", TWO_GPUS), script))


def test_a_dockerfile_whose_cuda_the_driver_is_too_old_for_is_gh601():
    dockerfile = _program("handwritten_dockerfile-cuda12-pip-cu124.Dockerfile")
    old = "| NVIDIA-SMI 470.182.03   Driver Version: 470.182.03   CUDA Version: 11.4     |\n"
    [gh601] = _codes(_report(("nvidia-smi", old), dockerfile))["GH601"]
    assert gh601.severity is Severity.CRITICAL
    assert "the base image nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04" in gh601.message
    assert any("FROM nvidia/cuda:12.4.1" in line for e in gh601.evidence for line in e.lines)
    new = "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |\n"
    assert "GH601" not in _codes(_report(("nvidia-smi", new), dockerfile))


def test_a_script_installing_the_cpu_wheel_is_gh605():
    report = _report(_program("handwritten_cpu-wheel.py.txt"))
    [gh605] = _codes(report)["GH605"]
    assert gh605.severity is Severity.WARNING and "2.1.0+cpu" in gh605.message  # no failure shown: a warning


def test_a_program_that_tells_nothing_is_no_diagnosis_never_healthy():
    script = "import torch\nimport os\n\n\ndef main():\n    print(torch.cuda.is_available())\n"
    report = _report(("train.py", script))
    assert report.verdict == "NO DIAGNOSIS"


def test_systemctl_show_gives_the_same_unit_state():
    failed = ("ExecStart={ path=/usr/bin/nv-fabricmanager ; argv[]=/usr/bin/nv-fabricmanager -c "
              "/usr/share/nvidia/nvswitch/fabricmanager.cfg ; ignore_errors=no ; pid=0 ; code=(null) ; status=0/0 }\n"
              "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\n"
              "UnitFileState=enabled\n")  # hand-written in systemctl show's form (its property names and order)
    assert identify(failed) == "systemctl-show"
    [gh210] = _codes(_report(("systemctl show nvidia-fabricmanager", failed)))["GH210"]
    assert gh210.severity is Severity.WARNING and gh210.message.startswith("Fabric Manager failed:")
    # `-p` output names no unit: the command does
    session = ("$ systemctl show nvidia-fabricmanager -p ActiveState -p LoadState\n"
               "LoadState=not-found\nActiveState=inactive\n")
    [missing] = _codes(_report(("session.txt", session)))["GH210"]
    assert "Fabric Manager is not installed" in missing.message
    active = failed.replace("ActiveState=failed", "ActiveState=active").replace("SubState=failed", "SubState=running")
    assert "GH210" not in _codes(_report(("systemctl show nvidia-fabricmanager", active)))
    persistenced = "Id=nvidia-persistenced.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n"
    [gh604] = _codes(_report(("systemctl show nvidia-persistenced", persistenced)))["GH604"]
    assert "nvidia-persistenced is not installed" in gh604.message


def test_a_checkpoint_saved_on_a_gpu_the_program_lacks_is_gh608():
    # PyTorch's own line (torch/serialization.py, validate_cuda_device), as a pasted traceback ends
    line = ("RuntimeError: Attempting to deserialize object on CUDA device 2 but torch.cuda.device_count() is 1. "
            "Please use torch.load with map_location to map your storages to an existing device.\n")
    report = _report(("traceback.txt", "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
                      "    model = torch.load(\"model.pth\")\n" + line))
    [gh608] = _codes(report)["GH608"]
    assert "asks for GPU 2 (a checkpoint saved on CUDA device 2), but it can see 1 GPU(s)" in gh608.message
    assert "map_location" in gh608.message and "GH003" not in _codes(report)  # the line is known, not "unknown"
    # a program that sees no GPU at all: not an index problem, so not GH608's
    none = line.replace("CUDA device 2", "CUDA device 0").replace("device_count() is 1", "device_count() is 0")
    assert "GH608" not in _codes(_report(("traceback.txt", none)))


# --------------------------------------------------------------------------- /sys/bus/pci/drivers/nvidia

LSPCI_NN = ("$ lspci -nn | grep -i nvidia\n01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 "
            "[GeForce RTX 3090] [10de:2204] (rev a1)\n")  # hand-written, in lspci -nn's form


def test_no_nvidia_pci_driver_directory_means_the_module_is_not_loaded():
    """The directory exists while nvidia.ko is loaded (it registers its PCI driver there); GNU ls's message when not."""
    absent = LSPCI_NN + ("$ ls /sys/bus/pci/drivers/nvidia\n"
                         "ls: cannot access '/sys/bus/pci/drivers/nvidia': No such file or directory\n")
    [gh201] = _codes(_report(("session.txt", absent)))["GH201"]
    assert gh201.severity is Severity.CRITICAL and "not loaded" in gh201.message


def test_the_nvidia_pci_driver_holding_the_gpu_is_quiet():
    bound = LSPCI_NN + ("$ ls /sys/bus/pci/drivers/nvidia\n"
                        "0000:01:00.0  bind  module  new_id  remove_id  uevent  unbind\n")
    snapshot, _ = analyze_texts([("session.txt", bound)])
    assert snapshot.module_listed("nvidia") is True
    assert [(d.address, d.kernel_driver) for d in snapshot.pci_devices] == [("0000:01:00.0", "nvidia")]
    report = run_checks(snapshot)
    assert "GH201" not in _codes(report) and _worst(report) is None
