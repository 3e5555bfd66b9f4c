"""Service listings: ``systemctl status`` and ``journalctl -u`` for nvidia-persistenced,
nvidia-fabricmanager and docker, ``nvidia-container-cli info``, and ``dcgmi diag`` / ``dcgmi health``; a daemon's
command line from ``systemctl show``, ``/proc/<pid>/cmdline`` or a ``ps`` listing.

Pure functions, text in, values out; ParseError when the text is not the listing. Lines are cut at
``MAX_LINE`` characters before matching; every pattern is linear-time.
"""

from __future__ import annotations

import json
import re
from collections import deque
from itertools import islice

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError
from gpuhealth.parsers._text import text_lines
from gpuhealth.records import record

MAX_LINES = 50000
MAX_LINE = 4096
MAX_ERRORS = 12

# The units these listings are about, how their processes and descriptions are named in a journal.
UNITS: dict[str, tuple[str, ...]] = {
    "nvidia-persistenced": ("nvidia-persistenced", "NVIDIA Persistence Daemon"),
    "nvidia-fabricmanager": ("nvidia-fabricmanager", "nv-fabricmanager", "NVIDIA fabric manager",
                             "nvidia-fabricmanager-start.sh"),
    "docker": ("docker.service", "dockerd", "Docker Application Container Engine"),
}

# "× nvidia-fabricmanager.service - NVIDIA fabric manager service" (the bullet is ●, ×, ○, ↻ or *)
_STATUS_HEAD = lazy_re(r"^[^\w\s]?\s*(?P<unit>[A-Za-z0-9@_.:-]+)\.service\s+-\s")
_NOT_FOUND = lazy_re(r"Unit (?P<unit>[A-Za-z0-9@_.:-]+?)(?:\.service)? could not be found")
_LOADED = lazy_re(r"^\s*Loaded:\s+(?P<load>[\w-]+)(?:\s+\((?P<file>[^;)]*)(?:;\s*(?P<enabled>[\w-]+))?)?")
_ACTIVE = lazy_re(r"^\s*Active:\s+(?P<active>[\w-]+)(?:\s+\((?P<sub>[^)]*)\))?")
# journal and syslog prefixes: "Nov 15 14:15:47 host proc[123]: msg" or "2025-08-16T00:03:03.93-04:00 host proc: msg"
_JOURNAL = lazy_re(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{1,2}月 \d{1,2} \d\d:\d\d:\d\d|"
                      r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^ ]*) (?P<host>\S+) (?P<process>[^\s:\[]+)(?:\[\d+\])?: "
                      r"(?P<message>.*)$")
# the unit's command line: "Process: 51325 ExecStart=/usr/bin/nvidia-persistenced --user ... (code=exited, ...)" or
# the CGroup tree's "└─2748 /usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose"
_COMMAND = lazy_re(r"^\s*(?:Process:\s+\d+\s+ExecStart=|[└├`|][─-]\s?\d+\s+)"
                   r"(?P<command>/\S{1,200}(?: [^ (]{1,200}){0,40})")
_ERROR_WORDS = lazy_re(r"error|fail|cannot|could not|unable|not supported|NV_ERR|NV_WARN|denied|no such|"
                          r"timed out|timeout", re.IGNORECASE)
_NOISE = lazy_re(r"Verbose syslog connection opened|PID file (?:unlocked|closed|locked)|Consumed \S+ CPU time")


@record
class ServiceState:
    """What a status or journal listing says about one unit."""

    unit: str  # "nvidia-persistenced", "nvidia-fabricmanager", "docker" (or any unit systemctl printed)
    active: str | None = None  # "active", "failed", "inactive", "activating" ... None: not said
    enabled: str | None = None  # "enabled", "disabled", "masked", "not-found" ...
    errors: tuple[str, ...] = ()  # the unit's own error lines, as printed
    command: str | None = None  # its running process's command line (the CGroup tree), else its ExecStart


def _lines(text: str, what: str) -> list[str]:
    return text_lines(text, what, max_lines=MAX_LINES, max_line=MAX_LINE, strip=str.rstrip)


def unit_of(text: str) -> str | None:
    """Which of :data:`UNITS` a journal line or unit name is about."""
    for unit, names in UNITS.items():
        if any(name in text for name in names):
            return unit
    return None


def _journal_message(line: str) -> tuple[str, str]:
    """(process, message) of a journal line; ("", line) when it has no journal prefix."""
    match = _JOURNAL.match(line.strip())
    if match:
        return match["process"], match["message"]
    return "", line.strip()


def _is_error(unit: str, process: str, message: str) -> bool:
    if _NOISE.search(message) or not _ERROR_WORDS.search(message):
        return False
    return process != "systemd" or unit_of(message) == unit


def parse_systemctl_status(text: str) -> tuple[ServiceState, ...]:
    """``systemctl status UNIT...``: per unit, its active and enabled state and the error lines of its log
    tail. ``Unit x.service could not be found.`` gives that unit ``enabled="not-found"``."""
    states: list[ServiceState] = []
    current: dict[str, object] | None = None
    for line in _lines(text, "systemctl status output"):
        missing = _NOT_FOUND.search(line)
        if missing:
            states.append(ServiceState(missing["unit"], active="inactive", enabled="not-found"))
            current = None
            continue
        head = _STATUS_HEAD.match(line)
        if head:
            current = {"unit": head["unit"], "errors": []}
            states.append(ServiceState(head["unit"]))
            continue
        if current is None:
            continue
        loaded = _LOADED.match(line)
        if loaded:
            current["enabled"] = loaded["enabled"] or ("not-found" if loaded["load"] == "not-found" else None)
        active = _ACTIVE.match(line)
        if active:
            current["active"] = active["active"]
        command = _COMMAND.match(line)
        # the running process (the CGroup tree, printed last) over the unit's configured ExecStart
        if command and ("command" not in current or not line.lstrip().startswith("Process:")):
            current["command"] = command["command"].strip()
        process, message = _journal_message(line)
        errors = current["errors"]
        assert isinstance(errors, list)
        if (process or "status=" in message) and len(errors) < MAX_ERRORS and not loaded and not active \
                and _is_error(_unit_name(str(current["unit"])), process, message):
            errors.append(line.strip())
        states[-1] = ServiceState(str(current["unit"]), _opt(current.get("active")), _opt(current.get("enabled")),
                                  tuple(errors), _opt(current.get("command")))
    if not states:
        raise ParseError("no systemctl status unit ('● name.service - description')")
    return tuple(states)


def _opt(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _unit_name(unit: str) -> str:
    return unit_of(unit + ".service") or unit


# What systemd says when a unit's state changes, newest wins.
_TRANSITIONS = (
    (lazy_re(r"Failed to start|Failed with result|failed with result|Main process exited, code=\w+, "
                r"status=[1-9]|Control process exited, code=\w+, status=[1-9]"), "failed"),
    (lazy_re(r"^Started |: Started |Started .*\.$"), "active"),
    (lazy_re(r"^Stopped |Deactivated successfully|^Stopping "), "inactive"),
    (lazy_re(r"^Starting "), "activating"),
)


_DAEMON_UP = lazy_re(r"Started \(\d+\)$")
_DAEMON_DOWN = lazy_re(r"Shutdown \(\d+\)$")


def parse_service_journal(text: str) -> tuple[ServiceState, ...]:
    """``journalctl -u UNIT`` (or syslog lines) about nvidia-persistenced, nvidia-fabricmanager or docker:
    each unit's last state change systemd logged (None when it logged none) and the unit's error lines.
    ParseError when no line is about one of those units."""
    found: dict[str, dict[str, object]] = {}
    for line in _lines(text, "journal"):
        if not line.strip() or line.startswith("-- "):
            continue
        process, message = _journal_message(line)
        unit = unit_of(process) if process and process != "systemd" else unit_of(message)
        if unit is None:
            continue
        entry = found.setdefault(unit, {"active": None, "errors": []})
        if process == "systemd" or not process:
            for pattern, state in _TRANSITIONS:
                if pattern.search(message):
                    entry["active"] = state
                    break
        elif _DAEMON_UP.match(message):
            entry["active"] = "active"  # nvidia-persistenced logs "Started (<pid>)" itself
        elif _DAEMON_DOWN.match(message):
            entry["active"] = "inactive"
        errors = entry["errors"]
        assert isinstance(errors, list)
        if len(errors) < MAX_ERRORS and _is_error(unit, process, message):
            errors.append(line.strip())
    if not found:
        raise ParseError("no journal line about nvidia-persistenced, nvidia-fabricmanager or docker")
    return tuple(ServiceState(unit, _opt(v["active"]), None, tuple(v["errors"]))  # type: ignore[arg-type]
                 for unit, v in found.items())


# --------------------------------------------------------------------------- nvidia-container-cli info

_CLI_FIELD = lazy_re(r"^(?P<key>NVRM version|CUDA version|Device Index|Model|GPU UUID|Bus Location|Architecture):"
                        r"\s*(?P<value>.*)$")
_CLI_ERROR = lazy_re(r"nvidia-container-cli: (?P<error>.*)$")


@record
class ContainerCliDevice:
    index: int | None
    model: str | None = None
    uuid: str | None = None
    bus_location: str | None = None
    architecture: str | None = None


@record
class ContainerCliInfo:
    nvrm_version: str | None = None  # the loaded kernel module, as /proc/driver/nvidia/version says
    cuda_version: str | None = None  # the newest CUDA the driver supports (cuDriverGetVersion)
    devices: tuple[ContainerCliDevice, ...] = ()
    error: str | None = None  # "initialization error: nvml error: driver not loaded"


def _value(text: str) -> str | None:
    text = text.strip()
    return None if not text or text == "(null)" else text


def parse_container_cli_info(text: str) -> ContainerCliInfo:
    """``nvidia-container-cli [-k -d /dev/tty] info``: driver and CUDA version and the devices, or the
    error it stopped with. Its debug lines (``I0114 04:33:38 ... nvc.c:281] ...``) are skipped."""
    fields: dict[str, str | None] = {}
    devices: list[dict[str, str | None]] = []
    error = None
    for line in _lines(text, "nvidia-container-cli output"):
        stripped = line.strip()
        failure = _CLI_ERROR.search(stripped)
        if failure and error is None:
            error = failure["error"].strip().rstrip(".")
            continue
        match = _CLI_FIELD.match(stripped)
        if not match:
            continue
        key, value = match["key"], _value(match["value"])
        if key == "Device Index":
            devices.append({"index": value})
        elif key in ("NVRM version", "CUDA version"):
            fields[key] = value
        elif devices:
            devices[-1][key] = value
    if not fields and not devices and error is None:
        raise ParseError("no 'NVRM version:' line and no 'nvidia-container-cli:' error")
    return ContainerCliInfo(
        nvrm_version=fields.get("NVRM version"), cuda_version=fields.get("CUDA version"),
        devices=tuple(ContainerCliDevice(int(d["index"]) if (d.get("index") or "").isdigit() else None,
                                         d.get("Model"), d.get("GPU UUID"), d.get("Bus Location"),
                                         d.get("Architecture")) for d in devices[:256]),
        error=error)


# --------------------------------------------------------------------------- dcgmi diag / health

_TABLE_ROW = lazy_re(r"^\|(?P<left>[^|]*)\|(?P<right>[^|]*)\|?\s*$")
_RESULT = lazy_re(r"^(?P<result>Pass|Fail|Warn|Skip|Error|Healthy|Warning|Failure)\b(?P<rest>.*)$")
_SECTION = lazy_re(r"^-+\s*(?P<name>[A-Za-z][A-Za-z /]*?)\s*-+$")


@record
class DcgmRow:
    """One row of a ``dcgmi diag`` or ``dcgmi health`` table, continuation lines joined."""

    name: str  # "GPU Memory", "Deployment", "GPU ID: 0", "Overall Health" ...
    result: str  # "Pass", "Fail", "Warn", "Skip", "Error", "Healthy", "Warning", "Failure", or the text
    detail: str = ""  # what followed: "- GPU: 0", "GPU 3 has uncorrectable memory errors ..."


def parse_dcgmi_table(text: str) -> tuple[DcgmRow, ...]:
    """The ``| name | result |`` table ``dcgmi diag -r N`` and ``dcgmi health -c`` print (also an excerpt):
    each row with its result word and the detail that wraps over the following rows. Section rules
    (``|-----  Deployment  ----|``) and the header row are skipped. ParseError without any such row."""
    rows: list[list[str]] = []
    seen = False
    for line in _lines(text, "dcgmi output"):
        match = _TABLE_ROW.match(line.strip())
        if not match:
            continue
        seen = True
        left, raw_right = match["left"].strip(), match["right"]
        right = raw_right.strip()
        rule = left.startswith("--") or _SECTION.match(left) or (left and set(left) <= {"-", "=", "+"})
        if rule or (left, right) == ("Diagnostic", "Result"):
            continue
        if left:
            rows.append([left, right])
        elif rows and _RESULT.match(right):
            rows.append([rows[-1][0], right])  # "Pass - GPUs: 1, 2" then "Fail - GPU: 0" under one test
        elif rows and right:
            # dcgmi wraps at the column edge, mid-word: one blank after the bar continues the word
            # ("13.3 second" + "s started"), two start a new word (" remappings")
            glue = "" if raw_right.startswith(" ") and not raw_right.startswith("  ") else " "
            rows[-1][1] = f"{rows[-1][1]}{glue}{right}"
    if not seen or not rows:
        raise ParseError("no dcgmi table rows ('| name | result |')")
    result: list[DcgmRow] = []
    for name, value in rows[:2000]:
        word = _RESULT.match(value)
        if word:
            result.append(DcgmRow(name, word["result"], word["rest"].strip(" -:")))
        else:
            result.append(DcgmRow(name, value))
    return tuple(result)



def parse_dcgmi_health_json(text: str) -> tuple[DcgmRow, ...]:
    """``dcgmi health -c -j``: every ``{"value": ...}`` object in the JSON, named by its key
    (``"Overall Health": {"value": "Healthy"}`` -> DcgmRow("Overall Health", "Healthy"))."""
    if not isinstance(text, str):
        raise ParseError("dcgmi output must be text")
    try:
        data = json.loads(text[:4_000_000])
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"dcgmi -j output is not JSON: {exc}") from exc
    rows: list[DcgmRow] = []
    pending: deque[tuple[str, object, int]] = deque([("", data, 0)])
    while pending and len(rows) < 2000:
        name, node, depth = pending.popleft()
        if isinstance(node, dict):
            value = node.get("value")
            if isinstance(value, str) and name:
                word = _RESULT.match(value)
                rows.append(DcgmRow(name, word["result"] if word else value, word["rest"].strip(" -:") if word else ""))
            if depth < 12:
                pending.extend((str(k), v, depth + 1) for k, v in islice(node.items(), 2000) if k != "value")
        elif isinstance(node, list) and depth < 12:
            pending.extend((name, v, depth + 1) for v in node[:2000])
    if not rows:
        raise ParseError("no {\"value\": ...} entries in the dcgmi JSON")
    return tuple(rows)


# ``dcgmi dmon -e 230`` (DCGM_FI_DEV_XID_ERRORS, column XIDER): the last Xid per GPU, 0 for none.
_DMON_ROW = lazy_re(r"^(?P<entity>GPU|GPU-I|GPU-CI)\s+(?P<id>\d+)\s+(?P<values>\S.*)$")


def parse_dcgmi_dmon(text: str) -> dict[str, list[tuple[int, str]]]:
    """``dcgmi dmon``: field name (``XIDER``, ``TMPTR``...) -> [(GPU id, value as printed)]. The header line
    starts with ``#Entity``; GPU-I/GPU-CI rows (MIG instances) are left out."""
    columns: list[str] = []
    values: dict[str, list[tuple[int, str]]] = {}
    for line in _lines(text, "dcgmi dmon output"):
        stripped = line.strip()
        if stripped.startswith("#Entity"):
            columns = stripped.split()[1:]
            continue
        match = _DMON_ROW.match(stripped)
        if not match or not columns or match["entity"] != "GPU":
            continue
        for name, value in zip(columns, match["values"].split(), strict=False):
            values.setdefault(name, []).append((int(match["id"][:6]), value))
    if not columns:
        raise ParseError("no dcgmi dmon '#Entity' header")
    return values


# --------------------------------------------------------------------------- a daemon's command line

PERSISTENCED = "nvidia-persistenced"
MAX_COMMAND = 4096  # a command line longer than this is cut (ARG_MAX is larger; a daemon's is a few words)
# "ExecStart={ path=/usr/bin/nvidia-persistenced ; argv[]=/usr/bin/nvidia-persistenced --user x --verbose ; ... }"
_ARGV = lazy_re(r"argv\[\]=(?P<argv>[^;}]{1,4096})")
_SHOW_KEY = lazy_re(r"^(?P<key>[A-Z][A-Za-z]{1,63})=(?P<value>.*)$")


def parse_systemctl_show(text: str) -> dict[str, str]:
    """``systemctl show -p MainPID -p ExecStart UNIT``: its ``Key=value`` lines (the first of each key). systemd
    prints the properties in its own order, not the order asked; a unit that does not exist still answers
    (``MainPID=0``, an empty ``ExecStart=``). ParseError when no line has that form."""
    found: dict[str, str] = {}
    for line in _lines(text, "systemctl show output"):
        match = _SHOW_KEY.match(line.strip())
        if match:
            found.setdefault(match["key"], match["value"].strip())
    if not found:
        raise ParseError("no 'Key=value' line in the systemctl show output")
    return found


def exec_start_command(value: str) -> str | None:
    """The command line of a ``systemctl show`` ``ExecStart={ path=... ; argv[]=... ; ... }`` value (its first entry),
    or None when it names none (a unit without ExecStart, or one that does not exist)."""
    match = _ARGV.search(value[:MAX_COMMAND * 2])
    command = " ".join(match["argv"].split()) if match else ""
    return command or None


def proc_cmdline(data: bytes | str) -> str | None:
    """``/proc/<pid>/cmdline`` (arguments separated and ended by NUL bytes) as one line, or None when empty (a kernel
    thread, a zombie, a process that has just ended)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    words = [w for w in text[:MAX_COMMAND].split("\0") if w]
    return " ".join(" ".join(words).split()) or None


def runs_persistenced(command: str) -> bool:
    """Whether a command line starts nvidia-persistenced (its program, with or without a directory)."""
    program = command.split(maxsplit=1)[0] if command.strip() else ""
    return program.rsplit("/", 1)[-1] == PERSISTENCED


# `ps aux` / `ps auxf`: USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND (a forest's "\_ " before the command)
_PS_AUX = lazy_re(r"^\S{1,32}\s+\d{1,10}\s+\d{1,3}(?:[.,]\d)?\s+\d{1,3}(?:[.,]\d)?\s+\d{1,15}\s+\d{1,15}\s+\S{1,16}\s+"
                  r"\S{1,8}\s+\S{1,16}\s+\d{1,7}:\d\d(?:[.:]\d\d)?\s+(?P<command>\S.*)$")
# `ps -ef`: UID PID PPID C STIME TTY TIME CMD
_PS_EF = lazy_re(r"^\S{1,32}\s+\d{1,10}\s+\d{1,10}\s+\d{1,3}\s+\S{1,16}\s+\S{1,16}\s+(?:\d{1,4}-)?\d{1,3}:\d\d:\d\d\s+"
                 r"(?P<command>\S.*)$")


def ps_command(line: str) -> str | None:
    """The COMMAND column of one ``ps aux`` or ``ps -ef`` row, or None when the line is no such row."""
    stripped = line.strip()[:MAX_LINE]
    match = _PS_AUX.match(stripped) or _PS_EF.match(stripped)
    if not match:
        return None
    command = match["command"]
    forest = command[:len(command) - len(command.lstrip("|\\_ "))]  # `ps auxf`'s tree: "|   \_ ps auxf"
    if "\\_" in forest:
        command = command[forest.rindex("\\_") + 2:]
    return " ".join(command.split())[:MAX_COMMAND] or None


def parse_ps_persistenced(text: str) -> tuple[str, ...]:
    """The command lines of the nvidia-persistenced processes in a ``ps aux`` / ``ps -ef`` listing (also one
    filtered by grep: the grep's own row names the daemon only as its pattern, and is not one). ParseError when the
    listing shows none, or is no ps listing."""
    rows = 0
    commands: list[str] = []
    for line in _lines(text, "ps output"):
        command = ps_command(line)
        if command is None:
            continue
        rows += 1
        if runs_persistenced(command) and command not in commands:
            commands.append(command)
    if not rows:
        raise ParseError("no ps row (USER PID %CPU ... COMMAND, or UID PID PPID ... CMD)")
    if not commands:
        raise ParseError(f"no {PERSISTENCED} process among the {rows} ps row(s)")
    return tuple(commands[:8])
