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

# Read-only commands: they show state and change nothing (a stage of a pipeline may be grep, tail ...). A
# `python3 -c` of the checks prints what a library sees (torch, ray); a plain `python` may be any interpreter.
DIAGNOSTIC = lazy_re(
    r"^(?:sudo\s+)?(?:time\s+python3?\s+-c\b|python3\s+-c\b|dkms\s+status|ldconfig\s+-p|dmesg|ls\b|cat\b|grep\b|tail\b|head\b|lspci|lsmod|"
    r"modinfo|journalctl|numactl\s+--hardware|uname|mokutil\s+--(?:sb-state|list-enrolled|test-key)\b|rpm\s+-q|dpkg\s+-[SlL]\b|dpkg-query|"
    r"fuser\b|lsof\b|id\s*$|(?:nvcc|gcc|make)\s+--version\s*$|echo\s+(?:\$\w+|\"\$\{\w+:?-\}\")\s*$|"
    r"du\b|df\b|findmnt|ipmitool\s+(?:sdr|sel\s+list)|systemctl\s+(?:status|is-active|is-enabled)\b|dcgmi\s+diag|"
    r"nvidia-bug-report\.sh|gpuhealth\s+(?:recommend|explain|check|analyze)\b|nvidia-ctk\s+--version\s*$|docker\s+info\b|"
    r"nvidia-smi(?:\s+-i\s+\S+)?(?:\s*$|\s+(?:-q|-L|--query|nvlink\s+-[es]|nvlink\s+--status|topo\s+-m)))")
# Anything that writes: a read-only command never holds one of these (``modprobe nvidia`` loads a module;
# the directory modprobe.d is only a path).
CHANGES = lazy_re(r"\b(?:modprobe(?!\.d\b)|rmmod|insmod|tee|rm|mv|cp|install|remove|reinstall|enable|disable|start|"
                     r"restart|stop|set-default|isolate|autoinstall|ldconfig(?!\s+-p)|update-initramfs|dracut|"
                     r"mokutil\s+--import|sed\s+-i)\b|--gpu-reset|(?<![0-9&])>")
# programs that never run their arguments: their quoted arguments are patterns and paths, not commands
SEARCH = lazy_re(r"^(?:sudo\s+)?(?:grep|ls|cat)\b")
QUOTED = lazy_re(r"'[^']*'")
# one definition of "disruptive" for the fixes and the script (model.DISRUPTIVE_COMMAND)
DISRUPTIVE = DISRUPTIVE_COMMAND
# A reboot alone: always the last step, in the script and in every report (issue 22: "reboot last and alone").
REBOOT = lazy_re(r"^sudo\s+(?:reboot|systemctl\s+reboot)\s*$")
PLACEHOLDER = lazy_re(r"<[A-Za-z_][\w .-]*>|(?<!\$)\{[A-Za-z_]\w*\}")
# A step that needs what another step of the same finding does first (issue 22: "a step that depends on a commented
# line is commented too"): (the dependent step, its prerequisite). DKMS builds with the kernel headers and the gcc a
# finding installs; nvidia-ctk comes with the toolkit package; Docker is restarted to read the runtime nvidia-ctk
# wrote. When every prerequisite step of the finding is a comment (for another distribution, or a placeholder to
# fill in), the dependent step is one too.
NEEDS = (
    (lazy_re(r"\bdkms\s+(?:autoinstall|install|build)\b"),
     lazy_re(r"\b(?:apt-get|apt|dnf|yum|zypper)\s+(?:-\S+\s+)*install\b")),
    (lazy_re(r"\bnvidia-ctk\b"), lazy_re(r"\binstall\b.*\bnvidia-container-toolkit\b")),
    (lazy_re(r"\bsystemctl\s+restart\s+docker\b"), lazy_re(r"\bnvidia-ctk\s+runtime\s+configure\b")),
    # the reboot after a key import is where a person confirms the enrolment in the MOK manager (mokutil(1)); with the
    # import a comment (it asks for a password: NEEDS_PERSON), the reboot would only restart into an untrusted key
    (REBOOT, lazy_re(r"\bmokutil\s+(?:-\S+\s+)*--import\b")),
)
# A change that stays until undone (issue 22: "no irreversible line without its undo"): (the change, its undo as a
# substitution of the change's own text, when to run the undo). A hold outlives the fault it was set for: the day the
# driver is upgraded on purpose, the hold must go, or the upgrade is silently skipped (apt-mark(8): "hold is used to
# mark a package as held back, which will prevent the package from being automatically installed, upgraded or
# removed"; dnf versionlock(8): "delete" removes a lock).
UNDO = (
    (lazy_re(r"\bapt-mark\s+hold\b"), "apt-mark unhold", "before you upgrade the driver on purpose"),
    (lazy_re(r"\bdnf\s+versionlock\s+add\b"), "dnf versionlock delete", "before you upgrade the driver on purpose"),
)
# A command the script never runs unread, whoever wrote it (a row of knowledge/fixes.csv, a check's code): it bypasses a
# safety check, opens an editor, asks for a password or needs a person at the console (an interactive installer). Run
# from a script such a line either hangs on a prompt nobody sees or silently drops the check the person must weigh
# (NVIDIA's IGNORE_CC_MISMATCH=1 skips the installer's "compiler version does not exactly match" refusal; mokutil
# --import asks for a one-time password, then for a person at the console at the next boot, mokutil(1)). Each is (the
# form, why the script writes it as a comment). A person runs it, knowing why.
_PROGRAM = r"(?:^|[;&|(]\s*)(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?(?:\w+=\S*\s+)*(?:\S*/)?"
NEEDS_PERSON = (
    (lazy_re(r"\bIGNORE_\w*MISMATCH=|--no-cc-version-check\b|--nogpgcheck\b|--allow-unauthenticated\b|--force-yes\b"
             r"|--no-check-certificate\b|--insecure\b|--disable-validation\b|\bsetenforce\s+0\b"),
     "it bypasses a safety check: run it yourself only if you accept what that check guards against"),
    (lazy_re(_PROGRAM + r"(?:nano|n?vim?|emacs|gedit|sudoedit|visudo|vipw|vigr)(?!\S)|\bsystemctl\s+(?:-\S+\s+)*edit\b"
             r"|\bcrontab\s+(?:-\S+\s+)*-e\b|\bsudo\s+-e\b|\$\{?(?:EDITOR|VISUAL)\b"),
     "it opens an editor: run it yourself"),
    (lazy_re(r"\bmokutil\s+(?:-\S+\s+)*--(?:import|delete|reset|password|clear-password|enable-validation"
             r"|revoke-import|revoke-delete)\b|"
             + _PROGRAM + r"(?:passwd|chpasswd|gpasswd|grub2?-mkpasswd-pbkdf2)(?!\S)"),
     "it asks for a password (and mokutil's request waits for a person at the console at the next boot): run it "
     "yourself"),
    (lazy_re(r"^(?!.*\s(?:-s|--silent|--no-questions|--ui=none)(?:\s|$))(?:.*?" + _PROGRAM
             + r"(?:nvidia-installer|nvidia-uninstall)(?![\w.-])"
             r"|.*?" + _PROGRAM + r"(?:sh\s+|bash\s+)?\S*\.run(?!\S))"),
     "an interactive installer asks questions only a person can answer: run it yourself"),
)


def needs_person(text: str) -> str:
    """Why the script writes ``text`` as a comment (:data:`NEEDS_PERSON`); empty when it may run unread."""
    return next((why for form, why in NEEDS_PERSON if form.search(text)), "")


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
    if SEARCH.match(filled):  # a pattern is no command: grep '...install[[:space:]]+nvidia...' changes nothing
        filled = QUOTED.sub("''", filled)
    if DIAGNOSTIC.search(filled) and not CHANGES.search(filled):
        return "diagnostic"
    return "change"


def is_shell(text: str) -> bool:
    """A command (possibly with a placeholder to fill in), not an instruction in words."""
    return Fix(text).is_command or (bool(PLACEHOLDER.search(text)) and Fix(PLACEHOLDER.sub("x", text)).is_command)


def is_backup(text: str) -> bool:
    return ".bak" in text or bool(re.search(r"(?:^|\s)cp\s+(?:-\S+\s+)*/(?:boot|etc)/", text))
