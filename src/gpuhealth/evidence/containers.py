"""Evidence kinds for the container runtime (GH802): ``docker info``, ``/etc/docker/daemon.json``, containerd's
``config.toml`` and ``crictl info``.

They fill the ``host_env`` fields live ``check`` fills from the same two sources (``collect/containers.py``):

- ``docker info`` (https://docs.docker.com/reference/cli/docker/system/info/) is the *running* daemon: its
  ``Runtimes:`` line says whether ``nvidia`` is registered now, and ``Default Runtime:``, ``Server Version:``,
  ``Cgroup Driver``/``Cgroup Version`` and its ``WARNING`` lines are kept beside it;
- ``daemon.json`` (https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file) is what the daemon
  reads when it starts: ``"runtimes": {"nvidia": {"path": ...}}`` is what ``nvidia-ctk runtime configure
  --runtime=docker`` writes (NVIDIA Container Toolkit install guide,
  https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html). A file that is not
  valid JSON is a fact of its own (dockerd refuses to start on it), never a parse failure.

containerd's configuration (``/etc/containerd/config.toml``, ``containerd config dump``), ``crictl info`` and CRI-O's
(``/etc/crio/crio.conf``, a ``crio.conf.d`` drop-in, ``crio status config``) say which runtime a Kubernetes pod runs
under when it names no RuntimeClass, and whether an NVIDIA runtime is configured at all (parsers/containerd.py, with
its sources).

Recognisers look at the head of the text only and never raise.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.evidence.registry import evidence_kind
from gpuhealth.model import HostEnvironment, ParseError

_HEAD = 8192
# keys of `docker info`'s text form; two of them on their own lines make a docker info report (or its grep)
_INFO_KEYS = ("Runtimes:", "Default Runtime:", "Server Version:", "Cgroup Driver:", "Cgroup Version:",
              "Storage Driver:", "Docker Root Dir:", "Containers:", "Logging Driver:")
# keys only a dockerd configuration file has (dockerd's daemon configuration file reference)
_DAEMON_KEYS = ('"runtimes"', '"default-runtime"', '"exec-opts"', '"data-root"', '"log-driver"', '"storage-driver"',
                '"registry-mirrors"', '"insecure-registries"', '"live-restore"', '"cgroup-parent"', '"features"')


def _looks_like_docker_info(text: str) -> bool:
    head = text[:_HEAD]
    if head.lstrip().startswith("{"):
        return '"runc"' in head and '"path"' in head  # {{json .Runtimes}}: {"runc": {"path": "runc"}, ...}
    seen = {key for line in head.splitlines()[:120] for key in _INFO_KEYS if line.strip().startswith(key)}
    return len(seen) >= 2 and ("Runtimes:" in seen or "Default Runtime:" in seen or "Server Version:" in seen)


@evidence_kind("docker-info", commands=(r"docker\s+(?:system\s+)?info\b",), priority=372,
               recognise=_looks_like_docker_info)
def _docker_info(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.host_env import parse_docker_info

    return {"host_env": parse_docker_info(text)}


def _looks_like_daemon_json(text: str) -> bool:
    """A JSON object with dockerd's keys, that ends the text: a file followed by other lines (a device plugin's log
    pasted under it) is left to the readers of those lines, which the file's reader would swallow as invalid JSON."""
    head = text[:_HEAD].lstrip()
    tail = [line.strip() for line in text[-_HEAD:].splitlines() if line.strip().strip(".…`")]
    return (head.startswith("{") and any(key in head for key in _DAEMON_KEYS) and '"Runtimes"' not in head
            and bool(tail) and tail[-1].endswith("}"))


@evidence_kind("daemon-json", commands=(r"(?:cat|less|more|head|tail|vi|vim|nano)\s+\S*daemon\.json\b",),
               priority=371, recognise=_looks_like_daemon_json)
def _daemon_json(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.host_env import parse_daemon_json

    try:
        runtimes, _default = parse_daemon_json(text)  # the running daemon's default is docker info's to say
    except ParseError as exc:  # dockerd will not start on it: a finding (GH802), not an unread piece
        return {"host_env": HostEnvironment(docker=True, daemon_json_error=str(exc)[:200])}
    return {"host_env": HostEnvironment(docker=True, daemon_json_runtimes=runtimes)}


# the CRI plugin's containerd table, in each configuration version's spelling (parsers/containerd.py)
_CRI_TABLES = ('plugins."io.containerd.grpc.v1.cri".containerd', "plugins.'io.containerd.cri.v1.runtime'.containerd",
               'plugins."io.containerd.cri.v1.runtime".containerd', "plugins.cri.containerd")


def _toml_line(line: str) -> bool:
    """A line of a TOML file as containerd's configuration holds it: a table header, ``key = value``, a comment, an
    array's item or end, a k3s template's ``{{ ... }}``."""
    if line.startswith(("[", "#", "]", "{{", '"', "'")):
        return True
    key, equals, _ = line.partition("=")
    return bool(equals) and bool(key.strip()) and len(key) <= 200 and all(
        c.isalnum() or c in "._-\"' " for c in key)


def _looks_like_containerd_config(text: str) -> bool:
    """containerd's tables or its default_runtime_name key, in a text that is all TOML (an elision "..." aside): a
    file that quotes the configuration amid sentences or log lines is left to the readers of those lines, which a
    configuration reader would swallow (a session's `cat /etc/containerd/config.toml` and a markdown fence are split
    off before this and read as the file)."""
    head = text[:_HEAD * 4]
    if head.lstrip().startswith("{") or not (any(table in head for table in _CRI_TABLES) or
                                             "default_runtime_name" in head):
        return False
    lines = (line.strip() for line in head.splitlines()[:400])
    return all(_toml_line(line) for line in lines if line and line.strip(".…") and not line.startswith("```"))


@evidence_kind("containerd-config",
               commands=(r"(?:cat|less|more|head|tail|vi|vim|nano)\s+\S*containerd\S*\.toml\b",
                         r"containerd\s+config\s+dump\b"),
               priority=373, recognise=_looks_like_containerd_config)
def _containerd_config(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.containerd import parse_containerd_config

    return {"host_env": parse_containerd_config(text, source)}


def _looks_like_crio_config(text: str) -> bool:
    """CRI-O's [crio.runtime] tables in a text that is all TOML (as containerd's configuration above)."""
    from gpuhealth.parsers.containerd import is_crio_config

    head = text[:_HEAD * 4]
    if head.lstrip().startswith("{") or not is_crio_config(head):
        return False
    lines = (line.strip() for line in head.splitlines()[:400])
    return all(_toml_line(line) for line in lines if line and line.strip(".…") and not line.startswith("```"))


@evidence_kind("crio-config",
               commands=(r"(?:cat|less|more|head|tail|vi|vim|nano)\s+\S*crio\S*\.(?:conf|toml)\b",
                         r"(?:cat|less|more|head|tail)\s+\S*crio\.conf\.d/",
                         r"crio(?:-status|\s+status)?\s+config\b"),
               priority=367, recognise=_looks_like_crio_config)
def _crio_config(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.containerd import parse_crio_config

    return {"host_env": parse_crio_config(text, source)}


def _looks_like_crictl_info(text: str) -> bool:
    head = text[:_HEAD * 8]
    return head.lstrip().startswith("{") and '"defaultRuntimeName"' in head


@evidence_kind("crictl-info", commands=(r"crictl\s+(?:--\S+\s+)*info\b",), priority=374,
               recognise=_looks_like_crictl_info)
def _crictl_info(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.containerd import parse_crictl_info

    return {"host_env": parse_crictl_info(text)}


# `kubectl describe node`'s sections (flush left), of which a description shows several (parsers/kube.py)
_NODE_KEYS = ("Name:", "Roles:", "Labels:", "Annotations:", "Taints:", "Conditions:", "Addresses:", "Capacity:",
              "Allocatable:", "System Info:", "Allocated resources:", "Non-terminated Pods:")


def _looks_like_describe_node(text: str) -> bool:
    lines = text[:_HEAD * 4].splitlines()[:400]
    seen = {key for line in lines for key in _NODE_KEYS if line.startswith(key)}
    return ("Capacity:" in seen or "Allocatable:" in seen) and len(seen) >= 3


@evidence_kind("kubectl-describe-node", commands=(r"kubectl\s+(?:\S+\s+)*describe\s+(?:nodes?|no)\b",), priority=369,
               recognise=_looks_like_describe_node)
def _describe_node(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.kube import parse_describe_node

    return {"host_env": parse_describe_node(text, source)}


def _looks_like_describe_pod(text: str) -> bool:
    from gpuhealth.parsers.kube import looks_like_describe_pod

    return looks_like_describe_pod(text)


@evidence_kind("kubectl-describe-pod", commands=(r"kubectl\s+(?:\S+\s+)*describe\s+(?:pods?|po)\b",), priority=366,
               recognise=_looks_like_describe_pod)
def _describe_pod(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.kube import parse_describe_pod

    return {"host_env": parse_describe_pod(text, source)}


MAX_MANIFEST_LINES = 5000
_WORKLOADS = ("kind: Pod", "kind: Deployment", "kind: Job", "kind: StatefulSet", "kind: DaemonSet", "kind: ReplicaSet",
              "kind: CronJob")


def _looks_like_pod_manifest(text: str) -> bool:
    lines = [line.strip() for line in text[:_HEAD * 2].splitlines()[:300]]
    return (any(line.startswith("apiVersion:") for line in lines) and any(line in _WORKLOADS for line in lines)
            and any(line.lstrip("- ").startswith("containers:") for line in lines))


@evidence_kind("pod-manifest",
               commands=(r"kubectl\s+(?:\S+\s+)*get\s+(?:pods?|po|deploy\S*|jobs?|statefulsets?|daemonsets?)\b.*"
                         r"-o\s*=?\s*yaml\b",
                         r"(?:cat|less|more|head|tail|vi|vim|nano)\s+\S+\.ya?ml\b"),
               priority=368, recognise=_looks_like_pod_manifest)
def _pod_manifest(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.evidence.facts import env_lines
    from gpuhealth.parsers.kube import parse_pod_manifest

    # its containers' env entries are the visibility variables they run with (NVIDIA_VISIBLE_DEVICES: none), as in
    # any program text that sets them (GH608)
    return {"host_env": parse_pod_manifest(text, source), **env_lines(text.splitlines()[:MAX_MANIFEST_LINES])}
