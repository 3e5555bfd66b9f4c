"""History and drift: save each run, and say what changed between two runs or bundles.

A saved run is one JSON file holding the snapshot and the findings, so a later `gpuhealth diff` can
compare evidence (driver, kernel, GPUs, Xid counts, ECC counters, PCIe links), not just verdicts.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.limits import MAX_SAVED_RUN_BYTES, InputLimitError, load_json
from gpuhealth.model import Gpu, ParseError, Report, Snapshot, from_jsonable, to_jsonable
from gpuhealth.records import record

RUN_FORMAT = "gpuhealth-run"
RUN_VERSION = 1
# Counters that only grow (until a reset); any increase is worth a line. PCIe replays are normal in
# small numbers (real H100 captures show dozens), so only their rising is reported, here.
ECC_COUNTERS = ("ecc_aggregate_uncorrected", "ecc_aggregate_corrected", "ecc_volatile_uncorrected",
                "retired_pages_dbe", "retired_pages_sbe", "remapped_rows_uncorrectable",
                "remapped_rows_correctable", "sram_uncorrectable", "pcie_replay_counter")


@record
class Change:
    kind: str  # "driver", "driver-state", "kernel", "gpu-vanished", "gpu-appeared", "xid", "ecc", "pcie",
    # "finding-new", "finding-resolved"
    subject: str
    message: str
    worse: bool  # True when the change is a deterioration
    severity: str = ""  # a finding's severity (critical, warning, info); "" for evidence changes


@record
class Run:
    """A snapshot and the keys of the findings it gave."""

    snapshot: Snapshot
    finding_keys: tuple[str, ...]
    finding_messages: dict[str, str]
    finding_severities: dict[str, str] | None = None


KEEP_RUNS = 30  # saved runs kept per directory by default: a month of the daily unit (53 KB each on 8 GPUs)


def save_run(report: Report, directory: Path, keep: int = KEEP_RUNS) -> Path:
    """Write the run as ``<directory>/run-<UTC time>.json``, keep the newest ``keep`` runs (0: all), and return
    the path. The directory and the file are written through ``safefile``: never through a planted link."""
    from gpuhealth.safefile import make_directory, write_file

    make_directory(directory)
    # Microseconds in the name keep runs unique and make name order the time order.
    microseconds = time.time_ns() // 1000
    while True:
        seconds, fraction = divmod(microseconds, 1_000_000)
        path = directory / f"run-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}.{fraction:06d}Z.json"
        if not os.path.lexists(path):
            break
        microseconds += 1
    document = {"format": RUN_FORMAT, "version": RUN_VERSION, "snapshot": to_jsonable(report.snapshot),
                "findings": [to_jsonable(f) for f in report.findings]}
    # Owner-only, like a bundle: a run holds the host's snapshot. Renamed into place: never half a file.
    write_file(path, json.dumps(document, indent=1) + "\n", 0o600)
    if keep > 0:
        prune_runs(directory, keep)
    return path


def prune_runs(directory: Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` saved runs (their names sort by time); return what was removed.
    Only ``run-*.json`` names go, and a link among them is removed itself, never followed."""
    removed = []
    for path in saved_runs(directory)[:-keep] if keep > 0 else []:
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def saved_runs(directory: Path) -> list[Path]:
    """The runs ``save_run`` wrote in ``directory`` (its own names only: pruning removes nothing else), oldest
    first."""
    return sorted(p for p in directory.glob("run-*.json") if _RUN_NAME.fullmatch(p.name))


_RUN_NAME = lazy_re(r"run-\d{8}T\d{6}\.\d{6}Z\.json")


def load_run(path: Path) -> Run:
    """A saved run; ParseError naming the file when it is unreadable, past a limit or malformed."""
    try:
        document = load_json(path, MAX_SAVED_RUN_BYTES, "saved run")
    except InputLimitError as exc:
        raise ParseError(f"{exc} (not a readable saved run)") from exc
    if not isinstance(document, dict) or document.get("format") != RUN_FORMAT:
        raise ParseError(f"{path}: not a gpuhealth saved run")
    if not isinstance(document.get("version"), int) or document["version"] > RUN_VERSION:
        raise ParseError(f"{path}: saved-run version {str(document.get('version'))[:40]!r} is newer than this "
                         "gpuhealth")
    findings = document.get("findings", [])
    if not isinstance(findings, list):
        raise ParseError(f"{path}: malformed saved run: `findings` is {type(findings).__name__}, expected a list")
    findings = [f for f in findings if isinstance(f, dict)]
    try:
        snapshot = from_jsonable(Snapshot, document.get("snapshot") or {})
        keys = [_key(f) for f in findings]
        messages = {k: str(f.get("message", "")) for k, f in zip(keys, findings, strict=True)}
        severities = {k: str(f.get("severity", "")) for k, f in zip(keys, findings, strict=True)}
    except ParseError as exc:
        raise ParseError(f"{path}: malformed saved run: {exc}") from exc
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ParseError(f"{path}: malformed saved run: {type(exc).__name__}: {str(exc)[:200]}") from exc
    return Run(snapshot, tuple(keys), messages, severities)


def run_of(report: Report) -> Run:
    keys = [_identity(f.key, f.labels.get("xid")) for f in report.findings]
    return Run(report.snapshot, tuple(keys), {k: f.message for k, f in zip(keys, report.findings, strict=True)},
               {k: f.severity.value for k, f in zip(keys, report.findings, strict=True)})


def _key(finding: dict[str, Any]) -> str:
    subject = finding.get("subject") or {}
    parts = [f"GPU {subject['gpu_index']}"] if "gpu_index" in subject else []
    parts += [subject["pci_address"]] if "pci_address" in subject else []
    labels = finding.get("labels")
    if isinstance(labels, dict):
        xid = labels.get("xid")
    else:  # a run saved before findings had labels: its Xid findings' messages start "Xid <code>"
        match = _OLD_XID_MESSAGE.match(str(finding.get("message", ""))[:40])
        xid = match[1] if match else None
    return _identity(f"{finding.get('code')}@{' '.join(parts) or 'host'}", None if xid is None else str(xid))


_OLD_XID_MESSAGE = lazy_re(r"Xid (\d{1,4})\b")


def _identity(key: str, xid: str | None) -> str:
    """A finding across runs: check and subject, and the Xid for Xid findings (one GPU can have several)."""
    return f"{key} Xid {xid}" if xid else key


def latest_runs(directory: Path, count: int = 2) -> list[Path]:
    return sorted(directory.glob("run-*.json"))[-count:]


# --------------------------------------------------------------------------- comparing


def diff(before: Run, after: Run) -> list[Change]:
    """What changed from ``before`` to ``after``, deteriorations first."""
    a, b = before.snapshot, after.snapshot
    changes = [*_versions(a, b), *_gpus(a, b), *_xids(a, b), *_findings(before, after)]
    return sorted(changes, key=lambda c: (not c.worse, -SEVERITY_RANK.get(c.severity, 1), c.kind, c.subject))


SEVERITY_RANK = {"critical": 3, "warning": 2, "": 1, "info": 0}


def _versions(a: Snapshot, b: Snapshot) -> list[Change]:
    changes = []
    old, new = (a.driver.version if a.driver else None), (b.driver.version if b.driver else None)
    if old != new:
        changes.append(Change("driver", "host", f"driver {old or 'not loaded'} -> {new or 'not loaded'}",
                              worse=new is None))
    old_kernel = a.os.kernel_release if a.os else None
    new_kernel = b.os.kernel_release if b.os else None
    if old_kernel != new_kernel and old_kernel and new_kernel:
        changes.append(Change("kernel", "host", f"kernel {old_kernel} -> {new_kernel}", worse=False))
    return changes


def _gpu_key(gpu: Gpu) -> str:
    return gpu.pci_address or gpu.uuid or f"index {gpu.index}"


def _gpus(a: Snapshot, b: Snapshot) -> list[Change]:
    before = {_gpu_key(g): g for g in a.gpus}
    after = {_gpu_key(g): g for g in b.gpus}
    if before and not after:
        # The driver broke (a mismatch, an unloaded module): one change, not one line per GPU.
        why = b.unavailable.get("smi") or b.unavailable.get("nvml") or b.unavailable.get("driver") or ""
        changes = [Change("driver-state", "host", f"the driver no longer reports any GPU ({len(before)} before)"
                          + (f": {why}" if why else ""), True)]
    else:
        changes = [Change("gpu-vanished", key, f"GPU {key} ({gpu.name or '?'}) is no longer reported", True)
                   for key, gpu in before.items() if key not in after]
    changes += [Change("gpu-appeared", key, f"GPU {key} ({gpu.name or '?'}) appeared", False)
                for key, gpu in after.items() if key not in before]
    for key in before.keys() & after.keys():
        changes += _gpu_changes(key, before[key], after[key])
    old_pci, new_pci = len(a.nvidia_pci_gpus), len(b.nvidia_pci_gpus)
    if a.pci_devices is not None and b.pci_devices is not None and new_pci < old_pci:
        changes.append(Change("gpu-vanished", "host", f"GPUs on the PCI bus: {old_pci} -> {new_pci}", True))
    return changes


def _gpu_changes(key: str, old: Gpu, new: Gpu) -> list[Change]:
    changes = []
    for counter in ECC_COUNTERS:
        was, now = getattr(old, counter), getattr(new, counter)
        if was is not None and now is not None and now > was:
            kind = "pcie" if counter.startswith("pcie") else "ecc"
            changes.append(Change(kind, key, f"{counter.replace('_', ' ')}: {was} -> {now}", True))
    if old.pcie_width_current and new.pcie_width_current and new.pcie_width_current < old.pcie_width_current:
        changes.append(Change("pcie", key, f"PCIe width x{old.pcie_width_current} -> x{new.pcie_width_current}",
                              True))
    if old.pcie_width_max and new.pcie_width_max and new.pcie_width_max != old.pcie_width_max:
        changes.append(Change("pcie", key, f"PCIe max width x{old.pcie_width_max} -> x{new.pcie_width_max}", True))
    return changes


def _xid_counts(snapshot: Snapshot) -> Counter[tuple[str, int]]:
    counts: Counter[tuple[str, int]] = Counter()
    for group in snapshot.kernel_log.tallies({"xid"}) if snapshot.kernel_log else ():
        if group.xid is not None:
            counts[(group.pci_address or "?", group.xid)] += group.count
    return counts


def _xids(a: Snapshot, b: Snapshot) -> list[Change]:
    old, new = _xid_counts(a), _xid_counts(b)
    changes = []
    for (address, xid), count in sorted(new.items()):
        if count > old.get((address, xid), 0):
            # After a reboot the log starts over, so a count at or below the old one is not new.
            changes.append(Change("xid", address, f"Xid {xid}: {old.get((address, xid), 0)} -> {count} lines", True))
    return changes


def _findings(before: Run, after: Run) -> list[Change]:
    old, new = set(before.finding_keys), set(after.finding_keys)
    new_severity, old_severity = after.finding_severities or {}, before.finding_severities or {}
    # an info finding appearing (Xid 63: a row remapped as designed) is news, not a deterioration
    changes = [Change("finding-new", key, after.finding_messages.get(key, key), new_severity.get(key) != "info",
                      new_severity.get(key, "")) for key in sorted(new - old)]
    changes += [Change("finding-resolved", key, before.finding_messages.get(key, key), False,
                       old_severity.get(key, "")) for key in sorted(old - new)]
    return changes


_XID_TAIL = lazy_re(r" Xid \d+$")
KIND_WORDS = {"finding-new": "new", "finding-resolved": "resolved", "driver-state": "driver"}


def render(changes: list[Change]) -> str:
    """One line per change, worst first: WORSE/better, severity, what, where, and the message."""
    if not changes:
        return "no drift: nothing changed between the two runs\n"
    lines = []
    for c in changes:
        label = "WORSE " if c.worse else ("better" if c.kind == "finding-resolved" else "note  ")
        subject = _XID_TAIL.sub("", c.subject.split("@", 1)[1] if "@" in c.subject else c.subject)
        code = c.subject.split("@", 1)[0] + " " if c.kind.startswith("finding") else ""
        lines.append(f"{label} {(c.severity or '-'):8} {KIND_WORDS.get(c.kind, c.kind):12} {code}[{subject}] "
                     f"{c.message}\n")
    return "".join(lines)
