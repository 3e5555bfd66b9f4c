"""The GPU operator's driver lines: k8s-driver-manager's nouveau handling (cmd/driver-manager/main.go: "Unloading
nouveau driver", "failed to unload nouveau driver: %w", "Successfully unloaded nouveau driver"; the shell
driver-manager before it printed the same words) and the driver container's refusals (gpu-driver-container's
nvidia-driver script: "Could not resolve Linux kernel version" when no linux-headers package matches the node's kernel,
"Could not unload NVIDIA driver kernel modules, driver is in use"). Lines rendered from those format strings as the
components log them (logrus's text form for the Go driver manager, plain echo for the scripts)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity


def _findings(text: str) -> list:
    snapshot, _ = analyze_texts([("driver-manager.log", text)])
    return [f for f in run_checks(snapshot).findings if f.severity is not Severity.INFO]


# the shell driver-manager's run on a node where nouveau is loaded and will not unload (the log kubectl logs shows for
# its init container), then the Go driver manager's logrus line for the same failure
SHELL_RUN = ("Getting current value of the 'nvidia.com/gpu.deploy.operator-validator' node label\n"
             "Current value of 'nvidia.com/gpu.deploy.operator-validator=true'\n"
             "Unloading nouveau driver...\n"
             "rmmod: ERROR: Module nouveau is in use\n"
             "Failed to unload nouveau driver\n")
GO_FAILED = ('time="2026-12-07T10:02:11Z" level=info msg="Unloading nouveau driver"\n'
             'time="2026-12-07T10:02:11Z" level=error msg="failed to unload nouveau driver: device or resource busy"\n')


@pytest.mark.parametrize("text", [SHELL_RUN, GO_FAILED])
def test_nouveau_that_will_not_unload_leads_with_gh206(text):
    lead = _findings(text)[0]
    assert lead.code == "GH206" and lead.severity is Severity.CRITICAL
    assert any("blacklist nouveau" in f.command for f in lead.fixes)


def test_nouveau_unloaded_by_the_driver_manager_says_blacklist_it():
    text = ('time="2026-12-07T10:02:11Z" level=info msg="Unloading nouveau driver"\n'
            'time="2026-12-07T10:02:11Z" level=info msg="Successfully unloaded nouveau driver"\n')
    (found,) = _findings(text)
    assert found.code == "GH501" and found.severity is Severity.WARNING


def test_the_driver_container_without_headers_for_the_kernel_is_gh503():
    text = ("========== NVIDIA Software Installer ==========\n"
            "Starting installation of NVIDIA driver version 550.90.07 for Linux kernel version 6.8.0-1015-aws\n"
            "Resolving Linux kernel version...\n"
            "Could not resolve Linux kernel version\n")
    lead = _findings(text)[0]
    assert lead.code == "GH503" and lead.severity is Severity.CRITICAL


def test_a_driver_in_use_on_the_node_names_the_two_installs():
    text = ("Unloading NVIDIA driver kernel modules...\n"
            "nvidia_uvm           1441792  0\nnvidia              56717312  1 nvidia_uvm\n"
            "Could not unload NVIDIA driver kernel modules, driver is in use\n")
    assert [f.code for f in _findings(text)][:1] == ["GH509"]


def test_the_words_nouveau_and_driver_manager_alone_are_no_finding():
    assert not _findings("The driver manager handles nouveau for us; see the docs.\n")
