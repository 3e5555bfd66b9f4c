"""A piece that holds lines of several kinds: another program's error line beside a valid sample of an evidence kind is
never taken for judged because the piece was routed to that kind (analyze._read_by: only a line the kind's parser read
is left to the checks of that kind). Evidence that was not understood never ends in HEALTHY."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import KINDS, identify, load
from gpuhealth.model import Severity
from gpuhealth.parsers.smi_nvlink import parse_smi_nvlink
from test_evidence_kinds import _example

# Error lines of other components, each in the form the program prints it (hand-written here), and the check that
# reads it when pasted alone.
OTHER_LINES = {
    # the driver's Xid line (nv.c's "NVRM: Xid (PCI:%s): %d, ..."; NVIDIA's Xid catalogue: 79, fallen off the bus)
    "nvrm": ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1911, name=python3, GPU has fallen off the bus.", "GH302"),
    # the Kubernetes device plugin's klog error line (NVIDIA/k8s-device-plugin, cmd/nvidia-device-plugin/main.go)
    "device-plugin": ("E0129 08:34:25.402396       1 main.go:132] error starting plugins: error creating plugin "
                      "manager: unable to create plugin manager: nvml init failed: ERROR_LIBRARY_NOT_FOUND", "GH310"),
    # docker run --gpus all on a host without the NVIDIA Container Toolkit (moby daemon/devices.go)
    "docker": ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
               "GH802"),
    # PyTorch's CUDA error for a GPU architecture the wheel was not built for
    "cuda": ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "GH606"),
}


def _report(text: str):
    snapshot, log = analyze_texts([("paste.txt", text)])
    return run_checks(snapshot), log


def _raised(report) -> set[str]:
    return {f.code for f in report.findings if f.severity is not Severity.INFO}


@pytest.mark.parametrize("name", sorted(OTHER_LINES))
def test_each_line_alone_raises_its_finding(name):
    line, code = OTHER_LINES[name]
    report, _ = _report(line + "\n")
    assert code in _raised(report)


def _kinds() -> list[str]:
    load()
    return sorted(KINDS)


@pytest.mark.parametrize("kind", _kinds())
@pytest.mark.parametrize("name", sorted(OTHER_LINES))
def test_another_programs_error_beside_a_sample_of_every_kind_is_read(kind, name):
    """Every kind's real sample (tests/test_evidence_kinds.py's table) with one error line of another component under
    it: the line's finding is raised, and the verdict is never HEALTHY."""
    line, code = OTHER_LINES[name]
    text = _example(kind).rstrip("\n") + "\n" + line + "\n"
    report, log = _report(text)
    assert report.verdict != "HEALTHY", (kind, name, log)
    assert code in _raised(report), (kind, name, [r.kind for r in log], sorted(_raised(report)))


def test_a_line_the_kinds_parser_reads_stays_judged_by_its_checks():
    """systemctl status of nvidia-fabricmanager: its journal lines are the unit's, read into the snapshot, so the
    catalogue lines among them keep the fields they were read into (no second finding for them)."""
    text = _example("systemctl-status")
    assert identify(text) == "systemctl-status"
    snapshot, _ = analyze_texts([("status.txt", text)])
    failed = [m for m in snapshot.messages if m.signature == "fm-service-failed"]
    assert failed and all(m.read_into for m in failed)


def test_a_line_its_parser_passed_over_is_not_judged_by_the_kind():
    line, _ = OTHER_LINES["docker"]
    text = _example("dkms-status") + line + "\n"
    assert identify(text) == "dkms-status"
    snapshot, _ = analyze_texts([("paste.txt", text)])
    docker = [m for m in snapshot.messages if m.line == line]
    assert docker and not docker[0].read_into


def test_daemon_json_followed_by_other_lines_is_not_taken_whole():
    """The file's reader would swallow a log line under the JSON as invalid JSON; a file that ends the text is the file,
    valid or not."""
    config = '{\n  "default-runtime": "nvidia",\n  "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}\n}\n'
    assert identify(config) == "daemon-json"
    invalid = config.replace("}}\n}", "}},\n}")  # a trailing comma: still the file (GH802 says dockerd refuses it)
    assert identify(invalid) == "daemon-json"
    assert identify(config + OTHER_LINES["device-plugin"][0] + "\n") != "daemon-json"


def test_nvlink_status_takes_a_gpus_reason_only_in_place_of_its_links():
    gpu = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-c7e253b0-c227-6f10-e860-7482c85e7ce8)\n"
    assert parse_smi_nvlink(gpu + "\tNVML: Unable to retrieve NVLink information as all links are inActive\n"
                            )[0].error == "all links are inactive"
    after = parse_smi_nvlink(gpu + "\t Link 0: 25 GB/s\n" + OTHER_LINES["docker"][0] + "\n")[0]
    assert after.error is None and after.link_speeds_gbps == (25.0,)


@pytest.mark.parametrize(("kind", "line", "owned"), [
    # nvidia-smi -q pads its keys to the value column: a row of it, at any depth
    ("smi-query", "CUDA Version                              : 12.2", True),
    ("smi-query", "        Pending Page Blacklist            : No", True),
    # a pasted error line has no such padding: anybody's
    ("smi-query", "Failed to initialize NVML: Unknown Error", False),
    ("smi-query", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", False),
    # p2pBandwidthLatencyTest's access lines, which its connectivity matrix repeats
    ("cuda-p2p-test", "Device=0 CANNOT Access Peer Device=2", True),
    ("cuda-p2p-test", "cudaErrorPeerAccessUnsupported: peer access is not supported between these two devices", False),
])
def test_a_kind_names_the_lines_its_program_prints(kind, line, owned):
    load()
    assert KINDS[kind].owns(line) is owned
