"""The NVSwitch platform the evidence names (knowledge/nvswitch_platforms.csv, parsers/platform.py) and its use in
the differential (checks/diagnosis.py): on an NVSwitch system Fabric Manager not running ranks first among the open
causes of CUDA failing to initialise, and nowhere else.

The examples are written here from the NVIDIA Fabric Manager User Guide's list of NVSwitch systems, the names
nvidia-smi prints for SXM and PCIe parts, and the cloud vendors' instance-type pages the table cites (AWS P4/P5,
Azure ND A100 v4 / ND H100 v5, Google Cloud A2/A3, Oracle bare metal GPU shapes); none is copied from a case."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import FABRIC_CAUSE, rank
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.causes import symptoms
from gpuhealth.knowledge.nvswitch import gpus_on_nvswitch, named_nvswitch_platform, rows
from gpuhealth.model import NvswitchPlatform, Severity
from gpuhealth.parsers.platform import nvswitch_platform, platform_in_texts

# PyTorch's warning when cudaGetDeviceCount fails without an error number (c10/cuda/CUDAFunctions.cpp), written here
TORCH_WARNING = ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: "
                 "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
                 "NumCudaDevices() that might have already set an error? (Triggered internally at "
                 "../c10/cuda/CUDAFunctions.cpp:108.)")
SESSION = f">>> import torch\n>>> torch.cuda.is_available()\n{TORCH_WARNING}\nFalse\n"


def smi_list(name: str, count: int) -> str:
    """`nvidia-smi -L` of ``count`` GPUs named ``name`` (the UUIDs made up)."""
    return "".join(f"GPU {i}: {name} (UUID: GPU-{i:08x}-1111-2222-3333-444455556666)\n" for i in range(count))


def differential(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    report = run_checks(snapshot)
    led = next(f for f in report.findings if f.differential)
    return snapshot, led


def test_every_row_names_a_kind_a_pattern_and_its_source():
    assert rows()
    for row in rows():
        assert row.kind in ("gpu", "system", "instance") and "<https://" in row.source, row.platform
        assert row.kind != "gpu" or row.min_gpus >= 8, row.platform  # the 4-GPU HGX boards have no NVSwitch


@pytest.mark.parametrize("name", [
    "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "Standard_ND96asr_v4",
    "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5", "a2-highgpu-8g", "a2-megagpu-16g", "a3-highgpu-8g",
    "BM.GPU4.8", "BM.GPU.H100.8", "DGXA100 920-23687-2531-001", "DGX H100", "HGX A100", "HGX H100 8-GPU", "DGX-2",
])
def test_the_names_of_nvswitch_systems_and_instances(name):
    found = named_nvswitch_platform(f"the node is {name}, freshly installed")
    assert found is not None and found[1].lower() in name.lower()


@pytest.mark.parametrize("name", [
    "p5.4xlarge", "g5.48xlarge", "p3.16xlarge", "a2-highgpu-1g", "a3-highgpu-4g", "Standard_NC24ads_A100_v4",
    "Standard_NC96ads_A100_v4", "HGX A100 4-GPU", "DGX Station A100", "BM.GPU.A10.4",
])
def test_systems_without_nvswitch_are_not_read_as_one(name):
    assert named_nvswitch_platform(f"the node is {name}") is None


def test_eight_sxm_gpus_make_a_board_four_or_pcie_ones_do_not():
    assert gpus_on_nvswitch(["NVIDIA A100-SXM4-80GB"] * 8) is not None
    assert gpus_on_nvswitch(["NVIDIA H100 80GB HBM3"] * 8) is not None
    assert gpus_on_nvswitch(["NVIDIA H200"] * 8) is not None
    assert gpus_on_nvswitch(["NVIDIA A100-SXM4-40GB"] * 4) is None  # HGX A100 4-GPU: NVLink without NVSwitch
    assert gpus_on_nvswitch(["NVIDIA A100-PCIE-40GB"] * 8) is None
    assert gpus_on_nvswitch(["NVIDIA H100 PCIe"] * 8) is None
    assert gpus_on_nvswitch(["NVIDIA H200 NVL"] * 8) is None


def test_program_output_names_the_platform_and_words_are_reported():
    dmi = "System Information\n\tManufacturer: NVIDIA\n\tProduct Name: DGXA100 920-23687-2531-001\n"
    assert platform_in_texts([("dmidecode", dmi)]) == NvswitchPlatform(
        "NVIDIA DGX A100", "DGXA100", "dmidecode")
    assert not platform_in_texts([("instance-type", "p4d.24xlarge\n")]).reported
    assert not platform_in_texts([("doc", '{\n  "instanceType" : "p5.48xlarge",\n}')]).reported
    worded = platform_in_texts([("issue", "We run this on a p4d.24xlarge in us-east-1.")])
    assert worded.reported and worded.shown == "p4d.24xlarge"
    # machine output wins over words, whichever comes first
    both = platform_in_texts([("issue", "It is an HGX H100 box."), ("product_name", "DGXA100\n")])
    assert not both.reported and both.name == "NVIDIA DGX A100"
    assert platform_in_texts([("issue", "an RTX 4090 workstation")]) is None


def test_words_naming_the_platform_put_fabric_manager_first_as_a_candidate():
    snapshot, led = differential(("issue", f"This is an AWS p4d.24xlarge.\n\n{SESSION}"))
    assert snapshot.platform is not None and snapshot.platform.reported
    top = next(c for c in led.differential if c.status != "ruled out")
    assert top.cause == FABRIC_CAUSE and top.status == "open"
    assert "the reporter's words" in top.why and "p4d.24xlarge" in top.why
    assert "nvidia-smi -q | grep -A2 -i fabric" in top.command
    # the platform named only in words: Fabric Manager's lead stays a warning, below the program's critical line
    fabric = [f for f in run_checks(snapshot).findings if f.code == "GH210"]
    assert [f.severity for f in fabric] == [Severity.WARNING] and fabric[0].labels.get("reported") == "words"


def test_eight_sxm_gpus_in_nvidia_smi_put_fabric_manager_first():
    _, led = differential(("nvidia-smi -L", smi_list("NVIDIA A100-SXM4-80GB", 8)), ("python", SESSION))
    top = next(c for c in led.differential if c.status != "ruled out")
    assert top.cause == FABRIC_CAUSE and "8 x NVIDIA A100-SXM4-80GB" in top.why


@pytest.mark.parametrize("gpus", [smi_list("NVIDIA A100-PCIE-40GB", 8), smi_list("NVIDIA A100-SXM4-40GB", 4), ""])
def test_elsewhere_fabric_manager_stays_out_of_pytorchs_differential(gpus):
    texts = [("python", SESSION)] + ([("nvidia-smi -L", gpus)] if gpus else [])
    _, led = differential(*texts)
    assert FABRIC_CAUSE not in [c.cause for c in led.differential]


def test_the_platform_moves_fabric_manager_first_in_a_listed_differential():
    symptom = symptoms()["framework-no-gpu"]
    plain = [c.cause for c in rank(symptom, [], [], set(), {})]
    assert plain[0] != FABRIC_CAUSE and FABRIC_CAUSE in plain
    on_board = NvswitchPlatform("NVIDIA HGX H100 8-GPU (eight H100 SXM5)", "8 x NVIDIA H100 80GB HBM3", "nvidia-smi")
    ranked = rank(symptom, [], [], set(), {}, platform=on_board)
    assert ranked[0].cause == FABRIC_CAUSE and ranked[0].status == "open"
    assert [c.cause for c in ranked[1:]] == [c for c in plain if c != FABRIC_CAUSE]


def test_a_live_hosts_gpu_list_or_product_name_names_the_platform():
    from gpuhealth.model import Gpu, OsInfo, SmiReport, Snapshot

    gpus = tuple(Gpu(index=i, name="NVIDIA H100 80GB HBM3") for i in range(8))
    assert nvswitch_platform(Snapshot(smi=SmiReport(gpus=gpus))).name.startswith("NVIDIA HGX H100")
    assert nvswitch_platform(Snapshot(os=OsInfo(machine_product="DGXH100"))).name == "NVIDIA DGX H100/H200"
    assert nvswitch_platform(Snapshot(os=OsInfo(machine_product="PowerEdge R750xa"))) is None
    assert Severity.CRITICAL  # the model's severities are unchanged by the field


def test_nvswitches_on_the_bus_or_a_gpus_fabric_state_name_an_nvswitch_system():
    from gpuhealth.model import Gpu, PciDevice, SmiReport, Snapshot

    switch = PciDevice("0000:07:00.0", "10de", "1af1", class_code="0680", name="NVIDIA Corporation Device 1af1")
    gpu = PciDevice("0000:07:00.0", "10de", "20b2", class_code="0302")
    assert "NVSwitch" in nvswitch_platform(Snapshot(pci_devices=(switch,) * 6)).name
    assert nvswitch_platform(Snapshot(pci_devices=(gpu,))) is None
    joined = (Gpu(index=0, name="NVIDIA A100-SXM4-80GB", fabric_state="In Progress"),)
    assert "Fabric State: In Progress" in nvswitch_platform(Snapshot(smi=SmiReport(gpus=joined))).shown
    outside = (Gpu(index=0, name="NVIDIA A100-PCIE-40GB", fabric_state="N/A"),)
    assert nvswitch_platform(Snapshot(smi=SmiReport(gpus=outside))) is None


def test_gpus_of_no_nvswitch_board_rule_fabric_manager_out_of_the_framework_differential():
    from gpuhealth.model import Gpu, SmiReport, Snapshot
    from gpuhealth.parsers.platform import off_nvswitch

    symptom = symptoms()["framework-no-gpu"]
    shown = "nvidia-smi lists NVIDIA GeForce RTX 4090"
    ranked = rank(symptom, [], [], set(), {}, off_fabric=shown)
    fabric = next(c for c in ranked if c.cause == FABRIC_CAUSE)
    assert fabric.status == "ruled out" and shown in fabric.why and "Fabric Manager User Guide" in fabric.source
    pcie = tuple(Gpu(index=i, name="NVIDIA A100-PCIE-40GB") for i in range(8))
    assert "A100-PCIE-40GB" in off_nvswitch(Snapshot(smi=SmiReport(gpus=pcie)))
    half_board = tuple(Gpu(index=i, name="NVIDIA A100-SXM4-40GB") for i in range(4))
    assert off_nvswitch(Snapshot(smi=SmiReport(gpus=half_board))) is None  # a 4-GPU board, or part of an 8-GPU one
    assert off_nvswitch(Snapshot()) is None  # no GPU list: not known


def test_every_system_and_instance_name_holds_a_hint_and_a_row_without_one_is_refused(monkeypatch):
    # the hints let a paste that names no platform skip every row's search (written here)
    from gpuhealth.knowledge import nvswitch

    for row in nvswitch.rows():
        if row.kind != "gpu":
            assert any(hint in row.pattern.pattern.lower().replace("\\", "") for hint in nvswitch.HINTS), row
    assert nvswitch.named_nvswitch_platform("GPU 0: NVIDIA A100-SXM4-80GB\n" * 1000) is None
    real = nvswitch.table_rows

    def rows(name):
        found = real(name)
        return [*found, {**found[-1], "kind": "instance", "match": r"\bx9\.huge\b"}]

    nvswitch.rows.cache_clear()
    monkeypatch.setattr(nvswitch, "table_rows", rows)
    try:
        with pytest.raises(ValueError, match="HINTS"):
            nvswitch.rows()
    finally:
        monkeypatch.undo()
        nvswitch.rows.cache_clear()
