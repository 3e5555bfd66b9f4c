"""serve closes what it drops (issue 25, item 7): event-stream clients that never read.

Before: such a client was dropped from the fan-out, but its connection stayed open for ever (the
response sat blocked on a full socket, and a close waits for unsent bytes). Waves of them reached 587
open descriptors; /metrics and /healthz then answered 503. Here a real `gpuhealth serve` on loopback,
fed a 64-GPU trace fast enough that a stream carries about half a MB a second, meets waves of clients
that connect, ask for the stream and never read. Every loop is bounded; the server stops by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from web_fakes import _started, stop_process, write_fleet_trace

from gpuhealth.web import guard
from gpuhealth.web.state import MAX_STREAMS_PER_CLIENT

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")

WRITE_TIMEOUT = 2.0


@contextlib.contextmanager
def served(tmp: Path) -> Iterator[tuple[tuple[str, int], int]]:
    """((host, port), pid) of a real serve replaying a 64-GPU trace at 20x (a samples frame of ~40 KB every
    50 ms), with a 2 s write deadline."""
    trace = write_fleet_trace(tmp / "fleet.jsonl", gpus=64, seconds=900)
    log = tmp / "serve.log"
    command = [sys.executable, "-m", "gpuhealth.web", "--listen", "127.0.0.1:0", "--db", str(tmp / "h.db"),
               "--source", f"replay:{trace}", "--replay-speed", "20", "--interval", "0.05",
               "--write-timeout", str(WRITE_TIMEOUT)]
    env = {k: v for k, v in os.environ.items() if k != "GPUHEALTH_TOKEN"}
    with open(log, "w") as handle:
        proc = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    try:
        base = urlsplit(_started(proc, log, time.monotonic() + 60))
        yield (base.hostname, base.port), proc.pid
    finally:
        stop_process(proc)
    assert proc.returncode == 0, log.read_text()


def descriptors(pid: int) -> int:
    """The server's open sockets (its other descriptors, a database or a trace being read, come and go)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
    return count


def get(address: tuple[str, int], path: str) -> int:
    """One HTTP/1.0 GET on a fresh connection, read whole: the status."""
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def stream_status(address: tuple[str, int]) -> int:
    """Open the event stream, read its status line, hang up."""
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(1024)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ", 2)[1])


def never_reading(address: tuple[str, int]) -> socket.socket:
    """A client that asks for the event stream and never reads a byte of it (a tiny receive window)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.connect(address)
    sock.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    # the response has begun, so the server holds its slot; peeking consumes nothing (on a loaded machine the next
    # request could otherwise be taken before this one)
    sock.recv(1, socket.MSG_PEEK)
    return sock


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.1)


def test_waves_of_clients_that_never_read_are_cut_off_and_their_descriptors_released(tmp_path):
    with served(tmp_path) as (address, pid):
        assert stream_status(address) == 200  # a stream that is read works
        time.sleep(0.5)
        baseline = descriptors(pid)
        for wave in range(4):
            clients = [never_reading(address) for _ in range(MAX_STREAMS_PER_CLIENT)]
            try:
                # While they hold every slot this address has (until the write deadline, 2 s away at
                # the soonest), one more stream from the same address is refused (another address would
                # still get one), and the monitoring endpoints answer.
                assert stream_status(address) == 503, f"wave {wave}: past {MAX_STREAMS_PER_CLIENT} streams"
                wait_until(lambda: descriptors(pid) >= baseline + MAX_STREAMS_PER_CLIENT, 5, "the streams to open")
                assert get(address, "/metrics") == 200
                assert get(address, "/healthz") == 200
                # The write deadline aborts each one once its socket is full: descriptors come back without
                # the clients doing anything (they never close: the server must).
                wait_until(lambda: descriptors(pid) <= baseline, 30, f"wave {wave}'s descriptors to close")
                assert all(_reset_by_server(sock) for sock in clients)
            finally:
                for sock in clients:
                    sock.close()
            # The slot is given back when the stream's task ends, which can be a moment after its socket closed
            # (on a loaded machine the event loop runs that task later): wait for it, within a bound.
            wait_until(lambda: stream_status(address) == 200, 10, f"wave {wave}'s slots to come back")
        assert get(address, "/metrics") == 200 and get(address, "/healthz") == 200


def _reset_by_server(sock: socket.socket) -> bool:
    """The server ended the connection: reading what is buffered reaches a reset (cut at the write deadline)
    or the end (dropped from the fan-out, its response ended and the connection closed)."""
    sock.settimeout(2)
    try:
        for _ in range(10_000):  # at most ~40 MB of buffered stream, far more than a 4 KiB window holds
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


# --------------------------------------------------------------------------- the reserve for probes


def test_probes_keep_a_reserve_that_other_requests_cannot_take():
    """``admit``: with every general slot taken by requests that never end, /metrics and /healthz are still
    let in (up to their own reserve), everything else gets 503 with Retry-After."""
    release = asyncio.Event()

    async def app(scope, receive, send):
        if scope["path"] == "/api/v1/events":
            await release.wait()  # a stream that never ends on its own
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def scenario() -> dict[str, list[int]]:
        guarded = guard.admit(app, max_requests=3, probe_reserve=2)

        async def call(path: str) -> int:
            sent: list[dict] = []

            async def send(message):
                sent.append(message)

            async def receive():
                return {"type": "http.disconnect"}

            await guarded({"type": "http", "path": path}, receive, send)
            return sent[0]["status"]

        streams = [asyncio.create_task(call("/api/v1/events")) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert guarded.busy["other"] == 3
        out = {"status": [await call("/api/v1/status")], "probes": [await call("/metrics"), await call("/healthz")]}
        release.set()
        out["streams"] = list(await asyncio.gather(*streams))
        out["after"] = [await call("/api/v1/status")]
        return out

    assert asyncio.run(scenario()) == {"status": [503], "probes": [200, 200], "streams": [200, 200, 200],
                                       "after": [200]}


def test_a_stalled_write_aborts_the_transport_at_the_deadline():
    """The protocol's write deadline: paused writing for longer than ``write_timeout`` aborts (a close would
    wait for bytes the client never takes); resumed in time, nothing happens."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.aborted = self.closed = False
            self.limits: tuple | None = None

        def get_extra_info(self, name, default=None):
            return {"sockname": ("127.0.0.1", 9400), "peername": ("127.0.0.1", 50000)}.get(name, default)

        def set_write_buffer_limits(self, high=None, low=None):
            self.limits = (high, low)

        def is_closing(self) -> bool:
            return self.closed or self.aborted

        def close(self) -> None:
            self.closed = True

        def abort(self) -> None:
            self.aborted = True

        def write(self, data) -> None:
            pass

        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

    async def scenario() -> dict[str, object]:
        config = Config(app=lambda *a: None, lifespan="off", log_level="critical")
        config.load()
        protocol, state = guard.guarded_protocol(60.0, write_timeout=0.2), ServerState()
        stalled, slow = Transport(), Transport()
        first, second = protocol(config, state, {}), protocol(config, state, {})
        first.connection_made(stalled)
        second.connection_made(slow)
        first.pause_writing()
        second.pause_writing()
        await asyncio.sleep(0.1)
        second.resume_writing()  # took it in time
        await asyncio.sleep(0.3)
        out = {"stalled": stalled.aborted, "slow": slow.aborted, "limits": stalled.limits}
        for connection in (first, second):
            connection.connection_lost(None)
        return out

    assert asyncio.run(scenario()) == {"stalled": True, "slow": False, "limits": (0, None)}
