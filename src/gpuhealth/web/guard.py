"""Connection guards for `gpuhealth serve`: slow or idle clients cannot blind the monitoring.

uvicorn closes a keep-alive connection after ``timeout_keep_alive``, but has no deadline for a request
that never completes: a connection that sends nothing, or trickles a header a byte at a time, stays open
for ever, and with ``limit_concurrency`` every further request was answered 503. Here:

- every request must arrive whole (headers and body) within ``request_timeout`` of the connection opening
  or of the previous response, or the connection is closed;
- past ``max_connections``, the longest-idle connections are closed to make room, so a flood of idle
  connections cannot push out ``/metrics`` and ``/healthz``. Idle means no request has begun: a fresh
  connection, a keep-alive one between requests, one whose head is still arriving. A request whose
  head is in is never evicted, even while its body is still arriving (the application may be reading it);
  the request deadline bounds that;
- the request head (target and headers) is limited to ``MAX_HEADER_BYTES``: 431 past it;
- a write deadline: what we write must be taken by the kernel within ``write_timeout``, or the connection
  is aborted (not closed: a close waits for the unsent bytes, which a client that never reads never takes,
  so its descriptor stayed open for ever). The transport buffers nothing beyond what the kernel refuses
  (high-water mark 0), and the kernel's send buffer is capped at ``SEND_BUFFER_BYTES``, so a client that
  stops reading is found within seconds and holds little memory until then;
- ``admit``: at most ``MAX_REQUESTS`` requests in progress (event streams among them); ``/metrics`` and
  ``/healthz`` have ``PROBE_RESERVE`` more of their own, which nothing else can take.

A response in progress (an event stream, a running check) is never cut by the request deadlines; only the
write deadline ends it, when the client stops taking it.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEADER_BYTES = 16 * 1024
REQUEST_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5.0
MAX_CONNECTIONS = 512
WRITE_TIMEOUT_S = 10.0  # a client that takes none of what we sent for this long is cut off
SEND_BUFFER_BYTES = 128 * 1024  # the kernel's send buffer per connection (Linux doubles it)
MAX_REQUESTS = 256  # requests in progress, event streams included; more get 503
PROBE_PATHS = frozenset({"/metrics", "/healthz"})
PROBE_RESERVE = 64  # requests in progress for PROBE_PATHS on top of MAX_REQUESTS: theirs alone

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def guarded_protocol(request_timeout: float = REQUEST_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                     write_timeout: float = WRITE_TIMEOUT_S) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a per-request deadline, a write deadline and eviction of waiting
    connections."""

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deadline: asyncio.TimerHandle | None = None
            self._write_deadline: asyncio.TimerHandle | None = None
            self.opened = self.loop.time()
            _small_buffers(transport)
            self._arm()
            if len(self.connections) > max_connections:
                _evict(self.connections, len(self.connections) - max_connections, self)

        def _arm(self) -> None:
            self._disarm()
            self.waiting_since = self.loop.time()
            self._deadline = self.loop.call_later(request_timeout, self._expire)

        def _disarm(self) -> None:
            if getattr(self, "_deadline", None) is not None:
                self._deadline.cancel()  # type: ignore[union-attr]
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self.waiting() and not self.transport.is_closing():
                self.transport.close()

        def waiting(self) -> bool:
            """True while the client still owes (part of) a request: nothing of ours is in progress."""
            return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

        def idle(self) -> bool:
            """True while no request has begun (h11 has no complete request head): safe to evict."""
            return self.conn.their_state is h11.IDLE

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._disarm()  # the request is in: from here on the response is ours to make

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request gets the same deadline (keep-alive closes idle ones sooner)

        def pause_writing(self) -> None:
            """The kernel did not take all we wrote: it must within ``write_timeout``."""
            super().pause_writing()
            if self._write_deadline is None:
                self._write_deadline = self.loop.call_later(write_timeout, self._write_expired)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel_write_deadline()

        def _cancel_write_deadline(self) -> None:
            if getattr(self, "_write_deadline", None) is not None:
                self._write_deadline.cancel()  # type: ignore[union-attr]
                self._write_deadline = None

        def _write_expired(self) -> None:
            self._write_deadline = None
            self.transport.abort()  # drops the unsent bytes and the descriptor now; connection_lost follows

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._cancel_write_deadline()
            super().connection_lost(exc)

    return GuardedH11Protocol


def _small_buffers(transport: asyncio.Transport) -> None:
    """No user-space buffering beyond what the kernel refuses, and a bounded kernel send buffer: together
    they make a client that stops reading visible (``pause_writing``) after at most a few hundred KiB."""
    with contextlib.suppress(NotImplementedError, AttributeError, OSError):
        transport.set_write_buffer_limits(high=0)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


def _evict(connections: set[Any], count: int, newcomer: Any) -> None:
    """Close the ``count`` connections that have been idle longest (never one with a request begun)."""
    idle = sorted((c for c in connections if c is not newcomer and getattr(c, "idle", lambda: False)()),
                  key=lambda c: c.waiting_since)
    for connection in idle[:count]:
        if not connection.transport.is_closing():
            connection.transport.close()


def limit_request_head(app: Callable[[Scope, Receive, Send], Awaitable[None]],
                       limit: int = MAX_HEADER_BYTES) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """ASGI wrapper: 431 when the request target and headers together exceed ``limit`` bytes.

    h11's ``max_incomplete_event_size`` only bounds a head still arriving; one that comes whole in a
    single read is parsed whatever its size, so the documented limit is enforced here too.
    """

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + sum(
                len(name) + len(value) + 4 for name, value in scope.get("headers") or ())
            if size > limit:
                body = f"request headers larger than {limit} bytes\n".encode()
                await send({"type": "http.response.start", "status": 431,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def admit(app: Callable[[Scope, Receive, Send], Awaitable[None]], max_requests: int = MAX_REQUESTS,
          probe_reserve: int = PROBE_RESERVE) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """ASGI wrapper: 503 past ``max_requests`` requests in progress. ``/metrics`` and ``/healthz`` count
    apart, against ``probe_reserve`` of their own: a flood of event streams or slow requests cannot take
    the slots that monitoring needs."""
    busy = {"probe": 0, "other": 0}

    async def admitted(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        kind = "probe" if scope.get("path") in PROBE_PATHS else "other"
        if busy[kind] >= (probe_reserve if kind == "probe" else max_requests):
            body = b"too many requests in progress; try again shortly\n"
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"5"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        busy[kind] += 1
        try:
            await app(scope, receive, send)
        finally:
            busy[kind] -= 1

    admitted.busy = busy  # type: ignore[attr-defined]  # for tests
    return admitted


def raise_open_file_limit(wanted: int = 8192) -> None:
    """Room for ``MAX_CONNECTIONS`` sockets plus the database and logs (the soft limit is often 1024)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        pass  # keep the limit we have; eviction still bounds the connections
