"""CRI-O's configuration read into the facts GH802 judges for containerd: [crio.runtime] default_runtime and the
[crio.runtime.runtimes.<name>] tables (crio.conf(5)), the drop-ins of /etc/crio/crio.conf.d that nvidia-ctk writes
(nvidia-container-toolkit pkg/config/engine/crio/crio.go), ``crio status config`` (the daemon's merged configuration),
the live check's reading of the same files and of CRI-O's OCI hooks directories, and CRI-O's refusal of a RuntimeClass
handler it does not have (cri-o internal/oci/oci.go). The configurations are in tests/data/listings/crio-config
(README.md there says how each was written)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import identify, load
from gpuhealth.model import ParseError, Report, Severity
from gpuhealth.parsers.containerd import parse_crio_config, parse_crio_configs
from listings_data import listing

load()

MAIN = "crio-config/handwritten_crio-conf-crun-only.conf"
DROP_IN = "crio-config/handwritten_99-nvidia-default.toml"
STATUS = "crio-config/handwritten_status-config-nvidia-not-default.toml"
STATUS_COMMAND = "$ sudo crio status config\n"
# cri-o internal/oci/oci.go ValidateRuntimeHandler: "failed to find runtime handler %s from runtime list %v", as the
# kubelet's event prints it under `kubectl describe pod`
HANDLER_MISSING = ("  Warning  FailedCreatePodSandBox  3s (x9 over 2m)  kubelet  Failed to create pod sandbox: "
                   "rpc error: code = Unknown desc = failed to find runtime handler nvidia from runtime list "
                   "map[crun:0xc000a1e000 runc:0xc000a1e0a0]\n")


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(pieces)
    return run_checks(snapshot)


def _gh802(report: Report) -> list:
    return [f for f in report.findings if f.code == "GH802"]


def _without_nvidia(text: str) -> str:
    """The merged configuration without its nvidia runtime table."""
    head, _, rest = text.partition("      [crio.runtime.runtimes.nvidia]\n")
    return head + rest[rest.index("      [crio.runtime.runtimes.runc]"):]


def test_each_file_gives_the_runtimes_the_default_and_the_engine():
    main = parse_crio_config(listing(MAIN))
    assert (main.containerd_runtimes, main.containerd_nvidia_runtimes) == (("crun", "runc"), ())
    assert (main.containerd_default_runtime, main.cri_engine) == ("crun", "cri-o")
    assert main.containerd_imports == ("/etc/crio/crio.conf.d/*",)  # the drop-ins are still to be read
    drop_in = parse_crio_config(listing(DROP_IN))
    assert drop_in.containerd_nvidia_runtimes == ("nvidia",) and drop_in.containerd_default_runtime == "nvidia"
    merged = parse_crio_config(listing(STATUS), "session.txt: $ sudo crio status config")
    assert merged.containerd_nvidia_runtimes == ("nvidia",) and merged.containerd_default_runtime == "crun"
    assert merged.containerd_imports == ()  # the daemon's configuration holds its drop-ins


def test_drop_ins_override_the_main_file_in_order():
    env = parse_crio_configs((listing(MAIN), listing(DROP_IN)), "/etc/crio/crio.conf", merged=True)
    assert env.containerd_default_runtime == "nvidia" and env.containerd_nvidia_runtimes == ("nvidia",)


def test_an_unset_default_and_the_legacy_runtime_key():
    env = parse_crio_configs(('[crio.runtime]\n[crio.runtime.runtimes.runc]\nruntime_path = ""\n',), "x", merged=True)
    assert env.containerd_default_implied and "nvidia" not in env.containerd_default_runtime
    # before CRI-O 1.14 the default runtime was a program path in [crio.runtime]
    old = parse_crio_configs(('[crio.runtime]\nruntime = "/usr/bin/nvidia-container-runtime"\n',), "x", merged=True)
    assert old.containerd_default_runtime in old.containerd_nvidia_runtimes


@pytest.mark.parametrize("text", ["", "[crio]\nroot = \"/var/lib/containers/storage\"\n", "[crio.runtime\n"])
def test_text_without_a_runtime_table_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_crio_config(text)


def test_recognised_by_content_and_by_command():
    assert identify(listing(MAIN)) == "crio-config"
    assert identify(listing(STATUS)) == "crio-config"
    assert identify("containerd says\n" + listing(MAIN)) != "crio-config"  # not all TOML: left to the line readers


def test_merged_configuration_with_nvidia_not_default_says_the_pod_needs_the_runtimeclass():
    (found,) = _gh802(_report(("session.txt", STATUS_COMMAND + listing(STATUS))))
    assert found.severity is Severity.WARNING and "CRI-O's default runtime is still crun" in found.message
    commands = [fix.command for fix in found.fixes]
    assert "sudo nvidia-ctk runtime configure --runtime=crio --set-as-default" in commands
    assert "sudo systemctl restart crio" in commands
    assert not any("containerd" in command for command in commands)
    assert found.labels.get("decided") == "k8s-runtime-not-nvidia"


def test_merged_configuration_without_nvidia_says_configure_it():
    (found,) = _gh802(_report(("session.txt", STATUS_COMMAND + _without_nvidia(listing(STATUS)))))
    assert "CRI-O has no NVIDIA runtime configured" in found.message and "OCI hook" in found.message
    assert found.labels.get("decided") == "container-toolkit-missing"


def test_a_healthy_configuration_and_a_lone_file_raise_nothing():
    healthy = listing(STATUS).replace('default_runtime = "crun"', 'default_runtime = "nvidia"')
    report = _report(("session.txt", STATUS_COMMAND + healthy))
    assert not [f for f in report.findings if f.severity is not Severity.INFO]
    # crio.conf alone: a drop-in CRI-O reads after it may add the nvidia runtime and make it the default
    assert not _gh802(_report(("crio.conf", listing(MAIN))))
    assert not _gh802(_report(("99-nvidia.toml", listing(DROP_IN))))


def test_cri_os_refusal_of_the_nvidia_handler_leads_with_its_fix():
    lead = next(f for f in _report(("events.txt", HANDLER_MISSING)).findings if f.severity is not Severity.INFO)
    assert lead.code == "GH802" and lead.severity is Severity.CRITICAL
    assert "sudo nvidia-ctk runtime configure --runtime=crio --set-as-default" in [f.command for f in lead.fixes]


def test_live_check_merges_the_drop_ins_and_honours_the_oci_hook():
    from gpuhealth.collect.containers import _containerd_runtimes, _crio_runtimes
    from hostcases import FakeHost

    spec = {"files": {"/etc/crio/crio.conf": listing(MAIN), "/etc/crio/crio.conf.d/99-nvidia.toml": listing(DROP_IN)},
            "listings": {"/etc/crio/crio.conf.d": ["99-nvidia.toml"]}}
    live = _crio_runtimes(FakeHost(spec))
    assert live["containerd_default_runtime"] == "nvidia" and live["cri_engine"] == "cri-o"
    assert live["containerd_imports"] == () and live["cri_nvidia_hook"] == ""
    assert _containerd_runtimes(FakeHost(spec)) == {}  # no containerd here: the probe falls to CRI-O
    hook = "/usr/share/containers/oci/hooks.d"
    bare = {"files": {"/etc/crio/crio.conf": listing(MAIN)}, "listings": {hook: ["oci-nvidia-hook.json"]}}
    live = _crio_runtimes(FakeHost(bare))
    assert live["containerd_nvidia_runtimes"] == () and live["cri_nvidia_hook"] == f"{hook}/oci-nvidia-hook.json"
    assert _crio_runtimes(FakeHost({})) == {}


def test_live_crio_without_runtime_or_hook_is_judged_and_with_the_hook_is_not():
    from gpuhealth.checks.environment import _containerd_runtime
    from gpuhealth.collect.containers import _crio_runtimes
    from gpuhealth.model import HostEnvironment, Snapshot
    from hostcases import FakeHost

    for names, raised in (([], True), (["oci-nvidia-hook.json"], False)):
        spec = {"files": {"/etc/crio/crio.conf": listing(MAIN)},
                "listings": {"/usr/share/containers/oci/hooks.d": names}}
        env = HostEnvironment(**_crio_runtimes(FakeHost(spec)))
        snapshot = Snapshot(host_env=env, unavailable={"pci_devices": "not read"})
        assert bool(list(_containerd_runtime(snapshot, env))) is raised


def test_end_to_end_through_analyze_stdin():
    from click.testing import CliRunner

    from gpuhealth.cli import main

    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=STATUS_COMMAND + listing(STATUS))
    assert '"GH802"' in result.output and "default runtime is still crun" in result.output
