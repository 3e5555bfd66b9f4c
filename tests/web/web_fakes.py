"""Helpers shared by the web tests: generated traces, a recorded test bundle, a real `gpuhealth serve`
in a subprocess, uvicorn in a thread, and the rule for missing tools (fail under CI, skip otherwise)."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS / "monitor") not in sys.path:  # monitor_fakes lives beside the monitor tests
    sys.path.insert(0, str(TESTS / "monitor"))

from monitor_fakes import NOTE, T0  # noqa: E402

from gpuhealth.monitor.sample import Event, Sample, XidEvent  # noqa: E402
from gpuhealth.monitor.sources import write_trace  # noqa: E402

REPO = TESTS.parent
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
GENERATED_BY = "tests/web/web_fakes.py"
# The PCI addresses of tests/hosts/h100x8-xid-ecc.json, so its bundle names these GPUs' model.
H100_PCI = ("0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
            "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0")
H100_MODEL = "NVIDIA H100 80GB HBM3"
NO_POWER_GPU = 5  # its samples carry no power reading (None): no series may appear for it
XID_GPU, XID = 3, 79


def expected(gpu: int) -> dict[str, float]:
    """The constant readings the fleet trace gives GPU ``gpu``."""
    return {"temperature_c": 50 + gpu, "utilization_gpu_pct": 50 + gpu, "memory_used_mib": 1000 * (gpu + 1),
            "power_w": 200 + 10 * gpu}


def fleet_events(gpus: int = 8, seconds: int = 900, t0: float = T0, moving: bool = False) -> list[Event]:
    """``gpus`` GPUs sampled every second for ``seconds``; constant readings (see ``expected``) unless
    ``moving`` (then temperature and utilisation wave a little); GPU 5 reports no power; GPU 3 logs
    Xid 79 two seconds in. Each GPU runs one process (pid 4000 + GPU) and names its model."""
    events: list[Event] = []
    for i in range(seconds):
        for gpu in range(gpus):
            want = expected(gpu)
            wave = (i % 7) if moving else 0
            events.append(Sample(
                t0 + i, gpu, pci_address=H100_PCI[gpu % 8], uuid=f"GPU-{gpu:08x}-test-0000-0000-000000000000",
                temperature_c=want["temperature_c"] + wave, utilization_gpu_pct=want["utilization_gpu_pct"] + wave,
                memory_used_mib=want["memory_used_mib"], memory_total_mib=81559,
                power_w=None if gpu == NO_POWER_GPU else want["power_w"], power_limit_w=700,
                ecc_volatile_corrected=0, ecc_volatile_uncorrected=0, process_count=1,
                process_memory_mib=want["memory_used_mib"] - 500, clock_event_reasons=0,
                remapped_rows_pending=False, temperature_slowdown_c=87, name=H100_MODEL,
                processes=((4000 + gpu, want["memory_used_mib"] - 500),)))
    if gpus > XID_GPU:
        events.append(XidEvent(t0 + 2.5, XID_GPU, XID))
    return sorted(events, key=lambda e: e.t)


def write_fleet_trace(path: Path, **kwargs: Any) -> Path:
    write_trace(path, fleet_events(**kwargs), GENERATED_BY, NOTE)
    return path


def record_bundle(out: Path, case: str = "h100x8-xid-ecc") -> Path:
    """A real bundle recorded from a test host (tests/hosts), for `serve --check-from`."""
    from gpuhealth.bundle import RecordingHost
    from gpuhealth.collect import collect
    from hostcases import FakeHost, load_spec

    recorder = RecordingHost(FakeHost(load_spec(case)), out, hostname="gpu-node-17")
    collect(recorder, captured_at="t")
    recorder.finish()
    return out


def tool(path: str) -> str:
    """The tool's path; without it: FAIL under CI (it must have been installed), otherwise skip."""
    found = path if os.path.isabs(path) and os.access(path, os.X_OK) else shutil.which(path)
    if found:
        return found
    reason = f"{path} not installed (Debian: prometheus, prometheus-alertmanager, chromium; .ci/run installs them)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A port free now. Another process may take it before the caller's child binds it: a child that cannot
    report the port it bound itself starts through ``start_on_a_free_port``, which retries."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_on_a_free_port(start: Any, log: Path, ready: Any, what: str, timeout: float = 30,
                         tries: int = 5) -> tuple[int, subprocess.Popen]:
    """(port, process) of a program that takes its listening port on the command line (Prometheus,
    Alertmanager): ``start(port)`` starts it, logging to ``log``; ``ready(port)`` says it answers. A port
    picked free and taken by another process before the child bound it ("address already in use" in the log,
    the child gone) is picked again, up to ``tries`` times; any other exit fails with the log's end."""
    for _ in range(tries):
        port = free_port()
        proc = start(port)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if ready(port):
                return port, proc
            time.sleep(0.2)
        if proc.poll() is None:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} to start on port {port}")
        text = log.read_text(errors="replace")
        if "address already in use" not in text:
            raise AssertionError(f"{what} exited with {proc.returncode}: {text[-2000:]}")
    raise AssertionError(f"{what}: {tries} free ports were each taken before it could bind them")


def daemon(stack: contextlib.ExitStack, command: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """A program logging to ``log``, stopped (then killed if need be) when ``stack`` closes, whatever happened."""
    handle = stack.enter_context(open(log, "w"))
    proc = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=cwd)
    stack.callback(stop_process, proc)
    return proc


def alertmanager_tool() -> str:
    """Alertmanager's path (Debian's name for it, which .ci/run installs, else upstream's), or skip (fail under CI)."""
    return shutil.which("alertmanager") or tool("prometheus-alertmanager")


def start_alertmanager(stack: contextlib.ExitStack, binary: str, config: Path, workdir: Path) -> int:
    """A real Alertmanager running ``config`` on a free loopback port, its data and log
    (alertmanager.log) in ``workdir``, no cluster; stopped when ``stack`` closes. Its port, once ready."""
    log = workdir / "alertmanager.log"
    port, _ = start_on_a_free_port(lambda port: daemon(stack, [
        binary, f"--config.file={config}", f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="], log, workdir),
        log, ready_on, "Alertmanager")
    return port


def start_prometheus(stack: contextlib.ExitStack, binary: str, config: Path, workdir: Path) -> int:
    """A real Prometheus running ``config`` on a free loopback port, its TSDB and log (prometheus.log) in
    ``workdir``; stopped when ``stack`` closes. Its port, once ready."""
    log = workdir / "prometheus.log"
    port, _ = start_on_a_free_port(lambda port: daemon(stack, [
        binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}"], log, workdir), log, ready_on, "Prometheus")
    return port


def ready_on(port: int) -> bool:
    """Prometheus or Alertmanager on this loopback port answers /-/ready."""
    import httpx2

    with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
        return prom_ready(client)


def stop_process(proc: subprocess.Popen, grace: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serve_process(tmp: Path, *args: str, env: dict[str, str] | None = None,
                  listen: str = "127.0.0.1:0") -> Iterator[str]:
    """`gpuhealth serve` (as ``python -m gpuhealth.web``) on ``listen`` (default: a free loopback port); yields
    its base URL once ``/healthz`` answers, and on leaving stops it with SIGTERM, which it must exit 0 on."""
    log = tmp / "serve.log"
    command = [sys.executable, "-m", "gpuhealth.web", "--listen", listen, "--db", str(tmp / "history.db"), *args]
    environment = {k: v for k, v in os.environ.items() if k != "GPUHEALTH_TOKEN"}
    environment.update(env or {})
    with open(log, "w") as handle:
        proc = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=environment, cwd=tmp)
    try:
        yield _started(proc, log, time.monotonic() + 30)
    finally:
        stop_process(proc)
    assert proc.returncode == 0, f"serve exited {proc.returncode} on SIGTERM:\n{log.read_text()}"


def _started(proc: subprocess.Popen, log: Path, deadline: float) -> str:
    """The base URL once the server answers: its "listening on" line comes before uvicorn's listen()."""
    while not (match := re.search(r"listening on (http://\S+/)", log.read_text())):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"serve did not start:\n{log.read_text()}")
        time.sleep(0.05)
    base = match[1].rstrip("/")
    while True:
        connection = http.client.HTTPConnection(urlsplit(base).netloc, timeout=2)  # no proxy from the environment
        try:
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return base
        except OSError:
            pass
        finally:
            connection.close()
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"serve did not answer /healthz:\n{log.read_text()}")
        time.sleep(0.1)


@contextlib.contextmanager
def app_in_thread(app: Any) -> Iterator[str]:
    """An ASGI app on a real uvicorn in a thread (loopback, free port): streaming responses need a
    real server (the TestClient waits for a response to end)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", http="h11", ws="none", loop="asyncio",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def prom_query(client: Any, expr: str) -> list[dict]:
    """One instant query against a real Prometheus (an ``httpx2.Client`` on its base URL): the result vector."""
    answer = client.get("/api/v1/query", params={"query": expr}).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def prom_ready(client: Any) -> bool:
    """Prometheus or Alertmanager answers /-/ready (False while it starts)."""
    import httpx2

    try:
        return client.get("/-/ready").status_code == 200
    except httpx2.HTTPError:
        time.sleep(0.2)
        return False


class Relay:
    """A loopback TCP address that stays bound for the whole test and forwards each connection to ``backend``
    (``host:port``), or closes it at once while ``backend`` is None. A node stopped and started again keeps
    its address this way without re-binding a port it released: another process may take a released port
    before the node binds it again (the e2e test's old race)."""

    def __init__(self) -> None:
        self.backend: str | None = None
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            backend = self.backend
            try:
                host, port = backend.rsplit(":", 1) if backend else ("", "0")
                upstream = socket.create_connection((host, int(port)), timeout=5) if backend else None
            except OSError:
                upstream = None
            if upstream is None:
                client.close()  # the node is down: the scrape fails
                continue
            upstream.settimeout(None)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:  # either side gone: both go, so the other pump ends too
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        self._thread.join(5)
