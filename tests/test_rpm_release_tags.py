"""An rpm distribution tag (.el7, .el9_3, .fc39, .amzn2, .amzn2023) in a pasted yum/dnf/rpm listing sets the family
and the release, so a command that release lacks (dnf on EL7 and Amazon Linux 2) is a comment in the fix script.
The listings are hand-written in `yum list installed`'s and `rpm -qa`'s formats."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.command_ranges import out_of_range
from gpuhealth.distro_infer import inferred_release
from gpuhealth.fixscript import fix_script
from gpuhealth.model import Finding, Fix, InstallState, Report, Severity, Snapshot


def _yum(release: str) -> str:
    return ("Installed Packages\n"
            f"kernel.x86_64                      3.10.0-1160.{release}                 @updates\n"
            f"kernel-devel.x86_64                3.10.0-1160.71.1.{release}            @updates\n")


@pytest.mark.parametrize("tag, ids, version", [
    ("el7", ("rhel",), "7"), ("el9_3", ("rhel",), "9"), ("fc39", ("fedora",), "39"),
    ("amzn2", ("amzn",), "2"), ("amzn2023", ("amzn",), "2023")])
def test_a_yum_listing_sets_family_and_release(tag, ids, version):
    snapshot, _ = analyze_texts([("yum.txt", _yum(tag))])
    assert snapshot.os is not None and snapshot.os.family == "rhel"
    assert (snapshot.os.id_like, snapshot.os.version_id) == (ids, version)
    assert tag in snapshot.os.family_from and snapshot.os.id is None


def test_rpm_names_and_kernel_releases_carry_the_tag_too():
    snapshot, _ = analyze_texts([("rpm.txt", "kernel-3.10.0-1160.el7.x86_64\nkernel-devel-3.10.0-1160.el7.x86_64\n")])
    assert snapshot.os.id_like == ("rhel",) and snapshot.os.version_id == "7"
    assert inferred_release(Snapshot(), ["5.14.0-362.8.1.el9_3.x86_64"]) == (("rhel",), "9")


def test_tags_that_disagree_give_no_release():
    state = InstallState(kernel_packages=("3.10.0-1160.el7", "4.18.0-553.el8"))
    assert inferred_release(Snapshot(install=state)) is None
    snapshot, _ = analyze_texts([("yum.txt", _yum("el7") + "kernel.x86_64  4.18.0-553.el8  @baseos\n")])
    assert snapshot.os.family == "rhel" and snapshot.os.version_id is None


@pytest.mark.parametrize("tag, live", [("el7", False), ("amzn2", False), ("el9", True), ("amzn2023", True)])
def test_dnf_is_a_comment_where_the_tag_says_the_release_has_none(tag, live):
    snapshot, _ = analyze_texts([("yum.txt", _yum(tag))])
    hold = "sudo dnf install python3-dnf-plugin-versionlock && sudo dnf versionlock add '*nvidia*'"
    assert bool(out_of_range(hold, snapshot.os)) is not live
    finding = Finding("GH202", "GH202", Severity.WARNING, "m", fixes=(Fix(hold, "rhel"),), action="fix_host_software",
                      impact="degraded")
    script = fix_script(Report(snapshot, (finding,)))
    lines = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert (hold in lines) is live
