"""GH505 on pasted evidence (issue 21, item 3): `cat /proc/version` (the compiler that built the running kernel) and
`gcc --version` (the compiler that builds the nvidia module) are read as evidence kinds and judged by major.minor,
the way NVIDIA's kernel-open/conftest.sh (`cc_version_check`) compares them; no GPU evidence is needed.

The /proc/version and gcc lines are in the forms Ubuntu 16.04 and 22.04 print (a 16.04 pair of kernel gcc 5.3.1
and gcc 5.4.0 is quoted in askubuntu.com threads on the mismatch); the versions are varied by hand to make each case.
"""

from __future__ import annotations

import pytest

from fuzzing import fuzz_tests
from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import KINDS, load
from gpuhealth.evidence.toolchain import kbuild_compiler_lines
from gpuhealth.knowledge.signatures import match_line, signature
from gpuhealth.model import Report, Severity

load()

PROC_VERSION = ("Linux version 4.4.0-31-generic (buildd@lgw01-16) (gcc version {kernel} 20160413 (Ubuntu "
                "{kernel}-14ubuntu2.1) ) #50-Ubuntu SMP Wed Jul 13 00:07:12 UTC 2016\n")
GCC_VERSION = ("gcc (Ubuntu {gcc}-6ubuntu1~16.04.4) {gcc} 20160609\nCopyright (C) 2015 Free Software Foundation, Inc.\n"
               "This is free software; see the source for copying conditions.  There is NO\n"
               "warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.\n")


def _session(kernel: str | None, gcc: str | None) -> Report:
    text = ""
    if kernel:
        text += "$ cat /proc/version\n" + PROC_VERSION.format(kernel=kernel)
    if gcc:
        text += "$ gcc --version\n" + GCC_VERSION.format(gcc=gcc)
    snapshot, _ = analyze_texts((("session.txt", text),))
    return run_checks(snapshot)


def _gh505(report: Report):
    return [f for f in report.findings if f.code == "GH505"]


def test_major_differs_warns_without_gpu_evidence():
    found = _gh505(_session("5.3.1", "7.5.0"))
    assert [f.severity for f in found] == [Severity.WARNING]
    assert "gcc 7.5.0" in found[0].message and "gcc 5.3.1" in found[0].message
    assert any("gcc-5" in fix.command for fix in found[0].fixes)


def test_minor_differs_is_the_builds_warning_only():
    # conftest.sh: "A mismatch condition is not considered fatal" (major or minor): the build goes on
    found = _gh505(_session("5.3.1", "5.4.0"))
    assert [f.severity for f in found] == [Severity.INFO]
    assert not found[0].fixes  # within one major there is no other gcc package to install


@pytest.mark.parametrize(("kernel", "gcc"), [("5.4.0", "5.4.0"), ("5.4.0", "5.4.1")])
def test_same_major_minor_is_quiet(kernel, gcc):
    report = _session(kernel, gcc)
    assert not _gh505(report)
    assert "GH505" not in {s.code for s in report.skipped}


@pytest.mark.parametrize(("kernel", "gcc"), [("5.3.1", None), (None, "5.4.0")])
def test_only_one_side_skips(kernel, gcc):
    report = _session(kernel, gcc)
    assert not _gh505(report)
    assert "GH505" in {s.code for s in report.skipped}


def test_no_nvidia_gpu_on_the_bus_is_not_judged():
    text = ("$ lspci -nn\n00:02.0 VGA compatible controller [0300]: Intel Corporation HD Graphics 530 [8086:1912] "
            "(rev 06)\n$ cat /proc/version\n" + PROC_VERSION.format(kernel="5.3.1")
            + "$ gcc --version\n" + GCC_VERSION.format(gcc="7.5.0"))
    snapshot, _ = analyze_texts((("session.txt", text),))
    assert not _gh505(run_checks(snapshot))


@pytest.mark.parametrize("row", ["installer-cc-mismatch", "conftest-cc-version-check-failed",
                                 "kbuild-compiler-differs", "kbuild-cc-version-check-failed"])
def test_catalogue_rows_match_their_examples_and_point_to_gh505(row):
    sig = signature(row)
    assert sig.code == "GH505"
    matched = match_line(sig.example)
    assert matched is not None and matched.id == row


def test_kernel_warning_with_the_c_compiler_wording():
    # Linux 6.12+ says "the C compiler" since it checks the Rust compiler too (Makefile, prepare)
    matched = match_line("warning: the C compiler differs from the one used to build the kernel")
    assert matched is not None and matched.id == "kbuild-compiler-differs"


def test_conftest_warning_is_not_the_old_refusal():
    # since 515 conftest.sh prints "Warning: Compiler version check failed:" and "*** Failed CC version check. ***"
    # and goes on; the drivers before it printed "Compiler version check failed:" and "... Bailing out! ***" and stopped
    for line in ("Warning: Compiler version check failed:", "*** Failed CC version check. ***"):
        assert match_line(line).id == "conftest-cc-version-check-failed"
        assert match_line(line).severity == "warning"
    for line in ("Compiler version check failed:", "*** Failed CC version check. Bailing out! ***"):
        assert match_line(line).id == "kbuild-cc-version-check-failed"
        assert match_line(line).severity == "critical"


KBUILD = ("make[1]: Entering directory '/usr/src/linux-headers-6.4.6-76060406-generic'\n"
          "warning: the compiler differs from the one used to build the kernel\n"
          "  The kernel was built by: {built}\n"
          "  You are using:           {using}\n")


def _kbuild(built: str, using: str) -> Report:
    snapshot, _ = analyze_texts((("make.log", KBUILD.format(built=built, using=using)),))
    return run_checks(snapshot)


def test_kernel_build_names_two_majors_warns():
    # the pair pop-os/pop#3117's DKMS make.log shows (tests/cases/dev/gcc-mismatch-dkms-535-kernel-gcc12-popos-3117)
    found = _gh505(_kbuild("x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0",
                           "cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"))
    assert [f.severity for f in found] == [Severity.WARNING]
    assert "gcc 12.3.0" in found[0].message


def test_kernel_build_same_version_under_another_name_is_only_the_lines_info():
    # Ubuntu 24.04 prints the warning for the very same gcc (x86_64-linux-gnu-gcc-13 against gcc-13): the versions
    # decide, so GH505 says no more than the catalogue row's info
    found = _gh505(_kbuild("x86_64-linux-gnu-gcc-13 (Ubuntu 13.2.0-23ubuntu4) 13.2.0",
                           "gcc-13 (Ubuntu 13.2.0-23ubuntu4) 13.2.0"))
    assert found and all(f.severity is Severity.INFO for f in found)
    assert not any("differs from the kernel's compiler" in f.message for f in found)


def _never_raises(text: str) -> None:
    """The recognisers and the make.log reader take any text; the parsers raise ParseError at most."""
    from gpuhealth.model import ParseError

    kbuild_compiler_lines(text.splitlines(), "x")
    for name in ("kernel-version", "gcc-version"):
        if KINDS[name].recognise(text):
            try:
                KINDS[name].parse(text, "x")
            except ParseError:
                pass


test_fuzz_random_text, test_fuzz_mutated_samples = fuzz_tests(_never_raises, [
    PROC_VERSION.format(kernel="5.3.1"), GCC_VERSION.format(gcc="5.4.0"),
    KBUILD.format(built="x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0",
                  using="cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"),
    KBUILD.format(built="Ubuntu clang version 17.0.6 (9ubuntu1)", using="clang version 17.0.6"),
])
