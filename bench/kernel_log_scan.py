"""Benchmark: gpuhealth's kernel-log scan against ``LC_ALL=C grep -cE 'NVRM|SXid|nvidia-nvswitch|: AER: '``.

The goal (from the issue): read + parse a 1 GB kernel log with rare Xid lines at >= 0.67x grep's
throughput on the same file. The log is generated once (deterministic, dmesg --time-format iso style,
varied non-NVIDIA lines, an Xid line about every 200k lines) and cached under bench/out/.

    python bench/kernel_log_scan.py                 # 1024 MB
    python bench/kernel_log_scan.py --size-mb 64    # quick run

Both tools are timed in the same run, best of --repeat, after one warm-up read (page cache).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuhealth.parsers.kernel_log import parse_kernel_log, parse_kernel_log_file  # noqa: E402

GOAL = 0.67
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
SXID = "nvidia-nvswitch{d}: SXid (PCI:0000:{bus}:00.0): 12028, Non-fatal, Link {d}{d} egress non-posted PRIV error"


def fill(template: str, rnd: random.Random) -> str:
    return template.format(
        h8=f"{rnd.getrandbits(32):08x}", h6=f"{rnd.getrandbits(24):06x}", h4=f"{rnd.getrandbits(16):04x}",
        d=rnd.randint(0, 9), n=rnd.randint(100, 9_999_999), bus=f"{rnd.choice(BUSES):02x}",
        port=rnd.randint(1024, 65535), epoch=rnd.randint(1_700_000_000, 1_800_000_000), ms=rnd.randint(100, 999),
    )


def generate(path: Path, size_mb: int) -> dict:
    """Write the log and return what it holds (lines, Xid lines, SXid lines)."""
    rnd = random.Random(20250117)
    bodies = [fill(rnd.choice(TEMPLATES), rnd) for _ in range(50_000)]
    target = size_mb * 1024 * 1024
    written = lines = xids = sxids = others = 0
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
            "other_grep_lines": others}


def best_of(repeat: int, run) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--no-in-memory", action="store_true", help="skip the read()+parse_kernel_log row")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"kernel-log-{args.size_mb}mb.log"
    meta_path = path.with_suffix(".json")
    if args.regenerate or not path.exists() or not meta_path.exists():
        print(f"generating {path} ...", flush=True)
        start = time.perf_counter()
        meta = generate(path, args.size_mb)
        meta_path.write_text(json.dumps(meta, indent=1))
        print(f"  {meta} in {time.perf_counter() - start:.1f} s", flush=True)
    meta = json.loads(meta_path.read_text())
    size_mb = meta["bytes"] / 1e6

    grep = shutil.which("grep")
    if grep is None:
        print("grep not found", file=sys.stderr)
        return 2
    env = dict(os.environ, LC_ALL="C")
    with open(path, "rb") as handle:  # warm the page cache for both tools
        while handle.read(64 * 1024 * 1024):
            pass

    def run_grep() -> int:
        done = subprocess.run([grep, "-cE", GREP_PATTERN, str(path)], env=env, capture_output=True, text=True,
                              check=True)
        return int(done.stdout)

    rows = []
    grep_s, grep_count = best_of(args.repeat, run_grep)
    rows.append((f"LC_ALL=C grep -cE '{GREP_PATTERN}'", grep_s))

    auto_s, log = best_of(args.repeat, lambda: parse_kernel_log_file(path))
    rows.append(("gpuhealth parse_kernel_log_file (auto workers)", auto_s))
    serial_s, serial_log = best_of(args.repeat, lambda: parse_kernel_log_file(path, workers=1))
    rows.append(("gpuhealth parse_kernel_log_file (workers=1)", serial_s))
    if not args.no_in_memory:
        def in_memory():
            return parse_kernel_log(path.read_bytes(), str(path), workers=1)
        memory_s, memory_log = best_of(args.repeat, in_memory)
        rows.append(("gpuhealth read_bytes() + parse_kernel_log (workers=1)", memory_s))
        assert memory_log.events == log.events

    # The scan must be right, not only fast.
    assert log.events == serial_log.events and log.lines_scanned == serial_log.lines_scanned
    assert log.lines_scanned == meta["lines"], (log.lines_scanned, meta["lines"])
    xid_events = [e for e in log.events if e.kind == "xid"]
    sxid_events = [e for e in log.events if e.kind == "sxid"]
    assert len(xid_events) == meta["xid_lines"], (len(xid_events), meta["xid_lines"])
    assert len(sxid_events) == meta["sxid_lines"], (len(sxid_events), meta["sxid_lines"])
    assert grep_count == meta["xid_lines"] + meta["sxid_lines"] + meta["other_grep_lines"], grep_count

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nfile: {path} ({size_mb:.0f} MB, {meta['lines']:,} lines, {meta['xid_lines']} Xid, "
          f"{meta['sxid_lines']} SXid lines); python {sys.version.split()[0]}, {cpus} CPUs; best of {args.repeat}\n")
    width = max(len(name) for name, _ in rows)
    print(f"| {'tool':<{width}} | seconds | MB/s | ratio vs grep | goal (>={GOAL}x) |")
    print(f"|{'-' * (width + 2)}|--------:|-----:|--------------:|:--------------:|")
    for name, seconds in rows:
        ratio = grep_s / seconds
        goal = "-" if name.startswith("LC_ALL") else ("met" if ratio >= GOAL else "missed")
        print(f"| {name:<{width}} | {seconds:7.3f} | {size_mb / seconds:4.0f} | {ratio:12.2f}x | {goal:^14} |")
    met = grep_s / auto_s >= GOAL
    print(f"\ngoal {'met' if met else 'MISSED'} by the default call (parse_kernel_log_file)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
