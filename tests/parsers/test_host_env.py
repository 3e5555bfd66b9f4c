"""Host-environment parsers: systemctl get-default, the run-file installer's log, dpkg/rpm package lists,
docker info and daemon.json, nvidia-ctk, /proc/1/cgroup, /proc/driver/nvidia/params, /proc/self/mounts, df.

Real inputs: /proc/driver/nvidia/params and the installer log of nvidia-bug-report-352.63 (corpus). The
corpus holds no systemctl, dpkg-query, rpm, docker, nvidia-ctk, cgroup, mounts or df output, so those
samples are HAND-WRITTEN in the layouts the tools print.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS
from fuzzing import FUZZ, mutated, only_parse_error
from gpuhealth.model import DiskSpace, MountEntry, NvidiaPackage, ParseError
from gpuhealth.parsers.host_env import (
    container_from_cgroup,
    parse_daemon_json,
    parse_default_target,
    parse_df,
    parse_docker_runtimes,
    parse_driver_params,
    parse_installer_log,
    parse_mounts,
    parse_nvidia_ctk_version,
    parse_package_list,
)

BUG_REPORT = CORPUS / "nvidia-bug-report-352.63"
REAL_PARAMS = (BUG_REPORT / "proc_driver_nvidia_params.txt").read_text()
_REPORT = (BUG_REPORT / "nvidia-bug-report.log").read_text(errors="replace")
REAL_INSTALLER_LOG = _REPORT[_REPORT.index("nvidia-installer log file"):_REPORT.index("journalctl -b -0 _COMM=Xorg")]

# hand-written
INSTALLER_OK = """nvidia-installer log file '/var/log/nvidia-installer.log'
creation time: Tue Jan  9 14:03:11 2024
installer version: 470.223.02

nvidia-installer command line:
    ./nvidia-installer
    --silent
-> Uninstallation of existing driver: NVIDIA Accelerated Graphics Driver for Linux-x86_64 (470.199.02) is complete.
-> Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64 (version: 470.223.02) is now complete.
"""
DPKG = """ii  libnvidia-compute-535:amd64 535.161.08-0ubuntu2.22.04.1
ii  nvidia-driver-535 535.161.08-0ubuntu2.22.04.1
rc  nvidia-driver-470 470.239.06-0ubuntu0.22.04.1
un  nvidia-driver-binary
ii  nvidia-container-toolkit 1.15.0-1
"""
RPM = "cuda-drivers 550.90.07-1\nnvidia-driver 550.90.07-1.el9\nkmod-nvidia-latest-dkms 550.90.07-1.el9\n"
DOCKER_INFO = '{"io.containerd.runc.v2":{"path":"runc"},"nvidia":{"path":"nvidia-container-runtime"},"runc":{}}'
DAEMON_JSON = '{"default-runtime": "nvidia", "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}'
CTK = "NVIDIA Container Toolkit CLI version 1.14.3\ncommit: 53b24618a542025b108239fe602e66e912b7d6e2\n"
CGROUP_V1 = "12:devices:/docker/3f9c2a1b7d4e\n11:memory:/docker/3f9c2a1b7d4e\n0::/system.slice/docker.service\n"
CGROUP_K8S = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-ab.scope\n"
MOUNTS = """/dev/mapper/rl-root / xfs rw,relatime,attr2 0 0
/dev/sdb1 /data\\040set xfs rw,attr2,inode64 0 0
nas01:/export /mnt/nfs nfs4 rw,relatime,vers=4.1 0 0
"""
DF = """Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/sda2         52403200  49283072   3120128      95% /
df: /mnt/nfs: Stale file handle
/dev/sdb1       3906002944 812345678 3093657266      21% /data set
"""


def test_default_target():
    assert parse_default_target("graphical.target\n") == "graphical.target"
    assert parse_default_target("multi-user.target\n") == "multi-user.target"
    for bad in ("", "System has not been booted with systemd as init system (PID 1). Can't operate.\n"):
        with pytest.raises(ParseError):
            parse_default_target(bad)


def test_installer_log_real_failure_and_success():
    version, result, lines = parse_installer_log(REAL_INSTALLER_LOG)
    assert (version, result) == ("352.39", "failed")
    assert lines[-1].startswith("ERROR: Installation has failed")
    version, result, lines = parse_installer_log(INSTALLER_OK)
    assert (version, result) == ("470.223.02", "installed") and len(lines) == 2
    with pytest.raises(ParseError):
        parse_installer_log("hello\n")


def test_package_lists():
    assert parse_package_list(DPKG, "dpkg") == (
        NvidiaPackage("libnvidia-compute-535", "535.161.08-0ubuntu2.22.04.1", "dpkg"),
        NvidiaPackage("nvidia-driver-535", "535.161.08-0ubuntu2.22.04.1", "dpkg"),
        NvidiaPackage("nvidia-container-toolkit", "1.15.0-1", "dpkg"))
    assert [p.name for p in parse_package_list(RPM, "rpm")] == ["cuda-drivers", "nvidia-driver",
                                                                 "kmod-nvidia-latest-dkms"]
    assert parse_package_list("nvidia-driver-535 535.161.08\n", "dpkg")[0].version == "535.161.08"
    assert parse_package_list("dpkg-query: no packages found matching *nvidia*\n", "dpkg") == ()
    for bad in ("", "this is not a package list at all\n"):
        with pytest.raises(ParseError):
            parse_package_list(bad, "rpm")


def test_docker_and_toolkit():
    assert parse_docker_runtimes(DOCKER_INFO) == ("io.containerd.runc.v2", "nvidia", "runc")
    assert parse_daemon_json(DAEMON_JSON) == (("nvidia",), "nvidia")
    assert parse_daemon_json("{}") == ((), None)
    assert parse_nvidia_ctk_version(CTK) == "1.14.3"
    for parse, bad in ((parse_docker_runtimes, "Cannot connect to the Docker daemon"), (parse_docker_runtimes, "[]"),
                       (parse_daemon_json, '{"runtimes": 3}'), (parse_nvidia_ctk_version, "usage: nvidia-ctk")):
        with pytest.raises(ParseError):
            parse(bad)


def test_cgroup():
    assert container_from_cgroup(CGROUP_V1) == "docker"
    assert container_from_cgroup(CGROUP_K8S) == "kubernetes"
    assert container_from_cgroup("0::/\n") is None
    assert container_from_cgroup("0::/init.scope\n") is None
    with pytest.raises(ParseError):
        container_from_cgroup("not a cgroup file\n")


def test_driver_params_real():
    params = parse_driver_params(REAL_PARAMS)
    assert params["EnableMSI"] == "1" and params["EnablePCIeGen3"] == "0" and params["RegistryDwords"] == ""
    assert len(params) == 19
    with pytest.raises(ParseError):
        parse_driver_params("\n\n")


def test_mounts_and_df():
    mounts = parse_mounts(MOUNTS)
    assert mounts[1] == MountEntry("/dev/sdb1", "/data set", "xfs", ("rw", "attr2", "inode64"))
    assert mounts[2].fs_type == "nfs4"
    assert parse_df(DF) == (DiskSpace("/dev/sda2", "/", 52403200, 3120128),
                            DiskSpace("/dev/sdb1", "/data set", 3906002944, 3093657266))
    assert parse_df("Filesystem 512-blocks Used Available Capacity Mounted on\n/dev/x 200 100 100 50% /\n")[0] == \
        DiskSpace("/dev/x", "/", 100, 50)
    for parse, bad in ((parse_mounts, ""), (parse_mounts, "rootfs\n"), (parse_df, "df: invalid option\n")):
        with pytest.raises(ParseError):
            parse(bad)


# --------------------------------------------------------------------------- fuzzing

PARSERS = [
    (parse_default_target, ["graphical.target\n", "multi-user.target\n"]),
    (parse_installer_log, [REAL_INSTALLER_LOG, INSTALLER_OK]),
    (lambda text: parse_package_list(text, "dpkg"), [DPKG]),
    (lambda text: parse_package_list(text, "rpm"), [RPM]),
    (parse_docker_runtimes, [DOCKER_INFO]),
    (parse_daemon_json, [DAEMON_JSON]),
    (parse_nvidia_ctk_version, [CTK]),
    (container_from_cgroup, [CGROUP_V1, CGROUP_K8S]),
    (parse_driver_params, [REAL_PARAMS]),
    (parse_mounts, [MOUNTS]),
    (parse_df, [DF]),
]


@pytest.mark.parametrize(("parse", "texts"), PARSERS, ids=[f"parser-{i}" for i in range(len(PARSERS))])
@FUZZ
@given(data=st.data())
def test_fuzz_only_parse_error(parse, texts, data):
    only_parse_error(parse, data.draw(mutated(texts)))


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_random_text(text):
    for parse, _ in PARSERS:
        only_parse_error(parse, text)


# dpkg-query(1) --list: "Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend";
# dpkg(1): half-installed = started, not completed; triggers-awaited/-pending come after configuration.
@pytest.mark.parametrize(("status", "installed"), [
    ("ii", True), ("hi", True), ("iU", True), ("iF", True), ("iW", True), ("it", True), ("hW", True),
    ("iUR", True), ("ri", True),  # selected for removal, still on disk
    ("iH", False), ("iHR", False), ("rc", False), ("un", False), ("pn", False)])
def test_dpkg_status_letters_mean_the_same_in_both_listings(status, installed):
    """`dpkg -l` (pasted, parsers.packages) and `dpkg-query -W` (recorded, parsers.host_env) share one rule;
    they once disagreed on iH (half-installed: partial files) and iW (triggers-awaited: installed)."""
    from gpuhealth.parsers.packages import parse_dpkg_list

    query = parse_package_list(f"{status} libnvidia-compute-535 535.161.08-0ubuntu1\n", "dpkg")
    listing = parse_dpkg_list(f"{status:<3} libnvidia-compute-535:amd64 535.161.08-0ubuntu1 amd64 NVIDIA libcompute\n")
    assert bool(query) is installed and bool(listing) is installed
    assert query == listing


@pytest.mark.parametrize("qualifier", ["", ":amd64", ":i386", ":arm64"])
def test_dpkg_names_read_one_way_in_both_listings(qualifier):
    """A Multi-Arch package carries its architecture in `dpkg -l` and in `dpkg-query -W -f='${binary:Package}'`
    (`nvidia-driver-550:amd64`); both readers name it without, as `${Package}` does, so a check sees one name."""
    from gpuhealth.parsers.packages import dpkg_package_name, parse_dpkg_list

    query = parse_package_list(f"ii nvidia-driver-550{qualifier} 550.54.15-0ubuntu1\n", "dpkg")
    unqualified = parse_package_list(f"nvidia-driver-550{qualifier} 550.54.15-0ubuntu1\n", "dpkg")
    listing = parse_dpkg_list(f"ii  nvidia-driver-550{qualifier}  550.54.15-0ubuntu1  amd64  NVIDIA driver\n")
    expected = (NvidiaPackage("nvidia-driver-550", "550.54.15-0ubuntu1", "dpkg"),)
    assert query == unqualified == listing == expected
    assert dpkg_package_name("libc6:AMD64") == "libc6:AMD64"  # not an architecture: left as written
    assert parse_package_list("kmod-nvidia:x 550.54.15\n", "rpm")[0].name == "kmod-nvidia:x"  # rpm untouched
