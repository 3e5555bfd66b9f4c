"""libnvidia-container's "stat failed: /dev/nvidia*: no such file or directory" (nvidia-container-cli's mount step,
src/nvc_mount.c mount_device -> src/xfuncs.h xstat) names the missing device node, not only "a container tool
reported an error" (GH310): /dev/nvidia-uvm is nvidia_uvm's node (GH205), the others are device nodes never created
(GH207), whose fixes include the toolkit's own `nvidia-ctk system create-device-nodes`.

The lines are written here from the source's format ("stat failed: %s" after nvidia-container-cli's "mount error: ",
the errno text after it), in the shapes docker and a driver root under /run/nvidia/driver give them."""

from __future__ import annotations

import pytest

import mined_helpers
from gpuhealth.model import Report

DOCKER = ("docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI "
          "runtime create failed: runc create failed: unable to start container process: error during container init: "
          "error running hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: mount "
          "error: {what}: unknown.")


def report(text: str) -> Report:
    return mined_helpers.report(text, "paste.txt")


def lead(text: str) -> str:
    result = report(text)
    return result.findings[0].code if result.findings else "HEALTHY"


@pytest.mark.parametrize("node", ["/dev/nvidia-modeset", "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia7"])
def test_a_missing_device_node_leads_to_device_nodes_missing(node: str):
    line = f"nvidia-container-cli: mount error: stat failed: {node}: no such file or directory\n"
    result = report(line)
    assert result.findings[0].code == "GH207", [(f.code, f.message) for f in result.findings]
    assert "GH310" not in {f.code for f in result.findings}  # the catalogue names it: no generic tool finding
    commands = [f.command for f in result.findings[0].fixes]
    assert "sudo nvidia-ctk system create-device-nodes --control-devices --load-kernel-modules" in commands


@pytest.mark.parametrize("node", ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"])
def test_a_missing_uvm_node_leads_to_nvidia_uvm_missing(node: str):
    assert lead(DOCKER.format(what=f"stat failed: {node}: no such file or directory") + "\n") == "GH205"


def test_a_driver_root_prefix_is_still_the_device_node():
    """With the driver in a container (the GPU operator), the path is under the driver root."""
    line = ("nvidia-container-cli: mount error: stat failed: /run/nvidia/driver/dev/nvidia-modeset: no such file or "
            "directory")
    assert lead(line + "\n") == "GH207"


def test_stat_of_another_path_is_not_a_device_node_finding():
    """A library or a node that exists but is refused says nothing about missing device nodes."""
    for what in ("stat failed: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1: no such file or directory",
                 "stat failed: /dev/nvidia-modeset: permission denied"):
        codes = {f.code for f in report(DOCKER.format(what=what) + "\n").findings}
        assert not codes & {"GH205", "GH207"}, (what, codes)
