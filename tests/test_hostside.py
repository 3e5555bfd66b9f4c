"""GH72x/GH81x: the host and the network beside the GPUs. The test hosts h100x8-host-quiet and
h100x8-host-faults (tests/hosts) hold hand-written files in the shape of the real ones (values our own);
the OOM lines are real (GPUd's test data, tests/data/corpus/gpud)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import Expectations
from gpuhealth.collect import collect
from gpuhealth.config import load_expectations
from gpuhealth.model import ParseError, Severity
from gpuhealth.parsers import hostside
from gpuhealth.parsers.kernel_log import parse_kernel_log
from hostcases import FakeHost, load_spec
from repo_paths import CORPUS


def _findings(report, code):
    return [f for f in report.findings if f.code == code]


def _faults(expect: Expectations | None = None, **collect_args):
    return run_checks(collect(FakeHost(load_spec("h100x8-host-faults")), **collect_args), expect)


# --------------------------------------------------------------------------- parsers


def test_proc_counters_parse_and_refuse_other_shapes():
    assert hostside.parse_file_nr("2080\t0\t9223372036854775807\n") == (2080, 9223372036854775807)
    assert hostside.parse_loadavg_tasks("0.52 0.58 0.59 3/3912 812345\n") == 3912
    with pytest.raises(ParseError):
        hostside.parse_file_nr("2080 0\n")
    with pytest.raises(ParseError):
        hostside.parse_loadavg_tasks("0.52 0.58 0.59\n")


def test_df_inodes_keeps_file_systems_without_inode_counts_as_zero():
    rows = hostside.parse_df_inodes("Filesystem Inodes IUsed IFree IUse% Mounted on\n"
                                    "/dev/sda1 100 40 60 40% /\n/dev/sdb1 - - - - /data btrfs\n")
    assert [(r.mount_point, r.inodes, r.free) for r in rows] == [("/", 100, 60), ("/data btrfs", 0, 0)]
    with pytest.raises(ParseError):
        hostside.parse_df_inodes("Filesystem 1024-blocks Used Available Capacity Mounted on\n")


def test_ib_rate_and_state_in_the_kernels_form():
    assert hostside.ib_rate_gbps("400 Gb/sec (4X NDR)") == 400.0
    assert hostside.ib_rate_gbps("2.5 Gb/sec (1X SDR)") == 2.5
    assert hostside.ib_rate_gbps("fast") is None
    assert hostside.ib_state_name("4: ACTIVE") == "ACTIVE"
    assert hostside.ib_state_name("5: LinkUp") == "LinkUp"


# --------------------------------------------------------------------------- kernel log


def test_real_oom_lines_become_events_with_the_process():
    text = (CORPUS / "gpud" / "memory__dmesg.decode.iso.log").read_text()
    log = parse_kernel_log(text, "dmesg")
    killed = {(e.pid, e.process) for e in log.events if e.kind == "oom_kill"}
    assert killed == {(123, "httpd"), (456, "python")}
    # oom_reaper's and oom-kill's own lines are no kill of their own
    assert sum(g.count for g in log.tallies({"oom_kill"})) == 3


@pytest.mark.parametrize(("line", "kind", "detail"), [
    ("[ 100.1] watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python:4242]", "soft_lockup",
     "CPU#12 stuck for 22 s"),
    ("[ 100.1] NMI watchdog: Watchdog detected hard LOCKUP on cpu 3", "soft_lockup", "hard lockup on CPU 3"),
    ("[ 200.2] INFO: task kworker/u256:1:912 blocked for more than 120 seconds.", "hung_task",
     "blocked for more than 120 s"),
    ("[ 300.3] Memory cgroup out of memory: Killed process 77 (torchrun) total-vm:1kB", "oom_kill",
     "memory cgroup limit"),
    ("[ 400.4] mlx5_core 0000:0c:00.0: mlx5_health_check_fatal_sensors:1:(pid 0): Fatal error 1 detected",
     "mlx5_fatal", None),
])
def test_host_lines_in_the_kernels_words(line, kind, detail):
    events = [e for e in parse_kernel_log(line + "\n", "dmesg").events]
    assert [(e.kind, e.detail) for e in events] == [(kind, detail)]


@pytest.mark.parametrize("line", [
    "[ 1.0] mlx5_core 0000:0c:00.0: firmware version: 28.39.1002",  # a healthy mlx5 line
    "[ 2.0] xhci_hcd 0000:00:14.0: Fatal error 3 detected",  # another driver's fatal line
    "[ 3.0] some daemon: soft lockup detector disabled",  # the words, not the kernel's message
])
def test_look_alikes_are_no_host_event(line):
    assert not parse_kernel_log(line + "\n", "dmesg").events


def test_analyze_of_a_pasted_log_finds_lockups_and_oom():
    text = ("[ 100.1] watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python:4242]\n"
            "[ 130.9] Out of memory: Killed process 4242 (python) total-vm:1kB, anon-rss:1kB\n")
    snapshot, _ = analyze_texts([("dmesg.txt", text)])
    report = run_checks(snapshot)
    assert [f.severity for f in _findings(report, "GH811")] == [Severity.WARNING]
    assert "python" in _findings(report, "GH812")[0].message


# --------------------------------------------------------------------------- InfiniBand


def test_excluded_devices_are_never_read():
    host = FakeHost(load_spec("h100x8-host-faults"))
    asked: list[str] = []
    read, listdir = host.read, host.listdir
    host.read = lambda path: (asked.append(path), read(path))[1]  # type: ignore[method-assign]
    host.listdir = lambda path: (asked.append(path), listdir(path))[1]  # type: ignore[method-assign]
    report = run_checks(collect(host, ib_exclude=("mlx5_1", "mlx5_2")))
    assert not [p for p in asked if "/mlx5_1/" in p or "/mlx5_2/" in p]
    assert report.snapshot.host_health.ib_excluded == ("mlx5_1", "mlx5_2")
    assert "mlx5_1" not in " ".join(f.message for f in _findings(report, "GH720"))
    assert [f.severity for f in _findings(report, "GH721")] == [Severity.INFO]  # mlx5_2's link_downed unread


def test_port_count_and_rate_are_judged_only_when_configured():
    plain = _faults()
    assert not [f for f in _findings(plain, "GH720") if "expected" in f.message]
    judged = _faults(Expectations(ib_port_count=4, ib_rate_gbps=400))
    messages = [f.message for f in _findings(judged, "GH720")]
    assert any("2 of 4 expected" in m for m in messages)
    assert any("mlx5_2 port 1 runs at 200 Gb/sec (4X HDR), below the 400" in m for m in messages)
    assert not any("mlx5_0" in m for m in messages)  # at its rate
    assert not any(f.severity is Severity.INFO for f in _findings(judged, "GH720"))  # counted, so not listed


def test_ib_keys_in_the_config(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[check]\nib_exclude = ["mlx5_4"]\nib_port_count = 8\nib_rate_gbps = 400\n')
    expect = load_expectations(path)
    assert (expect.ib_exclude, expect.ib_port_count, expect.ib_rate_gbps) == (("mlx5_4",), 8, 400)
    path.write_text('[check]\nib_exclude = "mlx5_4"\n')
    with pytest.raises(ValueError, match="ib_exclude must be a list"):
        load_expectations(path)


def test_unreadable_sysfs_skips_never_passes():
    spec = load_spec("h100x8-host-faults")
    del spec["listings"]["/sys/class/infiniband"]
    del spec["listings"]["/sys/devices/system/edac/mc"]
    host = FakeHost(spec)
    host.listdir = lambda path: __import__("gpuhealth.host", fromlist=["Listing"]).Listing(  # type: ignore
        path, error="permission denied: run as root (sudo)")
    report = run_checks(collect(host))
    skipped = {s.code: s.reason for s in report.skipped}
    assert "permission denied" in skipped["GH720"] and "permission denied" in skipped["GH721"]
    assert "permission denied" in skipped["GH813"]


# --------------------------------------------------------------------------- thresholds


def test_edac_corrected_only_is_a_warning_and_clean_is_quiet():
    spec = load_spec("h100x8-host-faults")
    spec["files"]["/sys/devices/system/edac/mc/mc1/ue_count"] = "0\n"
    report = run_checks(collect(FakeHost(spec)))
    found = _findings(report, "GH813")
    assert [(f.severity, f.impact) for f in found] == [(Severity.WARNING, "degraded")]
    assert "4 corrected" in found[0].message


def test_disk_space_thresholds():
    report = _faults()
    by_mount = {f.labels["mount"]: f for f in _findings(report, "GH814")}
    assert set(by_mount) == {"/", "/raid"}  # /boot/efi's full vfat is not watched
    assert by_mount["/"].severity is Severity.WARNING and "0.5 GiB" in by_mount["/"].message
    spec = load_spec("h100x8-host-faults")
    spec["commands"]["df -P -l"]["stdout"] = spec["commands"]["df -P -l"]["stdout"].replace(" 524288 ", " 0 ")
    full = {f.labels["mount"]: f for f in _findings(run_checks(collect(FakeHost(spec))), "GH814")}
    assert full["/"].severity is Severity.CRITICAL and full["/"].impact == "node_unusable"


def test_quiet_host_is_healthy_and_judged():
    report = run_checks(collect(FakeHost(load_spec("h100x8-host-quiet"))))
    assert report.verdict == "HEALTHY"
    skipped = {s.code for s in report.skipped}
    assert not skipped & {"GH720", "GH721", "GH813", "GH814", "GH815"}
    health = report.snapshot.host_health
    assert len(health.infiniband) == 4 and health.pid_max == 4194304
    assert dataclasses.asdict(health)  # a frozen record, serialisable


# --------------------------------------------------------------------------- stuck processes, clock


def test_a_process_in_state_d_holding_the_gpu():
    report = _faults()
    stuck = {p.pid: p for p in report.snapshot.host_health.stuck}
    assert set(stuck) == {48211, 7002}  # 7001 left state D at the second read: not stuck
    assert stuck[48211].nvidia_files == ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl")
    found = _findings(report, "GH816")
    assert [(f.severity, f.impact) for f in found] == [(Severity.CRITICAL, "node_unusable"), (Severity.INFO, "none")]
    assert "hung task" in found[0].message and "7002 (tar)" in found[1].message


def test_stuck_without_a_hung_task_line_is_a_warning():
    spec = load_spec("h100x8-host-faults")
    log = spec["commands"]["dmesg --time-format iso"]["stdout"]
    spec["commands"]["dmesg --time-format iso"]["stdout"] = "".join(
        line + "\n" for line in log.splitlines() if "blocked for more than" not in line)
    found = _findings(run_checks(collect(FakeHost(spec))), "GH816")
    assert [(f.severity, f.action) for f in found][0] == (Severity.WARNING, "reboot")


def test_clock_and_ps_unavailable_skip():
    spec = load_spec("h100x8-host-faults")
    del spec["commands"]["ps -e -o pid=,stat=,comm="]
    del spec["commands"]["timedatectl show -p NTPSynchronized --value"]
    skipped = {s.code: s.reason for s in run_checks(collect(FakeHost(spec))).skipped}
    assert "not installed" in skipped["GH816"] and "timedatectl" in skipped["GH817"]


def test_the_monitors_full_check_leaves_excluded_devices_unread(monkeypatch):
    import gpuhealth.collect
    from gpuhealth.model import Snapshot
    from gpuhealth.monitor.daemon import run_full_check

    asked = {}

    def fake_collect(host, *args, **kwargs):
        asked.update(kwargs)
        return Snapshot()

    monkeypatch.setattr(gpuhealth.collect, "collect", fake_collect)
    run_full_check(Expectations(ib_exclude=("mlx5_9",)))
    assert asked["ib_exclude"] == ("mlx5_9",)
