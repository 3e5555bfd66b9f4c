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
from gpuhealth.model import REPORTED, KernelEvent, KernelLog, normalize_pci_address

__all__ = ["MAX_REPORTED", "MEMORY_TOLD", "memory_told", "names_memory", "reported_xids",
           "told_beside_log"]

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
        lowered = line.lower()
        if _LOGGED.search(line) or ("xid" not in lowered and not _MEMORY_WORD.search(lowered)):
            continue
        text = line.strip()[:500]
        found = (_line_events(text, number) if "xid" in lowered else []) + memory_told(text, number)
        if found:
            events.extend(found[:MAX_REPORTED - len(events)])
            named.append(line)
    if not any(e.kind != MEMORY_TOLD for e in events):  # no Xid named: "it came back after a reboot" is no memory's
        events = [e for e in events if e.detail != RECURRED or names_memory(e.message)]
        named = [line for line in named if any(e.line == line.strip()[:500] for e in events)]
    if not events:
        return {}, []
    log = KernelLog(source=f"{source} (the reporter's words)", format=REPORTED, lines_scanned=len(lines),
                    events=tuple(events))
    return {"kernel_log": log}, named


def told_beside_log(lines: list[str], source: str) -> tuple[dict[str, KernelLog], list[str]]:
    """A kernel log's piece with the reporter's sentences around it: the memory faults those sentences tell
    (``memory_told``), as a reported log that the machine's log takes in (analyze's ``_merge``); a log record (a
    timestamp, a priority, ``NVRM``, ``kernel:``) is its parser's, never read here."""
    events: list[KernelEvent] = []
    named: list[str] = []
    for number, line in enumerate(lines, 1):
        if len(events) >= MAX_REPORTED or _LOG_RECORD.search(line) or not _MEMORY_WORD.search(line):
            continue
        found = memory_told(line.strip()[:500], number)
        if found:
            events.extend(found)
            named.append(line)
    if not events:
        return {}, []
    return {"kernel_log": KernelLog(source=f"{source} (the reporter's words)", format=REPORTED,
                                    lines_scanned=len(lines), events=tuple(events[:MAX_REPORTED]))}, named


_LOG_RECORD = lazy_re(r"^\s{0,8}(?:\[|<\d|\d|[A-Z][a-z]{2}\s{1,2}\d)|NVRM|\bkernel:|nvidia\S{0,10}:", re.I)


# the GPU a line names by its full PCI address ("GPU 3 (0000:b3:00.0)", "PCI:0000:3b:00"): its Xids are that GPU's
_ADDRESS = guarded_re(r"(?<![\w:.])(?:PCI:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?(?![\w:])",
                      may=lambda text: ":" in text)


def _line_address(text: str) -> str | None:
    """The one PCI address a line names, normalised; None for none or several."""
    found = {normalize_pci_address(m[0].removeprefix("PCI:")) for m in _ADDRESS.finditer(text)}
    return found.pop() if len(found) == 1 else None


def _line_events(text: str, number: int) -> list[KernelEvent]:
    events: list[KernelEvent] = []
    seen: set[tuple[str, int]] = set()
    address = _line_address(text)
    for match in _NAMED.finditer(text):
        if _DENIED.search(text[max(0, match.start() - _CLAUSE_BACK):match.start()]):
            continue
        kind = "sxid" if match["s"] else "xid"
        for code in (int(n) for n in _NUMBER.findall(match["list"])):
            if code == 0 or (kind == "xid" and code > MAX_XID) or (kind, code) in seen:
                continue
            seen.add((kind, code))
            events.append(KernelEvent(kind=kind, message=text, line=text, line_number=number, xid=code,
                                      pci_address=address, detail="reported in words"))
    return events


# ------------------------------------------------------------------ a GPU's memory fault told in words (GH403)
# What NVIDIA's documents make of a memory fault beyond the Xids themselves: the same memory failing again after the
# reset or reboot that applies its repair (Dynamic Page Retirement, "GPU Memory Error Management": the retirement or
# remap takes effect at the next reset, so an error after it is memory the repair did not cure), the remapped rows or
# retired pages growing (each is another uncorrectable error), and a row remapping failure ("Remapping Failure
# Occurred: Yes", NVIDIA's RMA criterion). Each is a KernelEvent of kind MEMORY_TOLD whose detail says which.
MEMORY_TOLD = "memory-told"
RECURRED, GREW, REMAP_FAILED = "recurred", "grew", "remap-failed"
_MEMORY_WORD = lazy_re(r"remap|retire|\becc\b|\bdbe|double[- ]bit|uncorrectable|again|\bback\b|recur|reappear"
                       r"|persist|\bstill\b|\breturn", re.I)
_REMAP_FAILED = lazy_re(
    r"remapping failure occurred\W{0,5}yes\b"
    r"|\brow[- ]?remap(?:ping|per)?\s{0,3}(?:has\s{1,3}|had\s{1,3})?fail(?:ure|ed|s)\b(?!\s{0,3}occurred)"
    r"|\bremap(?:ping)?\s{1,3}(?:has\s{1,3}|had\s{1,3})?failed\b|\bfail(?:ed|s)?\s{1,3}to\s{1,3}remap\b"
    r"|\bremap(?:ping)?\s{1,3}failures?\b(?!\s{0,3}occurred)"
    r"|\b(?:unable|failed)\s{1,3}to\s{1,3}retire\b", re.I)
# a count of repaired memory (rows remapped, pages retired, uncorrectable errors) and that it grows, in either order
# ("went from 2 to 4" grows only where the numbers rise: _FROM_TO decides)
_REPAIRED = (r"(?:remapped\s{1,3}rows?|row\s{1,3}remap(?:s|pings?)?|retired\s{1,3}pages?|page\s{1,3}retirements?"
             r"|uncorrectable\s{1,3}(?:ecc\s{1,3})?(?:errors?|counts?)|dbe\s{1,3}counts?|dbes)")
_GROWS = (r"(?:grew|grow(?:s|ing)?|increas(?:e|es|ed|ing)|ris(?:e|es|ing)|rose|went\s{1,3}(?:up|from)"
          r"|go(?:es|ing)?\s{1,3}up|climb(?:s|ed|ing)?|more\s{1,3}and\s{1,3}more)")
_GREW = lazy_re(r"\b" + _REPAIRED + r"\b[^.;!?]{0,50}?\b" + _GROWS + r"\b|\b" + _GROWS + r"\b[^.;!?]{0,30}?\b"
                + _REPAIRED + r"\b", re.I)
_FROM_TO = lazy_re(r"\bfrom\s{1,3}(\d{1,6})\s{1,3}to\s{1,3}(\d{1,6})\b", re.I)
# the reset that applies a repair (a GPU reset, a reboot, a power cycle, a driver reload), and the fault after it
_RESET = lazy_re(r"\b(?:re-?boot\w*|reset\w*|power[- ]?cycl\w*|cold[- ]boot\w*"
                 r"|(?:driver|module)\s{1,3}(?:(?:was|is|got)\s{1,3})?reload\w*"
                 r"|reload\w*\s{1,3}(?:the\s{1,3})?(?:driver|module))", re.I)
_AGAIN = lazy_re(r"\b(?:again|came\s{1,3}back|comes?\s{1,3}back|coming\s{1,3}back|(?:is|are|was|were)\s{1,3}back\b"
                 r"|recur\w*|reappear\w*"
                 r"|return(?:ed|s)\b|persist\w*|still\s{1,3}(?:there|present|happen\w*|occur\w*|show\w*"
                 r"|appear\w*|get(?:ting)?|see(?:ing)?|fail\w*))", re.I)
# the fault did not come back, or the sentence supposes or asks ("if it comes back after a reboot, replace it")
_NOT_AGAIN = lazy_re(r"(?:\b(?:no|not|never|nor|without|unless|if|whether)\b"
                     r"|n't\b)[^.,;:!?]{0,40}$", re.I)
_SENTENCE = lazy_re(r"[^.!?]+[.!?]?")
# a sentence that names GPU memory: a recurrence told in it is the memory's, not another fault's
_MEMORY_NAMED = lazy_re(r"\b(?:ecc|dbes?|double[- ]bit|uncorrectable|memory|hbm\w*|[ds]ram|rows?|pages?|remap\w*"
                        r"|retire\w*|retirements?)\b", re.I)


def names_memory(sentence: str) -> bool:
    """Whether a sentence names GPU memory (ECC, a DBE, HBM, rows, pages, a remap or retirement)."""
    return _MEMORY_NAMED.search(sentence) is not None


def memory_told(text: str, number: int) -> list[KernelEvent]:
    """The memory faults a line tells in words (a recurrence after a reset, a growing count of repaired memory, a
    row remapping failure), one event per kind, each a sentence that neither asks nor denies it."""
    if not _MEMORY_WORD.search(text):
        return []
    found: dict[str, str] = {}
    for match in _SENTENCE.finditer(text):
        sentence = match[0].strip()
        if not sentence or sentence.endswith("?"):
            continue
        for detail in _told_in(sentence):
            found.setdefault(detail, sentence)
    return [KernelEvent(kind=MEMORY_TOLD, message=sentence, line=text, line_number=number, detail=detail)
            for detail, sentence in found.items()]


def _told_in(sentence: str) -> list[str]:
    told = []
    failed = _REMAP_FAILED.search(sentence)
    if failed and not _NOT_AGAIN.search(sentence[max(0, failed.start() - _CLAUSE_BACK):failed.start()]):
        told.append(REMAP_FAILED)
    grew = _GREW.search(sentence)
    if grew and not _NOT_AGAIN.search(sentence[max(0, grew.start() - _CLAUSE_BACK):grew.start()]):
        numbers = _FROM_TO.search(sentence[grew.start():])
        if numbers is None or int(numbers[2]) > int(numbers[1]):  # "from 12 to 12" grew nothing
            told.append(GREW)
    again = _AGAIN.search(sentence)
    if again and _RESET.search(sentence) and not _NOT_AGAIN.search(
            sentence[max(0, again.start() - _CLAUSE_BACK):again.start()]):
        told.append(RECURRED)
    return told
