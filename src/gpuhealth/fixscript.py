"""``gpuhealth fix``: a report's fix commands as ONE ordered, commented bash script, for review.

Rules (docs/recommend-and-fix.md):

1. Only the host's distro family (``snapshot.os.family``) and ``any`` fixes are live; when the family is
   unknown, the debian and rhel variants are both written, commented out.
2. Sections in this order: backups (a command with ``.bak``, or a ``cp`` of /boot or /etc), read-only
   diagnostics (``... || true``: they show state and never stop the script), changes, then disruptive
   steps (reboots, module reloads, GPU resets, service restarts) last, each marked DISRUPTIVE.
3. A command appears once; every finding that asked for it is named in its comment.
4. Texts that are instructions, not shell ("check the seating ..."), become comments, never commands.
   So does a command holding a placeholder (``<index>``, ``{index}``), with a note to fill it in.
   So does a command that needs a person (``fixsections.NEEDS_PERSON``: it bypasses a safety check, opens an editor,
   asks for a password or starts an interactive installer), and a choice (a note that begins "only if").
5. Every value from evidence in a command went in through ``gpuhealth.commands`` (checked against its shape,
   quoted); every text in a comment (the header's hostname, distro, origin and time, a step's notes) is one
   inert line (``inert.one_line``): a newline or an escape from a bundle can never end a comment.
6. One live alternative per fault, and a reboot last and alone: with a live ``sudo reboot``, a module unload/reload
   or a GPU reset (what the reboot does too) is written as a comment, and the reboot is the script's last command.
   A step that needs another step of its finding (``fixsections.NEEDS``: ``dkms autoinstall`` the headers install,
   ``nvidia-ctk`` the toolkit install) is a comment when every such step is one: nothing live depends on a comment.
   Conditions come from the evidence: a GPU reset whose finding says ``drain_then_reset`` (Xid 48 with 63/64 on the
   GPU) or whose GPU runs a process in the snapshot is a comment saying why ("drain the node first", "GPU 0 is used
   by pid 1248209 python3: stop it first").
   A command out of its valid range for the host's distribution and release (``command_ranges``: ``ubuntu-drivers``
   on Debian, ``dnf module`` on RHEL 10) is a comment saying where it is valid.
   A reboot whose findings' changes are all comments is a comment too: it would complete nothing.
   ``systemctl isolate T`` before a live reboot that follows a live ``set-default T`` is a comment: the reboot starts T.
   A hold (``apt-mark hold``, ``dnf versionlock add``) has its undo beside it, as a comment saying when to run it.
7. After a step with an obvious check (modprobe, a written modprobe.d file, a backup copy, a started
   service, created device nodes) a verification line follows that stops the script when it fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhealth import __version__
from gpuhealth.command_ranges import out_of_range
from gpuhealth.fixsections import NEEDS, PLACEHOLDER, REBOOT, SECTIONS, UNDO, is_shell, needs_person, section_of
from gpuhealth.inert import one_line
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Finding, Fix, OsInfo, Report, Snapshot
from gpuhealth.report.common import fixes_for_host, fold

MODPROBE = lazy_re(r"^sudo\s+modprobe\s+([\w-]+)(?:\s+&&\s+sudo\s+modprobe\s+([\w-]+))?\s*$")
TEE_FILE = lazy_re(r"\|\s*sudo\s+tee\s+(/etc/modprobe\.d/\S+)\s*$")
BACKUP_COPY = lazy_re(r"^sudo\s+cp\s+(/\S.*?)\{,\.bak\}\s*$")
ENABLE_SERVICE = lazy_re(r"^sudo\s+systemctl\s+enable\s+--now\s+([\w.-]+)\s*$")
# What a reboot does too: before it, a module unload/reload or a GPU reset is an alternative, never a second step
# (GH202's "without a reboot" reload after the reboot ran while the machine shut down).
DONE_BY_REBOOT = lazy_re(r"\brmmod\b|\bmodprobe\s+(?:-\w+\s+)*(?:-r|--remove)\b"
                         r"|\bnvidia-smi\b[^|;&]*?\s(?:-r|--gpu-reset)\b")
DONE = 'echo "gpuhealth fix script: all steps done"'
# a fix whose note makes it conditional on what only a person can judge ("only if the lower limit is not intended",
# "only if that file belongs to no installed driver package"): the report shows it; the script writes it as a comment
CHOICE = lazy_re(r"only\s+if\b", re.I)
# Switching the running system to a target: on a desktop it ends the graphical session, and with it the terminal this
# script may run in (systemctl(1), isolate: "stop all others"). Where the script also sets that target as the default
# and reboots, the reboot boots into it: the isolate is no step of its own then.
ISOLATE = lazy_re(r"^sudo\s+systemctl\s+isolate\s+([\w.@-]+)\s*$")
SET_DEFAULT = lazy_re(r"^sudo\s+systemctl\s+set-default\s+([\w.@-]+)\s*$")
GPU_RESET = lazy_re(r"\bnvidia-smi\b[^|;&]*?\s(?:-r|--gpu-reset)\b")
RESET_INDEX = lazy_re(r"\s-i\s+'?([0-9]{1,4})'?(?:\s|$)")
DRAIN_FIRST = "drain the node first"



@dataclass
class Step:
    text: str  # the command, or the instruction when not shell
    kind: str  # one of SECTIONS
    live: bool  # False: written as a comment
    family: str
    codes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    why: str = ""  # why a command is commented out
    actions: set[str] = field(default_factory=set)  # the actions (model.ACTIONS) of the findings that asked for it


def fix_script(report: Report, evidence: str | None = None) -> str:
    """The report's fixes as a bash script that is written for review and never runs itself. ``evidence`` names
    what the report was made from (the files given, the bundle); without it the header says which kind it was."""
    snapshot = report.snapshot
    family = snapshot.os.family if snapshot.os else "other"
    steps: dict[tuple[str, str], Step] = {}
    for cause in fold(report.findings):  # a symptom's own fixes are dropped: fixing its cause fixes it
        for fix in fixes_for_host(cause.finding, snapshot):
            _add(steps, cause.finding, fix, family, snapshot.os)
    lines = _header(report, family, evidence)
    if not steps:
        lines += ["", "# Nothing to do: no finding of this report has a fix command.", "exit 0"]
        return "\n".join(lines) + "\n"
    _unmet_needs(steps)
    drains = _conditions(steps, snapshot)
    _idle_reboot(steps)
    reboot = _one_alternative(steps)
    if drains:
        lines += ["", f"# BEFORE ANYTHING: {DRAIN_FIRST} ({', '.join(drains)}: the finding's action is",
                  "# drain_then_reset, Xid 48 with Xid 63/64 on the same GPU). The GPU reset below stays a comment",
                  "# until the node is drained."]
    for kind, title in SECTIONS:
        chosen = [s for s in steps.values() if s.kind == kind]
        if not chosen:
            continue
        lines += ["", f"# {'=' * 78}", f"# {title}", f"# {'=' * 78}"]
        for step in chosen:
            lines += _render(step) if step is not reboot else []
    if reboot is None:
        return "\n".join([*lines, "", DONE]) + "\n"
    return "\n".join([*lines, "", DONE[:-1] + ', rebooting now"', *_render(reboot)]) + "\n"


def _idle_reboot(steps: dict[tuple[str, str], Step]) -> None:
    """A live reboot that would complete nothing becomes a comment. It is needed by a finding whose own fix it is (no
    change of that finding but a reload or GPU reset, which the reboot does too, or a package hold, which guards later
    upgrades) or one with a live change. When every
    change of its findings is a comment (an instruction, a choice, a placeholder, another distribution's command),
    rebooting would stop the host's jobs for nothing."""
    reboot = next((s for s in steps.values() if s.live and REBOOT.match(s.text)), None)
    if reboot is None:
        return
    for code in reboot.codes:
        changes = [s for s in steps.values()
                   if s is not reboot and code in s.codes and s.kind in ("change", "disruptive")
                   and not DONE_BY_REBOOT.search(s.text)  # a reload or GPU reset is the reboot's alternative
                   and not _undo(s.text)]  # a package hold guards later upgrades; the reboot does not complete it
        if not changes or any(s.live for s in changes):
            return
    reboot.live = False
    reboot.why = "every change it would complete is a comment above: reboot once you have made them"


def _one_alternative(steps: dict[tuple[str, str], Step]) -> Step | None:
    """The live reboot, if any: what it does too (a module reload, a GPU reset) becomes a comment, an alternative to
    choose instead of the reboot, and the reboot goes last (it is written after every other step)."""
    reboot = next((s for s in steps.values() if s.live and REBOOT.match(s.text)), None)
    if reboot is not None:
        defaults = {match[1] for s in steps.values() if s.live and (match := SET_DEFAULT.match(s.text))}
        for step in steps.values():
            if step is not reboot and step.live and step.kind == "disruptive" and DONE_BY_REBOOT.search(step.text):
                step.live = False
                step.why = "the reboot at the end does this too: run this instead of the reboot, never both"
            elif (match := ISOLATE.match(step.text)) and match[1] in defaults:
                step.live = False
                step.why = (f"the reboot at the end starts {match[1]}, the default set above: no need to switch now, "
                            "and on a desktop it would end the session this script runs in")
    return reboot


def _unmet_needs(steps: dict[tuple[str, str], Step]) -> None:
    """A live step whose finding's prerequisite steps (``fixsections.NEEDS``) are all comments becomes a comment too,
    until nothing changes (Docker's restart needs nvidia-ctk's configure, which needs the toolkit install)."""
    changed = True
    while changed:
        changed = False
        for step in steps.values():
            if not step.live:
                continue
            for needs, prerequisite in NEEDS:
                if not needs.search(step.text):
                    continue
                before = [other for other in steps.values() if other is not step and prerequisite.search(other.text)
                          and set(other.codes) & set(step.codes)]
                if before and not any(other.live for other in before):
                    step.live, changed = False, True
                    step.why = f"needs `{one_line(before[0].text)[:120]}`, commented above: run that first"
                    break


def _conditions(steps: dict[tuple[str, str], Step], snapshot: Snapshot) -> list[str]:
    """GPU resets the evidence says not to run yet, as comments saying why; the codes whose findings ask to drain the
    node first."""
    drains: list[str] = []
    for step in steps.values():
        if not GPU_RESET.search(step.text):
            continue
        if "drain_then_reset" in step.actions:
            drains += [code for code in step.codes if code not in drains]
            if step.live:
                step.live, step.why = False, f"{DRAIN_FIRST} (Xid 48 with Xid 63/64 on this GPU), then run this"
            continue
        busy = _processes_on(snapshot, step.text)
        if busy and step.live:
            step.live, step.why = False, busy
    return drains


def _processes_on(snapshot: Snapshot, text: str) -> str:
    """Why a GPU reset cannot run yet: "GPU 0 is used by pid 1248209 python3.10: stop it first"; empty when the
    snapshot shows no process on the GPU it resets (every GPU, without ``-i``)."""
    match = RESET_INDEX.search(text)
    gpus = [gpu for gpu in snapshot.gpus or () if match is None or gpu.index == int(match[1])]
    for gpu in gpus:
        if gpu.processes:
            holders = ", ".join(f"pid {p.pid} {p.name or 'unknown'}" if p.pid is not None else (p.name or "a process")
                                for p in gpu.processes[:3])
            more = f" and {len(gpu.processes) - 3} more" if len(gpu.processes) > 3 else ""
            return f"GPU {gpu.index} is used by {holders}{more}: stop it first"
    return ""


def _add(steps: dict[tuple[str, str], Step], finding: Finding, fix: Fix, family: str, os_info: OsInfo | None) -> None:
    text = " ".join(fix.command.split())  # one line
    shell = is_shell(text)
    kind = section_of(fix)
    live, why = shell, ""
    if not shell:
        why = "an instruction, not a command"
    elif PLACEHOLDER.search(text):
        live, why = False, "fill in the placeholder, then uncomment"
    elif one_line(text) != text:  # never from gpuhealth.commands; refused all the same
        live, why = False, "holds a control character: type it by hand"
    elif CHOICE.match(fix.note):  # "only if that file belongs to no package": the reader decides, not the script
        live, why = False, "a choice the script cannot make: run it yourself if so"
    elif needs_person(text):  # a bypassed safety check, an editor, a password, an installer's questions
        live, why = False, needs_person(text)
    elif fix.family != "any" and family not in ("debian", "rhel"):
        live, why = False, f"for {fix.family} hosts: the distribution is unknown, uncomment the line for yours"
    elif out_of_range(text, os_info):  # knowledge/command_ranges.csv: ubuntu-drivers on Debian, dnf module on RHEL 10
        live, why = False, out_of_range(text, os_info)
    key = (fix.family if not live else "", text)
    step = steps.get(key)
    if step is None:
        step = steps[key] = Step(text, kind, live, fix.family, why=why)
    if finding.code not in step.codes:
        step.codes.append(finding.code)
    step.actions.add(finding.action)
    if fix.note and fix.note not in step.notes:
        step.notes.append(fix.note)
    if kind == "disruptive" and step.kind != "disruptive":
        step.kind = "disruptive"


def _render(step: Step) -> list[str]:
    tag = "DISRUPTIVE " if step.kind == "disruptive" else ""
    family = f" [{step.family}]" if step.family != "any" else ""
    notes = one_line(f": {'; '.join(step.notes)}") if step.notes else ""
    out = ["", f"# {tag}{', '.join(step.codes)}{family}{notes}"]
    if not step.live:
        out.append(f"# ({step.why})")
        out.append(f"# {one_line(step.text)}")
        return out + _undo(step.text)
    out.append(f"{step.text} || true" if step.kind == "diagnostic" else step.text)
    out += _undo(step.text)
    check = _verification(step.text) if step.kind in ("backup", "change") else None
    if check:
        condition, failure = check
        out.append(f"{condition} || {{ echo {_quote('check failed: ' + failure)} >&2; exit 1; }}")
    return out


def _undo(text: str) -> list[str]:
    """The comment that says how to undo a lasting change (``fixsections.UNDO``), and when."""
    out = []
    for part in text.split("&&"):
        for change, undo, when in UNDO:
            if change.search(part):
                out.append(f"# undo it {when}: {one_line(change.sub(undo, part.strip(), count=1))}")
    return out


def _verification(text: str) -> tuple[str, str] | None:
    """A command that confirms a step worked, where one is obvious."""
    match = MODPROBE.match(text)
    if match:
        modules = [m.replace("-", "_") for m in match.groups() if m]
        condition = " && ".join(f"lsmod | grep -q '^{m} '" for m in modules)
        if len(modules) > 1:  # grouped: "a && b || c" would run c after a alone failed (shellcheck SC2015)
            condition = f"{{ {condition}; }}"
        return condition, f"module {', '.join(modules)} not loaded"
    match = TEE_FILE.search(text)
    if match:
        return f"test -s {match[1]}", f"{match[1]} was not written"
    match = BACKUP_COPY.match(text)
    if match:
        return f"test -f {match[1]}.bak", f"no backup {match[1]}.bak"
    match = ENABLE_SERVICE.match(text)
    if match:
        return f"systemctl is-active --quiet {match[1]}", f"{match[1]} is not running"
    if text.startswith("sudo nvidia-modprobe"):
        return "test -e /dev/nvidiactl", "/dev/nvidiactl was not created"
    return None


def _quote(text: str) -> str:
    """Double quotes, so that ``$(uname -r)`` in a message shows the real path."""
    return '"' + re.sub(r'(["\\`])', r"\\\1", text) + '"'


# what a report was made from, when the caller did not name it (Snapshot.origin)
ORIGIN_WORDS = {"live": "this host, checked live", "bundle": "a captured bundle", "evidence": "pasted evidence",
                "plan": "a plan for hardware not installed yet"}


def _header(report: Report, family: str, evidence: str | None = None) -> list[str]:
    snapshot = report.snapshot
    given = evidence or ORIGIN_WORDS.get(snapshot.origin, snapshot.origin)
    where = one_line(snapshot.hostname or "unknown host")
    distro = one_line((snapshot.os.pretty_name or snapshot.os.id) or "") if snapshot.os else None
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in sorted({f.severity for f in report.findings},
                                                                        key=lambda s: -s.rank))
    lines = [
        "#!/usr/bin/env bash",
        "# shellcheck disable=SC2046  # the checks' commands use $(uname -r), which is one word",
        f"# Generated by gpuhealth {__version__} `gpuhealth fix` for {where}"
        + (f" ({distro})" if distro else "") + f", evidence: {one_line(given)}"
        + (f", captured {one_line(snapshot.captured_at)}" if snapshot.captured_at else "") + ".",
        f"# Verdict: {report.verdict}" + (f" ({counts})" if counts else "") + ".",
        "# gpuhealth never runs this script: read every step, then run it yourself as a user with sudo.",
        "# Order: backups first, then read-only diagnostics, then changes; disruptive steps (reboot,",
        "# module reload, GPU reset) come last. A failing step or verification stops the script.",
    ]
    if family not in ("debian", "rhel"):
        lines.append("# The distribution family is unknown: distribution-specific lines are commented out.")
    elif snapshot.os is not None and snapshot.os.family_from:
        from gpuhealth.distro_infer import family_note

        lines.append(f"# No os-release in the evidence: {one_line(family_note(snapshot.os))}; its lines are live.")
    lines += ["", "set -euo pipefail"]
    return lines
