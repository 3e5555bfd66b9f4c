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
