"""What to do about a finding and what it does to the node, as data: ``actions.csv`` and ``xid_actions.csv``.

Every finding carries an ``action`` (``model.ACTIONS``) and an ``impact`` (``model.IMPACTS``); docs/actions.md
says what each means and names the peers' words beside ours.

- ``actions.csv``: one row per check code with an empty ``severity`` (the check's default), and rows for one
  severity where the check's severity already tells two situations apart (GH507 critical: no module for the
  running kernel, node_unusable; warning: none for the next kernel, degraded). ``why`` is the reason in words,
  ``source`` the document the check's claim stands on.
- ``actions.csv`` also holds the monitor's rules, as ``rule:<name>`` (and ``rule:<name>:<key>`` where one key of a
  rule differs: corrected ECC errors are not uncorrected ones). A rule's severity is the operator's setting, so its
  rows are not keyed by severity.
- ``xid_actions.csv``: NVIDIA's immediate-action buckets of the Xid catalogue (xid.csv, XIDCAT) mapped onto ours,
  one row per bucket, and rows keyed by an Xid code for the codes the catalogue gives no bucket (162-176, from the
  driver headers) or where a bucket's general row does not fit that code (142).

Schedulers decide on the impact (report/nhc.py, report/npd.py): node_unusable and gpu_unusable drain,
user_environment is reported and never drains. Both tables are read once, on first use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from gpuhealth.knowledge import table_rows

if TYPE_CHECKING:
    from gpuhealth.knowledge.xid import XidInfo

__all__ = ["NoActionRow", "check_rows", "of_check", "of_rule", "of_xid", "xid_rows"]

# Xids whose presence on the same GPU turns Xid 48's reset into "drain, then reset" (NVIDIA's Xid 48 workflow:
# with Xid 63 or 64, drain the GPU and reset it, then run field diagnostics).
_XID_48_DRAIN_WITH = frozenset({63, 64})
_XID_48_FAMILY = frozenset({48, 171, 172})  # 171/172: the DRAM/SRAM detail of an Xid 48


@functools.cache
def check_rows() -> dict[tuple[str, str], tuple[str, str]]:
    """(code, severity or "") -> (action, impact), validated against the enums."""
    from gpuhealth.model import ACTIONS, IMPACTS

    rows: dict[tuple[str, str], tuple[str, str]] = {}
    for row in table_rows("actions.csv"):
        key = (row["code"], row["severity"])
        if key in rows:
            raise ValueError(f"actions.csv: {row['code']} {row['severity'] or '(default)'} appears twice")
        if row["action"] not in ACTIONS or row["impact"] not in IMPACTS:
            raise ValueError(f"actions.csv: {row['code']}: action {row['action']!r} or impact {row['impact']!r} "
                             "is not in the enums (model.ACTIONS, model.IMPACTS)")
        if not row["why"].strip() or not row["source"].strip():
            raise ValueError(f"actions.csv: {row['code']}: a row says why and names its source")
        rows[key] = (row["action"], row["impact"])
    return rows


@functools.cache
def xid_rows() -> dict[str, tuple[str, str]]:
    """NVIDIA bucket name or Xid code (as text) -> (action, impact)."""
    from gpuhealth.model import ACTIONS, IMPACTS

    rows: dict[str, tuple[str, str]] = {}
    for row in table_rows("xid_actions.csv"):
        if row["key"] in rows:
            raise ValueError(f"xid_actions.csv: {row['key']} appears twice")
        if row["action"] not in ACTIONS or row["impact"] not in IMPACTS:
            raise ValueError(f"xid_actions.csv: {row['key']}: action {row['action']!r} or impact {row['impact']!r} "
                             "is not in the enums (model.ACTIONS, model.IMPACTS)")
        rows[row["key"]] = (row["action"], row["impact"])
    return rows


class NoActionRow(LookupError):
    """A code (a check, a monitor rule) with no row: a lookup's "no such key", never a malformed table."""


def of_check(code: str, severity: str) -> tuple[str, str]:
    """The (action, impact) a finding of check ``code`` at ``severity`` takes when its check sets none.

    An information finding without a row of its own keeps its check's action but has impact ``none``: a check says
    "info" when what it found does not affect jobs (GH205 on a node that never loaded nvidia_uvm and runs no CUDA),
    so it never drains on the row written for its faults."""
    rows = check_rows()
    found = rows.get((code, severity))
    if found is None:
        found = rows.get((code, ""))
        if found is None:
            raise NoActionRow(f"{code}: no row in knowledge/actions.csv: every check states its action and impact")
        if severity == "info":
            found = (found[0], "none")
    return found


def of_rule(rule: str, key: str = "") -> tuple[str, str]:
    """The (action, impact) of an alert of the monitor's rule ``rule`` (``key``: what within the rule fired)."""
    rows = check_rows()
    return rows.get((f"rule:{rule}:{key}", "")) or of_check(f"rule:{rule}", "")


def of_xid(info: XidInfo | None, same_gpu: frozenset[int] = frozenset()) -> tuple[str, str]:
    """The (action, impact) of one Xid, from its catalogue row: the row keyed by its code, else its immediate-action
    bucket's. ``same_gpu``: the other Xid codes logged for the same GPU (Xid 48 with 63/64: drain, then reset).

    An Xid the catalogue does not know, or whose bucket has no row, is GH301's default (contact support, degraded:
    NVSentinel too sends an unmapped Xid to CONTACT_SUPPORT). An application-class Xid never makes the GPU unusable:
    its immediate action stands, its impact is none (the application, not the GPU, is usually to blame).
    """
    if info is None:
        return of_check("GH301", "")
    rows = xid_rows()
    found = rows.get(str(info.xid)) or rows.get(info.immediate_action) or of_check("GH301", "")
    action, impact = found
    if info.xid in _XID_48_FAMILY and same_gpu & _XID_48_DRAIN_WITH and action == "reset_gpu":
        action = "drain_then_reset"
    if info.application_class:
        impact = "none"
    return action, impact
