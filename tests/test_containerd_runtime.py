"""A Kubernetes pod that does not run under the NVIDIA runtime (GH802): containerd's CRI configuration (config.toml in
each version's layout, ``crictl info``) read for whether an NVIDIA runtime is configured and whether it is the default,
the device plugin's hint that the runtime is not in use, and the API server's refusal of a RuntimeClass that does not
exist. The configurations are in tests/data/listings (README.md there says how each was written); the log lines are
the format strings of k8s-device-plugin's internal/plugin/factory.go and of Kubernetes' RuntimeClass admission
plugin, rendered as klog and kubectl print them."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import identify, load
from gpuhealth.model import ParseError, Report, Severity
from gpuhealth.parsers.containerd import parse_containerd_config, parse_crictl_info
from listings_data import listing

load()

V2_NOT_DEFAULT = "containerd-config/handwritten_v2-nvidia-not-default.toml"
V2_DEFAULT = "containerd-config/handwritten_v2-nvidia-default.toml"
V3_NO_NVIDIA = "containerd-config/handwritten_v3-no-nvidia.toml"
V3_DEFAULT = "containerd-config/handwritten_v3-nvidia-default.toml"
V1_K3S = "containerd-config/handwritten_v1-k3s-no-default.toml"
CRICTL = "crictl-info/handwritten_nvidia-not-default.json"

# k8s-device-plugin internal/plugin/factory.go: the errors after neither NVML nor Tegra was detected in its pod
PLUGIN_LOG = (
    "E1107 09:12:31.101334       1 factory.go:112] Incompatible strategy detected auto\n"
    "E1107 09:12:31.101380       1 factory.go:113] If this is a GPU node, did you configure the NVIDIA Container "
    "Toolkit?\n"
    "E1107 09:12:31.101389       1 factory.go:114] You can check the prerequisites at: "
    "https://github.com/NVIDIA/k8s-device-plugin#prerequisites\n"
    "I1107 09:12:31.101475       1 main.go:346] No devices found. Waiting indefinitely.\n")
HINT_ONLY = ("E1107 09:12:31.101380       1 factory.go:113] If this is a GPU node, did you configure the NVIDIA "
             "Container Toolkit?\n")
# Kubernetes plugin/pkg/admission/runtimeclass/admission.go: "pod rejected: RuntimeClass %q not found", as kubectl
# prints the API server's Forbidden answer
RUNTIMECLASS_MISSING = ('Error from server (Forbidden): error when creating "gpu-pod.yaml": pods "gpu-pod" is '
                        'forbidden: pod rejected: RuntimeClass "nvidia" not found\n')


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(pieces)
    return run_checks(snapshot)


def _gh802(report: Report) -> list:
    return [f for f in report.findings if f.code == "GH802"]


def _lead(report: Report):
    return next(f for f in report.findings if f.severity is not Severity.INFO)


# --------------------------------------------------------------------------- the parser, per layout


@pytest.mark.parametrize("name, runtimes, nvidia, default, implied", [
    (V2_NOT_DEFAULT, ("nvidia", "runc"), ("nvidia",), "runc", False),
    (V2_DEFAULT, ("nvidia", "runc"), ("nvidia",), "nvidia", False),
    (V3_NO_NVIDIA, ("runc",), (), "runc", False),
    (V3_DEFAULT, ("nvidia", "runc"), ("nvidia",), "nvidia", False),
    (V1_K3S, ("nvidia", "runc"), ("nvidia",), "runc", True),  # no default_runtime_name: containerd's own, runc
])
def test_each_layout_gives_runtimes_and_default(name, runtimes, nvidia, default, implied):
    env = parse_containerd_config(listing(name))
    assert env.containerd_runtimes == runtimes
    assert env.containerd_nvidia_runtimes == nvidia
    assert (env.containerd_default_runtime, env.containerd_default_implied) == (default, implied)


def test_a_runtime_is_nvidia_by_its_binary_and_the_legacy_default_table_counts():
    # containerd before 1.4: the default runtime's own table, its options.Runtime the NVIDIA runtime (the layout
    # nvidia-ctk writes with --set-as-default for a legacy config, config_v1.go)
    text = ('[plugins.cri.containerd.default_runtime]\n  runtime_type = "io.containerd.runtime.v1.linux"\n'
            '  [plugins.cri.containerd.default_runtime.options]\n    Runtime = "/usr/bin/nvidia-container-runtime"\n')
    env = parse_containerd_config(text)
    assert env.containerd_default_runtime in env.containerd_nvidia_runtimes
    # a runtime named otherwise that runs the NVIDIA binary, made the default
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "gpu"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu.options]\n'
            '  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')
    env = parse_containerd_config(text)
    assert env.containerd_nvidia_runtimes == ("gpu",) and env.containerd_default_runtime == "gpu"


def test_dotted_keys_comments_and_imports():
    text = ('version = 2\nimports = ["/etc/containerd/conf.d/*.toml",\n  "/etc/containerd/extra.toml"]\n'
            '[plugins."io.containerd.grpc.v1.cri"]\n'
            '  containerd.default_runtime_name = "runc"  # the default\n')
    env = parse_containerd_config(text)
    assert env.containerd_default_runtime == "runc" and env.containerd_runtimes == ()
    assert env.containerd_imports == ("/etc/containerd/conf.d/*.toml", "/etc/containerd/extra.toml")


@pytest.mark.parametrize("text", ["", "version = 2\n[grpc]\n  address = \"/run/containerd/containerd.sock\"\n",
                                  "[plugins.\"io.containerd.grpc.v1.cri\n", "not toml at all ]]]["])
def test_text_without_a_cri_runtime_section_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_containerd_config(text)


def test_crictl_info_gives_the_running_plugins_runtimes():
    env = parse_crictl_info(listing(CRICTL))
    assert env.containerd_config_source == "crictl info"
    assert (env.containerd_runtimes, env.containerd_nvidia_runtimes) == (("nvidia", "runc"), ("nvidia",))
    assert env.containerd_default_runtime == "runc"
    with pytest.raises(ParseError):
        parse_crictl_info('{"status": {}, "config": {"sandboxImage": "x"}}')
    with pytest.raises(ParseError):
        parse_crictl_info("{not json")


def test_pieces_are_recognised_by_content_and_by_command():
    assert identify(listing(V3_DEFAULT)) == "containerd-config"
    assert identify(listing(V1_K3S)) == "containerd-config"
    assert identify(listing(CRICTL)) == "crictl-info"
    session = "$ sudo cat /etc/containerd/config.toml\n" + listing(V2_NOT_DEFAULT)
    assert _gh802(_report(("session.txt", session)))


# --------------------------------------------------------------------------- judging (GH802)


@pytest.mark.parametrize("name", [V2_NOT_DEFAULT, V1_K3S, CRICTL])
def test_nvidia_configured_but_not_default_says_the_pod_needs_the_runtimeclass(name):
    found = _gh802(_report((name, listing(name))))
    assert len(found) == 1 and found[0].severity is Severity.WARNING
    assert "default runtime is still runc" in found[0].message
    commands = [fix.command for fix in found[0].fixes]
    assert "sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default" in commands
    assert any("runtimeClassName: nvidia" in command for command in commands)
    assert found[0].labels.get("decided") == "k8s-runtime-not-nvidia"


def test_no_nvidia_runtime_at_all_says_configure_it():
    found = _gh802(_report((V3_NO_NVIDIA, listing(V3_NO_NVIDIA))))
    assert len(found) == 1 and "no NVIDIA runtime configured" in found[0].message
    assert "sudo nvidia-ctk runtime configure --runtime=containerd" in [f.command for f in found[0].fixes]


@pytest.mark.parametrize("name", [V2_DEFAULT, V3_DEFAULT])
def test_nvidia_as_default_raises_nothing(name):
    report = _report((name, listing(name)))
    assert not _gh802(report)
    assert not [f for f in report.findings if f.severity is not Severity.INFO]


def test_a_config_that_imports_drop_ins_is_not_judged_on_its_own():
    # nvidia-ctk 1.17+ writes its runtime to /etc/containerd/conf.d/99-nvidia.toml and an imports line
    text = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n' + listing(V3_NO_NVIDIA).split("\n", 1)[1]
    assert not _gh802(_report(("config.toml", text)))


def test_the_device_plugins_hint_leads_with_gh802():
    assert _lead(_report(("plugin.log", HINT_ONLY))).code == "GH802"
    report = _report(("plugin.log", PLUGIN_LOG), (V2_NOT_DEFAULT, listing(V2_NOT_DEFAULT)))
    lead = _lead(report)
    assert lead.code == "GH802" and lead.severity is Severity.CRITICAL  # the pods' symptom beside the config


def test_runtimeclass_not_found_names_the_cause_and_its_fix():
    lead = _lead(_report(("kubectl.txt", RUNTIMECLASS_MISSING)))
    assert lead.code == "GH802" and lead.severity is Severity.CRITICAL
    assert "kubectl get runtimeclass" in [fix.command for fix in lead.fixes]
    # another RuntimeClass's name is no GPU matter
    other = 'pods "web" is forbidden: pod rejected: RuntimeClass "gvisor" not found\n'
    assert not _gh802(_report(("kubectl.txt", other)))


def test_end_to_end_through_analyze_stdin(tmp_path):
    from click.testing import CliRunner

    from gpuhealth.cli import main

    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=listing(V1_K3S))
    assert '"GH802"' in result.output and "default runtime is still runc" in result.output
    result = CliRunner().invoke(main, ["analyze", "--format", "json", "-"], input=listing(V3_DEFAULT))
    assert '"GH802"' not in result.output


# --------------------------------------------------------------------------- the node and the pod (kubectl)

NODE_NO_GPU = "kubectl-describe-node/handwritten_gpu-node-no-gpu.txt"
NODE_EIGHT = "kubectl-describe-node/handwritten_gpu-node-eight-gpus.txt"
POD = "pod-manifest/k8s-device-plugin-readme_gpu-pod.yaml"
POD_NVIDIA = "pod-manifest/handwritten_gpu-pod-runtimeclass-nvidia.yaml"


def test_describe_node_gives_the_gpus_it_advertises():
    from gpuhealth.parsers.kube import parse_describe_node

    none = parse_describe_node(listing(NODE_NO_GPU))
    assert (none.k8s_node_gpus, none.k8s_node_nvidia_labels) == (0, True)
    assert none.k8s_node_runtime == "containerd://1.7.22"
    assert parse_describe_node(listing(NODE_EIGHT)).k8s_node_gpus == 8
    # the README's block: a renamed share (renameByDefault) and MIG devices are GPUs the node offers too
    assert parse_describe_node("...\nCapacity:\n  nvidia.com/gpu.shared: 80\n...\n").k8s_node_gpus == 80
    mig = "Allocatable:\n  cpu: 8\n  nvidia.com/mig-1g.5gb: 7\n  pods: 110\n"
    assert parse_describe_node(mig).k8s_node_gpus == 7
    with pytest.raises(ParseError):
        parse_describe_node("Name: gpu-worker-1\nRoles: <none>\n")


def test_the_pod_manifest_gives_its_gpu_request_and_runtimeclass():
    from gpuhealth.parsers.kube import parse_pod_manifest

    pod = parse_pod_manifest(listing(POD))  # "nvidia.com/gpu: 1 # requesting 1 GPU", a toleration's key beside it
    assert (pod.k8s_pod_requests_gpu, pod.k8s_pod_runtime_class) == (True, "")
    assert parse_pod_manifest(listing(POD_NVIDIA)).k8s_pod_runtime_class == "nvidia"
    with pytest.raises(ParseError):
        parse_pod_manifest("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\n"
                           "handler: nvidia\n")


def test_a_gpu_node_that_advertises_no_gpu_points_to_the_device_plugin():
    (found,) = _gh802(_report((NODE_NO_GPU, listing(NODE_NO_GPU))))
    assert found.severity is Severity.WARNING and "advertises no nvidia.com/gpu" in found.message
    assert found.labels.get("decided") == "device-plugin-missing"
    assert any("nvidia-device-plugin" in fix.command for fix in found.fixes)
    assert not _gh802(_report((NODE_EIGHT, listing(NODE_EIGHT))))


def test_a_pod_without_runtimeclass_beside_runc_as_default_is_named():
    session = ("$ cat /etc/containerd/config.toml\n" + listing(V2_NOT_DEFAULT) + "$ cat gpu-pod.yaml\n" + listing(POD))
    (found,) = _gh802(_report(("session.txt", session)))
    assert "names no runtimeClassName" in found.message
    assert any("runtimeClassName: not set" in line for e in found.evidence for line in e.lines)
    # the same pod naming RuntimeClass nvidia selects the runtime: nothing to say
    session = ("$ cat /etc/containerd/config.toml\n" + listing(V2_NOT_DEFAULT) + "$ cat gpu-pod.yaml\n"
               + listing(POD_NVIDIA))
    assert not _gh802(_report(("session.txt", session)))


# --------------------------------------------------------------------------- the reporter's words


@pytest.mark.parametrize("words", [
    "The pod does not use the nvidia runtime, so nvidia-smi is missing inside it.",
    "containerd's default runtime is still runc on the GPU node.",
])
def test_the_runtime_told_in_words_leads_as_a_warning(words):
    lead = _lead(_report(("notes.txt", words + "\n")))
    assert lead.code == "GH802" and lead.severity is Severity.WARNING
    assert lead.labels.get("reported") == "words"


def test_a_config_with_nvidia_as_default_overrules_the_words():
    words = "containerd's default runtime is still runc on the GPU node.\n"
    assert not _gh802(_report(("notes.txt", words), (V2_DEFAULT, listing(V2_DEFAULT))))
    assert _gh802(_report(("notes.txt", words), (V2_NOT_DEFAULT, listing(V2_NOT_DEFAULT))))


# --------------------------------------------------------------------------- the live host reads the same fields


def test_a_disabled_cri_plugin_is_no_runtime_configuration():
    # Docker's packaged /etc/containerd/config.toml: the CRI plugin is off, so no pod runs on this containerd
    with pytest.raises(ParseError, match="CRI plugin is disabled"):
        parse_containerd_config('disabled_plugins = ["cri"]\n[plugins.cri.containerd]\n'
                                '  default_runtime_name = "runc"\n')


def test_live_check_reads_containerds_configuration_as_analyze_does():
    from gpuhealth.collect.containers import _containerd_runtimes
    from hostcases import FakeHost

    k3s = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
    live = _containerd_runtimes(FakeHost({"files": {k3s: listing(V1_K3S)}}))
    pasted = parse_containerd_config(listing(V1_K3S), k3s)
    assert live["containerd_default_runtime"] == pasted.containerd_default_runtime == "runc"
    assert live["containerd_nvidia_runtimes"] == ("nvidia",) and live["containerd_config_source"] == k3s
    docker_only = {"files": {"/etc/containerd/config.toml": 'disabled_plugins = ["cri"]\n'}}
    assert _containerd_runtimes(FakeHost(docker_only)) == {}
    assert _containerd_runtimes(FakeHost({})) == {}


def test_a_file_mixing_log_lines_and_the_configuration_is_not_taken_whole():
    """The configuration's reader would swallow the device plugin's lines: a text that is not all TOML is left to the
    line readers (a session's `cat` and a markdown fence are split off first and read as the file)."""
    mixed = PLUGIN_LOG + listing(V2_DEFAULT)
    assert identify(mixed) != "containerd-config"
    assert _lead(_report(("notes.txt", mixed))).code == "GH802"
    fenced = "Our config:\n\n```toml\n" + listing(V2_NOT_DEFAULT) + "```\n"
    assert any("default runtime is still runc" in f.message for f in _gh802(_report(("post.md", fenced))))
    assert identify("...\n" + listing(V3_DEFAULT) + "...\n") == "containerd-config"  # an elided paste


@pytest.mark.parametrize("value, default, implied", [
    ('"nvidia"  # set by nvidia-ctk', "nvidia", False),
    ("nvidia", "nvidia", False),  # a hand edit without quotes
    ('""', "runc", True),  # empty: containerd's own default
])
def test_the_default_runtime_line_as_people_write_it(value, default, implied):
    text = ('[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = ' + value + "\n"
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
            '  BinaryName = "/usr/bin/nvidia-container-runtime"\n')
    env = parse_containerd_config(text)
    assert (env.containerd_default_runtime, env.containerd_default_implied) == (default, implied)


# --------------------------------------------------------------------------- the GPU operator's CDI mode

# the GPU operator's toolkit with CDI on (its default since v25.10): the CRI plugin's enable_cdi, its three runtimes
# (nvidia-ctk-installer operator.go: nvidia, nvidia-cdi, nvidia-legacy) and runc left the default
# (gpu-operator controllers/object_controls.go transformToolkitCtrForCDI sets NVIDIA_RUNTIME_SET_AS_DEFAULT=false)
OPERATOR_CDI = ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
                '  [plugins."io.containerd.grpc.v1.cri".containerd]\n    default_runtime_name = "runc"\n'
                + "".join(f'    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{name}.options]\n'
                          f'      BinaryName = "/usr/local/nvidia/toolkit/{binary}"\n'
                          for name, binary in (("nvidia", "nvidia-container-runtime"),
                                               ("nvidia-cdi", "nvidia-container-runtime.cdi"),
                                               ("nvidia-legacy", "nvidia-container-runtime.legacy"))))


def test_the_operators_cdi_mode_with_runc_as_default_is_no_finding():
    env = parse_containerd_config(OPERATOR_CDI)
    assert env.cri_cdi_enabled and env.containerd_default_runtime == "runc"
    assert not _gh802(_report(("config.toml", OPERATOR_CDI)))
    # the same runtimes without CDI in containerd: pods that name no RuntimeClass get no GPU
    without = OPERATOR_CDI.replace("  enable_cdi = true\n", "")
    assert not parse_containerd_config(without).cri_cdi_enabled
    assert any("default runtime is still runc" in f.message for f in _gh802(_report(("config.toml", without))))
    # CDI on but only a hand-made nvidia runtime: not the operator's CDI mode, judged as before
    hand = OPERATOR_CDI.split('    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi')[0]
    assert _gh802(_report(("config.toml", hand)))


def test_crictl_info_gives_cdi_enabled():
    text = listing(CRICTL)
    assert not parse_crictl_info(text).cri_cdi_enabled
    assert parse_crictl_info(text.replace('"enableCDI": false', '"enableCDI": true')).cri_cdi_enabled
