"""A real Slurm (Debian's slurm-wlm: slurmctld and slurmd on localhost, munge for authentication) with gpuhealth's
wrapper, deploy/slurm/gpuhealth-nhc.sh, as the node's HealthCheckProgram, fed evidence from the test hosts as
bundles (`check --from`). What the node's state and reason become is read back through `scontrol show node` and
`sinfo`, as an administrator would:

- a critical GPU fault drains the node, with the GPU in the reason;
- a CPU-only PyTorch (GH605, critical, a user's environment) does not drain it;
- a node whose GPUs all left the PCI bus stays drained (the count last seen, `--gpu-state`);
- gpuhealth missing or a mistyped option drains nothing, resumes nothing, and is logged at error priority;
- a run where nothing drains resumes only a node gpuhealth drained, never one an administrator drained.

The daemons are started here and stopped at the end (HealthCheckInterval=1: a health check every second). Where
they cannot run, the test says exactly why: skipped on a developer's machine, failed with CI set (.ci/run installs
slurm-wlm and munge when it runs as root). Syslog: the wrapper's `logger` is a stand-in on the health check's PATH
that writes its arguments to a file (a CI container runs no syslog daemon).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO
from gpuhealth.bundle import RecordingHost
from gpuhealth.collect import collect
from hostcases import FakeHost, load_spec

WRAPPER = REPO / "deploy" / "slurm" / "gpuhealth-nhc.sh"
TOOLS = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo")
NODE = "gpunode"
RUN_WAIT_S = 20.0  # one health check run: gpuhealth checks a bundle in about a second
SEARCH = f"{os.environ.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"  # the daemons live in sbin, off a user's PATH


def why_not() -> str | None:
    """Why a real Slurm cannot run here, or None."""
    missing = [tool for tool in TOOLS if shutil.which(tool, path=SEARCH) is None]
    if missing:
        return f"{', '.join(missing)} not installed (Debian: apt-get install slurm-wlm munge; .ci/run does it as root)"
    if os.geteuid() != 0:
        return "slurmd and munged run as root here (slurmd switches to job users; the wrapper drains as root)"
    if shutil.which("timeout", path=SEARCH) is None:
        return "coreutils timeout is not installed (the wrapper bounds gpuhealth with it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """slurmctld, slurmd and munged in a scratch directory; ``scenario`` chooses what the next health check sees."""

    def __init__(self, root: Path, bundles: dict[str, Path]) -> None:
        self.root, self.bundles, self.runs = root, bundles, 0
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": SEARCH}
        self.gpuhealth = Path(sys.executable).with_name("gpuhealth")

    # ------------------------------------------------------------------ set-up
    def start(self) -> None:
        root = self.root
        for name in ("munge", "state", "spool", "log", "bin"):
            (root / name).mkdir(mode=0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._run(["munged", "--force", f"--key-file={key}", f"--socket={root / 'munge' / 'socket'}",
                   f"--pid-file={root / 'munge' / 'pid'}", f"--log-file={root / 'munge' / 'log'}",
                   f"--seed-file={root / 'munge' / 'seed'}"])
        logger = root / "bin" / "logger"  # the syslog stand-in: what the wrapper logs, with its priority
        logger.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {root / "syslog"}\n')
        logger.chmod(0o755)
        health = root / "health-check"  # the node's HealthCheckProgram: this scenario's environment, then the wrapper
        health.write_text(f'#!/bin/sh\n. {root / "scenario"}\n')
        health.chmod(0o755)
        self.scenario("h100x8-healthy")
        host = socket.gethostname().split(".")[0]
        self.conf.write_text("\n".join([
            "ClusterName=gpuhealth-ci", f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}", "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", f"AuthInfo=socket={root / 'munge' / 'socket'}", "CredType=cred/munge",
            f"StateSaveLocation={root / 'state'}", f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}", f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SchedulerType=sched/builtin", "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none", "ReturnToService=2",
            f"HealthCheckProgram={health}", "HealthCheckInterval=1", "HealthCheckNodeState=ANY",
            f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
            "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
        self._run(["slurmctld", "-f", str(self.conf)])
        self._run(["slurmd", "-f", str(self.conf), "-N", NODE])
        deadline = time.monotonic() + 20
        while "IDLE" not in self.node().get("State", ""):
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurmd did not register within 20 s: {self.node()}\n{self.logs()}")
            time.sleep(0.2)
        self.wait_for_run()

    def stop(self) -> None:
        subprocess.run(["scontrol", "shutdown"], env=self.env, capture_output=True, timeout=10, check=False)
        for pidfile in (self.root / "slurmd.pid", self.root / "slurmctld.pid", self.root / "munge" / "pid"):
            try:
                pid = int(pidfile.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            for _ in range(50):  # up to 5 s for a clean exit, then SIGKILL
                try:
                    os.kill(pid, 0 if _ else 15)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass

    def _run(self, argv: list[str]) -> None:
        result = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=20, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted((self.root / "log").glob("*.log")) + [self.root / "munge" / "log"]
                         if p.exists())

    # ------------------------------------------------------------------ scenarios
    def scenario(self, case: str | None, *args: str, gpuhealth: str | None = None) -> str:
        """What the next health checks see: ``case``'s bundle (None: no --from) and extra arguments to gpuhealth.
        Returns the scenario's id, which each run that used it appends to ``runs`` when it ends."""
        self.runs += 1
        run_id = f"run-{self.runs}"
        evidence = ["--from", str(self.bundles[case])] if case else []
        words = " ".join(f"'{w}'" for w in (*evidence, *args))
        text = (f"export SLURM_CONF='{self.conf}' PATH='{self.root / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin'\n"
                f"export GPUHEALTH='{gpuhealth or self.gpuhealth}' GPUHEALTH_GPU_STATE='{self.root / 'gpus-seen'}'\n"
                f"bash '{WRAPPER}' {words} 2>> '{self.root / 'wrapper.err'}'\n"
                f"echo {run_id} >> '{self.root / 'runs'}'\n")
        scratch = self.root / "scenario.new"
        scratch.write_text(text)
        scratch.replace(self.root / "scenario")  # a health check reads it whole, old or new
        return run_id

    def wait_for_run(self, run_id: str | None = None) -> None:
        """Until a health check run that used scenario ``run_id`` (default: the current one) has ended."""
        run_id = run_id or f"run-{self.runs}"
        deadline = time.monotonic() + RUN_WAIT_S
        runs = self.root / "runs"
        while not (runs.exists() and run_id in runs.read_text().split()):
            if time.monotonic() > deadline:
                raise AssertionError(f"no health check run of {run_id} within {RUN_WAIT_S:g} s\n{self.logs()}")
            time.sleep(0.1)

    def see(self, case: str | None, *args: str, gpuhealth: str | None = None, runs: int = 1) -> dict[str, str]:
        """Switch to a scenario, wait for ``runs`` health checks of it, and return the node as scontrol shows it."""
        for _ in range(runs):
            self.wait_for_run(self.scenario(case, *args, gpuhealth=gpuhealth))
        return self.node()

    # ------------------------------------------------------------------ what Slurm says
    def node(self) -> dict[str, str]:
        out = subprocess.run(["scontrol", "--oneliner", "show", "node", NODE], env=self.env, capture_output=True,
                             text=True, timeout=10, check=False).stdout
        fields: dict[str, str] = {}
        for key, _, value in (part.partition("=") for part in _split_fields(out)):
            fields.setdefault(key, value)
        return fields

    def sinfo_reason(self) -> str:
        return subprocess.run(["sinfo", "-h", "-R", "-o", "%E"], env=self.env, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()

    def admin(self, *words: str) -> None:
        subprocess.run(["scontrol", "update", f"nodename={NODE}", *words], env=self.env, capture_output=True,
                       timeout=10, check=True)

    def reset(self) -> None:
        """The node in service, no memory of GPUs, no syslog lines: each test starts from there."""
        if "DRAIN" in self.node().get("State", ""):
            self.admin("state=resume")
        (self.root / "gpus-seen").unlink(missing_ok=True)
        (self.root / "syslog").unlink(missing_ok=True)

    def syslog(self) -> str:
        path = self.root / "syslog"
        return path.read_text() if path.exists() else ""


def _split_fields(line: str) -> list[str]:
    """``scontrol --oneliner`` fields: ``Key=value`` separated by spaces, where a Reason's value has spaces too (the
    words up to the next ``Key=``)."""
    fields: list[str] = []
    for word in line.split():
        head = word.split("=", 1)[0]
        if "=" in word and head.isidentifier() and head[:1].isupper() or not fields:
            fields.append(word)
        else:
            fields[-1] += " " + word
    return fields


@pytest.fixture(scope="module")
def slurm():
    reason = why_not()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"a real Slurm cannot run here: {reason}")
        pytest.skip(f"a real Slurm cannot run here: {reason}")
    root = Path(tempfile.mkdtemp(prefix="gh-slurm-"))  # short: munge's socket path must fit in 108 bytes
    bundles = {}
    for case in ("h100x8-healthy", "h100x8-xid-ecc", "l40s-torch-cpu-wheel-no-uvm", "no-gpu"):
        recorder = RecordingHost(FakeHost(load_spec(case)), root / "bundles" / case, hostname=NODE)
        collect(recorder)
        recorder.finish()
        bundles[case] = root / "bundles" / case
    cluster = Cluster(root, bundles)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_critical_gpu_fault_drains_the_node_with_the_gpu_in_the_reason(slurm):
    slurm.reset()
    node = slurm.see("h100x8-xid-ecc")
    assert "DRAIN" in node["State"], node
    assert node["Reason"].startswith("gpuhealth: GH301 xid-errors [GPU 0 0000:19:00.0] impact=gpu_unusable"), node
    assert slurm.sinfo_reason().startswith("gpuhealth: GH301 xid-errors [GPU 0"), slurm.sinfo_reason()


def test_a_cpu_only_framework_does_not_drain(slurm):
    slurm.reset()
    report = subprocess.run([str(slurm.gpuhealth), "check", "--from", str(slurm.bundles["l40s-torch-cpu-wheel-no-uvm"]),
                             "--format", "json"], capture_output=True, text=True, timeout=60, check=False)
    cpu_only = [f for f in json.loads(report.stdout)["findings"] if f["code"] == "GH605"]
    assert cpu_only and cpu_only[0]["severity"] == "critical" and cpu_only[0]["impact"] == "user_environment"
    node = slurm.see("l40s-torch-cpu-wheel-no-uvm", runs=2)
    assert "DRAIN" not in node["State"] and node["State"].startswith("IDLE"), node


def test_a_node_whose_gpus_vanished_stays_drained(slurm):
    slurm.reset()
    assert "DRAIN" not in slurm.see("h100x8-healthy")["State"]  # the wrapper's check remembers 8 GPUs
    node = slurm.see("no-gpu")
    assert "DRAIN" in node["State"], node
    assert node["Reason"].startswith("gpuhealth: GH101 no-nvidia-gpu impact=node_unusable"), node
    node = slurm.see("no-gpu", runs=2)  # and again: the memory is kept while the bus has none
    assert "DRAIN" in node["State"] and node["Reason"].startswith("gpuhealth: GH101"), node


@pytest.mark.parametrize("failure", ["gpuhealth missing", "option mistyped"])
def test_gpuhealth_missing_or_mistyped_drains_nothing_and_logs_an_error(slurm, failure):
    slurm.reset()
    if failure == "gpuhealth missing":
        node = slurm.see("h100x8-xid-ecc", gpuhealth=str(slurm.root / "no-such-gpuhealth"))
    else:
        node = slurm.see("h100x8-xid-ecc", "--gpu-cuont", "8")
    assert "DRAIN" not in node["State"], node  # the bundle holds a critical fault: nothing of it was judged
    assert "-p user.err" in slurm.syslog() and "left as it is" in slurm.syslog(), slurm.syslog()
    # nor does it resume a node gpuhealth drained: its failure says nothing about the node
    assert "DRAIN" in slurm.see("h100x8-xid-ecc")["State"]
    node = slurm.see("h100x8-healthy", gpuhealth=str(slurm.root / "no-such-gpuhealth"))
    assert "DRAIN" in node["State"] and node["Reason"].startswith("gpuhealth: GH301"), node


def test_a_healthy_run_resumes_only_nodes_gpuhealth_drained(slurm):
    slurm.reset()
    slurm.admin("state=drain", "reason=fan 3 noisy, replace on Tuesday")
    node = slurm.see("h100x8-healthy")
    assert "DRAIN" in node["State"] and node["Reason"].startswith("fan 3 noisy"), node  # the admin's stays
    slurm.admin("state=resume")
    assert "DRAIN" in slurm.see("h100x8-xid-ecc")["State"]
    node = slurm.see("h100x8-healthy")
    assert "DRAIN" not in node["State"] and node["State"].startswith("IDLE"), node
