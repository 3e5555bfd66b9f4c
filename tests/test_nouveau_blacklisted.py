"""GH206 when a modprobe.d file already blacklists nouveau and nouveau is loaded all the same: the initramfs was not
rebuilt since the blacklist was written (or the host not rebooted), so the fix is to rebuild it and reboot.

Real pieces (tests/data/listings/SOURCE.md): negativo17/nvidia-driver#75's `cat /etc/modprobe.d/nvidia.conf`, and
negativo17/nvidia-driver#73's `lspci -vv` block of a GTX 970 with "Kernel driver in use: nouveau". Putting them in
one paste is the test's own scenario; the two-line blacklist is the one NVIDIA's installation guide gives."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Finding, Severity
from listings_data import LISTINGS

LSPCI_NOUVEAU = (LISTINGS / "lspci-k" / "negativo17-nvidia-driver-73_nouveau-in-use.txt").read_text()
CONF_75 = (LISTINGS / "modprobe-d" / "negativo17-nvidia-driver-75_nvidia.conf").read_text()
GUIDE_BLACKLIST = "blacklist nouveau\noptions nouveau modeset=0\n"
WRITE = "sudo tee /etc/modprobe.d/blacklist-nouveau.conf"


def gh206(*blocks: tuple[str, str]) -> Finding:
    text = "".join(f"$ {command}\n{output}" for command, output in blocks)
    report = run_checks(analyze_texts([("paste.txt", text)])[0], select=["GH206"])
    (finding,) = report.findings
    return finding


def commands(finding: Finding) -> list[str]:
    return [f.command for f in finding.fixes]


def test_a_complete_blacklist_with_nouveau_bound_names_the_initramfs_and_only_rebuilds_it():
    finding = gh206(("cat /etc/modprobe.d/blacklist-nouveau.conf", GUIDE_BLACKLIST),
                    ("lspci -vv -s 01:00.0", LSPCI_NOUVEAU))
    assert finding.severity is Severity.CRITICAL
    assert "although modprobe.d blacklists it: the initramfs was most likely not rebuilt" in finding.message
    found = commands(finding)
    assert "sudo update-initramfs -u" in found and "sudo dracut --force" in found
    assert not any(WRITE in c for c in found)  # the blacklist is there: writing it again changes nothing
    assert {f.family for f in finding.fixes if "update-initramfs" in f.command} == {"debian"}
    assert {f.family for f in finding.fixes if "dracut" in f.command} == {"rhel"}
    reboot = finding.fixes[-1]
    assert reboot.command == "sudo reboot" and reboot.disruptive
    assert any("blacklist nouveau" in line for e in finding.evidence for line in e.lines)


def test_a_blacklist_without_modeset_off_also_writes_the_missing_line():
    """#75's file blacklists nouveau but does not set modeset=0: the rebuild comes with the complete file."""
    finding = gh206(("cat /etc/modprobe.d/nvidia.conf", CONF_75), ("lspci -vv -s 01:00.0", LSPCI_NOUVEAU))
    assert "initramfs was most likely not rebuilt" in finding.message
    found = commands(finding)
    assert any(WRITE in c for c in found) and "sudo update-initramfs -u" in found


def test_without_a_blacklist_the_finding_is_as_before():
    finding = gh206(("lspci -vv -s 01:00.0", LSPCI_NOUVEAU))
    assert finding.message == "nouveau is loaded: the NVIDIA driver cannot use the GPU"
    assert any(WRITE in c for c in commands(finding))
