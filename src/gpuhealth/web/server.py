"""`gpuhealth serve`: the monitor's loop in a thread, the web app on uvicorn in the main thread.

The monitor is built exactly as `gpuhealth monitor` builds it (same config, rules, notifiers, history)
and then wrapped (see state.py), so alerts, history and webhooks behave the same in both commands.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuhealth.inert import one_line

from .security import allowed_hosts_for, is_loopback
from .state import LiveState, ServeChecks, StateNotifier, TeeSource

DEFAULT_LISTEN = "127.0.0.1:9835"
MIN_TOKEN_CHARS = 16


class ServeError(RuntimeError):
    """Cannot start: the message says why and what to do."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT``; ValueError when malformed."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = text.rpartition(":")
    if not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: give HOST:PORT, for example 127.0.0.1:9835 or [::1]:9835")
    return host, int(port_text)


def check_token(host: str, token: str | None) -> str | None:
    """The token to require, or ServeError: off loopback a token is mandatory."""
    if token is not None:
        token = token.strip()
        if len(token) < MIN_TOKEN_CHARS:
            raise ServeError(f"the token must have at least {MIN_TOKEN_CHARS} characters "
                             "(for example: openssl rand -hex 32)")
        return token
    if not is_loopback(host):
        raise ServeError(f"refusing to listen on {host} without a token: set GPUHEALTH_TOKEN or pass "
                         "--token-file FILE (clients then send `Authorization: Bearer <token>`), "
                         "or listen on 127.0.0.1")
    return None


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot resolve {host}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if host in ("::", "[::]") else 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                         + (" (another gpuhealth serve?)" if exc.errno == 98 else "")) from exc
    sock.set_inheritable(True)
    return sock


def bundle_check(path: Path, expect: Any = None) -> Callable[[], Any]:
    """The full check of a captured bundle instead of this host (``--check-from``: demos, replays), against
    ``expect`` (None: the configuration files' [check])."""

    def run() -> Any:
        from gpuhealth.bundle import BundleHost
        from gpuhealth.checks.engine import run_checks
        from gpuhealth.collect import collect
        from gpuhealth.config import load_expectations

        host = BundleHost(path)
        try:
            return run_checks(collect(host, origin="bundle", captured_at=host.captured_at),
                              load_expectations(None) if expect is None else expect)
        finally:
            host.close()

    return run


def wrap_monitor(mon: Any, source_spec: str, check: Callable[[], Any]) -> tuple[LiveState, ServeChecks]:
    """Attach a LiveState to a built Monitor (see state.py) and give it a check runner with "run now"."""
    state = LiveState(mon.interval, source=source_spec, held_mib=mon.rules.held_mib)
    mon.source = TeeSource(mon.source, state)
    mon.dispatcher.notifiers.append(StateNotifier(state))
    memory = mon.dispatcher.memory  # boots.FaultMemory: the reboot count for /metrics, the page and `fleet`
    if memory is not None:
        memory.listeners.append(state.set_remediations)
        state.set_remediations(memory.remediations)
        state.set_xids_paged(memory.xids_paged())  # paged before a restart: GpuhealthCheckFinding leaves them out
        memory.reset_listeners.append(state.set_gpu_resets)
        state.set_gpu_resets(memory.resets)
        memory.ack_listeners.append(state.set_acks)  # read by the monitor thread; the API asks it to read again
        state.acks_changed = lambda: setattr(memory, "acks_changed", True)
    every = mon.checks.every_s if mon.checks is not None else 0.0  # replay: on request only
    mon.checks = ServeChecks(every, check, state)
    return state, mon.checks


class _Server:
    """uvicorn's Server with our own signal handling: SIGTERM/SIGINT end the event streams at once
    (so shutdown does not wait for browsers) and do not re-raise after the clean exit."""

    def __init__(self, config: Any, on_exit: Callable[[], None]) -> None:
        import uvicorn

        outer = self

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                if threading.current_thread() is not threading.main_thread():
                    yield
                    return
                previous = {sig: signal.signal(sig, outer._exit) for sig in (signal.SIGINT, signal.SIGTERM)}
                try:
                    yield
                finally:
                    for sig, handler in previous.items():
                        signal.signal(sig, handler)

        self.server = Server(config)
        self._on_exit = on_exit

    def _exit(self, sig: int, frame: Any) -> None:
        if self.server.should_exit and sig == signal.SIGINT:
            self.server.force_exit = True
        self.server.should_exit = True
        self._on_exit()

    def run(self, sock: socket.socket) -> None:
        self.server.run(sockets=[sock])


def serve(listen: str, source_spec: str, db: Path | None, token: str | None, interval: str | None,
          check_every: str | None, config: Path | None, replay_speed: float, check_from: Path | None,
          check_period_s: float = 30.0, log: Callable[[str], None] | None = None,
          request_timeout: float | None = None, write_timeout: float | None = None, settings: Any = None) -> None:
    import functools

    import uvicorn

    from gpuhealth.monitor.commands import _build, describe
    from gpuhealth.monitor.daemon import run_full_check

    from .app import create_app
    from .guard import (
        KEEP_ALIVE_S,
        MAX_CONNECTIONS,
        MAX_HEADER_BYTES,
        REQUEST_TIMEOUT_S,
        WRITE_TIMEOUT_S,
        admit,
        guarded_protocol,
        limit_request_head,
        raise_open_file_limit,
    )

    say = log or (lambda text: print(one_line(f"gpuhealth serve: {text}"), file=sys.stderr, flush=True))
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise ServeError(f"--listen {exc}") from exc
    token = check_token(host, token)
    sock = bind(host, port)
    try:
        if settings is None:
            from gpuhealth.monitor.commands import _settings

            settings = _settings(config)
        mon = _build(config, interval, check_every, db, source_spec, None, replay_speed, settings=settings)
    except BaseException:
        sock.close()
        raise
    expect = settings.expectations()
    state, checks = wrap_monitor(mon, source_spec, bundle_check(check_from, expect) if check_from
                                 else functools.partial(run_full_check, expect))
    db_path = Path(mon.store.path) if mon.store is not None else None
    app = create_app(state, checks, db_path, token, allowed_hosts_for(host, port), check_period_s)
    stop = threading.Event()

    def sample() -> None:
        state.set_monitor(True, "sampling")
        try:
            mon.run(stop)
        except Exception as exc:  # the page says so; the web side stays up to show it
            say(f"monitor stopped: {type(exc).__name__}: {exc}")
            state.set_monitor(False, f"monitor stopped: {type(exc).__name__}: {exc}")
            return
        exhausted = getattr(mon.source, "exhausted", False)
        state.set_monitor(False, "replay finished" if exhausted else "stopped", replay_finished=bool(exhausted))

    def on_exit() -> None:
        stop.set()
        state.close_streams()

    raise_open_file_limit()
    # Idle and slow connections are closed by the guard (deadline, eviction past MAX_CONNECTIONS). uvicorn's
    # limit_concurrency counts idle connections too: set above MAX_CONNECTIONS, idle ones never reach it
    # and it bounds the requests in progress.
    # A client that stops reading is aborted at the write deadline; /metrics and /healthz keep slots of their
    # own among the requests in progress (admit), so event streams and stalled responses cannot take them.
    protocol = guarded_protocol(request_timeout or REQUEST_TIMEOUT_S, MAX_CONNECTIONS, write_timeout or WRITE_TIMEOUT_S)
    config_ = uvicorn.Config(admit(limit_request_head(app)), log_level="warning", access_log=False, server_header=False,
                             lifespan="on", http=protocol, ws="none", loop="asyncio", proxy_headers=False,
                             timeout_graceful_shutdown=3, limit_concurrency=MAX_CONNECTIONS + 64,
                             timeout_keep_alive=int(KEEP_ALIVE_S), h11_max_incomplete_event_size=MAX_HEADER_BYTES)
    server = _Server(config_, on_exit)
    thread = threading.Thread(target=sample, name="gpuhealth-monitor", daemon=True)
    thread.start()
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    say(f"listening on http://{shown}:{bound[1]}/ ({describe(mon)}; token "
        f"{'required' if token else 'not required: loopback only'})")
    import gc

    gc.freeze()  # everything loaded so far is long-lived: keep it out of the collector's full passes
    try:
        server.run(sock)
    finally:
        stop.set()
        thread.join(10)
        mon.close()
        sock.close()
