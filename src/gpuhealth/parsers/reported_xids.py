"""Xids named in a person's words: "the kernel log shows an Xid 31 MMU fault", "Xid 48 / 171", "Xids 63 and 64",
"SXid 12028", in prose, markdown, an issue title or chat.

Only the driver's own ``NVRM: Xid (PCI:...): 79, ...`` line is a logged Xid (parsers/kernel_log.py). A number a
person names after the word Xid is a *reported* one: it becomes an event of a KernelLog whose format is
``REPORTED``, judged by the same checks and the same Xid catalogue (knowledge/xid.csv, NVIDIA's Xid catalogue), which
keep it below critical and say it was reported, not logged. Nobody saw the machine say it, and a finding may drain a
node. A real kernel log in the same evidence wins (analyze drops the reported one).

The number may follow the word at once ("xid79", "Xid-48"). False friends are not read: "xid" inside a word
(``pxid``, ``DCGM_FI_DEV_XID_ERRORS``, ``xid-related``), a hexadecimal or dotted number after it (``XID 0x1f``,
``xid 2.5``), an Xid number over 999 (an X11 or PostgreSQL XID), zero ("Xid errors: 0"), the driver's own ``Xid (``
line and its ``caused by previous Xid``, and a name the sentence denies or asks about ("no Xid 79", "check whether
Xid 48 appears").
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import guarded_re, has_folded, lazy_re
from gpuhealth.model import REPORTED, KernelEvent, KernelLog

__all__ = ["MAX_REPORTED", "reported_xids"]

MAX_REPORTED = 64  # events over all the lines: the checks group them per Xid anyway
MAX_XID = 999  # Xid numbers are small (the catalogue ends near 200); an XID of X11 or PostgreSQL is not
_SEP = r"\s{0,3}(?:/|,|&|\+|\band\b|\bor\b)\s{0,3}(?:s?xids?\s{0,3})?"
# the word, what may stand between it and its number ("Xid error 79", "XID: 79", "Xid #79", "Xid code 48"), then one
# number or a list of them; each number ends where no digit, word character or ".digit" follows
_NAMED = guarded_re(
    r"(?<![\w-])(?P<s>s)?xids?(?![A-Za-z_])"
    r"(?:\s{0,3}(?:[-:#=(]|\berrors?\b|\bevents?\b|\bcodes?\b|\bnumbers?\b|\bof\b)){0,3}\s{0,3}"
    r"(?P<list>\d{1,5}(?![\w]|\.\d)(?:" + _SEP + r"\d{1,5}(?![\w]|\.\d)){0,12})",
    re.I, may=has_folded("xid"))
_NUMBER = lazy_re(r"\d{1,5}")
_LOGGED = lazy_re(r"\bS?Xid \(|caused by previous Xid", re.I)
# a denial or a question about the Xid, in the same clause before it
_DENIED = lazy_re(r"(?:\b(?:no|not|never|without|nor|unless|if|whether|any)\b|n't\b)[^.,;:!?]{0,40}$", re.I)
_CLAUSE_BACK = 60  # characters before the word read for a denial


def reported_xids(lines: list[str], source: str) -> tuple[dict[str, KernelLog], list[str]]:
    """The kernel-log overlay of the Xids and SXids these lines name in words (``{}`` when none), and the lines that
    named them (so that they are not also "error lines nobody explains")."""
    events: list[KernelEvent] = []
    named: list[str] = []
    for number, line in enumerate(lines, 1):
        if len(events) >= MAX_REPORTED:
            break
        if "xid" not in line.lower() or _LOGGED.search(line):
            continue
        found = _line_events(line.strip()[:500], number)
        if found:
            events.extend(found[:MAX_REPORTED - len(events)])
            named.append(line)
    if not events:
        return {}, []
    log = KernelLog(source=f"{source} (the reporter's words)", format=REPORTED, lines_scanned=len(lines),
                    events=tuple(events))
    return {"kernel_log": log}, named


def _line_events(text: str, number: int) -> list[KernelEvent]:
    events: list[KernelEvent] = []
    seen: set[tuple[str, int]] = set()
    for match in _NAMED.finditer(text):
        if _DENIED.search(text[max(0, match.start() - _CLAUSE_BACK):match.start()]):
            continue
        kind = "sxid" if match["s"] else "xid"
        for code in (int(n) for n in _NUMBER.findall(match["list"])):
            if code == 0 or (kind == "xid" and code > MAX_XID) or (kind, code) in seen:
                continue
            seen.add((kind, code))
            events.append(KernelEvent(kind=kind, message=text, line=text, line_number=number, xid=code,
                                      detail="reported in words"))
    return events
