"""GH72x: InfiniBand and RoCE ports beside the GPUs; GH81x: the host beside the GPUs (kernel lockups and hung
tasks, the OOM killer, EDAC memory errors, disk and inode space, file-handle and PID limits, processes stuck
holding a GPU, clock synchronisation).

These are the faults that kill GPU jobs without touching a GPU. ``check`` sees one moment: counters are
absolute values since the driver loaded, and their growth (flaps, error rates) is the monitor's to follow.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.expected import expected
from gpuhealth.checks.registry import Draft, Expectations, Skip, check, table_fixes
from gpuhealth.model import EventGroup, Evidence, HostHealth, IbPort, Severity, Snapshot
from gpuhealth.parsers.hostside import ib_rate_gbps, ib_state_name

SAMPLES = 6  # lines shown per finding
STUCK_WINDOW = "0.2 s apart"

# --------------------------------------------------------------------------- helpers


def _health(snapshot: Snapshot) -> HostHealth:
    assert snapshot.host_health is not None  # the check requires it
    return snapshot.host_health


def _why(snapshot: Snapshot, *names: str) -> str:
    return "; ".join(snapshot.unavailable[n] for n in names if n in snapshot.unavailable) or "not collected"


def _port_name(port: IbPort) -> str:
    return f"{port.device} port {port.port}"


def _port_line(port: IbPort) -> str:
    return (f"{_port_name(port)}: state {port.state or '?'}, phys_state {port.phys_state or '?'}, "
            f"rate {port.rate or '?'}, link_layer {port.link_layer or '?'}")


def _log_groups(snapshot: Snapshot, *kinds: str) -> list[EventGroup]:
    log = snapshot.kernel_log
    return [] if log is None else log.tallies(kinds)


def _log_evidence(snapshot: Snapshot, groups: list[EventGroup]) -> tuple[Evidence, ...]:
    source = snapshot.sources.get("kernel_log", "kernel log")
    lines: list[str] = []
    for group in groups:
        lines += [e.line.strip() for e in group.samples[:2]]
        if group.count > 2:
            lines.append(f"... {group.count} lines like these in all ...")
    return (Evidence(source, tuple(lines[:SAMPLES * 2])),)


# --------------------------------------------------------------------------- GH720


@check("GH720", "infiniband-port-down", "An InfiniBand or RoCE port is not active, or slower than expected",
       requires=("host_health",))
def infiniband_port_state(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Every port under `/sys/class/infiniband/<device>/ports/<n>/`: its logical `state` (DOWN, INIT,
    ARMED, ACTIVE), physical `phys_state` (Polling, Disabled, LinkUp, LinkErrorRecovery ...), `rate`
    and `link_layer` (InfiniBand, or Ethernet for RoCE), as the kernel shows them
    (drivers/infiniband/core/sysfs.c). A port whose cable trained (`LinkUp`) but that is not ACTIVE
    is a warning: on InfiniBand no subnet manager has brought it up. A port in `LinkErrorRecovery`
    is a warning. With `[check] ib_port_count` set, fewer ACTIVE ports than that is a warning; with
    `[check] ib_rate_gbps`, an ACTIVE port below that rate is a warning. Unset, both come from the platform
    the machine is, where `knowledge/platforms.csv` lists its InfiniBand ports from the vendor's document
    (NVIDIA DGX A100/H100/H200/B200: 8 compute ports at 200 or 400 Gb/s; Azure ND A100 v4 and ND H100 v5:
    8 at 200 or 400 Gb/s), counting only ports whose link layer is InfiniBand. Other ports that are down
    are listed at information level: gpuhealth does not know without configuration which ports
    are cabled.

    Why it matters:
    Multi-node training sends its collectives over these ports (NCCL's IB/RoCE transport). A rail
    that is down makes NCCL fail at start-up or fall back to a slower path; a port that trained at a
    lower rate (a bad cable or transceiver, a port at HDR on an NDR fabric) slows every step of
    every job on the node.

    How to fix:
    `ibstat` (infiniband-diags) and `ibv_devinfo` show the same states. A port at LinkUp but INIT
    needs a subnet manager (`opensm`, or the fabric's managed switch). A port not at LinkUp: check
    the cable and transceiver, then the switch port. A port below its rate: reseat or replace the
    cable; `mlxlink -d <device>` (NVIDIA MFT) shows the negotiated speed and the link's errors.

    Exceptions:
    Devices named in `[check] ib_exclude` (in /etc/gpuhealth/config.toml) are never read. Unused
    ports of a dual-port card are down on purpose: they are listed, not judged, unless
    `ib_port_count` says how many should be up. No rate is expected without `ib_rate_gbps` or a listed
    platform: the rate a node should have depends on its fabric. A listed platform with no InfiniBand port
    ACTIVE (a DGX used alone, its ports run as RoCE) is said at information level, not judged. AWS's EFA is
    not InfiniBand: the P4 and P5 rows carry no port expectation. `check` sees the ports as they are now; a port
    that flaps is the monitor's to see.
    """
    ports = _health(snapshot).infiniband
    if ports is None:
        yield Skip(_why(snapshot, "host_infiniband"))
        return
    if not ports:
        excluded = _health(snapshot).ib_excluded
        yield Skip(f"every InfiniBand device is excluded ([check] ib_exclude: {', '.join(excluded)})" if excluded
                   else "no InfiniBand or RoCE device (/sys/class/infiniband lists none)")
        return
    source = "/sys/class/infiniband"
    fixes = table_fixes("GH720")
    active = [p for p in ports if ib_state_name(p.state) == "ACTIVE"]
    stuck = [p for p in ports if ib_state_name(p.phys_state) == "LinkUp" and ib_state_name(p.state) != "ACTIVE"]
    recovering = [p for p in ports if ib_state_name(p.phys_state) == "LinkErrorRecovery"]
    for port in stuck:
        yield Draft(Severity.WARNING, f"{_port_name(port)}: the link is up but the port is "
                                      f"{ib_state_name(port.state) or 'unknown'}, not ACTIVE: no subnet manager "
                                      "has configured it", evidence=(Evidence(source, (_port_line(port),)),),
                    fixes=fixes, labels={"device": port.device, "port": port.port})
    for port in recovering:
        yield Draft(Severity.WARNING, f"{_port_name(port)}: the link is in error recovery",
                    evidence=(Evidence(source, (_port_line(port),)),), fixes=fixes,
                    labels={"device": port.device, "port": port.port})
    count, _ = expected(snapshot, expect, "ib_port_count")
    yield from _against_expected(snapshot, expect, ports, active)
    judged = {id(p) for p in (*stuck, *recovering)}
    down = [p for p in ports if ib_state_name(p.state) != "ACTIVE" and id(p) not in judged]
    if down and count is None:
        yield Draft(Severity.INFO, f"{len(down)} InfiniBand/RoCE port(s) not active (unused ports are down on "
                                   "purpose; set [check] ib_port_count to judge): "
                                   + ", ".join(_port_name(p) for p in down[:8]),
                    evidence=(Evidence(source, tuple(_port_line(p) for p in down[:16])),))


def _against_expected(snapshot: Snapshot, expect: Expectations, ports: list[IbPort],
                      active: list[IbPort]) -> Iterator[Draft]:
    """GH720's count and rate against what this node should have: configured, else its platform's (a DGX, an
    Azure ND VM: knowledge/platforms.csv). The platform's numbers are of its InfiniBand ports, so only ports whose
    link layer is InfiniBand count against them (an Azure VM's Ethernet VF, RoCE ports are not those), and a
    node with none active is not on that fabric (a DGX used alone, a fabric run as RoCE): said at info level."""
    source, fixes = "/sys/class/infiniband", table_fixes("GH720")
    count, count_from = expected(snapshot, expect, "ib_port_count")
    rate, rate_from = expected(snapshot, expect, "ib_rate_gbps")
    infiniband = [p for p in active if (p.link_layer or "InfiniBand") == "InfiniBand"]
    from_table = (expect.ib_port_count is None and count is not None, expect.ib_rate_gbps is None and rate is not None)
    if from_table[0] and not infiniband:
        yield Draft(Severity.INFO, "No InfiniBand port is ACTIVE, not judged against the platform's: a node off "
                                   f"its InfiniBand fabric, or on RoCE ({count_from}: {count} ports; set [check] "
                                   "ib_port_count to judge)",
                    evidence=(Evidence(source, tuple(_port_line(p) for p in ports[:16])),))
    elif count is not None and len(counted := infiniband if from_table[0] else active) < count:
        yield Draft(Severity.WARNING, f"{len(counted)} of {count} expected InfiniBand/RoCE ports are ACTIVE "
                                      f"({count_from})",
                    evidence=(Evidence(source, tuple(_port_line(p) for p in ports[:16])),), fixes=fixes)
    if rate is not None:
        rated = infiniband if from_table[1] else active
        for port in [p for p in rated if (speed := ib_rate_gbps(p.rate)) is not None and speed < rate]:
            yield Draft(Severity.WARNING, f"{_port_name(port)} runs at {port.rate}, below the {rate} Gb/sec "
                                          f"expected ({rate_from})",
                        evidence=(Evidence(source, (_port_line(port),)),), fixes=fixes,
                        labels={"device": port.device, "port": port.port})


# --------------------------------------------------------------------------- GH721


@check("GH721", "infiniband-port-errors", "InfiniBand or RoCE port error counters are not zero",
       requires=("host_health",))
def infiniband_port_errors(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The error counters of every port, `/sys/class/infiniband/<device>/ports/<n>/counters/`:
    `link_downed` (the link went down and did not recover), `symbol_error`, `link_error_recovery`,
    `port_rcv_errors`, `port_rcv_remote_physical_errors`, `local_link_integrity_errors` and
    `excessive_buffer_overrun_errors` (the IBTA PortCounters the kernel exposes). A port whose
    link went down is a warning; other nonzero counters are information, with their values.

    Why it matters:
    Symbol and receive errors are a marginal cable, transceiver or connector: packets are
    retransmitted and collectives slow down, and the link may go down under load. A link that went
    down broke every connection through it: NCCL jobs on the node fail with a transport error.

    How to fix:
    Look at the port's link with `mlxlink -d <device> -p <port> -m` (NVIDIA MFT) or `ibqueryerrors`
    (infiniband-diags); reseat or replace the cable or transceiver of a port whose counters grow.
    `perfquery -x -R` resets the counters, so that a later check shows whether they still grow.

    Exceptions:
    The counters are absolute, counted since the driver loaded or they were last reset: a few symbol
    errors from the day the cable was plugged in are history. Whether they still grow (errors per
    hour, link flaps) is the monitor's to judge; `check` shows the values. Devices in
    `[check] ib_exclude` are not read.
    """
    ports = _health(snapshot).infiniband
    if ports is None:
        yield Skip(_why(snapshot, "host_infiniband"))
        return
    if not ports:
        yield Skip("no InfiniBand or RoCE port read (/sys/class/infiniband lists none, or every device is excluded)")
        return
    if not any(p.counters for p in ports):
        yield Skip("no port's error counters could be read (/sys/class/infiniband/<device>/ports/<n>/counters)")
        return
    fixes = table_fixes("GH721")
    for port in ports:
        nonzero = [(name, value) for name, value in port.counters if value > 0]
        if not nonzero:
            continue
        shown = ", ".join(f"{name} {value}" for name, value in nonzero)
        downed = dict(nonzero).get("link_downed", 0)
        severity = Severity.WARNING if downed else Severity.INFO
        message = (f"{_port_name(port)}: the link went down {downed} time(s); {shown}" if downed
                   else f"{_port_name(port)}: error counters not zero: {shown}")
        yield Draft(severity, message + " (absolute counts since the driver loaded)",
                    evidence=(Evidence(f"/sys/class/infiniband/{port.device}/ports/{port.port}/counters",
                                       tuple(f"{name}: {value}" for name, value in nonzero)),),
                    fixes=fixes, labels={"device": port.device, "port": port.port})


# --------------------------------------------------------------------------- GH722


@check("GH722", "mlx5-fatal-error", "The Mellanox/NVIDIA network card's driver reported a fatal error",
       requires=("kernel_log",))
def mlx5_fatal(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Kernel log lines of the mlx5 driver's health poller
    (drivers/net/ethernet/mellanox/mlx5/core/health.c): "device's health compromised - reached miss
    count" (the firmware stopped updating its health counter) and "Fatal error N detected" (a fatal
    sensor of the card tripped). Critical, per card (its PCI address).

    Why it matters:
    The card's firmware is stuck or failed: the driver resets it, and every RDMA connection through
    it breaks meanwhile. Multi-node jobs on the node fail with NCCL transport errors, and a card that
    keeps failing takes the node off its fabric.

    How to fix:
    Read the health dump the driver printed after the line (`sudo dmesg | grep -A20 mlx5_core`); a
    reboot re-initialises the card. If it recurs, update the card's firmware (`mlxfwmanager`, NVIDIA
    MFT) and open a case with the dump.

    Exceptions:
    A firmware upgrade or a deliberate reset can print these lines once; more than one, or one
    outside maintenance, is a fault.
    """
    groups = _log_groups(snapshot, "mlx5_fatal")
    if not groups:
        return
    cards: dict[str, list[EventGroup]] = {}
    for group in groups:
        cards.setdefault(group.first.pci_address or "unknown card", []).append(group)
    for card, found in cards.items():
        count = sum(g.count for g in found)
        yield Draft(Severity.CRITICAL, f"mlx5 card {card}: the driver reported a fatal error ({count} line(s))",
                    evidence=_log_evidence(snapshot, found), fixes=table_fixes("GH722"), labels={"device": card})


# --------------------------------------------------------------------------- GH811


@check("GH811", "kernel-lockup-hung-task", "The kernel reported a soft lockup or a hung task",
       requires=("kernel_log",))
def lockup_hung_task(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The kernel watchdog's "watchdog: BUG: soft lockup - CPU#N stuck for Ns! [name:pid]" and "Watchdog
    detected hard LOCKUP on cpu N" (kernel/watchdog.c), and the hung-task detector's "INFO: task
    name:pid blocked for more than N seconds." (kernel/hung_task.c) in this boot's kernel log. A
    warning, naming the processes.

    Why it matters:
    A soft lockup is a CPU stuck in the kernel for longer than the watchdog threshold; a hung task is
    a process in uninterruptible sleep (state D, TASK_UNINTERRUPTIBLE) for longer than
    `kernel.hung_task_timeout_secs`. Both are how a wedged driver (the GPU's, a storage or network
    driver) or an unreachable NFS server shows itself: the GPU job stalls, cannot be killed, and
    often only a reboot ends it.

    How to fix:
    Read the stack trace the kernel printed after the line (`sudo dmesg | grep -A30 -E 'soft lockup|blocked for
    more than'`): the top frames name the driver or file system. `ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'`
    lists the processes in state D now. When the stuck process holds /dev/nvidia*, reboot the node.

    Exceptions:
    A short burst under extreme load (a storage flush, a VM's host stealing CPU time) can print one
    soft lockup and recover; many, or a hung task, mean something stays stuck. The log is this
    boot's only (dmesg).
    """
    groups = _log_groups(snapshot, "soft_lockup", "hung_task")
    if not groups:
        return
    names = sorted({e.process for g in groups for e in g.samples if e.process})
    count = sum(g.count for g in groups)
    kinds = [name for kind, name in (("soft_lockup", "CPU lockups"), ("hung_task", "hung tasks"))
             if any(g.kind == kind for g in groups)]
    yield Draft(Severity.WARNING, f"the kernel reported {' and '.join(kinds)} ({count} line(s))"
                + (f", processes: {', '.join(names[:6])}" if names else ""),
                evidence=_log_evidence(snapshot, groups), fixes=table_fixes("GH811"))


# --------------------------------------------------------------------------- GH812


@check("GH812", "oom-killer", "The kernel's OOM killer killed processes", requires=("kernel_log",))
def oom_killer(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The OOM killer's "Out of memory: Killed process N (name)" and "Memory cgroup out of memory: Killed
    process N (name)" (mm/oom_kill.c; "Kill process N (name) score" before Linux 4.19) in this boot's
    kernel log. A warning, naming the processes killed.

    Why it matters:
    A training job killed by the OOM killer ends without a Python traceback: the job's log simply
    stops, and the GPU looks at fault. Data loader workers, pinned-memory buffers and many processes
    per GPU use host memory far beyond the model's size.

    How to fix:
    `sudo dmesg | grep -iE -B5 'killed process'` shows what held memory. Reduce data loader workers or
    prefetching, give the job's container or cgroup a higher memory limit, or add memory/swap.

    Exceptions:
    A cgroup's limit ("Memory cgroup out of memory") is the job's own limit, not the host running out;
    the finding says which. Processes other than the GPU job may be the ones killed: the names tell.
    """
    groups = _log_groups(snapshot, "oom_kill")
    if not groups:
        return
    names = sorted({e.process for g in groups for e in g.samples if e.process})
    count = sum(g.count for g in groups)
    cgroup = any(e.detail == "memory cgroup limit" for g in groups for e in g.samples)
    yield Draft(Severity.WARNING, f"the OOM killer killed {count} process(es): {', '.join(names[:8])}"
                + (" (a memory cgroup's limit)" if cgroup else ""),
                evidence=_log_evidence(snapshot, groups), fixes=table_fixes("GH812"))


# --------------------------------------------------------------------------- GH813


@check("GH813", "edac-memory-errors", "The host's memory reported errors (EDAC)", requires=("host_health",))
def edac_memory_errors(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The error counts of each memory controller the kernel's EDAC subsystem registered,
    `/sys/devices/system/edac/mc/mc*/ce_count` (corrected) and `ue_count` (uncorrected), as described
    in the kernel's Documentation/admin-guide/ras.rst. Uncorrected errors are critical; corrected
    ones a warning.

    Why it matters:
    An uncorrected error is host memory whose data was lost: the process that read it (often the
    training job, or the kernel) dies, or computes on corrupt data. Corrected errors come before
    uncorrected ones on a failing DIMM.

    How to fix:
    `sudo edac-util -v` (edac-utils) or `ras-mc-ctl --errors` (rasdaemon) name the DIMM slot; replace
    that DIMM. Corrected errors: watch whether they grow and plan the replacement.

    Exceptions:
    Skipped when no EDAC driver is loaded for the platform (many VMs, some servers whose firmware
    handles memory errors itself): then the BMC's event log is where they are. Counts are since the
    driver loaded.
    """
    controllers = _health(snapshot).edac
    if controllers is None:
        yield Skip(_why(snapshot, "host_edac"))
        return
    fixes = table_fixes("GH813")
    lines = tuple(f"{c.name}: ce_count {c.corrected}, ue_count {c.uncorrected}" for c in controllers
                  if (c.corrected or 0) + (c.uncorrected or 0) > 0)
    evidence = (Evidence("/sys/devices/system/edac/mc", lines[:16]),)
    uncorrected = sum(c.uncorrected or 0 for c in controllers)
    corrected = sum(c.corrected or 0 for c in controllers)
    if uncorrected:
        yield Draft(Severity.CRITICAL, f"{uncorrected} uncorrected host memory error(s) (EDAC)",
                    evidence=evidence, fixes=fixes)
    elif corrected:
        yield Draft(Severity.WARNING, f"{corrected} corrected host memory error(s) (EDAC): a DIMM may be failing",
                    evidence=evidence, fixes=fixes)


# --------------------------------------------------------------------------- GH814

# A file system is low when under 5 % or under 1 GiB is available to users: 5 % is the share mke2fs reserves for
# root by default (mke2fs(8), -m), the margin ext4 itself keeps; 1 GiB is less than one checkpoint of a
# billion-parameter model (2 bytes per parameter in bf16), so the next save fails.
LOW_SHARE = 0.05
LOW_KIB = 1024 * 1024
WATCHED = ("/", "/tmp", "/var", "/var/lib/docker", "/var/lib/containerd", "/home")
DATA_FS = frozenset({"ext4", "xfs", "ext3", "btrfs", "zfs", "f2fs"})
IGNORED_PREFIXES = ("/boot", "/snap/", "/run", "/dev", "/sys", "/proc")


def _watched_mounts(snapshot: Snapshot) -> set[str]:
    """/, /tmp, the container stores, and every local data file system (GH805's training-data mounts)."""
    env = snapshot.host_env
    mounts = {m.mount_point for m in env.mounts if m.fs_type in DATA_FS} if env is not None else set()
    return {*WATCHED, *(m for m in mounts if not m.startswith(IGNORED_PREFIXES))}


@check("GH814", "disk-space-low", "A file system for the system, containers or training data is nearly full",
       requires=("host_env",))
def disk_space_low(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Free space (`df -P -l`) and free inodes (`df -P -l -i`) on `/`, `/tmp`, `/var`, `/var/lib/docker`,
    `/var/lib/containerd`, `/home` and every local data file system (ext4, xfs, btrfs, zfs ...). Less
    than 5 % or less than 1 GiB available is a warning; nothing available at all is critical.

    Why it matters:
    A full `/` or `/tmp` fails package installs, compilation caches and the driver's own files; a full
    `/var/lib/docker` stops containers from starting; a full data file system fails a checkpoint at
    the end of hours of training. Running out of inodes fails the same writes with space still free
    (many small files: data sets unpacked, caches). 5 % is the share mke2fs reserves for root by
    default (mke2fs(8), option -m); 1 GiB is less than one checkpoint of a billion-parameter model.

    How to fix:
    `sudo du -xh --max-depth=2 <mount point> | sort -h | tail` finds what fills it;
    `docker system df` shows the images, containers and volumes that pruning would free; move data sets or
    grow the file system.

    Exceptions:
    Network file systems are not measured (`df -l`: a dead server would hang it); /boot, snaps and
    pseudo file systems are left out. A file system that does not count inodes (btrfs) is judged on
    space only.
    """
    env = snapshot.host_env
    assert env is not None
    health = snapshot.host_health
    watched = _watched_mounts(snapshot)
    space = [d for d in env.disk_space if d.mount_point in watched and d.size_kib > 0]
    inodes = [i for i in (health.inodes or ()) if i.mount_point in watched and i.inodes > 0] if health else []
    if not space and not inodes:
        yield Skip(_why(snapshot, "env_disk_space", "host_inodes"))
        return
    fixes = table_fixes("GH814")
    for disk in space:
        low = disk.available_kib < LOW_SHARE * disk.size_kib or disk.available_kib < LOW_KIB
        if not low:
            continue
        full = disk.available_kib == 0
        share = 100 * disk.available_kib / disk.size_kib
        yield Draft(Severity.CRITICAL if full else Severity.WARNING,
                    f"{disk.mount_point}: {'no space left' if full else 'low on space'}: "
                    f"{disk.available_kib / 1024 / 1024:.1f} GiB available ({share:.1f} %)",
                    evidence=(Evidence("df -P -l", (f"{disk.filesystem} {disk.size_kib} KiB, {disk.available_kib} KiB "
                                                    f"available, mounted on {disk.mount_point}",)),),
                    fixes=fixes, labels={"mount": disk.mount_point})
    for use in inodes:
        if use.free >= LOW_SHARE * use.inodes:
            continue
        full = use.free == 0
        yield Draft(Severity.CRITICAL if full else Severity.WARNING,
                    f"{use.mount_point}: {'no inodes left' if full else 'low on inodes'}: {use.free} of "
                    f"{use.inodes} free ({100 * use.free / use.inodes:.1f} %)",
                    evidence=(Evidence("df -P -l -i", (f"{use.filesystem} {use.inodes} inodes, {use.free} free, "
                                                       f"mounted on {use.mount_point}",)),),
                    fixes=fixes, labels={"mount": use.mount_point})


# --------------------------------------------------------------------------- GH815

# The share of the limit in use past which the next burst of workers (data loader processes, threads) fails.
NEAR_LIMIT = 0.9


@check("GH815", "file-or-pid-exhaustion", "Open files or processes near the kernel's limit",
       requires=("host_health",))
def file_or_pid_exhaustion(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    File handles allocated against the system-wide maximum (`/proc/sys/fs/file-nr`: allocated,
    unused, max; Documentation/admin-guide/sysctl/fs.rst) and the processes and threads that exist
    (`/proc/loadavg`'s fourth field, proc(5)) against `/proc/sys/kernel/pid_max`. Above 90 % of a
    limit is a warning.

    Why it matters:
    At the limit, `open()` fails with ENFILE and `fork()`/`clone()` with EAGAIN: data loader workers,
    NCCL's threads and checkpoint writers fail with errors that look like the job's own bugs.

    How to fix:
    `cat /proc/sys/fs/file-nr /proc/sys/kernel/pid_max` shows the use and the limits; find the process that
    holds the handles or threads (lsof, ps) and stop it; raise the limit with `sysctl -w fs.file-max=<n>` or
    `sysctl -w kernel.pid_max=4194304` and persist it in /etc/sysctl.d/.

    Exceptions:
    Per-process limits (`ulimit -n`, a cgroup's pids.max) are lower than these and are the job's own;
    they are not read here.
    """
    health = _health(snapshot)
    judged = False
    if health.files_open is not None and health.files_max:
        judged = True
        if health.files_open > NEAR_LIMIT * health.files_max:
            yield Draft(Severity.WARNING, f"{health.files_open} of {health.files_max} file handles in use "
                                          f"({100 * health.files_open / health.files_max:.0f} %)",
                        evidence=(Evidence("/proc/sys/fs/file-nr", (f"allocated {health.files_open}, max "
                                                                    f"{health.files_max}",)),),
                        fixes=table_fixes("GH815"))
    if health.tasks is not None and health.pid_max:
        judged = True
        if health.tasks > NEAR_LIMIT * health.pid_max:
            yield Draft(Severity.WARNING, f"{health.tasks} processes and threads of at most {health.pid_max} "
                                          f"({100 * health.tasks / health.pid_max:.0f} %)",
                        evidence=(Evidence("/proc/loadavg, /proc/sys/kernel/pid_max",
                                           (f"tasks {health.tasks}, pid_max {health.pid_max}",)),),
                        fixes=table_fixes("GH815"))
    if not judged:
        yield Skip(_why(snapshot, "host_files_open", "host_tasks", "host_pid_max"))


# --------------------------------------------------------------------------- GH816


@check("GH816", "stuck-gpu-process", "A process holding the GPU is stuck in uninterruptible sleep (state D)",
       requires=("host_health",), reads=("kernel_log",))
def stuck_gpu_process(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Processes in state D ("waiting in uninterruptible disk sleep", proc_pid_stat(5); the kernel's
    TASK_UNINTERRUPTIBLE, which its hung-task detector watches: Documentation/admin-guide/sysctl/kernel.rst,
    hung_task_timeout_secs) at each of 3 reads 0.2 s
    apart (`ps -e -o pid=,stat=,comm=`, then `/proc/<pid>/stat`) that hold `/dev/nvidia*` open
    (`/proc/<pid>/fd` links). A warning; critical when the kernel's hung-task detector named the same
    process in this boot's log (it has then been stuck for minutes: GH811's lines).

    Why it matters:
    A process stuck in D inside the NVIDIA driver is a wedged driver or GPU: it cannot be killed
    (not even with SIGKILL), it keeps the GPU and its memory, a GPU reset is refused while it holds the
    device, and new jobs on that GPU hang too; only a reboot frees the GPU for sure.

    How to fix:
    `cat /proc/<pid>/stack` (root) shows where in the kernel it waits; `sudo dmesg` may show the Xid or
    hung-task lines that go with it. Drain the node and reboot it.

    Exceptions:
    A process may pass through state D briefly during heavy I/O or a large GPU memory operation: 0.4 s
    is a short window, so without a hung-task line this is a warning, and the monitor's longer view
    decides. A process whose open files cannot be read (another user's, gpuhealth not run as root) is
    listed at information level.
    """
    stuck = _health(snapshot).stuck
    if stuck is None:
        yield Skip(_why(snapshot, "host_stuck"))
        return
    hung = {e.pid for g in _log_groups(snapshot, "hung_task") for e in g.samples if e.pid is not None}
    fixes = table_fixes("GH816")
    for process in stuck:
        if process.nvidia_files:
            named = process.pid in hung
            yield Draft(Severity.CRITICAL if named else Severity.WARNING,
                        f"process {process.pid} ({process.name}) is stuck in state D holding "
                        f"{', '.join(process.nvidia_files[:4])}"
                        + ("; the kernel reported it as a hung task" if named else
                           f" ({process.samples} reads {STUCK_WINDOW})"),
                        evidence=(Evidence("ps, /proc/<pid>/stat, /proc/<pid>/fd",
                                           (f"pid {process.pid} {process.name}: state D in {process.samples} of "
                                            f"{process.samples} reads; open: {', '.join(process.nvidia_files)}",)),),
                        fixes=fixes, labels={"pid": str(process.pid)})
    unknown = [p for p in stuck if not p.fds_readable]
    if unknown:
        yield Draft(Severity.INFO, f"{len(unknown)} process(es) stuck in state D whose open files could not be read "
                                   "(run as root to see whether they hold a GPU): "
                                   + ", ".join(f"{p.pid} ({p.name})" for p in unknown[:6]),
                    evidence=(Evidence("ps, /proc/<pid>/stat", tuple(f"pid {p.pid} {p.name}: state D"
                                                                     for p in unknown[:8])),))


# --------------------------------------------------------------------------- GH817


@check("GH817", "clock-not-synchronized", "The system clock is not synchronised", requires=("host_health",))
def clock_not_synchronized(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `timedatectl show -p NTPSynchronized --value`: systemd-timedated's view of the kernel's clock
    synchronisation flag (adjtimex), set by whichever daemon keeps time (chrony, ntpd,
    systemd-timesyncd). "no" is a warning.

    Why it matters:
    A drifting clock fails TLS certificate checks (model and data set downloads, container pulls) and
    Kerberos (NFS with sec=krb5), and makes the logs and metrics of the nodes of one job disagree on
    when a fault happened, which hides its first cause.

    How to fix:
    `timedatectl timesync-status` or `chronyc tracking` shows why; enable one time service (chrony,
    or systemd-timesyncd with `sudo timedatectl set-ntp true`) and check that its servers are
    reachable.

    Exceptions:
    Skipped without timedatectl (no systemd, most containers). A host that just booted may take a
    minute to synchronise.
    """
    synchronized = _health(snapshot).clock_synchronized
    if synchronized is None:
        yield Skip(_why(snapshot, "host_clock"))
        return
    if not synchronized:
        yield Draft(Severity.WARNING, "the system clock is not synchronised (NTPSynchronized=no)",
                    evidence=(Evidence("timedatectl show -p NTPSynchronized --value", ("no",)),),
                    fixes=table_fixes("GH817"))
