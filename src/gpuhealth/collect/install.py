"""Probes of install readiness (GH5xx): nouveau, initramfs, headers, compilers, Secure Boot, DKMS."""

from __future__ import annotations

from typing import Any

from gpuhealth.collect.base import Probed, read_text, run_commands
from gpuhealth.host import Host
from gpuhealth.model import (
    CommandRun,
    ParseError,
)

MODPROBE_DIRS = ("/etc/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")
SECURE_BOOT_EFIVAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
# Where packages and installers put nvidia.ko for a kernel, relative to /lib/modules/<release>.
NVIDIA_MODULE_DIRS = ("updates/dkms", "kernel/drivers/video", "extra", "extra/nvidia", "extra/drivers/video/nvidia",
                      "weak-updates", "weak-updates/nvidia", "updates")
_NVIDIA_KO = ("nvidia.ko", "nvidia.ko.xz", "nvidia.ko.zst", "nvidia.ko.gz")
_UNKNOWN_ANSWERS = ("not captured in this bundle", "permission denied")
# Where the module-building tools keep the certificate they sign modules with: DKMS's default mok_certificate
# (dkms 3, also Debian/Ubuntu's dkms), Ubuntu's shim-signed key (update-secureboot-policy), Fedora's akmods
# (kmodgenca). `mokutil --test-key` says whether shim trusts it (GH506).
SIGNING_KEYS = ("/var/lib/dkms/mok.pub", "/var/lib/shim-signed/mok/MOK.der", "/etc/pki/akmods/certs/public_key.der")


def probe_install(host: Host, timeout: float) -> Probed:
    """What installing or rebuilding the driver needs: nouveau disabled (modprobe.d, initramfs), kernel
    headers, gcc/make, Secure Boot, DKMS, and an nvidia module for every installed kernel."""
    from gpuhealth.model import InstallState, ModprobeFile
    from gpuhealth.parsers import install as parse
    from gpuhealth.parsers.system import parse_modprobe_blacklist

    found = Probed()
    release_text, error = read_text(host, "/proc/sys/kernel/osrelease")
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
    runs = run_commands(host, {name: (argv, timeout) for name, argv in commands.items()}, "gpuhealth-install")
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
            text, _ = read_text(host, path)
            if text is None:
                continue
            try:
                blacklisted, options = parse_modprobe_blacklist(text)
            except ParseError:
                continue
            if "nouveau" in blacklisted or "nouveau" in options:
                files.append(ModprobeFile(path, blacklisted, nouveau_options=options.get("nouveau"),
                                          mtime=host.stat(path).mtime))
            elif blacklisted:
                files.append(ModprobeFile(path, blacklisted))
    state["modprobe_dirs"] = tuple(dirs)
    state["modprobe_files"] = tuple(files)
    cmdline, _ = read_text(host, "/proc/cmdline")
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
    proc_version, _ = read_text(host, "/proc/version")
    if proc_version:
        try:
            state["kernel_compiler"] = parse.parse_kernel_compiler(proc_version)
        except ParseError:
            pass

    # Secure Boot and the module's signature
    state.update(_secure_boot(host, runs["mokutil"], found))
    if state.get("secure_boot") == "enabled":
        state.update(_signing_key(host, timeout, found))
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


def _signing_key(host: Host, timeout: float, found: Probed) -> dict[str, Any]:
    """``mokutil --test-key`` on each module-signing certificate present: run only under Secure Boot (elsewhere no
    key is checked) and only for a key on disk, each with the probes' deadline; recorded like every command."""
    from gpuhealth.parsers.install import least_trusted_key

    keys = [path for path in SIGNING_KEYS if (info := host.stat(path)).error is None and not info.is_dir]
    if not keys:
        return {}
    runs = run_commands(host, {path: (["mokutil", "--test-key", path], timeout) for path in keys}, "gpuhealth-mokutil")
    # "<KEY> is not enrolled" comes with exit 1: the answer is in the output, not the exit status
    lines = [line for path in keys for line in (runs[path].stdout + "\n" + runs[path].stderr).splitlines()]
    answer = least_trusted_key(lines)
    if answer is None:
        found.unavailable["install_signing_key"] = "; ".join(
            f"mokutil --test-key {path}: {runs[path].error or f'exit {runs[path].exit_code}, no answer'}"
            for path in keys)
        return {}
    key, key_state, line = answer
    return {"signing_key": key, "signing_key_state": key_state, "signing_key_line": line,
            "signing_key_source": f"mokutil --test-key {key}"}


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


# --------------------------------------------------------------------------- display and install route (GH508/GH509)

INSTALLER_LOG = "/var/log/nvidia-installer.log"
RUNFILE_UNINSTALLER = "/usr/bin/nvidia-uninstall"
# NVIDIA's GLX/EGL vendor libraries: present when the driver was installed with its OpenGL files.
GL_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
GL_LIBRARIES = ("libGLX_nvidia.so.0", "libEGL_nvidia.so.0")
PACKAGE_PATTERNS = ("*nvidia*", "cuda-drivers*")
DPKG_QUERY = ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package} ${Version}\\n", *PACKAGE_PATTERNS]
RPM_QUERY = ["rpm", "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\\n", *PACKAGE_PATTERNS]


def install_route_commands() -> dict[str, list[str]]:
    """The commands ``install_route_evidence`` reads, by name: run with the other host-environment ones."""
    return {"default_target": ["systemctl", "get-default"],
            "display_manager": ["systemctl", "is-active", "display-manager"],
            "dpkg": DPKG_QUERY, "rpm": RPM_QUERY}


def install_route_evidence(host: Host, runs: dict[str, CommandRun], found: Probed) -> dict[str, Any]:
    """HostEnvironment fields for the display setup and the ways the driver was installed: the default
    systemd target, the display manager, /proc/cmdline, NVIDIA's GL libraries, the .run installer's
    log and uninstaller, and nvidia packages from dpkg or rpm."""
    from gpuhealth.parsers import host_env as parse
    from gpuhealth.parsers.cuda import parse_systemctl_state

    state: dict[str, Any] = {}
    run = runs["default_target"]
    try:
        state["default_target"] = parse.parse_default_target(run.stdout)
    except ParseError:
        found.unavailable["env_default_target"] = f"systemctl get-default: {why_failed(run)}"
    try:
        state["display_manager"] = parse_systemctl_state(runs["display_manager"].text)
    except ParseError:
        pass  # no display-manager unit is the usual server answer; judged from the target alone
    cmdline, error = read_text(host, "/proc/cmdline")
    if cmdline is not None:
        state["kernel_cmdline"] = cmdline.strip()[:4000]
    else:
        found.unavailable["env_kernel_cmdline"] = f"/proc/cmdline: {error}"
    state["nvidia_gl_libraries"] = tuple(
        f"{directory}/{name}" for directory in GL_LIBRARY_DIRS for name in GL_LIBRARIES
        if host.stat(f"{directory}/{name}").error is None)

    log, error = read_text(host, INSTALLER_LOG)
    if log is not None:
        state["runfile_log"] = INSTALLER_LOG
        try:
            state["runfile_version"], state["runfile_result"], state["runfile_lines"] = parse.parse_installer_log(log)
        except ParseError:
            state["runfile_result"] = "unknown"
    elif error != "not present":
        found.unavailable["env_runfile"] = f"{INSTALLER_LOG}: {error}"
    if host.stat(RUNFILE_UNINSTALLER).error is None:
        state["runfile_uninstaller"] = RUNFILE_UNINSTALLER

    reasons = []
    for manager in ("dpkg", "rpm"):
        run = runs[manager]
        if run.error == "not installed":
            continue
        source = " ".join(run.argv)
        try:
            if run.timed_out or run.exit_code not in (0, 1):  # dpkg-query: 1 when a pattern matches nothing
                raise ParseError(why_failed(run))
            text = run.stdout + "\n" + run.stderr
            state["packages"] = parse.parse_package_list(text, manager) if text.strip() else ()
            state["package_source"] = source
            break
        except ParseError as exc:
            reasons.append(f"{source}: {exc}")
    else:
        found.unavailable["env_packages"] = "; ".join(reasons) or "neither dpkg-query nor rpm is installed"
    return state


def why_failed(run: CommandRun) -> str:
    return run.error or (run.text.strip().splitlines() or [f"exit {run.exit_code}"])[0][:200]
