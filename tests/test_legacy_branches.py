"""The last driver branch of every NVIDIA GPU (knowledge/legacy.py, legacy_gpus.csv) and GH209 judged from any
evidence that names the GPU and the driver (parsers/gpu_mentions.py).

Device IDs and names are real: pci.ids (tests/data/corpus/pciids) and NVIDIA's supported-gpus.json rows mined into
legacy_gpus.csv. The log, package and sentence lines below are examples written for these tests, in the formats
dpkg, apt, lspci and the driver print (and a person types)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from tests.repo_paths import REPO

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge import read_table, table_rows
from gpuhealth.knowledge.drivers import architecture
from gpuhealth.knowledge.gpus import lookup
from gpuhealth.knowledge.legacy import branch_number, devices_named, last_branch, name_keys
from gpuhealth.knowledge.sources import DOCUMENTS, keys_in
from gpuhealth.model import Severity
from gpuhealth.parsers.gpu_mentions import mentions

PCIIDS = REPO / "tests/data/corpus/pciids/pci.ids.nvidia-10de-excerpt"


def report(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def gh209(result):
    return [f for f in result.findings if f.code == "GH209"]


# --------------------------------------------------------------------------- the table


def test_every_row_is_well_formed_and_cites_its_documents():
    rows = table_rows("legacy_gpus.csv")
    assert len(rows) > 700
    labels = {r["last_branch"] for r in rows}
    assert labels == {"71.86.xx", "96.43.xx", "173.14.xx", "304.xx", "340.xx", "367.xx", "390.xx", "470.xx"}
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{4}", row["device_id"]), row
        assert branch_number(row["last_branch"]) is not None, row
        assert keys_in(row["source"]) and set(keys_in(row["source"])) <= set(DOCUMENTS), row


def test_a_device_row_never_outlives_its_architecture():
    """Mined rows agree with the architecture rule where both speak: a Kepler board ends at 470 or before, Fermi 390."""
    for row in table_rows("legacy_gpus.csv"):
        model = lookup(row["device_id"])
        arch = architecture(model.architecture) if model else None
        if arch is not None and arch.last_branch is not None:
            assert branch_number(row["last_branch"]) <= arch.last_branch, row


def test_the_table_names_the_gpus_pci_ids_names():
    """The device IDs of the table are NVIDIA GPUs pci.ids knows by the same model (spot checks of real rows)."""
    text = PCIIDS.read_text(encoding="utf-8")
    for device, model in [("0612", "9800 GTX"), ("102d", "Tesla K80"), ("1184", "GTX 770"), ("0ffe", "Quadro K2000"),
                          ("06c0", "GTX 480")]:
        assert re.search(rf"^\t{device}  .*{re.escape(model)}", text, re.M), device
        assert last_branch(device).basis == "device"


@pytest.mark.parametrize(("device", "label", "basis"), [
    ("0612", "340.xx", "device"),  # G92 [GeForce 9800 GTX / 9800 GTX+]
    ("0020", "71.86.xx", "device"),  # NV4 [Riva TNT]
    ("0110", "96.43.xx", "device"),  # NV11 [GeForce2 MX/MX 400]
    ("0322", "173.14.xx", "device"),  # NV34 [GeForce FX 5200]
    ("0091", "304.xx", "device"),  # G70 [GeForce 7800 GTX]
    ("06c0", "390.xx", "device"),  # GF100 [GeForce GTX 480]
    ("0ff2", "367.xx", "device"),  # GK107GL [GRID K1]: before Kepler's 470
    ("102d", "470.xx", "device"),  # GK210GL [Tesla K80]
    ("1b80", "580.xx", "architecture"),  # GP104 [GeForce GTX 1080]: Pascal
    ("13c2", "580.xx", "architecture"),  # GM204 [GeForce GTX 970]: Maxwell
    ("1db4", "580.xx", "architecture"),  # GV100GL [Tesla V100 PCIe 16GB]: Volta
])
def test_last_branch_of_real_device_ids(device, label, basis):
    found = last_branch(device)
    assert (found.label, found.basis) == (label, basis)
    assert found.source


@pytest.mark.parametrize("device", ["2330", "1eb8", "2684", "zzzz", ""])  # H100, T4, RTX 4090: current; no ID
def test_a_current_or_unknown_gpu_has_no_last_branch(device):
    assert last_branch(device) is None


def test_slashed_names_are_each_a_name():
    assert name_keys("GeForce 9800 GTX/9800 GTX+") == ["9800gtx"]  # "+" is punctuation to the key
    assert name_keys("GeForce 6600 LE/6600") == ["6600le", "6600"]
    assert name_keys("Quadro FX 330/GeForce PCX 5300") == ["quadrofx330", "pcx5300"]


@pytest.mark.parametrize(("words", "label"), [
    ("9800GTX+", "340.xx"), ("NVIDIA 9800 GTX+", "340.xx"), ("GTX 770", "470.xx"), ("Quadro K2000", "470.xx"),
    ("Tesla K80", "470.xx"), ("GeForce GTX 1080", "580.xx"), ("GeForce 210", "340.xx"),
    ("1080 Ti", "580.xx"), ("K2000", "470.xx"), ("GTX1080Ti", "580.xx"),  # the series word left out or run in
])
def test_model_names_resolve_to_device_ids(words, label):
    devices = devices_named(words)
    assert devices and {last_branch(d).label for d in devices} == {label}


def test_a_current_gpu_or_a_number_names_nothing():
    assert devices_named("RTX 4090") == () and devices_named("H100") == () and devices_named("x" * 500) == ()
    assert devices_named("770") == () and devices_named("1080") == ()  # a bare number is no model


# --------------------------------------------------------------------------- the reader (example lines)


@pytest.mark.parametrize(("line", "version", "reported"), [
    ("dpkg: error processing /var/cache/apt/archives/libgl1-nvidia-glx_343.22-2_amd64.deb (--unpack):", "343.22",
     False),
    ("dpkg: version 343.22-2 of libnvidia-eglcore:amd64 already installed, skipping", "343.22", False),
    ("ii  nvidia-driver-470   470.256.02-0ubuntu0.22.04.1 amd64  NVIDIA driver metapackage", "470.256.02", False),
    ("Setting up libnvidia-gl-535:amd64 (535.183.01-0ubuntu1) ...", "535", False),
    ("Unpacking nvidia-legacy-340xx-driver (340.108-25) ...", "340", False),
    ("I installed nvidia-driver-590 yesterday.", "590", True),
])
def test_driver_versions_from_package_names(line, version, reported):
    found = [m for m in mentions(line, "x") if m.what == "driver"]
    assert [(m.value, m.reported) for m in found][:1] == [(version, reported)]


@pytest.mark.parametrize("line", [
    "ii  nvidia-container-toolkit 1.14.3-1 amd64", "libnvidia-container1_1.17.0-1_amd64.deb",
    "ii  nvidia-cuda-toolkit 11.5.1-1ubuntu1 amd64", "The 210 results took 770 seconds", "cuda 12.4, python 3.10",
])
def test_lines_that_name_no_driver_and_no_gpu(line):
    assert mentions(line, "x") == []


def test_gpus_from_pci_ids_and_from_words():
    lspci = ("01:00.0 VGA compatible controller [0300]: NVIDIA Corporation G92 [GeForce 9800 GTX / 9800 GTX+] "
             "[10de:0612]")
    assert [(m.value, m.reported) for m in mentions(lspci, "x") if m.what == "gpu"] == [("0612", False)]
    said = mentions("My box has a Tesla K80 and a GTX 770", "x")
    assert [(m.value, m.named, m.reported) for m in said] == [("102d", "Tesla K80", True), ("1184", "GTX 770", True)]


# --------------------------------------------------------------------------- GH209 (example evidence)

DEBOOTSTRAP = """\
debootstrap: dpkg: error processing /var/cache/apt/archives/libgl1-nvidia-glx_343.22-2_amd64.deb (--unpack):
debootstrap:  subprocess new pre-installation script returned error exit status 1
"""


def test_a_gpu_named_in_words_and_a_package_version_is_a_warning_naming_the_legacy_branch():
    found = gh209(report(("notes.txt", "Installation fails on my machine.\nGPU: NVIDIA 9800GTX+\n"),
                         ("install.log", DEBOOTSTRAP)))
    assert len(found) == 1 and found[0].severity is Severity.WARNING
    assert "340.xx" in found[0].message and "343.22" in found[0].message
    assert any(e.source.startswith("the reporter's words") for e in found[0].evidence)
    commands = [f.command for f in found[0].fixes]
    assert "sudo apt-get install nvidia-legacy-340xx-driver" in commands
    assert any("support ended 2019" in c for c in commands)  # said honestly: it does not build on any kernel


def test_lspci_and_the_loaded_driver_are_critical_for_a_pre_fermi_gpu():
    lspci = ("01:00.0 VGA compatible controller [0300]: NVIDIA Corporation G92 [GeForce 9800 GTX / 9800 GTX+] "
             "[10de:0612] (rev a2)\n")
    version = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
               "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
    found = gh209(report(("lspci.txt", lspci), ("version.txt", version)))
    assert len(found) == 1 and found[0].severity is Severity.CRITICAL
    assert "340.xx" in found[0].message


def test_a_gpu_its_driver_supports_raises_nothing():
    said = "We run a GTX 770 here."
    apt = "ii  nvidia-driver-470   470.256.02-0ubuntu0.22.04.1 amd64  NVIDIA driver metapackage\n"
    assert gh209(report(("notes.txt", said), ("dpkg.txt", apt))) == []


def test_a_branch_no_distribution_packages_gets_no_install_command():
    said = "The card is a GeForce 7800 GTX."  # 304.xx
    apt = "ii  nvidia-driver-470   470.256.02-0ubuntu0.22.04.1 amd64  NVIDIA driver metapackage\n"
    found = gh209(report(("notes.txt", said), ("dpkg.txt", apt)))
    assert found and "304.xx" in found[0].message
    assert not any("apt-get install" in f.command for f in found[0].fixes)
    assert any("No current distribution packages the 304.xx" in f.command for f in found[0].fixes)


def test_the_drivers_own_refusal_leads_with_its_branch():
    log = ("[   12.1] NVRM: The NVIDIA GeForce 9800 GTX GPU installed in this system is\n"
           "[   12.1] NVRM:  supported through the NVIDIA 340.xx Legacy drivers. Please\n"
           "[   12.1] NVRM:  visit http://www.nvidia.com/object/unix.html for more\n"
           "[   12.1] NVRM:  information.  The 343.22 NVIDIA driver will ignore\n"
           "[   12.1] NVRM:  this GPU.  Continuing probe...\n")
    result = report(("dmesg.log", log))
    assert result.findings[0].code == "GH209" and result.findings[0].severity is Severity.CRITICAL
    assert "340.xx" in result.findings[0].message
    assert "sudo apt-get install nvidia-legacy-340xx-driver" in [f.command for f in result.findings[0].fixes]


# --------------------------------------------------------------------------- recommend


def test_recommend_names_the_legacy_branch_of_a_gpu_older_than_the_gpu_table():
    from gpuhealth.model import DriverInfo, PciDevice, Snapshot
    from gpuhealth.recommend import recommend

    def notes(device: str, name: str) -> str:
        gpu = PciDevice("0000:01:00.0", "10de", device, "0300", name=name)
        return " ".join(recommend(Snapshot(pci_devices=(gpu,), driver=DriverInfo(version="535.183.01"))).notes)

    assert "only up to the 340.xx legacy driver branch" in notes("0612", "G92 [GeForce 9800 GTX / 9800 GTX+]")
    assert "not in the GPU table" not in notes("0612", "G92 [GeForce 9800 GTX / 9800 GTX+]")
    assert "only up to the 367.xx" in notes("0ff2", "GK107GL [GRID K1]")  # below Kepler's 470: said
    assert "legacy driver branch" not in notes("102d", "GK210GL [Tesla K80]")  # Kepler's 470 already holds it


def test_a_refusal_naming_only_the_pci_id_gets_the_ids_legacy_branch():
    """nv.c's message for a GPU the release does not support names the PCI ID, not the branch (example lines in its
    format, kernel-open/nvidia/nv.c)."""
    log = ("[    5.2] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1004)\n"
           "[    5.2] NVRM: installed in this system is not supported by the\n"
           "[    5.2] NVRM: NVIDIA 535.183.01 driver release.\n")
    result = report(("dmesg.log", log))
    lead = result.findings[0]
    assert lead.code == "GH209" and "470.xx" in lead.message  # GK110 [GeForce GTX 780]: Kepler, 470.xx
    assert "sudo apt-get install nvidia-driver-470" in [f.command for f in lead.fixes]


def test_each_gpu_once_and_a_programs_line_over_the_words():
    from gpuhealth.parsers.gpu_mentions import mention_overlay

    lines = ["Our GTX 770 is not detected.", "| 0  GeForce GTX 770 |  Off  |",
             "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GK104 [GeForce GTX 770] [10de:1184]"]
    (only,) = mention_overlay(lines, "x")["mentioned"]
    assert (only.value, only.named, only.reported) == ("1184", "10de:1184", False)


def test_the_miner_keeps_device_rows_with_a_legacy_branch_and_refuses_a_board_of_another_branch():
    """tools/mine/mine_legacy_gpus.py on entries written in supported-gpus.json's form (examples, not NVIDIA's file)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mine_legacy_gpus", REPO / "tools/mine/mine_legacy_gpus.py")
    miner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(miner)
    chips = [{"devid": "0x0612", "name": "GeForce 9800 GTX/9800 GTX+", "legacybranch": "340.xx", "features": []},
             {"devid": "0x1184", "name": "GeForce GTX 770", "legacybranch": "470.xx", "features": []},
             {"devid": "0x1184", "subdevid": "0x0001", "subvendorid": "0x10DE", "name": "GeForce GTX 770",
              "legacybranch": "470.xx", "features": []},
             {"devid": "0x2330", "name": "NVIDIA H100 80GB HBM3", "features": ["kernelopen"]}]
    assert miner.legacy_rows(chips, "SGJ525") == [("0612", "GeForce 9800 GTX/9800 GTX+", "340.xx", "SGJ525"),
                                                 ("1184", "GeForce GTX 770", "470.xx", "SGJ525")]
    chips.append({"devid": "0x1184", "subdevid": "0x0002", "subvendorid": "0x10DE", "name": "GeForce GTX 770",
                  "features": []})  # a board of the same ID that the current branch supports: the table cannot say
    with pytest.raises(SystemExit, match="1184"):
        miner.legacy_rows(chips, "SGJ525")


def test_words_naming_an_old_gpu_beside_the_drivers_own_list_raise_nothing():
    """nvidia-smi -L lists what the driver drives; a model named in a sentence ("my old GTX 770") is history then."""
    said = "I replaced my old GTX 770 with this card."
    smi = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
    apt = "ii  nvidia-driver-535   535.183.01-0ubuntu0.22.04.1 amd64  NVIDIA driver metapackage\n"
    assert gh209(report(("notes.txt", said), ("nvidia-smi-L.txt", smi), ("dpkg.txt", apt))) == []
    assert gh209(report(("notes.txt", said), ("dpkg.txt", apt)))  # without the driver's list: said, as a warning


def test_lspci_and_an_installed_driver_package_are_critical_for_a_pascal_gpu_on_590():
    lspci = ("01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GP104 [GeForce GTX 1080] [10de:1b80] "
             "(rev a1)\n")
    dpkg = ("Desired=Unknown/Install/Remove/Purge/Hold\n"
            "| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n"
            "|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n"
            "||/ Name                 Version                      Architecture Description\n"
            "+++-====================-============================-============-=================================\n"
            "ii  nvidia-driver-590    590.48.01-0ubuntu0.24.04.1   amd64        NVIDIA driver metapackage\n")
    found = gh209(report(("lspci.txt", lspci), ("dpkg-l.txt", dpkg)))
    assert len(found) == 1 and found[0].severity is Severity.CRITICAL
    assert "580.xx" in found[0].message and "(Pascal)" in found[0].message
    assert "sudo apt-get install nvidia-driver-580" in [f.command for f in found[0].fixes]


# --------------------------------------------------------------------------- the driver in its other forms (GH209)
# Example lines written for these tests in the forms NVIDIA's installer, its CUDA repositories (apt and dnf), its driver
# container, the GPU Operator's chart, a cloud's image and accelerator names and a person's words give the driver.


@pytest.mark.parametrize(("line", "version"), [
    ("$ sudo sh NVIDIA-Linux-x86_64-510.47.03.run --silent", "510.47.03"),
    ("chmod +x NVIDIA-Linux-aarch64-535.183.01.run", "535.183.01"),
    ("sudo apt-get install -y cuda-drivers-510", "510"),
    ("ii  cuda-drivers  510.47.03-1  amd64  CUDA Driver native Metapackage", "510.47.03"),
    ("apt-get install cuda-drivers=510.47.03-1", "510.47.03"),
    ("sudo dnf install kmod-nvidia-latest-dkms-550.54.15-1.el8.x86_64", "550.54.15"),
    ("  nvidia-driver-3:550.54.15-1.el9.x86_64", "550.54.15"),
    ("image: nvcr.io/nvidia/driver:535.104.05-ubuntu22.04", "535.104.05"),
    ("helm install --set driver.version=535.104.05 nvidia/gpu-operator", "535.104.05"),
    ("gcloud compute instances create vm1 --image-family=ubuntu-2004-nvidia-510", "510"),
    ("ii  nvidia-driver-535-server  535.183.01-0ubuntu0.22.04.1 amd64", "535.183.01"),
    ("[setup] Installing NVIDIA driver 510.47.03", "510.47.03"),
    ("export NVIDIA_DRIVER_VERSION=470.82.01", "470.82.01"),
    ("DRIVER_VERSION=510.47.03", "510.47.03"),
    ("sudo apt install nvidia-driver-pinning-580", "580"),  # NVIDIA's branch pinning package (590 renames)
])
def test_driver_from_installer_repository_container_and_image_names(line, version):
    found = [m for m in mentions(line, "x") if m.what == "driver"]
    assert [m.value for m in found][:1] == [version]


@pytest.mark.parametrize("line", [
    "sudo dnf install nvidia-container-toolkit-1.14.3-1.x86_64", "libnvidia-container1-1.17.0-1",
    "pip install nvidia-cudnn-cu12==9.1.0.70", "docker run nvcr.io/nvidia/pytorch:24.01-py3",
    "Package nvidia-driver-510 is not available, but is referred to by another package.",
    "E: Unable to locate package nvidia-driver-510",
    "This program requires NVIDIA driver 525.60.13 or newer", "Minimum DRIVER_VERSION: 470.82.01",
    "Removing NVIDIA driver 510.47.03 ...",
])
def test_names_that_are_not_the_driver(line):
    assert [m for m in mentions(line, "x") if m.what == "driver"] == []


def test_a_clouds_accelerator_type_names_the_gpu():
    line = "gcloud compute instances create vm1 --accelerator=type=nvidia-tesla-k80,count=1"
    assert [(m.what, m.value) for m in mentions(line, "x")] == [("gpu", "102d")]


@pytest.mark.parametrize(("sentence", "branch"), [
    ("We use the R470 branch on this box.", "470"), ("I'm on R535 drivers now.", "535"),
    ("I run the 470.xx legacy driver.", "470"), ("Then I installed the R550 production branch.", "550"),
    ("I installed the 510 driver yesterday.", "510"),
    ("Our Dell R740 server is new.", None), ("The GTX 770 driver crashed.", None),
    ("It needs the 470.xx legacy driver.", None),  # a requirement, not the driver in place
])
def test_a_branch_in_words(sentence, branch):
    from gpuhealth.parsers.prose import version_statements

    found = [s.value for s in version_statements(sentence) if s.thing == "driver"]
    assert found == ([branch] if branch else [])


SMI_FAILS = "$ nvidia-smi\nNo devices were found\n"
LSPCI_K80 = "$ lspci | grep -i nvidia\n00:04.0 3D controller: NVIDIA Corporation GK210GL [Tesla K80] (rev a1)\n"


def test_a_runfile_installed_on_a_kepler_gpu_that_lspci_names_leads_with_gh209():
    """lspci without -nn prints the model pci.ids gives, no device ID: the name finds it."""
    session = "$ sudo sh NVIDIA-Linux-x86_64-510.47.03.run --silent\n" + SMI_FAILS + LSPCI_K80
    result = report(("session.txt", session))
    lead = result.findings[0]
    assert lead.code == "GH209" and lead.severity is Severity.CRITICAL
    assert "470.xx" in lead.message and "510.47.03" in lead.message and "Tesla K80" in lead.message
    assert "sudo apt-get install nvidia-driver-470" in [f.command for f in lead.fixes]


def test_an_rpm_from_nvidias_repository_gets_the_rhel_command_of_the_last_branch():
    session = ("$ sudo dnf install kmod-nvidia-latest-dkms-550.54.15-1.el8.x86_64\n" + SMI_FAILS +
               "$ lspci | grep -i nvidia\n3b:00.0 3D controller: NVIDIA Corporation GK110BGL [Tesla K40m] (rev a1)\n")
    lead = report(("session.txt", session)).findings[0]
    assert lead.code == "GH209" and "550.54.15" in lead.message
    commands = [f.command for f in lead.fixes]
    assert "sudo dnf module install nvidia-driver:470-dkms" in commands
    assert commands.index("dnf module list nvidia-driver") < commands.index("sudo dnf module install "
                                                                             "nvidia-driver:470-dkms")


def test_the_cuda_repositorys_driver_metapackage_counts():
    session = ("$ sudo apt-get install -y cuda-drivers-510\n$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't "
               "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
               + LSPCI_K80)
    lead = report(("session.txt", session)).findings[0]
    assert lead.code == "GH209" and "branch 510" in lead.message


def test_a_legacy_gpu_on_its_own_last_branch_raises_nothing():
    session = "$ sudo sh NVIDIA-Linux-x86_64-470.256.02.run --silent\n" + SMI_FAILS + LSPCI_K80
    assert gh209(report(("session.txt", session))) == []


def test_gpu_and_branch_only_in_words_are_a_warning():
    found = gh209(report(("notes.txt", "My Tesla K80 box runs the R510 branch, I think.\n")))
    assert len(found) == 1 and found[0].severity is Severity.WARNING and "470.xx" in found[0].message
    assert all(e.source.startswith("the reporter's words") for e in found[0].evidence)


def test_a_supported_pair_in_words_raises_nothing():
    assert gh209(report(("notes.txt", "My GTX 1080 runs the R470 branch.\n" + SMI_FAILS))) == []


def test_an_old_gpu_in_a_hardware_list_beside_the_gpu_the_driver_is_for_raises_nothing():
    notes = "Hardware: i9-9900K, 64 GB RAM, RTX 3090, GTX 770.\nI installed nvidia-driver-535.\n" + SMI_FAILS
    assert gh209(report(("notes.txt", notes))) == []
    alone = "Hardware: i9-9900K, 64 GB RAM, GTX 770.\nI installed nvidia-driver-535.\n" + SMI_FAILS
    assert gh209(report(("notes.txt", alone)))  # the old GPU alone: the driver meets a GPU it cannot drive


def test_the_distributions_own_package_only():
    """Ubuntu has nvidia-driver-470 but not Debian's nvidia-tesla-470-driver; Debian alone packages 340.xx."""
    ubuntu = "Ubuntu 22.04 here; my card is a Tesla K80 and I installed nvidia-driver-535.\n" + SMI_FAILS
    commands = [f.command for f in gh209(report(("notes.txt", ubuntu)))[0].fixes]
    assert "sudo apt-get install nvidia-driver-470" in commands
    assert not any("nvidia-tesla-470-driver" in c for c in commands)
    old = "Ubuntu 22.04 here; my card is a GeForce 9800 GT and I installed nvidia-driver-535.\n" + SMI_FAILS
    commands = [f.command for f in gh209(report(("notes.txt", old)))[0].fixes]
    assert not any("apt-get install" in c for c in commands)
    assert any(c.startswith("Ubuntu has no package of the 340.xx legacy driver") for c in commands)


def test_a_new_gpu_on_an_old_branch_still_says_too_old():
    """The other half of GH209 (a branch older than the architecture), with lspci naming the GPU without its ID."""
    lspci = "01:00.0 VGA compatible controller: NVIDIA Corporation AD102 [GeForce RTX 4090] (rev a1)\n"
    version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.256.02  Thu May  2 14:37:44 UTC 2024\n"
    found = gh209(report(("lspci.txt", lspci), ("version.txt", version)))
    assert found and "needs branch" in found[0].message and "Ada" in found[0].message


@pytest.mark.parametrize(("words", "devices", "label"), [
    ("K40", {"1023", "1024"}, "470.xx"),  # Tesla K40m, K40c (and the K40s, K40t boards)
    ("Tesla K40", {"1023", "1024"}, "470.xx"),
    ("Tesla P100", {"15f7", "15f8", "15f9"}, "580.xx"),  # P100-PCIE-12GB, -PCIE-16GB, -SXM2-16GB
    ("V100", {"1db1", "1db4"}, "580.xx"),  # V100-SXM2-16GB, V100-PCIE-16GB
])
def test_a_model_named_without_its_board_names_every_board(words, devices, label):
    found = devices_named(words)
    assert devices <= set(found) and {last_branch(d).label for d in found} == {label}


@pytest.mark.parametrize("words", ["K4", "GTX 88", "Titan", "40m"])
def test_a_prefix_that_is_no_model_names_nothing(words):
    assert devices_named(words) == ()


def test_a_k40_named_in_words_with_a_510_driver():
    found = gh209(report(("notes.txt", "The node has a K40 and driver version 510.47.03, I think.\n")))
    assert found and "470.xx" in found[0].message and found[0].severity is Severity.WARNING


def test_an_install_that_failed_installed_nothing():
    """apt's answer for a package this release lacks: the driver it names is not the one in place."""
    session = ("$ sudo apt-get install -y nvidia-driver-510\nReading package lists... Done\n"
               "E: Unable to locate package nvidia-driver-510\n" + SMI_FAILS + LSPCI_K80)
    assert gh209(report(("session.txt", session))) == []
    later = ("$ sudo apt-get install -y nvidia-driver-470\nReading package lists... Done\n"
             "$ sudo apt-get install -y nvidia-driver-510\nReading package lists... Done\n" + SMI_FAILS + LSPCI_K80)
    assert "branch 510" in gh209(report(("session.txt", later)))[0].message  # the last one installed


def test_a_new_gpu_named_in_words_on_an_old_branch():
    """The too-old half from words: Ada needs 520 or newer (drivers.csv first_branch)."""
    notes = "I have an RTX 4090 and installed nvidia-driver-470.\n" + SMI_FAILS
    found = gh209(report(("notes.txt", notes)))
    assert found and "RTX 4090 (Ada)" in found[0].message and "needs branch" in found[0].message
    assert not any("470" in f.command for f in found[0].fixes)  # the old branch is no fix
    assert gh209(report(("notes.txt", "I have an RTX 3090 and installed nvidia-driver-535.\n" + SMI_FAILS))) == []
    alone = gh209(report(("notes.txt", "I have an RTX 4090 and installed nvidia-driver-470.\n")))
    assert alone and alone[0].severity is Severity.WARNING  # words alone, no failure shown: reported


@pytest.mark.parametrize(("device", "name"), [
    ("0191", "GeForce 8800 GTX"), ("0410", "GeForce GT 330"), ("042f", "Quadro NVS 290"), ("05e0", "GeForce GTX 295"),
    ("05e7", "Tesla C1060"), ("05ea", "GeForce GTX 260"),
])
def test_rows_agree_with_nvidias_legacy_gpu_page(device, name):
    """Rows of NVIDIA's Unix legacy GPU page (www.nvidia.com/object/IO_32667.html, "The 340.xx driver supports the
    following set of GPUs": product, device PCI ID), checked against the table mined from supported-gpus.json."""
    row = last_branch(device)
    assert (row.label, row.name, row.basis) == ("340.xx", name, "device")


# ---------------------------------------------------------------- the miner: its rules, then regenerate and compare

MINER = REPO / "tools" / "mine" / "mine_legacy_gpus.py"
SUPPORTED_GPUS = os.environ.get("GPUHEALTH_SUPPORTED_GPUS", str(REPO / "tools" / "mine" / "checkouts"
                                                                  / "supported-gpus.json"))
LEGACY_SOURCE = "SGJ525 (legacybranch); LEGACYGPU"  # the Makefile's LEGACY_SOURCE: the committed table's source


def _miner():
    sys.path.insert(0, str(MINER.parent))
    try:
        import mine_legacy_gpus
    finally:
        sys.path.remove(str(MINER.parent))
    return mine_legacy_gpus


def test_the_miner_keeps_device_ids_with_a_legacy_branch_once():
    """supported-gpus.json's form (written for this test: "chips" entries with devid, name, legacybranch, and
    subsystem entries with subdevid): a current GPU and a subsystem entry give no row, a device ID one row."""
    chips = [{"devid": "0x06C0", "name": "GeForce GTX 480", "legacybranch": "390.xx"},
             {"devid": "0x06C0", "subdevid": "0x075F", "name": "GeForce GTX 480 (board)", "legacybranch": "390.xx"},
             {"devid": "0x1DB6", "name": "Tesla V100-PCIE-32GB"},
             {"devid": "0x0020", "name": "RIVA TNT", "legacybranch": "71.86.xx"}]
    assert _miner().legacy_rows(chips, "SRC") == [("0020", "RIVA TNT", "71.86.xx", "SRC"),
                                                   ("06c0", "GeForce GTX 480", "390.xx", "SRC")]


def test_the_miner_refuses_a_board_whose_branch_differs_from_its_device_ids():
    chips = [{"devid": "0x06C0", "name": "GeForce GTX 480", "legacybranch": "390.xx"},
             {"devid": "0x06C0", "subdevid": "0x075F", "name": "GeForce GTX 480 (board)"}]
    with pytest.raises(SystemExit, match="06c0"):
        _miner().legacy_rows(chips, "SRC")


@pytest.mark.skipif(not os.path.exists(SUPPORTED_GPUS),
                    reason=f"no supported-gpus.json at {SUPPORTED_GPUS} (set GPUHEALTH_SUPPORTED_GPUS to the 525 "
                           "driver package's file; CI has no network): legacy_gpus.csv is not regenerated and compared")
def test_the_miner_regenerates_the_committed_table():
    done = subprocess.run([sys.executable, str(MINER), "--json", SUPPORTED_GPUS, "--source", LEGACY_SOURCE,
                           "--out", "-"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == read_table("legacy_gpus.csv")
    assert "device IDs mined" in done.stderr  # the coverage per branch


def test_the_makefile_regenerates_with_the_committed_tables_source():
    """`make mine-legacy` writes the source column the committed rows carry: the regeneration above is that command."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert f"LEGACY_SOURCE ?= {LEGACY_SOURCE}\n" in makefile and "mine_legacy_gpus.py" in makefile
    assert {row["source"] for row in table_rows("legacy_gpus.csv")} == {LEGACY_SOURCE}
