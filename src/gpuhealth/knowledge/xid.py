"""The Xid catalogue as data: what each Xid code means and what to do, from ``xid.csv``.

One CSV row per code 1-176 (ranges in NVIDIA's Xid catalogue expanded). Columns:

- ``mnemonic``, ``immediate_action``, ``investigatory_action``: NVIDIA's (XIDCAT; per-code mnemonics
  of grouped rows checked against GPUD's machine-readable copy of the catalogue; 173-176 only exist in
  the driver headers, OGKM). ``immediate_action`` is NVIDIA's bucket (IGNORE, RESTART_APP, RESET_GPU,
  RESTART_BM, ...) or empty where the catalogue gives none.
- ``meaning``, ``cause_class``: our short wording of NVIDIA's text and the legacy cause flags (MODAL).
- ``in_use``: false where the catalogue says "Unused" (deprecated on Ampere and newer, may still
  appear on Volta or older GPUs).
- ``application_class``: the application, not the GPU, is usually to blame (11, 13, 25, 31, 43, 45,
  69, 137, 174). NVIDIA's k8s-device-plugin also treats 68 as an application error; we do not, because
  the catalogue blames hardware or the driver for it.
- ``source``: the sourced reference tables source keys, ``;``-separated.

Severity rule (ours, applied to NVIDIA's immediate action):

- critical: RESET_GPU, RESTART_BM, RESTART_VM, CHECK_MECHANICALS, WORKFLOW_XID_48 (double-bit ECC),
  WORKFLOW_NVLINK_ERR (74), WORKFLOW_NVLINK5_ERR (144-150), and CONTACT_SUPPORT on a code in use
  (142). The GPU (or node) needs a reset, reboot or service before it can be trusted.
- warning: RESTART_APP, WORKFLOW_XID_45, CHECK_UVM, UPDATE_SWFW, and CONTACT_SUPPORT on an unused
  (legacy) code: something failed, but the GPU is not known to be broken.
- info: IGNORE and XID_154 (informational: 14 injected, 43 application terminated, 63 successful row
  remap, 154 recovery action notice ...).
- Overrides, where the bucket understates or is missing: 92 (high single-bit ECC rate), 157 (no spare
  resources left to repair), 161 (channel retirement failure) are warning although NVIDIA says IGNORE;
  162-176 have no bucket: 167 PCIe fatal timeout, 169 SEC2 halt, 171/172 (the detail of an Xid 48)
  and 173 C2C fatal link failure are critical, 162 (power smoothing re-engaged) is info, the rest
  warning.

The file is read once, lazily (``knowledge.read_table``; nothing is read at import time).
"""

from __future__ import annotations

import functools
import itertools

from gpuhealth.knowledge import table_rows
from gpuhealth.model import Severity
from gpuhealth.records import record

__all__ = ["ACTION_WORDS", "MEMORY_ROLES", "MemoryRole", "XidInfo", "action_in_words", "all_xids", "lookup",
           "memory_roles"]

# NVIDIA's resolution buckets (XIDCAT "Guidance Class"), said in words for the report.
ACTION_WORDS: dict[str, str] = {
    "IGNORE": "no action needed",
    "RESTART_APP": "restart the application",
    "RESET_GPU": "reset the GPU",
    "RESTART_BM": "reboot the machine",
    "RESTART_VM": "restart the VM that owns the GPU",
    "RESTART_FM": "restart Fabric Manager",
    "CHECK_MECHANICALS": "check the GPU's seating and power connections",
    "CHECK_APP/CUDA": "check the application (the pid in the message) for bad data sent to the GPU",
    "CHECK_UVM": "reset the GPU if unified memory or vGPU is in use, otherwise no action",
    "UPDATE_SWFW": "update the GPU firmware and driver",
    "CONTACT_SUPPORT": "contact NVIDIA or the system vendor",
    "INVESTIGATE_SW": "investigate the software (track the pid in the message)",
    "INVESTIGATE_SW_USER": "investigate the user's software",
    "XID_154": "follow the recovery action that Xid 154 reports",
    "SYMPATHETIC_REPORT_SOLO": "act on the other Xids first; report it if seen alone",
    "WORKFLOW_XID_13": ("follow NVIDIA's Xid 13 workflow: if it repeats on the same GPU, run DCGM diagnostics, "
                        "otherwise check the application"),
    "WORKFLOW_XID_31": ("follow NVIDIA's Xid 31 workflow: repeated on the same GPU, run DCGM diagnostics; "
                        "on different GPUs, check the application"),
    "WORKFLOW_XID_45": "follow NVIDIA's Xid 45 workflow: alone, restart Fabric Manager; with other Xids, act on those",
    "WORKFLOW_XID_48": ("follow NVIDIA's Xid 48 workflow: alone, reset the GPU; with Xid 63 or 64, drain the GPU "
                        "and reset it, then run field diagnostics"),
    "WORKFLOW_NVLINK_ERR": "follow NVIDIA's Xid 74 workflow: decode the NVLink error registers, then reset the GPU",
    "WORKFLOW_NVLINK5_ERR": "follow NVIDIA's Xid 144-150 workflow: decode the NVLink error with NVIDIA's catalogue",
    "XID_137_FLOW": "follow NVIDIA's Xid 137 workflow",
    "INVESTIGATE_LINK_SI": "investigate the link's signal integrity",
}


def action_in_words(bucket: str) -> str:
    """NVIDIA's action bucket as a reader says it; in free text, each bucket name is replaced by its words."""
    if not bucket:
        return "no action given by NVIDIA"
    # Each bucket name (made of [\w/] characters only) is replaced where it is a whole run of [\w/] characters:
    # what a pattern of the names between (?<![\w/]) and (?![\w/]) finds, without compiling its 30 alternatives
    # at every start-up (tests/test_startup.py compares the two).
    return "".join(ACTION_WORDS.get(part, part) if word else part
                   for word, chars in itertools.groupby(bucket, _word_character) for part in ("".join(chars),))


def _word_character(character: str) -> bool:
    return character.isalnum() or character in "_/"  # \w (str.isalnum, as sre reads it, and "_") or "/"


@record
class XidInfo:
    xid: int
    mnemonic: str
    meaning: str
    cause_class: str
    immediate_action: str  # NVIDIA's bucket; "" when the catalogue has none
    investigatory_action: str
    severity: Severity
    application_class: bool
    in_use: bool
    source: str


def lookup(code: int) -> XidInfo | None:
    """The catalogue row for Xid ``code``, or None when the code is not in the catalogue."""
    row = _catalogue().get(code)
    return None if row is None else _info(code)


def all_xids() -> tuple[XidInfo, ...]:
    """Every row, in code order."""
    return tuple(_info(code) for code in _catalogue())


def _flag(text: str, code: int, column: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"xid.csv: Xid {code}: {column} must be true or false, not {text!r}")
    return value == "true"


@functools.cache
def _catalogue() -> dict[int, dict[str, str]]:
    """The rows by code, in code order. Each row becomes an ``XidInfo`` when it is first asked for (``_info``):
    a verdict looks up a few codes of 176 (making them all was ~1 % of ``check``'s instructions)."""
    rows: dict[int, dict[str, str]] = {}
    for row in table_rows("xid.csv"):
        code = int(row["xid"])
        if code in rows:
            raise ValueError(f"xid.csv: Xid {code} appears twice")
        rows[code] = row
    return dict(sorted(rows.items()))


@functools.cache
def _info(code: int) -> XidInfo:
    row = _catalogue()[code]
    return XidInfo(
        xid=code,
        mnemonic=row["mnemonic"],
        meaning=row["meaning"],
        cause_class=row["cause_class"],
        immediate_action=row["immediate_action"],
        investigatory_action=row["investigatory_action"],
        severity=Severity(row["severity"]),
        application_class=_flag(row["application_class"], code, "application_class"),
        in_use=_flag(row["in_use"], code, "in_use"),
        source=row["source"],
    )


# What a memory-family Xid says of the GPU's memory (memory_faults.csv): "failure", the GPU's own repair failed or
# was escaped (its memory is failing whatever else the log shows); "uncorrectable", an uncorrectable error, a fault
# of the memory when it comes back on the same GPU after a reset; "detail", the same memory's other Xids (a
# recorded repair, the DRAM/SRAM detail of an Xid 48), symptoms folded under the fault.
MEMORY_ROLES = ("failure", "uncorrectable", "detail")


@record
class MemoryRole:
    xid: int
    role: str  # one of MEMORY_ROLES
    why: str
    source_title: str
    source_url: str


@functools.cache
def memory_roles() -> dict[int, MemoryRole]:
    """Xid code -> its role in a GPU memory fault (``memory_faults.csv``): every code there is a memory-family Xid
    of the catalogue (cause class "memory / ECC")."""
    roles: dict[int, MemoryRole] = {}
    for row in table_rows("memory_faults.csv"):
        code = int(row["xid"])
        if code in roles or row["role"] not in MEMORY_ROLES:
            raise ValueError(f"memory_faults.csv: Xid {code} appears twice or has an unknown role {row['role']!r}")
        info = lookup(code)
        if info is None or not info.cause_class.startswith("memory / ECC"):
            raise ValueError(f"memory_faults.csv: Xid {code} is not a memory / ECC Xid of xid.csv")
        if not row["source_title"] or not row["source_url"].startswith("https://"):
            raise ValueError(f"memory_faults.csv: Xid {code} names no source")
        roles[code] = MemoryRole(code, row["role"], row["why"], row["source_title"], row["source_url"])
    return roles
