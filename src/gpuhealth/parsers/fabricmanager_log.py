"""Fabric Manager's own log (``/var/log/fabricmanager.log``, ``LOG_FILE_NAME`` in fabricmanager.cfg).

Each line is ``[Mon DD YYYY HH:MM:SS] [LEVEL] [tid N] message`` (the NVIDIA Fabric Manager User Guide: Fabric
Manager Config Options, LOG_LEVEL 0-4: CRITICAL, ERROR, WARNING, INFO, DEBUG), and people paste it with or without
the time stamp. What the log says of the service: the version it runs, its error lines, and whether it went on to
set the fabric up ("Successfully configured all the available ... NVSwitches", its start-up's last word) after its
last error. The error lines themselves are the catalogue's (knowledge/signatures.csv ``fm-*`` rows); this reader
only says that the text is Fabric Manager's and what state it leaves the service in.
"""

from __future__ import annotations

from gpuhealth.lazyre import guarded_re, lazy_re
from gpuhealth.model import ParseError
from gpuhealth.records import record

LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
# one line of the log: the time stamp may be cut off by the person who pasted it; the level and the thread id are
# Fabric Manager's own layout
_LINE = guarded_re(r"^\s{0,8}(?:\[[A-Z][a-z]{2} [ \d]?\d \d{4} \d\d:\d\d:\d\d\] )?"
                   r"\[(?P<level>CRITICAL|ERROR|WARNING|INFO|DEBUG)\] \[tid \d{1,10}\] (?P<message>.*)$",
                   may=lambda line: "] [tid " in line)
# the start-up's last line when it set the fabric up: "Successfully configured all the available NVSwitches to route
# GPU NVLink traffic." (R530 on), "Successfully configured all the available GPUs and NVSwitches." (earlier)
_CONFIGURED = lazy_re(r"^Successfully configured all the available (?:GPUs and )?NVSwitches")
_VERSION = lazy_re(r"^Fabric Manager version (\d{3}\.\d{1,3}(?:\.\d{1,3})?) is running")
MAX_LINES = 20_000
MAX_KEPT = 20


@record
class FabricManagerLog:
    version: str | None  # "535.104.05": the Fabric Manager that wrote the log
    errors: tuple[str, ...]  # its ERROR and CRITICAL lines, as written (at most MAX_KEPT)
    configured: bool  # it set the fabric up after its last error line


def fabricmanager_line(line: str) -> tuple[str, str] | None:
    """(level, message) of one line of Fabric Manager's log, or None for any other line."""
    found = _LINE.match(line[:2000])
    return (found["level"], found["message"]) if found else None


def looks_like_fabricmanager_log(lines: list[str]) -> bool:
    """Whether at least half of ``lines`` (the head of a text, stripped, non-empty) are lines of Fabric Manager's
    log."""
    hits = sum(1 for line in lines if fabricmanager_line(line) is not None)
    return hits >= 1 and hits * 2 >= len(lines)


def parse_fabricmanager_log(text: str) -> FabricManagerLog:
    """Fabric Manager's log: the version it names, its error lines, and whether its last word was that it set the
    fabric up. ParseError when no line has the log's layout."""
    version: str | None = None
    errors: list[str] = []
    configured = False
    seen = False
    for line in text.splitlines()[:MAX_LINES]:
        parsed = fabricmanager_line(line)
        if parsed is None:
            continue
        seen = True
        level, message = parsed
        if level in ("ERROR", "CRITICAL"):
            configured = False
            if len(errors) < MAX_KEPT:
                errors.append(line.strip()[:500])
        elif _CONFIGURED.match(message):
            configured = True
        elif version is None and (named := _VERSION.match(message)):
            version = named[1]
    if not seen:
        raise ParseError("no line of Fabric Manager's log ([date] [LEVEL] [tid N] message)")
    if not errors and not configured:
        # a start-up cut short, or a later stretch of the log: it says neither that the fabric is up nor what failed
        raise ParseError("Fabric Manager's log shows no error line and not the fabric set up "
                         "('Successfully configured all the available NVSwitches')")
    return FabricManagerLog(version, tuple(errors), configured)
