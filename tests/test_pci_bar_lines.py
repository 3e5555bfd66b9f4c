"""The Linux PCI core's own lines about a device's memory windows (BARs) lead with GH304 when they concern an NVIDIA
device. The lines are written here from the kernel's format strings (drivers/pci/setup-res.c pci_assign_resource,
pci_claim_resource, pci_enable_resources; probe.c __pci_read_base and the enumeration line; iov.c sriov_enable), in
both spellings: before Linux 6.8 ("BAR %d: no space for %pR", "BAR %d: failed to assign %pR", "can't claim BAR %d %pR:
no compatible bridge window") and since ("%s %pR: can't assign; no space", "%s %pR: failed to assign"). Addresses,
sizes and IDs are made up; no case's text."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity, Snapshot
from gpuhealth.parsers.kernel_log import parse_kernel_log

H100 = "[    0.410000] pci 0000:41:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint\n"
NIC = "[    0.410100] pci 0000:05:00.0: [8086:1572] type 00 class 0x020000 PCIe Endpoint\n"
BMC_VGA = "[    0.410200] pci 0000:02:00.0: [1a03:2000] type 00 class 0x030000 conventional PCI endpoint\n"

NEW_NO_SPACE = ("[    0.620000] pci 0000:41:00.0: BAR 2 [mem size 0x2000000000 64bit pref]: can't assign; no space\n"
                "[    0.620010] pci 0000:41:00.0: BAR 2 [mem size 0x2000000000 64bit pref]: failed to assign\n")
OLD_NO_SPACE = ("[    0.620000] pci 0000:41:00.0: BAR 2: no space for [mem size 0x2000000000 64bit pref]\n"
                "[    0.620010] pci 0000:41:00.0: BAR 2: failed to assign [mem size 0x2000000000 64bit pref]\n")
OLD_CLAIM = ("[    0.530000] pci 0000:41:00.0: can't claim BAR 0 [mem 0xe2000000-0xe2ffffff 64bit pref]: "
             "no compatible bridge window\n")
NEW_CLAIM = ("[    0.530000] pci 0000:41:00.0: BAR 0 [mem 0xe2000000-0xe2ffffff 64bit pref]: "
             "can't claim; no compatible bridge window\n")
NOT_ASSIGNED = ("[    6.100000] nvidia 0000:41:00.0: BAR 2 [mem size 0x2000000000 64bit pref]: not assigned; "
                "can't enable device\n")
OLD_NOT_ASSIGNED = ("[    6.100000] nvidia 0000:41:00.0: can't enable device: BAR 2 [mem size 0x2000000000 64bit pref] "
                    "not assigned\n")
SRIOV = "[   30.000000] nvidia 0000:41:00.0: not enough MMIO resources for SR-IOV\n"


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def lead(report):
    return report.findings[0]


@pytest.mark.parametrize("lines", [NEW_NO_SPACE, OLD_NO_SPACE, OLD_CLAIM, NEW_CLAIM], ids=["6.8", "old", "claim-old",
                                                                                         "claim-6.8"])
def test_an_nvidia_gpus_bar_without_an_address_leads_critical(lines):
    report = report_of(("dmesg.txt", H100 + NIC + lines))
    first = lead(report)
    assert (first.code, first.severity, first.subject.pci_address) == ("GH304", Severity.CRITICAL, "0000:41:00.0")
    shown = [line for e in first.evidence for line in e.lines]
    assert any("0000:41:00.0: " in line and "BAR" in line for line in shown)
    assert "BAR" in first.message and "could not be assigned" in first.message


def test_the_message_says_which_bar_how_large_and_what_the_kernel_said():
    first = lead(report_of(("dmesg.txt", H100 + NEW_NO_SPACE)))
    assert "BAR 2 (128 GiB): no space, failed to assign" in first.message


@pytest.mark.parametrize("line", [NOT_ASSIGNED, OLD_NOT_ASSIGNED, SRIOV], ids=["6.8", "old", "sriov"])
def test_the_nvidia_drivers_own_device_lines_need_no_enumeration_line(line):
    """pci_enable_resources and sriov_enable print with the bound driver's name: "nvidia <address>: ..."."""
    first = lead(report_of(("dmesg.txt", line)))
    assert (first.code, first.severity) == ("GH304", Severity.CRITICAL)


def test_a_bar_that_gets_its_address_later_is_no_failure():
    """A second pass (pci=realloc) assigns it: "BAR 2 [mem ...]: assigned" after the failure."""
    later = "[    0.700000] pci 0000:41:00.0: BAR 2 [mem 0x38000000000-0x39fffffffff 64bit pref]: assigned\n"
    report = report_of(("dmesg.txt", H100 + NEW_NO_SPACE + later))
    assert "GH304" not in {f.code for f in report.findings}


def test_the_firmwares_own_address_taken_after_no_space_is_no_failure():
    """pci_assign_resource falls back to the firmware's address ("trying firmware assignment") and says nothing more
    when that works; "failed to assign" follows only when it does not."""
    text = (H100 + "[    0.620000] pci 0000:41:00.0: BAR 0: no space for [mem size 0x01000000 64bit pref]\n"
            "[    0.620010] pci 0000:41:00.0: BAR 0: trying firmware assignment "
            "[mem 0xe2000000-0xe2ffffff 64bit pref]\n")
    assert "GH304" not in {f.code for f in report_of(("dmesg.txt", text)).findings}


def test_another_vendors_device_is_not_a_gpu_fault():
    text = (NIC + "[    0.620000] pci 0000:05:00.0: BAR 0 [mem size 0x00800000 64bit pref]: can't assign; no space\n"
            "[    0.620010] pci 0000:05:00.0: BAR 0 [mem size 0x00800000 64bit pref]: failed to assign\n")
    report = report_of(("dmesg.txt", text))
    assert "GH304" not in {f.code for f in report.findings}
    assert not [f for f in report.findings if f.severity is Severity.CRITICAL]


def test_io_rom_and_bridge_window_lines_are_not_judged():
    """A GPU's legacy I/O BAR and its ROM without an address do not stop it; a bridge's window is judged by the
    BARs of the devices behind it."""
    text = (H100 + "[    0.620000] pci 0000:41:00.0: BAR 5 [io  size 0x0080]: can't assign; no space\n"
            "[    0.620001] pci 0000:41:00.0: BAR 5 [io  size 0x0080]: failed to assign\n"
            "[    0.620002] pci 0000:41:00.0: ROM [mem size 0x00080000 pref]: can't assign; no space\n"
            "[    0.620003] pci 0000:41:00.0: can't claim BAR 6 [mem 0xfff80000-0xffffffff pref]: no compatible bridge "
            "window\n"
            "[    0.620004] pci 0000:40:01.1: bridge window [mem size 0x2000000000 64bit pref]: "
            "can't assign; no space\n"
            "[    0.620005] pci 0000:40:01.1: bridge window [mem size 0x2000000000 64bit pref]: "
            "failed to assign\n")
    assert not [e for e in parse_kernel_log(text).events if e.kind in ("bar", "pci_resource")]


def test_a_bar_assigned_normally_is_healthy():
    text = (H100 + "[    0.410300] pci 0000:41:00.0: BAR 0 [mem 0xe2000000-0xe2ffffff 64bit pref]\n"
            "[    0.410400] pci 0000:41:00.0: BAR 2 [mem 0x38000000000-0x39fffffffff 64bit pref]\n"
            "[    0.600000] pci 0000:41:00.0: BAR 2 [mem 0x38000000000-0x39fffffffff 64bit pref]: assigned\n"
            "[    0.600100] pci 0000:41:00.0: BAR 0: assigned [mem 0xe2000000-0xe2ffffff 64bit pref]\n")
    report = report_of(("dmesg.txt", text))
    assert "GH304" not in {f.code for f in report.findings}
    assert report.verdict == "HEALTHY", [(f.code, f.message) for f in report.findings]


def test_another_vendors_display_controller_is_a_warning():
    """A server's BMC graphics (class 0300, vendor 1a03) without its BAR: a warning that names it, not a GPU down."""
    text = (BMC_VGA + "[    0.620000] pci 0000:02:00.0: BAR 0 [mem size 0x01000000]: can't assign; no space\n"
            "[    0.620010] pci 0000:02:00.0: BAR 0 [mem size 0x01000000]: failed to assign\n")
    (found,) = [f for f in report_of(("dmesg.txt", text)).findings if f.code == "GH304"]
    assert found.severity is Severity.WARNING and "1a03:2000" in found.message


def test_an_unidentified_device_is_a_warning_until_lspci_says_it_is_an_nvidia_gpu():
    line = "pci 0000:41:00.0: BAR 2 [mem size 0x2000000000 64bit pref]: failed to assign\n"
    (alone,) = [f for f in report_of(("dmesg.txt", line)).findings if f.code == "GH304"]
    assert alone.severity is Severity.WARNING
    lspci = "41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)\n"
    first = lead(report_of(("dmesg.txt", line), ("lspci.txt", lspci)))
    assert (first.code, first.severity) == ("GH304", Severity.CRITICAL)
    assert first.message.startswith("GPU 0000:41:00.0")


def test_the_bar_failure_explains_the_drivers_failure_after_it():
    """The PCI core's line comes first; RmInitAdapter and the failed probe follow from it."""
    text = (H100 + NEW_NO_SPACE + "[    9.000000] NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x22:0x56:884)\n"
            "[    9.000100] NVRM: The NVIDIA probe routine failed for 1 device(s).\n")
    first = lead(report_of(("dmesg.txt", text)))
    assert first.code == "GH304"


# lspci -vv as pciutils' lspci.c show_bases() prints a BAR: "Memory at <address>", or "<unassigned>" / "<ignored>"
# without one; "[disabled]" when memory decoding is off (no driver enabled the device). Hand-written.
LSPCI_VV = """41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:1626]
\tControl: I/O- Mem- BusMaster- SpecCycle- MemWINV- VGASnoop- ParErr+ Stepping- SERR+ FastB2B- DisINTx-
\tRegion 0: Memory at e2000000 (64-bit, prefetchable) [disabled] [size=16M]
\tRegion 2: Memory at {bar2} (64-bit, prefetchable) [disabled] [size=128G]
\tCapabilities: <access denied>
\tKernel modules: nvidiafb, nouveau, nvidia_drm, nvidia

05:00.0 Ethernet controller [0200]: Intel Corporation Ethernet Controller X710 for 10GbE SFP+ [8086:1572] (rev 02)
\tRegion 0: Memory at <unassigned> (64-bit, prefetchable) [disabled] [size=8M]
"""


@pytest.mark.parametrize("shown", ["<unassigned>", "<ignored>"])
def test_lspci_showing_a_gpus_bar_without_an_address_leads_with_gh304(shown):
    report = report_of(("lspci.txt", LSPCI_VV.format(bar2=shown)))
    first = report.findings[0]
    assert (first.code, first.severity, first.subject.pci_address) == ("GH304", Severity.CRITICAL, "0000:41:00.0")
    shown_lines = [line for e in first.evidence for line in e.lines]
    assert shown_lines == [f"Region 2: Memory at {shown} (64-bit, prefetchable) [disabled] [size=128G]"]


def test_lspci_with_every_gpu_bar_assigned_is_not_gh304_whatever_the_nics_say():
    """"[disabled]" alone (no driver enabled the GPU) is no BAR failure; the NIC's unassigned BAR is not a GPU's."""
    report = report_of(("lspci.txt", LSPCI_VV.format(bar2="38000000000")))
    assert "GH304" not in {f.code for f in report.findings}
    assert "GH304" not in {s.code for s in report.skipped}  # it read the GPU's BARs: judged, not skipped


def test_without_the_kernel_log_or_the_gpus_bars_gh304_is_skipped_not_passed():
    lspci = "41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)\n"
    report = report_of(("lspci.txt", lspci))
    assert "GH304" in {s.code for s in report.skipped}


def test_the_fixes_say_which_hosts_pci_realloc_helps_and_never_offer_a_command_for_fixed_windows():
    """pci=realloc lets Linux redo the firmware's assignment inside the host bridge's windows: it cannot enlarge a
    window an SoC fixes in hardware or a VM's MMIO; those are said in words (steps), not given a command."""
    first = report_of(("dmesg.txt", H100 + NEW_NO_SPACE)).findings[0]
    commands = [f for f in first.fixes if f.kind == "command"]
    assert {f.family for f in commands} == {"debian", "rhel"}
    assert all("pci=realloc" in f.command and f.note.startswith("only if ") for f in commands)
    (rhel,) = [f for f in commands if f.family == "rhel"]
    # grubby edits the BLS entries that grub2-mkconfig leaves alone on RHEL 9.3 and later
    assert rhel.command == "sudo grubby --update-kernel=ALL --args=pci=realloc"
    steps = [f.command for f in first.fixes if f.kind == "step"]
    assert any("Above 4G decoding" in s for s in steps) and any("64-bit MMIO" in s for s in steps)
    assert any("fixed by its hardware" in s and "no BIOS or kernel setting" in s for s in steps)


def test_a_quoted_pci_core_line_outside_a_kernel_log_is_read_by_the_catalogue():
    """knowledge/signatures.csv pci-bar-*: the same lines quoted in an issue body, a warning (which device it is is not
    known there)."""
    body = ("The server boots, but the GPU is not usable. dmesg says:\n\n```\n"
            "[    0.620010] pci 0000:41:00.0: BAR 2 [mem size 0x2000000000 64bit pref]: failed to assign\n```\n")
    found = [f for f in report_of(("issue.md", body)).findings if f.code == "GH304"]
    assert found and found[0].severity is Severity.WARNING


def test_a_nics_bar_line_beside_a_healthy_gpu_list_raises_nothing():
    session = ("$ sudo dmesg | grep -i bar\n" + NIC
               + "[    0.620000] pci 0000:05:00.0: BAR 0 [mem size 0x00800000 64bit pref]: failed to assign\n"
               "$ nvidia-smi -L\nGPU 0: NVIDIA H100 PCIe (UUID: GPU-0f4c8c3b-1111-2222-3333-444455556666)\n")
    report = report_of(("session.txt", session))
    assert "GH304" not in {f.code for f in report.findings}


def test_the_live_check_reads_the_bars_from_sysfs():
    """/sys/bus/pci/devices/<address>/resource (pci-sysfs.c resource_show: "start end flags" per resource): BAR 0
    assigned, BAR 2 (64-bit, its upper half "0 0 0") without an address (IORESOURCE_UNSET), BAR 5 an I/O BAR."""
    from gpuhealth.collect.gpu import probe_pci
    from hostcases import FakeHost

    host = FakeHost({"pci": [{"address": "0000:41:00.0", "device": "2331", "class": "0302"}]})
    resource = ["0x00000000e2000000 0x00000000e2ffffff 0x000000000014220c",
                "0x0000000000000000 0x0000000000000000 0x0000000000000000",
                "0x0000000000000000 0x0000001fffffffff 0x000000002014220c",
                "0x0000000000000000 0x0000000000000000 0x0000000000000000",
                "0x0000000000000000 0x0000000000000000 0x0000000000000000",
                "0x000000000000f000 0x000000000000f07f 0x0000000000040101",
                "0x0000000000000000 0x0000000000000000 0x0000000000000000"]
    host.files["/sys/bus/pci/devices/0000:41:00.0/resource"] = "\n".join(resource) + "\n"
    (gpu,) = probe_pci(host, 5).fields["pci_devices"]
    assert gpu.memory_regions == ("Region 0: Memory at e2000000 [size=16M] (sysfs)",
                                  "Region 2: Memory at <unassigned> [size=128G] (sysfs)")
    report = run_checks(Snapshot(origin="live", pci_devices=(gpu,)))
    (found,) = [f for f in report.findings if f.code == "GH304"]
    assert found.severity is Severity.CRITICAL and "1 memory BAR(s) without an address" in found.message


def test_lspci_showing_another_vendors_display_controllers_bar_without_an_address_is_a_warning():
    lspci = ("02:00.0 VGA compatible controller [0300]: ASPEED Technology, Inc. ASPEED Graphics Family [1a03:2000] "
             "(rev 52)\n\tRegion 0: Memory at <unassigned> (32-bit, non-prefetchable) [disabled] [size=16M]\n")
    (found,) = [f for f in report_of(("lspci.txt", lspci)).findings if f.code == "GH304"]
    assert found.severity is Severity.WARNING and "1a03:2000" in found.message


@pytest.mark.parametrize(("line", "said"), [
    # probe.c __pci_read_base before 6.8 names the register: 0x18 is BAR 2
    ("pci 0000:41:00.0: reg 0x18: can't handle BAR larger than 4GB (size 0x2000000000)", "BAR 2: larger than 4 GB"),
    ("pci 0000:41:00.0: BAR 2: can't handle BAR larger than 4GB (size 0x2000000000)", "BAR 2: larger than 4 GB"),
    ("pci 0000:41:00.0: [Firmware Bug]: reg 0x10: invalid BAR (can't size)", "BAR 0: cannot be sized"),
])
def test_the_sizing_lines_of_an_nvidia_gpu_are_gh304(line, said):
    first = report_of(("dmesg.txt", H100 + f"[    0.415000] {line}\n")).findings[0]
    assert (first.code, first.severity) == ("GH304", Severity.CRITICAL) and said in first.message


def test_a_bar_above_4gb_the_kernel_then_reassigns_is_no_failure():
    """"can't handle BAR above 4GB" (a 32-bit bus address type) is followed by a reassignment: not a failure itself."""
    text = (H100 + "[    0.415000] pci 0000:41:00.0: reg 0x18: can't handle BAR above 4GB (bus address 0x38000000000)\n"
            "[    0.600000] pci 0000:41:00.0: BAR 2: assigned [mem 0xc0000000-0xcfffffff 64bit pref]\n")
    assert "GH304" not in {f.code for f in report_of(("dmesg.txt", text)).findings}


def test_a_real_healthy_servers_rom_bar_lines_raise_nothing(corpus):
    """GPUd's sample dmesg (corpus gpud/dmesg__dmesg.decode.iso.log.1, a healthy 8-GPU server) holds the PCI core's
    "can't claim BAR 6 ...: no compatible bridge window" and "BAR 6: no space for / failed to assign" for the
    devices' expansion ROMs, as most servers' logs do: no BAR a driver needs, so nothing."""
    path = corpus / "gpud" / "dmesg__dmesg.decode.iso.log.1"
    text = path.read_text()
    assert "can't claim BAR 6" in text and "BAR 6: failed to assign" in text
    assert not [e for e in parse_kernel_log(text).events if e.kind in ("bar", "pci_resource")]
    assert "GH304" not in {f.code for f in report_of(("dmesg.log", text)).findings}


OS_RELEASE = ('NAME="Ubuntu"\nVERSION="22.04.4 LTS (Jammy Jellyfish)"\nID=ubuntu\nID_LIKE=debian\n'
              'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nVERSION_ID="22.04"\n')


def test_the_fix_script_leaves_pci_realloc_to_a_person():
    """pci=realloc helps only on some hosts (GH304's note says which): a kernel command-line change the script cannot
    judge, so `gpuhealth fix` writes it as a comment even on a host whose distribution it knows."""
    from gpuhealth.fixscript import fix_script

    report = report_of(("dmesg.txt", H100 + NEW_NO_SPACE), ("os-release", OS_RELEASE))
    assert report.snapshot.os is not None and report.snapshot.os.family == "debian"
    lines = [line for line in fix_script(report).splitlines() if "pci=realloc" in line]
    assert lines and all(line.startswith("#") for line in lines)
