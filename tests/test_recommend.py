"""recommend(): architecture, driver branch, flavour, install route, CUDA and PyTorch per GPU model; and
the tables it reads (knowledge/gpus.csv, knowledge/drivers.csv)."""

from __future__ import annotations

import io
import json
import re

import pytest
from click.testing import CliRunner

from conftest import CORPUS, corpus_files, corpus_id
from gpuhealth.advice_commands import recommend as recommend_command
from gpuhealth.bundle import RecordingHost
from gpuhealth.collect import collect
from gpuhealth.knowledge import drivers, gpus
from gpuhealth.model import Gpu, OsInfo, PciDevice, SmiReport, Snapshot
from gpuhealth.recommend import recommend, render_text, to_json
from hostcases import FakeHost, load_spec

UBUNTU = OsInfo(id="ubuntu", id_like=("debian",), version_id="22.04", pretty_name="Ubuntu 22.04.4 LTS")
ROCKY = OsInfo(id="rocky", id_like=("rhel", "centos", "fedora"), version_id="9.3", pretty_name="Rocky Linux 9.3")


def snapshot(os_info: OsInfo | None, *device_ids: str, captured_at: str = "2026-09-01T00:00:00+00:00") -> Snapshot:
    devices = tuple(PciDevice(f"0000:{i + 1:02x}:00.0", "10de", d, "0302") for i, d in enumerate(device_ids))
    return Snapshot(os=os_info, pci_devices=devices, captured_at=captured_at)


# device ID, architecture, compute capability, preferred branch, flavour
CASES = [
    ("102d", "Kepler", "3.7", 470, "proprietary"),  # Tesla K80
    ("15f8", "Pascal", "6.0", 580, "proprietary"),  # Tesla P100
    ("1bb3", "Pascal", "6.1", 580, "proprietary"),  # Tesla P4
    ("1db4", "Volta", "7.0", 580, "proprietary"),  # Tesla V100 PCIe
    ("1eb8", "Turing", "7.5", 580, "open"),  # Tesla T4
    ("20b0", "Ampere", "8.0", 580, "open"),  # A100 SXM4 40GB
    ("2236", "Ampere", "8.6", 580, "open"),  # A10
    ("2330", "Hopper", "9.0", 580, "open"),  # H100 SXM5
    ("26b9", "Ada", "8.9", 580, "open"),  # L40S
    ("2684", "Ada", "8.9", 580, "open"),  # RTX 4090
    ("2941", "Blackwell", "10.0", 580, "open"),  # GB200
    ("2bb5", "Blackwell", "12.0", 580, "open"),  # RTX PRO 6000 Blackwell Server Edition
]


@pytest.mark.parametrize("os_info", [UBUNTU, ROCKY], ids=["ubuntu", "rocky"])
@pytest.mark.parametrize(("device_id", "arch", "cc", "branch", "flavour"), CASES, ids=[c[0] for c in CASES])
def test_recommend_per_architecture(os_info, device_id, arch, cc, branch, flavour):
    result = recommend(snapshot(os_info, device_id, device_id))
    (gpu,) = result.gpus
    assert (gpu.architecture, gpu.compute_capability, gpu.count) == (arch, cc, 2)
    assert gpu.preferred_branch == branch and result.branch.number == branch
    assert result.flavour == gpu.flavour == flavour
    commands = [c.text for c in result.install.commands]
    if os_info is UBUNTU:
        assert "sudo ubuntu-drivers list --gpgpu" in commands
        package = f"nvidia-driver-{branch}-server" + ("-open" if flavour == "open" else "")
        assert f"sudo apt-get install -y {package}" in commands
    else:
        stream = f"{branch}-open" if flavour == "open" else f"{branch}-dkms"
        assert f"sudo dnf module install -y nvidia-driver:{stream}" in commands
        assert any("cuda/repos/rhel9/x86_64/cuda-rhel9.repo" in c for c in commands)
        assert "sudo dnf install -y epel-release" in commands
    branches = [b.number for b in gpu.branches]
    if arch == "Kepler":
        assert branches == [470] and gpu.branches[0].designation == "legacy"
    elif arch in ("Pascal", "Volta"):
        assert 595 not in branches and 580 in branches and 535 in branches  # 580 is their last
        assert gpu.open_modules == "unsupported"
    else:
        assert {580, 595, 620} <= set(branches)
    if arch == "Blackwell":
        assert gpu.open_modules == "required" and 535 not in branches
        assert any("open kernel modules" in n for n in result.notes)


def test_cuda_toolkits_and_pytorch_wheels():
    kepler = recommend(snapshot(UBUNTU, "102d")).cuda
    assert kepler.native[-1] == "11.4" and kepler.minor_compat == ("11.5", "11.6", "11.7", "11.8")
    # K80 (3.7): only cu118 has sm_37, and only the releases built from pytorch/builder are known to
    assert (kepler.pytorch_wheel, kepler.pytorch_wheel_via) == ("cu118", "minor-version compatibility")
    assert kepler.pytorch_spec == "torch<2.6" and "builder" in kepler.pytorch_source
    pascal = recommend(snapshot(UBUNTU, "15f8")).cuda
    assert pascal.native[-1] == "12.9" and not any(v.startswith("13.") for v in pascal.native + pascal.minor_compat)
    assert pascal.pytorch_wheel == "cu126"  # cu128 and cu129 have no sm_60 kernels
    assert pascal.pytorch_spec == "torch"
    hopper = recommend(snapshot(ROCKY, "2330")).cuda
    assert hopper.native[0] == "11.8" and hopper.native[-1] == "13.0"
    assert hopper.minor_compat == ("13.1", "13.2", "13.3")
    assert (hopper.pytorch_wheel, hopper.pytorch_wheel_via) == ("cu130", "native")
    assert "not confirmed" in hopper.pytorch_source
    blackwell = recommend(snapshot(UBUNTU, "2941")).cuda
    assert blackwell.native[0] == "12.8"


def test_mixed_hosts():
    both = recommend(snapshot(UBUNTU, "15f8", "2204"))  # P100 + RTX 3090: one driver for both
    assert both.branch.number == 580 and both.flavour == "proprietary"
    assert both.cuda.pytorch_wheel == "cu126"  # the newest with kernels for both 6.0 and 8.6
    conflict = recommend(snapshot(UBUNTU, "15f8", "2941"))  # Pascal cannot use open, Blackwell needs it
    assert conflict.flavour is None and conflict.install is None
    assert any("no flavour serves both" in n for n in conflict.notes)
    apart = recommend(snapshot(UBUNTU, "102d", "26b9"))  # Kepler's last branch predates Ada
    assert apart.branch is None and any("no single driver branch" in n for n in apart.notes)


def test_unknown_device_end_of_life_and_other_distros():
    result = recommend(snapshot(None, "ffff", "2330"))
    assert any("10de:ffff" in n for n in result.notes)
    assert result.install.family == "other" and "--kernel-module-type=open" in result.install.commands[0].text
    early = recommend(snapshot(UBUNTU, "2330", captured_at="2026-01-10T00:00:00"))
    lts = {b.number: b for b in early.gpus[0].branches}
    assert lts[535].past_end_of_life is False and lts[580].past_end_of_life is False
    late = recommend(snapshot(UBUNTU, "2330", captured_at="2026-09-01"))
    assert {b.number: b for b in late.gpus[0].branches}[535].past_end_of_life is True
    debian = recommend(snapshot(OsInfo(id="debian", version_id="12"), "2330"))
    assert "nvidia-detect" in debian.install.commands[-1].text and "not confirmed" in debian.install.source
    rhel10 = recommend(snapshot(OsInfo(id="rhel", version_id="10.0", architecture="aarch64"), "2941"))
    texts = [c.text for c in rhel10.install.commands]
    assert "sudo dnf install -y nvidia-open" in texts and any("rhel10/sbsa" in t for t in texts)
    assert "sudo dnf install -y epel-release" not in texts


def test_gpus_from_the_driver_only():
    smi = SmiReport(driver_version="535.161.08", gpus=(Gpu(index=0, name="NVIDIA H100 80GB HBM3",
                                                            pci_address="0000:19:00.0", pci_device_id="2330"),))
    result = recommend(Snapshot(os=UBUNTU, smi=smi))
    assert result.gpus[0].architecture == "Hopper" and result.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert result.installed_branch == 535 and result.installed_supports_all is True


@pytest.mark.parametrize(("name", "arch", "flavour", "route"), [
    ("h100x8-xid-ecc", "Hopper", "open", "nvidia-driver-580-server-open"),
    ("nouveau-holds-gpu", "Ampere", "open", "nvidia-driver:580-open"),
    ("ubuntu-before-install", "Ada", "open", "nvidia-driver-580-server-open"),
    ("rocky-initramfs-stale-unsigned", None, "open", "nvidia-driver:580-open"),
    ("no-gpu", None, None, None),
])
def test_recommend_from_test_hosts(name, arch, flavour, route):
    result = recommend(collect(FakeHost(load_spec(name))))
    if route is None:
        assert result.gpus == () and result.install is None
        assert any("no NVIDIA GPU" in n for n in result.notes)
        return
    if arch:
        assert {g.architecture for g in result.gpus} == {arch}
    assert result.flavour == flavour
    assert any(route in c.text for c in result.install.commands)
    if name == "h100x8-xid-ecc":
        assert result.gpus[0].count == 8 and result.installed_driver == "535.161.08"


def test_renderers():
    result = recommend(snapshot(ROCKY, "2330", "102d"))
    data = json.loads(to_json(result))
    assert data["schema_version"] == 1 and data["gpus"][0]["device_id"] == "2330"
    from rich.console import Console

    out = io.StringIO()
    render_text(recommend(snapshot(UBUNTU, "2941")), Console(file=out, width=200))
    text = out.getvalue()
    assert "Blackwell" in text and "nvidia-driver-580-server-open" in text and "cu130" in text


def test_cli_recommend_from_a_bundle(tmp_path):
    recorder = RecordingHost(FakeHost(load_spec("h100x8-xid-ecc")), tmp_path / "b", hostname="gpu-node-17")
    collect(recorder, captured_at="t")
    recorder.finish()
    runner = CliRunner()
    result = runner.invoke(recommend_command, ["--from", str(tmp_path / "b"), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["branch"]["number"] == 580 and data["flavour"] == "open"
    text = runner.invoke(recommend_command, ["--from", str(tmp_path / "b")])
    assert text.exit_code == 0 and "Hopper" in text.output
    bad = runner.invoke(recommend_command, ["--from", str(tmp_path)])
    assert bad.exit_code == 3


# --------------------------------------------------------------------------- the tables


def test_gpu_table_rows_are_sourced_and_disjoint():
    rows = gpus.all_rows()
    assert len(rows) > 40
    for row in rows:
        assert row.source and row.cc_source and row.chips and row.first <= row.last
        assert row.compute_capability or row.cc_source.startswith("unknown")
    for before, after in zip(rows, rows[1:], strict=False):
        assert before.last < after.first


def test_gpu_table_agrees_with_pci_ids(corpus):
    """Every pci.ids device named after a chip maps to that chip's architecture."""
    prefixes = {"GF": "Fermi", "GK": "Kepler", "GM": "Maxwell", "GP": "Pascal", "GV": "Volta", "TU": "Turing",
                "GA": "Ampere", "AD": "Ada", "GH": "Hopper", "GB": "Blackwell"}
    text = (corpus / "pciids" / "pci.ids.nvidia-10de-excerpt").read_text(encoding="utf-8", errors="replace")
    block = text.split("\n10de  NVIDIA Corporation\n", 1)[1]
    checked = 0
    for line in block.splitlines():
        if line and not line.startswith(("\t", "#")):
            break
        match = re.match(r"^\t([0-9a-f]{4})  (GF|GK|GM|GP|GV|TU|GA|AD|GH|GB)\d", line)
        if match:
            model = gpus.lookup(match[1])
            assert model is not None and model.architecture == prefixes[match[2]], line
            checked += 1
    assert checked > 900


BRIEF_IDS = {"2330": "Hopper", "2335": "Hopper", "20b0": "Ampere", "20b2": "Ampere", "2236": "Ampere",
             "2237": "Ampere", "26b9": "Ada", "27b8": "Ada", "1eb8": "Turing", "1db1": "Volta", "1db4": "Volta",
             "1db5": "Volta", "15f8": "Pascal", "1bb3": "Pascal", "102d": "Kepler", "17c2": "Maxwell",
             "2684": "Ada", "2204": "Ampere", "1e81": "Turing", "2231": "Ampere", "2941": "Blackwell",
             "2bb5": "Blackwell", "2bb1": "Blackwell", "2901": "Blackwell", "2b85": "Blackwell"}


@pytest.mark.parametrize("device_id", sorted(BRIEF_IDS))
def test_known_gpus(device_id):
    assert gpus.lookup(device_id).architecture == BRIEF_IDS[device_id]
    assert gpus.lookup(f"0x{device_id.upper()}10DE").device_id == device_id


def test_lookup_rejects_junk():
    assert gpus.lookup(None) is None and gpus.lookup("") is None and gpus.lookup("zzzz") is None
    assert gpus.lookup("0001") is None


@pytest.mark.parametrize("path", corpus_files("**/*lspci*"), ids=corpus_id)
def test_every_corpus_lspci_gpu_maps_to_an_architecture(path):
    from gpuhealth.model import ParseError
    from gpuhealth.parsers.lspci import parse_lspci

    try:
        devices = parse_lspci(path.read_text(encoding="utf-8", errors="replace"))
    except ParseError:
        pytest.skip("not an lspci listing with device IDs (lspci -t)")
    for device in devices:
        if device.is_nvidia_gpu and device.device_id:
            assert gpus.lookup(device.device_id) is not None, f"{path.name}: {device.device_id}"


def test_every_corpus_device_id_maps_to_an_architecture(corpus):
    pattern = re.compile(r"(?:pci_device_id>|Device Id\s*:\s*)(?:0x)?([0-9A-Fa-f]{4})10DE", re.IGNORECASE)
    found = set()
    for path in corpus.rglob("*"):
        if path.is_file() and path.suffix != ".md":
            found.update(m.lower() for m in pattern.findall(path.read_text(encoding="utf-8", errors="replace")))
    assert {"2330", "2684", "20b0", "15f8", "1eb8", "2bb4"} <= found
    unknown = sorted(d for d in found if gpus.lookup(d) is None)
    assert unknown == []


def test_driver_table_rows_are_sourced():
    table = drivers.rows()
    assert all(r.source.strip() for r in table)
    assert len({(r.kind, r.key, r.field) for r in table}) == len(table)
    assert {r.kind for r in table} == {"arch", "branch", "wheel", "installer", "fabric"}
    for row in table:  # the installer, Fabric Manager and wheel-kernel rows name their document's address
        if row.kind in ("installer", "fabric") or row.field in ("archs", "torch_below"):
            assert row.source.startswith("not confirmed") or "<http" in row.source, row
    assert {a for a in gpus.ARCHITECTURES if drivers.architecture(a)} == set(gpus.ARCHITECTURES)


def test_toolkit_drivers_are_one_table():
    """The driver each CUDA toolkit bundles and the minor-version minimums were in drivers.csv and again in
    cuda_drivers.csv: recommend now reads cuda_drivers.csv's rows, so GH601 and recommend cannot disagree."""
    from gpuhealth.knowledge import cuda_drivers

    kits = drivers.toolkits()
    assert [(k.version, k.min_driver) for k in kits] == [
        (v, cuda_drivers.requirement(v).driver_min) for v in dict.fromkeys(k.version for k in kits)]
    assert {r.cuda for r in cuda_drivers.minor_releases()} == {k.version for k in kits}
    assert all("CUDARN" in k.source or "CUDA 13.3 release notes" in k.source for k in kits)
    assert [drivers.family_minimum(int(r.cuda)) for r in cuda_drivers.families()] == [450, 525, 580]
    assert drivers.family_minimum(10) is None


def test_driver_facts():
    assert drivers.branch(470).last_for == ("Kepler",)
    assert drivers.branch(580).last_for == ("Maxwell", "Pascal", "Volta")
    assert drivers.branch(390).last_for == ("Fermi",)
    assert drivers.branch(535).designation == "Long Term Support Branch"
    assert drivers.branch(580).cuda == "13.0" and drivers.branch(535).cuda == "12.2"
    assert drivers.architecture("Blackwell").open_modules == "required"
    assert drivers.architecture("Turing").open_modules == "supported"
    assert drivers.architecture("Volta").open_modules == "unsupported"
    assert "Blackwell" not in drivers.branch(535).architectures
    assert "Kepler" in drivers.branch(470).architectures and "Kepler" not in drivers.branch(535).architectures
    assert "Pascal" not in drivers.branch(595).architectures
    assert drivers.family_minimum(12) == 525 and drivers.family_minimum(13) == 580
    kits = {k.version: k.min_driver for k in drivers.toolkits()}
    assert kits["12.8"] == "570.26" and kits["11.8"] == "520.61.05" and "12.7" not in kits
    assert [w.variant for w in drivers.wheels()] == ["cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130"]
    assert drivers.branch_of("535.161.08") == 535 and drivers.branch_of("x") is None


def test_corpus_location():
    assert CORPUS.is_dir()


# --------------------------------------------------------------------------- issue 22: the whole stack


def _bundle(tmp_path, name="h100x8-xid-ecc", captured_at="t"):
    recorder = RecordingHost(FakeHost(load_spec(name)), tmp_path / "b", hostname="gpu-node-17")
    collect(recorder, captured_at=captured_at)
    recorder.finish()
    return tmp_path / "b"


def test_shipped_h100x8_example_names_fabric_manager_with_the_branch_change():
    """The shipped example: 535 supports the H100s but is past its end of life on the capture date
    (2026-11-30), so the advice is an upgrade, and the upgrade installs Fabric Manager of the new branch."""
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "h100x8-xid-ecc.tar.gz"
    result = CliRunner().invoke(recommend_command, ["--from", str(example), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["installed_supports_all"] is True and data["verdict"] == "upgrade-advised"
    assert "end of life" in data["verdict_reason"]
    commands = [c["text"] for c in data["install"]["commands"]]
    assert "sudo apt-get install -y nvidia-driver-580-server-open" in commands
    fm = commands.index("sudo apt-get install -y nvidia-fabricmanager-580")
    assert fm < commands.index("sudo reboot") and "sudo systemctl enable nvidia-fabricmanager" in commands
    assert data["fabric_manager"]["reason"] == "nvidia-smi -q: Fabric State Completed"
    assert "802" in data["fabric_manager"]["note"] and "fabric-manager-user-guide" in data["fabric_manager"]["source"]


def test_nothing_to_change_when_the_installed_branch_fits():
    smi = SmiReport(driver_version="580.95.05", gpus=tuple(
        Gpu(index=i, name="NVIDIA H100 80GB HBM3", pci_address=f"0000:{i + 1:02x}:00.0", pci_device_id="2330",
            fabric_state="Completed") for i in range(8)))
    result = recommend(Snapshot(os=UBUNTU, smi=smi, captured_at="2026-09-01T00:00:00+00:00"))
    assert result.verdict == "nothing-to-change" and result.install is None
    assert result.cuda.native[-1] == "13.0"  # the installed branch's toolkits
    assert "keep Fabric Manager at exactly the driver's version (580.95.05)" in result.fabric_manager.note
    out = io.StringIO()
    from rich.console import Console

    render_text(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "Nothing to change" in text and "sudo reboot" not in text and "apt-get install" not in text
    # 535 on the same GPUs a year later: past its end of life, so an upgrade with Fabric Manager
    old = recommend(Snapshot(os=UBUNTU, smi=replace_driver(smi, "535.161.08"), captured_at="2026-09-01"))
    assert old.verdict == "upgrade-advised" and old.fabric_manager.package == "nvidia-fabricmanager-580"
    # a driver that does not support the GPU: a change is required
    kepler_only = recommend(Snapshot(os=UBUNTU, smi=replace_driver(smi, "470.256.02"), captured_at="2026-09-01"))
    assert kepler_only.verdict == "change-required"


def replace_driver(smi: SmiReport, version: str) -> SmiReport:
    from dataclasses import replace

    return replace(smi, driver_version=version)


@pytest.mark.parametrize(("os_info", "expected"), [
    (UBUNTU, "sudo apt-get install -y nvidia-fabricmanager-580"),
    (ROCKY, "sudo dnf module install -y nvidia-driver:580-open/fm"),
    (OsInfo(id="rhel", version_id="10.0"), "sudo dnf install -y nvidia-fabric-manager"),
])
def test_fabric_manager_on_every_route(os_info, expected):
    result = recommend(snapshot(os_info, *["2330"] * 8))  # eight H100 SXM5: an HGX baseboard
    commands = [c.text for c in result.install.commands]
    assert expected in commands and commands.index(expected) < commands.index("sudo reboot")
    assert "systemctl status nvidia-fabricmanager" in commands
    assert result.fabric_manager is not None and "8 SXM GPUs" in result.fabric_manager.reason


def test_no_fabric_manager_without_nvswitch():
    assert recommend(snapshot(UBUNTU, *["2331"] * 8)).fabric_manager is None  # H100 PCIe
    assert recommend(snapshot(UBUNTU, *["2330"] * 4)).fabric_manager is None  # 4 SXM: linked directly
    smi = SmiReport(driver_version="580.95.05", gpus=tuple(
        Gpu(index=i, name="NVIDIA H100 80GB HBM3", pci_address=f"0000:{i + 1:02x}:00.0", pci_device_id="2330",
            fabric_state="N/A") for i in range(8)))
    assert recommend(Snapshot(os=UBUNTU, smi=smi)).fabric_manager is None  # the driver says: no fabric


@pytest.mark.parametrize(("device_id", "branch", "option"), [
    ("102d", 470, ""),  # Kepler: the 470 installer has no flavour option to give
    ("2330", 580, " --kernel-module-type=open"),
])
def test_runfile_options_by_installer_version(device_id, branch, option):
    result = recommend(snapshot(None, device_id))
    (command,) = [c.text for c in result.install.commands if ".run" in c.text]
    assert result.branch.number == branch
    assert command == f"sudo sh NVIDIA-Linux-$(uname -m)-<{branch}.x version>.run{option}"
    assert "nvidia-installer/blob/555.42.02/option_table.h" in result.install.source


def test_runfile_option_table():
    from gpuhealth.recommend import _runfile_command

    assert _runfile_command(535, "proprietary").text.endswith(".run")
    assert _runfile_command(535, "open").text.endswith(".run -m=kernel-open")
    assert _runfile_command(555, "proprietary").text.endswith(".run --kernel-module-type=proprietary")
    assert _runfile_command(470, "open").text.endswith(".run")  # no kernel-open directory before 515


def test_no_wheel_without_the_gpus_kernels():
    k40 = recommend(snapshot(UBUNTU, "1023")).cuda  # Tesla K40m, compute capability 3.5
    assert k40.pytorch_wheel is None and "compute capability 3.5" in k40.pytorch_source
    assert "cu118" in k40.pytorch_source  # the variant that runs with 470 but lacks sm_35
    for wheel in drivers.wheels():
        assert wheel.archs and wheel.runs_on("3.5") is False
    assert drivers.wheels()[-1].runs_on("7.0") is False  # cu130 dropped Volta


# every model name nvidia-smi (-L, -q, its table), collect_env or torch printed in the test hosts and cases
_NAME_FORMS = (
    r"(?:^|\\n|\n)\s*GPU \d+: ([^\n\\(]+?)(?: \(UUID|\s*(?:\\n|\n|$))",  # nvidia-smi -L, collect_env
    r"Product Name\s+: ([^\n\\]+)",  # nvidia-smi -q
    r"_CudaDeviceProperties\(name='([^']+)'",  # torch.cuda.get_device_properties
    r"\|\s+\d+\s+((?:NVIDIA|Tesla|GeForce|Quadro|TITAN)[^|]*?)\s+(?:On|Off)\s+\|",  # the nvidia-smi table
)


def _names_in_tests() -> set[str]:
    from pathlib import Path

    root = Path(__file__).resolve().parent
    patterns = [re.compile(p) for p in _NAME_FORMS]
    names = set()
    for path in [*root.glob("hosts/*.json"), *(p for p in root.glob("cases/*/*/*") if p.is_file())]:
        text = path.read_text(encoding="utf-8", errors="replace")
        names.update(m[1].strip() for pattern in patterns for m in pattern.finditer(text))
    return {n for n in names if n and not n.endswith("...")}  # the table cuts long names short


def test_every_smi_name_in_the_tests_resolves():
    names = _names_in_tests()
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA A100-PCIE-40GB", "Tesla T4", "Tesla V100-PCIE-32GB", "Tesla M40 24GB",
            "GeForce RTX 3070", "NVIDIA GeForce RTX 3090"} <= names
    unresolved = sorted(n for n in names if gpus.device_id_for(n)[0] is None)
    assert unresolved == []


@pytest.mark.parametrize(("name", "device_id"), [
    ("Tesla V100-SXM2-16GB", "1db1"), ("NVIDIA RTX A6000", "2230"), ("NVIDIA A100 80GB PCIe", "20b5"),
    ("NVIDIA GeForce RTX 4090", "2684"), ("A100-SXM4-40GB", "20b0"), ("Tesla M40 24GB", "17fd"),
    ("GeForce GTX TITAN X", "17c2"), ("NVIDIA GeForce RTX 3090", "2204"), ("Quadro RTX 8000", "1e30"),
    ("Tesla K80", "102d"), ("NVIDIA B200", "2901"), ("4090", "2684"), ("A100", "20b0"),
])
def test_smi_names_resolve(name, device_id):
    assert gpus.device_id_for(name) == (device_id, [])


def test_ambiguous_and_unknown_names():
    device_id, candidates = gpus.device_id_for("RTX 6000")  # Quadro (Turing) or Ada: different GPUs
    assert device_id is None and "NVIDIA RTX 6000 Ada Generation" in candidates and "Quadro RTX 6000" in candidates
    assert gpus.device_id_for("A1000")[0] == "25b0"  # RTX A1000, never an A100
    assert gpus.device_id_for("no such gpu") == (None, [])


def test_name_table_is_generated_from_its_sources():
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parent / "make_gpu_names.py"
    spec = importlib.util.spec_from_file_location("make_gpu_names", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build() == module.TABLE.read_text(encoding="utf-8")
    assert len(gpus.model_names()) > 700


def test_planned_gpu_shows_the_model_not_the_pci_id():
    result = CliRunner().invoke(recommend_command, ["--gpu", "Tesla V100-SXM2-16GB", "--os", "ubuntu-22.04"])
    assert result.exit_code == 0, result.output
    assert "V100-SXM2-16GB" in result.output and "1db1" not in result.output
    by_id = CliRunner().invoke(recommend_command, ["--gpu", "10de:2330", "--os", "ubuntu-22.04"])
    assert "NVIDIA H100 80GB HBM3" in by_id.output and "PCI ID" not in by_id.output


def test_fabric_manager_from_a_pasted_nvidia_smi_q(corpus):
    """gpud's real `nvidia-smi -q` of 8x H100 (535.183.01): every GPU's Fabric State is Completed. Pasted evidence has
    no date, so the end of life is judged as of today (535 ended 2026-06)."""
    paste = corpus / "gpud" / "accelerator_nvidia_query__nvidia-smi-query.535.183.01.out.0.valid"
    result = CliRunner().invoke(recommend_command, [str(paste), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["fabric_manager"]["reason"] == "nvidia-smi -q: Fabric State Completed"
    assert data["verdict"] == "upgrade-advised" and data["installed_driver"] == "535.183.01"
    notes = [c["note"] for c in data["install"]["commands"]]
    assert any("Fabric Manager of exactly this version" in n and "error 802" in n for n in notes)


def test_every_gpu_name_in_the_corpus_resolves(corpus):
    """The names real nvidia-smi captures print (-q, -x, -L). A vGPU profile ("GRID P4-1Q", a guest's slice of a
    board) is no GPU model: a guest needs NVIDIA's vGPU guest driver, which recommend does not cover."""
    patterns = [re.compile(r"Product Name\s+: ([^\n]+)"), re.compile(r"<product_name>([^<]+)</product_name>"),
                re.compile(r"(?m)^GPU \d+: ([^(\n]+?) \(UUID")]
    names = set()
    for path in corpus.rglob("*"):
        if path.is_file() and path.suffix != ".md":
            text = path.read_text(encoding="utf-8", errors="replace")
            names.update(m[1].strip() for pattern in patterns for m in pattern.finditer(text))
    assert len(names) > 25
    vgpu = re.compile(r"^(?:GRID|NVIDIA) \S+-\d+[ABCQ]$")
    assert sorted(n for n in names if gpus.device_id_for(n)[0] is None and not vgpu.match(n)) == []


# --------------------------------------------------------------------------- NVIDIA's CUDA repository paths

REPO_URL = re.compile(r"https://developer\.download\.nvidia\.com/compute/cuda/repos/([^/\s]+)/([^/\s]+)/cuda-([^/\s]+)\.repo")


def _repo_paths(os_info: OsInfo) -> list[tuple[str, str, str]]:
    route = recommend(snapshot(os_info, "2330")).install
    return [m.groups() for c in route.commands for m in REPO_URL.finditer(c.text)]


def _listed(directory: str, machine: str) -> bool:
    from gpuhealth.recommend import cuda_repositories

    return any(r.directory == directory and machine in r.machines for r in cuda_repositories())


# one release per distribution family the recommender maps to a dnf route, x86_64 and aarch64 (sbsa)
FAMILIES = [
    (OsInfo(id="rhel", id_like=("fedora",), version_id="8.10"), "rhel8"),
    (OsInfo(id="rhel", id_like=("fedora",), version_id="9.4", architecture="aarch64"), "rhel9"),
    (OsInfo(id="rhel", id_like=("fedora",), version_id="10.0"), "rhel10"),
    (ROCKY, "rhel9"),
    (OsInfo(id="almalinux", id_like=("rhel", "centos", "fedora"), version_id="8.9"), "rhel8"),
    (OsInfo(id="ol", id_like=("fedora",), version_id="9.3"), "rhel9"),
    (OsInfo(id="centos", id_like=("rhel", "fedora"), version_id="9"), "rhel9"),
    (OsInfo(id="fedora", version_id="40"), "fedora40"),
    (OsInfo(id="fedora", version_id="41"), "fedora41"),
    (OsInfo(id="fedora", version_id="44", architecture="aarch64"), "fedora44"),
]


@pytest.mark.parametrize("os_info, directory", FAMILIES, ids=[f"{o.id}-{o.version_id}" for o, _ in FAMILIES])
def test_every_cuda_repository_path_is_a_listed_directory(os_info, directory):
    """The repository a dnf route adds is one NVIDIA publishes (knowledge/cuda_repos.csv, each row citing its
    directory listing): Fedora 40 is fedora40, never rhel40."""
    paths = _repo_paths(os_info)
    assert len(paths) == 1, paths
    (found, machine, name), = paths
    assert (found, name) == (directory, directory)
    assert machine == ("sbsa" if os_info.architecture == "aarch64" else "x86_64")
    assert _listed(found, machine)


def test_fedora_uses_its_own_repository_and_dnf5_syntax():
    texts = [c.text for c in recommend(snapshot(OsInfo(id="fedora", version_id="40"), "2330")).install.commands]
    assert not any("rhel" in t for t in texts)
    assert "sudo dnf install -y kernel-devel-matched kernel-headers" in texts
    assert any("config-manager --add-repo" in t for t in texts)
    dnf5 = [c.text for c in recommend(snapshot(OsInfo(id="fedora", version_id="42"), "2330")).install.commands]
    assert any("config-manager addrepo --from-repofile=https://" in t for t in dnf5)
    assert not any("--add-repo" in t for t in dnf5)


@pytest.mark.parametrize("os_info", [OsInfo(id="fedora", version_id="38"), OsInfo(id="rhel", version_id="11.0"),
                                     OsInfo(id="fedora", version_id="41", architecture="aarch64")],
                         ids=["fedora-38", "rhel-11", "fedora-41-aarch64"])
def test_a_release_without_a_repository_gets_the_runfile_saying_why(os_info):
    route = recommend(snapshot(os_info, "2330")).install
    assert not _repo_paths(os_info)
    assert ".run" in route.commands[0].text and "has no" in route.commands[0].note


def test_debian_family_routes_name_no_cuda_repository():
    for os_info in (UBUNTU, OsInfo(id="debian", version_id="12")):
        assert not _repo_paths(os_info)


def test_cuda_repository_rows_cite_nvidia():
    from gpuhealth.recommend import cuda_repositories

    rows = cuda_repositories()
    assert {r.directory for r in rows} >= {"rhel8", "rhel9", "rhel10", "fedora40"}
    for row in rows:
        assert re.fullmatch(r"(rhel|fedora)[0-9]+", row.directory) and row.directory.endswith(str(row.release))
        assert "<https://developer.download.nvidia.com/compute/cuda/repos/" in row.source, row.directory
        assert set(row.machines) <= {"x86_64", "sbsa"}
