"""GH8xx: the host around the GPUs: the OS's support lifetime, containers and the NVIDIA Container
Toolkit, the driver's parameters, storage for training data, and errors pasted from applications.

The container rules follow NVIDIA's container toolkit documentation and its notice on "Failed to
initialize NVML: Unknown Error" (the tools' own messages, NVIDIA/nvidia-container-toolkit issue #48).
"""

from __future__ import annotations

import datetime
import functools
import typing
from collections.abc import Iterator

from gpuhealth.checks.driver import REBOOT
from gpuhealth.checks.registry import Draft, Expectations, Skip, check, fixes_for, table_fixes
from gpuhealth.commands import fix as slotted
from gpuhealth.knowledge import table_rows
from gpuhealth.model import REPORTED_WORDS, AppError, Evidence, Fix, HostEnvironment, Severity, Snapshot
from gpuhealth.records import record

if typing.TYPE_CHECKING:
    from gpuhealth.knowledge.app_errors import ErrorMeaning

EOL_SOON_DAYS = 90
ROOT_MOUNTS = ("/", "/boot", "/boot/efi")
LOCAL_DATA_FS = ("ext4", "xfs")
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "beegfs", "ceph", "fuse.ceph-fuse", "glusterfs",
              "fuse.glusterfs", "gpfs")
PSEUDO_FS = ("tmpfs", "devtmpfs", "overlay", "squashfs", "proc", "sysfs", "cgroup", "cgroup2", "devpts",
             "iso9660", "ramfs", "efivarfs")
LOW_FREE_SHARE = 0.10


# --------------------------------------------------------------------------- shared


def _env(snapshot: Snapshot) -> HostEnvironment:
    assert snapshot.host_env is not None  # guaranteed by requires=("host_env",)
    return snapshot.host_env


def _has_gpu(snapshot: Snapshot) -> bool:
    return bool(snapshot.nvidia_pci_gpus) or bool(snapshot.gpus)


def _unavailable(snapshot: Snapshot, *names: str) -> str:
    return "; ".join(snapshot.unavailable[n] for n in names if n in snapshot.unavailable) or "not collected"


# --------------------------------------------------------------------------- GH801


@record
class EndOfSupport:
    os_id: str
    version: str
    date: datetime.date
    support: str
    source: str
    confirmed: str


@functools.cache
def end_of_support_table() -> tuple[EndOfSupport, ...]:
    """``knowledge/os_eol.csv``, read once."""
    return tuple(EndOfSupport(row["id"], row["version"], datetime.date.fromisoformat(row["end_of_support"]),
                              row["support"], row["source"], row["confirmed"])
                 for row in table_rows("os_eol.csv"))


def end_of_support(os_id: str | None, version_id: str | None) -> EndOfSupport | None:
    """The row for this OS: the exact version (Ubuntu's 22.04), else its major version (RHEL's 8.9 -> 8)."""
    if not os_id or not version_id:
        return None
    rows = [r for r in end_of_support_table() if r.os_id == os_id.lower()]
    for candidate in (version_id, version_id.split(".")[0]):
        row = next((r for r in rows if r.version == candidate), None)
        if row:
            return row
    return None


def capture_date(captured_at: str | None) -> datetime.date | None:
    try:
        return datetime.date.fromisoformat((captured_at or "")[:10])
    except ValueError:
        return None


@check("GH801", "os-end-of-life", "The operating system is past its end of support", requires=("os",))
def os_end_of_life(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The OS (`/etc/os-release` ID and VERSION_ID) against a dated table of vendor support ends
    (`src/gpuhealth/knowledge/os_eol.csv`, each row with its source: CentOS 7 2024-06-30, CentOS 8
    2021-12-31, RHEL 7 2024-06-30 (maintenance), Ubuntu 18.04 2023-05-31 and 20.04 2025-05-31 (standard
    support), Debian 10 2024-06-30 and 11 2026-08-31 (LTS) ...). It is compared with the snapshot's
    capture date, not today's, so a bundle is judged the same forever. A warning once the date has
    passed; info within 90 days before it.

    Why it matters:
    Past its end of support an OS gets no security fixes, and NVIDIA stops building and testing
    drivers, CUDA toolkits and container images for it: new GPUs need drivers the old kernel and
    compiler cannot build, and package repositories (CentOS mirrors) disappear.

    How to fix:
    Upgrade in place where the vendor supports it (`do-release-upgrade` on Ubuntu, a `full-upgrade`
    to the next Debian release, `leapp` from RHEL 7/8), or reinstall on a supported release (CentOS 7/8
    users moved to Rocky Linux, AlmaLinux or RHEL); reinstall the NVIDIA driver afterwards. Paid
    extended support (Ubuntu Pro ESM, RHEL ELS) also counts: then this finding is expected.

    Exceptions:
    Hosts covered by paid extended support. Releases the table does not list are skipped, not passed.
    Rows marked "not confirmed" in the table are planned dates the vendor gives only to the month.
    """
    os_info = snapshot.os
    assert os_info is not None
    if not os_info.id or not os_info.version_id:
        yield Skip(_unavailable(snapshot, "os") if "os" in snapshot.unavailable else "the OS version is unknown")
        return
    name = os_info.pretty_name or f"{os_info.id} {os_info.version_id}"
    row = end_of_support(os_info.id, os_info.version_id)
    if row is None:
        yield Skip(f"no end-of-support date known for {name} (knowledge/os_eol.csv)")
        return
    today = capture_date(snapshot.captured_at)
    if today is None:
        yield Skip(f"the capture date is unknown ({snapshot.captured_at or 'not recorded'}): "
                   "the end of support cannot be compared")
        return
    days = (row.date - today).days
    if days > EOL_SOON_DAYS:
        return
    note = "" if row.confirmed == "yes" else f" ({row.confirmed})"
    evidence = (Evidence(snapshot.sources.get("os", "/etc/os-release"),
                         (f"PRETTY_NAME={name}", f"ID={os_info.id}", f"VERSION_ID={os_info.version_id}")),
                Evidence("knowledge/os_eol.csv", (f"{row.os_id} {row.version}: {row.support} {row.date}{note}",
                                                  f"source: {row.source}", f"captured {today}")))
    fixes = _upgrade_fixes(os_info.id)
    if days < 0:
        yield Draft(Severity.WARNING, f"{name} reached its {row.support} on {row.date} ({-days} days before this "
                                      "capture): no security fixes, and new NVIDIA drivers and CUDA releases stop "
                                      "supporting it", evidence=evidence, fixes=fixes)
    else:
        yield Draft(Severity.INFO, f"{name} reaches its {row.support} on {row.date} ({days} days after this "
                                   "capture): plan the upgrade", evidence=evidence, fixes=fixes)


def _upgrade_fixes(os_id: str) -> tuple[Fix, ...]:
    if os_id == "ubuntu":
        return (Fix("sudo do-release-upgrade", "debian", disruptive=True,
                    note="one LTS at a time; reinstall the NVIDIA driver for the new kernel afterwards"),)
    if os_id == "debian":
        return (Fix("sudo sed -i 's/<old codename>/<new codename>/g' /etc/apt/sources.list && sudo apt-get update "
                    "&& sudo apt-get full-upgrade", "debian", disruptive=True,
                    note="follow the release notes of the next Debian release"),)
    if os_id == "rhel":
        return (Fix("sudo dnf install leapp-upgrade && sudo leapp preupgrade", "rhel",
                    note="then `sudo leapp upgrade` and reboot; RHEL 7 uses yum and leapp-upgrade-el7toel8"),)
    return (Fix("reinstall on a supported release (Rocky Linux, AlmaLinux or RHEL) and reinstall the driver", "rhel",
                disruptive=True, note="migrate2rocky / almalinux-deploy convert EL8 in place"),)


# --------------------------------------------------------------------------- GH802


@check("GH802", "container-toolkit-missing", "Containers cannot use the GPUs: no NVIDIA Container Toolkit",
       requires=("host_env",))
def container_toolkit_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Docker (`docker info --format '{{json .Runtimes}}'`, or `/etc/docker/daemon.json`) or podman is
    installed on a host with NVIDIA GPUs, but the NVIDIA Container Toolkit is not (`nvidia-ctk
    --version`, `/usr/bin/nvidia-container-runtime`, `/usr/bin/nvidia-container-runtime-hook`); or it
    is, but Docker has no `nvidia` runtime configured, or podman has no CDI specification
    (`/etc/cdi/nvidia.yaml`, `/var/run/cdi/nvidia.yaml`).

    Why it matters:
    Without the toolkit `docker run --gpus all` fails with "could not select device driver "" with
    capabilities: [[gpu]]" and containers see no GPU; Kubernetes' device plugin and compose files with
    `runtime: nvidia` need the runtime registered in Docker's configuration, and podman finds GPUs
    through CDI.

    How to fix:
    Add NVIDIA's repository and install the nvidia-container-toolkit package, then run
    `sudo nvidia-ctk runtime configure --runtime=docker` and restart Docker (running containers stop unless
    live-restore is on). For podman, generate the CDI specification with
    `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` and run containers with the option
    "--device nvidia.com/gpu=all".

    Exceptions:
    Hosts where containers are not meant to use GPUs. gpuhealth running inside a container does not
    judge the host's toolkit. With a recent Docker, `--gpus` works through the toolkit's hook without
    the `nvidia` runtime in daemon.json; the runtime is still what NVIDIA's install guide configures.
    The reporter's words ("nvidia-container-toolkit is not installed", with docker or podman in use) answer
    the toolkit's absence where no program's output shows the toolkit; the finding then quotes them. So do
    words saying Docker's daemon has no nvidia runtime ("docker info shows no nvidia runtime", "added to
    daemon.json but docker was not restarted": the running daemon reads daemon.json only when it starts).
    A pasted `docker info` (its `Runtimes:` line, https://docs.docker.com/reference/cli/docker/system/info/) decides
    Docker's part whatever the toolkit's state: without `nvidia` the runtime is not registered (when
    `/etc/docker/daemon.json` names it, the daemon was not restarted since: restart it; else run
    `nvidia-ctk runtime configure --runtime=docker` and restart), with it this cause is ruled out. A daemon.json that
    is not valid JSON is reported on its own: dockerd refuses to start on it
    (https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file).

    Kubernetes on containerd: a pod runs under the runtime its RuntimeClass names (spec.runtimeClassName, whose
    handler is a runtime of containerd's CRI configuration), else under containerd's default runtime
    (https://kubernetes.io/docs/concepts/containers/runtime-class/). A pasted containerd config.toml (each layout:
    plugins.cri, plugins."io.containerd.grpc.v1.cri" of version 2, plugins.'io.containerd.cri.v1.runtime' of
    version 3) or `crictl info` without any NVIDIA runtime is a warning: pods get no GPU until the runtime is added
    and containerd restarted. One whose NVIDIA runtime is configured but whose default is still runc is a warning too:
    only a pod whose RuntimeClass has the nvidia handler gets the GPUs; the fix is that RuntimeClass and
    runtimeClassName in the pod spec (the GPU operator creates the RuntimeClass where it manages the node), or the
    nvidia runtime as containerd's default (`sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default`,
    nvidia-ctk 1.14 or later, then a restart of containerd). With the nvidia runtime as the default nothing is
    raised, nor where the configuration is the GPU operator's in CDI mode (its default since v25.10: enable_cdi = true
    in the CRI plugin, and the operator's runtimes nvidia-cdi and nvidia-legacy beside nvidia), where runc stays the
    default and pods get their GPUs as CDI devices (gpu-operator controllers/object_controls.go,
    transformToolkitCtrForCDI). A config.toml that imports other files is not judged alone (nvidia-ctk 1.17 and
    later writes its runtime to a drop-in file, /etc/containerd/conf.d/99-nvidia.toml); `containerd config dump` shows
    them merged. The live
    check reads /etc/containerd/config.toml (else k3s's or RKE2's generated one) the same way; a configuration whose
    CRI plugin is disabled (Docker's own containerd) is not judged. CRI-O's configuration is read the same way
    ([crio.runtime] default_runtime, one [crio.runtime.runtimes.<name>] table per runtime whose runtime_path runs the
    program; crio.conf(5)): `crio status config` (the running daemon's, drop-ins merged) or, live, /etc/crio/crio.conf
    with every /etc/crio/crio.conf.d drop-in in name order, as CRI-O reads them. A pasted crio.conf or drop-in alone is
    not judged (`nvidia-ctk runtime configure --runtime=crio` 1.18 and later writes its runtime, and with
    --set-as-default the default, to the drop-in 99-nvidia.toml). CRI-O can also give containers the GPUs through the
    NVIDIA OCI hook (oci-nvidia-hook.json in /usr/share/containers/oci/hooks.d, the GPU operator's way on CRI-O): the
    live check raises nothing for a missing runtime where that hook is installed. A pasted
    pod manifest that names runtimeClassName nvidia selects the runtime (nothing is raised); one that asks for
    nvidia.com/gpu and names none is said to run under the default. A `kubectl describe node` of a GPU node (NVIDIA
    labels, a GPU in the evidence) whose Allocatable holds no nvidia.com/gpu (nor a renamed share or a MIG device)
    is a warning: the device plugin is not running there or its pod found no GPU
    (https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/). A pasted `kubectl describe pod` gives the pod's
    GPU request, its RuntimeClass (Runtime Class Name) and its phase, as a manifest does; its Events' messages are read
    by the catalogue: the scheduler's "Insufficient nvidia.com/gpu", the runtime's refusal of the nvidia handler under
    FailedCreatePodSandBox, the kubelet device manager's refusals under UnexpectedAdmissionError (devices unavailable
    or unregistered: the device plugin; unhealthy devices: the plugin's health check saw a critical Xid). A pod whose
    events are all Normal raises nothing. A pasted Dockerfile that installs the NVIDIA driver's packages
    (libnvidia-*, nvidia-utils-*, nvidia-driver-*, cuda-drivers, or the cuda meta-package that pulls them), runs the
    driver's .run installer or copies libcuda.so*/libnvidia-*.so* into its image is a warning: the toolkit mounts the
    host's driver files at those paths when the container starts, and the image's copies break the mount ("file
    exists") or shadow the host's with another driver version (NVIDIA/nvidia-docker#1287). Words saying the pod does
    not use the nvidia
    runtime, or that containerd's default runtime is still runc, point to the same cause as the reporter's words; a
    configuration showing nvidia as the default overrules them.
    """
    env = _env(snapshot)
    yield from _image_ships_driver(env)
    if env.container:
        return
    if env.docker and env.daemon_json_error:
        yield _daemon_json_invalid(env)
    yield from _containerd_runtime(snapshot, env)
    yield from _node_without_gpus(snapshot, env)
    toolkit = bool(env.nvidia_ctk_version or env.container_toolkit_files)
    registered = _nvidia_registered(snapshot)
    if not toolkit and registered is not None and "env_nvidia_ctk" in snapshot.unavailable:
        if not (_has_gpu(snapshot) or "pci_devices" in snapshot.unavailable):
            return  # the PCI bus was read and holds no NVIDIA GPU; a paste that shows no bus may come from a GPU host
        # nvidia-ctk's state unknown (a paste without it): the running daemon's runtimes (docker info) decide Docker's
        # part. Registered, the toolkit is configured for Docker; not registered, containers asking for it fail
        # a daemon.json dockerd cannot parse is why its nvidia runtime is not running (said above, with its own fixes):
        # `nvidia-ctk runtime configure` would fail on that file too
        if not registered and not env.daemon_json_error:
            yield _runtime_not_registered(env, "")
        return
    if not _has_gpu(snapshot) or not (env.docker or env.podman):
        return
    engines = " and ".join(name for name, present in (("docker", env.docker), ("podman", env.podman)) if present)
    if not toolkit:
        if "env_nvidia_ctk" in snapshot.unavailable:
            yield Skip(_unavailable(snapshot, "env_nvidia_ctk"))
            return
        stated = snapshot.reported_fact("unavailable", "env_nvidia_ctk")
        absent = ((Evidence(REPORTED_WORDS, (stated.words,)),) if stated is not None else
                  (Evidence("nvidia-ctk --version", ("command not found",)),
                   Evidence(", ".join(("/usr/bin/nvidia-container-runtime",
                                       "/usr/bin/nvidia-container-runtime-hook")), ("not present",))))
        yield Draft(
            Severity.WARNING, f"{engines} is installed but the NVIDIA Container Toolkit is not: containers "
                              "cannot use the GPUs",
            evidence=(*absent, *(() if snapshot.reported_fact("host_env", "docker") else _docker_evidence(env))),
            fixes=_toolkit_fixes(install=True, docker=env.docker, podman=env.podman),
        )
        return
    version = f"nvidia-ctk {env.nvidia_ctk_version}" if env.nvidia_ctk_version else ", ".join(
        env.container_toolkit_files)
    if env.docker and env.docker_runtimes_source and "nvidia" not in env.docker_runtimes:
        yield _runtime_not_registered(env, version)
    if env.podman and not env.cdi_specs:
        yield Draft(
            Severity.WARNING, f"podman is installed with the NVIDIA Container Toolkit ({version}) but no CDI "
                              "specification exists: podman containers cannot request GPUs",
            evidence=(Evidence(", ".join(("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml")), ("not present",)),),
            fixes=_toolkit_fixes(podman=True),
        )


def _containerd_runtime(snapshot: Snapshot, env: HostEnvironment) -> Iterator[Draft]:
    """containerd's CRI configuration (parsers/containerd.py): a pod that names no RuntimeClass runs under containerd's
    default runtime, so the NVIDIA runtime gives it the GPUs only when it is configured (``nvidia-ctk runtime configure
    --runtime=containerd``) and either the default (``--set-as-default``) or the handler of the pod's RuntimeClass
    (Kubernetes, Runtime Class: https://kubernetes.io/docs/concepts/containers/runtime-class/)."""
    if env.containerd_config_source is None:
        return
    crio = env.cri_engine == "cri-o"
    engine = "CRI-O" if crio else "containerd"
    evidence = (Evidence(env.containerd_config_source, _containerd_lines(env)),)
    nvidia = env.containerd_nvidia_runtimes
    if not nvidia:
        if env.containerd_imports:
            return  # a drop-in it imports (nvidia-ctk 1.17+ writes conf.d/99-nvidia.toml) may add the runtime
        if not (_has_gpu(snapshot) or "pci_devices" in snapshot.unavailable):
            return  # the bus was read and holds no NVIDIA GPU: nothing for the runtime to give
        if crio and env.cri_nvidia_hook:
            return  # the NVIDIA OCI hook gives CRI-O's containers the GPUs without a runtime (the GPU operator's way)
        hook = (" (nor an NVIDIA OCI hook in its hooks directory)" if crio and env.cri_nvidia_hook == "" else
                ", unless an NVIDIA OCI hook (oci-nvidia-hook.json in /usr/share/containers/oci/hooks.d) is installed"
                if crio else "")
        yield Draft(Severity.WARNING, f"{engine} has no NVIDIA runtime configured{hook}: Kubernetes pods on this node "
                                      "run without the NVIDIA Container Runtime and get no GPU",
                    evidence=evidence,
                    fixes=table_fixes("GH802", kind="crio-no-runtime-nvidia" if crio else "cri-no-runtime-nvidia"),
                    labels={"decided": "container-toolkit-missing"})
        return
    default = env.containerd_default_runtime
    if default is None or default in nvidia:
        return
    if crio and env.containerd_imports:
        return  # CRI-O reads every crio.conf.d drop-in after the file shown: one may set nvidia as the default
    if env.cri_cdi_enabled and any(name.endswith("-cdi") for name in nvidia):
        return  # the GPU operator's CDI mode: pods get their GPUs as CDI devices under the default runtime
    runtime = "nvidia" if "nvidia" in nvidia else nvidia[0]
    pod_class = env.k8s_pod_runtime_class if env.k8s_pod_source else None
    if pod_class and pod_class.lower().startswith("nvidia"):
        return  # the pod selects the NVIDIA runtime by its RuntimeClass (the GPU operator's and the plugin's name)
    if pod_class == "" and env.k8s_pod_requests_gpu:
        evidence += (Evidence(env.k8s_pod_source or "pod manifest",
                              ("requests nvidia.com/gpu", "runtimeClassName: not set")),)
        pod = (f"the pod asks for nvidia.com/gpu but names no runtimeClassName, so it runs under {default} and does "
               "not use the nvidia runtime")
    else:
        pod = (f"a pod gets the GPUs only when its RuntimeClass has handler {runtime} (spec.runtimeClassName); any "
               "other pod does not use the nvidia runtime")
    fixes = table_fixes("GH802", kind="k8s-runtimeclass-nvidia-not-found")
    if crio:  # the RuntimeClass steps, then CRI-O's own commands for the default runtime
        fixes = tuple(f for f in fixes if "containerd" not in f.command) + tuple(
            f for f in table_fixes("GH802", kind="crio-no-runtime-nvidia") if "--version" not in f.command)
    yield Draft(Severity.WARNING,
                f"{engine}'s default runtime is still {default}, not the NVIDIA runtime ({runtime} is configured "
                f"but not the default): {pod}",
                evidence=evidence, fixes=fixes, labels={"decided": "k8s-runtime-not-nvidia"})


def _image_ships_driver(env: HostEnvironment) -> Iterator[Draft]:
    """A Dockerfile that installs the NVIDIA driver's packages (or its .run installer) or copies its libraries into the
    image: the NVIDIA Container Toolkit mounts the host's driver files (libcuda.so.1, libnvidia-ml.so.1, nvidia-smi) at
    the same paths when the container starts, matched to the host's kernel module, so the image's copies make the mount
    fail ("file creation failed: ... file exists") or shadow the host's with another driver version (NVML's
    "Driver/library version mismatch", CUDA error 803) (NVIDIA/nvidia-docker#1287; the cause row
    image-ships-driver-libs)."""
    if not env.image_driver_files:
        return
    shown = ", ".join(env.image_driver_files[:6])
    yield Draft(Severity.WARNING,
                f"the image puts the NVIDIA driver's own files in it ({shown}): the NVIDIA Container Toolkit mounts "
                "the host's driver there when a container starts, and the image's copies break that mount or shadow "
                "it with another driver version",
                evidence=(Evidence(env.image_driver_source or "Dockerfile",
                                   tuple(f"installs or copies {name}" for name in env.image_driver_files[:6])),),
                fixes=(Fix("Remove the NVIDIA driver packages (libnvidia-*, nvidia-utils-*, nvidia-driver-*, "
                           "cuda-drivers, the cuda meta-package: install cuda-toolkit-<X>-<Y> instead), the driver's "
                           ".run installer and any copied libcuda.so*/libnvidia-*.so* from the Dockerfile, then "
                           "rebuild the image",
                           note="an nvidia/cuda base image carries none: the toolkit brings the host's at run time"),),
                labels={"decided": "image-ships-driver-libs"})


def _node_without_gpus(snapshot: Snapshot, env: HostEnvironment) -> Iterator[Draft]:
    """``kubectl describe node`` whose Allocatable (else Capacity) holds no nvidia.com/gpu (nor a renamed share or a
    MIG device): the device plugin registers them with kubelet, so none means it is not running on the node or found
    no GPU in its own pod (Kubernetes, Schedule GPUs: https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/).
    Judged on a node the evidence shows is a GPU node (NVIDIA labels, a GPU, or a paste that shows no PCI bus)."""
    if env.k8s_node_source is None or env.k8s_node_gpus != 0:
        return
    if not (env.k8s_node_nvidia_labels or _has_gpu(snapshot) or "pci_devices" in snapshot.unavailable):
        return
    lines = ["nvidia.com/gpu: none in Allocatable"]
    if env.k8s_node_nvidia_labels:
        lines.append("labels: NVIDIA GPU present (gpu-feature-discovery / node feature discovery)")
    if env.k8s_node_runtime:
        lines.append(f"Container Runtime Version: {env.k8s_node_runtime}")
    yield Draft(Severity.WARNING, "the Kubernetes node advertises no nvidia.com/gpu: the NVIDIA device plugin is not "
                                  "running on it, or its pod found no GPU (it did not run under the nvidia runtime)",
                evidence=(Evidence(env.k8s_node_source, tuple(lines)),),
                fixes=table_fixes("GH802", kind="k8s-insufficient-nvidia-gpu"),
                labels={"decided": "device-plugin-missing"})


def _containerd_lines(env: HostEnvironment) -> tuple[str, ...]:
    default = env.containerd_default_runtime or "not shown"
    if env.containerd_default_implied:
        default += (" (no default_runtime: CRI-O's own default)" if env.cri_engine == "cri-o" else
                    " (no default_runtime_name: containerd's own default)")
    lines = [f"runtimes: {', '.join(env.containerd_runtimes) or 'none'}",
             f"NVIDIA runtimes: {', '.join(env.containerd_nvidia_runtimes) or 'none'}",
             f"default runtime: {default}"]
    if env.containerd_imports:
        lines.append(f"imports: {', '.join(env.containerd_imports)}")
    if env.cri_engine == "cri-o" and env.cri_nvidia_hook is not None:
        lines.append(f"NVIDIA OCI hook: {env.cri_nvidia_hook or 'none'}")
    return tuple(lines)


def _nvidia_registered(snapshot: Snapshot) -> bool | None:
    """Whether the running Docker daemon lists the nvidia runtime, as ``docker info`` (machine output) shows it; None
    when no program's output gave the daemon's runtimes (unknown, or only the reporter's words)."""
    env = _env(snapshot)
    if not env.docker or env.docker_runtimes_source is None or snapshot.reported_fact("host_env", "docker_runtimes"):
        return None
    return "nvidia" in env.docker_runtimes


def _runtime_not_registered(env: HostEnvironment, version: str) -> Draft:
    """Docker's daemon has no nvidia runtime. When daemon.json names it, the daemon was not restarted since (it reads
    the file only when it starts): restart it; else register the runtime first (NVIDIA Container Toolkit install
    guide: ``nvidia-ctk runtime configure --runtime=docker``, then restart Docker)."""
    lead = (f"The NVIDIA Container Toolkit is installed ({version}) but Docker" if version else "Docker")
    evidence = tuple(_docker_evidence(env))
    if env.daemon_json_runtimes is not None and "nvidia" in env.daemon_json_runtimes:
        return Draft(Severity.WARNING, f"{lead} has no nvidia runtime running although /etc/docker/daemon.json names "
                                       "it: the daemon was not restarted since",
                     evidence=evidence, fixes=tuple(f for f in _toolkit_fixes(docker=True) if "restart" in f.command))
    message = (f"{lead} has no nvidia runtime configured" if version else
               f"{lead} has no nvidia runtime registered: containers asking for it (--runtime=nvidia, compose's "
               "runtime: nvidia) fail")
    return Draft(Severity.WARNING, message, evidence=evidence, fixes=_toolkit_fixes(docker=True))


def _daemon_json_invalid(env: HostEnvironment) -> Draft:
    """dockerd reads daemon.json when it starts and refuses to start when it cannot parse it (dockerd reference,
    Daemon configuration file: https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file)."""
    return Draft(
        Severity.WARNING, "/etc/docker/daemon.json is not valid JSON: dockerd refuses to start with it",
        evidence=(Evidence("/etc/docker/daemon.json", (env.daemon_json_error or "not valid JSON",)),),
        fixes=(Fix("python3 -m json.tool /etc/docker/daemon.json", note="names the line and column of the error"),
               Fix("Correct that line of /etc/docker/daemon.json (quotes, commas, braces)"),
               Fix("sudo systemctl restart docker", disruptive=True, note="running containers stop unless "
                                                                            "live-restore is on")),
    )


def _toolkit_fixes(install: bool = False, docker: bool = False, podman: bool = False) -> tuple[Fix, ...]:
    """GH802's rows of knowledge/fixes.csv that this host needs: the toolkit's install (the rows for no engine),
    Docker's runtime and restart (the rows naming docker), podman's CDI specification (``cdi generate``)."""
    def needed(fix: Fix) -> bool:
        if "docker" in fix.command:
            return docker
        if "cdi generate" in fix.command:
            return podman
        return install
    return tuple(f for f in table_fixes("GH802") if needed(f))


def _docker_evidence(env: HostEnvironment) -> list[Evidence]:
    if not env.docker:
        return []
    if env.docker_runtimes_source is None:
        return [Evidence("docker info", ("runtimes unknown",))]
    lines = [f"runtimes: {', '.join(env.docker_runtimes) or 'none'}"]
    if env.docker_default_runtime:
        lines.append(f"default-runtime: {env.docker_default_runtime}")
    if env.docker_server_version:
        lines.append(f"server version: {env.docker_server_version}")
    shown = [Evidence(env.docker_runtimes_source, tuple(lines))]
    if env.daemon_json_runtimes is not None:
        shown.append(Evidence("/etc/docker/daemon.json",
                              (f"runtimes: {', '.join(env.daemon_json_runtimes) or 'none'}",)))
    return shown


# --------------------------------------------------------------------------- GH803


@check("GH803", "container-nvml-unknown-error", "NVML fails with \"Unknown Error\" inside a container",
       requires=("host_env",))
def container_nvml_unknown_error(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    gpuhealth runs inside a container (`/.dockerenv`, `/run/.containerenv`, or a container path in
    `/proc/1/cgroup`) and NVML or nvidia-smi fails with "Failed to initialize NVML: Unknown Error".

    Why it matters:
    This is the documented failure of containers started by runc under systemd's cgroup driver: a
    `systemctl daemon-reload` (or any unit reload, often by a package update) rewrites the container's
    device cgroup and removes its access to `/dev/nvidia*`, because the NVIDIA device nodes lack the
    `/dev/char` links runc needs to re-add them. The host itself is fine; every GPU job in the
    container fails until it is recreated (NVIDIA's notice, nvidia-container-toolkit issue #48).

    How to fix:
    Recreate the container (restarting the process inside is not enough). To stop it recurring, on
    the host: create the `/dev/char` links with `sudo nvidia-ctk system create-dev-char-symlinks
    --create-all` (and NVIDIA's udev rule to keep them), or use CDI (`nvidia-ctk cdi generate`,
    `--device nvidia.com/gpu=all`), or switch Docker to the cgroupfs driver
    (`"exec-opts": ["native.cgroupdriver=cgroupfs"]` in daemon.json).

    Exceptions:
    The same message on a bare host has other causes (GH203 decodes it). Kubernetes pods are
    recreated by deleting them; the device plugin's own fix is to run with CDI.
    """
    env = _env(snapshot)
    if not env.container:
        return
    lines = []
    if snapshot.nvml is not None and not snapshot.nvml.ok and "unknown error" in (snapshot.nvml.error or "").lower():
        lines.append(("NVML", f"NVML: {snapshot.nvml.error}"))
    run = snapshot.smi_run
    if run is not None:
        for line in run.text.splitlines():
            if "unknown error" in line.lower() and "nvml" in line.lower():
                lines.append((" ".join(run.argv), line.strip()))
                break
    if not lines:
        return
    yield Draft(
        Severity.CRITICAL,
        f"NVML reports \"Unknown Error\" inside a {env.container} container: the container lost access to "
        "/dev/nvidia* (device cgroup rewritten by a systemd reload); recreate it",
        evidence=(Evidence(env.container_evidence or "container", (f"running inside {env.container}",)),
                  *(Evidence(source, (line,)) for source, line in lines)),
        fixes=table_fixes("GH803"),
        explains=("GH203",),
    )


# --------------------------------------------------------------------------- GH804


@check("GH804", "driver-parameter-unexpected", "A driver parameter differs from the configured value",
       requires=("host_env",))
def driver_parameter_unexpected(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The loaded driver's parameters (`/proc/driver/nvidia/params`, `Name: value` lines such as
    `EnableMSI: 1`) and registry keys (`/proc/driver/nvidia/registry`, for keys set through
    `NVreg_RegistryDwords`, e.g. `RMEdgeTrigger`) against the values the config file expects
    (`driver_params = { EnableMSI = 1 }` under `[check]` in `/etc/gpuhealth/config.toml`, names with or
    without the `NVreg_` prefix). A warning per parameter that differs or that this driver does not report.

    Why it matters:
    NVreg_* module options (MSI interrupts, firmware loading, device file permissions, PCIe
    settings) are set in modprobe.d files that are easy to lose in a reinstall, an initramfs rebuild
    or a new image; a fleet usually wants them the same on every node. Which values are right is a
    site decision, so the expectations come from the configuration rather than from gpuhealth.

    NVIDIA's suspend services (`nvidia-suspend`, `nvidia-resume`, `nvidia-hibernate.service`, as
    `systemctl status` or `systemctl is-enabled` shows them) are judged without configuration: with
    `NVreg_PreserveVideoMemoryAllocations=1` (the params file, else an `options nvidia` line in
    modprobe.d) one that is disabled, masked or not installed is the driver README's broken set-up: a
    suspend then bypasses `/proc/driver/nvidia/suspend`, the driver refuses it, and the resume cannot
    restore video memory. A failed one is a failed suspend path whatever the parameter says.

    How to fix:
    Set the option in a modprobe.d file (`options nvidia NVreg_<Name>=<value>`), rebuild the
    initramfs (the module may load from it) and reboot or reload the nvidia modules. Where a suspend
    unit is the finding, enable the driver's three suspend services (its fixes list them), or leave
    the parameter at 0 where video memory need not survive a suspend.

    Exceptions:
    Skipped when no driver parameters are configured and no suspend unit is shown, or when the driver
    is not loaded (no params file). Parameter names change between driver branches: one the driver
    does not report is listed so the configuration can be corrected. A suspend unit that is disabled
    while the parameter is 0 (or not shown) is fine: the driver's default suspend path is used.
    """
    sleep = _sleep_path_broken(snapshot)
    if sleep is not None:
        yield sleep
    wanted = expect.driver_params or {}
    if not wanted:
        if sleep is None:
            yield Skip("no expected driver parameters configured (driver_params in the config file)")
        return
    env = _env(snapshot)
    if not env.driver_params:
        yield Skip(_unavailable(snapshot, "env_driver_params"))
        return
    for raw_name, value in sorted(wanted.items()):
        name = raw_name.removeprefix("NVreg_")
        expected = str(value).strip()
        # A key set through RegistryDwords shows in the registry file, not among the params.
        in_registry = name not in env.driver_params and name in env.driver_registry
        actual = env.driver_registry.get(name) if in_registry else env.driver_params.get(name)
        source = "/proc/driver/nvidia/registry" if in_registry else "/proc/driver/nvidia/params"
        if actual is not None and _same(actual, expected):
            continue
        shown = "not reported by this driver" if actual is None else f"{name}: {actual}"
        message = (f"Driver parameter {name} is not reported by the loaded driver (expected {expected}): check the "
                   "name in the config file" if actual is None
                   else f"Driver parameter {name} is {actual or 'empty'}, the configuration expects {expected}")
        yield Draft(
            Severity.WARNING, message,
            evidence=(Evidence(source, (shown,)),),
            fixes=(slotted("echo options nvidia NVreg_{nvreg_name}={nvreg_value} | "
                           "sudo tee -a /etc/modprobe.d/nvidia-params.conf", nvreg_name=name, nvreg_value=expected),
                   *fixes_for(debian=["sudo update-initramfs -u"], rhel=["sudo dracut --force"]),
                   REBOOT),
        )


PRESERVE_VIDMEM = "PreserveVideoMemoryAllocations"
_UNIT_OFF = ("disabled", "masked", "masked-runtime", "not-found")


def _preserve_vidmem(snapshot: Snapshot) -> tuple[str, str] | None:
    """(where, line) showing NVreg_PreserveVideoMemoryAllocations set to 1: the loaded driver's params file, else a
    modprobe.d ``options nvidia`` line; None when the evidence shows it 0 or not at all (the params file wins)."""
    params = snapshot.host_env.driver_params if snapshot.host_env else {}
    if PRESERVE_VIDMEM in params:
        on = params[PRESERVE_VIDMEM].strip() == "1"
        return ("/proc/driver/nvidia/params", f"{PRESERVE_VIDMEM}: 1") if on else None
    for conf in snapshot.install.modprobe_files if snapshot.install else ():
        words = (conf.nvidia_options or "").split()
        value = next((w.split("=", 1)[1] for w in reversed(words) if w.startswith(f"NVreg_{PRESERVE_VIDMEM}=")), None)
        if value is not None:
            return (conf.path, f"options nvidia NVreg_{PRESERVE_VIDMEM}={value}") if value.strip() == "1" else None
    return None


def _sleep_path_broken(snapshot: Snapshot) -> Draft | None:
    """NVIDIA's suspend units against NVreg_PreserveVideoMemoryAllocations (NVIDIA Linux driver README, Configuring
    Power Management Support): a failed one, or with the parameter set one that is disabled, masked or missing."""
    units = _env(snapshot).sleep_units
    if not units:
        return None
    failed = [f"{unit}.service: Active: failed" for unit, active, _ in units if active == "failed"]
    preserve = _preserve_vidmem(snapshot)
    off = [f"{unit}.service: {enabled}" for unit, _, enabled in units if enabled in _UNIT_OFF] if preserve else []
    if not failed and not off:
        return None
    from gpuhealth.knowledge.fixes import fixes_of  # read on first use: few runs show a suspend unit

    what = (f"{', '.join(line.split(':')[0] for line in failed)} failed" if failed else
            f"{', '.join(line.split(':')[0] for line in off)} not enabled while "
            f"NVreg_{PRESERVE_VIDMEM}=1 is set")
    evidence = [Evidence("systemctl", tuple(failed + off))]
    if preserve:
        evidence.append(Evidence(preserve[0], (preserve[1],)))
    return Draft(Severity.WARNING,
                 f"NVIDIA's suspend path is broken: {what}; a suspend or hibernation then does not go through "
                 "/proc/driver/nvidia/suspend (the driver refuses it, or the resume cannot restore video memory and "
                 "CUDA fails until nvidia_uvm is reloaded)",
                 evidence=tuple(evidence), fixes=fixes_of("GH804:nvidia-suspend-path-failed"),
                 labels={"cause": "nvidia-suspend-path-failed"})


def _same(actual: str, expected: str) -> bool:
    try:
        return int(actual, 0) == int(expected, 0)
    except ValueError:
        return actual.strip().strip('"') == expected.strip('"')


# --------------------------------------------------------------------------- GH805


@check("GH805", "training-data-mounts", "Storage for training data: atime updates, network file systems, "
       "low free space", requires=("host_env",))
def training_data_mounts(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The file systems from `/proc/self/mounts` and `df -P -l`: ext4/xfs data mounts (not `/` or
    `/boot`) that update access times on every read (neither `noatime` nor `relatime` among the
    options, i.e. `strictatime`); network file systems (NFS, CIFS, Lustre, BeeGFS, Ceph, GlusterFS,
    GPFS) in use; file systems with less than 10 % free. Information only.

    Why it matters:
    Data loaders read many small files many times: a write for every read (strict atime) costs
    throughput on local disks. Training data on a network file system runs at the network's speed
    and stalls when the server does, which looks like a slow or hung GPU job. A full file system
    fails checkpoints and logs in the middle of a run.

    How to fix:
    Mount data file systems with `noatime` (or the default `relatime`) in /etc/fstab and remount;
    stage hot data sets on local NVMe or use the file system's client cache; free space or grow the
    file system before long runs.

    Exceptions:
    `strictatime` is sometimes required by tools that read access times. Network file systems are
    normal on clusters: they are listed, not judged. `df` runs with `-l` (local file systems only)
    because it hangs on an unreachable NFS server.
    """
    env = _env(snapshot)
    if not env.mounts:
        yield Skip(_unavailable(snapshot, "env_mounts"))
        return
    atime = [m for m in env.mounts if m.fs_type in LOCAL_DATA_FS and m.mount_point not in ROOT_MOUNTS
             and not m.mount_point.startswith("/boot/")
             and not {"noatime", "relatime", "lazytime"} & set(m.options)]
    if atime:
        yield Draft(
            Severity.INFO, f"{len(atime)} data file system(s) update the access time on every read: mount them "
                           f"with noatime ({', '.join(m.mount_point for m in atime[:5])})",
            evidence=(Evidence("/proc/self/mounts", tuple(
                f"{m.device} {m.mount_point} {m.fs_type} {','.join(m.options)}" for m in atime[:8])),),
            fixes=(Fix("add noatime to the options of these mounts in /etc/fstab, then sudo mount -o "
                       "remount,noatime <mount point>", "any"),),
        )
    network = [m for m in env.mounts if m.fs_type in NETWORK_FS or m.fs_type.startswith("nfs")]
    if network:
        yield Draft(
            Severity.INFO, f"{len(network)} network file system(s) mounted: training data read from them runs at "
                           f"the network's speed ({', '.join(f'{m.mount_point} ({m.fs_type})' for m in network[:5])})",
            evidence=(Evidence("/proc/self/mounts", tuple(
                f"{m.device} {m.mount_point} {m.fs_type}" for m in network[:8])),),
            fixes=(Fix("stage hot data sets on local NVMe (or enable the client cache, e.g. FS-Cache for NFS)",
                       "any"),),
        )
    types = {m.mount_point: m.fs_type for m in env.mounts}
    low = [d for d in env.disk_space if d.size_kib > 0 and d.available_kib < LOW_FREE_SHARE * d.size_kib
           and types.get(d.mount_point, "") not in PSEUDO_FS and d.filesystem not in PSEUDO_FS]
    if low:
        yield Draft(
            Severity.INFO, "Less than 10 % free on " + ", ".join(
                f"{d.mount_point} ({100 * d.available_kib / d.size_kib:.1f} % free)" for d in low[:5]),
            evidence=(Evidence("df -P -l", tuple(
                f"{d.filesystem} {d.size_kib} KiB, {d.available_kib} KiB available, mounted on {d.mount_point}"
                for d in low[:8])),),
            fixes=(Fix("sudo du -xh --max-depth=2 <mount point> | sort -h | tail", "any",
                       note="find what fills it; free space before long runs"),),
        )


# --------------------------------------------------------------------------- GH806

SEVERITY_OF = {"critical": Severity.CRITICAL, "warning": Severity.WARNING, "info": Severity.INFO}


def _decided_cause(found: list[AppError]):  # -> tuple[str, Cause] | None
    """(the row's summary, its cause) when every line of a kind's group matches one catalogue row that decides a cause
    of GH806's own (NCCL's "Call to ibv_reg_mr failed": RDMA memory registration, not the kind's list of candidates);
    None otherwise. A cause another check owns is that check's to report."""
    from gpuhealth.knowledge.causes import causes
    from gpuhealth.knowledge.signatures import match_line

    rows = {row.id: row for row in (match_line(e.message) for e in found) if row is not None}
    if len(rows) != 1:
        return None
    (row,) = rows.values()
    cause = causes().get(row.cause) if row.cause else None
    if cause is None or cause.code != "GH806":
        return None
    return row.summary, cause


def _row_severity(found: list[AppError]) -> str:
    from gpuhealth.knowledge.signatures import match_line

    row = match_line(found[0].message)
    return row.severity if row is not None and row.severity in SEVERITY_OF else "warning"



def meaning_of(error: AppError) -> tuple[str, ErrorMeaning | None]:
    """The error's kind and what it means (``knowledge/app_errors.csv``, imported here: most evidence has none)."""
    from gpuhealth.knowledge.app_errors import meanings

    return error.kind, meanings().get(error.kind)


APP_ERRORS_ONLY_PASTED = "only with a training log or traceback (gpuhealth analyze LOG)"


def _led_elsewhere(snapshot: Snapshot) -> frozenset[str]:
    """Pasted lines whose catalogue row names another check: that check reports (or judges) them, so GH806
    does not repeat them as a second finding for one line."""
    from gpuhealth.knowledge.signatures import signature

    return frozenset(m.line for m in snapshot.messages or ()
                     if m.signature and signature(m.signature).code not in ("", "GH806"))


@check("GH806", "application-error", "A training log shows a CUDA, NCCL or driver error",
       reads=("messages",))
def application_error(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The errors `gpuhealth analyze` finds in training logs and tracebacks (catalogue lines grouped by
    kind in `knowledge/app_errors.csv`: "no CUDA-capable device is detected", "CUDA driver version is
    insufficient", "sm_XX is not compatible
    with the current PyTorch installation", "Failed to initialize NVML: Unknown Error", "Insufficient
    Permissions", out of memory, NCCL errors ...), one finding per kind, each tied to the checks that
    explain it (for example no device -> GH201, GH207, GH608; insufficient driver -> GH601, GH605;
    architecture -> GH606; NVML Unknown Error -> GH803; Insufficient Permissions -> GH203).

    Why it matters:
    The application's message is where most reports start, but it names a symptom: the cause is in
    the driver, the device files, the environment or the container. When the evidence given holds
    what those checks need, their findings in the same report say which cause it is; when it does
    not, this finding names the commands whose output decides it.

    How to fix:
    Read the related checks' findings in this report (`gpuhealth explain <code>`); otherwise run the
    listed commands on the host (or `gpuhealth snapshot`) and analyze their output together with the log.

    Exceptions:
    Program bugs (device-side asserts, most illegal memory accesses, out of memory) are reported so
    the log is accounted for, but no host check can fix them. `gpuhealth check` reads no application
    log, so there it is listed as skipped: it runs only with a training log or traceback given to
    `gpuhealth analyze LOG`. A line whose catalogue row names another check (a driver/library mismatch:
    GH202; no CUDA device: GH610 with its ranked causes) is reported by that check alone, once.
    """
    if snapshot.app_errors is None:
        yield Skip(snapshot.unavailable.get("app_errors", APP_ERRORS_ONLY_PASTED))
        return
    led = _led_elsewhere(snapshot)
    errors = [e for e in snapshot.app_errors if e.message.strip()[:500] not in led]
    groups: dict[str, list[AppError]] = {}
    for error in errors:
        groups.setdefault(meaning_of(error)[0], []).append(error)
    source = snapshot.sources.get("app_errors", "application log")
    for kind, found in groups.items():
        meaning = meaning_of(found[0])[1]
        lines = tuple(f"{e.line_number}: {e.message}" if e.line_number else e.message for e in found[:4])
        if len(found) > 4:
            lines += (f"... {len(found) - 4} more like these ...",)
        if meaning is None:
            yield Draft(Severity.WARNING, f"{kind} error in the application log", evidence=(Evidence(source, lines),))
            continue
        decided = _decided_cause(found)
        if decided is not None:  # the line's own catalogue row names the cause: say it, not the kind's candidates
            summary, cause = decided
            message = f"{kind} in the application log ({len(found)}x): {summary}"
            fixes = tuple(Fix(command.strip(), "any", note="tells which") for command in cause.decide.split(";")
                          if command.strip())
            yield Draft(SEVERITY_OF[_row_severity(found)], message, evidence=(Evidence(source, lines),), fixes=fixes)
            continue
        missing = [name for name in meaning.needs if getattr(snapshot, name, None) is None]
        related = ", ".join(meaning.related)
        message = f"{kind} in the application log ({len(found)}x): {meaning.summary}"
        if related:
            message += f"; see {related}"
        if missing:
            message += f" (this evidence cannot decide: collect {', '.join(meaning.collect[:2])} ...)"
        fixes = tuple(Fix(command, "any", note="evidence to collect next") for command in meaning.collect) if missing \
            else ()
        fixes += tuple(slotted("gpuhealth explain {code}", code=code) for code in meaning.related)
        yield Draft(Severity.WARNING, message, evidence=(Evidence(source, lines),), fixes=fixes)
