"""The frozen data every layer passes along: what was observed on a host, and what the checks found.

Nothing here does I/O. Unknown values are ``None``; *why* a piece of evidence is missing lives in
``Snapshot.unavailable`` under the evidence's name, so a check can skip with that reason instead of
passing silently.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import sys
import types
import typing
from dataclasses import field
from typing import Any

from gpuhealth.lazyre import guarded_re, has, lazy_re
from gpuhealth.records import record

if typing.TYPE_CHECKING:
    from collections.abc import Collection

SNAPSHOT_SCHEMA_VERSION = 1
UNRECOGNIZED = "GH002"  # a piece of evidence analyze could not read: the report may not say HEALTHY
NO_DIAGNOSIS = "GH004"  # the finding that makes a report's verdict NO DIAGNOSIS (analyze understood nothing)
SETUP_ONLY = "GH005"  # the evidence only inventoried the setup (a package listing): the report may not say HEALTHY


class ParseError(ValueError):
    """Raised by a parser when its input is not the format it parses; the message says why."""


# --------------------------------------------------------------------------- PCI addresses

_PCI_ADDRESS = lazy_re(
    r"(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<device>[0-9a-fA-F]{2})"
    r"(?:\.(?P<function>[0-7]))?"
)


def normalize_pci_address(text: str | None) -> str | None:
    """Return ``dddd:bb:dd.f`` (lower case, 4-digit domain unless it needs more) or None.

    Accepts what the driver, nvidia-smi, lspci and sysfs print: ``00000000:01:00.0``, ``0000:01:00``,
    ``PCI:0000:5a:00``, ``01:00.0``. A missing function means function 0 (the kernel log's Xid lines
    name the device, and NVIDIA GPUs are function 0).
    """
    if not text:
        return None
    match = _PCI_ADDRESS.fullmatch(text.strip())
    if not match:
        return None
    domain = int(match["domain"] or "0", 16)
    function = match["function"] or "0"
    return f"{domain:04x}:{match['bus'].lower()}:{match['device'].lower()}.{function}"


# --------------------------------------------------------------------------- evidence and fixes


@record
class Evidence:
    """Where a finding's proof comes from: a file or command, and the lines that show it."""

    source: str
    lines: tuple[str, ...] = ()


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "critical": 2}[self.value]


@record
class Fix:
    """One fix for a finding on one distro family: a ``command`` (pasted, it runs as is) or a ``step``
    (an instruction in words, or a command holding a placeholder such as ``<index>`` to fill in first).

    ``kind`` is decided from the text when not given (``fix_kind``), so a prose fix can never be
    rendered where a reader would paste it.
    """

    command: str  # the command line, or the instruction's text
    family: str = "any"  # "debian", "rhel" or "any"
    disruptive: bool = False  # reboots, reloads modules, or kills jobs
    note: str = ""  # a comment, shown on its own line above the command; "only if ..." makes it a choice (fixscript)
    kind: str = ""  # "command", "step" or "edit"; "" = decided by fix_kind(command)

    def __post_init__(self) -> None:
        command, comment = _split_comment(self.command)
        if comment:  # a trailing "# ..." would become a line of its own when wrapped; it is the note
            object.__setattr__(self, "command", command)
            object.__setattr__(self, "note", "; ".join(x for x in (comment, self.note) if x))
        if self.kind not in FIX_KINDS:
            object.__setattr__(self, "kind", fix_kind(self.command))
        # a renderer trusts the flag: a reboot, module unload, GPU reset, driver removal or service restart
        # is disruptive whoever wrote the fix and whether or not they said so
        if not self.disruptive and DISRUPTIVE_COMMAND.search(self.command):
            object.__setattr__(self, "disruptive", True)

    @property
    def is_command(self) -> bool:
        return self.kind == "command"


# "command": runs as is in bash; "step": an instruction in words (or a command holding a placeholder);
# "edit": a change to a file, described in words (which file, which line)
FIX_KINDS = ("command", "step", "edit")
# What stops GPU work or takes the host down: a reboot or shutdown, unloading a module (rmmod, modprobe -r), a GPU
# reset (nvidia-smi -r / --gpu-reset, a PCI remove or reset in sysfs), removing the driver (nvidia-uninstall, a
# package removal or purge), stopping or restarting a service (systemctl), killing processes; DCGM's long diagnostic
# levels (`dcgmi diag -r 3` or 4: stress tests that hold every GPU for tens of minutes; DCGM User Guide, run levels),
# which belong after the node is drained, never among the read-only looks.
DISRUPTIVE_COMMAND = guarded_re(
    r"\b(?:reboot|shutdown|poweroff|rmmod|nvidia-uninstall|purge|pkill|killall)\b|\bkill\s+\S"
    r"|\bdcgmi\s+diag\s+(?:-\S+\s+)*(?:-r|--run)\s*[34]\b"
    r"|\bmodprobe\s+(?:-\w+\s+)*(?:-r|--remove)\b|\bnvidia-smi\b[^|;&]*?\s(?:-r|--gpu-reset)\b"
    r"|\b(?:apt-get|apt|dnf|yum|zypper)\s+(?:-\S+\s+)*(?:remove|autoremove|erase)\b"
    r"|\bsystemctl\s+(?:-\S+\s+)*(?:restart|stop|isolate|reboot|poweroff|kexec)\b|/sys/\S*/(?:remove|reset)\b",
    may=has("reboot", "shutdown", "poweroff", "rmmod", "uninstall", "purge", "kill", "modprobe", "nvidia-smi", "remove",
            "erase", "systemctl", "/sys/", "dcgmi"))
# Programs a fix command may start with (after ``sudo`` and VAR=value assignments). Anything else is prose.
SHELL_PROGRAMS = frozenset("""
sudo nvidia-smi nvidia-modprobe nvidia-ctk nvidia-bug-report.sh nvidia-uninstall modprobe rmmod lsmod modinfo
dkms apt-get apt apt-mark dpkg dpkg-query dnf yum rpm systemctl journalctl dmesg ls cat grep printf echo tee
cp mv rm ln sed update-initramfs update-grub dracut lsinitramfs lsinitrd mokutil openssl ldconfig lspci
ipmitool dcgmi export unset for test uname ubuntu-drivers nvidia-detect wget curl sh bash reboot shutdown
python python3 pip pip3 conda numactl time docker kubectl gpuhealth du df mount findmnt env which ldd
leapp do-release-upgrade grub2-mkconfig grubby update-alternatives alternatives nvidia-persistenced nvidia-xconfig
gpg tr cut head tail sort fuser lsof setpci gcc make find kill pkill nvcc id groups ulimit
kmodgenca akmods update-secureboot-policy
""".split())
# Guarded (lazyre.guarded_re): most fixes are plain commands, read without compiling these.
_PLACEHOLDER = guarded_re(r"<[A-Za-z_][\w .-]*>|(?<!\$)\{[A-Za-z_]\w*\}|\.\.\.",
                          may=lambda text: ("<" in text and ">" in text) or "{" in text or "..." in text)
_ASSIGNMENT = guarded_re(r"^[A-Za-z_]\w*=\S*$", may=has("="))


def _split_comment(text: str) -> tuple[str, str]:
    """A command's trailing shell comment (`` # ...`` outside quotes), split off."""
    quote = ""
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and i > 0 and text[i - 1] in " \t":
            return text[:i].rstrip(), text[i + 1:].strip()
    return text, ""


def fix_kind(text: str) -> str:
    """``command`` when the text runs as is in bash; ``step`` for prose or a command with a placeholder."""
    words = text.split()
    while words and (words[0] == "sudo" or _ASSIGNMENT.match(words[0])):
        words = words[1:]
    if not words:
        return "step"
    first = words[0]
    program = first in SHELL_PROGRAMS or first.startswith(("/", "./")) or first.endswith(".run")
    return "command" if program and not _PLACEHOLDER.search(text) else "step"


@record
class Subject:
    """What a finding is about: the host, or one GPU."""

    gpu_index: int | None = None
    pci_address: str | None = None

    @property
    def is_host(self) -> bool:
        return self.gpu_index is None and self.pci_address is None

    def __str__(self) -> str:
        if self.is_host:
            return "host"
        parts = []
        if self.gpu_index is not None:
            parts.append(f"GPU {self.gpu_index}")
        if self.pci_address:
            parts.append(self.pci_address)
        return " ".join(parts)


HOST = Subject()


@record
class Candidate:
    """One candidate cause of a symptom, as a differential diagnosis ranks it."""

    cause: str  # cause id from knowledge/causes.csv ("secure-boot-refused")
    title: str  # "Secure Boot refused the unsigned nvidia module"
    code: str  # the check that confirms it
    status: str  # "confirmed" | "open" | "ruled out"
    why: str  # why it ranks here: the evidence, or what is missing ("ruled out by the line: ...")
    command: str  # the command whose output confirms or rules it out
    source: str | None = None  # the document behind a rule that ruled it out: "title <address>"


# What to do about a finding, and what it does to the node: one of each on every finding (docs/report-json.md,
# docs/actions.md). Both come from sourced rows (knowledge/actions.csv per check, knowledge/xid_actions.csv per
# Xid); a check that knows more about one finding (GH404's recovery action, GH101 on a host that had GPUs) sets its
# own. Schedulers decide on ``impact``, never on severity: node_unusable and gpu_unusable drain, user_environment
# (a user's PyTorch, a library path) is reported and never drains.
ACTIONS = ("none", "restart_app", "fix_user_environment", "fix_host_software", "reload_driver", "reset_gpu",
           "drain_then_reset", "reboot", "run_diagnostics", "hardware_inspection", "contact_support")
IMPACTS = ("node_unusable", "gpu_unusable", "degraded", "user_environment", "none")
DRAINING_IMPACTS = ("node_unusable", "gpu_unusable")

# The keys a finding's ``labels`` may hold (docs/report-json.md): a test keeps every check to these.
FINDING_LABELS = ("xid", "check", "mined", "family", "source", "decided", "reported")


@record
class Finding:
    code: str
    slug: str
    severity: Severity
    message: str
    subject: Subject = HOST
    evidence: tuple[Evidence, ...] = ()
    explanation: str = ""
    fixes: tuple[Fix, ...] = ()
    explains: tuple[str, ...] = ()  # codes of findings this one is the root cause of
    differential: tuple[Candidate, ...] = ()  # a symptom whose cause is open: ranked candidates, likeliest first
    # What the finding stands on, as small stable keys a program reads instead of the message: "xid" (the Xid
    # code of GH301, GH302 from an Xid 79 line, GH704), "check" (the check that raised, for GH001); for GH308 "mined"
    # (knowledge/mined/nvrm.csv row ids), "family" (its family) and "source" (repository, tag range, file:line of
    # each row, "; "-separated); "decided" (the causes.csv id of a cause a fact in the evidence decides: a +cpu
    # torch version is "torch-cpu-build"); "reported" ("words": the finding rests on facts read from a person's
    # sentences, Snapshot.reported). Never text meant for people: values are codes. FINDING_LABELS names every key.
    labels: dict[str, str] = field(default_factory=dict)
    # When the newest line it stands on was logged, in seconds since the epoch: only from a log with wall-clock
    # timestamps that carry their UTC offset (the live check's dmesg/journalctl); None when unknown.
    last_seen: float | None = None
    # What to do (ACTIONS) and what it does to the node (IMPACTS): required, from the check's row in
    # knowledge/actions.csv unless the check knows better (checks/engine.py stamps them). The defaults only keep the
    # field order; a finding without both valid values cannot be made.
    action: str = ""
    impact: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"{self.code}: action {self.action!r} is not one of {', '.join(ACTIONS)}")
        if self.impact not in IMPACTS:
            raise ValueError(f"{self.code}: impact {self.impact!r} is not one of {', '.join(IMPACTS)}")

    @property
    def key(self) -> str:
        return f"{self.code}@{self.subject}"

    @property
    def drains(self) -> bool:
        """The node leaves the scheduler's service for it: the node or one of its GPUs cannot be used."""
        return self.impact in DRAINING_IMPACTS


@record
class Skipped:
    code: str
    slug: str
    reason: str


# --------------------------------------------------------------------------- observations


@record
class OsInfo:
    id: str | None = None  # os-release ID: ubuntu, debian, rhel, centos, rocky ...
    id_like: tuple[str, ...] = ()
    version_id: str | None = None
    pretty_name: str | None = None
    kernel_release: str | None = None  # uname -r
    kernel_version: str | None = None  # /proc/version, whole line (names the compiler)
    architecture: str | None = None
    # The machine as its firmware names it (/sys/class/dmi/id: sys_vendor, product_name, product_family): a GPU
    # server's model tells a node whose GPUs vanished from a machine that never had any (GH101)
    machine_vendor: str | None = None
    machine_product: str | None = None
    machine_family: str | None = None
    # Set only when os-release did not name the distribution: the evidence its family was inferred from ("the dpkg
    # package listing"); id_like then holds that family alone (gpuhealth.distro_infer)
    family_from: str | None = None

    @property
    def family(self) -> str:
        """``debian``, ``rhel`` or ``other``: which package commands a fix uses."""
        names = {self.id or "", *self.id_like}
        if names & {"debian", "ubuntu"}:
            return "debian"
        if names & {"rhel", "centos", "fedora", "rocky", "almalinux", "ol", "amzn"}:  # Amazon Linux: rpm, yum/dnf
            return "rhel"
        return "other"


# analyze's mark in ``Snapshot.unavailable`` for a listing of /dev that named its files (`ls -l /dev/nvidia0
# /dev/nvidiactl`): a node it did not name is not known to be missing (GH207)
DEVICE_NODES_NAMED = "device_nodes_named"
# analyze's mark in ``Snapshot.unavailable`` when every piece it read only inventories the setup (package listings,
# os-release, tool versions): its value names them; GH005 then keeps the report from saying HEALTHY
SETUP_INVENTORY_ONLY = "setup_inventory_only"


@record
class PciDevice:
    address: str  # normalized dddd:bb:dd.f
    vendor_id: str | None  # 4 hex digits, lower case; None when lspci printed no ID
    device_id: str | None
    class_code: str | None = None  # 4 hex digits: 0300 VGA, 0302 3D controller, 0680 bridge ...
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    name: str | None = None  # as printed by lspci or looked up in pci.ids
    kernel_driver: str | None = None  # the driver bound to it (nvidia, nouveau, vfio-pci ...)
    link_speed_current: str | None = None  # "16.0 GT/s" (sysfs / LnkSta)
    link_speed_max: str | None = None  # (sysfs / LnkCap)
    link_width_current: int | None = None
    link_width_max: int | None = None
    secondary_bus: str | None = None  # a bridge's bus below it, "dddd:bb" (lspci -vv "Bus: ... secondary=01")
    # the modules that could drive it, from `lspci -k`'s "Kernel modules:" line (None when not shown): a pasted
    # listing that shows them was made with -k, so a device without "Kernel driver in use" has no driver bound
    kernel_modules: tuple[str, ...] | None = None
    # `lspci -v`'s memory BAR lines as printed ("Region 1: Memory at <unassigned> (64-bit, prefetchable) [size=32G]");
    # None when the listing printed none (no -v): then nothing is known of the BARs
    memory_regions: tuple[str, ...] | None = None

    @property
    def is_nvidia_gpu(self) -> bool:
        """Vendor 10de with a display-class code (VGA 0300 or 3D controller 0302)."""
        return self.vendor_id == "10de" and (self.class_code or "").startswith("03")


@record
class DriverInfo:
    """The loaded kernel module, from ``/proc/driver/nvidia/version`` or its load banner."""

    version: str | None = None
    flavour: str | None = None  # "proprietary" or "open"
    banner: str | None = None
    compiler: str | None = None  # "gcc version 12.2.0 ..." line when present


@record
class GpuProcess:
    pid: int | None = None
    name: str | None = None
    used_memory_mib: float | None = None
    type: str | None = None  # nvidia-smi's Type: "G" graphics, "C" compute, "C+G"


@record
class Gpu:
    """One GPU as nvidia-smi or NVML reports it. Every field may be unknown."""

    index: int | None = None
    name: str | None = None
    pci_address: str | None = None  # normalized
    uuid: str | None = None
    serial: str | None = None
    pci_device_id: str | None = None  # "2330" (from "0x233010DE")
    driver_version: str | None = None
    cuda_version: str | None = None  # the driver's maximum CUDA, not a toolkit
    vbios_version: str | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None
    mig_mode_current: str | None = None  # "Enabled" / "Disabled"
    mig_mode_pending: str | None = None
    # thermal and power
    temperature_c: float | None = None
    temperature_slowdown_c: float | None = None
    temperature_shutdown_c: float | None = None
    temperature_max_operating_c: float | None = None
    memory_temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    fan_speed_pct: float | None = None
    fan_error: bool | None = None  # the table printed ERR!
    clock_event_reasons: tuple[str, ...] = ()  # active reasons, snake_case names
    # memory and load
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    # PCIe
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_counter: int | None = None
    # reliability
    ecc_mode_current: str | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    sram_uncorrectable: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    # banks with no spare row left: the row remapper histogram's "None" (nvmlRowRemapperHistogramValues_t)
    remapped_rows_banks_none: int | None = None
    reset_required: bool | None = None
    recovery_action: str | None = None  # 590+: "None", "GPU Reset", "Node Reboot" ...
    # nvidia-smi -q "Fabric / State": "Completed", "In Progress", "Not Started" on an NVSwitch fabric; "N/A" on a
    # GPU outside one; None: no Fabric section (older drivers, other sources)
    fabric_state: str | None = None
    # nvidia-smi -q "Fabric / Status": "Success", or the NVML error the registration ended with (nvmlGpuFabricInfo_t
    # status, to be read only when the State is "Completed"); "N/A" outside a fabric
    fabric_status: str | None = None
    inforom_corrupted: bool | None = None
    mig_devices: int | None = None
    source: str | None = None  # which evidence described it
    # values nvidia-smi printed as an error instead of a reading ("Temp: ERR!", "temperature.gpu: [GPU requires
    # reset]", "Power Draw: [Unknown Error]"): the driver could not read them from the GPU (N/A, "not supported", is
    # no error). Several on one GPU mean the GPU stopped answering (GH404)
    field_errors: tuple[str, ...] = ()


@record
class SmiReport:
    """What one nvidia-smi output said about the whole host."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple[Gpu, ...] = ()
    warnings: tuple[str, ...] = ()  # e.g. "WARNING: infoROM is corrupted at gpu 0000:01:00.0"
    format: str = ""  # "xml", "query", "table", "csv", "list"
    # an excerpt of the driver's list: a piece of `nvidia-smi -q` without its "GPU <bus id>" lines
    # (`nvidia-smi -q | grep -A8 "GPU Link Info"`), or fewer GPUs than its "Attached GPUs" line (`-q -i 0`)
    partial: bool = False


@record
class TopologyLink:
    """One cell of ``nvidia-smi topo -m``: how two devices connect (NV12, PIX, PHB, SYS ...)."""

    a: str  # "GPU0", "NIC1" ...
    b: str
    kind: str


@record
class Topology:
    devices: tuple[str, ...] = ()
    links: tuple[TopologyLink, ...] = ()
    cpu_affinity: dict[str, str] = field(default_factory=dict)  # "GPU0" -> "0-51,104-155"
    numa_affinity: dict[str, str] = field(default_factory=dict)


@record
class NvlinkState:
    """``nvidia-smi nvlink -s``: per GPU, each link's speed in GB/s or None when inactive."""

    gpu_index: int | None
    gpu_name: str | None = None
    uuid: str | None = None
    link_speeds_gbps: tuple[float | None, ...] = ()
    error: str | None = None  # "all links are inactive", "not supported in MIG mode" ...


@record
class KernelEvent:
    """One NVIDIA-relevant kernel log event."""

    kind: str  # "xid", "sxid", "fallen_off_bus", "rminit_failed", "api_mismatch", "bar", "nvrm"; beside the GPUs:
    # "soft_lockup", "hung_task", "oom_kill", "mlx5_fatal"
    message: str
    line: str  # the raw line as read
    line_number: int | None = None
    timestamp: str | None = None  # as printed: ISO string or seconds since boot
    pci_address: str | None = None  # normalized
    xid: int | None = None
    pid: int | None = None
    process: str | None = None
    detail: str | None = None  # RmInitAdapter code, API mismatch versions, ...


@record
class EventGroup:
    """Kernel log lines of one kind, device and message template (numbers, addresses and pids replaced by
    ``#``), aggregated while scanning: a count, the first and last occurrence and a bounded sample.

    ``kind`` is an event kind, or "other" for NVRM/SXid/AER lines that are no event (driver chatter,
    assertion spam); those are counted, never reported as findings.
    """

    kind: str
    template: str
    count: int
    first: KernelEvent
    last: KernelEvent
    samples: tuple[KernelEvent, ...] = ()  # the first few occurrences and the last one, in log order
    peak_hour: int = 0  # xid only: most lines of this (GPU, Xid) within any hour of log time (all templates)
    peak_from: str | None = None  # timestamps bounding that hour's lines
    peak_to: str | None = None

    @property
    def pci_address(self) -> str | None:
        return self.first.pci_address

    @property
    def xid(self) -> int | None:
        return self.first.xid


REPORTED = "reported"  # KernelLog.format of the Xids a person named in words
# KernelLog.format of the Xids the NVIDIA device plugin logged from NVML's events (parsers/device_plugin_xids.py):
# machine output, each event with the GPU's UUID and no PCI address
DEVICE_PLUGIN = "device-plugin"


@record
class KernelLog:
    """The NVIDIA-relevant part of a kernel log. ``events`` is bounded: the sample events of every group.

    Counts, first and last times come from ``groups``; a KernelLog built by hand with ``events`` only (and
    no groups) counts each event once.
    """

    source: str
    format: str  # "dmesg", "dmesg-iso", "dmesg-ctime", "journal", "syslog", "kmsg", "pstore", "plain"; REPORTED:
    # no log, only the Xids a person named in words (parsers/reported_xids.py): the checks keep them below critical
    lines_scanned: int = 0
    events: tuple[KernelEvent, ...] = ()
    module_banners: tuple[str, ...] = ()  # "NVRM: loading NVIDIA UNIX ... Kernel Module  <ver> ..."
    # the line numbers of those banners: each is a driver load (a boot or a reload), which resets the GPUs and
    # applies a pending page retirement or row remap (GH403 tells an error that recurs after one)
    driver_loads: tuple[int, ...] = ()
    groups: tuple[EventGroup, ...] = ()
    bytes_scanned: int = 0
    # Xid occurrences each with its own time and text: the last few per GPU and Xid (parsers/kernel_log.XID_RECENT),
    # in log order. The groups mask numbers and keep a sample; the monitor's correlation rules count occurrences.
    xids: tuple[KernelEvent, ...] = ()

    @property
    def reported(self) -> bool:
        """Whether the events are only what a person said (Xids named in words), not lines the machine logged."""
        return self.format == REPORTED

    def tallies(self, kinds: Collection[str]) -> list[EventGroup]:
        """The groups of these kinds; for a hand-built log without groups, one group per event."""
        if self.groups or not self.events:
            return [g for g in self.groups if g.kind in kinds]
        return [EventGroup(e.kind, e.message, 1, e, e, (e,)) for e in self.events if e.kind in kinds]


# In CommandRun.error when a command survived SIGKILL (host.run_command abandons it; GH204 reports it).
STUCK_MARKER = "could not be killed"


@record
class CommandRun:
    """What happened when a command ran (or was replayed): the basis of tool-failure checks."""

    argv: tuple[str, ...]
    exit_code: int | None  # None when it never ran (not installed, timed out, not captured)
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    error: str | None = None  # "not installed", "permission denied", "not captured" ...

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout + ("\n" + self.stderr if self.stderr else "")


@record
class NvmlReport:
    """What the NVML probe returned: the library's view of the driver and GPUs, errors included."""

    ok: bool
    error: str | None = None  # e.g. "Driver/library version mismatch"
    error_code: int | None = None  # nvmlReturn_t
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    gpus: tuple[Gpu, ...] = ()


@record
class TorchEnv:
    """From PyTorch's collect_env output or a live probe."""

    torch_version: str | None = None
    torch_cuda_version: str | None = None  # "Is debug build"/"CUDA used to build PyTorch"
    cuda_available: bool | None = None
    gpu_names: tuple[str, ...] = ()
    driver_version: str | None = None
    cudnn_version: str | None = None
    os: str | None = None
    python_version: str | None = None
    # from the live probe (``python3 -c`` on the host, GH6xx); collect_env leaves these unknown
    installed: bool | None = None  # False: ``import torch`` failed with "No module named 'torch'"
    python_executable: str | None = None
    device_count: int | None = None
    arch_list: tuple[str, ...] = ()  # torch.cuda.get_arch_list(): "sm_80", "sm_90", "compute_90" ...
    devices: tuple[TorchDevice, ...] = ()
    first_cuda_call_s: float | None = None  # is_available() up to the first tensor on cuda:0
    error: str | None = None  # the exception text when CUDA (or importing torch) failed
    init_warning: str | None = None  # "CUDA initialization: The NVIDIA driver on your system is too old ..."
    frameworks: tuple[FrameworkEnv, ...] = ()  # JAX, CuPy, TensorFlow from the same probe (GH610); () unknown
    # (pip name, version) of compiled extensions a pasted pip list / freeze shows beside torch (torchvision, flash-attn,
    # xformers ...: GH627); () unknown
    extensions: tuple[tuple[str, str], ...] = ()


@record
class AppError:
    """A CUDA/NCCL/driver error a training log or traceback shows."""

    kind: str  # "cuda-oom", "no-device", "insufficient-driver", "cuda-unknown", "nccl", "illegal-address", ...
    message: str
    line_number: int | None = None


@record
class DeviceRequest:
    """A GPU index a program asks for, as analyze found it written (GH608 holds it to the GPUs it can see)."""

    index: int
    text: str  # the words that ask: "cuda:3", "set_device(3)", "--gpu 3"
    line: str = ""  # the line they are in
    # how many GPUs the program saw, where the same line says it (PyTorch's "... on CUDA device 1 but
    # torch.cuda.device_count() is 1"): a checkpoint saved on a GPU the loading program does not have
    visible: int | None = None
    # the index is a launcher's last rank (torchrun --nproc_per_node=N: each of N processes takes GPU LOCAL_RANK),
    # judged only where the program failed for want of a device (a script may not use LOCAL_RANK)
    ranks: bool = False
    # the index is an option's default in the program's own argparse definition (`--gpu`, default 1): a command line
    # may pass another, so it is judged only where the program failed for want of a device
    default: bool = False


@record
class GpuAllocation:
    """The GPUs a batch scheduler gives a job, as its job script or command line asks for them (Slurm's
    ``--gres=gpu:2``, ``--gpus=2``): the job's processes see that many, CUDA_VISIBLE_DEVICES set by the scheduler."""

    count: int
    line: str  # the line that asks for them, as written


@record
class LateVisibility:
    """A program line that sets a visibility variable after a line of the same program initialised CUDA: CUDA read the
    variable when it initialised, so the assignment does not change which GPUs this process sees (GH608)."""

    name: str  # CUDA_VISIBLE_DEVICES
    value: str  # the value the line sets
    line: str  # the assignment, as written
    after: str  # the line that initialised CUDA before it


@record
class NvswitchPlatform:
    """A platform whose GPUs talk through NVSwitch (knowledge/nvswitch_platforms.csv), as the evidence names it: eight
    SXM GPUs in nvidia-smi's list, a DMI product name, a cloud instance type, or a person's words. On it CUDA waits
    for Fabric Manager, which ranks that cause first among a CUDA-initialisation failure's open causes
    (checks/diagnosis.py)."""

    name: str  # the table's platform: "NVIDIA HGX A100 8-GPU (eight A100 SXM4)"
    shown: str  # what named it: "8 x NVIDIA A100-SXM4-80GB", "p4d.24xlarge"
    source: str  # the piece of evidence it was read from
    reported: bool = False  # named in a person's sentences, not in a program's output


@record
class NamedGpu:
    """A GPU model, and how many of it, named in text other than nvidia-smi's table ("on 8x H20", "2x RTX 3090", "my
    GTX 1080 Ti"), with its product line from knowledge/gpu_models.csv (parsers/gpu_mentions.named_gpus). What a
    person names is the reporter's words: the checks use it only where no program lists the GPUs."""

    model: str  # the table's model or family: "GeForce RTX", "H100 SXM5", "Tesla T4"
    named: str  # as written: "RTX 3090", "H100 SXM"
    line: str  # "geforce", "workstation" or "datacenter"
    form: str  # "sxm", "pcie" or "" (the name is both)
    passive: bool  # a data-center card with no fan of its own
    board: str  # the NVSwitch baseboard eight of them make, if any
    count: int | None  # how many the words say ("8x", "two"); None when they do not
    words: str  # the sentence that names it (at most 300 characters)
    source: str


@record
class Mention:
    """A GPU or an NVIDIA driver version named in text analyze could not read as one program's output (a package file
    name in an installer's log, a PCI ID in a log line, a GPU model in a person's sentence): GH209 holds them together
    (parsers/gpu_mentions.py)."""

    what: str  # "gpu" or "driver"
    value: str  # a gpu: its PCI device IDs, space-separated ("0612 0613": a name several boards share); a driver:
    # its version ("343.22") or branch ("470")
    named: str  # the words that name it: "9800GTX+", "10de:0612", "libgl1-nvidia-glx_343.22-2"
    line: str  # the line they are in (at most 300 characters)
    source: str
    reported: bool = False  # a person's words, not a program's output


@record
class P2pPair:
    """One ordered pair of GPUs in a CUDA sample's peer-to-peer test; the samples number GPUs as CUDA does."""

    src: int
    dst: int
    access: bool | None = None  # cudaDeviceCanAccessPeer: the connectivity matrix, "CAN/CANNOT Access", "Yes/No"
    # p2pBandwidthLatencyTest's GB/s: copies staged through the host (P2P=Disabled) and direct ones (Enabled,
    # P2P writes), one way (uni) and both ways at once (bi)
    uni_disabled: float | None = None
    uni_enabled: float | None = None
    bi_disabled: float | None = None
    bi_enabled: float | None = None


@record
class P2pDevice:
    """A GPU as a CUDA sample lists it ("Device: 0, NVIDIA RTX A6000, pciBusID: 1, pciDeviceID: 0, pciDomainID:0")."""

    index: int  # the CUDA device number
    name: str = ""
    pci_bus: int | None = None
    pci_device: int | None = None
    pci_domain: int | None = None


@record
class P2pTest:
    """The output of a CUDA sample that tests GPU peer-to-peer: p2pBandwidthLatencyTest or simpleP2P."""

    program: str  # "p2pBandwidthLatencyTest", "simpleP2P"
    devices: tuple[P2pDevice, ...] = ()
    pairs: tuple[P2pPair, ...] = ()
    verification_errors: tuple[str, ...] = ()  # simpleP2P: data read back wrong after a peer copy
    result: str | None = None  # simpleP2P: "passed", "failed", "waived"
    lines: tuple[str, ...] = ()  # a few lines that show what was read (titles, the device list)


@record
class P2pEvidence:
    """Pasted lines about GPU peer-to-peer: NCCL/P2P failures, PCIe ACS redirection, the IOMMU (GH706)."""

    failures: tuple[str, ...] = ()  # "NCCL WARN ...", "all_reduce_perf hangs", "works with NCCL_P2P_DISABLE=1"
    acs_redirect: tuple[str, ...] = ()  # "ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ ..."
    iommu: tuple[str, ...] = ()  # "DMAR: IOMMU enabled", "intel_iommu=on"
    acs_read: bool = False  # an ACSCtl line was in the evidence (redirecting or not): the ACS setting is known
    acs_bridges: tuple[str, ...] = ()  # lspci -vvv: the PCI bridges ("03:00.0") whose ACSCtl redirects
    tests: tuple[P2pTest, ...] = ()  # CUDA samples' P2P tests (parsers/cuda_p2p.py)
    # `nvidia-smi topo -p2p <r|w|n|a|p>`: per GPU pair the driver's answer (OK, CNS, GNS, TNS, NS, U)
    topo_p2p: tuple[TopologyLink, ...] = ()
    topo_p2p_capability: str = ""  # "read", "write", "nvlink", "atomics", "prop" ("" when the command is unknown)


@record
class MessageLine:
    """A line of pasted evidence that the signature catalogue matched, or an error-looking line it did not."""

    line: str
    source: str  # file, or "file: $ command"
    signature: str | None = None  # knowledge/signatures.csv id; None: an error line gpuhealth does not know
    symptom: str | None = None  # a symptom id the line (or the command that printed it) shows, when known
    # the snapshot fields the line's piece was parsed into (a kernel log: "kernel_log"); checks that require
    # or read one of them saw the line too
    read_into: tuple[str, ...] = ()
    # the knowledge/mined/api_errors.csv row id of a CUDA, NVML, NCCL or DCGM error the line names (GH309 reads it)
    mined: str = ""
    # the reporter's own words, not a program's output ("nvidia-smi takes forever": parsers/prose_symptoms.py): a
    # finding that rests only on such lines stays below critical
    reported: bool = False


def grep_would_show(pattern: str, name: str) -> bool:
    """Would ``grep PATTERN`` print the ``lsmod`` line of module ``name``? The pattern's alternatives (``a|b``,
    ``a\\|b``) are read as plain words (no regular expression engine runs on pasted text); a leading ``=``
    marks ``grep -w``/``-x`` (whole names only). A word that is not plain shows nothing, so a filtered list
    never claims more than grep would have printed."""
    whole = pattern.startswith("=")
    words = [w.strip("^$ ") for w in re.split(r"\\?\|", pattern.removeprefix("="))]
    return any(w and re.fullmatch(r"[\w-]+", w) and (w == name if whole else w in name) for w in words)


# the source a finding's evidence names for facts read from a person's sentences (ReportedFact)
REPORTED_WORDS = "the reporter's words (not a program's output)"


@record
class ReportedFact:
    """A fact analyze read from a person's sentences ("my driver is 570.133.20", "fabric manager is not installed"),
    not from a program's output: it fills the snapshot field a program's output would, only where no program's output
    gave it, and a finding that rests on it is the reporter's words (checks/engine.py keeps it below critical)."""

    # the Snapshot field it filled: "driver", "cuda", "os", "install", "host_env", "smi"; "unavailable": the words
    # answered the parts of the evidence that ``attributes`` name (keys of Snapshot.unavailable)
    field: str
    # the attributes it set there ("gpu:0:pcie_width_current" for one GPU of smi); () when it made the whole field
    attributes: tuple[str, ...]
    what: str  # "NVIDIA driver 570.133.20"
    words: str  # the sentence that states it, one line
    source: str  # the piece of evidence it was read from


@record
class Snapshot:
    """Everything observed about one host at one time. Built by ``collect`` or by ``analyze``."""

    schema_version: int = SNAPSHOT_SCHEMA_VERSION
    origin: str = "live"  # "live", "bundle", "evidence" (loose files)
    hostname: str | None = None
    captured_at: str | None = None
    os: OsInfo | None = None
    pci_devices: tuple[PciDevice, ...] | None = None
    driver: DriverInfo | None = None
    kernel_modules: tuple[str, ...] | None = None  # loaded module names
    # analyze: the grep patterns a pasted `lsmod | grep X` was filtered by; only module names matching one
    # of them were listed (empty: the list is complete)
    kernel_module_filters: tuple[str, ...] = ()
    modprobe_blacklisted: tuple[str, ...] | None = None
    device_nodes: tuple[str, ...] | None = None  # names under /dev starting with "nvidia"
    smi: SmiReport | None = None
    smi_run: CommandRun | None = None
    nvml: NvmlReport | None = None
    kernel_log: KernelLog | None = None
    topology: Topology | None = None
    nvlink: tuple[NvlinkState, ...] | None = None
    torch: TorchEnv | None = None
    app_errors: tuple[AppError, ...] | None = None
    unrecognized_files: tuple[str, ...] = ()  # analyze: files whose format was not recognised
    messages: tuple[MessageLine, ...] | None = None  # analyze: signature matches and unknown error lines
    commands_given: tuple[str, ...] = ()  # analyze: the commands of a pasted terminal session, as typed
    p2p: P2pEvidence | None = None  # analyze: NCCL/P2P failures, ACS and IOMMU lines (GH706)
    # analyze: the GPU indices a program asks for, in its command line, code or traceback (GH608)
    devices_requested: tuple[DeviceRequest, ...] = ()
    # analyze: a program's assignments of CUDA_VISIBLE_DEVICES made after it initialised CUDA: no effect (GH608)
    visible_set_late: tuple[LateVisibility, ...] = ()
    # analyze: a program's Ray tasks or actors that ask for no GPU (`@ray.remote` without num_gpus): Ray runs them with
    # CUDA_VISIBLE_DEVICES empty, so they see none (GH608)
    ray_without_gpus: tuple[str, ...] = ()
    # analyze: the GPUs a scheduler's job script or command line asks for (Slurm --gres=gpu:N): what the job sees
    gpus_allocated: GpuAllocation | None = None
    # analyze: how many GPUs a person's words say the host has ("I have only one GPU"), where no program's output lists
    # them: always a reported fact (GH608 holds a device index to it, at most a warning)
    gpus_stated: int | None = None
    # analyze: GPUs and driver versions named in text no parser read (GH209): package names, PCI IDs, models in words
    mentioned: tuple[Mention, ...] = ()
    # analyze: GPU models (and counts) named in words or in program output other than nvidia-smi's GPU list, each with
    # its product line: always reported facts (the checks use them where no program lists the GPUs)
    gpus_named: tuple[NamedGpu, ...] = ()
    # analyze: lines showing a program ran inside a container (an NVIDIA image's banner or entrypoint, `docker run
    # --gpus`, a container-toolkit line; parsers/container_run.py): CUDA's errors 803 and 804 are read in that context
    container_lines: tuple[str, ...] = ()
    # analyze: the NVSwitch platform the evidence names (GPU list, DMI product name, instance type, words), if any
    platform: NvswitchPlatform | None = None
    env: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)  # evidence name -> why it is missing
    sources: dict[str, str] = field(default_factory=dict)  # evidence name -> file or command it came from
    install: InstallState | None = None  # driver-install readiness (GH5xx)
    cuda: CudaState | None = None  # CUDA toolkits, loader, persistence daemon (GH6xx)
    active: ActiveResults | None = None  # opt-in active tests (check --level 2, GH71x)
    host_env: HostEnvironment | None = None  # display, install routes, containers, params, storage (GH8xx)
    host_health: HostHealth | None = None  # InfiniBand, EDAC, inodes, file and PID limits (GH72x, GH81x)
    dcgm: DcgmReport | None = None  # a pasted dcgmi diag / dcgmi health table (GH711)
    # analyze: facts read from a person's sentences, and the fields they filled (ReportedFact)
    reported: tuple[ReportedFact, ...] = ()

    def reported_fact(self, field_name: str, attribute: str | None = None) -> ReportedFact | None:
        """The reported fact that filled ``field_name`` (made it whole, or set ``attribute`` of it), or None when
        a program's output gave it."""
        for fact in self.reported:
            if fact.field == field_name and (not fact.attributes or attribute is None or attribute in fact.attributes
                                             or any(a.endswith(f":{attribute}") for a in fact.attributes)):
                return fact
        return None

    @property
    def words_only(self) -> bool:
        """Whether every field analyze filled came from a person's sentences (no program's output was read)."""
        reported = {fact.field for fact in self.reported}
        return bool(reported) and set(self.sources) <= reported and not any(
            m.signature or m.mined for m in self.messages or ())

    def machine_only(self) -> Snapshot:
        """This snapshot without what the reported facts filled and without the lines of a person's words: what the
        programs' output alone shows."""
        changes: dict[str, Any] = {"reported": ()}
        if any(m.reported for m in self.messages or ()):  # lines of a person's words (words-* rows, told symptoms)
            changes["messages"] = tuple(m for m in self.messages or () if not m.reported)
        if any(m.reported for m in self.mentioned):  # GPUs and drivers named in a person's sentences
            changes["mentioned"] = tuple(m for m in self.mentioned if not m.reported)
        for fact in self.reported:
            current = changes.get(fact.field, getattr(self, fact.field))
            if fact.field == "unavailable":  # the words answered what pasted evidence leaves open: open again
                changes[fact.field] = {**current, **dict.fromkeys(fact.attributes, "not in the evidence given")}
                continue
            changes[fact.field] = _without(current, fact.attributes) if fact.attributes else _field_default(fact.field)
        return dataclasses.replace(self, **changes)

    @property
    def has_reported(self) -> bool:
        """Whether anything in the snapshot comes from a person's words (facts, or lines the checks read)."""
        return (bool(self.reported) or any(m.reported for m in self.messages or ())
                or any(m.reported for m in self.mentioned))

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        """The GPUs the driver reports: NVML's view when it worked, else nvidia-smi's."""
        if self.nvml is not None and self.nvml.ok and self.nvml.gpus:
            return self.nvml.gpus
        if self.smi is not None:
            return self.smi.gpus
        return ()

    @property
    def gpu_list_partial(self) -> bool:
        """Whether the driver's list in hand is an excerpt (``SmiReport.partial``): its length counts nothing."""
        nvml = self.nvml is not None and self.nvml.ok and bool(self.nvml.gpus)
        return not nvml and self.smi is not None and self.smi.partial

    @property
    def gpu_count(self) -> int:
        """GPUs on this host: the driver's list, else the NVIDIA GPUs on the PCI bus; from an excerpt of the
        driver's list, at least as many as it shows."""
        if self.gpu_list_partial:
            return max(len(self.gpus), len(self.nvidia_pci_gpus))
        return len(self.gpus) or len(self.nvidia_pci_gpus)

    def module_listed(self, name: str) -> bool | None:
        """Is kernel module ``name`` loaded: True/False when the module list says so, None when the list is
        unknown or was filtered (``lsmod | grep nvidia``) by patterns that would not have shown ``name``."""
        if self.kernel_modules is None:
            return None
        if name in self.kernel_modules:
            return True
        if self.kernel_module_filters and not any(grep_would_show(p, name) for p in self.kernel_module_filters):
            return None
        return False

    @property
    def nvidia_pci_gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.pci_devices or () if d.is_nvidia_gpu)

    def gpu_subject(self, pci_address: str | None) -> Subject:
        """The subject for a PCI address: with the driver's GPU index when one matches."""
        for gpu in self.gpus:
            if pci_address and gpu.pci_address == pci_address:
                return Subject(gpu.index, pci_address)
        return Subject(None, pci_address)


def _field_default(name: str) -> Any:
    """A Snapshot field's value when nothing filled it (None, or () for ``kernel_module_filters``)."""
    spec = next(f for f in dataclasses.fields(Snapshot) if f.name == name)
    return spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()  # type: ignore[misc]


def _without(value: Any, attributes: tuple[str, ...]) -> Any:
    """``value`` with ``attributes`` back at their defaults (None for a value a reported fact made whole); an
    attribute ``gpu:I:NAME`` is NAME of the I-th GPU of an SmiReport."""
    if value is None or not attributes:
        return None
    changes: dict[str, Any] = {}
    gpus = list(getattr(value, "gpus", ()))
    for attribute in attributes:
        if attribute.startswith("gpu:"):
            _, index, name = attribute.split(":", 2)
            at = int(index)
            if at < len(gpus):
                gpus[at] = dataclasses.replace(gpus[at], **{name: None})
            changes["gpus"] = tuple(gpus)
            continue
        spec = next(f for f in dataclasses.fields(value) if f.name == attribute)
        changes[attribute] = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()  # type: ignore[misc]
    return dataclasses.replace(value, **changes)


# --------------------------------------------------------------------------- JSON both ways


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums, tuples and dicts to plain JSON types. None-valued fields are dropped, and so are empty
    ones, except where the field's default is None: there ``()`` says "read, and nothing there" (a host without
    InfiniBand devices) and ``None`` "could not be read", and the two must read back apart."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is None or ((item == () or item == {}) and f.default is not None):
                continue
            out[f.name] = to_jsonable(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)`` for classes whose annotations are all strings (``from __future__ import
    annotations``), each annotation text compiled once: typing compiles every one anew ("str | None" about
    twenty times to read one NVML report back), which is felt at start-up. Anything else goes to typing."""
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        annotations = base.__dict__.get("__annotations__", {})
        if not all(isinstance(text, str) for text in annotations.values()):
            return typing.get_type_hints(cls)
        # as typing does: the module's names first, then the class's (typing swaps them so), then builtins
        scope, module = dict(vars(base)), getattr(sys.modules.get(base.__module__), "__dict__", {})
        for name, text in annotations.items():
            value = eval(_annotation_code(text), scope, module)  # noqa: S307 - our own annotation texts
            if not _resolved(value):
                return typing.get_type_hints(cls)  # a string inside (an alias's forward reference): typing's work
            hints[name] = type(None) if value is None else value
    return hints


def _resolved(hint: Any) -> bool:
    """No forward reference (a string) left anywhere inside ``hint``."""
    if isinstance(hint, (str, typing.ForwardRef)):
        return False
    if isinstance(hint, list):  # Callable's parameters
        return all(_resolved(item) for item in hint)
    return all(_resolved(arg) for arg in typing.get_args(hint))


@functools.cache
def _annotation_code(text: str) -> types.CodeType:
    return compile(text, "<annotation>", "eval")


def from_jsonable(cls: type, data: Any) -> Any:
    """Rebuild a dataclass (recursively) from ``to_jsonable`` output. Unknown keys are ignored."""
    if not isinstance(data, dict):
        raise ParseError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
        elif _required(f) and _admits_none(hints[f.name]):
            kwargs[f.name] = None  # to_jsonable drops None: a command that never ran has no exit_code key
    # An unknown key is ignored (an older or newer writer), but one naming a property is a mistake: it reads
    # like data ("gpus": 3 in a Snapshot) and would silently be dropped.
    derived = next((key for key in data if key not in kwargs and isinstance(getattr(cls, str(key), None), property)),
                   None)
    if derived is not None:
        raise ParseError(f"`{derived}` is not stored in {cls.__name__}: it is derived from other fields")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ParseError(f"bad {cls.__name__}: {exc}") from exc


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _admits_none(hint: Any) -> bool:
    origin, args = _origin_and_args(hint)
    return hint is type(None) or (origin in (typing.Union, types.UnionType) and type(None) in args)


def _origin_and_args(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``typing.get_origin`` and ``get_args`` of a hint, asked once per hint (an NVML report has ~700 values)."""
    try:
        return _ORIGINS[hint]
    except KeyError:
        found = _ORIGINS[hint] = (typing.get_origin(hint), typing.get_args(hint))
        return found
    except TypeError:  # an unhashable hint
        return typing.get_origin(hint), typing.get_args(hint)


_ORIGINS: dict[Any, tuple[Any, tuple[Any, ...]]] = {}


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = _origin_and_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _convert(options[0], value) if len(options) == 1 else value
    if origin is tuple:
        if not isinstance(value, list):
            raise ParseError(f"expected a list, got {type(value).__name__}")
        return tuple(_convert(args[0], v) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ParseError(f"expected an object, got {type(value).__name__}")
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint):
        return from_jsonable(hint, value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ParseError(f"expected {hint.__name__}, got {type(value).__name__}")
    return value


@record
class Report:
    """The result of running the checks over one snapshot."""

    snapshot: Snapshot
    findings: tuple[Finding, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    checks_run: int = 0

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def verdict(self) -> str:
        if any(f.code == NO_DIAGNOSIS for f in self.findings):
            return "NO DIAGNOSIS"
        if self.count(Severity.CRITICAL):
            return "BROKEN"
        if self.count(Severity.WARNING):
            return "DEGRADED"
        # nothing wrong in what was read, but not all was read, or what was read says nothing of the GPUs' health
        if any(f.code in (UNRECOGNIZED, SETUP_ONLY) for f in self.findings):
            return "NO DIAGNOSIS"
        if self.snapshot.words_only:  # a person's sentences alone show no machine to call healthy
            return "NO DIAGNOSIS"
        return "HEALTHY"

    @property
    def exit_code(self) -> int:
        """0 healthy or info only, 1 warnings, 2 critical, 3 no diagnosis (gpuhealth could not answer)."""
        return {"BROKEN": 2, "DEGRADED": 1, "HEALTHY": 0, "NO DIAGNOSIS": 3}[self.verdict]


# --------------------------------------------------------------------------- install readiness (GH5xx)


@record
class ModprobeFile:
    """One modprobe.d file: the modules it blacklists and the options it sets for nouveau."""

    path: str
    blacklisted: tuple[str, ...] = ()
    nouveau_options: str | None = None  # "modeset=0"
    mtime: float | None = None
    nvidia_options: str | None = None  # "NVreg_PreserveVideoMemoryAllocations=1" (its options nvidia lines)


@record
class DkmsEntry:
    """One ``dkms status`` line: ``nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed``."""

    module: str
    version: str
    kernel: str | None = None
    arch: str | None = None
    state: str = ""  # "added", "built", "installed" (notes after it kept: "installed (WARNING! ...)")

    @property
    def installed(self) -> bool:
        return self.state.startswith("installed")


@record
class InstalledKernel:
    """A kernel under /lib/modules and whether an nvidia module exists for it."""

    release: str
    nvidia_module: str | None = None  # path of the nvidia.ko* found, or "dkms: installed"
    booted: bool = False


@record
class InstallState:
    """What a driver install needs: nouveau disabled, headers, compiler, Secure Boot, DKMS, kernels.

    ``None`` means unknown (why is in ``Snapshot.unavailable`` under ``install_*``); ``False`` and
    empty tuples are answers.
    """

    kernel_release: str | None = None
    modprobe_dirs: tuple[str, ...] = ()  # modprobe.d directories read (an absent one: no files there)
    modprobe_files: tuple[ModprobeFile, ...] = ()
    kernel_cmdline_blacklisted: tuple[str, ...] = ()  # modprobe.blacklist= / rd.driver.blacklist= ...
    kernel_cmdline_nouveau_options: str | None = None  # nouveau.modeset=0 -> "modeset=0"
    initramfs_path: str | None = None
    initramfs_mtime: float | None = None
    initramfs_has_nouveau: bool | None = None  # a nouveau .ko is listed in it (lsinitramfs/lsinitrd)
    initramfs_modprobe_files: tuple[str, ...] = ()  # names of modprobe.d files packed into it
    headers_path: str | None = None  # /lib/modules/<release>/build (or /usr/src/kernels/<release>)
    headers_target: str | None = None  # where the build link points
    headers_present: bool | None = None
    # A pasted package listing (dpkg -l, apt list, rpm -qa, dnf list): the kernel releases that have an image package
    # (linux-image-R, kernel/kernel-core) and those that have a headers package (linux-headers-R, kernel-devel), for
    # GH503 where /lib/modules/<release>/build was not looked at. RPM releases carry no architecture ("3.10.0-957.el7").
    kernel_packages: tuple[str, ...] = ()
    headers_packages: tuple[str, ...] = ()
    kernel_packages_source: str | None = None
    # a package tool's log: the kernel release it installed last (the next boot's default), checked for headers too
    kernel_installed_last: str | None = None
    gcc_present: bool | None = None
    gcc_version: str | None = None  # "11.4.0"
    gcc_banner: str | None = None  # first line of gcc --version
    make_present: bool | None = None
    kernel_compiler: str | None = None  # "gcc 11.4.0" (from /proc/version), "clang 17.0.6"
    secure_boot: str | None = None  # "enabled", "disabled", "unsupported" (legacy BIOS boot)
    secure_boot_source: str | None = None
    # kernel lockdown (security/lockdown/lockdown.c): "none", "integrity" or "confidentiality"; either of the last two
    # refuses modules without a trusted signature, with Secure Boot or without it (lockdown= on the command line)
    lockdown: str | None = None
    lockdown_source: str | None = None
    module_signer: str | None = None  # modinfo -F signer nvidia: "" when the module is unsigned
    module_file: str | None = None  # modinfo -n nvidia: the nvidia.ko modprobe would load
    # the certificate DKMS signs the modules it builds with, as its build printed it ("Public certificate (MOK): ...",
    # dell/dkms dkms.in prepare_mok: Ubuntu's /var/lib/shim-signed/mok/MOK.der, else /var/lib/dkms/mok.pub)
    signing_certificate: str | None = None
    signing_certificate_source: str | None = None
    # mokutil --list-enrolled: the names (CN) of the enrolled MOKs' certificates, subject and issuer; None: not shown
    enrolled_keys: tuple[str, ...] | None = None
    enrolled_keys_source: str | None = None
    # `mokutil --test-key KEY`: the key a module is signed with (DKMS's /var/lib/dkms/mok.pub, a MOK.der) and
    # what shim says of it: "enrolled", "not-enrolled", "pending" (in the enrollment request: confirm it in the
    # MOK manager at the next boot) or "blocked" (dbx, MokListX)
    signing_key: str | None = None
    signing_key_state: str | None = None
    signing_key_line: str | None = None  # the line as mokutil printed it
    signing_key_source: str | None = None  # the file (or "file: $ command") it was in
    dkms_present: bool | None = None
    dkms: tuple[DkmsEntry, ...] = ()
    kernels: tuple[InstalledKernel, ...] = ()
    module_found: bool | None = None  # modinfo nvidia: False for "Module nvidia not found" (none for this kernel)
    module_version: str | None = None  # modinfo nvidia: the version of the module on disk ("535.161.08")


# --------------------------------------------------------------------------- after the install (GH6xx)


@record
class TorchDevice:
    """One GPU as the PyTorch probe saw it, with a small matmul compared against the CPU."""

    index: int
    name: str | None = None
    capability: str | None = None  # "9.0" (torch.cuda.get_device_capability)
    matmul_max_error: float | None = None  # max |GPU - CPU| of a float32 matmul (TF32 off)
    matmul_nonfinite: bool | None = None  # the GPU result held NaN or Inf
    error: str | None = None  # the exception the device raised


@record
class CudaToolkit:
    """One CUDA toolkit directory under /usr/local and its version."""

    path: str  # /usr/local/cuda-12.4
    version: str | None = None  # "12.4.131" (version.json cuda.version, version.txt, or the name)
    source: str | None = None  # the file the version came from


@record
class LibraryEntry:
    """One ``ldconfig -p`` line: ``libcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1``."""

    name: str
    flags: str  # "libc6,x86-64"
    path: str


@record
class LdConfEntry:
    """A directory naming CUDA in /etc/ld.so.conf or /etc/ld.so.conf.d/*.conf."""

    file: str
    directory: str


@record
class CudaState:
    """What comes after the driver install: toolkits, nvcc, the loader's view of the CUDA libraries, and
    the persistence daemon. ``None`` means unknown (why is in ``Snapshot.unavailable`` under ``cuda_*``).
    """

    toolkits: tuple[CudaToolkit, ...] = ()  # /usr/local/cuda-* (links such as cuda-12 left out)
    default_link: str | None = None  # where /usr/local/cuda points (through /etc/alternatives)
    nvcc_release: str | None = None  # "12.4" (nvcc --version on PATH)
    nvcc_version: str | None = None  # "12.4.131"
    ld_library_path: tuple[str, ...] = ()
    ld_so_conf: tuple[LdConfEntry, ...] = ()
    libraries: tuple[LibraryEntry, ...] = ()  # ldconfig -p lines for libcuda, libnvidia-ml, libcudart
    libcuda_path: str | None = None  # the libcuda.so.1 the loader resolves
    libcuda_target: str | None = None  # where that link points: libcuda.so.535.161.08
    libcuda_version: str | None = None  # "535.161.08"
    persistenced_active: str | None = None  # systemctl is-active: "active", "inactive", "failed" ...
    persistenced_enabled: str | None = None  # systemctl is-enabled: "enabled", "disabled", "not-found" ...
    torch_probe_error: str | None = None  # the PyTorch probe did not answer: "timed out after 60 s" ...
    gsp_driver_version: str | None = None  # the loaded module's version the firmware was looked up for
    gsp_firmware_dir: str | None = None  # /lib/firmware/nvidia/<version> (None: no directory for it)
    gsp_firmware_files: tuple[str, ...] = ()  # gsp*.bin files there: gsp_ga10x.bin, gsp_tu10x.bin ...
    gsp_firmware_versions: tuple[str, ...] = ()  # the version directories under /lib/firmware/nvidia
    conda_cudatoolkit: str | None = None  # conda list: the cudatoolkit (or cuda-runtime) in the environment
    # a pasted Dockerfile's base image ("nvidia/cuda:12.4.1-runtime-ubuntu22.04") and the CUDA it brings ("12.4.1")
    base_image: str | None = None
    base_image_cuda: str | None = None
    image_command: str | None = None  # the container run command naming that image (`docker run ... nvidia/cuda:...`)
    # the CUDA a program's own "driver too old" message says it uses (CUDA.jl's "CUDA 11.0.0 is not supported by your
    # driver"), the program ("CUDA.jl") and that message (parsers/driver_too_old.py)
    program_cuda: str | None = None
    program_name: str | None = None
    program_line: str | None = None
    fabricmanager_active: str | None = None  # systemctl status / journalctl -u nvidia-fabricmanager: "failed" ...
    fabricmanager_enabled: str | None = None
    fabricmanager_errors: tuple[str, ...] = ()  # its error lines ("... failed with error: ... NV_WARN_NOTHING_TO_DO")
    fabricmanager_version: str | None = None  # the version its own log names ("Fabric Manager version 550.127.05 ...")
    persistenced_errors: tuple[str, ...] = ()  # nvidia-persistenced's error lines from systemctl status / journalctl
    # its command line (systemctl status: the CGroup tree, else ExecStart); --no-persistence-mode forces it off
    persistenced_command: str | None = None
    # where that command line was read: "/proc/2748/cmdline" (live: the unit's MainPID), "systemctl show ExecStart"
    # (its fallback), a pasted systemctl status or ps listing
    persistenced_command_source: str | None = None
    # CUDA library files a program's output names (ldd, a loader error, a configuration file): which copies it uses
    library_files: tuple[str, ...] = ()


# --------------------------------------------------------------------------- active tests (GH71x)


@record
class ActiveGpuResult:
    """One GPU's active tests: copy bandwidth over PCIe, a matmul against the CPU, a memory pattern."""

    index: int  # cuda:N with CUDA_DEVICE_ORDER=PCI_BUS_ID (nvidia-smi's order)
    name: str | None = None
    pci_address: str | None = None  # normalized, when PyTorch reports the bus ID
    h2d_gbps: float | None = None  # host-to-device copy from pinned memory, GB/s (1e9 bytes)
    d2h_gbps: float | None = None
    pinned: bool | None = None  # False: page-locked memory was refused, the copies are not comparable
    matmul_max_error: float | None = None  # max |GPU - CPU| of a float32 matmul (TF32 off)
    matmul_nonfinite: bool | None = None
    memory_tested_mib: float | None = None  # GPU memory written and read back with patterns
    memory_mismatches: int | None = None  # elements that read back different from what was written
    error: str | None = None  # the exception a test raised on this GPU
    skipped: str | None = None  # why this GPU was not tested (the time budget ran out ...)


@record
class ActiveResults:
    """What ``gpuhealth.active.run_active_tests`` did: ran, or why not, and each GPU's results."""

    ran: bool
    skipped_reason: str | None = None  # busy GPUs, no PyTorch, no GPU, python3 missing ...
    forced: bool = False
    budget_s: float | None = None
    duration_s: float | None = None
    torch_version: str | None = None
    gpus: tuple[ActiveGpuResult, ...] = ()
    error: str | None = None  # the script failed as a whole


# --------------------------------------------------------------------------- host environment (GH8xx)


@record
class NvidiaPackage:
    """One installed package whose name mentions nvidia (or ``cuda-drivers``), from dpkg or rpm."""

    name: str
    version: str | None = None
    manager: str = ""  # "dpkg" or "rpm"


@record
class PackageChange:
    """One package a package tool's log shows installed, upgraded, downgraded or removed (parsers/package_log.py)."""

    tool: str  # "apt", "dpkg", "dnf", "yum", "zypper", "pacman"
    action: str  # "install", "upgrade", "downgrade", "reinstall", "remove"
    name: str  # without architecture or epoch
    version: str | None = None  # the version installed (for a removal: the version removed)
    old_version: str | None = None  # an upgrade's or downgrade's version before
    date: str | None = None  # as the log prints it
    command: str | None = None  # the transaction's command line where the log gives one
    line: str = ""  # the log's line, cut


@record
class MountEntry:
    """One ``/proc/self/mounts`` line."""

    device: str
    mount_point: str
    fs_type: str
    options: tuple[str, ...] = ()


@record
class DiskSpace:
    """One ``df -P`` line, sizes in KiB."""

    filesystem: str
    mount_point: str
    size_kib: int
    available_kib: int


@record
class IbPort:
    """One InfiniBand/RoCE port under ``/sys/class/infiniband/<device>/ports/<port>/`` as the kernel shows it
    (drivers/infiniband/core/sysfs.c): ``state`` "4: ACTIVE", ``phys_state`` "5: LinkUp", ``rate``
    "400 Gb/sec (4X NDR)", ``link_layer`` "InfiniBand" or "Ethernet" (RoCE); None where the file was unreadable.
    ``counters``: (name, value) from ``counters/`` (absolute values since the driver loaded or last reset)."""

    device: str
    port: str
    state: str | None = None
    phys_state: str | None = None
    rate: str | None = None
    link_layer: str | None = None
    counters: tuple[tuple[str, int], ...] = ()


@record
class EdacController:
    """One memory controller under ``/sys/devices/system/edac/mc/`` (Documentation/admin-guide/ras.rst):
    errors corrected (``ce_count``) and uncorrected (``ue_count``) since the counters were last reset."""

    name: str
    corrected: int | None = None
    uncorrected: int | None = None


@record
class InodeUse:
    """One ``df -P -l -i`` line: the inodes of a file system (0 for file systems that do not count them)."""

    filesystem: str
    mount_point: str
    inodes: int
    free: int


@record
class StuckProcess:
    """A process in uninterruptible sleep (state D, TASK_UNINTERRUPTIBLE) in every one of ``samples`` reads a
    short moment apart, with the ``/dev/nvidia*`` files it holds open (``/proc/<pid>/fd`` links)."""

    pid: int
    name: str
    samples: int
    nvidia_files: tuple[str, ...] = ()
    fds_readable: bool = True  # False: /proc/<pid>/fd could not be read (another user's process, not root)


@record
class HostHealth:
    """The host beside the GPUs (GH72x network, GH81x host): each part None when it could not be read,
    the reason in ``Snapshot.unavailable`` under ``host_*``."""

    infiniband: tuple[IbPort, ...] | None = None  # () on a host without /sys/class/infiniband devices
    ib_excluded: tuple[str, ...] = ()  # devices left unread ([check] ib_exclude)
    edac: tuple[EdacController, ...] | None = None  # () when EDAC has no memory controller
    inodes: tuple[InodeUse, ...] | None = None
    files_open: int | None = None  # /proc/sys/fs/file-nr: allocated file handles
    files_max: int | None = None  # its third field (fs.file-max)
    tasks: int | None = None  # /proc/loadavg's fourth field after the slash: processes and threads that exist
    pid_max: int | None = None  # /proc/sys/kernel/pid_max
    stuck: tuple[StuckProcess, ...] | None = None  # processes in state D across every sample (ps, /proc/<pid>/stat)
    clock_synchronized: bool | None = None  # timedatectl's NTPSynchronized (the kernel's adjtimex sync status)


@record
class HostEnvironment:
    """The host around the driver: display setup, how the driver was installed, containers, driver
    parameters and storage. Empty tuples and dicts are answers; unknown evidence is named in
    ``Snapshot.unavailable`` under ``env_*``.
    """

    default_target: str | None = None  # systemctl get-default: "graphical.target", "multi-user.target"
    display_manager: str | None = None  # systemctl is-active display-manager: "active", "inactive" ...
    kernel_cmdline: str | None = None  # /proc/cmdline
    nvidia_gl_libraries: tuple[str, ...] = ()  # NVIDIA's GL/GLX/EGL libraries found on disk
    runfile_log: str | None = None  # /var/log/nvidia-installer.log when present
    runfile_version: str | None = None  # "installer version: 535.161.08"
    runfile_result: str | None = None  # "installed", "failed", "uninstalled", "unknown"
    runfile_lines: tuple[str, ...] = ()  # the log's lines that show the result
    runfile_uninstaller: str | None = None  # /usr/bin/nvidia-uninstall when present
    packages: tuple[NvidiaPackage, ...] = ()  # installed nvidia packages (dpkg-query / rpm -qa)
    package_source: str | None = None  # the command the list came from
    # a package tool's log (apt history.log, dpkg.log, dnf/yum/zypper/pacman logs): the driver's, CUDA's, the container
    # toolkit's and the kernels' packages it changed, oldest first
    package_changes: tuple[PackageChange, ...] = ()
    package_log_source: str | None = None
    docker: bool | None = None  # the docker CLI (or /etc/docker/daemon.json) is present
    podman: bool | None = None
    docker_runtimes: tuple[str, ...] = ()  # runtimes the daemon knows (docker info, else daemon.json)
    docker_runtimes_source: str | None = None  # None: the runtimes are unknown
    docker_default_runtime: str | None = None
    nvidia_ctk_version: str | None = None  # nvidia-ctk --version: "1.14.3"
    container_toolkit_files: tuple[str, ...] = ()  # /usr/bin/nvidia-container-runtime ... present
    cdi_specs: tuple[str, ...] = ()  # /etc/cdi/nvidia.yaml, /var/run/cdi/nvidia.yaml present
    container: str | None = None  # running inside: "docker", "podman", "kubernetes", "containerd", "lxc"
    container_evidence: str | None = None  # what showed it (/.dockerenv, /run/.containerenv, /proc/1/cgroup)
    driver_params: dict[str, str] = field(default_factory=dict)  # /proc/driver/nvidia/params
    mounts: tuple[MountEntry, ...] = ()
    disk_space: tuple[DiskSpace, ...] = ()
    driver_registry: dict[str, str] = field(default_factory=dict)  # /proc/driver/nvidia/registry
    docker_active: str | None = None  # systemctl status docker: "active", "failed", "inactive" ...
    # NVIDIA's suspend units as systemctl status printed them: (unit, active state, enabled state), "" where not shown
    # ("nvidia-suspend", "inactive", "disabled"); GH804 judges them against NVreg_PreserveVideoMemoryAllocations
    sleep_units: tuple[tuple[str, str, str], ...] = ()
    # `docker info` beyond its runtimes (docs.docker.com/reference/cli/docker/system/info/)
    docker_server_version: str | None = None  # "Server Version: 24.0.7"
    docker_cgroup_driver: str | None = None  # "Cgroup Driver: systemd"
    docker_cgroup_version: str | None = None  # "Cgroup Version: 2"
    # /etc/docker/daemon.json: the runtimes it names (None: not read) and why dockerd cannot load it
    daemon_json_runtimes: tuple[str, ...] | None = None
    daemon_json_error: str | None = None  # invalid JSON: dockerd refuses to start (dockerd's configuration file docs)
    # containerd's CRI runtimes (its config.toml, `containerd config dump` or `crictl info`; parsers/containerd.py):
    # what runs a Kubernetes pod that names no RuntimeClass, and whether an NVIDIA runtime is configured at all
    containerd_config_source: str | None = None  # None: not read
    containerd_runtimes: tuple[str, ...] = ()
    containerd_nvidia_runtimes: tuple[str, ...] = ()  # those that run nvidia-container-runtime
    containerd_default_runtime: str | None = None
    containerd_default_implied: bool = False  # no default_runtime_name in the file: containerd's own default, runc
    containerd_imports: tuple[str, ...] = ()  # files it also reads (a drop-in may add the nvidia runtime)
    # the engine those fields describe: "containerd", or "cri-o" (crio.conf and its crio.conf.d drop-ins, read into
    # the same fields: parsers/containerd.py)
    cri_engine: str = "containerd"
    cri_nvidia_hook: str | None = None  # CRI-O: an NVIDIA OCI hook file that gives pods the GPUs without a runtime
    cri_cdi_enabled: bool = False  # containerd's CRI plugin has enable_cdi = true (crictl info: enableCDI)
    # Kubernetes as kubectl prints it (parsers/kube.py): a node's nvidia.com/gpu, a pod's GPU request and RuntimeClass
    k8s_node_source: str | None = None  # None: no node described
    k8s_node_gpus: int | None = None  # nvidia.com/gpu in Allocatable (else Capacity); 0 when the block lacks it
    k8s_node_nvidia_labels: bool = False  # the GPU operator's or node feature discovery's NVIDIA labels are on it
    k8s_node_runtime: str | None = None  # "Container Runtime Version: containerd://1.7.2"
    k8s_pod_source: str | None = None  # None: no pod manifest read
    k8s_pod_requests_gpu: bool = False
    k8s_pod_runtime_class: str | None = None  # spec.runtimeClassName; "" when the manifest names none
    k8s_pod_status: str | None = None  # kubectl describe pod's Status (and Reason): "Failed (UnexpectedAdmissionError)"
    # NVIDIA driver packages a pasted Dockerfile installs, or driver library files it copies, into its image: the
    # Container Toolkit mounts the host's there (parsers/program.py image_driver_files; GH802)
    image_driver_files: tuple[str, ...] = ()
    image_driver_source: str | None = None


# --------------------------------------------------------------------------- other frameworks (GH610)


@record
class FrameworkDevice:
    """One GPU as JAX, CuPy or TensorFlow saw it, with a tiny integer matmul compared with the CPU's."""

    index: int
    name: str | None = None
    matmul_max_error: float | None = None  # max |GPU - CPU|; integer inputs, so exactly 0 when healthy
    matmul_nonfinite: bool | None = None
    error: str | None = None  # the exception the computation raised


@record
class FrameworkEnv:
    """JAX, CuPy or TensorFlow as the framework probe found it for the host's python3."""

    name: str  # "jax", "cupy", "tensorflow"
    installed: bool
    version: str | None = None
    library_version: str | None = None  # jaxlib's version
    cuda_version: str | None = None  # the CUDA it was built with (or, for CuPy, the runtime it loaded)
    cudnn_version: str | None = None
    cuda_build: bool | None = None  # False: a CPU-only build (jaxlib without a CUDA plugin, tensorflow-cpu)
    driver_cuda_version: str | None = None  # the newest CUDA the driver supports, as the framework read it
    backend: str | None = None  # JAX's default backend: "gpu", "cpu"
    device_count: int | None = None  # GPUs it sees
    devices: tuple[FrameworkDevice, ...] = ()
    gpu_error: str | None = None  # why asking for its GPUs failed
    error: str | None = None  # importing it failed
    messages: tuple[str, ...] = ()  # its warnings and log lines about CUDA (cuInit, dlopen ...)
    skipped: str | None = None  # not probed: the probe's time budget was spent


# --------------------------------------------------------------------------- DCGM (pasted dcgmi output)


@record
class DcgmResult:
    """One row of ``dcgmi diag`` or ``dcgmi health``: a test (or a GPU, a subsystem) and its result."""

    name: str  # "GPU Memory", "Deployment", "GPU ID: 0" ...
    result: str  # "Pass", "Fail", "Warn", "Skip", "Error", "Healthy", "Warning", "Failure", or the row's text
    detail: str = ""


@record
class DcgmReport:
    results: tuple[DcgmResult, ...] = ()
    source: str | None = None
