"""Pastes people bring today (Blackwell and the open/proprietary module flavours, CDI, WSL2, pip CUDA wheels, PyTorch
in a pod), answered by the cause the thread confirmed. Each rule fires on the real line and stays quiet on a near
miss. Lines are real: the source is beside each one, or it is the catalogue row's own example."""

from __future__ import annotations

from fuzzing import fuzz_tests
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import match_line, signature
from gpuhealth.model import Finding, Severity

# WickedLukas/nvidia-tuner#5: fixed by linking libnvidia-ml.so to libnvidia-ml.so.1
NVML_UNVERSIONED = signature("loader-libnvidia-ml-unversioned").example
# the driver's own library missing: the device plugin's line (the row's example) and the direct loader form
NVML_SO1 = signature("loader-libnvidia-ml-not-found").example
WSL_LDCONFIG = signature("wsl-ldconfig-libcuda-not-symlink").example  # yuk7/ArchWSL#248
CUDNN_MISSING = signature("loader-cuda-lib-not-found").example
CUBLASLT = signature("loader-cublaslt-symbol-not-defined").example  # MPI-Dortmund/tomotwin-cryoet#42
# zai-org/ChatGLM-6B#921: the same failure from a pip nvidia-cublas wheel
CUBLASLT_PIP = ("OSError: /home/user/anaconda3/envs/avt/lib/python3.7/site-packages/nvidia/cublas/lib/libcublas.so.11: "
                "symbol cublasLtGetStatusString, version libcublasLt.so.11 not defined in file libcublasLt.so.11 with "
                "link time reference")
PODMAN_CDI = "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all"  # vespa-engine/vespa#27945
DOCKER_CDI = signature("docker-cdi-driver-not-enabled").example  # NVIDIA/nvidia-container-toolkit#434
# kata-containers/kata-containers#12549: a VFIO device of another CDI kind, not the NVIDIA toolkit's
KATA_CDI = "CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=vfio1"
NO_CUDA_GPUS = "RuntimeError: No CUDA GPUs are available"  # vllm-project/vllm#26774 (a pod)
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"  # facebookresearch/detectron2#460
# NVIDIA/open-gpu-kernel-modules#322: a V100 (10de:1db5) under the open module
OPEN_NO_GSP = """[ 1157.036170] PKCS#7 signature not signed with a trusted key
[ 1157.043851] nvidia-nvlink: Nvlink Core is being initialized, major device number 237
[ 1157.046099] NVRM: The NVIDIA GPU 0000:af:00.0 (PCI ID: 10de:1db5)
               NVRM: installed in this system is not supported by open
               NVRM: nvidia.ko because it does not include the required GPU
               NVRM: System Processor (GSP).
"""
# NVIDIA/open-gpu-kernel-modules#230: a GeForce under the R515 open module
OPEN_DATACENTER_ONLY = """[    3.513141] NVRM: Open nvidia.ko is only ready for use on Data Center GPUs.
[    3.513144] NVRM: To force use of Open nvidia.ko on other GPUs, see the
[    3.513145] NVRM: 'OpenRmEnableUnsupportedGpus' kernel module parameter described
[    3.513145] NVRM: in the README.
[    3.824916] NVRM: GPU 0000:04:00.0: RmInitAdapter failed! (0x63:0x0:1905)
"""
NEEDS_OPEN = signature("nvrm-gpu-requires-open-modules").example


def report(text: str):
    snapshot, _ = analyze_texts([("paste.txt", text if text.endswith("\n") else text + "\n")])
    return run_checks(snapshot)


def findings(text: str) -> list[Finding]:
    return report(text).findings


def by_code(text: str, code: str) -> Finding | None:
    return next((f for f in findings(text) if f.code == code), None)


def lead(text: str) -> Finding:
    return max(findings(text), key=lambda f: f.severity.rank)


def commands(found: Finding) -> list[str]:
    return [f.command for f in found.fixes]


def test_unversioned_libnvidia_ml_is_a_missing_link_not_an_unreachable_driver():
    top = lead(NVML_UNVERSIONED)
    assert top.code == "GH612" and top.severity is Severity.CRITICAL
    assert "libnvidia-ml.so" in top.message and "without a version" in top.message
    assert "ldconfig -p | grep libnvidia-ml.so" in commands(top)
    assert any(c.startswith("sudo ln -s ") and c.endswith("/libnvidia-ml.so") for c in commands(top))
    assert by_code(NVML_UNVERSIONED, "GH203") is None


def test_the_versioned_libnvidia_ml_missing_is_still_the_driver():
    assert match_line(NVML_SO1).id != "loader-libnvidia-ml-unversioned"
    assert match_line("libnvidia-ml.so.1: cannot open shared object file").id == "loader-libnvidia-ml-not-found"
    assert by_code(NVML_SO1, "GH612") is None


def test_wsl_ldconfig_warning_is_not_a_fault():
    found = findings(WSL_LDCONFIG)
    assert all(f.severity is not Severity.CRITICAL for f in found)
    gh612 = next(f for f in found if f.code == "GH612")
    assert gh612.severity is Severity.INFO and gh612.message.startswith("Not a fault")
    assert gh612.fixes == ()


def test_a_missing_cudnn_beside_the_wsl_warning_is_still_critical():
    found = by_code(f"{WSL_LDCONFIG}\n{CUDNN_MISSING}", "GH612")
    assert found is not None and found.severity is Severity.CRITICAL
    assert "Not a fault" not in found.message


def test_cublaslt_symbol_not_defined_is_two_cuda_copies():
    for line in (CUBLASLT, CUBLASLT_PIP):
        top = lead(line)
        assert top.code == "GH602" and top.severity is Severity.CRITICAL


def test_cublaslt_rule_is_quiet_on_another_librarys_symbol():
    got = match_line("python: symbol foo_bar, version libfoo.so.1 not defined in file libfoo.so.1 with link time "
                     "reference")
    assert got is None or got.code != "GH602"


def test_unresolvable_nvidia_cdi_device_is_the_toolkit_not_configured():
    for line in (PODMAN_CDI, signature("cdi-unresolvable-nvidia-devices").example):
        top = lead(line)
        assert top.code == "GH802" and top.severity is Severity.CRITICAL
        assert "CDI" in top.message
    assert not any(f.code == "GH003" for f in findings(PODMAN_CDI))


def test_docker_without_cdi_support_is_the_toolkit_not_configured():
    top = lead(DOCKER_CDI)
    assert top.code == "GH802" and "cdi" in top.message.lower()


def test_a_cdi_failure_gets_the_cdi_fix_not_the_toolkit_install():
    """The toolkit is installed when its CDI path fails: the fix is the spec (podman) or docker's CDI switch, not
    the repository, the package and the nvidia runtime."""
    spec = commands(lead(PODMAN_CDI))
    assert spec == ["sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"]
    switch = lead(DOCKER_CDI)
    assert [f.command for f in switch.fixes] == [
        "sudo nvidia-ctk runtime configure --runtime=docker --cdi.enabled && sudo systemctl restart docker"]
    assert switch.fixes[0].disruptive  # the restart stops running containers


def test_cdi_rule_is_quiet_on_another_cdi_kind():
    got = match_line(KATA_CDI)
    assert got is None or got.id != "cdi-unresolvable-nvidia-devices"


def test_no_cuda_gpus_is_not_led_by_a_cpu_only_build():
    top = next(f for f in findings(NO_CUDA_GPUS) if f.differential)
    assert top.code == "GH605"
    assert top.differential[0].cause != "torch-cpu-build"
    ranked = {c.cause: c for c in top.differential}
    assert ranked["torch-cpu-build"].status == "ruled out"
    assert ranked["cuda-visible-devices-hides"].status == "open"


def test_torch_not_compiled_with_cuda_still_names_the_cpu_build():
    top = next(f for f in findings(NOT_COMPILED) if f.code == "GH605")
    assert not top.differential or top.differential[0].cause == "torch-cpu-build"


def test_open_module_refusing_a_gpu_without_gsp_offers_the_proprietary_flavour():
    top = lead(OPEN_NO_GSP)
    assert top.code == "GH209" and "open kernel module" in top.message
    cmds = commands(top)
    assert "sudo apt-get install nvidia-driver-<branch>" in cmds
    assert not any(c.endswith("-open") for c in cmds)  # installing the flavour that refused it changes nothing
    assert all(f.disruptive for f in top.fixes if f.command.startswith("sudo apt-get install"))


def test_open_module_for_data_centre_gpus_only_also_offers_the_parameter():
    top = lead(OPEN_DATACENTER_ONLY)
    assert top.code == "GH209"
    cmds = commands(top)
    assert any("NVreg_OpenRmEnableUnsupportedGpus=1" in c for c in cmds)
    assert not any(c.endswith("-open") for c in cmds)


def test_a_gpu_that_needs_the_open_modules_still_gets_them():
    top = lead(NEEDS_OPEN)
    assert top.code == "GH209"
    assert "sudo apt-get install nvidia-driver-<branch>-open" in commands(top)


def test_untrusted_signer_beside_nvrm_lines_is_not_secure_boot():
    # the nvidia module printed NVRM lines, so the kernel accepted its signature
    assert by_code(OPEN_NO_GSP, "GH506") is None


def test_untrusted_signer_alone_still_asks_about_secure_boot():
    found = by_code("[ 1157.036170] PKCS#7 signature not signed with a trusted key", "GH506")
    assert found is not None and found.severity is Severity.WARNING


# NixOS/nixpkgs#420638: the podman error, then the host's nvidia-smi table, pasted with zsh's "› : " prompt
CDI_ABOVE_TABLE = """› : podman run --rm -it --device=nvidia.com/gpu=all ubuntu:latest nvidia-smi
Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all

› : nvidia-smi
Sat Jun 28 16:51:18 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.169                Driver Version: 570.169        CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |                  Off |
| 34%   33C    P8             32W /  550W |    1897MiB /  24564MiB |      4%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""
# MiniMax-AI/MiniMax-M2.5#9: vLLM's worker failure below the nvidia-smi header, no prompts
WORKER_BELOW_TABLE = """nvidia-smi
Mon Mar  2 19:54:20 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.126.20             Driver Version: 580.126.20     CUDA Version: 13.0     |

ERROR 03-02 19:49:00 [multiproc_executor.py:783] WorkerProc failed to start.
"""
# the field report 000 (shared/field-reports), in its own words: "dmesg reported no NVRM error"
PROSE_NO_NVRM = "GPU内存残留62MB不动，显存利用率卡死在0%，dmesg里没报任何NVRM错误\n"


def test_an_error_pasted_above_an_nvidia_smi_table_is_not_lost():
    result = report(CDI_ABOVE_TABLE)
    assert result.verdict != "HEALTHY"
    assert max(result.findings, key=lambda f: f.severity.rank).code == "GH802"
    assert result.snapshot.smi is not None and result.snapshot.smi.driver_version == "570.169"  # the table still read


def test_the_tables_own_rows_stay_with_its_parser():
    clean = CDI_ABOVE_TABLE.split("› : nvidia-smi\n", 1)[1]
    result = report(clean)
    assert result.verdict == "HEALTHY"
    assert not any(f.code == "GH003" for f in result.findings)


def test_an_unknown_error_beside_an_nvidia_smi_header_is_shown_not_healthy():
    result = report(WORKER_BELOW_TABLE)
    assert result.verdict != "HEALTHY"
    unknown = next(f for f in result.findings if f.code == "GH003")
    assert "WorkerProc failed to start" in unknown.message


def test_prose_about_nvrm_is_not_a_clean_kernel_log():
    result = report(PROSE_NO_NVRM)
    assert result.snapshot.kernel_log is None
    assert result.verdict != "HEALTHY"


def test_an_nvrm_line_without_a_timestamp_is_still_a_kernel_log():
    for text in ("NVRM: GPU 0000:04:00.0: RmInitAdapter failed! (0x63:0x0:1905)\n",
                 "               NVRM: installed in this system is not supported by open\n",
                 "Jul 01 22:55:07 gpu kernel: NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)\n"):
        assert report(text).snapshot.kernel_log is not None, text


# An error pasted with a table of values: the table's parser skips the line, so it must not vanish (lines: lsmod as
# the kernel prints it; the modprobe refusal of acidanthera/bugtracker#2237; nvidia-smi's failure of qixuema/envs#4)
LSMOD_WITH_REFUSAL = """Module                  Size  Used by
nvidia_uvm           1998848  0
nvidia              56623104  1 nvidia_uvm
modprobe: ERROR: could not insert 'nvidia_drm': Key was rejected by service
"""
LSPCI_WITH_SMI_FAILURE = """01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GB202 [GeForce RTX 5090] \
[10de:2b85] (rev a1)
\tKernel driver in use: nvidia
NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver \
is installed and running.
"""
LSPCI_VV_AER = """01:00.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] (rev a1)
\tCapabilities: [100 v1] Advanced Error Reporting
\t\tUESta:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- UnsupReq- ACSViol-
\tKernel driver in use: nvidia
"""


def test_an_error_pasted_with_lsmod_is_read():
    result = report(LSMOD_WITH_REFUSAL)
    assert result.verdict != "HEALTHY"
    assert any(f.code == "GH506" and f.severity is Severity.CRITICAL for f in result.findings)


def test_an_error_pasted_with_lspci_is_read():
    result = report(LSPCI_WITH_SMI_FAILURE)
    assert result.verdict != "HEALTHY"
    assert any(f.code == "GH203" for f in result.findings)


def test_lspci_detail_lines_with_error_words_are_values_not_errors():
    result = report(LSPCI_VV_AER)
    assert not any(f.code == "GH003" for f in result.findings)


def _analyses(text: str) -> None:
    """Any paste (a table with lines pasted around it, prose naming NVRM) gives a report, never an exception."""
    result = report(text)
    assert result.verdict in ("HEALTHY", "DEGRADED", "BROKEN", "NO DIAGNOSIS")


test_fuzz_random_text, test_fuzz_mutated_real_pastes = fuzz_tests(
    _analyses, [CDI_ABOVE_TABLE, WORKER_BELOW_TABLE, PROSE_NO_NVRM, LSMOD_WITH_REFUSAL, LSPCI_WITH_SMI_FAILURE,
                LSPCI_VV_AER, OPEN_NO_GSP])


# NVIDIA/open-gpu-kernel-modules#587: an H100 (10de:2331, Hopper: it has a GSP) in an SEV-SNP guest
OPEN_NO_GSP_ON_HOPPER = """[  160.877997] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:2331)
               NVRM: installed in this system is not supported by open
               NVRM: nvidia.ko because it does not include the required GPU
               NVRM: System Processor (GSP).
[  166.261422] nvidia: probe of 0000:01:00.0 failed with error -1
"""


def test_open_module_refusing_a_gpu_that_has_a_gsp_does_not_call_it_pre_turing():
    top = lead(OPEN_NO_GSP_ON_HOPPER)
    assert top.code == "GH209"
    assert "Hopper" in top.message and "10de:2331" in top.message
    assert "Maxwell" not in top.message
    assert "sudo apt-get install nvidia-driver-<branch>" in commands(top)


def test_open_module_refusing_a_volta_keeps_the_rows_words():
    assert "Maxwell, Pascal, Volta" in lead(OPEN_NO_GSP).message  # 10de:1db5 is a V100


# NixOS/nixos-hardware#1880: a GTX 1050 (Pascal) under the 595 driver
LEGACY_580 = """[Sun May 17 15:55:50 2026] NVRM: The NVIDIA NVIDIA GeForce GTX 1050 GPU installed in this system is
                           NVRM:  supported through the NVIDIA 580.xx Legacy drivers. Please
                           NVRM:  visit http://www.nvidia.com/object/unix.html for more
                           NVRM:  information.  The 595.71.05 NVIDIA driver will ignore
                           NVRM:  this GPU.  Continuing probe...
[Sun May 17 15:55:50 2026] NVRM: No NVIDIA GPU found.
"""


def test_a_legacy_gpu_gets_its_legacy_branch_not_the_open_modules():
    top = lead(LEGACY_580)
    assert top.code == "GH209" and "580" in top.message
    cmds = commands(top)
    assert "sudo apt-get install nvidia-driver-580" in cmds
    assert "sudo dnf module install nvidia-driver:580-dkms" in cmds
    assert not any("-open" in c for c in cmds)  # the open modules never ran a pre-Turing GPU
