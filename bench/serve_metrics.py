"""Benchmark `gpuhealth serve`: /metrics latency and process RSS with 8 GPUs under 20 scrapes/s, and
sampling cadence with 50 concurrent event-stream clients.

Loopback only, bounded in count and time (about a minute). The GPUs come from a GENERATED trace (8
GPUs at 1 Hz, written to a temp directory with a header saying so) replayed in real time, so the
monitor, rules, history (SQLite) and web server all do their normal work.

    .venv/bin/python bench/serve_metrics.py [--seconds 30] [--rate 20] [--streams 50]

Goals (issue 6): p99 <= 5 ms, RSS <= 50 MiB for the whole process; sampling not slowed by 50 streams.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpuhealth.monitor.sample import Sample  # noqa: E402
from gpuhealth.monitor.sources import write_trace  # noqa: E402

GPUS = 8


def make_trace(path: Path, seconds: int) -> None:
    t0 = 1_700_000_000.0
    events = [Sample(t0 + i, g, pci_address=f"0000:{0x19 + 0x10 * g:02x}:00.0", uuid=f"GPU-bench-{g}",
                     temperature_c=50 + g + i % 5, power_w=300 + i % 11, power_limit_w=700,
                     utilization_gpu_pct=90 + i % 7, memory_used_mib=40000, memory_total_mib=81559,
                     sm_clock_mhz=1980, ecc_volatile_corrected=0, ecc_volatile_uncorrected=0,
                     process_count=1, process_memory_mib=39000, clock_event_reasons=0)
              for i in range(seconds) for g in range(GPUS)]
    write_trace(path, events, "bench/serve_metrics.py", "GENERATED for the benchmark: synthetic values")


def rss_mib(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    now = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024
    peak = int(re.search(r"VmHWM:\s+(\d+)", status)[1]) / 1024
    return now, peak


class RawClient:
    """A minimal HTTP/1.1 keep-alive GET client on a plain socket, so the load generator (on the same
    machine, sharing its cores) adds as little of its own time as possible to the latency measured."""

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").rsplit(":", 1)
        self.host = host
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def get(self, path: str) -> tuple[int, bytes]:
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        status = int(self.file.readline().split()[1])
        length = 0
        while (line := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, self.file.read(length)

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def scrape(base: str, seconds: float, rate: float) -> list[float]:
    """GET /metrics at ``rate`` per second (open loop, one keep-alive connection); latencies in ms."""
    out: list[float] = []
    client = RawClient(base)
    try:
        client.get("/metrics")
        start = time.perf_counter()
        for n in range(int(seconds * rate)):
            due = start + n / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            began = time.perf_counter()
            status, body = client.get("/metrics")
            out.append((time.perf_counter() - began) * 1000)
            assert status == 200 and b"gpuhealth_gpu_temperature_celsius{" in body
    finally:
        client.close()
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def stream_client(base: str, stop: threading.Event, gaps: list[float], counts: list[int]) -> None:
    last = None
    n = 0
    with httpx2.Client(base_url=base, timeout=httpx2.Timeout(5, read=30)) as client, \
            client.stream("GET", "/api/v1/events") as response:
        event = None
        for line in response.iter_lines():
            if stop.is_set():
                break
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "samples":
                t = json.loads(line[6:])["t"]
                if last is not None and t != last:
                    gaps.append(t - last)
                last = t
                n += 1
    counts.append(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="scrape phase length (max 120)")
    parser.add_argument("--rate", type=float, default=20.0, help="scrapes per second (max 100)")
    parser.add_argument("--streams", type=int, default=50, help="event-stream clients (max 100)")
    args = parser.parse_args()
    seconds, rate, streams = min(args.seconds, 120.0), min(args.rate, 100.0), min(args.streams, 100)

    with tempfile.TemporaryDirectory(prefix="gpuhealth-bench-") as tmp:
        trace = Path(tmp) / "trace.jsonl"
        make_trace(trace, int(2 * seconds + 120))
        log = Path(tmp) / "serve.log"
        with open(log, "w") as handle:
            proc = subprocess.Popen([sys.executable, "-m", "gpuhealth.web", "--listen", "127.0.0.1:0",
                                     "--source", f"replay:{trace}", "--db", str(Path(tmp) / "h.db")],
                                    stdout=handle, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not (match := re.search(r"listening on (http://\S+)/", log.read_text())):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start:\n{log.read_text()}")
                time.sleep(0.05)
            base = match[1]
            time.sleep(3)  # a few samples in
            idle_rss, _ = rss_mib(proc.pid)

            latencies = scrape(base, seconds, rate)
            rss, peak = rss_mib(proc.pid)
            print(f"/metrics, {GPUS} GPUs, {rate:g} scrapes/s for {seconds:g} s ({len(latencies)} scrapes):")
            p99 = percentile(latencies, 99)
            print(f"  latency p50 {statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms, "
                  f"max {max(latencies):.2f} ms (goal p99 <= 5 ms: {'met' if p99 <= 5 else 'MISSED'})")
            print(f"  RSS {rss:.1f} MiB (idle before scraping {idle_rss:.1f}), peak {peak:.1f} MiB "
                  f"(goal <= 50 MiB: {'met' if peak <= 50 else 'MISSED'})")

            # sampling cadence alone, then with `streams` event-stream clients, while scraping goes on
            for label, clients in (("1 stream", 1), (f"{streams} streams", streams)):
                stop = threading.Event()
                gaps: list[float] = []
                counts: list[int] = []
                threads = [threading.Thread(target=stream_client, args=(base, stop, gaps if i == 0 else [], counts),
                                            daemon=True) for i in range(clients)]
                for thread in threads:
                    thread.start()
                during = scrape(base, 15, rate)
                stop.set()
                for thread in threads:
                    thread.join(35)
                rss, peak = rss_mib(proc.pid)
                status = httpx2.get(f"{base}/api/v1/status").json()
                lag = time.time() - status["monitor"]["last_sample_t"]
                print(f"with {label} for 15 s: sample gap mean {statistics.mean(gaps):.3f} s, max {max(gaps):.3f} s "
                      f"(interval 1 s); batches per client min {min(counts)}; newest sample {lag:.2f} s old; "
                      f"/metrics p99 {percentile(during, 99):.2f} ms; RSS {rss:.1f} MiB, peak {peak:.1f} MiB")
        finally:
            proc.terminate()
            proc.wait(20)


if __name__ == "__main__":
    main()
