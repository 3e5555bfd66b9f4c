"""Probes of the host beside the GPUs (GH72x network, GH81x host): InfiniBand/RoCE ports, EDAC memory
controllers, inode use, file-handle and PID limits. Everything is read through the ``Host`` seam, so a
bundle records it and ``check --from`` judges the same files."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from gpuhealth.collect.base import Probed, in_parallel, read_text
from gpuhealth.host import Host
from gpuhealth.model import EdacController, HostHealth, IbPort, ParseError, StuckProcess
from gpuhealth.parsers import hostside as parse
from gpuhealth.parsers.hostside import is_count

IB_CLASS = "/sys/class/infiniband"
EDAC_MC = "/sys/devices/system/edac/mc"
DF_INODES = ["df", "-P", "-l", "-i"]  # local file systems only, as GH805's df: df on a dead NFS mount hangs
# counters/ files whose nonzero value means link trouble (IBTA "PortCounters"; the names are the kernel's,
# drivers/infiniband/core/sysfs.c). Transmit discards and waits are congestion, not faults: not read.
IB_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                     "port_rcv_remote_physical_errors", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors")
MAX_IB_DEVICES = 64  # a node has at most a few dozen HCAs and virtual functions: a bound on the reads
MAX_EDAC_CONTROLLERS = 64
PS = ["ps", "-e", "-o", "pid=,stat=,comm="]  # procps and busybox both take -o with these names
# A process seen in state D once is normal (a disk read); one still in D at every read of a short window is
# stuck. `check` samples this little (GPUd samples over minutes: that is the monitor's); a stuck process that the
# kernel's hung-task detector named too has been in D for minutes (GH816 then raises it).
STUCK_SAMPLES = 3
STUCK_INTERVAL_S = 0.2
MAX_STUCK = 32  # processes followed after the first read
MAX_FDS = 4096  # open files looked at per stuck process
TIMEDATECTL = ["timedatectl", "show", "-p", "NTPSynchronized", "--value"]


def host_health_probe(ib_exclude: Collection[str] = ()) -> Callable[[Host, float], Probed]:
    """``probe_host_health`` leaving the devices of ``[check] ib_exclude`` unread."""
    excluded = frozenset(ib_exclude)

    def probe_host_health(host: Host, timeout: float) -> Probed:
        return _probe(host, timeout, excluded)

    return probe_host_health


def _probe(host: Host, timeout: float, excluded: frozenset[str]) -> Probed:
    found = Probed()
    parts: dict[str, object] = {}
    ports, skipped, why = _infiniband(host, excluded)
    parts["infiniband"], parts["ib_excluded"] = ports, skipped
    if why:
        found.unavailable["host_infiniband"] = why
    parts["edac"], why = _edac(host)
    if why:
        found.unavailable["host_edac"] = why
    run = host.run(DF_INODES, timeout)
    try:
        if not run.stdout.strip():
            raise ParseError(run.error or (run.stderr.strip().splitlines() or [f"exit {run.exit_code}"])[0])
        parts["inodes"] = parse.parse_df_inodes(run.stdout)  # df exits 1 when one mount fails: the rest count
    except ParseError as exc:
        found.unavailable["host_inodes"] = f"{' '.join(DF_INODES)}: {exc}"
    for path, reader, fields in (
            ("/proc/sys/fs/file-nr", parse.parse_file_nr, ("files_open", "files_max")),
            ("/proc/loadavg", parse.parse_loadavg_tasks, ("tasks",)),
            ("/proc/sys/kernel/pid_max", lambda text: parse.parse_int(text, "pid_max"), ("pid_max",))):
        text, error = read_text(host, path)
        try:
            if text is None:
                raise ParseError(error or "unreadable")
            value = reader(text)
            parts.update(zip(fields, value if isinstance(value, tuple) else (value,), strict=True))
        except ParseError as exc:
            found.unavailable[f"host_{fields[0]}"] = f"{path}: {exc}"
    parts["stuck"], why = _stuck_processes(host, timeout)
    if why:
        found.unavailable["host_stuck"] = why
    parts["clock_synchronized"], why = _clock(host, timeout)
    if why:
        found.unavailable["host_clock"] = why
    found.fields["host_health"] = HostHealth(**parts)  # type: ignore[arg-type]
    found.sources["host_health"] = f"{IB_CLASS}, {EDAC_MC}, {' '.join(DF_INODES)}, /proc/sys/fs/file-nr, " \
                                   "/proc/loadavg, /proc/sys/kernel/pid_max, ps, /proc/<pid>/fd, timedatectl"
    return found


def infiniband_ports(host: Host, excluded: frozenset[str]) -> tuple[tuple[IbPort, ...] | None, tuple[str, ...], str]:
    """The ports as ``check`` reads them, for the monitor's periodic read (monitor/ports.py)."""
    return _infiniband(host, excluded)


def _infiniband(host: Host, excluded: frozenset[str]) -> tuple[tuple[IbPort, ...] | None, tuple[str, ...], str]:
    """(the ports read, the devices left out by configuration, why none could be read)."""
    listing = host.listdir(IB_CLASS)
    if listing.names is None:
        if listing.error == "not present":  # no RDMA device registered (or ib_core not loaded): no ports to judge
            return (), (), ""
        return None, (), f"{IB_CLASS}: {listing.error}"
    skipped = tuple(name for name in listing.names if name in excluded)
    ports: list[IbPort] = []
    for device in [n for n in listing.names if n not in excluded][:MAX_IB_DEVICES]:
        base = f"{IB_CLASS}/{device}/ports"
        numbers = host.listdir(base).names or ()
        for port in numbers[:8]:
            where = f"{base}/{port}"
            values = {name: _first_line(host, f"{where}/{name}")
                      for name in ("state", "phys_state", "rate", "link_layer")}
            counters = []
            for name in IB_ERROR_COUNTERS:
                text = _first_line(host, f"{where}/counters/{name}")
                if text is not None and is_count(text):
                    counters.append((name, int(text)))
            ports.append(IbPort(device=device, port=port, counters=tuple(counters), **values))
    return tuple(ports), skipped, ""


def _edac(host: Host) -> tuple[tuple[EdacController, ...] | None, str]:
    listing = host.listdir(EDAC_MC)
    if listing.names is None:
        reason = "no EDAC driver loaded for this platform" if listing.error == "not present" else listing.error
        return None, f"{EDAC_MC}: {reason}: memory errors cannot be read"
    controllers = []
    for name in [n for n in listing.names if n.startswith("mc") and n[2:].isdecimal()][:MAX_EDAC_CONTROLLERS]:
        counts = [_first_line(host, f"{EDAC_MC}/{name}/{count}") for count in ("ce_count", "ue_count")]
        corrected, uncorrected = (int(c) if c is not None and is_count(c) else None for c in counts)
        controllers.append(EdacController(name=name, corrected=corrected, uncorrected=uncorrected))
    if not controllers:
        return None, f"{EDAC_MC}: no memory controller registered: memory errors cannot be read"
    return tuple(controllers), ""


def _first_line(host: Host, path: str) -> str | None:
    text, _ = read_text(host, path)
    if text is None:
        return None
    lines = text.strip().splitlines()
    return lines[0].strip()[:200] if lines else ""


def _stuck_processes(host: Host, timeout: float) -> tuple[tuple[StuckProcess, ...] | None, str]:
    """Processes in state D at every one of STUCK_SAMPLES reads, with the /dev/nvidia* files they hold.

    The first read is one `ps`; the later ones read /proc/<pid>/stat of the candidates only, and a process that
    left state D is not read again, so a recorded bundle replays to the same answer.
    """
    run = host.run(PS, timeout)
    if not run.ok or not run.stdout.strip():
        return None, f"{' '.join(PS)}: {run.error or (run.stderr.strip().splitlines() or [f'exit {run.exit_code}'])[0]}"
    names = {}
    for line in run.stdout.splitlines():
        fields = line.split(None, 2)
        if len(fields) >= 2 and is_count(fields[0]) and fields[1].startswith("D"):
            names[int(fields[0])] = fields[2].strip() if len(fields) == 3 else ""
    candidates = list(names)[:MAX_STUCK]
    for _ in range(STUCK_SAMPLES - 1):
        if not candidates:
            break
        if in_parallel(host):  # a live host: let time pass; a replayed bundle answers at once
            time.sleep(STUCK_INTERVAL_S)
        candidates = [pid for pid in candidates if _state(host, pid) == "D"]
    return tuple(_holding(host, pid, names[pid]) for pid in candidates), ""


def _state(host: Host, pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat ("pid (comm) S ..."; comm may hold spaces and parentheses)."""
    text, _ = read_text(host, f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None  # the process ended
    rest = text.rsplit(")", 1)[1].split()
    return rest[0] if rest else None


def _holding(host: Host, pid: int, name: str) -> StuckProcess:
    listing = host.listdir(f"/proc/{pid}/fd")
    if listing.names is None:
        return StuckProcess(pid=pid, name=name, samples=STUCK_SAMPLES, fds_readable=False)
    targets = (host.readlink(f"/proc/{pid}/fd/{fd}") for fd in listing.names[:MAX_FDS])
    nvidia = sorted({t for t in targets if t and t.startswith("/dev/nvidia")})
    return StuckProcess(pid=pid, name=name, samples=STUCK_SAMPLES, nvidia_files=tuple(nvidia[:16]))


def _clock(host: Host, timeout: float) -> tuple[bool | None, str]:
    """timedatectl's NTPSynchronized: the kernel's own synchronisation flag (adjtimex), whichever daemon (chrony,
    ntpd, systemd-timesyncd) keeps the clock."""
    run = host.run(TIMEDATECTL, timeout)
    answer = run.stdout.strip()
    if run.ok and answer in ("yes", "no"):
        return answer == "yes", ""
    detail = run.error or (run.stderr.strip().splitlines() or [f"answered {answer[:40]!r}"])[0]
    return None, f"{' '.join(TIMEDATECTL)}: {detail}"
