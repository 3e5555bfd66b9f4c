"""``kubectl describe pod`` read as evidence: the pod's GPU request, RuntimeClass and phase by its parser
(parsers/kube.py), its Events table's messages by the catalogue, each from the component that prints it: the
scheduler's "Insufficient nvidia.com/gpu", containerd's and CRI-O's refusal of the nvidia handler under
FailedCreatePodSandBox, and the kubelet device manager's refusals wrapped as UnexpectedAdmissionError
(pkg/kubelet/cm/devicemanager/manager.go, devicesToAllocate). A pod whose events are all Normal is no finding. The
descriptions are in tests/data/listings/kubectl-describe-pod (README.md there says how each was written)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import identify, load
from gpuhealth.model import ParseError, Report, Severity
from gpuhealth.parsers.kube import parse_describe_pod
from listings_data import listing

load()

SANDBOX = "kubectl-describe-pod/handwritten_sandbox-no-nvidia-runtime.txt"
PENDING = "kubectl-describe-pod/handwritten_pending-insufficient-gpu.txt"
ADMISSION = "kubectl-describe-pod/handwritten_admission-devices-unavailable.txt"
NORMAL = "kubectl-describe-pod/handwritten_completed-normal-events.txt"
V2_NOT_DEFAULT = "containerd-config/handwritten_v2-nvidia-not-default.toml"


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(pieces)
    return run_checks(snapshot)


def _lead(report: Report):
    return next(f for f in report.findings if f.severity is not Severity.INFO)


def _event(reason: str, message: str) -> str:
    """One describe pod, its Events table holding one Warning event of the kubelet."""
    head = listing(NORMAL).split("Events:")[0]
    return (head + "Events:\n  Type     Reason  Age   From     Message\n  ----     ------  ----  ----     -------\n"
            f"  Warning  {reason}  5s    kubelet  {message}\n")


def test_the_parser_reads_the_request_the_runtimeclass_and_the_phase():
    sandbox = parse_describe_pod(listing(SANDBOX))
    assert (sandbox.k8s_pod_requests_gpu, sandbox.k8s_pod_runtime_class) == (True, "nvidia")
    admission = parse_describe_pod(listing(ADMISSION))
    assert admission.k8s_pod_status == "Failed (UnexpectedAdmissionError)" and admission.k8s_pod_runtime_class == ""
    assert parse_describe_pod(listing(NORMAL)).k8s_pod_status == "Succeeded"
    with pytest.raises(ParseError):
        parse_describe_pod("Name: gpu-pod\nNamespace: default\nEvents: <none>\n")


@pytest.mark.parametrize("name", [SANDBOX, PENDING, ADMISSION, NORMAL])
def test_recognised_by_content_and_by_command(name):
    assert identify(listing(name)) == "kubectl-describe-pod"
    report = _report(("session.txt", "$ kubectl describe pod gpu-pod\n" + listing(name)))
    assert all(f.code != "GH002" for f in report.findings)


def test_the_runtime_refusal_says_configure_the_nvidia_runtime():
    lead = _lead(_report((SANDBOX, listing(SANDBOX))))
    assert lead.code == "GH802" and lead.severity is Severity.CRITICAL
    assert "sudo nvidia-ctk runtime configure --runtime=containerd" in [f.command for f in lead.fixes]


def test_insufficient_gpu_points_to_the_device_plugin():
    lead = _lead(_report((PENDING, listing(PENDING))))
    assert lead.code == "GH802" and "device plugin" in lead.message
    assert any("nvidia-device-plugin" in f.command for f in lead.fixes)
    assert not any("apt-get install" in f.command for f in lead.fixes)


@pytest.mark.parametrize("message, fix", [
    ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 4, Available: 0, "
     "which is unexpected", "nvidia-device-plugin"),
    ("Allocate failed due to cannot allocate unregistered device nvidia.com/gpu, which is unexpected",
     "nvidia-device-plugin"),
    ("Allocate failed due to no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is "
     "unexpected", "grep -i unhealthy"),
    ("Allocate failed due to previously allocated devices are no longer healthy; cannot allocate unhealthy devices "
     "nvidia.com/gpu, which is unexpected", "grep -i unhealthy"),
])
def test_the_device_managers_refusals_lead_with_their_fix(message, fix):
    report = _report(("pod.txt", _event("UnexpectedAdmissionError", message)))
    lead = _lead(report)
    assert lead.code == "GH802" and lead.severity is Severity.CRITICAL
    assert any(fix in f.command for f in lead.fixes)
    assert not [f for f in report.findings if f.code == "GH003"]  # the pod's Status and Reason lines are read


def test_another_resources_refusal_is_no_gpu_matter():
    message = ("Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
               "mellanox.com/mlnx_rdma, which is unexpected")
    assert not [f for f in _report(("pod.txt", _event("UnexpectedAdmissionError", message))).findings
                if f.code == "GH802"]


def test_a_pod_whose_events_are_normal_is_no_finding():
    report = _report((NORMAL, listing(NORMAL)))
    assert not [f for f in report.findings if f.severity is not Severity.INFO]
    assert [f.code for f in report.findings] == ["GH005"]  # a pod's description alone is no healthy host


def test_the_pod_beside_containerds_config_names_its_missing_runtimeclass():
    pod = listing(PENDING)  # asks for nvidia.com/gpu and names no RuntimeClass
    session = "$ cat /etc/containerd/config.toml\n" + listing(V2_NOT_DEFAULT) + "$ kubectl describe pod gpu-pod\n" + pod
    report = _report(("session.txt", session))
    assert any("names no runtimeClassName" in f.message for f in report.findings if f.code == "GH802")


def test_end_to_end_through_analyze_stdin():
    from click.testing import CliRunner

    from gpuhealth.cli import main

    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=listing(ADMISSION))
    assert '"GH802"' in result.output and "UnexpectedAdmissionError" in result.output
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=listing(NORMAL))
    assert '"GH802"' not in result.output and '"GH005"' in result.output
