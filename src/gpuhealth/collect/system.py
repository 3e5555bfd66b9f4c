"""Probes of the operating system: OS and kernel, modules, /dev nodes, the kernel log, the environment."""

from __future__ import annotations

from typing import Any

from gpuhealth.collect.base import Probed, read_text
from gpuhealth.evidence_input import DEFAULT_MAX_BYTES, InputError, kernel_log_from_path
from gpuhealth.host import CommandLimit, Host
from gpuhealth.model import (
    CommandRun,
    KernelLog,
    OsInfo,
    ParseError,
)
from gpuhealth.parsers.kernel_log import parse_kernel_log, parse_kernel_log_stream
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
    machine = {name: _dmi(host, name) for name in ("sys_vendor", "product_name", "product_family")}
    base = os_info or OsInfo()
    found.fields["os"] = OsInfo(
        id=base.id, id_like=base.id_like, version_id=base.version_id, pretty_name=base.pretty_name,
        kernel_release=release.strip() if release else None,
        kernel_version=version.strip() if version else None,
        architecture=arch.strip() if arch else None,
        machine_vendor=machine["sys_vendor"], machine_product=machine["product_name"],
        machine_family=machine["product_family"],
    )
    found.fields["hostname"] = hostname.strip() if hostname else None
    if os_info is None:
        found.unavailable["os"] = "no /etc/os-release or /etc/redhat-release"
    if release is None:
        found.unavailable["kernel"] = f"/proc/sys/kernel/osrelease: {error}"
    return found


def _dmi(host: Host, name: str) -> str | None:
    """One of the firmware's machine names (/sys/class/dmi/id/NAME, readable by every user), or None: absent on
    machines without DMI (many ARM boards), empty or a placeholder on some white boxes."""
    text, _ = read_text(host, f"/sys/class/dmi/id/{name}")
    value = " ".join(text.split()) if text else ""
    return value[:200] or None


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
    stream = getattr(host, "stream", None)  # a live host: the output is scanned as it comes, never held whole
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
        elif stream is not None:
            log, run, problem = _stream_kernel_log(stream, argv, timeout, source)
            if log is not None:
                found.fields["kernel_log"] = log
                found.sources["kernel_log"] = source
                return found
            if problem:
                reasons.append(problem)
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


def _stream_kernel_log(stream: Any, argv: list[str], timeout: float, source: str
                       ) -> tuple[KernelLog | None, CommandRun, str | None]:
    """(the log, how the command went, why there is no log when the command itself did not fail).

    The output goes through the stream scanner as it comes: memory stays bounded whatever its size, the
    deadline covers the reading and the scanning, and reading stops past ``DEFAULT_MAX_BYTES``.
    """
    output = stream(argv, timeout, DEFAULT_MAX_BYTES)
    if isinstance(output, CommandRun):  # it could not be started
        return None, output, None
    log = problem = None
    try:
        log = parse_kernel_log_stream(output, source)
    except CommandLimit as exc:
        problem = f"{source}: {exc}"
    except ParseError as exc:
        problem = f"{source}: {exc}"
    finally:
        run = output.finish()
    if problem is not None and output.ended is None:  # the scanner refused the output before its end
        return None, run, problem
    if not run.ok:  # its own failure says why: timed out, too much output, permission denied ...
        return None, run, None
    return log, run, problem


def probe_environment(host: Host, timeout: float) -> Probed:
    env = host.environment()
    # Redacted here too: these reach JSON reports and saved runs (NVIDIA_API_KEY is a common one).
    relevant = redact_environment({k: v for k, v in env.items() if k.startswith(RELEVANT_ENV_PREFIXES)})
    return Probed(fields={"env": relevant})
