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
- the request head (target and headers) is limited to ``MAX_HEADER_BYTES``: 431 past it.

A response in progress (an event stream, a running check) is never cut by these deadlines.
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Awaitable, Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEADER_BYTES = 16 * 1024
REQUEST_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5.0
MAX_CONNECTIONS = 512

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def guarded_protocol(request_timeout: float = REQUEST_TIMEOUT_S,
                     max_connections: int = MAX_CONNECTIONS) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a per-request deadline and eviction of waiting connections."""

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deadline: asyncio.TimerHandle | None = None
            self.opened = self.loop.time()
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

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedH11Protocol


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


def raise_open_file_limit(wanted: int = 8192) -> None:
    """Room for ``MAX_CONNECTIONS`` sockets plus the database and logs (the soft limit is often 1024)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        pass  # keep the limit we have; eviction still bounds the connections
