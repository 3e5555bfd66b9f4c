"""GH0xx: gpuhealth itself, and the evidence it was given."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.registry import MAX_LINE_EVIDENCE, Draft, Expectations, check
from gpuhealth.model import SETUP_INVENTORY_ONLY, Evidence, Fix, MessageLine, Severity, Snapshot


@check("GH001", "internal-error", "A check failed inside gpuhealth")
def internal_error(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    A check raised an exception instead of returning findings. The engine turns it into this
    finding and runs every other check as usual.

    Why it matters:
    The check that failed said nothing about its subject, so the report is incomplete there. It is a
    bug in gpuhealth, not a fault of the host.

    How to fix:
    Re-run with `gpuhealth snapshot -o bundle.tar.gz --redact-host` and attach the bundle and the
    finding's evidence (the last lines of the traceback) to a gpuhealth issue.

    Exceptions:
    None. This finding is produced by the engine, never by the host's state.
    """
    return iter(())


@check("GH002", "unrecognized-evidence", "A file given to analyze was not recognised", reads=("messages",))
def unrecognized_evidence(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    `gpuhealth analyze` was given a file whose format it does not know, so nothing in it was read; or
    a part of a post (markdown: the prose around a fenced block, a fence) or a command's output in a
    pasted session in which nothing was read while other parts were; or lines between a kernel log's
    timestamped records that no log prints (a person's comments in a pasted dmesg) and that nothing
    read as words.

    Why it matters:
    Whatever that file shows is missing from the report, so a report with nothing else wrong says
    NO DIAGNOSIS (exit 3), never HEALTHY: a fault may be in what was not read.

    How to fix:
    Give the raw output of the command (for example `nvidia-smi -q -x`, `dmesg -T`, `lspci -nn`,
    `nvidia-bug-report.sh`) rather than a screenshot or an edited excerpt, or run `gpuhealth check`
    on the host itself.

    A person's sentences about an error ("errors like the following are produced:", "we traced the
    failure to the hardware") that nothing read are named here too, with their lines, where the part that
    holds them is not already named: they are no error line of a program's (GH003), and nothing the
    person wrote is dropped unseen.

    Exceptions:
    Files that hold nothing gpuhealth reads (an Xorg log, a shell history) are expected here.
    """
    for name in snapshot.unrecognized_files:
        # a part of a piece that was read (a person's lines in a log, prose beside a listing) says so itself: the rest
        # of the piece was analysed
        part = _PART_NOT_READ in name
        yield Draft(Severity.INFO, name if part else f"{name}: format not recognised; nothing in it was analysed",
                    evidence=(Evidence(name),))
    yield from _words_not_read(snapshot)


# how analyze names the lines of a piece that nothing read while the rest of it was ("dmesg.txt: 2 line(s) between the
# kernel log's records, not read ('...')")
_PART_NOT_READ = " line(s) "


def _words_not_read(snapshot: Snapshot) -> Iterator[Draft]:
    """A person's sentences about an error that nothing read (error-looking lines analyze kept as the reporter's
    words: parsers/prose.persons_line), grouped by the part that holds them, unless that part is named above."""
    named = snapshot.unrecognized_files
    by_source: dict[str, list[MessageLine]] = {}
    for m in snapshot.messages or ():
        if m.reported and m.signature is None and m.symptom is None and not m.mined and not any(
                name == m.source or name.startswith(m.source + " (") for name in named):
            by_source.setdefault(m.source, []).append(m)
    for source, lines in by_source.items():
        yield Draft(Severity.INFO, f"{source}: {len(lines)} line(s) of the reporter's words about an error, not read "
                    f"({lines[0].line[:60]!r}{' ...' if len(lines) > 1 else ''})",
                    evidence=(Evidence(source, tuple(m.line for m in lines[:MAX_LINE_EVIDENCE])),))


@check("GH005", "setup-inventory-only", "The evidence given only lists the setup, not the GPUs' state")
def setup_inventory_only(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    Everything `gpuhealth analyze` read only inventories the setup: a package listing (`dpkg -l`,
    `rpm -qa`, `dnf list installed`, `pip list`, `conda list`), `/etc/os-release`, `uname`, a
    tool's version (`gcc --version`, `nvcc --version`), or a program's text (a script or Dockerfile:
    the GPUs it chooses, the wheel it pins, the image it builds on). It was read, and the checks that
    compare versions used it, but nothing in it shows a GPU, the driver loaded or a program running.

    Why it matters:
    A clean package listing says which driver is installed, not that it loads or that the GPUs work,
    so a report with nothing else wrong says NO DIAGNOSIS (exit 3), never HEALTHY.

    How to fix:
    Add evidence of the GPUs' state: `nvidia-smi`, `dmesg -T | grep -i nvrm`, `lspci -nnk -d 10de:`,
    or the failing program's output; or run `gpuhealth check` on the host itself.

    Exceptions:
    None. When the inventory shows a problem (two driver versions, headers for another kernel), that
    finding decides the verdict and this one only says what else to paste.
    """
    inventory = snapshot.unavailable.get(SETUP_INVENTORY_ONLY)
    if snapshot.origin != "evidence" or not inventory:
        return
    yield Draft(Severity.INFO, f"the evidence only lists the setup ({inventory}): it says what is installed, not "
                "whether the GPUs work; paste the output of the commands below for a verdict",
                evidence=(Evidence("read", tuple(sorted(set(snapshot.sources.values())))),),
                fixes=tuple(Fix(c, "any", note="paste its output") for c in STATE_COMMANDS))


# what shows the GPUs' state where only the setup was given (GH005)
STATE_COMMANDS = ("nvidia-smi", "sudo dmesg -T | grep -iE 'nvrm|xid|nvidia'", "lspci -nnk -d 10de:")
