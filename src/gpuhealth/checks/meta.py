"""GH0xx: gpuhealth itself, and the evidence it was given."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.registry import Draft, Expectations, check
from gpuhealth.model import Evidence, Severity, Snapshot


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


@check("GH002", "unrecognized-evidence", "A file given to analyze was not recognised")
def unrecognized_evidence(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft]:
    """
    What:
    `gpuhealth analyze` was given a file whose format it does not know, so nothing in it was read.

    Why it matters:
    Whatever that file shows is missing from the report, so a report with nothing else wrong says
    NO DIAGNOSIS (exit 3), never HEALTHY: a fault may be in what was not read.

    How to fix:
    Give the raw output of the command (for example `nvidia-smi -q -x`, `dmesg -T`, `lspci -nn`,
    `nvidia-bug-report.sh`) rather than a screenshot or an edited excerpt, or run `gpuhealth check`
    on the host itself.

    Exceptions:
    Files that hold nothing gpuhealth reads (an Xorg log, a shell history) are expected here.
    """
    for name in snapshot.unrecognized_files:
        yield Draft(Severity.INFO, f"{name}: format not recognised; nothing in it was analysed",
                    evidence=(Evidence(name),))
