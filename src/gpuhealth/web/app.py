"""The Starlette application: the page, /metrics, the JSON API and the event stream, over a ``LiveState``.

``create_app`` takes everything it serves as arguments (state, check runner, history path, token), so
tests build it around fakes and ``server.py`` around a running monitor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gpuhealth import __version__
from gpuhealth.monitor.config import parse_duration
from gpuhealth.monitor.sample import resolve_metric

from . import openapi
from .metrics import make_registry
from .security import Guard
from .state import CHART_METRICS, LiveState, TooManyStreams, sse_frame

STATIC = Path(__file__).parent / "static"
MIN_RANGE_S = 60.0
MAX_RANGE_S = 30 * 86400.0
MAX_METRICS = 8
KEEPALIVE_S = 15.0


class RateLimit:
    """At most one action per ``period`` seconds, for everyone (one host, one check at a time)."""

    def __init__(self, period: float, clock: Any = time.monotonic) -> None:
        self.period = period
        self.clock = clock
        self._last = -math.inf
        self._lock = threading.Lock()

    def take(self) -> float:
        """0 when allowed (and counted), else the seconds left to wait."""
        with self._lock:
            now = self.clock()
            left = self._last + self.period - now
            if left > 0:
                return left
            self._last = now
            return 0.0


class History:
    """Chart data: the live window in memory when it covers the range, else the monitor's SQLite
    history through a read connection of its own (WAL lets it read while the monitor writes)."""

    def __init__(self, state: LiveState, db: Path | None) -> None:
        self.state = state
        self.db = db
        self._store: Any = None
        self._lock = threading.Lock()

    def series(self, gpu: int, metric: str, since: float, until: float) -> dict[str, Any]:
        window = self.state.window(gpu, metric, since)
        if window is not None:
            return {"gpu": gpu, "metric": metric, "resolution": "raw", "t": window[0], "v": window[1]}
        store = self._open()
        if store is None:
            window = self.state.window(gpu, metric, -math.inf) if metric in CHART_METRICS else ([], [])
            t, v = window or ([], [])
            return {"gpu": gpu, "metric": metric, "resolution": "raw", "t": t, "v": v,
                    "note": "no history database: only what this process sampled"}
        from gpuhealth.monitor.store import StoreError

        try:
            with self._lock:
                found = store.series(gpu, metric, since, until)
        except StoreError as exc:
            return {"gpu": gpu, "metric": metric, "resolution": "raw", "t": [], "v": [], "note": str(exc)}
        out: dict[str, Any] = {"gpu": gpu, "metric": metric, "resolution": found.resolution,
                               "t": [p[0] for p in found.points], "v": [p[2] for p in found.points]}
        if found.resolution == "minute":
            out["min"] = [p[1] for p in found.points]
            out["max"] = [p[3] for p in found.points]
        return out

    def _open(self) -> Any:
        if self.db is None:
            return None
        with self._lock:
            if self._store is None and self.db.exists():
                from gpuhealth.monitor.store import Store, StoreError

                try:
                    self._store = Store(self.db)
                except StoreError:
                    return None
            return self._store

    def acknowledge(self, body: dict[str, Any]) -> str:
        """POST /api/v1/ack's work, as `gpuhealth ack` does it: ValueError for a bad request, RuntimeError when
        there is no history to write to."""
        from gpuhealth.monitor import acks
        from gpuhealth.monitor.store import StoreError

        store = self._open()
        if store is None:
            raise RuntimeError("no history database: acknowledgements are kept there (pass --db)")
        gpu = body.get("gpu")
        if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu <= 1023):
            raise ValueError("gpu must be a GPU index (0-1023) or absent")
        if not isinstance(body.get("code"), str):
            raise ValueError("code is required: GH302, xid:79 or a rule")
        code = acks.normalize(body["code"])
        now = time.time()
        try:
            with self._lock:
                if body.get("clear") is True:
                    gone = store.clear_ack(code, gpu)
                    return f"cleared {code}" if gone else f"no acknowledgement of {code}"
                until = body.get("until")
                if until is not None and not isinstance(until, str):
                    raise ValueError("until must be a duration (8h) or an ISO time, or absent")
                reason = body.get("reason")
                stamp = acks.parse_until(until, now) if until else None
                store.add_ack(code, gpu, stamp, acks.check_reason(reason if isinstance(reason, str) else ""), now)
                return f"acknowledged {code} {acks.shown_time(stamp)}"
        except StoreError as exc:
            raise RuntimeError(str(exc)) from exc

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def _error(status: int, text: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": text}, status_code=status, headers=headers)


def create_app(state: LiveState, checks: Any = None, db: Path | None = None, token: str | None = None,
               allowed_hosts: Any = None, check_period_s: float = 30.0, check_wait_s: float = 60.0,
               max_body: int = 4096) -> Starlette:
    registry = make_registry(state)
    history = History(state, db)
    limiter = RateLimit(check_period_s)
    index = (STATIC / "index.html").read_bytes()

    async def page(request: Request) -> Response:
        return Response(index, media_type="text/html; charset=utf-8")

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def favicon(request: Request) -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def status(request: Request) -> Response:
        return JSONResponse(state.status())

    async def gpus(request: Request) -> Response:
        return JSONResponse({"gpus": await run_in_threadpool(state.gpus)})  # it reads /proc

    async def alerts(request: Request) -> Response:
        return JSONResponse(state.alerts())

    async def findings(request: Request) -> Response:
        return JSONResponse(state.findings())

    async def spec(request: Request) -> Response:
        return JSONResponse(openapi.document(__version__))

    async def history_view(request: Request) -> Response:
        query = request.query_params
        try:
            span = parse_duration(query.get("range", "15m"))
        except ValueError as exc:
            return _error(400, f"range: {exc}")
        if not MIN_RANGE_S <= span <= MAX_RANGE_S:
            return _error(400, "range must be between 1m and 30d")
        names = [n.strip() for n in query.get("metric", "").split(",") if n.strip()] or list(CHART_METRICS)
        if len(names) > MAX_METRICS:
            return _error(400, f"at most {MAX_METRICS} metrics at once")
        try:
            metrics_wanted = list(dict.fromkeys(resolve_metric(n) for n in names))
        except ValueError as exc:
            return _error(400, f"metric: {exc}")
        if "gpu" in query:
            raw = query["gpu"]
            if not raw.isdigit() or int(raw) > 1023:
                return _error(400, "gpu must be a GPU index (0-1023)")
            gpu_list = [int(raw)]
        else:
            gpu_list = state.gpu_indices()
        until = state.clock()
        since = until - span

        def load() -> list[dict[str, Any]]:
            return [history.series(g, m, since, until) for g in gpu_list for m in metrics_wanted]

        series = await run_in_threadpool(load)
        return JSONResponse({"range_s": span, "since": since, "until": until, "series": series})

    async def run_check(request: Request) -> Response:
        if checks is None:
            return _error(503, "no full check available in this process")
        wait = limiter.take()
        if wait > 0:
            return _error(429, f"a check ran less than {check_period_s:g} s ago; try again in {math.ceil(wait)} s",
                          {"Retry-After": str(math.ceil(wait))})
        generation = state.check_generation
        checks.run_now()  # False: one is running already (the periodic one): its result is ours too
        deadline = time.monotonic() + check_wait_s
        while state.check_generation == generation and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        done = state.check_generation != generation
        return JSONResponse(state.findings(), status_code=200 if done else 202)

    async def acknowledge(request: Request) -> Response:
        # An acknowledgement holds pages back: never without a token, even on loopback.
        if token is None:
            return _error(403, "acknowledging needs serve started with a token (GPUHEALTH_TOKEN or --token-file)")
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object: {\"code\": ..., \"reason\": ...}")
        try:
            text = await run_in_threadpool(history.acknowledge, body)
        except ValueError as exc:
            return _error(400, str(exc))
        except RuntimeError as exc:
            return _error(503, str(exc))
        state.acks_changed()
        return JSONResponse({"result": text})

    async def events(request: Request) -> Response:
        client = request.client.host if request.client else ""
        try:
            queue = state.subscribe(client)
        except TooManyStreams as exc:
            return _error(503, str(exc), {"Retry-After": "10"})

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 3000\n\n"
                yield sse_frame("status", state.status())
                yield sse_frame("samples", {"t": state.last_sample_t, "gpus": await run_in_threadpool(state.gpus)})
                while True:
                    try:
                        frame = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except asyncio.TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if frame is None:  # shutting down, or this client fell behind: it reconnects
                        return
                    yield frame
            finally:
                state.unsubscribe(queue, client)  # the slot is held until the response ends, not when dropped

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.attach_loop(asyncio.get_running_loop())
        try:
            yield
        finally:
            state.attach_loop(None)
            history.close()

    routes = [
        Route("/", page),
        Route("/healthz", healthz),
        Route("/favicon.ico", favicon),
        Route("/metrics", metrics),
        Route("/api/v1/status", status),
        Route("/api/v1/gpus", gpus),
        Route("/api/v1/history", history_view),
        Route("/api/v1/alerts", alerts),
        Route("/api/v1/findings", findings),
        Route("/api/v1/check", run_check, methods=["POST"]),
        Route("/api/v1/ack", acknowledge, methods=["POST"]),
        Route("/api/v1/events", events),
        Route("/api/v1/openapi.json", spec),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(Guard, token=token, allowed_hosts=allowed_hosts, max_body=max_body)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.history = history
    app.state.limiter = limiter
    return app
