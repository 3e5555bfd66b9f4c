"""The Xids the NVIDIA Kubernetes device plugin logs from NVML's events (parsers/device_plugin_xids.py): machine
output judged as a logged Xid, never the reporter's words. Every example line is written here from the plugin's format
strings (NVIDIA/k8s-device-plugin internal/rm/health.go and the older cmd/nvidia-device-plugin/nvidia.go), with a klog
header where the plugin logs through klog; the UUID is made up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main
from gpuhealth.model import DEVICE_PLUGIN
from gpuhealth.parsers.device_plugin_xids import SKIPPED_BY_DEFAULT, plugin_xids

UUID = "GPU-1a2b3c4d-0000-1111-2222-333344445555"
KLOG = "I1208 01:10:05.551834       1 health.go:169] "
# one line per format string, Xid 79 in each ("on GPU=", ", uuid=" and uuidCriticalError are forks' forms)
FORMATS = {
    "klog, recent tags": f"{KLOG}XidCriticalError: Xid=79 on Device={UUID}; marking device as unhealthy.",
    "log.Printf, older tags": f"2021/03/04 10:00:00 XidCriticalError: Xid=79 on Device={UUID}, the device will go "
                              "unhealthy.",
    "log.Printf, on GPU=": f"2021/03/04 10:00:00 XidCriticalError: Xid=79 on GPU={UUID}, the device will go unhealthy.",
    "glog with uuid=": f"E0304 10:00:00.000000 1 nvidia.go:120] XidCriticalError: Xid=79 on Device=0, uuid={UUID}, "
                       "the device will go unhealthy.",
    "all devices": "2021/03/04 10:00:00 XidCriticalError: Xid=79, All devices will go unhealthy.",
    "no uuid, v0.20.0": f"{KLOG}Failed to determine uuid for event {{{{0x7f3b4c001230}} 8 79 4294967295 4294967295}}: "
                        "ERROR_UNKNOWN; Marking all devices as unhealthy.",
    "uuidCriticalError, all devices": "W0304 10:00:00.000000 1 health.go:80] uuidCriticalError: Xid=79, All devices "
                                      "will go unhealthy.",
    "uuidCriticalError, one device": "W0304 10:00:00.000000 1 health.go:86] uuidCriticalError: Xid=79 on "
                                     f"Device{UUID}, the device will go unhealthy.",
}


def analyze(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "plugin.log"
    path.write_text(text)
    result = CliRunner().invoke(main, ["analyze", "--format", "json", str(path)])
    return json.loads(result.stdout)


def findings(document: dict, code: str) -> list[dict]:
    return [f for f in document["findings"] if f["code"] == code]


@pytest.mark.parametrize("line", FORMATS.values(), ids=list(FORMATS))
def test_each_format_is_an_xid_of_the_device_plugin(line):
    found, named = plugin_xids(["plugin started", line], "plugin.log")
    log = found["kernel_log"]
    assert log.format == DEVICE_PLUGIN and not log.reported
    (event,) = log.events
    assert (event.kind, event.xid, event.pci_address, event.line_number) == ("xid", 79, None, 2)
    assert named == [line]


def test_the_rendered_event_is_go_nvmls_event_data():
    assert "{{0x7f3b4c001230} 8 79 4294967295 4294967295}" in FORMATS["no uuid, v0.20.0"]


def test_the_device_is_kept_and_all_devices_said():
    (one,) = plugin_xids([FORMATS["klog, recent tags"]], "p")[0]["kernel_log"].events
    (every,) = plugin_xids([FORMATS["all devices"]], "p")[0]["kernel_log"].events
    assert one.detail == f"device {UUID}"
    assert every.detail == "all devices"


@pytest.mark.parametrize("line", [
    "the device plugin said Xid 79 and marked the GPU unhealthy",
    "kubectl logs shows XidCriticalError for Xid 79, the device will go unhealthy",
    "XidCriticalError: Xid=79 on unknown device.",  # a fork's line that marks nothing
    f"{KLOG}Skipping event {{Device:0x7f EventType:8 EventData:79 GpuInstanceId:0 ComputeInstanceId:0}}",
    f"{KLOG}Error waiting for event: ERROR_UNKNOWN; Marking all devices as unhealthy",  # no Xid in it
])
def test_words_and_other_lines_are_not_the_plugin_marking_a_gpu(line):
    assert plugin_xids([line], "notes.txt") == ({}, [])


def test_words_about_the_plugin_stay_reported(tmp_path):
    document = analyze(tmp_path, "the device plugin said Xid 79 on one of our nodes\n")
    (found,) = findings(document, "GH302")
    assert found["severity"] == "warning"
    assert "reported in words" in found["message"]
    assert "decided" not in found["labels"]


def test_a_plugin_xid_79_is_critical_machine_evidence(tmp_path):
    document = analyze(tmp_path, FORMATS["klog, recent tags"] + "\n")
    (found,) = findings(document, "GH302")
    assert found["severity"] == "critical"
    assert found["impact"] in ("node_unusable", "gpu_unusable")  # drains
    assert "reported in words" not in found["message"]
    assert UUID in found["message"]  # the GPU is named by the UUID the plugin logged
    assert found["labels"] == {"xid": "79", "decided": "device-plugin-gpu-unhealthy"}
    (evidence,) = found["evidence"]
    assert "device plugin's NVML Xid events" in evidence["source"]
    assert not findings(document, "GH002")  # the piece was understood


def test_the_machine_line_wins_over_words_in_the_same_paste(tmp_path):
    text = "I think the kernel said Xid 79 too\n" + FORMATS["klog, recent tags"] + "\n"
    (found,) = findings(analyze(tmp_path, text), "GH302")
    assert found["severity"] == "critical"


@pytest.mark.parametrize("xid", sorted(SKIPPED_BY_DEFAULT))
def test_an_xid_the_plugin_skips_never_drains(tmp_path, xid):
    """An application Xid the plugin logged all the same (its skip list changed by DP_DISABLE_HEALTHCHECKS or
    DP_ENABLE_HEALTHCHECKS) is still the application's error: the catalogue keeps it from draining the node."""
    document = analyze(tmp_path, FORMATS["klog, recent tags"].replace("Xid=79", f"Xid={xid}") + "\n")
    assert not [f for f in document["findings"] if f["severity"] == "critical"]
    assert not [f for f in document["findings"] if f["impact"] in ("node_unusable", "gpu_unusable")]
    (found,) = findings(document, "GH301")
    assert found["labels"]["xid"] == str(xid)


@pytest.mark.parametrize("line", [FORMATS["all devices"].replace("Xid=79", "Xid=48"),
                                  FORMATS["no uuid, v0.20.0"].replace(" 8 79 ", " 8 48 ")])
def test_a_plugin_xid_48_is_judged_as_a_logged_one(tmp_path, line):
    (found,) = findings(analyze(tmp_path, line + "\n"), "GH301")
    assert found["severity"] == "critical"
    assert "device plugin's NVML event" in found["message"]


def test_the_plugins_unhealthy_gpu_decides_the_admission_failure(tmp_path):
    """kubectl's refusal beside the plugin's line: the cause is the plugin's unhealthy GPU, decided, not a guess."""
    text = (FORMATS["klog, recent tags"] + "\nWarning  UnexpectedAdmissionError  pod/train  Allocate failed due to no "
            "healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected\n")
    (found,) = findings(analyze(tmp_path, text), "GH802")
    assert found["differential"][0]["cause"] == "device-plugin-gpu-unhealthy"
    assert found["differential"][0]["status"] == "confirmed"


def test_end_to_end_from_standard_input():
    result = CliRunner().invoke(main, ["analyze", "-"], input=FORMATS["log.Printf, older tags"] + "\n")
    assert result.exit_code == 2, result.output  # critical
    assert "GH302" in result.output and "device plugin's NVML" in result.output


KERNEL_79 = ("[ 4120.223344] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
             "GPU has fallen off the bus.\n")


@pytest.mark.parametrize("order", ["kernel first", "plugin first"])
def test_a_kernel_log_judges_the_xids_it_shows_whatever_the_order(tmp_path, order):
    """The kernel log names the GPU by its PCI address: its Xid 79 is the one finding, not a second one by UUID; an
    Xid only the plugin saw (48) is still judged, whichever file comes first."""
    plugin = FORMATS["klog, recent tags"] + "\n" + FORMATS["klog, recent tags"].replace("Xid=79", "Xid=48") + "\n"
    files = [("a.log", KERNEL_79), ("b.log", plugin)]
    if order == "plugin first":
        files.reverse()
    paths = []
    for name, text in files:
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    document = json.loads(CliRunner().invoke(main, ["analyze", "--format", "json", *paths]).stdout)
    (fell,) = findings(document, "GH302")
    assert "0000:3b:00" in fell["message"] and "device plugin" not in fell["message"]
    assert [f["labels"]["xid"] for f in findings(document, "GH301")] == ["48"]


def test_plugin_lines_pasted_among_kernel_lines_are_read(tmp_path):
    """One paste with the kernel's lines and the plugin's: the kernel's Xid 48 and the plugin's Xid 79 both count."""
    text = ("[ 4120.223344] NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, name=python, Ch 00000010\n"
            "[ 4121.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n"
            + FORMATS["klog, recent tags"] + "\n")
    document = analyze(tmp_path, text)
    assert [f["labels"]["xid"] for f in findings(document, "GH301")] == ["48"]
    (fell,) = findings(document, "GH302")
    assert fell["severity"] == "critical" and UUID in fell["message"]


def test_a_huge_line_is_read_in_bounded_time():
    line = "XidCriticalError: Xid=79 on Device=" + "a," * 200_000
    assert plugin_xids([line], "p") == ({}, [])


def test_a_benign_xid_from_the_plugin_still_withdraws_the_gpu(tmp_path):
    """Xid 63 (a row remapped) is information in a kernel log; from the plugin, the GPU left what pods can be given."""
    document = analyze(tmp_path, FORMATS["klog, recent tags"].replace("Xid=79", "Xid=63") + "\n")
    (found,) = findings(document, "GH301")
    assert (found["severity"], found["impact"]) == ("warning", "degraded")
    assert found["labels"]["decided"] == "device-plugin-gpu-unhealthy"
