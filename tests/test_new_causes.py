"""Three pasted faults that had no cause: a PyTorch extension built for another torch (GH627), a GPU that vfio-pci holds
(GH628), and a container image that ships the driver's libraries (GH802, its own cause). Lines are real (the source is
beside each one, or it is the catalogue row's own example); the few composed pastes say so where they are defined."""

from __future__ import annotations

import pytest

from fuzzing import fuzz_tests
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.extensions import abi_hint, extension_of, mismatched_torchvision, torchvision_for
from gpuhealth.knowledge.signatures import match_line, signature
from gpuhealth.model import Finding, MessageLine, Severity
from gpuhealth.parsers.kernel_log import parse_kernel_log

# Dao-AILab/flash-attention#931 (the issue's description): flash-attn 2.5.7's wheel beside torch 2.3.0
FLASH_931 = "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
# Dao-AILab/flash-attention#1832: the C++11 string ABI in the missing symbol
FLASH_CXX11 = ("ImportError: /opt/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: "
               "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_string"
               "IcSt11char_traitsIcESaIcEEE")
# facebookresearch/maskrcnn-benchmark#813: torchvision's own extension, an ATen symbol
TORCHVISION_813 = ("ImportError: /home/user/anaconda3/envs/maskrcnn_benchmark/lib/python3.6/site-packages/torchvision/"
                   "_C.cpython-36m-x86_64-linux-gnu.so: undefined symbol: _ZN2at19NonVariableTypeMode10is_enabledEv")
# a loader error of a CUDA library, not of PyTorch's C++ library: stays with GH612 / GH602 (the catalogue's example)
NVJITLINK = signature("loader-nvjitlink-undefined-symbol").example
# Composed: `pip list | grep torch` rows as pip prints them, with torchvision of the torch after the installed one
PIP_MISMATCH = """$ pip list | grep torch
torch                    2.1.0
torchvision              0.17.0
"""
VFIO_LINE = signature("nvrm-gpu-bound-to-vfio").example  # jurkovic-nikola/OpenLinkHub#174
# Composed in the order NVIDIA's nv-pci.c / nv.c print them when vfio-pci holds the only GPU (the first line is the
# OpenLinkHub#174 one; the two after it are nv.c's texts)
VFIO_NO_PROBE = """[10582.980815] NVRM: GPU 0000:01:00.0 is already bound to vfio-pci.
[10582.981001] NVRM: The NVIDIA probe routine was not called for 1 device(s).
[10582.981010] NVRM: No NVIDIA devices probed.
"""
PROBE_NOT_CALLED = signature("nvrm-probe-not-called").example  # mattshma/bigdata#133
# HikariKnight/quickpassthrough#22 (`lspci -k | grep -E "vfio|NVIDIA"`), with nvidia-smi's answer pasted above it
LSPCI_VFIO = """$ nvidia-smi
No devices were found
$ lspci -k | grep -E "vfio|NVIDIA"
07:00.0 VGA compatible controller: NVIDIA Corporation GA106 [GeForce RTX 3060 Lite Hash Rate] (rev a1)
        Kernel driver in use: vfio-pci
07:00.1 Audio device: NVIDIA Corporation GA106 High Definition Audio Controller (rev a1)
"""
MOUNT_EXISTS = signature("ctk-mount-driver-file-exists").example  # NVIDIA/nvidia-container-toolkit#371
# NVIDIA/nvidia-docker#1551: the same under WSL2 with Docker Desktop
MOUNT_EXISTS_1551 = ("stderr: nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/"
                     "706b1d1b6de681b6daf1cab979336a9d465d9b333962cc17db663f2e334d5776/merged/usr/lib/x86_64-linux-gnu/"
                     "libnvidia-ml.so.1: file exists: unknown.")
# NVIDIA/nvidia-docker#1300: a socket the toolkit mounts, not a driver library in the image
MOUNT_SOCKET = ("nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/abc/merged/run/"
                "nvidia-persistenced/socket: no such device or address: unknown.")


def report(text: str):
    snapshot, _ = analyze_texts([("paste.txt", text if text.endswith("\n") else text + "\n")])
    return run_checks(snapshot)


def lead(text: str) -> Finding:
    return report(text).findings[0]  # findings come most severe first, a root cause before what it explains


def codes(text: str) -> dict[str, Finding]:
    return {f.code: f for f in report(text).findings}


# --------------------------------------------------------------------------- GH627

@pytest.mark.parametrize("line", [FLASH_931, FLASH_CXX11, TORCHVISION_813, signature(
    "torch-extension-undefined-symbol").example])
def test_an_extension_missing_a_torch_symbol_is_built_for_another_torch(line):
    top = lead(line)
    assert top.code == "GH627" and top.severity is Severity.CRITICAL
    assert "built for another torch version" in top.message
    assert any("_GLIBCXX_USE_CXX11_ABI" in f.command for f in top.fixes)


def test_a_cuda_library_symbol_is_not_a_torch_extension():
    assert match_line(NVJITLINK).id != "torch-extension-undefined-symbol"
    assert "GH627" not in codes(NVJITLINK)


def test_the_extension_is_named_by_its_package():
    assert extension_of(FLASH_931) == "flash-attn"
    assert extension_of(TORCHVISION_813) == "torchvision"
    unknown = "/x/site-packages/foo_ops.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c10"
    assert extension_of(unknown) == "foo_ops"


def test_the_cxx11_abi_shows_in_the_missing_symbol():
    assert "cxx11abiFALSE" in abi_hint([MessageLine(FLASH_CXX11, "paste", None, None)])
    assert abi_hint([MessageLine(FLASH_931, "paste", None, None)]) == ""


@pytest.mark.parametrize(("torch", "vision", "built_for"), [
    ("2.3.0", "0.18.0", ""), ("2.3.1+cu121", "0.18.1+cu121", ""), ("1.13.1", "0.14.1", ""), ("2.0.1", "0.15.2", ""),
    ("2.1.0", "0.17.0", "2.2"), ("1.12.0", "0.14.0", "1.13"), ("2.2.0", "0.15.2", "2.0")])
def test_torchvision_goes_with_the_torch_of_the_vision_readme(torch, vision, built_for):
    said = mismatched_torchvision(torch, vision)
    assert (said == "") == (built_for == "")
    if built_for:
        assert f"built for torch {built_for}" in said and f"torch {torch} is installed" in said


def test_versions_the_table_does_not_give_say_nothing():
    assert torchvision_for("1.2.0") is None and torchvision_for("main") is None
    assert mismatched_torchvision(None, "0.17.0") == "" and mismatched_torchvision("2.1.0", None) == ""


def test_a_pasted_pip_list_says_which_versions_disagree():
    found = codes(PIP_MISMATCH + "$ python -c 'import torchvision'\n" + TORCHVISION_813)["GH627"]
    assert found.severity is Severity.CRITICAL
    assert "torchvision 0.17.0 is built for torch 2.2, but torch 2.1.0 is installed" in found.message
    assert any("torchvision 0.17.0" in line for e in found.evidence for line in e.lines)


def test_a_pip_list_alone_that_disagrees_is_a_warning():
    found = codes(PIP_MISMATCH)["GH627"]
    assert found.severity is Severity.WARNING and "0.16 goes with it" in found.message


def test_a_pip_list_that_agrees_raises_nothing():
    assert "GH627" not in codes("$ pip list | grep torch\ntorch    2.3.0\ntorchvision    0.18.0\n")


# --------------------------------------------------------------------------- GH628 and the probe routine


def test_vfio_line_alone_is_a_warning_not_a_critical():
    result = report(VFIO_LINE)
    assert result.findings[0].code == "GH628" and result.findings[0].severity is Severity.WARNING
    assert not any(f.severity is Severity.CRITICAL for f in result.findings)


def test_the_kernel_log_files_a_passthrough_binding_apart_from_a_failed_probe():
    log = parse_kernel_log(VFIO_LINE + "\n" + signature("nvrm-gpu-bound-to-novacore").example + "\n")
    kinds = {e.detail: e.kind for e in log.events}
    assert kinds["GPU already bound to vfio-pci"] == "passthrough"
    assert kinds["GPU already bound to NovaCore"] == "probe"


def test_vfio_holding_the_only_gpu_leads_the_failed_probe():
    found = codes(VFIO_NO_PROBE)
    assert lead(VFIO_NO_PROBE).code == "GH628" and found["GH628"].severity is Severity.CRITICAL
    assert "GH305" in found["GH628"].explains
    assert not any("nouveau" in f.command for f in found["GH628"].fixes)


def test_probe_not_called_alone_is_an_open_differential_not_nouveau():
    top = lead(PROBE_NOT_CALLED)
    assert top.code == "GH305" and top.severity is Severity.CRITICAL
    causes = [c.cause for c in top.differential]
    assert causes[:2] == ["nouveau-bound", "gpu-bound-to-vfio"]
    assert all(c.status == "open" for c in top.differential)
    assert "GH206" not in codes(PROBE_NOT_CALLED)


def test_a_probe_that_failed_with_an_error_is_not_blamed_on_another_driver():
    # Bumblebee-Project/bbswitch#61: the probe ran and failed (bbswitch had powered the GPU off); "another driver
    # holds the GPU" is the symptom of "probe routine was not called" only, not of every GPU the probe check reports
    failed = "[   12.345678] nvidia: probe of 0000:01:00.0 failed with error -1"
    top = lead(failed)
    assert top.code == "GH305" and not top.differential
    assert "another driver" not in top.message and "nouveau" not in top.message


def test_lspci_showing_vfio_explains_no_devices_found():
    found = codes(LSPCI_VFIO)
    assert lead(LSPCI_VFIO).code == "GH628" and found["GH628"].severity is Severity.CRITICAL
    assert "0000:07:00.0 (vfio-pci)" in found["GH628"].message and "GH102" in found["GH628"].explains


def test_lspci_showing_vfio_alone_is_passthrough_on_purpose():
    listing = LSPCI_VFIO.split("$ lspci", 1)[1]
    found = codes("$ lspci" + listing)["GH628"]
    assert found.severity is Severity.INFO and "on purpose" in found.message


# --------------------------------------------------------------------------- an image that ships the driver


@pytest.mark.parametrize("line", [MOUNT_EXISTS, MOUNT_EXISTS_1551])
def test_file_exists_on_a_driver_library_is_the_image_shipping_it(line):
    top = lead(line)
    assert top.code == "GH802" and top.severity is Severity.CRITICAL
    assert "image" in top.message
    assert [f.kind for f in top.fixes] == ["step"] and "nvidia/cuda base image" in top.fixes[0].command
    assert not any("install" in f.command and "toolkit" in f.command for f in top.fixes)


def test_a_socket_mount_error_is_not_the_image_rule():
    sig = match_line(MOUNT_SOCKET)
    assert sig is None or sig.id != "ctk-mount-driver-file-exists"


def _analyses(text: str) -> None:
    result = report(text)
    assert result.verdict in ("HEALTHY", "DEGRADED", "BROKEN", "NO DIAGNOSIS")
    extension_of(text)
    abi_hint([MessageLine(text, "paste", None, None)])


test_fuzz_random_text, test_fuzz_mutated_real_pastes = fuzz_tests(
    _analyses, [PIP_MISMATCH + TORCHVISION_813, FLASH_CXX11, VFIO_NO_PROBE, LSPCI_VFIO, MOUNT_EXISTS_1551])
