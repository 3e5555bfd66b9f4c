"""`check --stage`: the checks that matter before the driver is installed, or after.

Without a stage every check runs and each one skips itself where it does not apply ("what applies").
"""

from __future__ import annotations

from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY

STAGES = ("preinstall", "postinstall")
# Before the install: the GPU on the bus, the OS, nouveau and the firmware's BAR setup, and what
# building the module needs (GH5xx).
PREINSTALL_AREAS = ("GH1", "GH5")
# A full / or /var fails the package install and the DKMS build (GH814); a clock far off makes apt and dnf refuse
# repository metadata "not valid yet" or expired (GH817).
PREINSTALL_EXTRA = frozenset({"GH206", "GH304", "GH305", "GH801", "GH814", "GH817"})
# After the install, building the module is history; "the next boot loses the driver" (GH507) and
# mixed install routes (GH509) still matter.
BUILD_ONLY = frozenset({"GH501", "GH502", "GH503", "GH504", "GH505", "GH506"})


def codes_for(stage: str | None) -> set[str] | None:
    """The check codes for ``stage``; None (every check) without one."""
    if stage is None:
        return None
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}: choose from {', '.join(STAGES)}")
    catalogue.load()
    if stage == "preinstall":
        return {c for c in REGISTRY if c.startswith(PREINSTALL_AREAS) or c in PREINSTALL_EXTRA}
    return {c for c in REGISTRY if c not in BUILD_ONLY}
