"""GET /metrics: the server's counters in the Prometheus text format (the prometheus_client library).

    metrics = Metrics(state)                   # one registry per server (never the global one)
    Middleware(Counted, metrics=metrics)       # counts every request (HTTP and the socket)
    Route("/metrics", metrics.endpoint)

What it exports (names prefixed `omnivoice_`):
- `requests_total{endpoint, status}`: requests answered, by endpoint (a fixed set of names, so
  a client cannot make new series: speech, script, voices, models, schema, health, metrics, ws,
  page, elevenlabs (ElevenLabs' routes and sockets: server/elevenlabs/), other) and HTTP status (101 for an accepted socket);
- `request_seconds{endpoint}`: a histogram of the time to answer, arrival to last byte;
- `engine_open_requests` (what /health calls `generating`: in the engine, generating or
  waiting, what --max-queue bounds), `engine_active_jobs`, `engine_waiting_jobs` (pieces in the
  forward / waiting for a place: the queue's depth), `max_queue`;
- `forwards_total`, `packed_positions_total` (positions of all the forwards: their mean size is
  the ratio) and `forward_jobs` (a histogram of the jobs packed into each forward);
- `first_audio_seconds` and `generation_seconds`: histograms per engine request, from its
  submission to its first audio and to its last (any endpoint: speech, socket, script);
- `audio_seconds_total`: seconds of audio the engine made; `engine_requests_total{outcome}`
  (done, error);
- `model_loads_total`, `model_unloads` (--idle-unload), `model_load_seconds` (a histogram of
  each load, the first and every wake), `model_loaded` (1 loaded, 0 asleep or loading),
  `resident_bytes_before_load` (the process before its first load) and `resident_bytes` (now).

The engine's numbers are read at each scrape (`service.stats()`) or counted as the service tells
its observers (`Service.observe`: each forward, its jobs and packed positions; each request's end).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from ..engine.service import Service
from ..engine.tickets import Summary
from .asgi import ASGIApp, Message, Receive, Scope, Send
from .state import resident_bytes

if TYPE_CHECKING:
    from .state import ServerState

ENDPOINTS = {
    "/v1/audio/speech": "speech",
    "/v1/audio/script": "script",
    "/v1/audio/voices": "voices",
    "/v1/models": "models",
    "/v1/audio/models": "models",
    "/v1/omnivoice/schema": "schema",
    "/health": "health",
    "/health/live": "health",
    "/health/ready": "health",
    "/metrics": "metrics",
    "/tts/ws": "ws",
    "/": "page",
}
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
JOB_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def endpoint_of(path: str) -> str:
    """The label of a path: one of a fixed set (see the module doc)."""
    if path in ENDPOINTS:
        return ENDPOINTS[path]
    if path.startswith("/v1/audio/voices/"):
        return "voices"
    if path.startswith("/v1/models/"):
        return "models"
    if path.startswith("/ui/"):
        return "page"
    if path.startswith(("/v1/text-to-speech/", "/v1/voices")):
        return "elevenlabs"
    return "other"


class Metrics:
    """The server's registry and what fills it: the web side's counts, and the engine's as its
    observer (engine.service.Observer; see the module doc)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.registry = r = CollectorRegistry(auto_describe=True)
        p = "omnivoice_"
        self.requests = Counter(p + "requests", "Requests answered.", ["endpoint", "status"], registry=r)
        self.request_seconds = Histogram(
            p + "request_seconds", "Time to answer a request.", ["endpoint"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.open = Gauge(p + "engine_open_requests", "Requests in the engine (generating or waiting).", registry=r)
        self.active = Gauge(p + "engine_active_jobs", "Pieces in the forward.", registry=r)
        self.waiting = Gauge(p + "engine_waiting_jobs", "Pieces waiting for a place in the forward.", registry=r)
        self.max_queue = Gauge(p + "max_queue", "Requests the engine takes at once (--max-queue).", registry=r)
        self.forwards = Counter(p + "forwards", "Forwards of the packed engine loop.", registry=r)
        self.positions = Counter(p + "packed_positions", "Positions of all the forwards.", registry=r)
        self.forward_jobs = Histogram(
            p + "forward_jobs", "Jobs packed into a forward.", buckets=JOB_BUCKETS, registry=r
        )
        self.first_audio = Histogram(
            p + "first_audio_seconds", "Submission to first audio.", buckets=LATENCY_BUCKETS, registry=r
        )
        self.generation = Histogram(
            p + "generation_seconds", "Submission to last audio.", buckets=LATENCY_BUCKETS, registry=r
        )
        self.audio = Counter(p + "audio_seconds", "Seconds of audio made.", registry=r)
        self.outcomes = Counter(p + "engine_requests", "Engine requests finished.", ["outcome"], registry=r)
        self.loads = Counter(p + "model_loads", "Times the model was loaded.", registry=r)
        self.unloads = Gauge(p + "model_unloads", "Times the model was unloaded for being idle.", registry=r)
        self.load_seconds = Histogram(
            p + "model_load_seconds",
            "Time to load the model (at start and on waking).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.loaded = Gauge(p + "model_loaded", "1 while the model is loaded.", registry=r)
        self.rss_before = Gauge(p + "resident_bytes_before_load", "Resident memory before the first load.", registry=r)
        self.rss = Gauge(p + "resident_bytes", "Resident memory now.", registry=r)
        self.phrases = Counter(p + "phrase_cache", "Speech requests by the phrase cache.", ["result"], registry=r)
        if state.phrases is not None:  # serve --phrase-cache: each lookup's hit or miss
            state.phrases.listeners.append(lambda result: self.phrases.labels(result).inc())
        self._hooked: weakref.ref[Service] | None = None  # weak: an unloaded engine is not kept
        self._lock = threading.Lock()
        state.speaker.on_load.append(self.on_load)

    def on_load(self, seconds: float) -> None:
        """Each load of the model (the Speaker's, under its lock): counted, and the new engine
        loop hooked before any request reaches it."""
        self.loads.inc()
        self.load_seconds.observe(seconds)
        self.hook()

    # --- the engine's observer ----------------------------------------------------------------
    def hook(self) -> None:
        """Register as the service's observer once it is loaded (idempotent)."""
        service = self.state.service
        if service is None or (self._hooked is not None and self._hooked() is service):
            return
        with self._lock:
            if self._hooked is not None and self._hooked() is service:
                return
            service.observe(self)
            self._hooked = weakref.ref(service)

    def forward(self, pieces: list[tuple[int, int]], positions: int) -> None:
        """Observer: a forward (the loop thread, before it runs)."""
        self.forwards.inc()
        self.forward_jobs.observe(len(pieces))
        self.positions.inc(positions)

    def finished(self, summary: Summary) -> None:
        """Observer: a request done (the loop thread)."""
        if summary.first_audio is not None:
            self.first_audio.observe(summary.first_audio)
        self.generation.observe(summary.seconds)
        self.audio.inc(summary.samples / summary.sample_rate)
        self.outcomes.labels("done").inc()

    def failed(self, error: BaseException) -> None:
        """Observer: a request failed or was cancelled (the loop thread)."""
        self.outcomes.labels("error").inc()

    # --- the web side -------------------------------------------------------------------------
    def text(self) -> bytes:
        """The exposition, the engine's gauges read now."""
        self.hook()
        service = self.state.service
        self.max_queue.set(self.state.options.max_queue)
        self.loaded.set(1 if self.state.speaker.loaded else 0)
        self.unloads.set(self.state.speaker.unloads)
        if self.state.rss_before_load is not None:
            self.rss_before.set(self.state.rss_before_load)
        rss = resident_bytes()
        if rss is not None:
            self.rss.set(rss)
        if service is not None:
            stats = service.stats()
            self.open.set(stats["open"])
            self.active.set(stats["active_jobs"])
            self.waiting.set(stats["waiting_jobs"])
        return generate_latest(self.registry)

    async def endpoint(self, request: Request) -> Response:
        return Response(self.text(), media_type=CONTENT_TYPE_LATEST)


class Counted:
    """ASGI middleware (outermost): every request and socket counted by endpoint and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        self.metrics.hook()
        t0, status = time.perf_counter(), [0]

        async def sending(message: Message) -> None:
            kind = message["type"]
            if kind in ("http.response.start", "websocket.http.response.start"):
                status[0] = message["status"]
            elif kind == "websocket.accept":
                status[0] = 101
            elif kind == "websocket.close" and not status[0]:
                status[0] = 403  # closed before it was accepted
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            endpoint = endpoint_of(scope["path"])
            self.metrics.requests.labels(endpoint, str(status[0] or 500)).inc()
            self.metrics.request_seconds.labels(endpoint).observe(time.perf_counter() - t0)
