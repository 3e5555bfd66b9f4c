"""An OS upgrade or automatic update told in words, read beside a driver failure shown anywhere in the evidence.

A distribution's minor release or dist-upgrade (RHEL and its rebuilds 9.x -> 9.y, ``dnf update``, Ubuntu's
``do-release-upgrade`` and HWE kernel series, Debian point releases), unattended-upgrades and cloud images that update
themselves all install a new kernel (yum.conf(5)/dnf.conf(5) ``installonlypkgs``: a kernel is installed beside the
old one, never updated in place; Red Hat's release dates name a new kernel for each minor release). A driver installed
without DKMS or a precompiled package for that kernel (or whose DKMS build failed, or whose headers for the new kernel
were never installed) then has no module after the reboot (NVIDIA Driver Installation Guide, Kernel Modules). People
tell the upgrade, not the kernel: "we upgraded the servers from Ubuntu 22.04 to 24.04", then paste nvidia-smi's
"couldn't communicate with the NVIDIA driver".

The wordings are the subject of the cause family ``told-os-upgrade-broke-module`` (knowledge/cause_phrases.csv, where
its sources are cited); that family reads an upgrade and a failure told in one sentence. Here the upgrade is read on
its own (``told_alone``) and kept only where the evidence also shows a failure the module not built explains (a symptom
whose differential lists ``module-not-built``: nvidia-smi cannot reach the driver, the module does not load), and where
no line names a cause the family yields to (the kernel headers missing, Secure Boot refusing the module, a
Driver/library version mismatch after a driver package upgrade, ...): then it is the reporter's statement of GH507's
cause, filed under the family's stand-in catalogue row (reported, at most a warning). An upgrade told with a working
GPU, or with no failure at all, is no fault and names nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuhealth.model import MessageLine

__all__ = ["FAMILY", "MAX_EVENTS", "upgrade_events", "with_upgrade_cause"]

FAMILY = "told-os-upgrade-broke-module"  # the cause_phrases.csv row whose subject is an OS upgrade told
MAX_EVENTS = 2  # sentences kept as the evidence of one upgrade story


def upgrade_events(lines: Sequence[str], source: str) -> list[MessageLine]:
    """The sentences of ``lines`` (a person's, not a program's) that tell an OS upgrade or an automatic update, as
    reported lines of the family's stand-in row; not yet evidence of anything (:func:`with_upgrade_cause` decides)."""
    from gpuhealth.knowledge.symptom_phrases import TOLD_PREFIX
    from gpuhealth.parsers.prose_symptoms import told_alone

    return [MessageLine(found.sentence[:500], source, f"{TOLD_PREFIX}{FAMILY}", None, reported=True)
            for found in told_alone("\n".join(lines), FAMILY)[:MAX_EVENTS]]


def with_upgrade_cause(messages: list[MessageLine], events: Iterable[MessageLine]) -> list[MessageLine]:
    """``messages`` with the first upgrade ``events`` added as lines naming the module not built, where the messages
    show a failure that cause explains and name neither it already nor a cause its family yields to."""
    events = list(events)
    if not events:
        return messages
    from gpuhealth.knowledge.causes import symptoms
    from gpuhealth.knowledge.signatures import signature
    from gpuhealth.knowledge.symptom_phrases import phrases

    family = next(row for row in phrases() if row.id == FAMILY)
    failures = {sid for sid, symptom in symptoms().items() if any(c.id == family.cause for c in symptom.causes)}
    named: set[str] = set()
    shown: set[str] = set()
    for m in messages:
        row = _row(signature, m.signature)
        if row is not None and row.cause:
            named.add(row.cause)
        for sid in (m.symptom, row.symptom if row is not None else None):
            if sid:
                shown.add(sid)
    if not shown & failures or family.cause in named or named & set(family.yields_to):
        return messages
    return [*messages, *events[:MAX_EVENTS]]


def _row(signature, signature_id: str | None):
    """The catalogue (or stand-in) row of a line, None for a line no row matched."""
    if not signature_id:
        return None
    try:
        return signature(signature_id)
    except KeyError:
        return None
