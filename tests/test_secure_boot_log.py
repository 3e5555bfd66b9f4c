"""GH506 reads module-signature refusals from the kernel log (hand-written lines: the corpus has none;
its one signature line, in the 352.63 bug report, is the harmless 'tainting kernel' kind)."""

from __future__ import annotations

from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec

REFUSED = ("[    6.100000] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7\n"
           "[    6.200000] nvidia: Required key not available\n")
TAINTED = "[    6.200000] nvidia: module verification failed: signature and/or required key missing - tainting kernel\n"


def gh506(log: str):
    spec = load_spec("ubuntu-before-install")
    spec.setdefault("commands", {})["dmesg --time-format iso"] = {"stdout": log}
    return [f for f in run_checks(collect(FakeHost(spec)), select=["GH506"]).findings]


def test_refusal_in_the_log_is_evidence():
    (finding,) = gh506(REFUSED)
    assert any("Required key not available" in line for e in finding.evidence for line in e.lines)


def test_taint_alone_is_not_a_refusal():
    for finding in gh506(TAINTED):
        assert not any("tainting kernel" in line for e in finding.evidence for line in e.lines)


def test_a_pasted_refusal_is_not_asked_for_again_and_nothing_loads_before_the_enrolling_reboot():
    # the snippet users paste most (issue 9's list); the modprobe that "confirms it" is already in the paste
    from gpuhealth.analyze import analyze_texts

    paste = "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
    snapshot, _ = analyze_texts([("session.txt", paste)])
    (finding,) = run_checks(snapshot, select=["GH506"]).findings
    commands = [fix.command for fix in finding.fixes]
    assert "sudo modprobe nvidia" not in commands and "sudo mokutil --import MOK.der" in commands
    # the key is trusted only after the reboot's MOK manager: a load before it is refused again
    assert not [fix for fix in finding.fixes if fix.command.startswith("sudo modprobe nvidia &&")]
    (without,) = gh506(REFUSED)  # a refusal only in the kernel log: modprobe's own answer still confirms it
    assert "sudo modprobe nvidia" in [fix.command for fix in without.fixes]
