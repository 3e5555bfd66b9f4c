"""nvidia-installer's warnings (ui_warn's "WARNING: " prefix) hold no error word, yet the one that names a legacy GPU
says why the driver will not drive it: a line a mined installer row names is read (GH310), and the legacy family
confirms GH209's cause (nvidia-installer misc.c, check_for_nvidia_graphics_devices: the GPU's PCI ID is in its
LegacyList). The lines are written from misc.c's format strings (550.144.03 and 590.48.01); GPU names and versions
are examples."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge import mined_tools
from gpuhealth.model import Severity

LEGACY_550 = ("WARNING: The NVIDIA GeForce GTX 680 GPU installed in this system is supported through the NVIDIA "
              "470.xx legacy Linux graphics drivers.  Please visit http://www.nvidia.com/object/unix.html for more "
              "information.  The 550.144.03 NVIDIA Linux graphics driver will ignore this GPU.")
LEGACY_590 = ("WARNING: The following NVIDIA GPUs are supported through NVIDIA legacy Linux graphics drivers and will "
              "be ignored by the NVIDIA 590.48.01 Linux graphics driver:")
NONE_SUPPORTED = ("WARNING: You do not appear to have an NVIDIA GPU supported by the 550.144.03 NVIDIA Linux graphics "
                  "driver installed in this system.  For further details, please see the appendix SUPPORTED NVIDIA "
                  "GRAPHICS CHIPS in the README available on the Linux driver download page at www.nvidia.com.")
INSTALLER_LOG = ("nvidia-installer log file '/var/log/nvidia-installer.log'\ncreation time: Tue Dec  1 10:00:00 2020\n"
                 "installer version: 550.144.03\n\n")


def findings(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot).findings


def test_the_legacy_lines_are_the_legacy_family_which_confirms_gh209():
    for line in (LEGACY_550, LEGACY_590):
        row = mined_tools.match(line)
        assert row is not None and row.family == "installer-gpu-legacy", line
    family = mined_tools.families()["installer-gpu-legacy"]
    assert (family.code, family.cause, family.decides) == ("GH209", "driver-gpu-unsupported", "confirms")
    # no legacy GPU, no GPU at all: "none supported" only suggests the cause (the scan may have found no GPU)
    assert mined_tools.match(NONE_SUPPORTED).family == "installer-gpu-unsupported"


def test_a_legacy_gpu_warning_pasted_alone_leads_with_gh209():
    found = findings(("installer.txt", LEGACY_550 + "\n"))
    lead = found[0]
    assert (lead.code, lead.severity) == ("GH209", Severity.WARNING), [(f.code, f.message) for f in found]
    assert "legacy driver branch" in lead.message
    assert not any(f.code == "GH003" for f in found)
    # the mined finding folds under the cause its family confirms
    assert not any(f.code == "GH310" and f.severity is not Severity.INFO for f in found)


def test_a_legacy_gpu_warning_in_the_installer_log_is_no_healthy_log():
    found = findings(("nvidia-installer.log", INSTALLER_LOG + LEGACY_550 + "\n"))
    assert any(f.code == "GH209" and f.severity is Severity.WARNING for f in found), [(f.code, f.message)
                                                                                       for f in found]


def test_the_none_supported_warning_is_read_as_the_installers():
    found = findings(("installer.txt", NONE_SUPPORTED + "\n"))
    gh310 = next(f for f in found if f.code == "GH310")
    assert "misc.c" in gh310.message and gh310.severity is Severity.INFO


def test_a_warning_no_mined_row_names_is_no_error_line():
    found = findings(("installer.txt", "WARNING: using the default configuration\n"
                      "WARNING: the system has a lot of memory\n"))
    assert not any(f.code in ("GH003", "GH310") for f in found)
