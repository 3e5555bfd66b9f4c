"""Benchmark: ``gpuhealth analyze`` on large kernel logs against the grep an engineer would type.

Two 1 GB logs (generated once, deterministic, dmesg --time-format iso style, cached under bench/out/,
never committed), each tool timed in the same run after a warm-up read, with its peak RSS (the process
tree's, from GNU time or wait4). The peer and gpuhealth run in turns (peer, gpuhealth, peer, ...; --repeat
pairs) so that load from other processes on a shared machine falls on both; the table shows the median of
each, the CPU seconds beside the wall time, and the ratio of the medians:

- quiet: varied non-NVIDIA lines, an Xid about every 200k lines. Peer: ``LC_ALL=C grep -cE
  'NVRM|SXid|nvidia-nvswitch|: AER: '``. Goal: gpuhealth >= 0.67x grep's speed.
- noisy: one line in five is NVRM assertion spam (``nvCheckOkFailedNoLog: Check failed: ...``, as a wedged
  driver writes it). Peer: ``grep -E 'NVRM|SXid' | sed | sort | uniq -c | sort -rn``. Goal: at least
  as fast (>= 1.0x).
- both, and the quiet log gzipped: peak RSS <= 200 MB.

gpuhealth runs through its command line (``gpuhealth analyze LOG --format json``), as a user runs it.

    python bench/kernel_log_scan.py                 # 1024 MB logs
    python bench/kernel_log_scan.py --size-mb 64    # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

GOAL = 0.67
NOISY_GOAL = 1.0
RSS_GOAL_MB = 200
GREP_PATTERN = "NVRM|SXid|nvidia-nvswitch|: AER: "  # the scan's needles (AER: since GH703)
XID_EVERY = 200_000  # lines
SXID_EVERY = 2_000_000
BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)  # GPU bus numbers of an 8-GPU HGX board

# Ordinary kernel lines of a busy GPU node (Kubernetes, RDMA NICs, NVMe, containers).
TEMPLATES = (
    "IPv6: ADDRCONF(NETDEV_CHANGE): cali{h8}: link becomes ready",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    "cni0: port {d}(veth{h8}) entered blocking state",
    "cni0: port {d}(veth{h8}) entered forwarding state",
    "device veth{h8} entered promiscuous mode",
    "device veth{h8} left promiscuous mode",
    'audit: type=1400 audit({epoch}.{ms}:{n}): apparmor="DENIED" operation="open" profile="cri-containerd.apparmor.d" '
    'name="/proc/{n}/mounts" pid={n} comm="runc" requested_mask="r" denied_mask="r" fsuid=0 ouid=0',
    "mlx5_core 0000:{bus}:00.{d}: mlx5_cmd_out_err:{n}: QUERY_VPORT_STATE(0x50) op_mod(0x0) failed, status bad "
    "parameter(0x3), syndrome (0x{h6}), err(-22)",
    "mlx5_core 0000:{bus}:00.{d}: Port module event: module {d}, Cable plugged",
    "EXT4-fs (nvme{d}n1p{d}): mounted filesystem with ordered data mode. Quota mode: none.",
    "XFS (dm-{d}): Mounting V5 Filesystem",
    "nvme nvme{d}: I/O {n} QID {d} timeout, completion polled",
    "TCP: request_sock_TCP: Possible SYN flooding on port {port}. Sending cookies.  Check SNMP counters.",
    "pt_main_thread[{n}]: segfault at 7f{h8} ip 00007f{h8} sp 00007f{h8} error 4 in libc.so.6[7f{h8}+195000]",
    "python3[{n}]: segfault at 0 ip 00007f{h8} sp 00007ffd{h8} error 6 in libtorch_cuda.so[7f{h8}+5a3c000]",
    "perf: interrupt took too long ({n} > {n}), lowering kernel.perf_event_max_sample_rate to {n}",
    "kauditd_printk_skb: {d} callbacks suppressed",
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-{h8}{h8}.scope,mems_allowed=0-1,"
    "oom_memcg=/kubepods.slice/kubepods-burstable.slice,task=python3,pid={n},uid=0",
    "Memory cgroup out of memory: Killed process {n} (python3) total-vm:{n}kB, anon-rss:{n}kB, file-rss:{n}kB",
    "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing",
    "infiniband mlx5_{d}: mlx5_ib_add_gid:{n}: add gid ok",
    "igb 0000:{bus}:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex, Flow Control: RX/TX",
    "usb 1-{d}: new high-speed USB device number {d} using xhci_hcd",
    "scsi {d}:0:0:0: Direct-Access     ATA      SAMSUNG MZ7LH960 904Q PQ: 0 ANSI: 5",
    "systemd-journald[{n}]: /var/log/journal/{h8}/system.journal: Journal file corrupted, rotating.",
    "overlayfs: upperdir is in-use as upperdir/workdir of another mount, accessing files from both mounts will "
    "result in undefined behavior.",
    "docker0: port {d}(veth{h8}) entered disabled state",
    "hrtimer: interrupt took {n} ns",
    "EDAC skx MC{d}: HANDLING MCE MEMORY ERROR",
    "ACPI: \\_SB_.PC{d}{d}: _OSC: platform does not support [AER]",
)
XIDS = (
    "NVRM: Xid (PCI:0000:{bus}:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
    "(GPC {d}, TPC {d}, SM 0): Out Of Range Address",
    "NVRM: Xid (PCI:0000:{bus}:00): 31, pid={n}, name=python3, Ch 0000000{d}, intr 00000000. MMU Fault: ENGINE "
    "GRAPHICS GPCCLIENT_T1_{d} faulted @ 0x7f_{h8}. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    "NVRM: Xid (PCI:0000:{bus}:00): 43, pid={n}, name=pt_main_thread, Ch 00000008",
    "NVRM: Xid (PCI:0000:{bus}:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x0000000{h8}) "
    "marked for remapping, reset gpu to activate.",
    "NVRM: Xid (PCI:0000:{bus}:00): 94, pid={n}, name=python3, Ch 0000000{d}",
    "NVRM: Xid (PCI:0000:{bus}:00): 119, pid={n}, name=nvidia-smi, Timeout after 6s of waiting for RPC response "
    "from GPU{d} GSP! Expected function 76 (GSP_RM_CONTROL) (0x20803032 0x58c).",
)
OTHER_HITS = (  # lines grep counts that are not events
    "nvidia-nvswitch{d}: open (major=510)",
    "NVRM: GPU at PCI:0000:{bus}:00: GPU-{h8}-{h4}-{h4}-{h4}-{h8}{h4}",
    "NVRM: GPU Board Serial Number: 16501240{n}",
)
# What a wedged driver writes, a few call sites over and over (one line in NOISY_EVERY).
NOISY_EVERY = 5
SPAM = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Call timed out [NV_ERR_TIMEOUT] (0x00000065) returned from "
    "pRmApi->Control(pRmApi, RES_GET_CLIENT_HANDLE(pSubdevice), RES_GET_HANDLE(pSubdevice), "
    "NV2080_CTRL_CMD_{call}, &params, sizeof(params)) @ {file}.c:{line}",
    "NVRM: nvCheckOkFailedNoLog: Check failed: Generic Error: Invalid state [NV_ERR_INVALID_STATE] (0x00000040) "
    "returned from kbusSendSysmembar(pGpu, pKernelBus) @ kern_bus_gh100.c:{line}",
    "NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) "
    "returned from _kgspRpcSendMessage(pGpu, pKernelGsp, pRpc) @ kernel_gsp.c:{line}",
)
SPAM_CALLS = ("BUS_GET_PCIE_INFO", "GPU_GET_ENGINES_V2", "FB_GET_INFO_V2", "MC_GET_ARCH_INFO", "PERF_BOOST")
SPAM_FILES = ("rs_client", "rmapi_utils", "kern_bus_gh100", "mem_mgr", "kern_perf")
SXID = "nvidia-nvswitch{d}: SXid (PCI:0000:{bus}:00.0): 12028, Non-fatal, Link {d}{d} egress non-posted PRIV error"


def fill(template: str, rnd: random.Random) -> str:
    return template.format(
        h8=f"{rnd.getrandbits(32):08x}", h6=f"{rnd.getrandbits(24):06x}", h4=f"{rnd.getrandbits(16):04x}",
        d=rnd.randint(0, 9), n=rnd.randint(100, 9_999_999), bus=f"{rnd.choice(BUSES):02x}",
        port=rnd.randint(1024, 65535), epoch=rnd.randint(1_700_000_000, 1_800_000_000), ms=rnd.randint(100, 999),
    )


def spam(rnd: random.Random) -> str:
    return rnd.choice(SPAM).format(call=rnd.choice(SPAM_CALLS), file=rnd.choice(SPAM_FILES),
                                   line=rnd.choice((412, 1288, 2067, 3015)))


def generate(path: Path, size_mb: int, noisy: bool = False) -> dict:
    """Write the log and return what it holds (lines, Xid lines, SXid lines, spam lines)."""
    rnd = random.Random(20250117)
    spams = [spam(rnd) for _ in range(200)]
    bodies = [fill(rnd.choice(TEMPLATES), rnd) for _ in range(50_000)]
    target = size_mb * 1024 * 1024
    written = lines = xids = sxids = others = spam_lines = 0
    clock = 1_737_128_175.0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="ascii", newline="\n") as out:
        batch: list[str] = []
        while written < target:
            lines += 1
            clock += rnd.expovariate(200.0)
            if lines % XID_EVERY == XID_EVERY // 2:
                body = fill(rnd.choice(XIDS), rnd)
                xids += 1
            elif lines % SXID_EVERY == SXID_EVERY // 3:
                body = fill(SXID, rnd)
                sxids += 1
            elif lines % 50_021 == 0:
                body = fill(rnd.choice(OTHER_HITS), rnd)
                others += 1
            elif noisy and lines % NOISY_EVERY == 0:
                body = spams[rnd.getrandbits(16) % len(spams)]
                spam_lines += 1
            else:
                body = bodies[rnd.getrandbits(16) % len(bodies)]
            seconds = int(clock)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
            line = f"{stamp},{int((clock - seconds) * 1e6):06d}+00:00 {body}\n"
            batch.append(line)
            written += len(line)
            if len(batch) >= 20_000:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))
    tmp.replace(path)
    return {"bytes": path.stat().st_size, "lines": lines, "xid_lines": xids, "sxid_lines": sxids,
            "other_grep_lines": others, "spam_lines": spam_lines}


def timed(argv: list[str] | str, env: dict[str, str]) -> tuple[float, float, int, float]:
    """(seconds, peak RSS in MB of the process tree, exit code, CPU seconds of the tree) of one run.

    The RSS comes from GNU time when present: a child forked from this (larger) Python process would
    otherwise report this process's size as its own peak.
    """
    command = ["sh", "-c", argv] if isinstance(argv, str) else argv
    gnu_time = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    # Output to a real file: GNU grep stops at the first match when its output is /dev/null.
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss, tempfile.TemporaryFile() as output:
        if gnu_time:
            command = [gnu_time, "-f", "%U %S %M", "-o", rss.name, *command]
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        text = rss.read().strip().splitlines()
    fields = text[-1].split() if gnu_time and text else []
    if len(fields) == 3:
        cpu, kilobytes = float(fields[0]) + float(fields[1]), int(fields[2])
    else:
        cpu, kilobytes = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    return seconds, kilobytes / 1024, os.waitstatus_to_exitcode(status), cpu


def paired(repeat: int, peer: list[str] | str, ours: list[str] | str, env: dict[str, str]
           ) -> tuple[list[tuple[float, float, int, float]], list[tuple[float, float, int, float]]]:
    """``repeat`` runs of each, in turns: (seconds, peak RSS MB, exit code, CPU seconds) per run."""
    runs: tuple[list, list] = ([], [])
    for _ in range(repeat):
        for side, argv in enumerate((peer, ours)):
            runs[side].append(timed(argv, env))
    return runs


def ensure(path: Path, size_mb: int, noisy: bool, regenerate: bool) -> dict:
    meta_path = path.with_suffix(".json")
    if regenerate or not path.exists() or not meta_path.exists():
        print(f"generating {path} ...", flush=True)
        start = time.perf_counter()
        meta = generate(path, size_mb, noisy)
        meta_path.write_text(json.dumps(meta, indent=1))
        print(f"  {meta} in {time.perf_counter() - start:.1f} s", flush=True)
    with open(path, "rb") as handle:  # warm the page cache for every tool
        while handle.read(64 * 1024 * 1024):
            pass
    return json.loads(meta_path.read_text())


def verify(path: Path, meta: dict) -> None:
    """The scan must be right, not only fast: what the analyze path reads matches what was generated."""
    from gpuhealth.evidence_input import read_evidence

    log = read_evidence(str(path)).kernel_log
    assert log is not None, "a large kernel log must be scanned as a stream"
    assert log.lines_scanned == meta["lines"], (log.lines_scanned, meta["lines"])
    counts: dict[str, int] = {}
    for group in log.groups:
        counts[group.kind] = counts.get(group.kind, 0) + group.count
    assert counts.get("xid", 0) == meta["xid_lines"], (counts, meta)
    assert counts.get("sxid", 0) == meta["sxid_lines"], (counts, meta)
    assert counts.get("other", 0) >= meta.get("spam_lines", 0) // 2, counts  # spam is chatter (or a folded repeat)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each tool (in turns)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--no-gzip", action="store_true", help="skip the gzipped-log RSS row")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    gpuhealth = str(Path(sys.executable).parent / "gpuhealth")
    if not Path(gpuhealth).exists():
        gpuhealth = shutil.which("gpuhealth") or "gpuhealth"
    env = dict(os.environ, LC_ALL="C")
    quiet = args.out / f"kernel-log-{args.size_mb}mb.log"
    noisy = args.out / f"kernel-log-noisy-{args.size_mb}mb.log"
    quiet_meta = ensure(quiet, args.size_mb, False, args.regenerate)
    noisy_meta = ensure(noisy, args.size_mb, True, args.regenerate)
    verify(quiet, quiet_meta)
    verify(noisy, noisy_meta)
    load_before = os.getloadavg()[0]

    rows: list[tuple[str, str, float, float, float, float | None, str]] = []  # case, tool, s, CPU s, MB, ratio
    ratios: dict[str, float] = {}
    peak: dict[str, float] = {}

    def case(name: str, peer_name: str, peer: list[str] | str, ours: list[str] | str, goal: str,
             repeat: int = args.repeat) -> None:
        peer_runs, our_runs = paired(repeat, peer, ours, env)
        failed = [r[2] for r in our_runs if r[2] not in (0, 1, 2)]
        assert not failed, f"gpuhealth exited {failed} on the {name} log"
        peer_s = statistics.median(r[0] for r in peer_runs)
        our_s = statistics.median(r[0] for r in our_runs)
        ratios[name], peak[name] = peer_s / our_s, max(r[1] for r in our_runs)
        rows.append((name, peer_name, peer_s, statistics.median(r[3] for r in peer_runs),
                     max(r[1] for r in peer_runs), None, ""))
        rows.append((name, "gpuhealth analyze LOG", our_s, statistics.median(r[3] for r in our_runs), peak[name],
                     ratios[name], goal))

    case("quiet", f"LC_ALL=C grep -cE '{GREP_PATTERN}'", ["grep", "-cE", GREP_PATTERN, str(quiet)],
         [gpuhealth, "analyze", str(quiet), "--format", "json"], f">= {GOAL}x")
    pipeline = (f"grep -E 'NVRM|SXid' {noisy} | sed -E 's/^[^ ]+ //' | sort | uniq -c | sort -rn")
    case("noisy", "grep -E 'NVRM|SXid' | sed | sort | uniq -c | sort -rn", pipeline,
         [gpuhealth, "analyze", str(noisy), "--format", "json"], f">= {NOISY_GOAL}x")
    if not args.no_gzip:
        gz = quiet.with_name(quiet.name + ".gz")
        if not gz.exists() or gz.stat().st_mtime < quiet.stat().st_mtime:
            print(f"compressing {gz} ...", flush=True)
            subprocess.run(f"gzip -1 -c {quiet} > {gz}.tmp && mv {gz}.tmp {gz}", shell=True, check=True)
        case("quiet .gz", f"zcat | grep -cE '{GREP_PATTERN}'", f"zcat {gz} | grep -cE '{GREP_PATTERN}'",
             [gpuhealth, "analyze", str(gz), "--format", "json"], "RSS only", repeat=1)

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nquiet: {quiet} ({quiet_meta['bytes'] / 1e6:.0f} MB, {quiet_meta['lines']:,} lines, "
          f"{quiet_meta['xid_lines']} Xid); noisy: {noisy} ({noisy_meta['bytes'] / 1e6:.0f} MB, "
          f"{noisy_meta['spam_lines']:,} spam lines); python {sys.version.split()[0]}, {cpus} CPUs; "
          f"median of {args.repeat} runs each, in turns; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after\n")
    width = max(len(r[1]) for r in rows)
    print(f"| log | {'tool':<{width}} | seconds | CPU s | peak RSS MB | ratio vs peer | goal |")
    print(f"|-----|{'-' * (width + 2)}|--------:|------:|------------:|--------------:|------|")
    for log_name, name, seconds, cpu, rss, ratio, goal in rows:
        shown = f"{ratio:.2f}x" if ratio is not None else "-"
        print(f"| {log_name} | {name:<{width}} | {seconds:7.2f} | {cpu:5.2f} | {rss:11.0f} | {shown:>13} | {goal} |")
    met = {
        f"quiet speed >= {GOAL}x grep": ratios["quiet"] >= GOAL,
        f"noisy speed >= {NOISY_GOAL}x the pipeline": ratios["noisy"] >= NOISY_GOAL,
        f"peak RSS <= {RSS_GOAL_MB} MB": max(peak.values()) <= RSS_GOAL_MB,
    }
    print()
    for goal, ok in met.items():
        print(f"goal {goal}: {'met' if ok else 'MISSED'}")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
