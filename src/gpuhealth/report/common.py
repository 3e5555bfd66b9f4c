"""What every renderer shares: root-cause folding, the host summary, the GPU rows, the verdict line."""

from __future__ import annotations

from dataclasses import dataclass

from gpuhealth.model import Finding, Fix, Report, Severity, Snapshot

JSON_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Cause:
    """A finding that leads the report, with the findings it explains folded under it."""

    finding: Finding
    symptoms: tuple[Finding, ...]


def fold(findings: tuple[Finding, ...]) -> tuple[Cause, ...]:
    """Root causes first; a finding named in another's ``explains`` is folded under it.

    A host-wide cause explains symptoms on any GPU; a per-GPU cause only symptoms on its GPU or on
    the host. A finding explained by several causes is folded under the first (most severe) one.
    """
    folded: set[int] = set()
    causes = []
    for cause in findings:
        if id(cause) in folded:
            continue
        symptoms = tuple(
            f for f in findings
            if f is not cause and id(f) not in folded and f.code in cause.explains
            and (cause.subject.is_host or f.subject.is_host or f.subject == cause.subject
                 or f.subject.pci_address == cause.subject.pci_address)
        )
        folded.update(id(f) for f in symptoms)
        causes.append((cause, symptoms))
    return tuple(Cause(c, s) for c, s in causes if id(c) not in folded or s)


def fixes_for_host(finding: Finding, snapshot: Snapshot) -> tuple[Fix, ...]:
    """The fixes for this host's distro family; all of them when the family is unknown."""
    family = snapshot.os.family if snapshot.os else "other"
    if family == "other":
        return finding.fixes
    return tuple(f for f in finding.fixes if f.family in ("any", family))


def host_summary(snapshot: Snapshot) -> list[tuple[str, str]]:
    """(label, value) lines describing the host: OS, kernel, driver, GPUs on PCI vs driver."""
    rows: list[tuple[str, str]] = []
    if snapshot.hostname:
        rows.append(("Host", snapshot.hostname))
    if snapshot.os and (snapshot.os.pretty_name or snapshot.os.kernel_release):
        rows.append(("OS", " / kernel ".join(
            x for x in (snapshot.os.pretty_name, snapshot.os.kernel_release) if x)))
    if snapshot.driver and snapshot.driver.version:
        rows.append(("Driver", f"{snapshot.driver.version} ({snapshot.driver.flavour or 'unknown'} kernel module)"))
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
        rows.append(("GPUs (driver)", str(len(snapshot.gpus))))
    return rows


def gpu_rows(snapshot: Snapshot) -> list[dict[str, str]]:
    """One row per GPU: what the driver reports, else what the PCI bus shows."""
    if snapshot.gpus:
        return [{"index": "" if g.index is None else str(g.index), "name": g.name or "?",
                 "pci_address": g.pci_address or "?", "uuid": g.uuid or ""} for g in snapshot.gpus]
    return [{"index": "", "name": d.name or f"NVIDIA [10de:{d.device_id}]", "pci_address": d.address,
             "uuid": ""} for d in snapshot.nvidia_pci_gpus]


def verdict_line(report: Report) -> str:
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in Severity if report.count(s))
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
