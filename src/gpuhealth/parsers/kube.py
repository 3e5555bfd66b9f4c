"""Kubernetes objects as kubectl prints them, for what they say about a node's GPUs (GH802).

- ``kubectl describe node``: its ``Capacity:`` and ``Allocatable:`` blocks list the extended resources the node
  advertises. The NVIDIA device plugin registers ``nvidia.com/gpu`` with kubelet, so a GPU node without it (or with
  ``nvidia.com/gpu: 0``) has no device plugin serving its GPUs (Kubernetes, "Schedule GPUs",
  https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/; NVIDIA k8s-device-plugin README). Its labels may
  carry the GPU operator's and node feature discovery's NVIDIA labels (``nvidia.com/gpu.present=true``,
  ``feature.node.kubernetes.io/pci-10de.present=true``: PCI vendor 10de is NVIDIA), and ``Container Runtime
  Version:`` names the node's runtime.
- a pod's manifest (``kubectl get pod -o yaml``, or the file applied; a workload's pod template alike): whether a
  container asks for ``nvidia.com/gpu`` and the RuntimeClass the pod names (``spec.runtimeClassName``: Kubernetes,
  "Runtime Class", https://kubernetes.io/docs/concepts/containers/runtime-class/).

Every function is pure and linear in its input.
"""

from __future__ import annotations

from gpuhealth.model import HostEnvironment, ParseError

MAX_LINES = 4000
# what the device plugin advertises: nvidia.com/gpu, renamed shares (nvidia.com/gpu.shared with renameByDefault) and
# MIG devices (nvidia.com/mig-1g.5gb with the mixed strategy): any of them is a GPU the node offers
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/mig-")
RESOURCE_BLOCKS = ("Capacity", "Allocatable")
# labels that say the node has an NVIDIA GPU: the GPU operator's (gpu-feature-discovery) and node feature discovery's
NVIDIA_LABELS = ("nvidia.com/gpu.present=true", "feature.node.kubernetes.io/pci-10de.present=true",
                 "nvidia.com/gpu.product=", "nvidia.com/gpu.count=")


def parse_describe_node(text: str, source: str = "kubectl describe node") -> HostEnvironment:
    """``kubectl describe node``: the GPUs in Allocatable (else Capacity), 0 when the block lacks them; whether
    NVIDIA labels are on the node; its container runtime. ParseError without a Capacity or Allocatable block."""
    if not isinstance(text, str):
        raise ParseError("kubectl describe node output must be text")
    gpus: dict[str, int] = {}
    block = ""
    labelled = False
    runtime = None
    for raw in text.splitlines()[:MAX_LINES]:
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        labelled = labelled or any(label in stripped for label in NVIDIA_LABELS)
        if not line[:1].isspace():  # a section of its own: "Capacity:", "Labels: ...", "Allocated resources:"
            key = stripped.partition(":")[0]
            block = key if key in RESOURCE_BLOCKS else ""
            if block:
                gpus.setdefault(block, 0)
            continue
        if stripped.startswith("Container Runtime Version:"):
            runtime = stripped.partition(":")[2].strip() or None
        key, colon, value = stripped.partition(":")
        if block and colon and key.strip().startswith(GPU_RESOURCES):
            value = value.strip()
            gpus[block] += int(value) if value.isdecimal() else 0
    if not gpus:
        raise ParseError("no Capacity or Allocatable block")
    return HostEnvironment(k8s_node_source=source, k8s_node_gpus=gpus.get("Allocatable", gpus.get("Capacity")),
                           k8s_node_nvidia_labels=labelled, k8s_node_runtime=runtime)


def parse_pod_manifest(text: str, source: str = "pod manifest") -> HostEnvironment:
    """A pod's manifest in YAML: whether a container asks for nvidia.com/gpu, and the RuntimeClass the pod names
    ("" when it names none). ParseError when it has no containers."""
    if not isinstance(text, str):
        raise ParseError("a pod manifest must be text")
    gpu = False
    runtime_class = ""
    containers = False
    for raw in text.splitlines()[:MAX_LINES]:
        key, colon, value = raw.strip().lstrip("-").strip().partition(":")
        if not colon:
            continue
        key, value = key.strip().strip("\"'"), value.partition(" #")[0].strip().strip("\"'")
        if key == "containers":
            containers = True
        elif key.startswith(GPU_RESOURCES) and value.isdecimal() and int(value) > 0:
            gpu = True
        elif key == "runtimeClassName" and value and not runtime_class:
            runtime_class = value
    if not containers:
        raise ParseError("no containers: not a pod manifest")
    return HostEnvironment(k8s_pod_source=source, k8s_pod_requests_gpu=gpu, k8s_pod_runtime_class=runtime_class)


# `kubectl describe pod`'s sections (flush left; kubectl's describe.go, describePod): a description shows several
POD_KEYS = ("Name:", "Namespace:", "Priority:", "Service Account:", "Node:", "Start Time:", "Labels:", "Annotations:",
            "Status:", "IP:", "IPs:", "Controlled By:", "Containers:", "Init Containers:", "Conditions:", "Volumes:",
            "QoS Class:", "Node-Selectors:", "Tolerations:", "Events:", "Runtime Class Name:")


def looks_like_describe_pod(text: str) -> bool:
    """The head of ``kubectl describe pod``: its Containers: section and at least three more of its sections, and no
    node's Capacity block (cheap)."""
    lines = text[:32768].splitlines()[:400]
    seen = {key for line in lines for key in POD_KEYS if line.startswith(key)}
    return ("Containers:" in seen and len(seen) >= 4 and "Namespace:" in seen
            and not any(line.startswith(("Capacity:", "Allocatable:")) for line in lines))


def parse_describe_pod(text: str, source: str = "kubectl describe pod") -> HostEnvironment:
    """``kubectl describe pod``: whether a container asks for nvidia.com/gpu (its Limits or Requests), the
    RuntimeClass the pod names (kubectl prints ``Runtime Class Name:`` only when the spec sets one: "" otherwise) and
    its phase with the reason kubectl gives (``Status: Failed``, ``Reason: UnexpectedAdmissionError``).
    The Events table is not read here: its messages are the kubelet's, the scheduler's and the runtime's own lines,
    read by the catalogue as any pasted line is (a normal event says nothing). ParseError without a Containers:
    section."""
    if not isinstance(text, str):
        raise ParseError("kubectl describe pod output must be text")
    containers = gpu = False
    runtime_class = ""
    status: list[str] = []
    for raw in text.splitlines()[:MAX_LINES]:
        line = raw.rstrip()
        stripped = line.strip()
        if line.startswith("Events:"):
            break  # the events are the catalogue's (above)
        if line.startswith(("Containers:", "Init Containers:")):
            containers = True
        elif line.startswith("Runtime Class Name:"):
            runtime_class = stripped.partition(":")[2].strip()
        elif line.startswith(("Status:", "Reason:")) and len(status) < 2:  # the pod's phase and why (flush left)
            status.append(stripped.partition(":")[2].strip())
        elif line[:1].isspace():
            key, colon, value = stripped.partition(":")
            value = value.strip()
            if colon and key.startswith(GPU_RESOURCES) and value.isdecimal() and int(value) > 0:
                gpu = True
    if not containers:
        raise ParseError("no Containers: section")
    phase = status[0] + (f" ({status[1]})" if len(status) > 1 else "") if status else None
    return HostEnvironment(k8s_pod_source=source, k8s_pod_requests_gpu=gpu, k8s_pod_runtime_class=runtime_class,
                           k8s_pod_status=phase)
