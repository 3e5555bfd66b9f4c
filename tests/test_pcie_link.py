"""GH407 on a pasted ``lspci -vv`` (and sysfs): the GPU's LnkSta width against its LnkCap width, with the
same twin rule as nvidia-smi's link fields. Real captures are in tests/data/corpus; the hand-written
blocks in tests/data/pcie/ say what they are in its README."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS
from fuzzing import FUZZ, mutated
from gpuhealth.analyze import _with_lspci_address, analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Finding, Severity, Snapshot

DATA = Path(__file__).parent / "data" / "pcie"
H100X8_LSPCI = "gpud/accelerator_nvidia_query_pci__lspci-vvv"
SMI_4090 = "gpud/accelerator_nvidia_query__nvidia-smi-query.535.154.05.out.0.valid.4090"


def snapshot_of(*paths: Path) -> Snapshot:
    snapshot, _ = analyze_texts([(p.name, p.read_text(errors="replace")) for p in paths])
    return snapshot


def gh407(snapshot: Snapshot) -> tuple[list[Finding], list[str]]:
    report = run_checks(snapshot, select=["GH407"])
    return list(report.findings), [s.reason for s in report.skipped]


def lines(finding: Finding) -> list[str]:
    return [line for evidence in finding.evidence for line in evidence.lines]


def test_single_gpu_at_x1_of_x16_is_reported_as_info():
    (narrow,), skipped = gh407(snapshot_of(DATA / "x1-of-x16.lspci"))
    assert skipped == []
    assert narrow.severity is Severity.INFO
    assert narrow.message.startswith("PCIe link below its maximum: link width x1 of x16")
    assert narrow.subject.pci_address == "0000:01:00.0"
    assert lines(narrow) == ["LnkCap: Width x16", "LnkSta: Width x1", "LnkSta: Speed 5.0 GT/s"]


def test_one_narrow_gpu_beside_an_identical_full_width_one_is_a_warning():
    (narrow,), _ = gh407(snapshot_of(DATA / "twins-one-x8.lspci"))
    assert (narrow.severity, narrow.subject.pci_address) == (Severity.WARNING, "0000:3b:00.0")
    assert narrow.message == "PCIe link below its maximum: link width x8 of x16"


def test_idle_gpu_at_a_lower_speed_but_full_width_is_quiet():
    """Real: a GT 730 at 2.5GT/s of 5GT/s, x8 of x8 (speed is not judged from lspci: load is unknown)."""
    found, skipped = gh407(snapshot_of(DATA / "gt730-idle-gen1.lspci"))
    assert found == [] and skipped == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")
def test_real_8x_h100_lspci_at_full_width_is_quiet_and_other_devices_do_not_count():
    """The capture's Broadcom NICs train x1 of x2 "(downgraded)": not GPUs, not GH407's."""
    found, skipped = gh407(snapshot_of(CORPUS / H100X8_LSPCI))
    assert found == [] and skipped == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")
def test_nvidia_smi_link_fields_win_over_lspci_for_the_same_gpu():
    """A narrow lspci link for the GPU nvidia-smi reports at full width is not a second finding."""
    smi = CORPUS / SMI_4090
    snapshot = snapshot_of(smi)
    gpu = snapshot.gpus[0]
    assert gpu.pcie_width_current == gpu.pcie_width_max == 16
    assert gpu.pci_address
    block = (DATA / "x1-of-x16.lspci").read_text().replace("01:00.0", gpu.pci_address.split(":", 1)[1])
    both, _ = analyze_texts([(smi.name, smi.read_text(errors="replace")), ("lspci.txt", block)])
    found, _ = gh407(both)
    assert all(f.evidence[0].source != "lspci.txt" for f in found)
    assert not any("x1 of x16" in f.message for f in found)


def test_no_link_data_at_all_is_a_skip_not_a_pass():
    snapshot, _ = analyze_texts([("nvidia-smi.txt", "NVIDIA-SMI has failed because it couldn't communicate "
                                  "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed "
                                  "and running.\n")])
    found, skipped = gh407(snapshot)
    assert found == [] and len(skipped) == 1


# --------------------------------------------------------------------------- `lspci -vv -s ADDR | grep Lnk`


def test_grep_of_one_device_is_read_at_the_address_the_command_names():
    """Real: the CMP 40HX block (x16 of x16): read as the device 01:00.0, judged quiet, and GH101 does not
    take a listing that names no vendor for "no NVIDIA GPU on the bus"."""
    snapshot = snapshot_of(DATA / "cmp40hx-grep-lnk.session")
    (device,) = snapshot.pci_devices
    assert (device.address, device.link_width_current, device.link_width_max) == ("0000:01:00.0", 16, 16)
    assert device.vendor_id == "" and device.class_code is None
    found, skipped = gh407(snapshot)
    assert found == [] and skipped == []
    report = run_checks(snapshot, select=["GH101"])
    assert report.findings == () and "names no device's vendor" in report.skipped[0].reason


def test_grep_block_beside_a_listing_is_judged_for_that_gpu():
    (narrow,), _ = gh407(snapshot_of(DATA / "h100x4-listing-grep-x8.session"))
    assert narrow.subject.pci_address == "0000:38:00.0"
    assert narrow.message.startswith("PCIe link below its maximum: link width x8 of x16")
    assert "lspci -vvv -s 38:00.0" in narrow.evidence[0].source
    assert "the evidence does not say which device" not in " ".join(lines(narrow))  # the listing named it


def test_grep_block_for_a_device_a_listing_names_as_no_gpu_is_not_gh407s():
    """The gpud capture's Broadcom NIC at 01:00.0 (x1 of x2) plus a grep block for that address."""
    text = ("$ lspci\n01:00.0 Ethernet controller: Broadcom Inc. and subsidiaries NetXtreme BCM5720 Gigabit "
            "Ethernet PCIe\n$ sudo lspci -vv -s 01:00.0 | grep Lnk\n"
            "\t\tLnkCap:\tPort #0, Speed 5GT/s, Width x2, ASPM not supported\n"
            "\t\tLnkSta:\tSpeed 5GT/s (ok), Width x1 (downgraded)\n")
    snapshot, _ = analyze_texts([("session.txt", text)])
    (nic,) = snapshot.pci_devices
    assert (nic.vendor_id, nic.link_width_current) == ("14e4", 1)  # the two pieces are one device
    found, _ = gh407(snapshot)
    assert found == []


@pytest.mark.parametrize(("command", "address"), [
    ("sudo lspci -vv -s 01:00.0 | grep -E 'LnkCap|LnkSta'", "01:00.0"),
    ("lspci -vvvs c9:00.0 | grep -i speed", "c9:00.0"),  # the cluster form (cloudnetops.tech's guide)
    ("/usr/bin/lspci -vvv -s 0000:01:00.0", "0000:01:00.0"),
])
def test_the_address_comes_from_the_lspci_command(command, address):
    # real lines from cloudnetops.tech's "How to Diagnose and Fix PCIe Link Speed Downgrade in Linux"
    text = ("LnkCap: Port #0, Speed 16GT/s, Width x4, ASPM L0s L1, Exit Latency L0 <512ns, L1 <16us\n"
            "LnkSta: Speed 8GT/s (downgraded), Width x2 (downgraded)\n")
    assert _with_lspci_address(command, text) == f"{address} Device:\n{text}"


@pytest.mark.parametrize("command", [
    "lspci -vv | grep Lnk",  # no device named: the lines cannot be placed
    "lspci -s 01:00 -vv",  # a partial address
    "nvidia-smi -q -s 01:00.0",  # not lspci
    "echo lspci -vv -s 01:00.0 | grep Lnk",  # lspci is an argument, not the program
])
def test_no_address_no_header(command):
    text = "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x4 (downgraded)\n"
    assert _with_lspci_address(command, text) == text


def test_a_block_with_its_own_header_is_left_alone():
    text = (DATA / "x1-of-x16.lspci").read_text()
    assert _with_lspci_address("lspci -vv -s 01:00.0", text) == text


@FUZZ
@given(command=st.text(max_size=300) | mutated(["sudo lspci -vvv -s 01:00.0 | grep -iE 'LnkCap|LnkSta'",
                                                 "lspci -vvvs c9:00.0 | grep -i speed"]),
       text=mutated([(DATA / "cmp40hx-grep-lnk.session").read_text(), (DATA / "x1-of-x16.lspci").read_text()]))
def test_fuzz_the_address_header(command, text):
    out = _with_lspci_address(command, text)
    assert out == text or (out.endswith("\n" + text) and out.count("\n") == text.count("\n") + 1)


# --------------------------------------------------------------------------- the port above the GPU


def test_real_bridges_name_the_bus_below_them():
    """The gpud capture: each H100 sits under a switch port whose secondary bus is the GPU's."""
    snapshot = snapshot_of(CORPUS / H100X8_LSPCI)
    ports = {d.secondary_bus: d for d in snapshot.pci_devices if d.secondary_bus}
    port = ports["0000:19"]
    assert (port.address, port.link_width_max) == ("0000:17:01.0", 16)
    assert all(not g.secondary_bus for g in snapshot.nvidia_pci_gpus)


def test_a_single_gpu_narrower_than_its_port_allows_is_a_warning():
    (narrow,), _ = gh407(snapshot_of(DATA / "riser-x4-under-x16-port.lspci"))
    assert narrow.severity is Severity.WARNING
    assert narrow.message == "PCIe link below its maximum: link width x4 of x16, where its port supports x16"
    assert lines(narrow)[0] == "port above it 0000:00:01.0: LnkCap: Width x16"


def test_a_gpu_as_wide_as_its_port_is_info_the_slot_is_wired_so():
    (narrow,), _ = gh407(snapshot_of(DATA / "x1-slot.lspci"))
    assert narrow.severity is Severity.INFO
    assert narrow.message.endswith("link width x1 of x16 (the port above it is x1: the slot is wired so)")


@pytest.mark.parametrize(("port_file", "severity", "ending"), [
    ("riser-x4-under-x16-port.lspci", Severity.WARNING, "link width x4 of x16, where its port supports x16"),
    ("x1-slot.lspci", Severity.INFO, "link width x4 of x16 (the port above it is x1: the slot is wired so)"),
])
def test_the_port_above_also_weighs_nvidia_smis_link_fields(port_file, severity, ending):
    """Hand-written: nvidia-smi's query CSV for one GPU at x4 of x16, with the root-port block of a fixture."""
    csv = ("index, name, pci.bus_id, pcie.link.width.current, pcie.link.width.max\n"
           "0, NVIDIA GeForce RTX 3090, 00000000:01:00.0, 4, 16\n")
    port = "".join((DATA / port_file).read_text().splitlines(keepends=True)[:5])
    snapshot, _ = analyze_texts([("query.csv", csv), ("lspci.txt", port)])
    (narrow,), _ = gh407(snapshot)
    assert (narrow.severity, narrow.subject.gpu_index) == (severity, 0)
    assert narrow.message.endswith(ending)
    assert lines(narrow)[0].startswith("port above it 0000:00:0")


def test_a_downgraded_width_alone_stays_info_and_names_the_port_above_as_the_deciding_command():
    """lspci's "(downgraded)" compares LnkSta with the GPU's own LnkCap only (pciutils ls-caps.c link_compare), so
    it cannot tell a slot wired x1 from a link trained x1: the port above decides, and the finding says how."""
    text = (DATA / "x1-of-x16.lspci").read_text()
    assert "Width x1 (downgraded)" in text
    snapshot = snapshot_of(DATA / "x1-of-x16.lspci")
    (narrow,), _ = gh407(snapshot)
    assert narrow.severity is Severity.INFO
    assert [(c.cause, c.status) for c in narrow.differential] == [("pcie-slot-narrow", "open"),
                                                                 ("pcie-link-trained-narrow", "open")]
    port = "readlink -f /sys/bus/pci/devices/0000:01:00.0"
    assert all(port in c.command and "LnkCap" in c.command for c in narrow.differential)
    from gpuhealth.checks.diagnosis import next_commands

    report = run_checks(snapshot)
    assert any(port in c for c in next_commands(report.findings))


def test_the_port_above_decides_and_leaves_nothing_open():
    """With the port in the evidence (a riser: x4 under a x16 port) the finding is a warning without a differential."""
    (narrow,), _ = gh407(snapshot_of(DATA / "riser-x4-under-x16-port.lspci"))
    assert narrow.severity is Severity.WARNING and narrow.differential == ()


def _live_host(port_width: str | None):
    """A hand-written sysfs: one GPU trained x4 of x16, under root port 0000:00:01.0 of the given LnkCap width (the
    attribute files the kernel's pci-sysfs.c writes: max_link_width, current_link_width)."""
    from hostcases import FakeHost

    spec = {"pci": [{"address": "0000:01:00.0", "device": "2204", "class": "0300", "driver": "nvidia",
                     "width": "4", "max_width": "16", "speed": "16.0 GT/s PCIe", "max_speed": "16.0 GT/s PCIe"}]}
    host = FakeHost(spec)
    host.links["/sys/bus/pci/devices/0000:01:00.0"] = "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    if port_width is not None:
        port = "/sys/bus/pci/devices/0000:00:01.0"
        host.files.update({f"{port}/vendor": "0x1022\n", f"{port}/device": "0x1453\n", f"{port}/class": "0x060400\n",
                           f"{port}/max_link_width": f"{port_width}\n", f"{port}/current_link_width": "4\n"})
    return host


@pytest.mark.parametrize(("port_width", "severity", "open_causes"), [
    ("16", Severity.WARNING, 0),  # both ends can do x16: the link trained narrow (riser, seating)
    ("4", Severity.INFO, 0),  # the port is x4: the slot is wired so
    (None, Severity.INFO, 2),  # no port in sysfs: undecided, the port's command is next
])
def test_live_check_weighs_the_port_above_from_sysfs(port_width, severity, open_causes):
    from gpuhealth.collect.gpu import probe_pci

    devices = probe_pci(_live_host(port_width), 5).fields["pci_devices"]
    gpus = [d for d in devices if d.is_nvidia_gpu]
    assert [d.address for d in gpus] == ["0000:01:00.0"]
    snapshot = Snapshot(origin="live", pci_devices=devices)
    (narrow,), _ = gh407(snapshot)
    assert narrow.severity is severity and len(narrow.differential) == open_causes
    if port_width:
        (port,) = [d for d in devices if d.secondary_bus]
        assert (port.address, port.vendor_id, port.secondary_bus, port.link_width_max) == (
            "0000:00:01.0", "1022", "0000:01", int(port_width))
