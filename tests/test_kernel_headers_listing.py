"""GH503 from a pasted package listing, and a person's prose pasted with a listing counting as not read.

The listings here are hand-written, in the shape `yum list installed`, `rpm -qa` and `dpkg -l` print (the kernel
versions are those of CentOS 7.6/7.8 and Ubuntu 22.04 updates); the prose is hand-written too."""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.listings import prose_lines
from gpuhealth.model import Report, Severity

YUM = """Installed Packages
kernel.x86_64                            3.10.0-957.el7                   @anaconda
kernel-devel.x86_64                      3.10.0-1127.18.2.el7             @updates
kernel-headers.x86_64                    3.10.0-957.el7                   @anaconda
kernel-tools.x86_64                      3.10.0-957.el7                   @anaconda
"""
YUM_MATCHING = YUM.replace("kernel-devel.x86_64                      3.10.0-1127.18.2.el7",
                           "kernel-devel.x86_64                      3.10.0-957.el7      ")
RPM_TWO_KERNELS = """kernel-3.10.0-957.el7.x86_64
kernel-3.10.0-1127.18.2.el7.x86_64
kernel-devel-3.10.0-1127.18.2.el7.x86_64
kernel-headers-3.10.0-1127.18.2.el7.x86_64
"""
DPKG = """Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)
||/ Name                              Version        Architecture Description
+++-=================================-==============-============-=================================
ii  linux-headers-5.15.0-91           5.15.0-91.101  all          Header files related to Linux kernel version 5.15.0
ii  linux-headers-5.15.0-91-generic   5.15.0-91.101  amd64        Linux kernel headers for version 5.15.0
ii  linux-image-5.15.0-88-generic     5.15.0-88.98   amd64        Signed kernel image generic
ii  linux-image-5.15.0-91-generic     5.15.0-91.101  amd64        Signed kernel image generic
"""
PROSE = "After running the playbook I ended up with a non working driver and this:\n\n"


def _report(*texts: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(texts)
    return run_checks(snapshot)


def _gh503(report: Report) -> list:
    return [f for f in report.findings if f.code == "GH503"]


def _skip(report: Report, code: str) -> str:
    return next((s.reason for s in report.skipped if s.code == code), "")


def test_yum_listing_with_devel_for_another_kernel_gh503_without_pci():
    report = _report(("yum list installed", YUM))
    [finding] = _gh503(report)
    assert finding.severity is Severity.WARNING  # the module's state is unknown from a listing
    assert "running kernel 3.10.0-957.el7" in finding.message and "3.10.0-1127.18.2.el7" in finding.message
    assert "the only kernel image package listed" in str(finding.evidence)


def test_uname_names_the_running_kernel_among_several():
    report = _report(("session.txt", "$ uname -r\n3.10.0-957.el7.x86_64\n"),
                     ("rpm -qa | grep kernel", RPM_TWO_KERNELS))
    [finding] = _gh503(report)
    assert "3.10.0-957.el7.x86_64" in finding.message and "(uname -r or /proc/version" in str(finding.evidence)
    # running the newer kernel, whose kernel-devel is installed: quiet
    report = _report(("session.txt", "$ uname -r\n3.10.0-1127.18.2.el7.x86_64\n"), ("rpm -qa", RPM_TWO_KERNELS))
    assert not _gh503(report) and not _skip(report, "GH503")


def test_headers_for_the_running_kernel_are_quiet():
    assert not _gh503(_report(("yum list installed", YUM_MATCHING)))
    report = _report(("session.txt", "$ uname -r\n5.15.0-91-generic\n"), ("dpkg -l", DPKG))
    assert not _gh503(report) and not _skip(report, "GH503")


def test_dpkg_running_kernel_without_its_headers_gh503_and_module_not_loaded_is_critical():
    lsmod = "Module                  Size  Used by\next4                  1234  1\n"
    report = _report(("session.txt", "$ uname -r\n5.15.0-88-generic\n"), ("dpkg -l", DPKG), ("lsmod", lsmod))
    [finding] = _gh503(report)
    assert finding.severity is Severity.CRITICAL and "5.15.0-88-generic" in finding.message
    # the flavour-less common package (linux-headers-5.15.0-91) is not the running kernel's build tree
    assert "headers are installed for 5.15.0-91, 5.15.0-91-generic" in finding.message


def test_several_kernels_and_no_running_kernel_skip_not_pass():
    report = _report(("rpm -qa", RPM_TWO_KERNELS))
    assert not _gh503(report)
    assert "2 kernel image packages and the running kernel is unknown" in _skip(report, "GH503")


def test_a_listing_without_any_headers_package_is_not_judged():
    report = _report(("rpm -qa | grep kernel", "kernel-3.10.0-957.el7.x86_64\n"))
    assert not _gh503(report) and "no kernel headers package" in _skip(report, "GH503")


def test_a_listing_without_kernels_leaves_gh503_to_the_pci_evidence():
    report = _report(("rpm -qa", "nvidia-driver-550.54.15-1.el8.x86_64\n"))
    assert not _gh503(report) and _skip(report, "GH503")


# --------------------------------------------------------------------------- prose beside a listing


def test_prose_alone_is_never_healthy_and_stays_reported():
    """A person's sentence is read now (a symptom told in words), but it is never HEALTHY and never critical: what it
    raises is labelled as the reporter's words."""
    report = _report(("notes.txt", "The driver does not work after the reboot, nvidia-smi fails every time.\n"))
    assert report.verdict in ("NO DIAGNOSIS", "DEGRADED")
    raised = [f for f in report.findings if f.severity.value != "info"]
    assert raised and all(f.labels.get("reported") == "words" for f in raised)


def test_prose_with_a_clean_listing_is_no_diagnosis_not_healthy():
    report = _report(("notes.txt", PROSE + YUM_MATCHING))
    assert report.verdict == "NO DIAGNOSIS"
    assert any(f.code == "GH002" and "prose beside the dnf-list listing" in f.message for f in report.findings)
    # the same listing alone is read, but a package listing says nothing of the GPUs' state: GH005, not HEALTHY
    alone = _report(("yum.txt", YUM_MATCHING))
    assert alone.verdict == "NO DIAGNOSIS" and [f.code for f in alone.findings] == ["GH005"]


def test_prose_with_a_listing_that_shows_a_fault_gives_the_fault():
    report = _report(("notes.txt", PROSE + YUM))
    assert report.verdict == "DEGRADED" and _gh503(report)


def test_prose_lines_are_sentences_not_the_tools_own_lines():
    assert prose_lines(PROSE + YUM) == [PROSE.strip()]
    assert prose_lines(DPKG) == []
    assert prose_lines("xorg:nvidia_current - NVIDIA accelerated graphics driver (Proprietary, Disabled, Not in use)\n"
                       "ii linux-headers-5.15.0-91-generic 5.15.0-91.101 amd64 Linux kernel headers\n") == []
    assert prose_lines("WARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n"
                       "Listing... Done\nlinux-headers-5.15.0-91-generic/jammy-updates,now 5.15.0-91.101 amd64 "
                       "[installed,automatic]\n") == []
    assert prose_lines("Loaded plugins: fastestmirror, langpacks\nLast metadata expiration check: 0:12:01 ago on "
                       "Mon 07 Dec 2026.\n") == []


def test_prose_the_catalogue_knows_is_read():
    line = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest"
    report = _report(("notes.txt", line + "\n" + YUM_MATCHING))
    assert not any(f.code == "GH002" and "prose" in f.message for f in report.findings)
