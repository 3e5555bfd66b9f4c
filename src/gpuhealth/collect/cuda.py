"""Probes after the install (GH6xx): CUDA toolkits, the loader's libcuda, persistence, PyTorch."""

from __future__ import annotations

from typing import Any

from gpuhealth.collect.base import Probed, read_text, run_commands
from gpuhealth.host import Host
from gpuhealth.lazyre import guarded_re
from gpuhealth.model import (
    CommandRun,
    ParseError,
)

TORCH_PROBE_TIMEOUT_S = 60.0  # the first CUDA call initialises every GPU: slow without persistence mode
TORCH_PROBE_LABEL = "python3 -c <gpuhealth torch probe>"


def probe_cuda_without_frameworks(host: Host, timeout: float) -> Probed:
    return probe_cuda(host, timeout, frameworks=False)


def probe_cuda(host: Host, timeout: float, frameworks: bool = True, probe_timeout: float | None = None) -> Probed:
    """CUDA toolkits under /usr/local, nvcc on PATH, the library path and ld.so.conf, the libcuda the
    loader resolves, nvidia-persistenced, and a PyTorch probe run by the host's python3.

    The probe gets ``probe_timeout`` when given (``check --timeout``: it bounds every command), else
    ``max(timeout, TORCH_PROBE_TIMEOUT_S)``: the first CUDA call initialises every GPU."""
    from gpuhealth.model import CudaState, LdConfEntry
    from gpuhealth.parsers import cuda as parse

    found = Probed()
    commands: dict[str, tuple[list[str], float]] = {
        "nvcc": (["nvcc", "--version"], timeout),
        "ldconfig": (["ldconfig", "-p"], timeout),
        "active": (["systemctl", "is-active", "nvidia-persistenced"], timeout),
        "enabled": (["systemctl", "is-enabled", "nvidia-persistenced"], timeout),
        "show": (PERSISTENCED_SHOW, timeout),
    }
    if frameworks:
        commands["torch"] = (["python3", "-c", parse.TORCH_PROBE_SCRIPT],
                             probe_timeout if probe_timeout is not None else max(timeout, TORCH_PROBE_TIMEOUT_S))
    runs = run_commands(host, commands, "gpuhealth-cuda")
    state: dict[str, Any] = {}

    # toolkits under /usr/local and where /usr/local/cuda points
    local = host.listdir("/usr/local")
    if local.names is None and local.error != "not present":
        found.unavailable["cuda_toolkits"] = f"/usr/local: {local.error}"
    toolkits = []
    for name in local.names or ():
        if not name.startswith("cuda-"):
            continue
        path = f"/usr/local/{name}"
        if host.readlink(path) is not None:
            continue  # cuda-12 -> /etc/alternatives/cuda-12: a link to a toolkit listed under its own name
        toolkits.append(_toolkit(host, path))
    default = host.readlink("/usr/local/cuda")
    if default is not None and default.startswith("/etc/alternatives/"):
        default = host.readlink(default) or default
    if default is not None and not default.startswith("/"):
        default = f"/usr/local/{default}"
    if default is None and "cuda" in (local.names or ()):
        default = "/usr/local/cuda"  # a directory, not a link: a toolkit installed there directly
        toolkits.append(_toolkit(host, default))
    state["toolkits"] = tuple(toolkits)
    state["default_link"] = default

    # nvcc on PATH
    nvcc = runs["nvcc"]
    if nvcc.ok:
        try:
            state["nvcc_release"], state["nvcc_version"] = parse.parse_nvcc_version(nvcc.stdout)
        except ParseError as exc:
            found.unavailable["cuda_nvcc"] = f"nvcc --version: {exc}"
    elif nvcc.error != "not installed":
        found.unavailable["cuda_nvcc"] = f"nvcc --version: {nvcc.error or f'exit {nvcc.exit_code}'}"

    # the library path, ld.so.conf and the loader's cache
    env = host.environment()
    state["ld_library_path"] = tuple(p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p)
    state["ld_so_conf"] = tuple(LdConfEntry(f, d) for f, d in _ld_so_conf(host, found))
    ldconfig = runs["ldconfig"]
    if ldconfig.error == "not installed":
        ldconfig = host.run(["/sbin/ldconfig", "-p"], timeout)  # /sbin is not on every user's PATH
    if ldconfig.ok:
        try:
            state["libraries"] = parse.parse_ldconfig(ldconfig.stdout)
        except ParseError as exc:
            found.unavailable["cuda_ldconfig"] = f"ldconfig -p: {exc}"
    else:
        found.unavailable["cuda_ldconfig"] = f"ldconfig -p: {ldconfig.error or f'exit {ldconfig.exit_code}'}"
    arch, _ = read_text(host, "/proc/sys/kernel/arch")
    libcuda = parse.resolve_libcuda(state.get("libraries", ()), arch.strip() if arch else None)
    if libcuda is not None:
        state["libcuda_path"] = libcuda.path
        target = host.readlink(libcuda.path)
        state["libcuda_target"] = target
        state["libcuda_version"] = parse.libcuda_version(target)

    # nvidia-persistenced
    for key, name in (("active", "persistenced_active"), ("enabled", "persistenced_enabled")):
        run = runs[key]
        try:
            state[name] = parse.parse_systemctl_state(run.text)
        except ParseError:
            detail = run.error or (run.text.strip().splitlines() or [f"exit {run.exit_code}"])[0]
            found.unavailable[f"cuda_{name}"] = f"{' '.join(run.argv)}: {detail}"
    state.update(_persistenced_command(host, runs["show"], state.get("persistenced_active"), found))

    # GSP firmware for the loaded module's version
    state.update(_gsp_firmware(host, found))

    # PyTorch, as the host's python3 sees it
    run = runs.get("torch")
    if run is None:
        found.unavailable["torch"] = "the PyTorch probe was not run (--no-frameworks)"
    elif run.error == "not installed":
        found.unavailable["torch"] = "python3 is not on PATH: PyTorch was not probed"
    elif run.timed_out:
        found.unavailable["torch"] = f"{TORCH_PROBE_LABEL} {run.error}"
        state["torch_probe_error"] = run.error
    else:
        try:
            found.fields["torch"] = parse.parse_torch_probe(run.stdout)
            found.sources["torch"] = TORCH_PROBE_LABEL
        except ParseError as exc:
            last = (run.stderr.strip().splitlines() or [str(exc)])[-1]
            found.unavailable["torch"] = f"{TORCH_PROBE_LABEL} failed (exit {run.exit_code}): {last}"
            state["torch_probe_error"] = f"exit {run.exit_code}: {last}"

    found.fields["cuda"] = CudaState(**state)
    found.sources["cuda"] = ("/usr/local/cuda*, nvcc, LD_LIBRARY_PATH, /etc/ld.so.conf.d, ldconfig -p, systemctl, "
                             "/lib/firmware/nvidia")
    return found


# The running daemon's command line (GH604: --no-persistence-mode forces persistence off while the daemon runs).
# Its MainPID and ExecStart come from one command with the probes' deadline, then one file is read:
# /proc/<MainPID>/cmdline. Not a scan of /proc for a process of that name: its cost grows with the host's processes,
# and a snapshot bundle records every file read, so it would carry every process's name (bundles are shared).
PERSISTENCED_SHOW = ["systemctl", "show", "-p", "MainPID", "-p", "ExecStart", "nvidia-persistenced"]


def _persistenced_command(host: Host, show: CommandRun, active: str | None, found: Probed) -> dict[str, Any]:
    """``persistenced_command`` and where it was read: the process's own ``/proc/<MainPID>/cmdline`` (what runs, even
    after the unit was edited without a restart), else the unit's ExecStart from ``systemctl show``. Only for an
    active daemon: a daemon that does not run has no command line to judge."""
    from gpuhealth.parsers import services

    if active != "active":
        return {}
    label = " ".join(PERSISTENCED_SHOW)
    if not show.ok:
        detail = show.error or (show.text.strip().splitlines() or [f"exit {show.exit_code}"])[0]
        found.unavailable["cuda_persistenced_command"] = f"{label}: {detail}"
        return {}
    try:
        properties = services.parse_systemctl_show(show.stdout)
    except ParseError as exc:
        found.unavailable["cuda_persistenced_command"] = f"{label}: {exc}"
        return {}
    pid = properties.get("MainPID", "")
    if pid.isdigit() and int(pid) > 0:
        path = f"/proc/{int(pid)}/cmdline"
        content = host.read(path)
        command = services.proc_cmdline(content.data) if content.data is not None else None
        if command and services.runs_persistenced(command):
            return {"persistenced_command": command, "persistenced_command_source": f"{path} (the unit's MainPID)"}
        why = (f"{path}: {content.error}" if content.error else
               f"{path} is another program's (the daemon's process ended)" if command else f"{path} is empty")
    else:
        why = "systemctl show gives no MainPID"
    configured = services.exec_start_command(properties.get("ExecStart", ""))
    if configured:
        return {"persistenced_command": configured,
                "persistenced_command_source": f"systemctl show -p ExecStart nvidia-persistenced ({why})"}
    found.unavailable["cuda_persistenced_command"] = f"{why}; {label} names no ExecStart"
    return {}


FIRMWARE_DIRS = ("/lib/firmware/nvidia", "/usr/lib/firmware/nvidia", "/lib/firmware/updates/nvidia")
_GSP_FILE = guarded_re(r"^gsp[\w.-]*\.bin(?:\.(?:xz|zst|gz))?$",
                       may=lambda name: name.startswith("gsp") and ".bin" in name)


def _gsp_firmware(host: Host, found: Probed) -> dict[str, Any]:
    """The ``gsp*.bin`` files under ``/lib/firmware/nvidia/<version>/`` for the loaded module's version (read
    from ``/proc/driver/nvidia/version`` again: probes run in parallel), and which versions have a folder."""
    from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version

    text, error = read_text(host, "/proc/driver/nvidia/version")
    if text is None:
        found.unavailable["cuda_gsp_firmware"] = (
            "the nvidia module is not loaded: no driver version to look up GSP firmware for"
            if error == "not present" else f"/proc/driver/nvidia/version: {error}")
        return {}
    try:
        version = parse_proc_driver_version(text).version
    except ParseError as exc:
        found.unavailable["cuda_gsp_firmware"] = f"/proc/driver/nvidia/version: {exc}"
        return {}
    state: dict[str, Any] = {"gsp_driver_version": version}
    versions: list[str] = []
    errors: list[str] = []
    for base in FIRMWARE_DIRS:
        listing = host.listdir(base)
        if listing.names is None:
            if listing.error != "not present":
                errors.append(f"{base}: {listing.error}")
            continue
        versions += [n for n in listing.names if n not in versions]
        if version not in listing.names or "gsp_firmware_dir" in state:
            continue
        folder = host.listdir(f"{base}/{version}")
        if folder.names is None:
            errors.append(f"{base}/{version}: {folder.error}")
            continue
        state["gsp_firmware_dir"] = f"{base}/{version}"
        state["gsp_firmware_files"] = tuple(sorted(n for n in folder.names if _GSP_FILE.match(n)))
    state["gsp_firmware_versions"] = tuple(sorted(versions))
    if errors and not state.get("gsp_firmware_files"):
        found.unavailable["cuda_gsp_firmware"] = "; ".join(errors)
    return state


def _toolkit(host: Host, path: str) -> Any:
    """A toolkit directory and its version: version.json (11.1+), version.txt (older), else its name."""
    from gpuhealth.model import CudaToolkit
    from gpuhealth.parsers import cuda as parse

    readers = (("version.json", parse.parse_cuda_version_json), ("version.txt", parse.parse_cuda_version_txt))
    for name, reader in readers:
        text, _ = read_text(host, f"{path}/{name}")
        if text is not None:
            try:
                return CudaToolkit(path, reader(text), f"{path}/{name}")
            except ParseError:
                continue
    named = parse.cuda_version_in_path(path)
    return CudaToolkit(path, named, "directory name" if named else None)


def _ld_so_conf(host: Host, found: Probed) -> list[tuple[str, str]]:
    """(file, directory) for every directory naming CUDA in /etc/ld.so.conf and /etc/ld.so.conf.d/*.conf."""
    from gpuhealth.parsers.cuda import parse_ld_so_conf

    files = ["/etc/ld.so.conf"]
    listing = host.listdir("/etc/ld.so.conf.d")
    if listing.names is None and listing.error != "not present":
        found.unavailable["cuda_ld_so_conf"] = f"/etc/ld.so.conf.d: {listing.error}"
    files += [f"/etc/ld.so.conf.d/{n}" for n in listing.names or () if n.endswith(".conf")]
    entries = []
    for path in files:
        text, _ = read_text(host, path)
        if text is None:
            continue
        try:
            entries += [(path, d) for d in parse_ld_so_conf(text) if "cuda" in d.lower()]
        except ParseError:
            continue
    return entries
