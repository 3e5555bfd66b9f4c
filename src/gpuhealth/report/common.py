"""What every renderer shares: root-cause folding, the host summary, the GPU rows, the verdict line."""

from __future__ import annotations

from gpuhealth.model import NO_DIAGNOSIS, Finding, Fix, Report, Severity, Snapshot
from gpuhealth.records import record

JSON_SCHEMA_VERSION = 1


@record
class Cause:
    """A finding that leads the report, with the findings it explains folded under it."""

    finding: Finding
    symptoms: tuple[Finding, ...]


def explains(cause: Finding, symptom: Finding) -> bool:
    """``cause`` names ``symptom``'s check and may reach it: a host-wide cause explains symptoms on any
    GPU; a per-GPU cause only symptoms on its own GPU or on the host."""
    if cause is symptom or symptom.code not in cause.explains:
        return False
    return (cause.subject.is_host or symptom.subject.is_host or symptom.subject == cause.subject
            or (cause.subject.pci_address is not None and symptom.subject.pci_address == cause.subject.pci_address))


def fold(findings: tuple[Finding, ...]) -> tuple[Cause, ...]:
    """Root causes first, each with every finding it explains (directly or through another) folded under it.

    A root is a finding nothing else explains, so a cause always leads its symptoms wherever the checks
    sorted them. A symptom explained by several roots folds under the first, most severe one. Findings
    that explain each other in a loop (no root among them) are led by the most severe, first one.
    Causes are ordered by the worst severity in their group, then by their own severity, then as given.
    """
    order = {id(f): i for i, f in enumerate(findings)}
    explained_by = {id(f): [c for c in findings if explains(c, f)] for f in findings}
    placed: set[int] = set()
    groups: list[tuple[Finding, list[Finding]]] = []

    def gather(root: Finding) -> None:
        placed.add(id(root))
        symptoms: list[Finding] = []
        frontier = [root]
        while frontier:
            current = frontier.pop(0)
            for f in findings:
                if id(f) not in placed and explains(current, f):
                    placed.add(id(f))
                    symptoms.append(f)
                    frontier.append(f)
        groups.append((root, sorted(symptoms, key=lambda f: order[id(f)])))

    ranked = sorted(findings, key=lambda f: (-f.severity.rank, order[id(f)]))
    for finding in ranked:
        if id(finding) not in placed and not explained_by[id(finding)]:
            gather(finding)
    for finding in ranked:  # only loops are left
        if id(finding) not in placed:
            gather(finding)

    def worst(group: tuple[Finding, list[Finding]]) -> int:
        return max(f.severity.rank for f in (group[0], *group[1]))

    groups.sort(key=lambda g: (-worst(g), -g[0].severity.rank, order[id(g[0])]))
    return tuple(Cause(root, tuple(symptoms)) for root, symptoms in groups)


def cause_fixes(cause: Cause, snapshot: Snapshot, shown: set[tuple[str, str]] | None = None) -> tuple[Fix, ...]:
    """The fixes to show for one cause: its own, for this host's distro family, none repeated.

    A symptom's fixes are dropped: fixing the cause fixes what it explains (that is what ``explains``
    means), and a symptom's own remedy (``modprobe nvidia`` under nouveau) would mislead. ``shown``
    collects what earlier causes already printed, so a fix is never listed twice in one report.
    """
    shown = set() if shown is None else shown
    out = []
    for fix in fixes_for_host(cause.finding, snapshot):
        key = (fix.family, " ".join(fix.command.split()))
        if key not in shown:
            shown.add(key)
            out.append(fix)
    return tuple(out)


def fixes_for_host(finding: Finding, snapshot: Snapshot) -> tuple[Fix, ...]:
    """The fixes for this host's distro family (all of them when the family is unknown), in the order
    ``gpuhealth fix`` writes them (``fixsections.in_script_order``)."""
    family = snapshot.os.family if snapshot.os else "other"
    fixes = finding.fixes if family == "other" else tuple(f for f in finding.fixes if f.family in ("any", family))
    if len(fixes) < 2:
        return fixes
    from gpuhealth.fixsections import in_script_order  # its patterns compile only when fixes are shown

    return in_script_order(fixes)


def host_summary(snapshot: Snapshot) -> list[tuple[str, str]]:
    """(label, value) lines describing the host: OS, kernel, driver, GPUs on PCI vs driver."""
    rows: list[tuple[str, str]] = []
    if snapshot.hostname:
        rows.append(("Host", snapshot.hostname))
    if snapshot.os and (snapshot.os.pretty_name or snapshot.os.kernel_release):
        rows.append(("OS", " / kernel ".join(
            x for x in (snapshot.os.pretty_name, snapshot.os.kernel_release) if x)))
    user_space = (snapshot.nvml.driver_version if snapshot.nvml and snapshot.nvml.ok else None) or (
        snapshot.smi.driver_version if snapshot.smi else None)
    if snapshot.driver and snapshot.driver.version:
        rows.append(("Driver", f"{snapshot.driver.version} ({snapshot.driver.flavour or 'unknown'} kernel module)"))
    elif user_space and "not loaded" not in snapshot.unavailable.get("driver", ""):
        # a pasted nvidia-smi names the driver (its library's version) even when the kernel module's is not given
        rows.append(("Driver", f"{user_space} (nvidia-smi)"))
    elif "driver" in snapshot.unavailable:
        rows.append(("Driver", "not loaded" if "not loaded" in snapshot.unavailable["driver"]
                     else snapshot.unavailable["driver"]))
    cuda = (snapshot.nvml.cuda_driver_version if snapshot.nvml and snapshot.nvml.ok else None) or (
        snapshot.smi.cuda_version if snapshot.smi else None)
    if cuda:
        rows.append(("CUDA (driver max)", cuda))
    if snapshot.pci_devices is not None:
        count = len(snapshot.nvidia_pci_gpus)
        rows.append(("GPUs on PCI", str(count) if count else "none: no NVIDIA GPU on this machine"))
    if snapshot.gpus:
        # a piece of nvidia-smi -q (or -i 0): the GPUs it shows, not all there are (the value says so, as
        # "GPUs on PCI" does for no GPU: the label is a JSON key scripts read)
        excerpt = " in an excerpt (not the driver's whole list)" if snapshot.gpu_list_partial else ""
        rows.append(("GPUs (driver)", f"{len(snapshot.gpus)}{excerpt}"))
    return rows


def gpu_rows(snapshot: Snapshot) -> list[dict[str, str]]:
    """One row per GPU: what the driver reports, else what the PCI bus shows."""
    if snapshot.gpus:
        return [{"index": "" if g.index is None else str(g.index), "name": g.name or "?",
                 "pci_address": g.pci_address or "?", "uuid": g.uuid or ""} for g in snapshot.gpus]
    return [{"index": "", "name": d.name or f"NVIDIA [10de:{d.device_id}]", "pci_address": d.address,
             "uuid": ""} for d in snapshot.nvidia_pci_gpus]


def verdict_line(report: Report) -> str:
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in sorted(Severity, key=lambda s: -s.rank)
                       if report.count(s))
    tail = f" ({counts})" if counts else ""
    skipped = f"; {len(report.skipped)} check(s) skipped" if report.skipped else ""
    return f"{report.verdict}{tail}: {report.checks_run} checks{skipped}"


def skipped_by_reason(report: Report) -> list[tuple[str, list[str]]]:
    """Skipped checks grouped by their reason (one missing piece of evidence skips many checks)."""
    groups: dict[str, list[str]] = {}
    for skipped in report.skipped:
        groups.setdefault(skipped.reason, []).append(skipped.code)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[1][0]))


def next_commands(report: Report) -> list[str]:
    """The commands whose output would decide the open differentials ("paste these next")."""
    from gpuhealth.checks.diagnosis import next_commands as commands

    return commands(report.findings, report.snapshot.commands_given)


def skipped_summary(report: Report) -> str | None:
    """Evidence mode: one line for the skipped checks instead of a list (``-v`` gives the list)."""
    if report.snapshot.origin != "evidence" or not report.skipped:
        return None
    return f"{len(report.skipped)} checks need evidence you did not give; -v lists them"


def gpu_count(snapshot: Snapshot) -> int:
    """GPUs on this host: the driver's list, else the PCI bus."""
    return snapshot.gpu_count


def host_line(snapshot: Snapshot) -> str:
    """The host summary as one line: ``gpu-node-17 · Rocky Linux 9.3 · kernel ... · driver ... · 8 GPUs``."""
    words = {"Driver": "driver {}", "CUDA (driver max)": "CUDA {} max"}
    parts = [words[label].format(value) if label in words else value for label, value in
             host_summary(snapshot) if label not in ("GPUs on PCI", "GPUs (driver)")]
    # a listing that names no vendor (`lspci -s ADDR | grep Lnk`) cannot count the GPUs on the bus
    listed = snapshot.pci_devices
    on_pci = None if listed is None or (listed and not any(d.vendor_id for d in listed)) else len(
        snapshot.nvidia_pci_gpus)
    driver = len(snapshot.gpus) if snapshot.gpus and not snapshot.gpu_list_partial else None
    if on_pci == 0 and not driver:
        parts.append("no NVIDIA GPU on the PCI bus")
    elif on_pci is not None and driver is not None and on_pci != driver:
        parts.append(f"{on_pci} GPUs on PCI, {driver} seen by the driver")
    elif on_pci or driver:
        count = on_pci or driver
        parts.append(f"{count} GPU{'s' if count != 1 else ''}")
    return " · ".join(parts) if parts else "host: nothing known"


def closing_line(report: Report, fix_command: str = "gpuhealth fix") -> str:
    """The last line: counts, how many GPUs, and the next step. FIX_COMMAND is `fix` on the same source as
    the report (`--from BUNDLE`, the evidence files): a bare `gpuhealth fix` would check this host instead."""
    count = gpu_count(report.snapshot)
    where = f"on {count} GPU{'s' if count != 1 else ''}" if count else (
        "in the evidence given" if report.snapshot.origin == "evidence" else "on a host with no NVIDIA GPU seen")
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in sorted(Severity, key=lambda s: -s.rank)
                       if report.count(s))
    if not counts:
        skipped = f"; {len(report.skipped)} skipped" if report.skipped else ""
        return f"no problems found {where} ({report.checks_run - len(report.skipped)} checks ran{skipped})"
    commands = any(f.is_command for finding in report.findings for f in finding.fixes)
    tail = f"; run `{fix_command}` for a script" if commands else ""
    unread = len(report.snapshot.unrecognized_files)
    partial = report.verdict == "NO DIAGNOSIS" and not any(f.code == NO_DIAGNOSIS for f in report.findings)
    if unread and partial:  # nothing wrong in what was read, but not all of it was: no all-clear
        tail = f"; {unread} file{'s were' if unread > 1 else ' was'} not read: a fault may be there{tail}"
    return f"{counts} {where}{tail}"
