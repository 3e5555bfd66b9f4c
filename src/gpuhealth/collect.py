"""Collection: ask a ``Host`` for evidence and freeze it into a ``Snapshot``.

Each probe is a small function that returns the snapshot fields it found, plus *why* any evidence is
missing. Probes are independent, so they run in parallel: nvidia-smi, NVML and the kernel log are
the slow ones, and a hung nvidia-smi must not delay the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gpuhealth.host import DEFAULT_TIMEOUT_S, Host
from gpuhealth.model import (
    CommandRun,
    NvmlReport,
    OsInfo,
    ParseError,
    PciDevice,
    Snapshot,
    from_jsonable,
    normalize_pci_address,
)
from gpuhealth.parsers.kernel_log import parse_kernel_log
from gpuhealth.parsers.lspci import parse_lspci
from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version
from gpuhealth.parsers.smi_query import parse_smi_query
from gpuhealth.parsers.system import parse_os_release, parse_proc_modules, parse_redhat_release

NVIDIA_SMI_QUERY = ["nvidia-smi", "-q"]
KERNEL_LOG_COMMANDS = (
    ["dmesg", "--time-format", "iso"],
    ["journalctl", "-k", "-b", "-o", "short-iso", "--no-pager", "-q"],
)
# Environment variables worth showing in a report; the bundle keeps all of them, secrets redacted.
RELEVANT_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "PYTORCH_", "TORCH_", "LD_LIBRARY_PATH", "PATH",
                         "CONDA_PREFIX", "VIRTUAL_ENV")


@dataclass
class Probed:
    """What one probe found: snapshot fields, reasons for missing evidence, and their sources."""

    fields: dict[str, Any] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def collect(host: Host, timeout: float = DEFAULT_TIMEOUT_S, origin: str = "live",
            captured_at: str | None = None,
            progress: Callable[[str], None] | None = None, frameworks: bool = True) -> Snapshot:
    """Run every probe against ``host`` and return the frozen snapshot.

    ``frameworks=False`` skips the PyTorch probe, which opens a CUDA context and computes on every
    GPU: right for a one-off check, wrong for a periodic one on a node running jobs.
    """
    probes: list[Callable[[Host, float], Probed]] = [
        probe_os, probe_pci, probe_driver, probe_modules, probe_device_nodes,
        probe_nvidia_smi, probe_nvml, probe_kernel_log, probe_environment, probe_install,
        probe_cuda if frameworks else probe_cuda_without_frameworks,
    ]
    merged = Probed()
    with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="gpuhealth-probe") as pool:
        futures = {pool.submit(probe, host, timeout): probe.__name__ for probe in probes}
        for future, name in futures.items():
            found = future.result()  # probes do not raise: trouble is in found.unavailable
            merged.fields.update(found.fields)
            merged.unavailable.update(found.unavailable)
            merged.sources.update(found.sources)
            if progress:
                progress(name.removeprefix("probe_"))
    return Snapshot(
        origin=origin,
        captured_at=captured_at or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        unavailable=merged.unavailable,
        sources=merged.sources,
        **merged.fields,
    )


def _text(host: Host, path: str) -> tuple[str | None, str | None]:
    content = host.read(path)
    return content.text, content.error


# --------------------------------------------------------------------------- probes


def probe_os(host: Host, timeout: float) -> Probed:
    found = Probed()
    os_info = None
    for path, parse in (("/etc/os-release", parse_os_release), ("/usr/lib/os-release", parse_os_release),
                        ("/etc/redhat-release", parse_redhat_release)):
        text, _ = _text(host, path)
        if text:
            try:
                os_info = parse(text)
                found.sources["os"] = path
                break
            except ParseError:
                continue
    release, error = _text(host, "/proc/sys/kernel/osrelease")
    version, _ = _text(host, "/proc/version")
    arch, _ = _text(host, "/proc/sys/kernel/arch")
    hostname, _ = _text(host, "/proc/sys/kernel/hostname")
    base = os_info or OsInfo()
    found.fields["os"] = OsInfo(
        id=base.id, id_like=base.id_like, version_id=base.version_id, pretty_name=base.pretty_name,
        kernel_release=release.strip() if release else None,
        kernel_version=version.strip() if version else None,
        architecture=arch.strip() if arch else None,
    )
    found.fields["hostname"] = hostname.strip() if hostname else None
    if os_info is None:
        found.unavailable["os"] = "no /etc/os-release or /etc/redhat-release"
    if release is None:
        found.unavailable["kernel"] = f"/proc/sys/kernel/osrelease: {error}"
    return found


SYS_PCI = "/sys/bus/pci/devices"


def probe_pci(host: Host, timeout: float) -> Probed:
    """NVIDIA devices from sysfs (always there on Linux), named by lspci when it is installed."""
    found = Probed()
    listing = host.listdir(SYS_PCI)
    if listing.names is None:
        found.unavailable["pci_devices"] = f"{SYS_PCI}: {listing.error}"
        return found
    devices = []
    for address in listing.names:
        vendor, _ = _text(host, f"{SYS_PCI}/{address}/vendor")
        if vendor and vendor.strip().lower() == "0x10de":
            devices.append(_sysfs_device(host, address))
    names = _lspci_names(host, timeout) if devices else {}
    found.fields["pci_devices"] = tuple(
        PciDevice(**{**vars(d), "name": names.get(d.address)}) for d in devices)
    found.sources["pci_devices"] = SYS_PCI
    return found


def _sysfs_device(host: Host, address: str) -> PciDevice:
    base = f"{SYS_PCI}/{address}"

    def attr(name: str) -> str | None:
        text, _ = _text(host, f"{base}/{name}")
        return text.strip() if text and text.strip() else None

    def hex4(value: str | None) -> str | None:
        return value.lower().removeprefix("0x")[:4] if value else None

    def width(value: str | None) -> int | None:
        return int(value) if value and value.isdigit() else None

    driver_link = host.readlink(f"{base}/driver")
    return PciDevice(
        address=normalize_pci_address(address) or address,
        vendor_id="10de",
        device_id=hex4(attr("device")) or "",
        class_code=hex4(attr("class")),
        subsystem_vendor_id=hex4(attr("subsystem_vendor")),
        subsystem_device_id=hex4(attr("subsystem_device")),
        kernel_driver=driver_link.rsplit("/", 1)[-1] if driver_link else None,
        link_speed_current=_speed(attr("current_link_speed")),
        link_speed_max=_speed(attr("max_link_speed")),
        link_width_current=width(attr("current_link_width")),
        link_width_max=width(attr("max_link_width")),
    )


def _speed(value: str | None) -> str | None:
    """``16.0 GT/s PCIe`` (new kernels) and ``16 GT/s`` (old) both become ``16.0 GT/s``."""
    if not value or "GT/s" not in value:
        return None
    number = value.split("GT/s")[0].strip()
    try:
        return f"{float(number):.1f} GT/s"
    except ValueError:
        return None


def _lspci_names(host: Host, timeout: float) -> dict[str, str]:
    run = host.run(["lspci", "-nn", "-D", "-d", "10de:"], timeout)
    if not run.ok:
        return {}
    try:
        return {d.address: d.name for d in parse_lspci(run.stdout) if d.name}
    except ParseError:
        return {}


def probe_driver(host: Host, timeout: float) -> Probed:
    path = "/proc/driver/nvidia/version"
    found = Probed()
    text, error = _text(host, path)
    if text is None:
        reason = ("not present: the nvidia kernel module is not loaded" if error == "not present"
                  else error)
        found.unavailable["driver"] = f"{path}: {reason}"
        return found
    try:
        found.fields["driver"] = parse_proc_driver_version(text)
        found.sources["driver"] = path
    except ParseError as exc:
        found.unavailable["driver"] = f"could not parse {path}: {exc}"
    return found


def probe_modules(host: Host, timeout: float) -> Probed:
    found = Probed()
    text, error = _text(host, "/proc/modules")
    if text is None:
        found.unavailable["kernel_modules"] = f"/proc/modules: {error}"
        return found
    try:
        found.fields["kernel_modules"] = parse_proc_modules(text)
        found.sources["kernel_modules"] = "/proc/modules"
    except ParseError as exc:
        found.unavailable["kernel_modules"] = f"could not parse /proc/modules: {exc}"
    return found


def probe_device_nodes(host: Host, timeout: float) -> Probed:
    found = Probed()
    listing = host.listdir("/dev")
    if listing.names is None:
        found.unavailable["device_nodes"] = f"/dev: {listing.error}"
    else:
        found.fields["device_nodes"] = tuple(n for n in listing.names if n.startswith("nvidia"))
        found.sources["device_nodes"] = "/dev"
    return found


def probe_nvidia_smi(host: Host, timeout: float) -> Probed:
    found = Probed()
    run = host.run(NVIDIA_SMI_QUERY, timeout)
    found.fields["smi_run"] = _trimmed(run)
    source = " ".join(NVIDIA_SMI_QUERY)
    if run.error == "not installed":
        found.unavailable["smi"] = "nvidia-smi is not installed (it comes with the NVIDIA driver)"
    elif run.timed_out:
        found.unavailable["smi"] = f"{source} {run.error}"
    elif run.exit_code != 0:
        first = (run.stdout.strip() or run.stderr.strip()).splitlines()[:1]
        found.unavailable["smi"] = f"{source} failed (exit {run.exit_code}): {first[0] if first else ''}"
    else:
        try:
            found.fields["smi"] = parse_smi_query(run.stdout)
            found.sources["smi"] = source
        except ParseError as exc:
            found.unavailable["smi"] = f"could not parse {source} output: {exc}"
    return found


def _trimmed(run: CommandRun) -> CommandRun:
    """The snapshot keeps a failed command's output (the message matters), not a long healthy one."""
    if run.ok:
        return CommandRun(run.argv, run.exit_code, "", run.stderr[:4000], run.duration_s, False, None)
    return CommandRun(run.argv, run.exit_code, run.stdout[:4000], run.stderr[:4000], run.duration_s,
                      run.timed_out, run.error)


def probe_nvml(host: Host, timeout: float) -> Probed:
    found = Probed()
    try:
        report = from_jsonable(NvmlReport, host.nvml())
    except ParseError as exc:
        found.unavailable["nvml"] = f"NVML answer unreadable: {exc}"
        return found
    found.fields["nvml"] = report
    found.sources["nvml"] = "NVML (nvidia-ml-py)"
    return found


def probe_kernel_log(host: Host, timeout: float) -> Probed:
    found = Probed()
    reasons = []
    for argv in KERNEL_LOG_COMMANDS:
        run = host.run(argv, timeout)
        source = " ".join(argv)
        if run.ok and run.stdout.strip():
            try:
                found.fields["kernel_log"] = parse_kernel_log(run.stdout, source)
                found.sources["kernel_log"] = source
                return found
            except ParseError as exc:
                reasons.append(f"{source}: {exc}")
                continue
        detail = run.error or (run.stderr.strip().splitlines() or [f"exit {run.exit_code}"])[0]
        reasons.append(f"{argv[0]}: {detail}")
    found.unavailable["kernel_log"] = (
        "kernel log not readable (" + "; ".join(reasons) + "): run as root, or add the user to "
        "group adm (dmesg) or systemd-journal (journalctl)")
    return found


def probe_environment(host: Host, timeout: float) -> Probed:
    env = host.environment()
    relevant = {k: v for k, v in env.items() if k.startswith(RELEVANT_ENV_PREFIXES)}
    return Probed(fields={"env": relevant})


# --------------------------------------------------------------------------- install readiness (GH5xx)

MODPROBE_DIRS = ("/etc/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")
SECURE_BOOT_EFIVAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
# Where packages and installers put nvidia.ko for a kernel, relative to /lib/modules/<release>.
NVIDIA_MODULE_DIRS = ("updates/dkms", "kernel/drivers/video", "extra", "extra/nvidia", "extra/drivers/video/nvidia",
                      "weak-updates", "weak-updates/nvidia", "updates")
_NVIDIA_KO = ("nvidia.ko", "nvidia.ko.xz", "nvidia.ko.zst", "nvidia.ko.gz")
_UNKNOWN_ANSWERS = ("not captured in this bundle", "permission denied")


def probe_install(host: Host, timeout: float) -> Probed:
    """What installing or rebuilding the driver needs: nouveau disabled (modprobe.d, initramfs), kernel
    headers, gcc/make, Secure Boot, DKMS, and an nvidia module for every installed kernel."""
    from gpuhealth.model import InstallState, ModprobeFile
    from gpuhealth.parsers import install as parse
    from gpuhealth.parsers.system import parse_modprobe_blacklist

    found = Probed()
    release_text, error = _text(host, "/proc/sys/kernel/osrelease")
    release = release_text.strip() if release_text and release_text.strip() else None
    if release is None:
        found.unavailable["install_kernel"] = f"/proc/sys/kernel/osrelease: {error}"
    commands: dict[str, list[str]] = {
        "gcc": ["gcc", "--version"], "make": ["make", "--version"], "mokutil": ["mokutil", "--sb-state"],
        "dkms": ["dkms", "status"], "modinfo": ["modinfo", "nvidia"],
    }
    boot = host.listdir("/boot")
    initramfs = _initramfs_path(boot.names or (), release)
    if initramfs:
        lister = "lsinitramfs" if "/initrd.img-" in initramfs else "lsinitrd"
        commands["initramfs"] = [lister, initramfs]
    with ThreadPoolExecutor(max_workers=len(commands), thread_name_prefix="gpuhealth-install") as pool:
        futures = {name: pool.submit(host.run, argv, timeout) for name, argv in commands.items()}
        runs = {name: future.result() for name, future in futures.items()}
    state: dict[str, Any] = {"kernel_release": release}

    # modprobe.d files and the kernel command line
    dirs, files = [], []
    merged_usr = host.readlink("/lib") in ("usr/lib", "/usr/lib")
    for directory in MODPROBE_DIRS:
        if merged_usr and directory == "/lib/modprobe.d":
            continue  # the same folder as /usr/lib/modprobe.d
        listing = host.listdir(directory)
        if listing.names is None and listing.error != "not present":
            found.unavailable["install_modprobe"] = f"{directory}: {listing.error}"
            continue
        dirs.append(directory)  # an absent directory is an answer: no files there
        for name in listing.names or ():
            if not name.endswith(".conf"):
                continue
            path = f"{directory}/{name}"
            text, _ = _text(host, path)
            if text is None:
                continue
            try:
                blacklisted, options = parse_modprobe_blacklist(text)
            except ParseError:
                continue
            if "nouveau" in blacklisted or "nouveau" in options:
                files.append(ModprobeFile(path, blacklisted, options.get("nouveau"), host.stat(path).mtime))
            elif blacklisted:
                files.append(ModprobeFile(path, blacklisted))
    state["modprobe_dirs"] = tuple(dirs)
    state["modprobe_files"] = tuple(files)
    cmdline, _ = _text(host, "/proc/cmdline")
    if cmdline:
        try:
            blacklisted, options = parse.parse_kernel_cmdline_modules(cmdline)
            state["kernel_cmdline_blacklisted"] = blacklisted
            state["kernel_cmdline_nouveau_options"] = options.get("nouveau")
        except ParseError:
            pass

    # the initramfs of the running kernel
    if boot.names is None:
        found.unavailable["install_initramfs"] = f"/boot: {boot.error}"
    elif initramfs is None:
        found.unavailable["install_initramfs"] = f"no initramfs for kernel {release or '?'} in /boot"
    else:
        state["initramfs_path"] = initramfs
        state["initramfs_mtime"] = host.stat(initramfs).mtime
        run = runs["initramfs"]
        try:
            if not run.ok:
                raise ParseError(run.error or f"exit {run.exit_code}")
            state["initramfs_has_nouveau"], state["initramfs_modprobe_files"] = parse.parse_initramfs_listing(
                run.stdout)
        except ParseError as exc:
            found.unavailable["install_initramfs_listing"] = f"{' '.join(run.argv)}: {exc}"

    # kernel headers
    if release:
        build = f"/lib/modules/{release}/build"
        target = host.readlink(build)
        build_stat = host.stat(build)
        rhel_stat = host.stat(f"/usr/src/kernels/{release}")
        state["headers_target"] = target
        if build_stat.is_dir or rhel_stat.is_dir:
            state["headers_present"] = True
            state["headers_path"] = build if build_stat.is_dir else f"/usr/src/kernels/{release}"
        elif build_stat.error in _UNKNOWN_ANSWERS or rhel_stat.error in _UNKNOWN_ANSWERS:
            found.unavailable["install_headers"] = f"{build}: {build_stat.error or rhel_stat.error}"
        else:
            modules = host.listdir("/lib/modules")
            if modules.names is not None and release in modules.names:
                state["headers_present"] = False
                state["headers_path"] = build
            else:
                found.unavailable["install_headers"] = (
                    f"/lib/modules/{release}: {modules.error or 'not present'}")

    # compiler, make, and the compiler that built the kernel
    for tool in ("gcc", "make"):
        run = runs[tool]
        if run.error == "not installed":
            state[f"{tool}_present"] = False
        elif run.ok or run.exit_code is not None:
            state[f"{tool}_present"] = True
        else:
            found.unavailable[f"install_{tool}"] = f"{' '.join(run.argv)}: {run.error}"
    if runs["gcc"].ok:
        try:
            state["gcc_version"], state["gcc_banner"] = parse.parse_gcc_version(runs["gcc"].stdout)
        except ParseError:
            state["gcc_banner"] = (runs["gcc"].stdout.strip().splitlines() or [None])[0]
    proc_version, _ = _text(host, "/proc/version")
    if proc_version:
        try:
            state["kernel_compiler"] = parse.parse_kernel_compiler(proc_version)
        except ParseError:
            pass

    # Secure Boot and the module's signature
    state.update(_secure_boot(host, runs["mokutil"], found))
    modinfo = runs["modinfo"]
    if modinfo.ok:
        try:
            fields = parse.parse_modinfo(modinfo.stdout)
            state["module_file"] = fields["filename"]
            state["module_signer"] = fields.get("signer", "")
        except ParseError:
            pass

    # DKMS and the installed kernels
    dkms = runs["dkms"]
    if dkms.error == "not installed":
        state["dkms_present"] = False
    elif dkms.ok:
        try:
            state["dkms"] = parse.parse_dkms_status(dkms.stdout)
            state["dkms_present"] = True
        except ParseError as exc:
            found.unavailable["install_dkms"] = f"dkms status: {exc}"
    else:
        found.unavailable["install_dkms"] = f"dkms status: {dkms.error or f'exit {dkms.exit_code}'}"
    kernels = _installed_kernels(host, release, boot.names, state.get("dkms", ()), state.get("module_file"))
    if kernels is None:
        found.unavailable["install_kernels"] = f"/lib/modules: {host.listdir('/lib/modules').error}"
    else:
        state["kernels"] = kernels

    found.fields["install"] = InstallState(**state)
    found.sources["install"] = "/etc/modprobe.d, /boot, /lib/modules, gcc, make, mokutil, dkms, modinfo"
    return found


def _initramfs_path(boot: tuple[str, ...], release: str | None) -> str | None:
    if not release:
        return None
    for name in (f"initrd.img-{release}", f"initramfs-{release}.img"):
        if name in boot:
            return f"/boot/{name}"
    return None


def _secure_boot(host: Host, mokutil: CommandRun, found: Probed) -> dict[str, Any]:
    from gpuhealth.parsers.install import parse_mokutil_sb_state, secure_boot_from_efivar

    try:
        return {"secure_boot": parse_mokutil_sb_state(mokutil.text), "secure_boot_source": "mokutil --sb-state"}
    except ParseError:
        pass
    content = host.read(SECURE_BOOT_EFIVAR)
    if content.data is not None:
        try:
            return {"secure_boot": secure_boot_from_efivar(content.data), "secure_boot_source": SECURE_BOOT_EFIVAR}
        except ParseError as exc:
            found.unavailable["install_secure_boot"] = f"{SECURE_BOOT_EFIVAR}: {exc}"
            return {}
    if content.error == "not present" and host.listdir("/sys/firmware/efi").error == "not present":
        return {"secure_boot": "unsupported", "secure_boot_source": "/sys/firmware/efi (absent: legacy BIOS boot)"}
    found.unavailable["install_secure_boot"] = (
        f"mokutil --sb-state: {mokutil.error or 'no answer'}; {SECURE_BOOT_EFIVAR}: {content.error}")
    return {}


def _installed_kernels(host: Host, running: str | None, boot: tuple[str, ...] | None,
                       dkms: tuple[Any, ...], module_file: str | None) -> tuple[Any, ...] | None:
    """Kernels under /lib/modules (with a /boot/vmlinuz-<release> when /boot could be listed).

    Besides the usual places, the folder modinfo found the running kernel's nvidia.ko in is looked at
    in every kernel (Ubuntu's precompiled modules live in kernel/nvidia-<branch>/).
    """
    from gpuhealth.model import InstalledKernel

    listing = host.listdir("/lib/modules")
    if listing.names is None:
        return None
    subdirs = list(NVIDIA_MODULE_DIRS)
    prefix = f"/lib/modules/{running}/"
    if running and module_file and module_file.startswith(prefix) and "/" in module_file[len(prefix):]:
        own = module_file[len(prefix):].rsplit("/", 1)[0]
        if own not in subdirs:
            subdirs.insert(0, own)
    kernels = []
    for release in listing.names:
        if boot is not None and f"vmlinuz-{release}" not in boot and release != running:
            continue  # modules left behind by a removed kernel
        module = None
        for sub in subdirs:
            names = host.listdir(f"/lib/modules/{release}/{sub}").names or ()
            hit = next((n for n in names if n in _NVIDIA_KO), None)
            if hit:
                module = f"/lib/modules/{release}/{sub}/{hit}"
                break
        if module is None and any(e.module == "nvidia" and e.kernel == release and e.installed for e in dkms):
            module = "dkms: installed"
        kernels.append(InstalledKernel(release, module, release == running))
    return tuple(kernels)


# --------------------------------------------------------------------------- after the install (GH6xx)

TORCH_PROBE_TIMEOUT_S = 60.0  # the first CUDA call initialises every GPU: slow without persistence mode
TORCH_PROBE_LABEL = "python3 -c <gpuhealth torch probe>"


def probe_cuda_without_frameworks(host: Host, timeout: float) -> Probed:
    return probe_cuda(host, timeout, frameworks=False)


def probe_cuda(host: Host, timeout: float, frameworks: bool = True) -> Probed:
    """CUDA toolkits under /usr/local, nvcc on PATH, the library path and ld.so.conf, the libcuda the
    loader resolves, nvidia-persistenced, and a PyTorch probe run by the host's python3."""
    from gpuhealth.model import CudaState, LdConfEntry
    from gpuhealth.parsers import cuda as parse

    found = Probed()
    commands: dict[str, tuple[list[str], float]] = {
        "nvcc": (["nvcc", "--version"], timeout),
        "ldconfig": (["ldconfig", "-p"], timeout),
        "active": (["systemctl", "is-active", "nvidia-persistenced"], timeout),
        "enabled": (["systemctl", "is-enabled", "nvidia-persistenced"], timeout),
    }
    if frameworks:
        commands["torch"] = (["python3", "-c", parse.TORCH_PROBE_SCRIPT], max(timeout, TORCH_PROBE_TIMEOUT_S))
    with ThreadPoolExecutor(max_workers=len(commands), thread_name_prefix="gpuhealth-cuda") as pool:
        futures = {name: pool.submit(host.run, argv, limit) for name, (argv, limit) in commands.items()}
        runs = {name: future.result() for name, future in futures.items()}
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
    arch, _ = _text(host, "/proc/sys/kernel/arch")
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
    found.sources["cuda"] = "/usr/local/cuda*, nvcc, LD_LIBRARY_PATH, /etc/ld.so.conf.d, ldconfig -p, systemctl"
    return found


def _toolkit(host: Host, path: str) -> Any:
    """A toolkit directory and its version: version.json (11.1+), version.txt (older), else its name."""
    from gpuhealth.model import CudaToolkit
    from gpuhealth.parsers import cuda as parse

    readers = (("version.json", parse.parse_cuda_version_json), ("version.txt", parse.parse_cuda_version_txt))
    for name, reader in readers:
        text, _ = _text(host, f"{path}/{name}")
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
        text, _ = _text(host, path)
        if text is None:
            continue
        try:
            entries += [(path, d) for d in parse_ld_so_conf(text) if "cuda" in d.lower()]
        except ParseError:
            continue
    return entries
