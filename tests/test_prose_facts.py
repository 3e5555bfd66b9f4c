"""State stated in a person's words (evidence/prose.py): it fills the snapshot fields a program's output would, marked
reported; the checks judge it; what rests on the words alone stays below critical; a program's output wins.

The paragraphs are written for this test in the shapes people write in issue reports; the machine lines beside
them (``/proc/driver/nvidia/version``, ``lspci -nn``) are hand-written in those commands' formats."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import REPORTED_WORDS, CudaState, DriverInfo, ReportedFact, Severity, Snapshot

PROC_VERSION_550 = ("$ cat /proc/driver/nvidia/version\n"
                    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
                    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
LSPCI_HGX = ("$ lspci -nn | grep -i nvidia\n"
             "18:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
             "05:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)\n")


def _analyze(*texts: str):
    snapshot, _ = analyze_texts([(f"notes{i}.txt", text) for i, text in enumerate(texts)])
    return snapshot, run_checks(snapshot)


def _finding(report, code):
    return next((f for f in report.findings if f.code == code), None)


# ----------------------------------------------------------------------------------------------- versions


def test_cuda_newer_than_the_driver_in_words_is_judged_and_stays_below_critical():
    """CUDA 12.4 on driver 470 is below the 12.x family minimum (525): critical from nvcc and /proc; from the words
    alone a warning that quotes them."""
    snapshot, report = _analyze("Our cluster node runs CUDA 12.4 and the NVIDIA driver is 470.82.01. Training "
                                "scripts exit at start.")
    assert snapshot.driver.version == "470.82.01" and snapshot.cuda.nvcc_release == "12.4"
    assert {f.field for f in snapshot.reported} == {"driver", "cuda"}
    finding = _finding(report, "GH601")
    assert finding is not None and finding.severity is Severity.WARNING
    assert finding.labels.get("reported") == "words"
    assert any(e.source == REPORTED_WORDS and "470.82.01" in " ".join(e.lines) for e in finding.evidence)
    assert "nvcc --version" not in [e.source for e in finding.evidence]  # nobody ran nvcc


def test_the_drivers_own_version_wins_over_the_words():
    """The person says 470, /proc/driver/nvidia/version says 550.54.14: the kernel module's word is taken, and CUDA
    12.4 on 550 is no mismatch."""
    snapshot, report = _analyze("I think my NVIDIA driver is 470.82.01 and I have CUDA 12.4.", PROC_VERSION_550)
    assert snapshot.driver.version == "550.54.14"
    assert [f.field for f in snapshot.reported] == ["cuda"]
    assert _finding(report, "GH601") is None or _finding(report, "GH601").severity is Severity.INFO


def test_two_drivers_without_the_current_one_fill_nothing():
    snapshot, report = _analyze("The crash happens on driver 535.129.03 and on driver 550.54.14 alike; CUDA 12.4.")
    assert snapshot.driver is None
    assert _finding(report, "GH601") is None


def test_words_alone_are_never_healthy():
    _, report = _analyze("I am on Ubuntu 22.04 with kernel 6.5.0-27-generic and NVIDIA driver 550.54.14.")
    assert report.verdict != "HEALTHY"


# ----------------------------------------------------------------------------------------------- units


def test_fabric_manager_not_installed_in_words_on_an_nvswitch_system():
    """The words fill the unit state `systemctl status` would ("could not be found"); lspci shows the NVSwitch, so
    GH210 judges it as from systemctl, but below critical: nobody saw systemd say it."""
    snapshot, report = _analyze("Currently nvidia-fabricmanager is not installed on this node.", LSPCI_HGX)
    assert (snapshot.cuda.fabricmanager_active, snapshot.cuda.fabricmanager_enabled) == ("inactive", "not-found")
    finding = _finding(report, "GH210")
    assert finding is not None and finding.severity is Severity.WARNING
    assert REPORTED_WORDS in [e.source for e in finding.evidence]
    assert "systemctl status nvidia-fabricmanager" not in [e.source for e in finding.evidence]


def test_a_question_about_fabric_manager_fills_nothing():
    snapshot, report = _analyze("Is nvidia-fabricmanager installed on the HGX image? CUDA init fails.", LSPCI_HGX)
    assert snapshot.reported == () and _finding(report, "GH210") is None


def test_the_unit_listing_wins_over_the_words():
    status = ("$ systemctl status nvidia-fabricmanager\n"
              "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
              "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled; preset: enabled)\n"
              "     Active: active (running) since Mon 2026-12-07 05:00:00 UTC; 1h ago\n")
    snapshot, report = _analyze("nvidia-fabricmanager is not running, I believe.", status, LSPCI_HGX)
    assert snapshot.cuda.fabricmanager_active == "active" and snapshot.reported == ()
    assert _finding(report, "GH210") is None


LSPCI_L40S = ("$ lspci -nn | grep -i nvidia\n"
              "65:00.0 3D controller [0302]: NVIDIA Corporation AD102GL [L40S] [10de:26b9] (rev a1)\n")


def test_container_toolkit_not_installed_in_words_is_judged_by_gh802():
    """live `check` concludes "not installed" from nvidia-ctk and the runtime's files; here the words say it, and the
    GPU is on the bus: GH802 warns and quotes the words, never "nvidia-ctk: command not found"."""
    snapshot, report = _analyze("docker run --gpus all fails on this box. The nvidia-container-toolkit is not "
                                "installed yet.", LSPCI_L40S)
    assert "env_nvidia_ctk" not in snapshot.unavailable and snapshot.host_env.docker is True
    finding = _finding(report, "GH802")
    assert finding is not None and finding.labels.get("reported") == "words"
    assert [e.source for e in finding.evidence].count(REPORTED_WORDS) == 1
    assert "nvidia-ctk --version" not in [e.source for e in finding.evidence]
    assert "env_nvidia_ctk" in snapshot.machine_only().unavailable  # without the words the question is open


def test_the_toolkits_version_wins_over_the_words():
    snapshot, report = _analyze("The nvidia-container-toolkit is not installed, docker run fails.", LSPCI_L40S,
                                "$ dpkg -l | grep nvidia-container\n"
                                "ii  nvidia-container-toolkit      1.17.3-1     amd64  NVIDIA Container toolkit\n"
                                "ii  nvidia-container-toolkit-base 1.17.3-1     amd64  NVIDIA Container Toolkit Base\n")
    assert snapshot.host_env.nvidia_ctk_version == "1.17.3"
    assert not any(f.field == "unavailable" for f in snapshot.reported)


# ----------------------------------------------------------------------------------------------- PCIe


def test_a_narrow_link_in_words_is_judged_against_the_boards_own():
    """The H100 PCIe's host interface is PCIe Gen5 x16 (knowledge/gpu_pcie.csv, NVIDIA's product brief): the
    words' x8 is below it, GH407 judges the link as from nvidia-smi -q, quoting the words."""
    snapshot, report = _analyze("Our NVIDIA H100 PCIe only links at PCIe Gen5 x8 during training, not x16.")
    (gpu,) = snapshot.smi.gpus
    assert (gpu.pcie_width_current, gpu.pcie_width_max, gpu.pcie_gen_current, gpu.pcie_gen_max) == (8, 16, 5, 5)
    assert snapshot.smi.partial and snapshot.smi.format == "reported"
    finding = _finding(report, "GH407")
    assert finding is not None and finding.severity is not Severity.CRITICAL
    assert finding.labels.get("reported") == "words"
    assert report.verdict != "HEALTHY"


def test_a_low_generation_in_words_is_judged_only_with_the_load_they_state():
    """GH407 judges a generation below the board's only while the GPU is busy: "100 % utilization" in the sentence
    says so; without it the generation is read but not judged (an idle GPU lowers its link)."""
    _, report = _analyze("Our Tesla T4 stays at Gen1 x16 while training at 100% GPU utilization.")
    finding = _finding(report, "GH407")
    assert finding is not None and finding.severity is Severity.WARNING and "Gen1 of Gen3" in finding.message
    snapshot, report = _analyze("Our Tesla T4 stays at Gen1 x16.")
    assert snapshot.smi.gpus[0].pcie_gen_current == 1 and _finding(report, "GH407") is None


def test_a_link_without_a_model_named_fills_nothing():
    snapshot, report = _analyze("The GPU only links at x8 instead of x16.")
    assert snapshot.smi is None and _finding(report, "GH407") is None


# ----------------------------------------------------------------------------------------------- the engine


def test_machine_only_takes_back_exactly_what_the_words_filled():
    words = "my driver is 470.82.01 and CUDA 12.4"
    snapshot = Snapshot(driver=DriverInfo(version="470.82.01"),
                        cuda=CudaState(nvcc_release="12.4", fabricmanager_active="failed"),
                        reported=(ReportedFact("driver", (), "NVIDIA driver 470.82.01", words, "notes.txt"),
                                  ReportedFact("cuda", ("nvcc_release",), "CUDA 12.4", words, "notes.txt")))
    machine = snapshot.machine_only()
    assert machine.driver is None and machine.reported == ()
    assert machine.cuda == CudaState(fabricmanager_active="failed")  # a program's part stays


def test_a_critical_finding_from_the_machine_stays_critical_beside_words():
    """A finding the programs' output alone raises is not the words': it keeps its severity."""
    snapshot, report = _analyze("We run CUDA 12.4 on Ubuntu 22.04.", LSPCI_HGX,
                                "$ systemctl status nvidia-fabricmanager\n"
                                "Unit nvidia-fabricmanager.service could not be found.\n")
    assert snapshot.reported  # the words filled the CUDA version and the distribution
    finding = _finding(report, "GH210")
    assert finding is not None and finding.severity is Severity.CRITICAL and "reported" not in finding.labels


# ----------------------------------------------------------------------------------------------- install-time states

MODINFO_SIGNED = ("$ modinfo nvidia\n"
                  "filename:       /lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst\n"
                  "version:        550.120\n"
                  "vermagic:       6.8.0-45-generic SMP preempt mod_unload modversions\n"
                  "signer:         DKMS module signing key\n")


def test_headers_missing_in_words_are_judged_by_gh503_below_critical():
    """With the nvidia module not loaded a module must be built: no headers is critical from /lib/modules; from the
    words a warning that quotes them and names no path nobody looked at."""
    snapshot, report = _analyze("The nvidia module is not loaded and there are no kernel headers installed.",
                                LSPCI_L40S)
    assert snapshot.install.headers_present is False and snapshot.module_listed("nvidia") is False
    finding = _finding(report, "GH503")
    assert finding is not None and finding.severity is Severity.WARNING and finding.labels.get("reported") == "words"
    assert not any(e.source.startswith("/") for e in finding.evidence)
    assert snapshot.machine_only().install is None


def test_the_headers_the_machine_shows_win_over_the_words():
    listing = ("$ uname -r\n6.8.0-45-generic\n$ dpkg -l | grep linux-headers\n"
               "ii  linux-headers-6.8.0-45-generic  6.8.0-45.45  amd64  Linux kernel headers for version 6.8.0\n")
    snapshot, report = _analyze("I think no kernel headers are installed.", listing)
    assert snapshot.install.headers_present is None and "6.8.0-45-generic" in snapshot.install.headers_packages
    assert _finding(report, "GH503") is None


def test_headers_of_another_release_in_words_fill_nothing():
    snapshot, _ = _analyze("$ uname -r\n6.8.0-49-generic\n",
                           "The linux-headers-6.8.0-45-generic package is not installed.")
    assert snapshot.install.headers_present is None


def test_secure_boot_and_an_unenrolled_key_in_words_are_judged_by_gh506_below_critical():
    snapshot, report = _analyze("Secure Boot is enabled and the nvidia module is not loaded. I never enrolled the "
                                "MOK key.", LSPCI_L40S)
    assert (snapshot.install.secure_boot, snapshot.install.signing_key_state) == ("enabled", "not-enrolled")
    finding = _finding(report, "GH506")
    assert finding is not None and finding.severity is Severity.WARNING and finding.labels.get("reported") == "words"
    assert "mokutil --test-key" not in finding.message and "reporter" in finding.message
    assert "mokutil --sb-state" not in [e.source for e in finding.evidence]
    assert _finding(run_checks(snapshot.machine_only()), "GH506") is None


def test_an_unsigned_module_under_secure_boot_in_words_is_critical_only_from_the_machine():
    """An unsigned module under Secure Boot is refused (GH506 critical from modinfo); from the words, a warning."""
    snapshot, report = _analyze("Secure Boot is on. The nvidia module is not signed and nvidia is not loaded.",
                                LSPCI_L40S)
    assert snapshot.install.module_signer == ""
    finding = _finding(report, "GH506")
    assert finding is not None and finding.severity is Severity.WARNING and "unsigned" in finding.message


def test_the_signer_modinfo_shows_wins_over_the_words():
    snapshot, _ = _analyze("The nvidia module is not signed.", MODINFO_SIGNED, LSPCI_L40S)
    assert snapshot.install.module_signer == "DKMS module signing key"
    assert not any(f.field == "install" and "module_signer" in f.attributes for f in snapshot.reported)


def test_secure_boot_disabled_in_words_raises_nothing():
    _, report = _analyze("Secure Boot is disabled and the nvidia module is not loaded.", LSPCI_L40S)
    assert _finding(report, "GH506") is None


def test_modules_in_words_speak_only_for_the_names_they_name():
    """"nouveau is loaded" says nothing of nvidia; "nvidia is not loaded" nothing of nouveau (as lsmod | grep)."""
    snapshot, report = _analyze("On the new box nouveau is loaded.", LSPCI_L40S)
    assert snapshot.module_listed("nouveau") is True and snapshot.module_listed("nvidia") is None
    finding = _finding(report, "GH206")
    assert finding is not None and finding.severity is not Severity.CRITICAL
    assert finding.labels.get("reported") == "words"
    snapshot, _ = _analyze("The nvidia module is not loaded.", LSPCI_L40S)
    assert snapshot.module_listed("nvidia") is False and snapshot.module_listed("nouveau") is None
    assert snapshot.machine_only().kernel_modules is None and snapshot.machine_only().kernel_module_filters == ()


def test_lsmod_wins_over_the_words():
    lsmod = ("$ lsmod | grep nvidia\n"
             "nvidia_uvm           4644864  0\n"
             "nvidia              54001664  1 nvidia_uvm\n")
    snapshot, report = _analyze("lsmod shows no nvidia.", lsmod, LSPCI_L40S)
    assert snapshot.module_listed("nvidia") is True and not snapshot.reported
    assert _finding(report, "GH201") is None


def test_no_nvidia_runtime_in_words_is_judged_by_gh802():
    dpkg = ("$ dpkg -l | grep nvidia-container\n"
            "ii  nvidia-container-toolkit      1.17.3-1     amd64  NVIDIA Container toolkit\n")
    snapshot, report = _analyze("The toolkit is installed, but docker info shows no nvidia runtime.", dpkg, LSPCI_L40S)
    assert snapshot.host_env.docker_runtimes == () and snapshot.host_env.docker is True
    finding = _finding(report, "GH802")
    assert finding is not None and "no nvidia runtime" in finding.message
    assert finding.severity is not Severity.CRITICAL and finding.labels.get("reported") == "words"
    assert "docker info" not in [e.source for e in finding.evidence]


def test_docker_info_wins_over_the_words():
    """analyze reads no pasted `docker info` yet: the runtimes a program gave (as live `check` collects them) are
    laid under the words here, and the words leave them as they are."""
    from gpuhealth.evidence.prose import fill_reported, statements
    from gpuhealth.model import HostEnvironment

    env = HostEnvironment(docker=True, docker_runtimes=("nvidia", "runc"), docker_runtimes_source="docker info")
    fields = {"host_env": env}
    assert fill_reported(fields, statements("docker info shows no nvidia runtime.", "notes.txt")) == ()
    assert fields["host_env"] is env


def test_a_module_built_for_another_kernel_in_words_is_judged_by_gh507_below_critical():
    """"Built for 5.13 but I boot 5.14": the running kernel has no nvidia module while another has; GH507 judges it as
    from `find /lib/modules` and `uname -r`, a warning that names the words, not /lib/modules."""
    snapshot, report = _analyze("After a kernel update the nvidia module was built for 5.13 but I boot 5.14 now.")
    assert snapshot.install.kernel_release == "5.14"
    assert [(k.release, bool(k.nvidia_module)) for k in snapshot.install.kernels] == [("5.13", True), ("5.14", False)]
    finding = _finding(report, "GH507")
    assert finding is not None and finding.severity is Severity.WARNING and finding.labels.get("reported") == "words"
    assert "/lib/modules" not in [e.source for e in finding.evidence]
    assert _finding(run_checks(snapshot.machine_only()), "GH507") is None


def test_the_running_kernel_from_uname_joins_the_words():
    snapshot, report = _analyze("$ uname -r\n5.14.0-1-generic\n", "The driver was built for 5.13.0-52-generic. dkms "
                                "did not build the module for the new kernel 5.14.")
    assert [k.release for k in snapshot.install.kernels if not k.nvidia_module] == ["5.14.0-1-generic"]
    assert _finding(report, "GH507").severity is Severity.WARNING


def test_no_kernel_module_state_is_made_up():
    """The new kernel is not said to run; the words name another running kernel than uname; dkms status is given."""
    snapshot, _ = _analyze("The driver was built for 5.13.0-52-generic. dkms did not build the module for the new "
                           "kernel 5.14.")
    assert snapshot.install is None or not snapshot.install.kernels
    snapshot, _ = _analyze("$ uname -r\n5.13.0-52-generic\n", "The module was built for 5.13 but I boot 5.14.")
    assert not snapshot.install.kernels
    snapshot, _ = _analyze("$ uname -r\n5.14.0-1-generic\n$ dkms status\n"
                           "nvidia/470.82.01, 5.13.0-52-generic, x86_64: installed\n",
                           "The module was built for 5.13 but I boot 5.14.")
    assert not snapshot.install.kernels and not snapshot.reported


# ----------------------------------------------------------------------------------------------- Chinese


def test_versions_stated_in_chinese_are_judged_and_stay_below_critical():
    snapshot, report = _analyze("我们的集群节点上 CUDA 版本是 12.4，驱动版本是 470.82.01，训练脚本一启动就退出。")
    assert snapshot.driver.version == "470.82.01" and snapshot.cuda.nvcc_release == "12.4"
    finding = _finding(report, "GH601")
    assert finding is not None and finding.severity is Severity.WARNING
    assert finding.labels.get("reported") == "words"


def test_fabric_manager_not_installed_in_chinese_on_an_nvswitch_system():
    snapshot, report = _analyze("这台节点上没有安装 nvidia-fabricmanager。", LSPCI_HGX)
    assert (snapshot.cuda.fabricmanager_active, snapshot.cuda.fabricmanager_enabled) == ("inactive", "not-found")
    finding = _finding(report, "GH210")
    assert finding is not None and finding.severity is Severity.WARNING


def test_a_chinese_question_fills_nothing():
    snapshot, report = _analyze("驱动版本是 470 吗？是否安装了 nvidia-fabricmanager？", LSPCI_HGX)
    assert snapshot.driver is None or snapshot.driver.version != "470"
    assert _finding(report, "GH210") is None


def test_a_driver_version_in_words_is_no_loaded_module():
    """"I installed driver 535" gives the installed version, not /proc/driver/nvidia/version's: the module the same
    words say is not loaded stays not loaded (GH201 judges it below critical); the driver's own file says loaded."""
    snapshot, report = _analyze("I installed NVIDIA driver 535.161.08 but the nvidia module is not loaded.",
                                LSPCI_L40S)
    assert snapshot.driver.version == "535.161.08"
    finding = _finding(report, "GH201")
    assert finding is not None and finding.severity is Severity.WARNING
    assert ("/proc/driver/nvidia/version", ("not present",)) not in [(e.source, e.lines) for e in finding.evidence]
    from gpuhealth.checks.driver import module_loaded

    assert module_loaded(snapshot) is not True
    snapshot, _ = _analyze("The nvidia module is not loaded, I believe.", PROC_VERSION_550, LSPCI_L40S)
    assert module_loaded(snapshot) is True  # the driver's own version file: the module is loaded


def test_fabric_manager_down_in_words_is_no_error_802():
    # a story that Fabric Manager does not start is the reporter's words about the service, not a program's 802
    _, report = _analyze("On our HGX node the fabric manager service fails to start after the update.", LSPCI_HGX)
    finding = _finding(report, "GH210")
    assert finding is not None and finding.severity is Severity.WARNING
    assert "802" not in finding.message and "reporter's words" in finding.message
