"""The host-environment probe (GH8xx, GH508/GH509): containers and the NVIDIA Container Toolkit, whether
gpuhealth itself runs inside a container, the driver's parameters and the storage; the display and
install-route evidence comes from ``collect.install``. Everything lands in ``Snapshot.host_env``.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.collect.base import Probed, read_text, run_commands
from gpuhealth.collect.install import install_route_commands, install_route_evidence, why_failed
from gpuhealth.host import Host
from gpuhealth.model import ParseError

DOCKER_TIMEOUT_S = 10.0  # a wedged daemon must not hold the whole check
DOCKER_INFO = ["docker", "info", "--format", "{{json .Runtimes}}"]
DAEMON_JSON = "/etc/docker/daemon.json"
# containerd's configuration as Kubernetes uses it: the standard path, then k3s's and RKE2's own (they generate it)
CONTAINERD_CONFIGS = ("/etc/containerd/config.toml", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
                      "/var/lib/rancher/rke2/agent/etc/containerd/config.toml")
CONTAINERD_FIELDS = ("containerd_config_source", "containerd_runtimes", "containerd_nvidia_runtimes",
                     "containerd_default_runtime", "containerd_default_implied", "containerd_imports", "cri_engine",
                     "cri_cdi_enabled")
# CRI-O reads crio.conf, then every drop-in of crio.conf.d in name order (crio.conf(5)); its OCI hooks directories,
# where the GPU operator and `nvidia-ctk runtime configure --config-mode=oci-hook` put the NVIDIA hook instead of a
# runtime (nvidia-container-toolkit cmd/nvidia-ctk-installer/container/runtime/crio/crio.go: oci-nvidia-hook.json)
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_DROP_INS = "/etc/crio/crio.conf.d"
CRIO_HOOK_DIRS = ("/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d")
MAX_DROP_INS = 50
TOOLKIT_FILES = ("/usr/bin/nvidia-container-runtime", "/usr/bin/nvidia-container-runtime-hook",
                 "/usr/bin/nvidia-container-toolkit")
CDI_SPECS = ("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml", "/run/cdi/nvidia.yaml")
CONTAINER_MARKERS = (("/.dockerenv", "docker"), ("/run/.containerenv", "podman"))
DRIVER_PARAMS = "/proc/driver/nvidia/params"
DRIVER_REGISTRY = "/proc/driver/nvidia/registry"  # registry keys set through NVreg_RegistryDwords
MOUNTS = "/proc/self/mounts"
DF = ["df", "-P", "-l"]  # local file systems only: df on a dead NFS mount hangs


def probe_host_environment(host: Host, timeout: float) -> Probed:
    """Display setup, install routes, containers, driver parameters and storage, in one HostEnvironment."""
    from gpuhealth.model import HostEnvironment
    from gpuhealth.parsers import host_env as parse

    found = Probed()
    commands: dict[str, tuple[list[str], float]] = {
        name: (argv, timeout) for name, argv in install_route_commands().items()}
    commands.update({
        "docker": (DOCKER_INFO, min(timeout, DOCKER_TIMEOUT_S)),
        "podman": (["podman", "--version"], timeout),
        "ctk": (["nvidia-ctk", "--version"], timeout),
        "df": (DF, timeout),
    })
    runs = run_commands(host, commands, "gpuhealth-env")
    state: dict[str, Any] = install_route_evidence(host, runs, found)

    # Docker, podman and the NVIDIA Container Toolkit
    docker, daemon_json = runs["docker"], read_text(host, DAEMON_JSON)
    state["docker"] = docker.error != "not installed" or daemon_json[0] is not None
    state["podman"] = runs["podman"].error != "not installed"
    if docker.ok:
        try:
            state["docker_runtimes"] = parse.parse_docker_runtimes(docker.stdout)
            state["docker_runtimes_source"] = " ".join(DOCKER_INFO)
        except ParseError as exc:
            found.unavailable["env_docker_info"] = f"docker info: {exc}"
    elif state["docker"] and docker.error != "not installed":
        found.unavailable["env_docker_info"] = f"docker info: {why_failed(docker)}"
    if daemon_json[0] is not None:
        try:
            runtimes, default = parse.parse_daemon_json(daemon_json[0])
            state["docker_default_runtime"] = default
            state["daemon_json_runtimes"] = runtimes
            if "docker_runtimes_source" not in state:
                state["docker_runtimes"] = tuple(sorted({*runtimes, "runc"}))  # runc is built in
                state["docker_runtimes_source"] = DAEMON_JSON
        except ParseError as exc:  # dockerd will not start on it: GH802 says so
            found.unavailable["env_daemon_json"] = f"{DAEMON_JSON}: {exc}"
            state["daemon_json_error"] = str(exc)[:200]
    elif daemon_json[1] != "not present":
        found.unavailable["env_daemon_json"] = f"{DAEMON_JSON}: {daemon_json[1]}"
    ctk = runs["ctk"]
    if ctk.ok:
        try:
            state["nvidia_ctk_version"] = parse.parse_nvidia_ctk_version(ctk.text)
        except ParseError as exc:
            found.unavailable["env_nvidia_ctk"] = f"nvidia-ctk --version: {exc}"
    elif ctk.error != "not installed":
        found.unavailable["env_nvidia_ctk"] = f"nvidia-ctk --version: {why_failed(ctk)}"
    state["container_toolkit_files"] = tuple(p for p in TOOLKIT_FILES if host.stat(p).error is None)
    state.update(_containerd_runtimes(host) or _crio_runtimes(host))
    state["cdi_specs"] = tuple(p for p in CDI_SPECS if host.stat(p).error is None)

    # are we inside a container?
    for path, runtime in CONTAINER_MARKERS:
        if host.stat(path).error is None:
            state["container"], state["container_evidence"] = runtime, path
            break
    else:
        cgroup, _ = read_text(host, "/proc/1/cgroup")
        if cgroup:
            try:
                runtime = parse.container_from_cgroup(cgroup)
                if runtime:
                    state["container"], state["container_evidence"] = runtime, "/proc/1/cgroup"
            except ParseError:
                pass

    # driver parameters
    params, error = read_text(host, DRIVER_PARAMS)
    if params is None:
        found.unavailable["env_driver_params"] = f"{DRIVER_PARAMS}: {error}"
    else:
        try:
            state["driver_params"] = parse.parse_driver_params(params)
        except ParseError as exc:
            found.unavailable["env_driver_params"] = f"{DRIVER_PARAMS}: {exc}"

    registry, _ = read_text(host, DRIVER_REGISTRY)
    if registry:
        try:
            state["driver_registry"] = parse.parse_driver_params(registry)
        except ParseError:
            pass  # an empty registry (no keys set) is the common case, not an error

    # storage
    mounts, error = read_text(host, MOUNTS)
    if mounts is None:
        found.unavailable["env_mounts"] = f"{MOUNTS}: {error}"
    else:
        try:
            state["mounts"] = parse.parse_mounts(mounts)
        except ParseError as exc:
            found.unavailable["env_mounts"] = f"{MOUNTS}: {exc}"
    df = runs["df"]
    try:
        if df.stdout.strip() == "" and not df.ok:
            raise ParseError(why_failed(df))
        state["disk_space"] = parse.parse_df(df.stdout)  # df exits 1 when one mount fails: the rest count
    except ParseError as exc:
        found.unavailable["env_disk_space"] = f"{' '.join(DF)}: {exc}"

    found.fields["host_env"] = HostEnvironment(**state)
    found.sources["host_env"] = ("systemctl, /proc/cmdline, dpkg-query/rpm, /var/log/nvidia-installer.log, docker, "
                                 "nvidia-ctk, /proc/driver/nvidia/params, /proc/self/mounts, df")
    return found


def _containerd_runtimes(host: Host) -> dict[str, Any]:
    """The CRI runtimes of the first containerd configuration present (parsers/containerd.py), as a pasted one
    gives them; nothing when none is present or its CRI plugin is not set up (Docker's own containerd disables it)."""
    from gpuhealth.parsers.containerd import parse_containerd_config

    for path in CONTAINERD_CONFIGS:
        text, _ = read_text(host, path)
        if text is None:
            continue
        try:
            parsed = parse_containerd_config(text, path)
        except ParseError:
            return {}
        return {name: getattr(parsed, name) for name in CONTAINERD_FIELDS}
    return {}


def _crio_runtimes(host: Host) -> dict[str, Any]:
    """CRI-O's runtimes from crio.conf and its drop-ins, merged as CRI-O merges them, and the NVIDIA OCI hook if one
    is installed; nothing when CRI-O has no configuration here."""
    from gpuhealth.parsers.containerd import parse_crio_configs

    texts: list[str] = []
    main, _ = read_text(host, CRIO_CONFIG)
    if main is not None:
        texts.append(main)
    names = host.listdir(CRIO_DROP_INS).names or ()
    drop_ins = [f"{CRIO_DROP_INS}/{name}" for name in sorted(names)[:MAX_DROP_INS]]
    texts += [text for text, _ in (read_text(host, path) for path in drop_ins) if text is not None]
    if not texts:
        return {}
    try:
        parsed = parse_crio_configs(tuple(texts), CRIO_CONFIG + (f" and {CRIO_DROP_INS}/*" if drop_ins else ""),
                                    merged=True)
    except ParseError:
        return {}
    hooks = [f"{d}/{name}" for d in CRIO_HOOK_DIRS for name in sorted(host.listdir(d).names or ())
             if "nvidia" in name.lower() and name.endswith(".json")]
    return {**{name: getattr(parsed, name) for name in CONTAINERD_FIELDS}, "cri_nvidia_hook": hooks[0] if hooks else ""}
