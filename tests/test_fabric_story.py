"""CUDA failing to initialise on an NVSwitch system leads with Fabric Manager (GH210), and nowhere else.

The NVIDIA Fabric Manager User Guide: on NVSwitch systems (HGX/DGX A100, H100, H200, B200; the cloud's p4d/p5, ND A100
v4, a2/a3-highgpu-8g) CUDA cannot start on the GPUs until Fabric Manager, of the driver's exact version, has set the
fabric up, while nvidia-smi lists them. So where the evidence shows such a system (eight SXM GPUs in nvidia-smi's list,
NV12/NV18 between every pair in `nvidia-smi topo -m`, NVSwitches on the PCI bus, the instance type) and a program
failed to initialise CUDA with nothing that names another cause, GH210 leads, unconfirmed, with the two looks that
decide it. The topology and lspci samples are real (tests/data/corpus, see its README for their sources); the
nvidia-smi lists, PyTorch sessions and sentences are written here from the formats those programs print."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.model import Severity
from repo_paths import CORPUS

# PyTorch's warning when cudaGetDeviceCount fails without an error number (c10/cuda/CUDAFunctions.cpp), written here
TORCH_WARNING = ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: "
                 "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
                 "NumCudaDevices() that might have already set an error? (Triggered internally at "
                 "../c10/cuda/CUDAFunctions.cpp:108.)")
SESSION = f">>> import torch\n>>> torch.cuda.is_available()\n{TORCH_WARNING}\nFalse\n"
# the CUDA runtime's cudaErrorNoDevice string, as a CUDA sample prints it (cuda_runtime_api.h), written here
NO_DEVICE = "cudaGetDeviceCount returned 100\n-> no CUDA-capable device is detected\nResult = FAIL\n"


def smi_list(name: str, count: int) -> str:
    """`nvidia-smi -L` of ``count`` GPUs named ``name`` (the UUIDs made up)."""
    return "".join(f"GPU {i}: {name} (UUID: GPU-{i:08x}-1111-2222-3333-444455556666)\n" for i in range(count))


def findings(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot).findings


def fabric(found) -> list:
    return [f for f in found if f.code == "GH210"]


@pytest.mark.parametrize("board", [
    ("nvidia-smi -L", smi_list("NVIDIA A100-SXM4-80GB", 8)),
    ("nvidia-smi -L", smi_list("NVIDIA H100 80GB HBM3", 8)),
    ("nvidia-smi -L", smi_list("NVIDIA H200", 8)),
    ("nvidia-smi -L", smi_list("NVIDIA H20", 8)),
    ("nvidia-smi -L", smi_list("NVIDIA H800", 8)),  # the SXM part's name (the driver README's device 2324)
    ("nvidia-smi -L", smi_list("NVIDIA B200", 8)),
    ("topo", (CORPUS / "ml-engineering" / "topo-m_8xA100_NV12.txt").read_text()),
    ("topo", (CORPUS / "ml-engineering" / "topo-m_8xH100_NV18.txt").read_text()),
    ("lspci", (CORPUS / "gpud" / "accelerator_nvidia_query_pci__lspci-vvv").read_text()),  # H100 NVSwitches (22a3)
    ("instance-type", "p4d.24xlarge\n"),  # EC2's metadata answer: the name alone
])
@pytest.mark.parametrize("failure", [SESSION, NO_DEVICE])
def test_cuda_failing_on_an_nvswitch_system_leads_with_fabric_manager(board, failure):
    found = findings(board, ("program", failure))
    led = found[0]
    assert led.code == "GH210" and led.severity is Severity.CRITICAL, [(f.code, f.message) for f in found]
    assert "not confirmed" in led.message and "Fabric Manager" in led.message
    assert [f.command for f in led.fixes[:2]] == ["systemctl status nvidia-fabricmanager",
                                                  "nvidia-smi -q | grep -A2 -i fabric"]
    assert not any(f.disruptive for f in led.fixes[:2])
    # then Fabric Manager's version against the driver's: the installed package, the loaded module
    commands = [f.command for f in led.fixes]
    assert "dpkg -l | grep -i fabricmanager" in commands and "cat /sys/module/nvidia/version" in commands
    assert "reported" not in led.labels
    # the symptom's own finding (PyTorch's GH605, CUDA's GH610) is the one it explains
    assert {f.code for f in found if f.severity is Severity.CRITICAL} - {"GH210"} <= set(led.explains)


def test_pytorch_counting_no_gpu_on_the_board_leads_with_fabric_manager():
    # `torch.cuda.device_count()` printing 0 while nvidia-smi lists eight H200 (PyTorch's API: the GPUs it can use)
    paste = (f"$ nvidia-smi -L\n{smi_list('NVIDIA H200', 8)}"
             "$ python -c 'import torch; print(torch.cuda.device_count())'\n0\n")
    led = findings(("paste", paste))[0]
    assert led.code == "GH210" and led.severity is Severity.CRITICAL


def test_in_the_reporters_words_it_leads_as_a_warning():
    # the platform and the failure both told in sentences: nobody saw the machine say either
    found = findings(("issue", "Our AWS p4d.24xlarge (8 A100s): torch.cuda.is_available() returns False on it.\n"))
    led = found[0]
    assert led.code == "GH210" and led.severity is Severity.WARNING
    assert led.labels.get("reported") == "words" and "the reporter's words" in led.message
    assert any("the reporter's words" in e.source for e in led.evidence)


def test_the_platform_told_beside_a_programs_failure_stays_below_critical():
    found = findings(("issue", f"This is an AWS p4d.24xlarge.\n\n{SESSION}"))
    (led,) = fabric(found)
    assert led.severity is Severity.WARNING and led.labels.get("reported") == "words"
    assert found[0].code == "GH605" and "Fabric Manager" in found[0].message  # the machine's line leads, naming it


@pytest.mark.parametrize("line, code", [
    ("AssertionError: Torch not compiled with CUDA enabled", "GH605"),  # a CPU-only wheel: no CUDA to start
    ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:128: UserWarning: The NVIDIA driver on your system is too "
     "old (found version 11040). Please update your GPU driver.", "GH601"),
])
def test_a_line_that_names_another_cause_wins_on_the_board(line, code):
    found = findings(("nvidia-smi -L", smi_list("NVIDIA H100 80GB HBM3", 8)), ("program", f"{line}\n"))
    assert found[0].code == code and not fabric(found)


@pytest.mark.parametrize("board", [
    ("nvidia-smi -L", smi_list("NVIDIA L40S", 8)),  # PCIe cards: no NVSwitch
    ("nvidia-smi -L", smi_list("NVIDIA GeForce RTX 4090", 8)),
    ("nvidia-smi -L", smi_list("NVIDIA A100 80GB PCIe", 2)),
    ("nvidia-smi -L", smi_list("NVIDIA H800 PCIe", 8)),  # device 2322: a PCIe card
    # two PCIe A100s joined by an NVLink bridge: NV12 between one pair, no switch (Fabric Manager User Guide)
    ("topo", "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV12\t0-31\t0\nGPU1\tNV12\t X \t0-31\t0\n"),
    ("instance-type", "p5.4xlarge\n"),  # one H100: no NVSwitch to set up
    ("issue", "It runs on a single-GPU g5.xlarge instance.\n"),
])
@pytest.mark.parametrize("failure", [SESSION, NO_DEVICE])
def test_no_fabric_manager_lead_where_the_gpus_are_no_nvswitch_boards(board, failure):
    found = findings(board, ("program", failure))
    assert not any(f.severity is not Severity.INFO for f in fabric(found)), [(f.code, f.message) for f in found]


def test_without_a_platform_the_failure_keeps_its_own_check():
    found = findings(("program", SESSION))
    assert found[0].code == "GH605" and not fabric(found)


def test_end_to_end_through_analyze_stdin():
    paste = f"$ nvidia-smi -L\n{smi_list('NVIDIA A100-SXM4-40GB', 8)}$ python -c 'import torch'\n{SESSION}"
    result = CliRunner().invoke(main, ["analyze", "-", "--format", "json"], input=paste)
    assert result.exit_code == 2, result.output
    report = json.loads(result.output)
    led = report["findings"][0]
    assert led["code"] == "GH210" and led["severity"] == "critical"
    assert led["differential"][0]["cause"] == "fabric-manager-failed"
    text = CliRunner().invoke(main, ["analyze", "-"], input=paste).output
    assert "systemctl status nvidia-fabricmanager" in text


# --------------------------------------------------------------------------- nvidia-smi -q's Fabric section

def smi_query_sample() -> str:
    """The real `nvidia-smi -q` of one H100 80GB HBM3 (driver 590.48.01) from nvidia_gpu_exporter's captures: its
    Fabric section reads State Completed, Status Success, CliqueId, ClusterUUID and Health."""
    text = (CORPUS / "nvidia-gpu-exporter" / "linux-x86_64__nvidia-h100-mig__590.48.01.txt").read_text()
    body = text[text.index("# $ nvidia-smi -q\n"):].split("\n", 2)[2]
    return body[: body.index("\n####")]


def failed_registration(text: str) -> str:
    # the Status line edited here to an NVML error string (nvmlErrorString(NVML_ERROR_UNKNOWN)), as nvidia-smi prints
    # the status of a registration that completed with an error (NVML API Reference, nvmlGpuFabricInfo_t)
    head, fabric = text.split("    Fabric\n", 1)
    return head + "    Fabric\n" + fabric.replace(": Success", ": Unknown Error", 1)


def test_the_fabric_status_is_read_from_nvidia_smi_q():
    from gpuhealth.parsers.smi_query import parse_smi_query

    (gpu,) = parse_smi_query(smi_query_sample()).gpus
    assert (gpu.fabric_state, gpu.fabric_status) == ("Completed", "Success")
    (gpu,) = parse_smi_query(failed_registration(smi_query_sample())).gpus
    assert (gpu.fabric_state, gpu.fabric_status) == ("Completed", "Unknown Error")


def test_a_registered_gpu_raises_nothing_and_a_failed_registration_is_critical():
    assert not fabric(findings(("nvidia-smi -q", smi_query_sample())))
    (led,) = fabric(findings(("nvidia-smi -q", failed_registration(smi_query_sample()))))
    assert led.severity is Severity.CRITICAL and "failed to register" in led.message
    assert any("State: Completed, Status: Unknown Error" in line for e in led.evidence for line in e.lines)
    assert led.fixes[0].command == "sudo tail -n 50 /var/log/fabricmanager.log" and not led.fixes[0].disruptive


def test_the_fabric_section_of_the_xml_report():
    from gpuhealth.model import SmiReport, Snapshot
    from gpuhealth.parsers.platform import nvswitch_platform
    from gpuhealth.parsers.smi_xml import parse_smi_xml

    # a real A100-SXM4 report (telegraf's test data) outside any fabric: <fabric><state>N/A</state>
    xml = (CORPUS / "telegraf-nvidia-smi" / "a100-sxm4-v12.xml").read_text()
    (gpu,) = parse_smi_xml(xml).gpus
    assert gpu.fabric_state == "N/A" and nvswitch_platform(Snapshot(smi=SmiReport(gpus=(gpu,)))) is None
    # the same report with the state edited here to a GPU waiting for Fabric Manager
    waiting = xml.replace("<state>N/A</state>", "<state>In Progress</state>", 1)
    (gpu,) = parse_smi_xml(waiting).gpus
    assert gpu.fabric_state == "In Progress"
    (led,) = fabric(findings(("nvidia-smi -q -x", waiting)))
    assert led.severity is Severity.WARNING and "have not joined the NVLink fabric" in led.message


def test_a_fabric_state_of_not_supported_is_no_nvswitch_system():
    from gpuhealth.model import Gpu, SmiReport, Snapshot
    from gpuhealth.parsers.platform import nvswitch_platform

    outside = (Gpu(index=0, name="NVIDIA L40S", fabric_state="Not Supported", fabric_status="N/A"),)
    assert nvswitch_platform(Snapshot(smi=SmiReport(gpus=outside))) is None


def test_a_live_hosts_fabric_status_is_read_as_nvidia_smi_prints_it():
    """nvmlDeviceGetGpuFabricInfo's status is NVML's return code, to be read only once the state is complete (NVML API
    Reference, nvmlGpuFabricInfo_t): "Success" for 0, else nvmlErrorString's words, as nvidia-smi -q prints them."""
    from gpuhealth import nvml
    from test_nvml import FakeNvml, fabric_info_structure

    class Fabric(FakeNvml):
        c_nvmlGpuFabricInfo_t = fabric_info_structure()

        def nvmlDeviceGetGpuFabricInfo(self, handle, reference):  # noqa: N802
            reference._obj.state = 3  # NVML_GPU_FABRIC_STATE_COMPLETED
            reference._obj.status = 0 if handle == 0 else 999  # NVML_SUCCESS, NVML_ERROR_UNKNOWN
            return 0

        def nvmlErrorString(self, code):  # noqa: N802
            return b"Unknown Error" if code == 999 else b"?"

    first, second = nvml.probe(Fabric())["gpus"]
    assert (first["fabric_state"], first["fabric_status"]) == ("Completed", "Success")
    assert (second["fabric_state"], second["fabric_status"]) == ("Completed", "Unknown Error")


# --------------------------------------------------------------------------- the reporter's words

@pytest.mark.parametrize("story", [
    "Our box has 8x H100 SXM. Training works on a single GPU but fails on all 8 GPUs.",
    "We run on a p5.48xlarge and multi-GPU training will not start.",
    "我有8张H20，单卡可以跑，多卡训练启动不了",  # eight H20 (an HGX H20 board): one card runs, all of them do not start
])
def test_one_gpu_works_all_fail_on_a_told_nvswitch_board_leads_with_fabric_manager_as_a_warning(story):
    led = findings(("issue", story))[0]
    assert led.code == "GH210" and led.severity is Severity.WARNING, (led.code, led.message)
    assert led.labels.get("reported") == "words" and "the reporter's words" in led.message


@pytest.mark.parametrize("texts", [
    [("issue", "Training works on a single GPU but fails on all 8 GPUs.")],  # no platform: P2P on PCIe first
    [("issue", "8x RTX 4090: training works on a single GPU but fails on all 8 GPUs.")],
    [("nvidia-smi -L", smi_list("NVIDIA L40S", 8)), ("issue", "Training works on one GPU but fails on all 8 GPUs.")],
    [("issue", "Our 8x H100 SXM box: multi-GPU training hangs at the first all_reduce.")],  # a hang: CUDA started
])
def test_the_story_elsewhere_gets_no_fabric_manager_lead(texts):
    found = findings(*texts)
    assert found[0].code != "GH210" and not any(f.severity is not Severity.INFO for f in fabric(found))


@pytest.mark.parametrize("words", [
    "fabric manager not installed on our 8x H100 SXM node",
    "nvidia-fabricmanager failed after the driver update",
    "There is a version mismatch between fabric manager and driver.",
])
def test_the_reporters_words_about_fabric_manager_itself(words):
    led = findings(("issue", words))[0]
    assert led.code == "GH210" and led.severity is Severity.WARNING


def test_chinese_counts_name_the_board():
    from gpuhealth.parsers.gpu_mentions import named_gpus

    assert [(g.named, g.count) for g in named_gpus("我有8张H20，多卡训练启动不了")] == [("H20", 8)]
    assert [(g.named, g.count) for g in named_gpus("一台8卡H800服务器")] == [("H800", 8)]
    assert [g.count for g in named_gpus("two RTX 3090 cards")] == [2]


def test_the_fabric_columns_of_nvidia_smi_query_gpu():
    # `nvidia-smi --query-gpu=index,name,fabric.state,fabric.status --format=csv` (the fields nvidia-smi
    # --help-query-gpu lists; the rows written here)
    head = "index, name, fabric.state, fabric.status\n"
    waiting = head + "".join(f"{i}, NVIDIA H100 80GB HBM3, In Progress, N/A\n" for i in range(8))
    (led,) = fabric(findings(("csv", waiting)))
    assert led.severity is Severity.WARNING and "have not joined the NVLink fabric" in led.message
    failed = head + "0, NVIDIA H100 80GB HBM3, Completed, Unknown Error\n" + "".join(
        f"{i}, NVIDIA H100 80GB HBM3, Completed, Success\n" for i in range(1, 8))
    found = findings(("csv", failed))
    (led,) = fabric(found)
    assert led.severity is Severity.CRITICAL and "1 GPU(s) failed to register" in led.message
    from gpuhealth.parsers.smi_csv import parse_smi_csv

    assert not parse_smi_csv(failed).gpus[0].field_errors  # the status is a value, not a field nvidia-smi failed
