"""Listings people paste (package lists, environment, libraries, device nodes, modules, services): each real
example parses into the facts the checks read, a check fires or stays quiet from it through ``analyze``,
commands route to the kind, every parser survives fuzzing and a 200 KB line costs linear time."""

from __future__ import annotations

import time

import pytest
from hypothesis import given

from conftest import REPO
from fuzzing import FUZZ, mutated, only_parse_error
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import KINDS, identify, kinds_for_command, load, route
from gpuhealth.model import ParseError, Severity
from gpuhealth.parsers import cuda, environ, packages, services
from listings_data import REAL_EXAMPLES, listing, listing_files

load()


def _parse(kind: str, name: str) -> dict:
    text = listing(name)
    assert identify(text) == kind, f"{name} is not recognised as {kind}"
    return KINDS[kind].parse(text, name)


def _findings(*names: str) -> dict[str, list]:
    snapshot, _ = analyze_texts((name, listing(name)) for name in names)
    found: dict[str, list] = {}
    for finding in run_checks(snapshot).findings:
        found.setdefault(finding.code, []).append(finding)
    return found


# --------------------------------------------------------------------------- each kind: the facts


def test_dpkg_list_keeps_installed_and_drops_removed_and_transitional():
    env = _parse("dpkg-list", "dpkg-list/nvidia-docker-1628_510-with-495-left.txt")["host_env"]
    assert [(p.name, p.version) for p in env.packages] == [
        ("libnvidia-cfg1-510", "510.47.03-0ubuntu1"), ("libnvidia-common-495", "495.29.05-0ubuntu1"),
        ("libnvidia-common-510", "510.47.03-0ubuntu1")]  # rc libnvidia-compute-495 and the un lines left out
    transitional = _parse("dpkg-list", "dpkg-list/nvidia-docker-1637_470-transitional.txt")["host_env"]
    assert [p.name for p in transitional.packages] == ["libnvidia-cfg1-470"]
    grep = _parse("dpkg-list", "dpkg-list/gpu-driver-container-186_grep.txt")["host_env"]
    assert ("nvidia-compute-utils-550-server", "550.127.08-0ubuntu0.24.04.1") in [(p.name, p.version)
                                                                                   for p in grep.packages]


def test_package_listings_prove_the_container_toolkit_installed():
    env = _parse("dpkg-list", "dpkg-list/nvidia-docker-1451_container-toolkit.txt")["host_env"]
    assert env.nvidia_ctk_version == "1.4.0"
    assert ("nvidia-compute-utils-455", "455.23.05-0ubuntu1") in [(p.name, p.version) for p in env.packages]
    # a listing without the toolkit proves nothing (it may be grep-filtered): the fact stays unknown
    assert _parse("dpkg-list", "dpkg-list/k8s-device-plugin-178_440.txt")["host_env"].nvidia_ctk_version is None
    missing = KINDS["systemctl-status"].parse("Unit docker.service could not be found.\n", "hand-written")
    assert missing["host_env"].docker is None and missing["host_env"].docker_active == "inactive"


def test_apt_list_rpm_and_dnf():
    apt = _parse("apt-list", "apt-list/rocker-versioned2-582_470.txt")["host_env"]
    names = {p.name: p.version for p in apt.packages}
    assert names["libnvidia-compute-470"] == "470.182.03-0ubuntu0.22.04.1" and "cuda-keyring" not in names
    rpm = _parse("rpm-qa", "rpm-qa/negativo17-nvidia-driver-155.txt")["host_env"]
    assert [(p.name, p.version, p.manager) for p in rpm.packages] == [("kmod-nvidia", "550.67-1.8.el8", "rpm")]
    dnf = _parse("dnf-list", "dnf-list/handwritten_cuda-repo.txt")["host_env"]
    assert ("nvidia-driver-cuda-libs", "550.54.15-1.el8") in [(p.name, p.version) for p in dnf.packages]
    assert packages.split_rpm_name("kmod-nvidia-550.90.12-4.18.0-553.22.1-550.90.12-3.el8_10.x86_64") == (
        "kmod-nvidia-550.90.12-4.18.0-553.22.1", "550.90.12-3.el8_10")


def test_apt_list_without_installed_counts_only_installed_versions():
    # hand-written in apt's format: a candidate line (no state) is not installed; "upgradable from" names the
    # installed version, not the candidate shown
    text = ("Listing... Done\n"
            "nvidia-utils-535/jammy-updates 535.183.01-0ubuntu0.22.04.1 amd64 [upgradable from: 535.161.08-0ubuntu1]\n"
            "nvidia-driver-550/jammy-updates 550.54.15-0ubuntu0.22.04.1 amd64\n")
    assert [(p.name, p.version) for p in packages.parse_apt_list(text)] == [("nvidia-utils-535", "535.161.08-0ubuntu1")]


def test_python_packages_give_torch_and_conda_cudatoolkit():
    cpu = _parse("pip-list", "pip-list/handwritten_torch-cpu.txt")["torch"]
    assert (cpu.torch_version, cpu.cuda_available, cpu.torch_cuda_version) == ("2.1.0+cpu", False, None)
    freeze = _parse("pip-freeze", "pip-freeze/pytorch-collect-env-21406.txt")["torch"]
    assert freeze.torch_version == "1.2.0.dev20190605" and freeze.cuda_available is None  # says nothing of CUDA
    conda = _parse("conda-list", "conda-list/pytorch-32369_cudatoolkit-10.1.txt")
    assert conda["cuda"].conda_cudatoolkit == "10.1.243" and "torch" not in conda
    lines = _parse("conda-list", "conda-list/pytorch-35646_collect-env-conda-lines.txt")
    assert lines["torch"].torch_cuda_version == "10.1" and lines["cuda"].conda_cudatoolkit == "10.1.243"
    forge = KINDS["conda-list"].parse("pytorch  2.1.0  cuda120_py311h1234_300  conda-forge\n", "hand-written")
    assert forge["torch"].torch_cuda_version == "12.0"  # conda-forge's build string
    cpuonly = _parse("conda-list", "conda-list/handwritten_cpuonly.txt")["torch"]
    assert cpuonly.cuda_available is False and cpuonly.torch_version == "1.10.0"


def test_environment_and_library_listings():
    env = _parse("env", "env/handwritten_two-cudas.txt")
    assert env["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["cuda"].ld_library_path == ("/usr/local/cuda-12.1/lib64", "/usr/local/cuda-11.8/lib64")
    assert _parse("library-path", "library-path/tensorflow-43947.txt")["cuda"].ld_library_path == (
        "/usr/local/cuda-11.0/lib64",)
    ld = _parse("ldconfig", "ldconfig/wsl-8587_grep-libcuda.txt")["cuda"]
    assert ld.libcuda_path == "/usr/lib/wsl/lib/libcuda.so.1" and ld.libcuda_version is None
    assert [e.name for e in ld.libraries] == ["libcudart.so.11.0", "libcudart.so", "libcuda.so.1"]
    tk = _parse("ls-cuda", "ls-cuda/handwritten_usr-local.txt")["cuda"]
    assert [(t.path, t.version) for t in tk.toolkits] == [("/usr/local/cuda-11.8", "11.8"),
                                                         ("/usr/local/cuda-12.4", "12.4")]
    assert tk.default_link == "/usr/local/cuda-12.4"
    nvcc = _parse("nvcc-version", "nvcc-version/cuda-wsl2-ubuntu-3.txt")["cuda"]
    assert (nvcc.nvcc_release, nvcc.nvcc_version) == ("11.5", "11.5.119")


def test_ldconfig_cache_with_two_toolkits_names_both_directories():
    # the loader's cache as `ldconfig -p` prints it when ld.so.conf.d names two toolkits (format of the WSL paste)
    text = ("\t3 libs found in cache `/etc/ld.so.cache'\n"
            "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.1/targets/x86_64-linux/lib/libcudart.so.12\n"
            "\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda-11.8/targets/x86_64-linux/lib/libcudart.so.11.0\n"
            "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n")
    parsed = environ.parse_ldconfig_listing(text)
    assert parsed.cuda_dirs == ("/usr/local/cuda-12.1/targets/x86_64-linux/lib",
                                "/usr/local/cuda-11.8/targets/x86_64-linux/lib")


def test_uname_and_module_files():
    uname = _parse("uname", "uname/nvidia-docker-365_uname-a.txt")
    assert uname["install"].kernel_release == "3.13.0-116-generic" and uname["os"].architecture == "x86_64"
    kernels = _parse("module-files", "module-files/nvidia-docker-365_find.txt")["install"].kernels
    assert [(k.release, k.nvidia_module) for k in kernels] == [
        ("3.13.0-88-generic", "/lib/modules/3.13.0-88-generic/kernel/drivers/video/nvidia.ko"),
        ("3.13.0-116-generic", None)]  # nvidiafb.ko is not the nvidia module
    assert environ.parse_uname("5.15.0-105-generic\n") == ("5.15.0-105-generic", None)


def test_device_nodes_modules_and_modprobe():
    nodes = _parse("ls-dev-nvidia", "ls-dev-nvidia/vowstar-overlay-6.txt")["device_nodes"]
    assert {"nvidiactl", "nvidia0", "nvidia-uvm"} <= set(nodes) and "nvidia-cap1" not in nodes
    assert _parse("ls-dev-nvidia", "ls-dev-nvidia/handwritten_no-nodes.txt")["device_nodes"] == ()
    info = _parse("modinfo-nvidia", "modinfo-nvidia/optimus-manager-qt-27.txt")["install"]
    assert (info.module_found, info.module_version, info.module_signer) == (True, "430.40", "")
    assert not hasattr(info, "module_vermagic")  # no check reads it: its line is not read (analyze._read_by)
    open_module = _parse("modinfo-nvidia", "modinfo-nvidia/open-gpu-kernel-modules-fork-15_open.txt")["install"]
    assert open_module.module_file == "/lib/modules/6.8.0-90-generic/updates/dkms/nvidia.ko"
    assert _parse("modinfo-nvidia", "modinfo-nvidia/cuda-smi-2_not-found.txt")["install"].module_found is False
    modprobe = _parse("modprobe-d", "modprobe-d/nvidia-driver-G06-52_50-nvidia.conf")
    assert modprobe["modprobe_blacklisted"] == () and modprobe["install"].modprobe_files[0].blacklisted == ()


def test_lspci_k_driver_in_use():
    devices = _parse("lspci", "lspci-k/negativo17-nvidia-driver-73_nouveau-in-use.txt")["pci_devices"]
    assert devices[0].kernel_driver == "nouveau" and devices[0].is_nvidia_gpu
    nnk = _parse("lspci", "lspci-k/gpu-passthrough-6_nnk.txt")["pci_devices"]
    assert [(d.address, d.kernel_driver) for d in nnk] == [("0000:01:00.0", "nvidia"),
                                                            ("0000:01:00.1", "snd_hda_intel")]


def test_services():
    fm = _parse("service-journal", "service-journal/gpu-operator-610_fabricmanager.txt")["cuda"]
    assert fm.fabricmanager_active == "failed" and "NV_WARN_NOTHING_TO_DO" in fm.fabricmanager_errors[0]
    fm2 = _parse("service-journal", "service-journal/cube-studio-29_fabricmanager.txt")["cuda"]
    assert fm2.fabricmanager_active == "failed" and len(fm2.fabricmanager_errors) == 3  # both daemon lines, systemd
    pd = _parse("service-journal", "service-journal/ollama-11932_persistenced.txt")["cuda"]
    assert pd.persistenced_active == "failed"
    stopped = _parse("service-journal", "service-journal/nvidia-persistenced-2_signal15.txt")["cuda"]
    assert stopped.persistenced_active == "inactive" and stopped.persistenced_errors == ()
    status = _parse("systemctl-status", "systemctl-status/handwritten_fabricmanager-failed.txt")["cuda"]
    assert (status.fabricmanager_active, status.fabricmanager_enabled) == ("failed", "enabled")
    real = services.parse_systemctl_status(listing("systemctl-status/vgpu4nixos-4_unit-failed.txt"))
    assert [(s.unit, s.active, s.enabled) for s in real] == [("nvidia-vgpu-mgr", "failed", "enabled")]
    assert any("Failed to initialize RM client" in line for line in real[0].errors)
    with pytest.raises(ParseError):  # a unit gpuhealth reads nothing from
        KINDS["systemctl-status"].parse(listing("systemctl-status/vgpu4nixos-4_unit-failed.txt"), "x")


def test_container_cli_and_dcgmi():
    assert _parse("container-cli-info", "container-cli-info/nvidia-docker-904.txt")["driver"].version == "390.87"
    assert _parse("container-cli-info", "container-cli-info/nvidia-docker-1775_jetson-null.txt") == {}
    failed = KINDS["container-cli-info"].parse(
        "nvidia-container-cli: initialization error: nvml error: driver not loaded\n", "x")
    assert failed["nvml"].ok is False and failed["nvml"].error == "driver not loaded"
    # a docker error that quotes the hook's message is not a container-cli listing (analyze's signatures read it)
    docker = (REPO / "tests/cases/dev/persistence-mode-container-cli-timed-out-azure/session.txt").read_text()
    assert identify(docker.split("\n", 1)[1]) != "container-cli-info"
    timed_out = KINDS["container-cli-info"].parse("nvidia-container-cli: initialization error: driver error: "
                                                  "timed out\n", "x")
    assert timed_out == {}  # not NVML's failure: nothing to fill
    report = _parse("dcgmi", "corpus:ml-engineering/dcgmi-diag-r2_excerpt_faulty_node.txt")["dcgm"]
    assert [(r.name, r.result, r.detail) for r in report.results[:2]] == [
        ("GPU Memory", "Pass", "GPUs: 1, 2, 3, 4, 5, 6, 7"), ("GPU Memory", "Fail", "GPU: 0")]
    assert "13.3 seconds started" in report.results[2].result  # wrapped mid-word, joined back


# --------------------------------------------------------------------------- through analyze: checks fire


SMI_4_GPUS = "corpus:azhpc-diagnostics/nvidia-smi-q_4xV100-PCIE_460.32.03.txt"
PROC_VERSION = "corpus:nvidia-bug-report-352.63/proc_driver_nvidia_version.txt"


def test_two_driver_versions_installed_gh509():
    assert "GH509" in _findings("dpkg-list/nvidia-docker-1628_510-with-495-left.txt")
    assert "GH509" not in _findings("dpkg-list/k8s-device-plugin-178_440.txt")  # 440 only (rc 435 removed)
    assert "GH509" not in _findings("dpkg-list/nvidia-docker-1637_470-transitional.txt")


def test_jockey_with_two_nvidia_drivers_enabled_gh509():
    # ValveSoftware/steam-for-linux#640: nvidia_experimental_310 and xorg:nvidia_experimental_304 both Enabled
    found = _parse("jockey-list", REAL_EXAMPLES["jockey-list"])
    assert [p.name for p in found["host_env"].packages] == ["nvidia-experimental-310", "nvidia-experimental-304"]
    (gh509,) = _findings(REAL_EXAMPLES["jockey-list"])["GH509"]
    assert "304, 310" in gh509.message


def test_jockey_with_one_nvidia_driver_enabled_is_quiet():
    one = "\n".join(line.replace("Enabled", "Disabled") if "304" in line else line
                    for line in listing(REAL_EXAMPLES["jockey-list"]).splitlines())
    snapshot, _ = analyze_texts([("jockey", one)])
    assert "GH509" not in {f.code for f in run_checks(snapshot).findings}
    assert packages.jockey_row("xorg:nvidia_current - NVIDIA driver (Proprietary, Maybe, In use)") is None


def test_package_version_against_loaded_module_gh202():
    # two real pastes from two hosts, put together to exercise the comparison: module 352.63, libraries 440.59
    found = _findings(PROC_VERSION, "dpkg-list/k8s-device-plugin-178_440.txt")
    assert "kernel module 352.63, user space 440.59" in found["GH202"][0].message
    assert "GH202" not in _findings("dpkg-list/k8s-device-plugin-178_440.txt")  # no module version: nothing to compare


def test_cpu_only_torch_gh605():
    found = _findings("pip-list/handwritten_torch-cpu.txt", SMI_4_GPUS)
    assert found["GH605"][0].severity is Severity.CRITICAL and "CPU-only" in found["GH605"][0].message
    assert "GH605" not in _findings("pip-freeze/pytorch-collect-env-21406.txt", SMI_4_GPUS)  # unknown build: quiet


def test_several_cudas_gh602():
    assert "CUDA 11.8, 12.1" in _findings("env/handwritten_two-cudas.txt")["GH602"][0].message
    # conda's cudatoolkit 10.1 under a system CUDA 11.0 on LD_LIBRARY_PATH: the system one is searched first
    mixed = _findings("conda-list/pytorch-32369_cudatoolkit-10.1.txt", "library-path/tensorflow-43947.txt")
    assert "10.1" in mixed["GH602"][0].message and "11.0" in mixed["GH602"][0].message
    assert "GH602" not in _findings("library-path/tensorflow-43947.txt")


def test_conda_cudatoolkit_newer_than_the_driver_gh601():
    # conda's cudatoolkit 10.1 (pytorch#32369) on a host whose driver is 390.48 (pytorch#15135's collect_env)
    found = _findings("conda-list/pytorch-32369_cudatoolkit-10.1.txt",
                      "corpus:pytorch-collect-env/pytorch-issue-15135_1080Tix3_390.48.txt")
    assert "CUDA 10.1.243 (conda cudatoolkit) needs driver >=" in found["GH601"][0].message
    assert found["GH601"][0].severity is Severity.CRITICAL


def test_nouveau_bound_gh206_from_lspci_alone():
    found = _findings("lspci-k/negativo17-nvidia-driver-73_nouveau-in-use.txt")
    assert found["GH206"][0].severity is Severity.CRITICAL
    assert "GH206" not in _findings("lspci-k/gpu-passthrough-6_nnk.txt")


def test_device_nodes_missing_gh207():
    lsmod = "corpus:azhpc-diagnostics/lsmod.nvidia.out"
    assert "GH207" in _findings("ls-dev-nvidia/handwritten_no-nodes.txt", lsmod, SMI_4_GPUS)
    assert "GH207" not in _findings("ls-dev-nvidia/nvidia-container-toolkit-50.txt", lsmod)


def test_persistence_daemon_failed_gh604():
    found = _findings("systemctl-status/handwritten_persistenced-failed.txt", SMI_4_GPUS)
    assert "nvidia-persistenced is failed" in found["GH604"][0].message
    assert any("Failed to query NVIDIA devices" in line for e in found["GH604"][0].evidence for line in e.lines)


def test_persistence_daemon_command_line_from_systemctl_status():
    forced = _parse("systemctl-status", "systemctl-status/handwritten_persistenced-no-persistence-mode.txt")["cuda"]
    assert forced.persistenced_active == "active"
    assert forced.persistenced_command == ("/usr/bin/nvidia-persistenced --user nvidia-persistenced "
                                           "--no-persistence-mode --verbose")
    real = _parse("systemctl-status", "systemctl-status/bottlerocket-core-kit-122_persistenced-active.txt")["cuda"]
    assert real.persistenced_command == "/usr/libexec/nvidia/tesla/bin/nvidia-persistenced --user nvidia --verbose"
    # a daemon that did not start: its unit's ExecStart, without systemd's "(code=exited, ...)" tail
    failed = _parse("systemctl-status", "systemctl-status/handwritten_persistenced-failed.txt")["cuda"]
    assert failed.persistenced_command.endswith("--no-persistence-mode --verbose")


def test_persistence_forced_off_by_a_running_daemon_gh604():
    found = _findings("systemctl-status/handwritten_persistenced-no-persistence-mode.txt", SMI_4_GPUS)
    [gh604] = found["GH604"]
    assert gh604.severity is Severity.WARNING
    assert "nvidia-persistenced is active but was started with --no-persistence-mode" in gh604.message
    assert "sudo systemctl enable --now nvidia-persistenced" not in [f.command for f in gh604.fixes]  # it runs
    assert gh604.fixes[0].command == "sudo systemctl edit --full nvidia-persistenced"
    assert "--no-persistence-mode" in gh604.fixes[0].note
    # a daemon known to run without the flag: the GPUs shown off are not its doing (bottlerocket-core-kit#122)
    assert "GH604" not in _findings("systemctl-status/bottlerocket-core-kit-122_persistenced-active.txt", SMI_4_GPUS)
    # a daemon that failed keeps its own finding: the failure is what to fix first
    failed = _findings("systemctl-status/handwritten_persistenced-failed.txt", SMI_4_GPUS)["GH604"][0]
    assert "nvidia-persistenced is failed" in failed.message and "forces it off" not in failed.message


def test_module_not_built_for_running_kernel_gh507():
    dkms = "nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed\n"
    lspci = "lspci-k/gpu-passthrough-6_nnk.txt"
    snapshot, _ = analyze_texts([("modinfo", listing("modinfo-nvidia/cuda-smi-2_not-found.txt")),
                                 ("dkms status (hand-written)", dkms), (lspci, listing(lspci))])
    codes = {f.code: f for f in run_checks(snapshot).findings}
    assert codes["GH507"].severity is Severity.CRITICAL and "5.15.0-105-generic" in str(codes["GH507"].evidence)


def test_dcgmi_dmon_last_xid_gh301_and_healthy_json_stays_quiet():
    # NVIDIA/DCGM#263: DCGM's last-Xid field says 120 on GPU 1 while `dcgmi health` says Healthy
    found = _findings("dcgmi-dmon/dcgm-263_xider.txt", "dcgmi/dcgm-263_health-json.txt")
    assert len(found["GH301"]) == 1 and found["GH301"][0].message.startswith("Xid 120")
    assert "GH711" not in found
    health = _parse("dcgmi", "dcgmi/dcgm-263_health-json.txt")["dcgm"]
    assert [(r.name, r.result) for r in health.results] == [("Overall Health", "Healthy")]


def test_module_only_under_the_old_kernel_gh507():
    # NVIDIA/nvidia-docker#365: a .run install built nvidia.ko for 3.13.0-88; the host now runs 3.13.0-116
    found = _findings("uname/nvidia-docker-365_uname-a.txt", "module-files/nvidia-docker-365_find.txt")
    assert found["GH507"][0].severity is Severity.CRITICAL
    assert "running kernel 3.13.0-116-generic (built for 3.13.0-88-generic)" in found["GH507"][0].message
    # the listing alone (no running kernel) or a running kernel that has its module: quiet
    assert "GH507" not in _findings("module-files/nvidia-docker-365_find.txt")
    snapshot, _ = analyze_texts([("uname -r", "3.13.0-88-generic\n"),
                                 ("find", listing("module-files/nvidia-docker-365_find.txt"))])
    assert "GH507" not in {f.code for f in run_checks(snapshot).findings}


def test_dcgmi_failures_gh711():
    found = _findings("corpus:ml-engineering/dcgmi-diag-r3_excerpt_row_remap_pending.txt")
    assert "row remappings are pending" in found["GH711"][0].message


# --------------------------------------------------------------------------- routing by command


@pytest.mark.parametrize(("command", "kind"), [
    ("dpkg -l | grep nvidia", "dpkg-list"), ("apt list --installed | grep nvidia", "apt-list"),
    ("rpm -qa | grep nvidia", "rpm-qa"), ("sudo dnf list installed 'nvidia*'", "dnf-list"),
    ("yum list installed", "dnf-list"), ("pip list", "pip-list"), ("python3 -m pip freeze", "pip-freeze"),
    ("conda list", "conda-list"), ("printenv", "env"), ("printenv | grep CUDA", "env"), ("export -p", "env"),
    ("echo $LD_LIBRARY_PATH", "library-path"), ("ldconfig -p | grep cuda", "ldconfig"),
    ("ls -l /dev/nvidia*", "ls-dev-nvidia"), ("ls -la /usr/local/", "ls-cuda"), ("ls -l /usr/local/cuda*", "ls-cuda"),
    ("nvcc --version", "nvcc-version"), ("modinfo nvidia", "modinfo-nvidia"),
    ("cat /etc/modprobe.d/*", "modprobe-d"), ("systemctl status nvidia-fabricmanager", "systemctl-status"),
    ("journalctl -u nvidia-persistenced", "service-journal"),
    ("nvidia-container-cli -k -d /dev/tty info", "container-cli-info"), ("dcgmi diag -r 3", "dcgmi"),
    ("dcgmi health -c", "dcgmi"), ("dcgmi dmon -c 1 -e 230", "dcgmi-dmon"), ("uname -a", "uname"),
    ("find /lib/modules/ -name '*nvidia*'", "module-files"), ("jockey-text --list", "jockey-list"),
    ("sudo jockey-text -l", "jockey-list"),
])
def test_commands_route_to_their_listing(command, kind):
    assert kind in kinds_for_command(command)


def test_a_session_block_routes_by_command_and_a_bare_paste_by_content():
    text = listing(REAL_EXAMPLES["dpkg-list"])
    assert route("dpkg -l | grep nvidia", text).name == "dpkg-list"
    assert route(None, text).name == "dpkg-list"
    assert route(None, listing("library-path/tensorflow-43947.txt")).name == "library-path"
    assert route(None, "/usr/local/bin:/usr/bin:/bin\n") is None  # a PATH is not a library path


# --------------------------------------------------------------------------- robustness

def parse_ld_so_conf(text):
    return cuda.parse_ld_so_conf_listing(text, "ld.so.conf")


PARSERS = [packages.parse_dpkg_list, packages.parse_apt_list, packages.parse_rpm_qa, packages.parse_dnf_list,
           packages.parse_pip_list, packages.parse_conda_list, environ.parse_env, environ.parse_path_list,
           environ.parse_ldconfig_listing, environ.parse_ls, environ.parse_modinfo_listing,
           services.parse_systemctl_status, services.parse_systemctl_show,
           services.parse_service_journal, services.parse_container_cli_info,
           services.parse_dcgmi_table, services.parse_dcgmi_health_json, services.parse_dcgmi_dmon,
           environ.parse_uname, environ.parse_module_files, packages.parse_jockey_list,
           parse_ld_so_conf]
TEXTS = [p.read_text(errors="replace") for p in listing_files() if p.suffix in (".txt", ".conf")]
LISTING_KINDS = sorted(set(REAL_EXAMPLES) | {"lspci"})


@given(mutated(TEXTS))
@FUZZ
def test_listing_parsers_survive_fuzzing(text):
    for parse in PARSERS:
        only_parse_error(parse, text)
    for kind in REAL_EXAMPLES:
        KINDS[kind].recognise(text)
        only_parse_error(KINDS[kind].parse, text, "fuzz")


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
def test_parsers_refuse_non_text(parse):
    with pytest.raises(ParseError):
        parse(None)


ADVERSARIAL = [
    "a" * 200_000, " " * 200_000, "ii  " + "x " * 100_000, "lib" + " (" * 100_000, "|" + " |" * 100_000,
    "nvidia-" + "1-" * 100_000 + ".x86_64", "torch==" + "1." * 100_000, "A=" + "=" * 200_000,
    "drwxr-xr-x " + "1 " * 100_000, "Nov 15 14:15:47 h nv-fabricmanager[1]: " + "error " * 40_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: t[:12])
def test_long_lines_cost_linear_time(text):
    start = time.process_time()
    for parse in PARSERS:
        only_parse_error(parse, text)
    for kind in REAL_EXAMPLES:
        KINDS[kind].recognise(text)
        only_parse_error(KINDS[kind].parse, text, "adversarial")
    assert time.process_time() - start < 2.0


def test_a_modprobe_d_file_with_backslash_continuations_is_recognised():
    """modprobe joins a line ending in a backslash with the next (modprobe.d(5)); the sniff counted the
    continuation lines as non-directives, so a file with one long `options` line was not recognised.
    HAND-WRITTEN in the shape of a distribution's nvidia.conf."""
    text = ("# /etc/modprobe.d/nvidia.conf\n"
            "options nvidia \\\n"
            "    NVreg_PreserveVideoMemoryAllocations=1 \\\n"
            "    NVreg_TemporaryFilePath=/var/tmp \\\n"
            "    NVreg_EnableGpuFirmware=0\n"
            "blacklist nouveau\n")
    assert identify(text) == "modprobe-d"
    assert KINDS["modprobe-d"].parse(text, "nvidia.conf")["modprobe_blacklisted"] == ("nouveau",)
