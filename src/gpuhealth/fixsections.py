"""The sections of ``gpuhealth fix``'s script, and the order every report lists a finding's fixes in.

A fix is a backup (a command with ``.bak``, or a ``cp`` of /boot or /etc), a read-only look (it shows state and changes
nothing), a change, or a disruptive step (a reboot, module reload, GPU reset, service restart), in that order. Here,
beneath the checks and the reports, so that both order fixes the same way (``fixscript`` writes the script;
``report.common.fixes_for_host`` and ``checks.diagnosis`` use :func:`in_script_order`). The patterns compile on
first use: only a finding with two fixes or more needs them.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import DISRUPTIVE_COMMAND, Fix

# Read-only commands: they show state and change nothing (a stage of a pipeline may be grep, tail ...).
DIAGNOSTIC = lazy_re(
    r"^(?:sudo\s+)?(?:time\s+python3?\s+-c\b|dkms\s+status|ldconfig\s+-p|dmesg|ls\b|cat\b|grep\b|lspci|lsmod|"
    r"modinfo|journalctl|numactl\s+--hardware|uname|mokutil\s+--sb-state|rpm\s+-q|dpkg\s+-[SlL]\b|dpkg-query|"
    r"fuser\b|lsof\b|id\s*$|(?:nvcc|gcc|make)\s+--version\s*$|echo\s+(?:\$\w+|\"\$\{\w+:?-\}\")\s*$|"
    r"du\b|df\b|findmnt|ipmitool\s+(?:sdr|sel\s+list)|systemctl\s+(?:status|is-active|is-enabled)\b|dcgmi\s+diag|"
    r"nvidia-bug-report\.sh|gpuhealth\s+(?:recommend|explain|check|analyze)\b|"
    r"nvidia-smi(?:\s+-i\s+\S+)?(?:\s*$|\s+(?:-q|-L|--query|nvlink\s+-[es]|nvlink\s+--status|topo\s+-m)))")
# Anything that writes: a read-only command never holds one of these (``modprobe nvidia`` loads a module;
# the directory modprobe.d is only a path).
CHANGES = lazy_re(r"\b(?:modprobe(?!\.d\b)|rmmod|insmod|tee|rm|mv|cp|install|remove|reinstall|enable|disable|start|"
                     r"restart|stop|set-default|isolate|autoinstall|ldconfig(?!\s+-p)|update-initramfs|dracut|"
                     r"mokutil\s+--import|sed\s+-i)\b|--gpu-reset|(?<![0-9&])>")
# one definition of "disruptive" for the fixes and the script (model.DISRUPTIVE_COMMAND)
DISRUPTIVE = DISRUPTIVE_COMMAND
# A reboot alone: always the last step, in the script and in every report (issue 22: "reboot last and alone").
REBOOT = lazy_re(r"^sudo\s+(?:reboot|systemctl\s+reboot)\s*$")
PLACEHOLDER = lazy_re(r"<[A-Za-z_][\w .-]*>|(?<!\$)\{[A-Za-z_]\w*\}")
SECTIONS = (
    ("backup", "Backups: before anything changes"),
    ("diagnostic", "Look first: read-only diagnostics (they never stop the script)"),
    ("change", "Changes"),
    ("disruptive", "DISRUPTIVE steps, last: they reboot, reload modules, reset GPUs or stop jobs"),
)
SECTION_RANK = {kind: rank for rank, (kind, _) in enumerate(SECTIONS)}


def in_script_order(fixes: tuple[Fix, ...]) -> tuple[Fix, ...]:
    """``fixes`` ordered as the fix script's sections are (backups, read-only looks, changes, disruptive steps), the
    check's order kept within each, a reboot last of all. Every report lists a finding's fixes so
    (``report.common.fixes_for_host``): the report and the script never disagree on what comes first (a reboot a check
    lists mid-procedure is last in both)."""
    return tuple(sorted(fixes, key=lambda fix: (SECTION_RANK[section_of(fix)], bool(REBOOT.match(fix.command)))))


def section_of(fix: Fix) -> str:
    """The script section a fix goes to: backup, diagnostic (read-only), change or disruptive."""
    text = " ".join(fix.command.split())
    if not is_shell(text):
        return "disruptive" if fix.disruptive else "change"
    if is_backup(text):
        return "backup"
    if fix.disruptive or DISRUPTIVE.search(text):
        return "disruptive"
    filled = PLACEHOLDER.sub("0", text)  # "<index>" is no redirection
    if DIAGNOSTIC.search(filled) and not CHANGES.search(filled):
        return "diagnostic"
    return "change"


def is_shell(text: str) -> bool:
    """A command (possibly with a placeholder to fill in), not an instruction in words."""
    return Fix(text).is_command or (bool(PLACEHOLDER.search(text)) and Fix(PLACEHOLDER.sub("x", text)).is_command)


def is_backup(text: str) -> bool:
    return ".bak" in text or bool(re.search(r"(?:^|\s)cp\s+(?:-\S+\s+)*/(?:boot|etc)/", text))
