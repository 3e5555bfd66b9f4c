"""`docker info` and /etc/docker/daemon.json read as machine evidence for the container runtime (GH802): the running
daemon's Runtimes line decides whether the nvidia runtime is registered, daemon.json whether it was configured and the
daemon not restarted since, and a daemon.json that is not JSON is a finding of its own (dockerd will not start on it).
The listings are in tests/data/listings (SOURCE.md and README.md there say where each comes from)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import KINDS, identify, load
from gpuhealth.model import ParseError, Report, Severity
from gpuhealth.parsers.host_env import parse_docker_info
from listings_data import listing

load()

GREP_RUNC_ONLY = "docker-info/docker-for-linux-1531_grep-runtime.txt"  # daemon.json names nvidia, daemon lists runc
WHOLE_REGISTERED = "docker-info/handwritten_nvidia-registered.txt"
DAEMON_NVIDIA = "daemon-json/docker-for-linux-1531_nvidia-default.json"
DAEMON_INVALID = "daemon-json/handwritten_trailing-comma.json"
# nvidia-smi -L of one GPU, written here: the checks judge containers only on a host with a GPU
SMI_L = ("nvidia-smi -L", "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5c0f3c1e-9d7a-4a52-8d53-2f1f7a3f0c11)\n")


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(pieces)
    return run_checks(snapshot)


def _gh802(report: Report) -> list:
    return [f for f in report.findings if f.code == "GH802"]


def test_whole_docker_info_gives_runtimes_version_and_cgroup_not_its_warnings():
    env = parse_docker_info(listing(WHOLE_REGISTERED))
    assert env.docker_runtimes == ("io.containerd.runc.v2", "nvidia", "runc")
    assert env.docker_runtimes_source == "docker info"
    assert (env.docker_default_runtime, env.docker_server_version) == ("runc", "24.0.7")
    assert (env.docker_cgroup_driver, env.docker_cgroup_version) == ("systemd", "2")
    # no check judges docker's WARNING lines: the parser does not keep them (analyze reads them as pasted lines)
    assert KINDS["docker-info"].parse(listing(WHOLE_REGISTERED), "docker info") == KINDS["docker-info"].parse(
        "\n".join(line for line in listing(WHOLE_REGISTERED).splitlines() if "WARNING:" not in line), "docker info")


def test_grepped_docker_info_is_recognised_and_read():
    text = listing(GREP_RUNC_ONLY)
    assert identify(text) == "docker-info"
    env = KINDS["docker-info"].parse(text, "docker info")["host_env"]
    assert env.docker_runtimes == ("io.containerd.runc.v2", "runc") and env.docker_default_runtime == "runc"
    assert not hasattr(env, "docker_warnings")


def test_docker_info_format_json_runtimes():
    env = parse_docker_info('{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}')
    assert env.docker_runtimes == ("nvidia", "runc")


def test_docker_info_without_its_lines_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_docker_info("Client:\n Version: 24.0.7\n Context: default\n")


def test_daemon_json_names_its_runtimes():
    text = listing(DAEMON_NVIDIA)
    assert identify(text) == "daemon-json"
    env = KINDS["daemon-json"].parse(text, "/etc/docker/daemon.json")["host_env"]
    assert env.daemon_json_runtimes == ("nvidia",) and env.daemon_json_error is None and env.docker


def test_unregistered_runtime_is_a_finding_with_configure_and_restart():
    found = _gh802(_report(("docker info", listing(GREP_RUNC_ONLY)), SMI_L))
    assert len(found) == 1 and "no nvidia runtime registered" in found[0].message
    assert found[0].severity is Severity.WARNING
    commands = [f.command for f in found[0].fixes]
    assert commands == ["sudo nvidia-ctk runtime configure --runtime=docker", "sudo systemctl restart docker"]
    assert any("runtimes: io.containerd.runc.v2, runc" in line for e in found[0].evidence for line in e.lines)


def test_runtime_in_daemon_json_but_not_running_asks_only_for_a_restart():
    found = _gh802(_report(("docker info", listing(GREP_RUNC_ONLY)),
                           ("cat /etc/docker/daemon.json", listing(DAEMON_NVIDIA)), SMI_L))
    assert len(found) == 1 and "not restarted" in found[0].message
    assert [f.command for f in found[0].fixes] == ["sudo systemctl restart docker"]
    assert any(e.source == "/etc/docker/daemon.json" for e in found[0].evidence)


def test_registered_runtime_rules_the_cause_out():
    report = _report(("docker info", listing(WHOLE_REGISTERED)), SMI_L)
    assert not _gh802(report)
    assert "GH802" not in {s.code for s in report.skipped}  # judged, not skipped: the runtime is there


def test_registered_runtime_with_the_toolkit_installed_says_nothing():
    report = _report(("docker info", listing(WHOLE_REGISTERED)), SMI_L,
                     ("nvidia-ctk --version", "NVIDIA Container Toolkit CLI version 1.14.3\ncommit: 1eb5a30\n"))
    assert not _gh802(report)


def test_invalid_daemon_json_is_a_finding_not_a_crash():
    text = listing(DAEMON_INVALID)
    assert identify(text) == "daemon-json"
    env = KINDS["daemon-json"].parse(text, "/etc/docker/daemon.json")["host_env"]
    assert env.daemon_json_error and "not JSON" in env.daemon_json_error
    found = _gh802(_report(("cat /etc/docker/daemon.json", text)))
    assert len(found) == 1 and "not valid JSON" in found[0].message and found[0].severity is Severity.WARNING
    assert "sudo systemctl restart docker" in [f.command for f in found[0].fixes]


def test_invalid_daemon_json_beside_docker_info_is_the_one_finding():
    """The daemon has no nvidia runtime because its daemon.json does not parse: that is the finding, and no second one
    asks for `nvidia-ctk runtime configure`, which would fail on the same file."""
    found = _gh802(_report(("docker info", listing(GREP_RUNC_ONLY)),
                           ("cat /etc/docker/daemon.json", listing(DAEMON_INVALID)), SMI_L))
    assert len(found) == 1 and "not valid JSON" in found[0].message
    assert all("nvidia-ctk" not in f.command for f in found[0].fixes)


def test_other_json_is_not_daemon_json():
    assert identify('{"name": "x", "version": "1.0"}') != "daemon-json"


def test_toolkit_known_absent_still_asks_for_its_install():
    """On a host where nvidia-ctk was looked for and is not there (live check), a daemon without the runtime means
    the toolkit must be installed first: `nvidia-ctk runtime configure` alone would not exist."""
    from dataclasses import replace

    snapshot, _ = analyze_texts([("docker info", listing(GREP_RUNC_ONLY)), SMI_L])
    known = replace(snapshot, unavailable={k: v for k, v in snapshot.unavailable.items() if k != "env_nvidia_ctk"})
    found = _gh802(run_checks(known))
    assert len(found) == 1 and "Toolkit is not" in found[0].message
    assert any("install" in f.command and "nvidia-container-toolkit" in f.command for f in found[0].fixes)


# docker's own error, as moby prints it (daemon: "unknown or invalid runtime name: %s"), written here
UNKNOWN_RUNTIME = ("docker run --rm --runtime=nvidia ubuntu nvidia-smi",
                   "docker: Error response from daemon: unknown or invalid runtime name: nvidia.\n"
                   "See 'docker run --help'.\n")


def test_error_beside_docker_info_and_daemon_json_leads_with_the_restart():
    """No GPU listing in the paste: docker info's Runtimes still decide, and the machine output picks the fix (the
    runtime is configured, the daemon was not restarted) over the line's generic install-and-configure."""
    report = _report(UNKNOWN_RUNTIME, ("docker info", listing(GREP_RUNC_ONLY)),
                     ("cat /etc/docker/daemon.json", listing(DAEMON_NVIDIA)))
    found = _gh802(report)
    assert found and "not restarted" in found[0].message
    assert [f.command for f in found[0].fixes] == ["sudo systemctl restart docker"]


def test_a_bus_without_nvidia_gpu_keeps_docker_quiet():
    intel = ("lspci -nn", "00:02.0 VGA compatible controller [0300]: Intel Corporation UHD Graphics 630 [8086:3e92]\n")
    assert not _gh802(_report(("docker info", listing(GREP_RUNC_ONLY)), intel))
