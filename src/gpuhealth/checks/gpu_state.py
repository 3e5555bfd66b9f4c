"""GH4xx: the state each GPU reports about itself: memory repair, ECC, reset, infoROM, thermals, links."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

from gpuhealth.checks.registry import Draft, Expectations, Skip, check, table_fixes
from gpuhealth.commands import fill
from gpuhealth.commands import fix as slotted
from gpuhealth.inert import one_line
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import (
    Candidate,
    Evidence,
    Fix,
    Gpu,
    NvlinkState,
    PciDevice,
    Severity,
    Snapshot,
    Subject,
    normalize_pci_address,
)
from gpuhealth.records import record

NVML = "NVML (nvidia-ml-py)"
REBOOT = Fix("sudo reboot", "any", disruptive=True)
NEAR_SLOWDOWN_C = 5  # this close to the GPU's own slowdown threshold is reported
BUSY_PCT = 50  # below this, a lower PCIe generation is the GPU saving power, not a fault
IDLE_PCT = 5  # below this utilization a GPU counts as idle
INFOROM_WARNING = lazy_re(r"infoROM is corrupted(?: at gpu (\S+))?", re.IGNORECASE)
# Clock event reasons that mean the GPU is held back by heat or power delivery (NVIDIA's NVML API reference);
# idle, SW power cap, application clocks and sync boost are normal operation or configuration.
SLOWDOWN_REASONS = {
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "hw_slowdown": "HW Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown",
}
THERMAL_REASONS = {"hw_thermal_slowdown", "sw_thermal_slowdown"}
# Product-name parts of boards whose GPUs are always NVLink-connected (SXM modules, HGX baseboards);
# "NVIDIA H100 80GB HBM3" is the SXM5 H100, the PCIe one is "NVIDIA H100 PCIe".
NVLINK_BOARDS = ("sxm", "hbm3", "b200", "b300")


@record
class Seen:
    """One GPU as the checks judge it: NVML's values, completed by nvidia-smi's for what NVML lacks."""

    gpu: Gpu
    from_nvml: frozenset[str]  # fields whose value NVML gave
    smi_source: str

    @property
    def subject(self) -> Subject:
        return Subject(self.gpu.index, self.gpu.pci_address)

    def source(self, *fields: str) -> str:
        return NVML if fields and all(f in self.from_nvml for f in fields) else self.smi_source


def seen_gpus(snapshot: Snapshot) -> list[Seen]:
    """``snapshot.gpus``, with each NVML GPU's unknown fields filled from nvidia-smi's same GPU.

    NVML does not report the reset state, recovery action, SRAM counts, retired page counts or the
    infoROM warning; nvidia-smi does. GPUs are matched by PCI address, else by index. Every GH4xx check
    asks, so the merge is done once per snapshot (snapshots are frozen, so the answer cannot change).
    """
    if _LAST[0] is not snapshot:  # by identity: snapshots hold dicts, so they cannot be hashed
        _LAST[:] = [snapshot, _merge(snapshot)]
    return list(_LAST[1])


_LAST: list[Any] = [None, []]  # the last snapshot merged, and its GPUs


def _merge(snapshot: Snapshot) -> list[Seen]:
    smi_source = snapshot.sources.get("smi") or "nvidia-smi"
    smi = snapshot.smi.gpus if snapshot.smi is not None else ()
    if not (snapshot.nvml is not None and snapshot.nvml.ok and snapshot.nvml.gpus):
        return [Seen(g, frozenset(), smi_source) for g in smi]
    seen = []
    for gpu in snapshot.nvml.gpus:
        known = frozenset(f.name for f in dataclasses.fields(Gpu) if getattr(gpu, f.name) not in (None, ()))
        twin = next((s for s in smi if gpu.pci_address and s.pci_address == gpu.pci_address), None) or next(
            (s for s in smi if not gpu.pci_address and s.index == gpu.index), None)
        if twin is not None:
            gpu = dataclasses.replace(gpu, **{f.name: getattr(twin, f.name) for f in dataclasses.fields(Gpu)
                                              if f.name not in known and f.name != "source"})
        seen.append(Seen(gpu, known, smi_source))
    return seen


def _yes(value: bool | None) -> str:
    return "Yes" if value else "No"


def _reset_fix(seen: Seen) -> Fix:
    return slotted("sudo nvidia-smi --gpu-reset -i {index}", disruptive=True,
                   note="stop every process on that GPU first; on NVSwitch systems, or if the reset is "
                        "refused, reboot instead", index=seen.gpu.index)


@check("GH401", "memory-repair-pending", "A GPU memory repair waits for a GPU reset", requires=("gpus",))
def memory_repair_pending(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The GPU reports a memory repair it has recorded but not yet applied: `Remapped Rows / Pending:
    Yes` (row remapping, A100 and newer) or `Retired Pages / Pending Page Blacklist: Yes` (page
    retirement, V100 and older).

    Why it matters:
    After an ECC error the GPU marks the bad memory row (or page) for replacement, but the
    replacement only takes effect when the GPU is reset or the driver reloaded. Until then the bad
    memory is still in use and can fail again; NVIDIA's Xid 63 message says "reset gpu to activate".

    How to fix:
    Drain the GPU, then reset it with `sudo nvidia-smi --gpu-reset -i <index>` (or reboot the node,
    which is required on NVSwitch systems and whenever the reset is refused). Check afterwards that
    `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT` no longer shows the repair as pending.

    Exceptions:
    None: the state clears only with a reset. One pending repair is routine maintenance, not a
    failing GPU; a failed repair is reported by GH402.
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu, lines, kinds, fields = seen.gpu, [], [], []
        if gpu.remapped_rows_pending:
            kinds.append("remapped rows")
            fields += ["remapped_rows_pending"]
            lines += ["Remapped Rows Pending: Yes",
                      f"Remapped Rows Correctable Error: {gpu.remapped_rows_correctable}",
                      f"Remapped Rows Uncorrectable Error: {gpu.remapped_rows_uncorrectable}"]
        if gpu.retired_pages_pending:
            kinds.append("retired pages")
            fields += ["retired_pages_pending"]
            lines += ["Retired Pages Pending: Yes", f"Retired Pages Single Bit ECC: {gpu.retired_pages_sbe}",
                      f"Retired Pages Double Bit ECC: {gpu.retired_pages_dbe}"]
        if not kinds:
            continue
        yield Draft(
            Severity.WARNING,
            f"Memory repair pending ({' and '.join(kinds)}): reset the GPU to activate it",
            subject=seen.subject,
            evidence=(Evidence(seen.source(*fields), tuple(x for x in lines if not x.endswith(": None"))),),
            fixes=(_reset_fix(seen), REBOOT),
        )


@check("GH402", "memory-repair-failed", "A GPU could not repair its memory", requires=("gpus",))
def memory_repair_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `Remapped Rows / Remapping Failure Occurred: Yes`: the GPU needed to replace a memory row after
    an ECC error and had no spare row left in that bank (Xid 64).

    Also, as a warning: memory banks with no spare row left (the row remapper's `Bank Remap Availability
    Histogram`, its `None` count; NVML: "None means that there are no reserved rows available"). Nothing has
    failed yet, but NVIDIA's RMA policy sets the row-remapping failure flag at the next uncorrectable error
    that needs a remap in such a bank (a bank that already has eight uncorrectable rows remapped). Likewise
    on GPUs before Ampere, 64 retired pages (single- plus double-bit), the most page retirement supports
    (NVIDIA GPU Memory Error Management: "a maximum of 64 retirements for the frame buffer"): the next
    double-bit error's page cannot be retired.

    Why it matters:
    The bad memory stays in use, so uncorrectable errors will recur and kill jobs on this GPU. A
    remapping failure is NVIDIA's criterion for returning the GPU for service.

    How to fix:
    Drain the node (or take the GPU out of service), collect `sudo nvidia-bug-report.sh`, run
    `dcgmi diag -r 3` if DCGM is installed, and open an RMA with the GPU or server vendor. For banks
    without spare rows, or 64 retired pages: run the field diagnostic, watch the GPU's uncorrectable errors and
    plan its replacement with the vendor.

    Exceptions:
    None.
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu = seen.gpu
        if not gpu.remapped_rows_failure:
            if gpu.remapped_rows_banks_none:
                yield _no_spare_rows(seen)
            retired = (gpu.retired_pages_sbe or 0) + (gpu.retired_pages_dbe or 0)
            if retired >= MAX_RETIRED_PAGES:
                yield _no_pages_left(seen, retired)
            continue
        yield Draft(
            Severity.CRITICAL, "Memory row remapping failed: drain the GPU and send it for service",
            subject=seen.subject,
            evidence=(Evidence(seen.source("remapped_rows_failure"), (
                "Remapped Rows Remapping Failure Occurred: Yes",
                f"Remapped Rows Uncorrectable Error: {gpu.remapped_rows_uncorrectable}",
                f"Remapped Rows Pending: {_yes(gpu.remapped_rows_pending)}")),),
            fixes=(Fix("drain the node in the scheduler so no new job lands on this GPU", "any", disruptive=True),
                   Fix("sudo nvidia-bug-report.sh", "any", note="attach it to the RMA request"),
                   Fix("dcgmi diag -r 3", "any", note="when DCGM is installed")),
            explains=("GH401",),
        )


# "Page Retirement for Legacy GPUs: Supported a maximum of 64 retirements for the frame buffer" (NVIDIA GPU Memory
# Error Management, Row Remapping); past it a page with a new DBE cannot be retired (Xid 64)
MAX_RETIRED_PAGES = 64


def _no_pages_left(seen: Seen, retired: int) -> Draft:
    """A GPU that retired as many pages as the driver can: the next double-bit error's page stays in use."""
    gpu = seen.gpu
    return Draft(
        Severity.WARNING,
        f"{retired} pages retired, the most the driver can retire ({MAX_RETIRED_PAGES}): the page of the next "
        "double-bit error cannot be retired (NVIDIA: a threshold of retirements leads to the RMA investigation)",
        subject=seen.subject,
        evidence=(Evidence(seen.source("retired_pages_sbe", "retired_pages_dbe"), (
            f"Retired Pages Single Bit ECC: {gpu.retired_pages_sbe}",
            f"Retired Pages Double Bit ECC: {gpu.retired_pages_dbe}")),),
        fixes=(slotted("nvidia-smi -q -d PAGE_RETIREMENT -i {index}", index=gpu.index),
               Fix("dcgmi diag -r 3", "any", note="when DCGM is installed; then ask the vendor about an RMA")),
        action="run_diagnostics", impact="degraded",
    )


def _no_spare_rows(seen: Seen) -> Draft:
    """Banks whose reserved rows are all used: the next uncorrectable error there fails its remap (NVIDIA's RMA
    Policy: "a remapping attempt for an uncorrectable memory error on a bank that already has eight uncorrectable
    error rows remapped")."""
    gpu = seen.gpu
    return Draft(
        Severity.WARNING,
        f"{gpu.remapped_rows_banks_none} memory bank(s) have no spare row left: the next uncorrectable error in one "
        "cannot be remapped (a remapping failure, NVIDIA's RMA criterion)",
        subject=seen.subject,
        evidence=(Evidence(seen.source("remapped_rows_banks_none"), (
            f"Remapped Rows Bank Remap Availability Histogram None: {gpu.remapped_rows_banks_none} bank(s)",
            f"Remapped Rows Uncorrectable Error: {gpu.remapped_rows_uncorrectable}")),),
        fixes=(slotted("nvidia-smi -q -d ROW_REMAPPER -i {index}", index=gpu.index,
                       note="compare over time: a growing Uncorrectable Error count means the failure is near"),
               Fix("dcgmi diag -r 3", "any", note="when DCGM is installed")),
        action="run_diagnostics", impact="degraded",
    )


@check("GH403", "ecc-uncorrectable", "Uncorrectable ECC memory errors", reads=("gpus", "kernel_log"))
def ecc_uncorrectable(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Uncorrectable (double-bit) ECC errors: the volatile count (since the driver loaded), the
    aggregate count (lifetime, kept in the infoROM), SRAM uncorrectable errors, pages retired after
    double-bit errors, and rows remapped after uncorrectable errors.

    Also, from the kernel log, a GPU whose memory is failing (`knowledge/memory_faults.csv`, each row citing
    NVIDIA's document): an Xid 64 (the page retirement or row remap failed: "unable to retire page"; a
    row-remapping failure is NVIDIA's RMA criterion once its field diagnostic validates it), an Xid 140 (an
    uncorrectable error escaped page offlining and row remapping), or uncorrectable memory Xids (48, 94, 95) on the
    same GPU both before and after a driver load in the log (a reboot or driver reload resets the GPU and applies
    the pending retirement or remap, so an error after it is memory the repair did not cure). The GPU's Xids
    (GH301) fold under this finding. Per GPU: errors on two GPUs are two one-offs, not a recurrence. A single
    double-bit error with its recorded repair (Xid 48 then 63, "reboot to activate") is a one-off: GH301 reports
    it with the reset. Xids a person names in words give at most a warning, and only the failure Xids count
    there (words show no driver load between two errors). A memory fault the reporter tells in words is failing
    memory too: the error back after the reset or reboot that applies the repair ("a new row failed again after a
    reboot"), remapped rows or retired pages that keep growing ("grew from 11 to 12"), a row remapping failure
    ("Remapping Failure Occurred: Yes" in a sentence). With only words it is a warning that leads the Xids named
    beside it; beside a kernel log showing one GPU's memory Xids it is that GPU's, machine-shown. A question, a
    supposition ("if it comes back after a reset") or a denial is not read, nor a recurrence of another Xid. Words
    that name memory Xids of two GPUs decide neither; a line naming a GPU's PCI address makes its Xids that GPU's; the
    GPUs' own "Remapping Failure Occurred: No" wins over a failure told.

    Why it matters:
    An uncorrectable error in this boot (volatile count above 0) means data on the GPU was lost: the
    job that hit it was killed (Xid 48/94/95) and the GPU needs a reset before it is trusted again.
    A lifetime count alone is history: the GPU repaired or retired the memory, and it is worth
    watching whether the count grows. Correctable errors are fixed by ECC and never reported alone.

    How to fix:
    For errors in this boot: drain the GPU and reset it (`sudo nvidia-smi --gpu-reset -i <index>`),
    which also applies a pending row remap. If errors come back, run `dcgmi diag -r 3` and contact
    the vendor. For history only: compare the counts over time; a growing aggregate count, SRAM
    errors that recur, or a remapping failure (GH402) mean the GPU should be serviced. For failing
    memory in the kernel log, NVIDIA's procedure: drain the GPU, reset it, read its
    `nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT`, run the field diagnostic (`dcgmi diag -r 3` where
    DCGM is installed) and replace the GPU (RMA, with `nvidia-bug-report.sh`) when it confirms.

    Exceptions:
    GPUs without ECC (most GeForce boards) report no counts, and the check says nothing for them.
    A GPU reset with `nvidia-smi --gpu-reset` leaves no line in the kernel log, so only a driver load
    there marks a reset; of several kernel logs given as files none is placed after another.
    """
    from gpuhealth.checks.kernel_log import memory_faults  # the kernel log's failing memory (Xid 64/140, recurrence)

    yield from memory_faults(snapshot)
    if not snapshot.gpus:
        yield Skip(snapshot.unavailable.get("smi") or snapshot.unavailable.get("nvml")
                   or "no GPU data: neither nvidia-smi nor NVML reported a GPU, so no ECC counters were read")
        return
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu = seen.gpu
        counts = (("Volatile uncorrectable", gpu.ecc_volatile_uncorrected, "ecc_volatile_uncorrected"),
                  ("Aggregate uncorrectable", gpu.ecc_aggregate_uncorrected, "ecc_aggregate_uncorrected"),
                  ("Aggregate SRAM uncorrectable", gpu.sram_uncorrectable, "sram_uncorrectable"),
                  ("Retired pages (double bit ECC)", gpu.retired_pages_dbe, "retired_pages_dbe"),
                  ("Remapped rows (uncorrectable error)", gpu.remapped_rows_uncorrectable,
                   "remapped_rows_uncorrectable"))
        found = [(label, n, name) for label, n, name in counts if n]
        if not found:
            continue
        lines = [f"{label}: {n}" for label, n, _ in found]
        lines += [f"{label}: {n}" for label, n in (("Volatile correctable", gpu.ecc_volatile_corrected),
                                                   ("Aggregate correctable", gpu.ecc_aggregate_corrected)) if n]
        evidence = (Evidence(seen.source(*(name for _, _, name in found)), tuple(lines)),)
        query = slotted("nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i {index}", index=seen.gpu.index)
        if gpu.ecc_volatile_uncorrected:
            yield Draft(Severity.CRITICAL,
                        f"{gpu.ecc_volatile_uncorrected} uncorrectable ECC error(s) since the driver loaded",
                        subject=seen.subject, evidence=evidence,
                        fixes=(query, _reset_fix(seen), Fix("dcgmi diag -r 3", "any", note="if errors recur")),
                        explains=("GH401",))
        else:
            yield Draft(Severity.WARNING,
                        "History of uncorrectable memory errors (none since the driver loaded): "
                        + ", ".join(lines[:len(found)]),
                        subject=seen.subject, evidence=evidence, fixes=(query,))


RECOVERY_FIXES = (  # keyword in the recovery action -> what to do (open GPU kernel modules' enum)
    ("reboot", lambda seen: (REBOOT,)),
    ("imex", lambda seen: (Fix("sudo systemctl restart nvidia-imex", "any", disruptive=True),)),
    ("p2p", lambda seen: (Fix("stop the jobs using peer-to-peer/NVLink traffic on this GPU", "any",
                              disruptive=True),)),
    ("drain", lambda seen: (Fix("drain the GPU: let running jobs finish, schedule no new ones", "any"),
                            _reset_fix(seen))),
    ("reset", lambda seen: (_reset_fix(seen),)),
)

# keyword in the recovery action -> (action, impact) of the finding; the first that matches, as RECOVERY_FIXES
# (NVML's nvmlDeviceGetGpuRecoveryAction: GPU Reset, Node Reboot, Drain P2P, Drain and Reset, Recover IMEX Domain)
RECOVERY_ACTIONS = (
    ("reboot", ("reboot", "node_unusable")),
    ("imex", ("fix_host_software", "node_unusable")),
    ("p2p", ("drain_then_reset", "gpu_unusable")),
    ("drain", ("drain_then_reset", "gpu_unusable")),
    ("reset", ("reset_gpu", "gpu_unusable")),
)


@check("GH404", "gpu-reset-required", "A GPU asks for a reset or another recovery action", requires=("gpus",))
def gpu_reset_required(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `GPU Reset Status / Reset Required: Yes` (drivers up to 580) or a `GPU Recovery Action` other
    than `None` (590 and newer: GPU Reset, Node Reboot, Drain P2P, Drain and Reset, Recover IMEX
    Domain).

    Why it matters:
    The driver has decided that the GPU cannot be trusted until the action is done: after an
    uncorrectable error, a contained fault or a firmware problem. Jobs on it fail or give wrong
    results until then.

    Also: nvidia-smi could not read the GPU. Where the driver fails to read a value nvidia-smi prints
    an error instead (N/A means "not supported"): ERR! in its table, NVML's error string elsewhere.
    "GPU requires reset" (NVML_ERROR_RESET_REQUIRED) on any value is the driver asking for a reset;
    "GPU is lost" (NVML_ERROR_GPU_IS_LOST) means the GPU fell off the bus; ERR! or "Unknown Error" on
    several values (three or more, or on the GPU's name) means the GPU stopped answering the driver:
    fallen off the bus, a firmware (GSP) hang, or a fault waiting for a reset (nvml.h, nvmlReturn_t).

    How to fix:
    Do the action it names: drain the GPU and reset it (`sudo nvidia-smi --gpu-reset -i <index>`),
    or reboot the node for "Node Reboot" and whenever a reset is refused. The findings about the
    same GPU (Xids, ECC, pending repairs) say why it was requested. A lost GPU needs a reboot.

    Exceptions:
    One or two ERR! values alone (a power reading) come and go and are not reported
    (Azure/azhpc-diagnostics#77); a fan's ERR! is GH410's. One "Unknown Error" value is what some
    drivers print for a field they do not know (535's "Addressing Mode").
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu = seen.gpu
        action = gpu.recovery_action if gpu.recovery_action not in (None, "None") else None
        if not gpu.reset_required and action is None:
            unread = _not_answering(gpu)
            if unread:
                yield _not_answering_draft(seen, unread)
            continue
        lines = ((f"GPU Recovery Action: {action}",) if action else ()) + (
            ("Reset Required: Yes",) if gpu.reset_required and not action else ())
        wanted = (action or "GPU Reset").lower()
        fixes = next((make(seen) for word, make in RECOVERY_FIXES if word in wanted), (_reset_fix(seen),))
        repair, impact = next((pair for word, pair in RECOVERY_ACTIONS if word in wanted),
                              ("reset_gpu", "gpu_unusable"))
        yield Draft(Severity.CRITICAL, f"The GPU needs recovery: {action or 'GPU reset required'}",
                    subject=seen.subject,
                    evidence=(Evidence(seen.source("recovery_action" if action else "reset_required"), lines),),
                    fixes=fixes, action=repair, impact=impact)


SEVERAL_UNREAD = 3  # fields nvidia-smi could not read on one GPU: one or two ERR! come and go (a power reading)


def _not_answering(gpu: Gpu) -> str | None:
    """What nvidia-smi's error values say of a GPU it could not read, or None: the driver's own "GPU requires reset"
    or "GPU is lost" on any field, or ERR!/Unknown Error on several fields (or on its name)."""
    errors = [e.rsplit(": ", 1)[-1].strip("[] ").lower() for e in gpu.field_errors]
    if "gpu is lost" in errors:
        return "lost"
    if "gpu requires reset" in errors:
        return "reset"
    if len(errors) >= SEVERAL_UNREAD or any(e.startswith("Name: ") for e in gpu.field_errors):
        return "unread"
    return None


def _not_answering_draft(seen: Seen, kind: str) -> Draft:
    gpu = seen.gpu
    shown = tuple(gpu.field_errors[:6]) + ((f"... {len(gpu.field_errors) - 6} more",)
                                           if len(gpu.field_errors) > 6 else ())
    if kind == "lost":
        message, fixes = "The GPU is lost (nvidia-smi reads 'GPU is lost'): it fell off the bus; only a reboot " \
            "brings it back", (REBOOT,)
    elif kind == "reset":
        message, fixes = "The GPU needs recovery: nvidia-smi reads 'GPU requires reset' for its values", \
            (_reset_fix(seen),)
    else:
        message = (f"nvidia-smi cannot read the GPU ({len(gpu.field_errors)} values are errors): it stopped "
                   "answering the driver (fallen off the bus, a firmware (GSP) hang, or a fault waiting for a "
                   "reset); the kernel log's Xid says which")
        fixes = (_reset_fix(seen), REBOOT)
    return Draft(Severity.CRITICAL, message, subject=seen.subject,
                 evidence=(Evidence(seen.source("field_errors"), shown),), fixes=fixes,
                 explains=("GH410", "GH406", "GH414"))


@check("GH405", "inforom-corrupted", "A GPU's infoROM is corrupted", requires=("gpus",))
def inforom_corrupted(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    nvidia-smi prints `WARNING: infoROM is corrupted at gpu <address>`, or the GPU data says so.

    Why it matters:
    The infoROM is the GPU's small persistent store: ECC error counts, retired pages and remapped
    rows, and configuration. With it corrupted those records cannot be trusted or updated, so memory
    repairs may not persist and health counters read wrong; some tools refuse the GPU. The GPU
    usually still runs jobs.

    How to fix:
    Note the GPU's serial number (`nvidia-smi -q -i <index> | grep -i serial`) and contact the GPU or
    server vendor: reflashing the infoROM needs the vendor's tool, otherwise the board is serviced.

    Exceptions:
    None.
    """
    gpus = seen_gpus(snapshot)
    texts = list(snapshot.smi.warnings if snapshot.smi is not None else ())
    if snapshot.smi_run is not None:
        texts += snapshot.smi_run.stderr.splitlines()
    warned: dict[str | None, str] = {}
    for text in texts:
        match = INFOROM_WARNING.search(text)
        if match:
            warned.setdefault(normalize_pci_address(match[1]), text.strip())
    for seen in gpus:
        line = warned.pop(seen.gpu.pci_address, None) if seen.gpu.pci_address else None
        if not (seen.gpu.inforom_corrupted or line):
            continue
        yield Draft(Severity.WARNING, "The GPU's infoROM is corrupted", subject=seen.subject,
                    evidence=(Evidence(seen.source("inforom_corrupted"), (line or "infoROM corrupted",)),),
                    fixes=(slotted("nvidia-smi -q -i {index} | grep -iE 'serial|inforom' -A3", index=seen.gpu.index,
                               note="give the serial number to the vendor"),))
    for address, line in warned.items():  # a warning for a GPU that the output did not list
        yield Draft(Severity.WARNING, "A GPU's infoROM is corrupted", subject=snapshot.gpu_subject(address),
                    evidence=(Evidence(snapshot.sources.get("smi") or "nvidia-smi", (line,)),))


def _threshold(expect: Expectations, name: str | None, key: str,
               reported: float | None) -> tuple[float | None, str]:
    """(threshold, where it comes from): the config's [check.models."<name>"] value overrides the GPU's own."""
    wanted = (name or "").strip().lower()
    for model, values in expect.models.items():
        if wanted and model.strip().lower() == wanted and values.get(key) is not None:
            return values[key], f'config [check.models."{model}"] {key}'
    return reported, "reported by the GPU"


def _slowdown_looks(hot: bool, power: bool) -> tuple[Fix, ...]:
    """GH406's rows of knowledge/fixes.csv for the reasons seen: the fans when a GPU is hot, the BMC's event log and
    power supplies on a power brake or hardware slowdown (the `nvidia-smi -q` look is written for the GPU)."""
    def wanted(fix: Fix) -> bool:
        if "type Fan" in fix.command:
            return hot
        return power and "ipmitool" in fix.command
    return tuple(f for f in table_fixes("GH406") if wanted(f))


@check("GH406", "thermal-slowdown", "A GPU is slowed down by heat or power delivery", requires=("gpus",))
def thermal_slowdown(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Active clock event (throttle) reasons HW Slowdown, HW Thermal Slowdown, SW Thermal Slowdown or HW
    Power Brake Slowdown; a GPU temperature within 5 °C (`temperature_margin_c` in the config) of
    the slowdown threshold (warning) or at the shutdown threshold (critical). The thresholds are the
    ones the GPU reports, unless the config sets `[check.models."<name>"] temperature_slowdown_c` /
    `temperature_shutdown_c` for its model: those override them, and the evidence says which applied.

    Why it matters:
    HW slowdown cuts the clocks by half or more: jobs run far slower, and on multi-GPU jobs the
    slowest GPU sets the pace. The causes are cooling (fans, airflow, blocked heatsinks) and power
    delivery: the power brake is asserted from outside the GPU, usually by the system board when a
    power supply fails or the chassis power budget is exceeded. At the shutdown temperature the GPU
    turns itself off to protect the hardware.

    How to fix:
    Thermal: check fans and airflow (`sudo ipmitool sdr type Fan`), the data-centre inlet
    temperature, and blanking panels. Power brake: check the power supplies and the BMC event log
    (`sudo ipmitool sel list | tail -20`, `sudo ipmitool sdr type 'Power Supply'`). Watch the reasons under load
    with `nvidia-smi -q -d PERFORMANCE,TEMPERATURE` (every 5 s with `-l 5`).

    Exceptions:
    Idle and SW Power Cap are normal and never reported. HW Slowdown or HW Power Brake on an idle GPU
    (utilization under 5 %) that is not near its temperature limits is not reported: NVIDIA notes
    that HW Slowdown can show briefly during a P-state change, one snapshot cannot tell a transient
    assertion from a sustained one (monitoring tools such as gpud flag it only when it recurs), and
    it costs nothing until the GPU has work. Real 8x H100 captures show exactly this on idle GPUs;
    run the check again while a job runs. Thermal reasons are reported even when idle. Thresholds
    printed as relative T.Limit values (H100 with 535 drivers) are not compared: set the model's
    thresholds in the config to judge the temperature of such GPUs.
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu = seen.gpu
        active = [r for r in SLOWDOWN_REASONS if r in gpu.clock_event_reasons]
        temp = gpu.temperature_c
        slow, slow_from = _threshold(expect, gpu.name, "temperature_slowdown_c", gpu.temperature_slowdown_c)
        stop, stop_from = _threshold(expect, gpu.name, "temperature_shutdown_c", gpu.temperature_shutdown_c)
        margin = NEAR_SLOWDOWN_C if expect.temperature_margin_c is None else expect.temperature_margin_c
        parts: list[tuple[Severity, str]] = []
        if temp is not None and stop is not None and temp >= stop:
            parts.append((Severity.CRITICAL, f"at {temp:g} °C, at or above its shutdown threshold ({stop:g} °C)"))
        elif temp is not None and slow is not None and temp >= slow - margin:
            where = "at or above" if temp >= slow else f"within {margin} °C of"
            parts.append((Severity.WARNING, f"at {temp:g} °C, {where} its slowdown threshold ({slow:g} °C)"))
        hot = bool(parts) or bool(THERMAL_REASONS.intersection(active))
        idle = gpu.utilization_gpu_pct is not None and gpu.utilization_gpu_pct < IDLE_PCT
        if idle and not hot:
            active = []  # HW slowdown / power brake on a cool idle GPU: see Exceptions
        if active:
            parts.append((Severity.WARNING, f"{', '.join(SLOWDOWN_REASONS[r] for r in active)} active"))
        if not parts:
            continue
        lines = [f"{SLOWDOWN_REASONS[r]}: Active" for r in active]
        lines += [f"{label}: {value:g} {unit}" for label, value, unit in (
            ("GPU Current Temp", temp, "C"), ("GPU Slowdown Temp", slow, f"C ({slow_from})"),
            ("GPU Shutdown Temp", stop, f"C ({stop_from})"),
            ("Utilization GPU", gpu.utilization_gpu_pct, "%"), ("Power Draw", gpu.power_draw_w, "W"))
            if value is not None]
        fixes = _slowdown_looks(hot, "hw_power_brake_slowdown" in active or "hw_slowdown" in active)
        fixes += (slotted("nvidia-smi -q -d PERFORMANCE,TEMPERATURE -i {index} -l 5", index=seen.gpu.index,
                      note="watch it while a job runs"),)
        yield Draft(max((s for s, _ in parts), key=lambda s: s.rank),
                    "GPU " + "; ".join(text for _, text in parts), subject=seen.subject,
                    evidence=(Evidence(seen.source("clock_event_reasons", "temperature_c"), tuple(lines)),),
                    fixes=fixes)


@check("GH407", "pcie-link-degraded", "A GPU's PCIe link runs narrower or slower than it can",
       reads=("gpus", "pci_devices"))
def pcie_link_degraded(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The GPU's current PCIe link width is below its maximum (x8 instead of x16), or, while the GPU is
    at least 50 % busy, its current PCIe generation is below its maximum.

    Why it matters:
    Host-to-GPU copies (data loading, checkpoints, CPU offload, GPUDirect to the NIC) slow down in
    proportion. A narrow link usually means a badly seated card, a damaged riser or cable, a slot
    that is wired or configured narrower, or link errors that made the link retrain lower.

    How to fix:
    Compare `sudo lspci -vvv -s <address> | grep -E 'LnkCap|LnkSta'` with the slot's specification,
    check the BIOS slot settings (bifurcation, generation), then reseat the GPU or replace the riser.

    Exceptions:
    GPUs lower their PCIe generation when idle to save power (NVIDIA: the current generation "may be
    reduced when the GPU is not in use"), so a lower generation is only reported while the GPU is at
    least 50 % busy. The width is always compared, but the maximum nvidia-smi prints is the GPU's,
    not the slot's: a x16 card in a slot wired x8 (two GPUs sharing x16 lanes on a workstation
    board, many cloud instances) shows x8 for good. So a narrow link is a warning when an identical
    GPU on the same host runs at full width, and info when none does (a single GPU, or all alike);
    if a GPU reports a narrower link only at idle, check it again under load. Without nvidia-smi or
    NVML (a pasted `lspci -vv`, or sysfs when the driver does not answer) the GPU's LnkSta width is
    compared with its LnkCap width by the same rule; LnkSta's speed is not judged there, because
    lspci cannot say whether the GPU was busy. A full `lspci -vv` (and, live, sysfs: the parent of the GPU's
    device directory) also shows the port above the GPU:
    a link narrower than both the GPU and that port can do is a warning (a riser, cable or seating
    fault, even on a single GPU); one as wide as the port is info (the slot is wired so). lspci's
    "(downgraded)" does not change this: pciutils prints it when LnkSta is below the device's own
    LnkCap, whatever the port above can do, so a x16 card in a x8 slot is "downgraded" too. When
    neither a twin nor the port decides, the finding lists both causes and the command that tells
    them apart: the port's LnkCap (`sudo lspci -vv -s <port above> | grep -E 'LnkCap|LnkSta'`).
    A link stated in the reporter's words for a GPU model they name ("our H100 PCIe links at Gen5 x8") is
    compared with that board's own PCIe generation and width (`knowledge/gpu_pcie.csv`, each row checked
    against an NVIDIA document) where no program's output gives the link, with the utilisation the same sentence states
    ("at 100 % utilization"), if any; such a finding is at most a warning.
    """
    gpus = seen_gpus(snapshot)
    if not gpus and not _pci_links(snapshot, gpus):
        yield Skip(snapshot.unavailable.get("smi") or snapshot.unavailable.get("nvml")
                   or "no PCIe link data: neither nvidia-smi, NVML nor lspci -vv reported a GPU's link")
        return
    ports = _ports(snapshot)
    yield from _pci_link_degraded(snapshot, gpus, ports)
    for seen in gpus:
        gpu, parts, lines = seen.gpu, [], []
        width, width_max = gpu.pcie_width_current, gpu.pcie_width_max
        gen, gen_max, busy = gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.utilization_gpu_pct
        severity, differential = Severity.WARNING, ()
        if width and width_max and width < width_max:
            twins = [s.gpu for s in gpus if s is not seen and s.gpu.name == gpu.name
                     and s.gpu.pcie_width_max == width_max]
            severity, part, port_lines, differential = _narrow_link(
                width, width_max, ports.get((gpu.pci_address or "")[:7]),
                any(t.pcie_width_current == width_max for t in twins), gpu.pci_address)
            parts.append(part)
            lines += [*port_lines, f"Link Width Current: {width}x", f"Link Width Max: {width_max}x"]
        if gen and gen_max and gen < gen_max and busy is not None and busy >= BUSY_PCT:
            severity, differential = Severity.WARNING, ()
            parts.append(f"PCIe Gen{gen} of Gen{gen_max} while {busy:g} % busy")
            lines += [f"PCIe Generation Current: {gen}", f"PCIe Generation Max: {gen_max}",
                      f"Utilization GPU: {busy:g} %"]
        if not parts:
            continue
        yield Draft(severity, f"PCIe link below its maximum: {', '.join(parts)}", subject=seen.subject,
                    evidence=(Evidence(seen.source("pcie_width_current", "pcie_gen_current"), tuple(lines)),),
                    fixes=(slotted("sudo lspci -vvv -s {pci} | grep -E 'LnkCap|LnkSta'", pci=gpu.pci_address),
                           *((slotted(PORT_ABOVE, pci=gpu.pci_address, note="the port above the GPU: "
                                      "as narrow as the link means the slot is wired so"),) if differential else ()),
                           Fix("reseat the GPU and check its riser or cable", "any", disruptive=True)),
                    differential=differential)


def _pci_links(snapshot: Snapshot, gpus: list[Seen]) -> list[PciDevice]:
    """NVIDIA GPUs on the PCI bus with both link widths (lspci -vv, sysfs) that no GPU with nvidia-smi's or
    NVML's own width already covers. The link lines of ``lspci -vv -s ADDR | grep Lnk`` name no vendor or
    class: they count too (the user asked about that device), unless another listing names the device."""
    judged = {s.gpu.pci_address for s in gpus if s.gpu.pcie_width_current and s.gpu.pcie_width_max}
    return [d for d in snapshot.pci_devices or ()
            if (d.is_nvidia_gpu or (not d.vendor_id and d.class_code is None)) and d.address not in judged
            and d.link_width_current and d.link_width_max]


def _ports(snapshot: Snapshot) -> dict[str, PciDevice]:
    """Bridges by the bus below them ("dddd:bb"), from a full ``lspci -vv``: the port above a GPU."""
    return {d.secondary_bus: d for d in snapshot.pci_devices or () if d.secondary_bus and d.link_width_max}


def _pci_link_degraded(snapshot: Snapshot, gpus: list[Seen], ports: dict[str, PciDevice]) -> Iterator[Draft]:
    """GH407's width rule on LnkSta/LnkCap; a twin is a GPU with the same device ID and LnkCap width."""
    devices = _pci_links(snapshot, gpus)
    source = snapshot.sources.get("pci_devices", "lspci -vv")
    for device in devices:
        width, width_max = device.link_width_current or 0, device.link_width_max or 0
        if width >= width_max:
            continue
        twins = [d for d in devices if d is not device and d.device_id == device.device_id
                 and d.link_width_max == width_max]
        severity, message, lines, differential = _narrow_link(
            width, width_max, ports.get(device.address[:7]), any(t.link_width_current == width_max for t in twins),
            device.address)
        lines += (f"LnkCap: Width x{width_max}", f"LnkSta: Width x{width}",
                  *([f"LnkSta: Speed {device.link_speed_current}"] if device.link_speed_current else ()),
                  *(() if device.vendor_id else (f"{device.address}: the evidence does not say which device",)))
        yield Draft(severity, f"PCIe link below its maximum: {message}", subject=snapshot.gpu_subject(device.address),
                    evidence=(Evidence(source, lines),),
                    fixes=(slotted("sudo lspci -vvv -s {pci} | grep -E 'LnkCap|LnkSta'", pci=device.address,
                               note="check it again while the GPU is busy"),
                           *((slotted(PORT_ABOVE, pci=device.address, note="the port above the GPU: "
                                      "as narrow as the link means the slot is wired so"),) if differential else ()),
                           Fix("reseat the GPU and check its riser or cable", "any", disruptive=True)),
                    differential=differential)


# The link lines of the PCIe port above a GPU: sysfs names the parent of the GPU's device directory.
PORT_ABOVE = ("sudo lspci -vv -s $(basename $(dirname $(readlink -f /sys/bus/pci/devices/{pci}))) "
              "| grep -E 'LnkCap|LnkSta'")


def port_above_command(address: str | None) -> str:
    return fill(PORT_ABOVE, pci=address)[0]


def _open_link_causes(address: str | None, width: int, width_max: int) -> tuple[Candidate, ...]:
    """What the evidence leaves open about a narrow link, and the command that decides. lspci's "(downgraded)" does
    not decide it: pciutils prints it when LnkSta is below the device's OWN LnkCap (ls-caps.c link_compare, on
    endpoints and upstream ports only, not on the port above), so a x16 card in a slot wired x8 is "downgraded"
    too. The port's LnkCap decides: a port as narrow as the link is the slot; a wider one means the link trained
    narrower than both ends. NVIDIA's nvidia-smi help says the current width "may be reduced when the GPU is not
    in use", so the second look is taken under load."""
    port = port_above_command(address)
    why = f"x{width} of x{width_max}; the port above the GPU is not in the evidence"
    return (
        Candidate("pcie-slot-narrow", f"the slot is wired x{width} (or the port above it is narrower)", "GH407",
                  "open", f"usual for a single GPU at {why}", port),
        Candidate("pcie-link-trained-narrow", "the link trained narrower than both ends (riser, cable, seating, "
                  "or reduced at idle)", "GH407", "open", f"{why}: a port wider than x{width} means this", port),
    )


def _narrow_link(width: int, width_max: int, port: PciDevice | None, twin_wider: bool,
                 address: str | None = None) -> tuple[Severity, str, tuple[str, ...], tuple[Candidate, ...]]:
    """Severity, message part, the port's line and the causes left open for a link narrower than the GPU's maximum.
    The port above the GPU (a full lspci -vv) says what the slot can do; without it, an identical GPU at full width
    says the slot is not the limit; without either, the port's LnkCap is the next command."""
    message = f"link width x{width} of x{width_max}"
    if port is not None and port.link_width_max:
        slot = port.link_width_max
        line = (f"port above it {port.address}: LnkCap: Width x{slot}",)
        if width < min(slot, width_max):  # both ends can do more: the link trained narrower (riser, seating)
            return Severity.WARNING, f"{message}, where its port supports x{min(slot, width_max)}", line, ()
        return Severity.INFO, f"{message} (the port above it is x{slot}: the slot is wired so)", line, ()
    if twin_wider:
        return Severity.WARNING, message, (), ()
    # no identical GPU here has the full width: likely the slot, which the port's LnkCap tells apart
    return (Severity.INFO, f"{message} (no identical GPU on this host runs wider: the slot may be wired so)", (),
            _open_link_causes(address, width, width_max))


@check("GH408", "nvlink-inactive", "NVLink links are down", requires=("nvlink",))
def nvlink_inactive(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    In `nvidia-smi nvlink -s`, a GPU with some links `<inactive>` while others are up, or a GPU for
    which nvidia-smi says "all links are inactive". A GPU for which nvidia-smi printed another
    message instead of its links (an NVML error such as "Unknown Error") is a warning too, the
    message shown: the link state could not be read.

    Why it matters:
    GPU-to-GPU traffic (NCCL all-reduce, tensor parallelism) falls back to fewer links or to PCIe,
    which is many times slower, or fails. Down links come from a GPU or NVSwitch fault, a baseboard
    or bridge problem, or, on NVSwitch systems, Fabric Manager not running.

    How to fix:
    Check the link error counters (`nvidia-smi nvlink -e -i <index>`) and the kernel log for Xid 74 or
    SXid; on NVSwitch systems check `systemctl status nvidia-fabricmanager`. A reset of all GPUs (a
    reboot) retrains the links; links that stay down need service.

    Exceptions:
    PCIe boards without an NVLink bridge (GeForce, workstation and PCIe data-centre cards) have all
    links inactive by design. "All links are inactive" is therefore a warning only for SXM/HGX boards
    (names with SXM or HBM3, B200) or when another GPU in the same output has active links, and info
    otherwise. GPUs in MIG mode do not report NVLink, and GPUs without NVLink say so ("does not have or
    support NVLink"): neither is judged.
    """
    from gpuhealth.parsers.smi_nvlink import BY_DESIGN

    states: tuple[NvlinkState, ...] = snapshot.nvlink or ()
    source = snapshot.sources.get("nvlink") or "nvidia-smi nvlink -s"
    for state in states:
        speeds = state.link_speeds_gbps
        down = [i for i, speed in enumerate(speeds) if speed is None]
        name = state.gpu_name or ""
        if state.error == "all links are inactive":
            nvlinked = any(marker in name.lower() for marker in NVLINK_BOARDS) or any(
                speed is not None for other in states for speed in other.link_speeds_gbps)
            severity = Severity.WARNING if nvlinked else Severity.INFO
            message, lines = "All NVLink links are inactive", ("all links are inactive",)
        elif down and len(down) < len(speeds):
            severity = Severity.WARNING
            message = f"{len(down)} of {len(speeds)} NVLink links inactive (links {', '.join(map(str, down))})"
            lines = tuple(f"Link {i}: <inactive>" for i in down)
        elif state.error and state.error not in BY_DESIGN:  # nvidia-smi's own error in place of the links
            severity = Severity.WARNING
            message = f"nvidia-smi could not read the NVLink links: {one_line(state.error)[:160]}"
            lines = (state.error,)
        else:
            continue
        gpu = next((g for g in snapshot.gpus if (state.uuid and g.uuid == state.uuid)), None) or next(
            (g for g in snapshot.gpus if g.index == state.gpu_index), None)
        subject = Subject(state.gpu_index, gpu.pci_address if gpu else None)
        index = state.gpu_index if state.gpu_index is not None else "<index>"
        yield Draft(severity, message, subject=subject,
                    evidence=(Evidence(source, (f"GPU {index}: {name}", *lines)),),
                    fixes=(slotted("nvidia-smi nvlink -e -i {index}", index=state.gpu_index),
                           Fix("systemctl status nvidia-fabricmanager", "any", note="NVSwitch systems"),
                           REBOOT))


@check("GH409", "mig-change-pending", "A MIG mode change waits for a GPU reset", requires=("gpus",))
def mig_change_pending(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The GPU's pending MIG mode differs from its current one (`MIG Mode / Current: Disabled, Pending:
    Enabled`, or the reverse).

    Why it matters:
    Someone ran `nvidia-smi -mig 1` (or 0) but the change only takes effect after a GPU reset. Until
    then the GPU runs in the old mode: MIG instances cannot be created, or jobs that expect the whole
    GPU get a MIG-partitioned one after the next reset, surprising the scheduler.

    How to fix:
    If the change is wanted, stop the GPU's processes (and nvidia-persistenced/DCGM if they hold it)
    and reset it: `sudo nvidia-smi --gpu-reset -i <index>`, or reboot. If not, set the mode back with
    `sudo nvidia-smi -i <index> -mig <0|1>`.

    Exceptions:
    None.
    """
    gpus = seen_gpus(snapshot)
    modes = {"Enabled", "Disabled"}
    for seen in gpus:
        current, pending = seen.gpu.mig_mode_current, seen.gpu.mig_mode_pending
        if current not in modes or pending not in modes or current == pending:
            continue
        yield Draft(Severity.WARNING, f"MIG mode change pending: {current} now, {pending} after a GPU reset",
                    subject=seen.subject,
                    evidence=(Evidence(seen.source("mig_mode_pending"),
                                       (f"MIG Mode Current: {current}", f"MIG Mode Pending: {pending}")),),
                    fixes=(_reset_fix(seen),))


@check("GH410", "fan-error", "A GPU fan reports an error", requires=("gpus",))
def fan_error(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    nvidia-smi prints `ERR!` in the Fan column for the GPU.

    Why it matters:
    The GPU's fan, or its tachometer, has failed or is disconnected. A board-cooled GPU without a
    working fan overheats under load and throttles (GH406) or shuts down.

    How to fix:
    Look at the GPU's temperature under load; inspect the fan and its connector, and replace the fan
    or the board. On servers, compare with the BMC's fan sensors (`sudo ipmitool sdr type Fan`).

    Exceptions:
    Passively cooled data-centre boards (Tesla P4/P40/T4, A2/A10/A16/A30/A40, L4/L40, the PCIe A100/H100:
    knowledge/gpu_models.csv, from their product briefs) have no fan of their own: the Fan column of such a GPU,
    `N/A` or `ERR!`, reads no fan that could fail, and is not reported. The board is known by the name nvidia-smi
    prints, never from words alone.
    """
    from gpuhealth.knowledge.gpu_models import model_named

    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu = seen.gpu
        if not gpu.fan_error:
            continue
        board = model_named(gpu.name) if gpu.name else None
        if board is not None and board.passive:
            continue  # no fan of its own: ERR! reads none
        temp = f"GPU Current Temp: {gpu.temperature_c:g} C" if gpu.temperature_c is not None else None
        yield Draft(Severity.WARNING, "The GPU's fan reports an error (ERR!)", subject=seen.subject,
                    evidence=(Evidence(seen.source("fan_error"), tuple(x for x in ("Fan: ERR!", temp) if x)),),
                    fixes=(Fix("sudo ipmitool sdr type Fan", "any"),
                           Fix("inspect or replace the GPU fan", "any", disruptive=True)))


@check("GH411", "compute-mode-restricted", "A GPU's compute mode keeps jobs out", requires=("gpus",))
def compute_mode_restricted(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The GPU's compute mode is `Prohibited` (no CUDA context may be created) or `Exclusive_Process`
    (one process at a time).

    Why it matters:
    In `Prohibited` mode every CUDA program fails on that GPU although the hardware and driver are
    fine: "all CUDA-capable devices are busy or unavailable". `Exclusive_Process` is a deliberate
    scheduler setting, but it also makes a second process (a monitoring agent, a data loader that
    touches CUDA) fail with the same message.

    How to fix:
    Set the default mode: `sudo nvidia-smi -i <index> -c DEFAULT` (it does not survive a reboot
    unless set at boot, e.g. by a systemd unit or the cluster's GPU setup).

    Exceptions:
    Clusters that run one job per GPU on purpose use `Exclusive_Process`; that is reported as info.
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        mode = (seen.gpu.compute_mode or "").replace(" ", "_").lower()
        if mode not in ("prohibited", "exclusive_process", "e._process"):
            continue
        prohibited = mode == "prohibited"
        yield Draft(Severity.WARNING if prohibited else Severity.INFO,
                    f"Compute mode is {seen.gpu.compute_mode}: "
                    + ("no CUDA program can use this GPU" if prohibited else "one process at a time"),
                    subject=seen.subject,
                    evidence=(Evidence(seen.source("compute_mode"), (f"Compute Mode: {seen.gpu.compute_mode}",)),),
                    fixes=(slotted("sudo nvidia-smi -i {index} -c DEFAULT", index=seen.gpu.index),))


@check("GH412", "power-limit-below-default", "A GPU's power limit is set below its default", requires=("gpus",))
def power_limit_below_default(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The enforced power limit is more than 5 % below the GPU's default limit.

    Why it matters:
    A lowered limit makes the GPU run slower under load (clocks capped by "SW Power Cap") while
    every health indicator looks normal: jobs are simply slower than on the other nodes. It is often
    left over from a benchmark, a thermal workaround or a power budget.

    How to fix:
    If it is not intended, restore the default: `sudo nvidia-smi -i <index> -pl <default watts>`,
    and look for what sets it at boot (a systemd unit, the cluster's node setup).

    Exceptions:
    Deliberate power capping (power budgets, efficiency tuning) is a valid choice; then ignore this.
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        limit, default = seen.gpu.power_limit_w, seen.gpu.power_default_limit_w
        if limit is None or not default or limit >= 0.95 * default:
            continue
        yield Draft(Severity.WARNING, f"Power limit {limit:g} W is below the default {default:g} W",
                    subject=seen.subject,
                    evidence=(Evidence(seen.source("power_limit_w", "power_default_limit_w"),
                                       (f"Power Limit: {limit:g} W", f"Default Power Limit: {default:g} W")),),
                    fixes=(slotted("sudo nvidia-smi -i {index} -pl {power_limit:number}", index=seen.gpu.index,
                                   power_limit=f"{default:g}", note="only if the lower limit is not intended"),))


@check("GH413", "fan-stopped-under-load", "A GPU fan stands still while the GPU works", requires=("gpus",))
def fan_stopped_under_load(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A GPU that has a fan reports 0 % fan speed while it is at least 50 % busy.

    Why it matters:
    Fans on board-cooled GPUs spin up under load; 0 % under load means a stalled fan or a broken
    fan controller, and the GPU will overheat and throttle (GH406) or shut down.

    How to fix:
    Watch it for a minute (`nvidia-smi -l 5`): if the temperature climbs and the fan stays at 0 %,
    inspect the fan and its connector and replace the fan or the board.

    Exceptions:
    Passively cooled data-centre GPUs report no fan speed (`N/A`) and are not judged; some consumer
    boards stop their fans below a temperature, so a cool GPU at 0 % is not reported.
    """
    gpus = seen_gpus(snapshot)
    for seen in gpus:
        gpu = seen.gpu
        busy = (gpu.utilization_gpu_pct or 0) >= 50
        warm = gpu.temperature_c is not None and gpu.temperature_c >= 60
        if gpu.fan_speed_pct != 0 or not busy or not warm:
            continue
        yield Draft(Severity.WARNING,
                    f"Fan at 0 % while the GPU is {gpu.utilization_gpu_pct:g} % busy at {gpu.temperature_c:g} C",
                    subject=seen.subject,
                    evidence=(Evidence(seen.source("fan_speed_pct"),
                                       ("Fan Speed: 0 %", f"GPU Utilization: {gpu.utilization_gpu_pct:g} %",
                                        f"GPU Current Temp: {gpu.temperature_c:g} C")),),
                    fixes=(slotted("nvidia-smi -i {index} -q -d TEMPERATURE,PERFORMANCE -l 5", index=seen.gpu.index),
                           Fix("inspect or replace the GPU fan", "any", disruptive=True)))
