"""The severity rule for a confirmed cause (docs/architecture.md, "Severity of a diagnosed cause"): the greater of
the cause's own severity and the severity of its symptom as the evidence OBSERVES it; a symptom the table only
infers from the cause adds nothing. Evidence: the cases of tests/cases/ and the catalogue's own example lines."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import shows_symptom
from gpuhealth.checks.engine import run_checks
from gpuhealth.cli import main
from gpuhealth.knowledge.signatures import signature
from gpuhealth.model import Severity

CASES = Path(__file__).parent / "cases" / "dev"
MIG = CASES / "mig-change-pending-disable-persistenced-holds-gpu-operator-118" / "session.txt"


def findings_of(*texts: tuple[str, str]) -> dict[str, tuple[Severity, tuple[str, ...]]]:
    snapshot, _ = analyze_texts(list(texts))
    return {f.code: (f.severity, f.explains) for f in run_checks(snapshot).findings}


def example(row: str) -> str:
    return signature(row).example


def test_a_pending_mig_change_alone_is_the_warning_its_row_says():
    # NVIDIA/gpu-operator#118: `nvidia-smi -mig DISABLED` left the change pending; no program failed in the paste
    found = findings_of(("session.txt", MIG.read_text()))
    assert found["GH409"] == (Severity.WARNING, ("GH610",))
    assert "GH610" not in found  # the symptom is inferred from the cause, not shown
    result = CliRunner().invoke(main, ["analyze", str(MIG)])
    assert result.exit_code == 1, result.output  # warnings only: exit 1, not the 2 of a broken host
    assert result.output.lstrip().startswith("DEGRADED"), result.output


def test_a_pending_mig_change_beside_a_failed_program_is_critical():
    # the same session with a CUDA program that then failed (the catalogue's cuInit line, Bumblebee-Project#623):
    # the symptom is observed, so its cause is as grave as it
    failed = MIG.read_text() + "\n$ python train.py\n" + example("pycuda-cuinit-failed") + "\n"
    found = findings_of(("session.txt", failed))
    assert found["GH409"] == (Severity.CRITICAL, ("GH610",))
    assert found["GH610"][0] is Severity.CRITICAL


def test_a_compiler_warning_alone_does_not_make_a_failed_install():
    # kbuild's "the compiler differs" is printed by builds that succeed too: it names a cause (gcc mismatch) of a
    # failed install, but does not show one; alone (no versions to compare) it is the row's info: Linux's Makefile
    # compares the whole banner, so the same gcc under another name prints it too
    alone = findings_of(("make.log", example("kbuild-compiler-differs") + "\n"))
    assert alone["GH505"] == (Severity.INFO, ())  # information explains no symptom
    failed = findings_of(("make.log", example("kbuild-compiler-differs") + "\n" + example("dkms-bad-return-status")
                          + "\n"))
    assert failed["GH505"] == (Severity.CRITICAL, ("GH507",))
    assert failed["GH507"][0] is Severity.CRITICAL


def test_a_check_confirmed_cause_of_an_observed_critical_symptom_is_critical():
    # startos: nvidia-smi cannot talk to the driver (critical, shown) and GH506's own check confirms Secure Boot;
    # a critical symptom is never folded under a warning
    folder = CASES / "secure-boot-mok-never-staged-startos"
    found = findings_of(*[(p.name, p.read_text(errors="replace")) for p in sorted(folder.iterdir())
                          if p.name != "case.toml"])
    assert found["GH506"] == (Severity.CRITICAL, ("GH203",))
    assert found["GH203"][0] is Severity.CRITICAL


def test_a_line_shows_its_symptom_only_when_it_names_no_cause():
    snapshot, _ = analyze_texts([("session.txt", MIG.read_text() + "\n" + example("pycuda-cuinit-failed") + "\n")])
    by_row = {m.signature: m for m in snapshot.messages or () if m.signature}
    assert not shows_symptom(by_row["mig-pending-disable"])  # names the cause: framework-no-gpu only inferred
    assert shows_symptom(by_row["pycuda-cuinit-failed"])  # the failure itself
