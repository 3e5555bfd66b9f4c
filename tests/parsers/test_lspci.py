"""parse_lspci over every lspci capture in the corpus, hand-written variants, and fuzzing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, fuzz_tests, only_parse_errors
from gpuhealth.model import ParseError, PciDevice, normalize_pci_address
from gpuhealth.parsers.lspci import normalize_link_speed, parse_lspci

LSPCI_FILES = corpus_files("**/*lspci*")
VVV = CORPUS / "gpud" / "accelerator_nvidia_query_pci__lspci-vvv"
NN_A100 = CORPUS / "gpud" / "nvidia-query__lspci.nn.a100"
NN_A10 = CORPUS / "gpud" / "nvidia-query__lspci.nn.a10"
GB200 = CORPUS / "gpud" / "nvidia-query__lspci.gb200"
BUG_NN = CORPUS / "nvidia-bug-report-352.63" / "lspci_-nn.txt"
BUG_TREE = CORPUS / "nvidia-bug-report-352.63" / "lspci_-t.txt"
BUG_XXX = CORPUS / "nvidia-bug-report-352.63" / "lspci_-d_10de_-v_-xxx.txt"

HEX4 = re.compile(r"^[0-9a-f]{4}$")


def _read(path: Path) -> str:
    return path.read_text(errors="replace")


def _is_tree(path: Path) -> bool:
    """``lspci -t`` captures, by file name: ``lspci_-t.txt``, ``lspci_-tv.txt``, ``...lspci-t``."""
    return bool(re.search(r"lspci[_ ]*-tv*(?:\.\w+)?$", path.name))


def _by_address(devices: tuple[PciDevice, ...]) -> dict[str, PciDevice]:
    return {d.address: d for d in devices}


# --------------------------------------------------------------------------- every corpus file


def test_corpus_has_lspci_files():
    assert len(LSPCI_FILES) >= 7


@pytest.mark.parametrize("path", LSPCI_FILES, ids=corpus_id)
def test_corpus_file_parses(path: Path):
    text = _read(path)
    if _is_tree(path):
        with pytest.raises(ParseError, match="tree"):
            parse_lspci(text)
        return
    devices = parse_lspci(text)
    assert devices
    addresses = [d.address for d in devices]
    assert len(addresses) == len(set(addresses))
    for device in devices:
        assert normalize_pci_address(device.address) == device.address
        assert device.vendor_id == "" or HEX4.match(device.vendor_id)
        assert device.device_id == "" or HEX4.match(device.device_id)
        assert device.class_code is None or HEX4.match(device.class_code)
        for speed in (device.link_speed_current, device.link_speed_max):
            assert speed is None or re.fullmatch(r"\d+\.\d GT/s", speed)


# --------------------------------------------------------------------------- concrete values


def test_vvv_eight_h100_with_driver_and_link():
    devices = parse_lspci(_read(VVV))
    gpus = [d for d in devices if d.is_nvidia_gpu]
    assert len(gpus) == 8
    assert [g.address for g in gpus] == [
        "0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
        "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0",
    ]
    for gpu in gpus:
        assert (gpu.vendor_id, gpu.device_id, gpu.class_code) == ("10de", "2330", "0302")
        assert gpu.kernel_driver == "nvidia"
        assert gpu.link_width_current == 16
        assert gpu.link_width_max == 16
        assert gpu.link_speed_current == "32.0 GT/s"
        assert gpu.link_speed_max == "32.0 GT/s"
        assert (gpu.subsystem_vendor_id, gpu.subsystem_device_id) == ("10de", "16c1")
        assert gpu.name == "NVIDIA Corporation Device 2330"


def test_vvv_nvswitches_and_connectx():
    devices = parse_lspci(_read(VVV))
    switches = [d for d in devices if d.vendor_id == "10de" and d.device_id == "22a3"]
    assert len(switches) == 4
    assert {s.class_code for s in switches} == {"0680"}
    assert {s.kernel_driver for s in switches} == {"nvidia-nvswitch"}
    nic = _by_address(devices)["0000:1a:00.0"]
    assert (nic.vendor_id, nic.device_id, nic.class_code) == ("15b3", "", "0200")
    assert nic.name == "Mellanox Technologies MT2910 Family [ConnectX-7]"


def test_vvv_bridge_subsystem_capability_is_not_the_subsystem():
    # "Capabilities: [94] Subsystem: NVIDIA Corporation Device 1643" belongs to a bridge capability
    devices = parse_lspci(_read(VVV))
    bridges = [d for d in devices if d.class_code == "0604" and d.name and "PMC-Sierra" in d.name]
    assert bridges
    assert all(b.subsystem_vendor_id is None for b in bridges)


def test_nn_a100_eight_gpus_on_own_domains():
    devices = parse_lspci(_read(NN_A100))
    gpus = [d for d in devices if d.is_nvidia_gpu]
    assert len(gpus) == 8
    assert {(g.vendor_id, g.device_id, g.class_code) for g in gpus} == {("10de", "20b2", "0302")}
    assert gpus[0].address == "0001:00:00.0"
    assert gpus[-1].address == "000e:00:00.0"
    assert gpus[0].name == "NVIDIA Corporation GA100 [A100 SXM4 80GB]"
    switches = [d for d in devices if d.device_id == "1af1"]
    assert len(switches) == 6 and {s.class_code for s in switches} == {"0680"}
    assert switches[0].name == "NVIDIA Corporation Device"
    ib = [d for d in devices if d.class_code == "0207"]
    assert len(ib) == 8 and {d.vendor_id for d in ib} == {"15b3"}


def test_nn_a10_single_gpu_without_domain():
    devices = parse_lspci(_read(NN_A10))
    gpu = _by_address(devices)["0000:06:00.0"]
    assert (gpu.vendor_id, gpu.device_id, gpu.class_code) == ("10de", "2236", "0302")
    assert gpu.name == "NVIDIA Corporation GA102GL [A10]"
    assert len(devices) == 20


def test_gb200_plain_listing_multi_domain():
    devices = parse_lspci(_read(GB200))
    gpus = [d for d in devices if d.is_nvidia_gpu]
    assert [g.address for g in gpus] == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]
    assert {(g.vendor_id, g.device_id, g.class_code) for g in gpus} == {("10de", "2941", "0302")}
    domains = {d.address.split(":")[0] for d in devices}
    assert {"0000", "0002", "0005", "0006", "0008", "0009", "0010", "0012", "0015", "0016"} <= domains
    root = _by_address(devices)["0000:00:00.0"]
    assert (root.vendor_id, root.device_id, root.class_code) == ("10de", "22b2", "0604")
    ib = _by_address(devices)["0000:03:00.0"]
    assert (ib.vendor_id, ib.device_id, ib.class_code) == ("15b3", "", "0207")
    vga = _by_address(devices)["0005:07:00.0"]
    assert vga.class_code == "0300" and not vga.is_nvidia_gpu


def test_bug_report_nn_titan_x_and_audio():
    devices = _by_address(parse_lspci(_read(BUG_NN)))
    gpu = devices["0000:06:00.0"]
    assert (gpu.vendor_id, gpu.device_id, gpu.class_code) == ("10de", "17c2", "0300")
    assert gpu.name == "NVIDIA Corporation GM200 [GeForce GTX TITAN X]"
    audio = devices["0000:06:00.1"]
    assert (audio.vendor_id, audio.device_id, audio.class_code) == ("10de", "0fb0", "0403")
    assert devices["0000:ff:0b.1"].class_code == "1101"


def test_bug_report_hex_dump_fills_ids():
    devices = _by_address(parse_lspci(_read(BUG_XXX)))
    assert len(devices) == 2
    gpu = devices["0000:06:00.0"]
    # text gave no device ID ("GM200 [GeForce GTX TITAN X]"); the config-space dump has 10de:17c2
    assert (gpu.vendor_id, gpu.device_id, gpu.class_code) == ("10de", "17c2", "0300")
    assert (gpu.subsystem_vendor_id, gpu.subsystem_device_id) == ("3842", "2992")
    assert gpu.kernel_driver == "nvidia"
    audio = devices["0000:06:00.1"]
    assert (audio.device_id, audio.class_code, audio.kernel_driver) == ("0fb0", "0403", "snd_hda_intel")


def test_tree_is_a_parse_error():
    with pytest.raises(ParseError, match="lspci -t tree has no device IDs"):
        parse_lspci(_read(BUG_TREE))


# --------------------------------------------------------------------------- hand-written variants

# Hand-written: `lspci -nnk -vv` style block for an H100 bound to nouveau with a downgraded link.
NNK_BLOCK = """\
01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)
\tSubsystem: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:16c1]
\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <4us
\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)
\tKernel driver in use: nouveau
\tKernel modules: nvidiafb, nouveau, nvidia_drm, nvidia

02:00.0 VGA compatible controller [0300]: NVIDIA Corporation TU104GL [Tesla T4] [10de:1eb8] (rev a1) \
(prog-if 00 [VGA controller])
\tLnkCap:\tPort #0, Speed 2.5GT/s, Width x1
\tLnkSta:\tSpeed 2.5GT/s, Width x1
"""


def test_nnk_block():
    devices = parse_lspci(NNK_BLOCK)
    h100, t4 = devices
    assert h100 == PciDevice(
        address="0000:01:00.0", vendor_id="10de", device_id="2330", class_code="0302",
        subsystem_vendor_id="10de", subsystem_device_id="16c1",
        name="NVIDIA Corporation GH100 [H100 SXM5 80GB]", kernel_driver="nouveau",
        link_speed_current="16.0 GT/s", link_speed_max="32.0 GT/s", link_width_current=8,
        link_width_max=16, kernel_modules=("nvidiafb", "nouveau", "nvidia_drm", "nvidia"),
    )
    assert t4.kernel_modules is None and t4.kernel_driver is None  # its block prints neither -k line
    assert (t4.device_id, t4.class_code, t4.name) == ("1eb8", "0300", "NVIDIA Corporation TU104GL [Tesla T4]")
    assert (t4.link_speed_current, t4.link_speed_max, t4.link_width_current) == ("2.5 GT/s", "2.5 GT/s", 1)


def test_numeric_only_and_unknown_names():
    # Hand-written: `lspci -n`, then names lspci prints when pci.ids lacks the vendor or class.
    text = (
        "01:00.0 0302: 10de:2330 (rev a1)\n"
        "0000:02:00.0 Class [0b40]: Device [1d0f:efa1]\n"
        "03:00.0 Class 0302: Device 10de:2331 (rev a1)\n"
        "04:00.0 Processing accelerators: Some Vendor Inc. Thing 9000\n"
    )
    d = parse_lspci(text)
    assert (d[0].address, d[0].vendor_id, d[0].device_id, d[0].class_code, d[0].name) == (
        "0000:01:00.0", "10de", "2330", "0302", None)
    assert (d[1].vendor_id, d[1].device_id, d[1].class_code, d[1].name) == ("1d0f", "efa1", "0b40", "Device")
    assert (d[2].vendor_id, d[2].device_id, d[2].class_code) == ("10de", "2331", "0302")
    assert (d[3].vendor_id, d[3].device_id, d[3].class_code) == ("", "", "1200")


def test_machine_readable_forms():
    # Hand-written: `lspci -mm -nn -D` and `lspci -m` lines, then a `lspci -vmm -k` record.
    mm = (
        '0000:01:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GH100 [H100 SXM5 80GB] [2330]" '
        '-ra1 -p00 "NVIDIA Corporation [10de]" "Device [16c1]"\n'
        '02:00.0 "VGA compatible controller" "NVIDIA Corporation" "Device 2330" -ra1 "" ""\n'
    )
    a, b = parse_lspci(mm)
    assert (a.address, a.vendor_id, a.device_id, a.class_code) == ("0000:01:00.0", "10de", "2330", "0302")
    assert (a.subsystem_vendor_id, a.subsystem_device_id) == ("10de", "16c1")
    assert a.name == "NVIDIA Corporation GH100 [H100 SXM5 80GB]"
    assert (b.vendor_id, b.device_id, b.class_code, b.subsystem_vendor_id) == ("10de", "2330", "0300", None)
    vmm = (
        "Slot:\t0000:01:00.0\nClass:\t3D controller\nVendor:\tNVIDIA Corporation\nDevice:\tDevice 2330\n"
        "SVendor:\tNVIDIA Corporation\nSDevice:\tDevice 16c1\nRev:\ta1\nDriver:\tnvidia\nNUMANode:\t0\n\n"
        "Slot:\t0000:02:00.0\nClass:\tEthernet controller [0200]\nVendor:\tMellanox Technologies [15b3]\n"
        "Device:\tMT2910 Family [ConnectX-7] [1021]\n"
    )
    gpu, nic = parse_lspci(vmm)
    assert (gpu.vendor_id, gpu.device_id, gpu.class_code) == ("10de", "2330", "0302")
    assert gpu.kernel_driver == "nvidia"
    assert (gpu.subsystem_vendor_id, gpu.subsystem_device_id) == ("10de", "16c1")
    assert (nic.vendor_id, nic.device_id, nic.class_code) == ("15b3", "1021", "0200")


def test_two_listings_of_one_host_merge():
    # Hand-written: `lspci -nn` followed by `lspci -k` of the same device.
    text = (
        "01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
        "01:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n"
        "\tKernel driver in use: vfio-pci\n"
    )
    (device,) = parse_lspci(text)
    assert (device.device_id, device.kernel_driver) == ("2330", "vfio-pci")


def test_crlf_and_warnings_tolerated():
    text = (
        "pcilib: Cannot open /proc/bus/pci\r\n"
        "01:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2330]\r\n"
    )
    (device,) = parse_lspci(text)
    assert device.device_id == "2330"


@pytest.mark.parametrize("text", ["", "   \n\n", "hello world\n", "Slot:\tnothing\n", "-[0000:00]-+-00.0\n"])
def test_not_lspci(text: str):
    with pytest.raises(ParseError):
        parse_lspci(text)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("16GT/s", "16.0 GT/s"), ("Speed 2.5GT/s (ok)", "2.5 GT/s"), ("8 GT/s", "8.0 GT/s"),
     ("32.0 GT/s", "32.0 GT/s"), ("Speed unknown", None), ("", None), (None, None)],
)
def test_normalize_link_speed(raw, expected):
    assert normalize_link_speed(raw) == expected


# --------------------------------------------------------------------------- fuzzing

_FALLBACK = "01:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2330]\n"
_TEXTS = [_read(p) for p in LSPCI_FILES] or [_FALLBACK]
_LINES = sorted({line for text in _TEXTS for line in text.splitlines()[:400]})




_only_parse_error = only_parse_errors(parse_lspci)




test_fuzz_random_text, test_fuzz_mutated_corpus = fuzz_tests(_only_parse_error, _TEXTS)


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(_LINES), st.text(max_size=40)), max_size=40))
def test_fuzz_shuffled_real_lines(lines: list[str]):
    _only_parse_error("\n".join(lines))


def test_indented_paste():
    text = "\n".join("    " + line for line in NNK_BLOCK.splitlines())
    assert parse_lspci(text) == parse_lspci(NNK_BLOCK)
