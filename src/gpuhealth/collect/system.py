"""Probes of the operating system: OS and kernel, modules, /dev nodes, the kernel log, the environment."""

from __future__ import annotations

from gpuhealth.collect.base import Probed, read_text
from gpuhealth.evidence_input import InputError, kernel_log_from_path
from gpuhealth.host import Host
from gpuhealth.model import (
    OsInfo,
    ParseError,
)
from gpuhealth.parsers.kernel_log import parse_kernel_log
from gpuhealth.parsers.system import parse_os_release, parse_proc_modules, parse_redhat_release
from gpuhealth.redact import redact_environment

KERNEL_LOG_COMMANDS = (
    ["dmesg", "--time-format", "iso"],
    ["journalctl", "-k", "-b", "-o", "short-iso", "--no-pager", "-q"],
)
# Environment variables worth showing in a report; the bundle keeps all of them, secrets redacted.
RELEVANT_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "PYTORCH_", "TORCH_", "LD_LIBRARY_PATH", "PATH",
                         "CONDA_PREFIX", "VIRTUAL_ENV")


def probe_os(host: Host, timeout: float) -> Probed:
    found = Probed()
    os_info = None
    for path, parse in (("/etc/os-release", parse_os_release), ("/usr/lib/os-release", parse_os_release),
                        ("/etc/redhat-release", parse_redhat_release)):
        text, _ = read_text(host, path)
        if text:
            try:
                os_info = parse(text)
                found.sources["os"] = path
                break
            except ParseError:
                continue
    release, error = read_text(host, "/proc/sys/kernel/osrelease")
    version, _ = read_text(host, "/proc/version")
    arch, _ = read_text(host, "/proc/sys/kernel/arch")
    hostname, _ = read_text(host, "/proc/sys/kernel/hostname")
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


def probe_modules(host: Host, timeout: float) -> Probed:
    found = Probed()
    text, error = read_text(host, "/proc/modules")
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


def probe_kernel_log(host: Host, timeout: float) -> Probed:
    found = Probed()
    reasons = []
    stdout_file = getattr(host, "stdout_file", None)  # a bundle keeps outputs in files: scan them in place
    for argv in KERNEL_LOG_COMMANDS:
        source = " ".join(argv)
        if stdout_file is not None:
            run, path = stdout_file(argv)
            if run.ok and path is not None:
                try:
                    found.fields["kernel_log"] = kernel_log_from_path(str(path), source)
                    found.sources["kernel_log"] = source
                    return found
                except (ParseError, InputError) as exc:
                    reasons.append(f"{source}: {exc}")
                    continue
                except OSError as exc:
                    reasons.append(f"{source}: {exc.strerror or exc}")
                    continue
        else:
            run = host.run(argv, timeout)
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
    # Redacted here too: these reach JSON reports and saved runs (NVIDIA_API_KEY is a common one).
    relevant = redact_environment({k: v for k, v in env.items() if k.startswith(RELEVANT_ENV_PREFIXES)})
    return Probed(fields={"env": relevant})
