"""One ASGI middleware in front of everything: Host check, size limits, bearer token, same-origin POST,
and the security headers on every response. Pure ASGI (no per-request objects) so /metrics stays cheap.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 4096  # bytes: the only POST (run a check) takes no body at all
MAX_QUERY = 2048  # bytes of query string
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), usb=(), payment=()"),
)
# Paths anyone may fetch: the page and its assets hold no data; /healthz says only "ok" (probes).
PUBLIC_PATHS = frozenset({"/", "/healthz", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address; anything else (0.0.0.0, a name, a LAN address) is not."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name part of a Host header: ``[::1]:9835`` -> ``::1``, ``node:9835`` -> ``node``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


async def _reply(send: Send, status: int, error: str, extra: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    def __init__(self, app: ASGIApp, token: str | None = None, allowed_hosts: Iterable[str] | None = None,
                 max_body: int = MAX_BODY, max_query: int = MAX_QUERY) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        self.max_body = max_body
        self.max_query = max_query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = self._headers(send)
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.lower(), value)
        host = headers.get(b"host", b"").decode("latin-1")
        if self.allowed_hosts is not None and host_name(host) not in self.allowed_hosts:
            # A page on another site that resolved its name to 127.0.0.1 (DNS rebinding) lands here.
            await _reply(send, 421, "this server answers only to its own address (Host header refused)")
            return
        if len(scope.get("query_string", b"")) > self.max_query:
            await _reply(send, 414, f"query string longer than {self.max_query} bytes")
            return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > self.max_body
            except ValueError:
                await _reply(send, 400, "bad Content-Length")
                return
            if too_big:
                await _reply(send, 413, f"request body larger than {self.max_body} bytes")
                return
        elif b"transfer-encoding" in headers:
            body = await self._read_bounded(receive)
            if body is None:
                await _reply(send, 413, f"request body larger than {self.max_body} bytes")
                return
            receive = _replay(body, receive)
        path = scope.get("path", "")
        if self.token is not None and path not in PUBLIC_PATHS and not path.startswith(PUBLIC_PREFIXES):
            given = headers.get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self.token):
                await _reply(send, 401, "token required: send `Authorization: Bearer <token>`",
                             [(b"www-authenticate", b'Bearer realm="gpuhealth"')])
                return
        if scope.get("method", "GET") not in ("GET", "HEAD"):
            origin = headers.get(b"origin")
            if origin is not None and urlsplit(origin.decode("latin-1")).netloc.lower() != host.lower():
                await _reply(send, 403, "cross-origin request refused")
                return
        await self.app(scope, receive, send)

    async def _read_bounded(self, receive: Receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    @staticmethod
    def _headers(send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {key.lower() for key, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                if b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        return wrapped


def _replay(body: bytes, original: Receive) -> Receive:
    """The body read already, then the connection's own messages (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive


def allowed_hosts_for(host: str, port: int) -> frozenset[str] | None:
    """On loopback, only loopback names may appear in the Host header; elsewhere the token guards."""
    if not is_loopback(host):
        return None
    return frozenset({*LOOPBACK_NAMES, host.strip("[]").lower()})
