"""The list of check modules. Importing one registers its checks; ``load`` imports them all, once."""

from __future__ import annotations

import importlib

CHECK_MODULES = (
    "gpuhealth.checks.meta",
    "gpuhealth.checks.inventory",
    "gpuhealth.checks.driver",
    "gpuhealth.checks.kernel_log",
    "gpuhealth.checks.driver_messages",
    "gpuhealth.checks.api_messages",
    "gpuhealth.checks.tool_messages",
    "gpuhealth.checks.gpu_state",
    "gpuhealth.checks.install",
    "gpuhealth.checks.cuda",
    "gpuhealth.checks.environment",
    "gpuhealth.checks.hostside",
    "gpuhealth.checks.topology",
    "gpuhealth.checks.diagnosis",
    "gpuhealth.checks.evidence_checks",
    "gpuhealth.checks.extensions",
)


def load() -> None:
    for name in CHECK_MODULES:
        importlib.import_module(name)
