"""The ASGI app of `omnivoice serve`: routes, the gate (key, body size, shutting down), the log.

    state = ServerState(options, load=lambda: Engine.load(...))   # state.py
    app = create_app(state)           # run by uvicorn (server/run.py); the model loads at startup

Endpoints (OpenAI's where there is one): POST /v1/audio/speech; GET /v1/audio/voices,
POST /v1/audio/voices (multipart: name, file, ref_text), DELETE /v1/audio/voices/{id};
POST /v1/audio/script (script.py: a dialogue); GET /v1/models, GET /v1/models/{id}, GET /v1/audio/models; GET /v1/omnivoice/schema (the settings,
presets, voice-design vocabulary and languages: schema.py); GET /health, GET /health/live and
GET /health/ready (Kubernetes' probes; no key needed);
the WebSocket /tts/ws (socket.py: text streamed in, audio out, barge-in); GET /metrics
(metrics.py: Prometheus). The page
(ui.py): GET / and GET /ui/{name}, no key needed, off with --no-ui.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..app.settings.presets import preset_index
from ..app.settings.setting import SettingsError
from ..app.settings.values import did_you_mean
from ..engine.errors import InvalidRequest
from ..engine.tickets import Busy, ServiceStopped
from . import phrasereply as phrases
from . import ui
from . import voices as voice_routes
from .asgi import ASGIApp, Message, Receive, Scope, Send
from .config import ServeOptions
from .elevenlabs import api as eleven_api
from .elevenlabs import routes as eleven
from .errors import ApiError, bad_request, busy, from_engine
from .recogniser import timestamps_recogniser, verify_check
from .replies import EventQueue, SpeechReply
from .schema import schema_document
from .script import script
from .socket import tts_socket
from .speech import INSTRUCT_HEADER, INSTRUCT_NOTES_HEADER, MODELS, VOICE_PROMPT_HEADER, parse_speech
from .ssmlreply import ssml_reply
from .state import ServerState

if TYPE_CHECKING:
    from .metrics import Metrics  # the serve extra's prometheus_client


REQUEST_ID_HEADER = "X-Request-Id"
REPLICA_HEADER = b"x-omnivoice-replica"  # which replica answered (serve --ray)
OPEN_PATHS = ("/health", "/health/live", "/health/ready")  # answered without a key, also while stopping
SPEECH_PATH = "/v1/audio/speech"
ENGINE_PATHS = (SPEECH_PATH, "/v1/audio/script", "/v1/audio/voices", "/tts/ws")  # load a sleeping model (not GET)
PAGE_PATHS = ("/", "/ui/")  # the page and its files: no key needed (the page asks for it)


def is_open(path: str) -> bool:
    """Answered without a key: /health, the page and its files."""
    return path in OPEN_PATHS or path == PAGE_PATHS[0] or path.startswith(PAGE_PATHS[1])


def log_line(state: ServerState, entry: dict) -> None:
    """One line per request on stderr: id, status, characters, audio seconds, seconds, RTF, queued."""
    if state.options.quiet:
        return
    parts = [f"omnivoice serve: {entry['id']} {entry.get('status', '-')} {entry['method']} {entry['path']}"]
    seconds = entry["seconds"]
    if "chars" in entry:
        audio = entry.get("audio")
        rtf = f"{seconds / audio:.3f}" if audio else "n/a"
        audio_s = f"{audio:.2f}s" if audio is not None else "-"
        queued = f"{entry['queued']:.2f}s" if "queued" in entry else "-"
        parts.append(f"chars={entry['chars']} audio={audio_s} seconds={seconds:.2f} rtf={rtf} queued={queued}")
        parts += [f"{k}={entry[k]}" for k in ("seed", "voice", "format", "forwards", "cache") if k in entry]
    else:
        parts.append(f"seconds={seconds:.3f}")
    if entry.get("disconnected"):
        parts.append("client-left")
    for key in ("warning", "error"):
        if entry.get(key):
            parts.append(f"{key}={entry[key]!r}")
    sys.stderr.write(" ".join(parts) + "\n")
    sys.stderr.flush()


class Gate:
    """Pure ASGI middleware in front of the routes: the request id and log line, the key, the
    body size limit (413), the 503 while stopping, and the count of requests in flight."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # held while open: the model is not unloaded under it
            with self.state.speaker.hold():
                await self.wake(scope)
                return await self.app(scope, receive, send)
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] in OPEN_PATHS:
            return await self.answer(scope, receive, send)
        with self.state.speaker.hold():  # every request but the probes: no idle unload meanwhile
            await self.answer(scope, receive, send)

    async def wake(self, scope: Scope) -> None:
        """Asleep (--idle-unload), a request that needs the engine loads the model again first,
        in a thread (the event loop goes on answering)."""
        needs = eleven_api.speaks(scope["path"], ENGINE_PATHS) and scope.get("method") != "GET"
        if needs and self.state.asleep:
            try:
                await anyio.to_thread.run_sync(self.state.wake)
            except Exception:  # noqa: BLE001 - require_service's 503 (or a retry) says why
                pass

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        state, path = self.state, scope["path"]
        entry = {"id": state.request_id(), "method": scope["method"], "path": path[:200], "t0": time.perf_counter()}
        scope["omnivoice.log"] = entry
        started = False
        replica = [(REPLICA_HEADER, state.options.replica.encode())] if state.options.replica else []

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                entry["status"] = message["status"]
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (REQUEST_ID_HEADER.lower().encode(), entry["id"].encode()),
                        *replica,
                    ],
                }
            await send(message)

        counted = path not in OPEN_PATHS
        speech = eleven_api.speaks(path, (SPEECH_PATH,)) and scope["method"] == "POST"
        state.inflight += counted
        state.speaking += speech
        try:
            refused = eleven_api.shaped(scope, self.refusal(scope))  # in ElevenLabs' shape on their routes
            if refused is not None:
                await error_response(refused)(scope, receive, sending)
            else:
                await self.wake(scope)
                await self.app(scope, limited(scope, receive, state.options), sending)
        except Exception as e:  # noqa: BLE001 - a bug: one line here, the traceback below
            entry["error"] = f"{type(e).__name__}: {e}"
            if not started:
                await error_response(from_engine(e))(scope, receive, sending)
            raise
        finally:
            state.inflight -= counted
            state.speaking -= speech
            if speech and entry.get("status") == 200 and not (entry.get("error") or entry.get("disconnected")):
                state.served += 1
            entry["seconds"] = time.perf_counter() - entry["t0"]
            log_line(state, entry)

    def refusal(self, scope: Scope) -> ApiError | None:
        """Why the request is refused before it is read: stopping, or `refusal`'s reasons."""
        if scope["path"] not in OPEN_PATHS and self.state.status == "stopping":
            return busy("the server is shutting down", max(1, int(self.state.options.grace)), "shutting_down")
        return refusal(scope, self.state.options)


def refusal(scope: Scope, options: ServeOptions) -> ApiError | None:
    """Why a request is refused before its body is read: a missing or wrong key, a body declared
    over the limit (the gate's, and serve --ray's front's)."""
    path = scope["path"]
    if path in OPEN_PATHS:
        return None
    if options.api_key is not None and not is_open(path):
        refused = eleven_api.key_check(scope, options.api_key)  # ours, or ElevenLabs' xi-api-key on theirs
        if refused is not None:
            return refused
    length = dict(scope["headers"]).get(b"content-length")
    limit = body_limit(scope, options)
    if length is not None and (not length.isdigit() or int(length) > limit):
        return too_large(limit)
    return None


def limited(scope: Scope, receive: Receive, options: ServeOptions) -> Receive:
    """`receive`, failing with 413 once the body passes its limit (chunked bodies too)."""
    limit, seen = body_limit(scope, options), 0

    async def receiving() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(limit)
        return message

    return receiving


def body_limit(scope: Scope, options: ServeOptions) -> int:
    upload = scope["method"] == "POST" and scope["path"].rstrip("/") == "/v1/audio/voices"
    return options.upload_limit if upload else options.json_limit


def too_large(limit: int) -> ApiError:
    return ApiError(
        413, f"the request body is over {limit / 1024:.0f} KiB, the most this endpoint takes", code="body_too_large"
    )


def error_response(error: ApiError) -> Response:
    return Response(error.body(), status_code=error.status, headers=error.headers, media_type="application/json")


async def on_api_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, ApiError):
        exc = from_engine(exc)
    request.scope.get("omnivoice.log", {})["error"] = exc.message
    return error_response(exc)


async def on_http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    if status == 404:
        message = f"no such endpoint: {request.method} {request.url.path}"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(getattr(exc, "detail", exc))
    return await on_api_error(
        request,
        ApiError(status, message, code="not_found" if status == 404 else None, headers=getattr(exc, "headers", None)),
    )


# ------------------------------------------------------------------------------------ endpoints


async def speech(
    request: Request, body: bytes | None = None, reply: type[SpeechReply] = SpeechReply
) -> SpeechReply | phrases.CachedReply | Response:
    """The one door of a speech request: a body of POST /v1/audio/speech (elevenlabs/ translates theirs;
    `reply` its reply's shape). A phrase-cache hit or SSML of several parts is sent as plain audio, so
    only where `reply.plain_audio`; a captioned reply refuses SSML of several parts."""
    state: ServerState = request.app.state.server
    state.require_service()
    entry = request.scope["omnivoice.log"]
    body = await request.body() if body is None else body
    parsed = await anyio.to_thread.run_sync(parse_speech, body, state.options, state.speaker)
    entry.update(chars=parsed.chars, seed=parsed.request.seed, voice=parsed.voice, format=parsed.response_format)
    if parsed.built.warnings:
        entry["warning"] = "; ".join(parsed.built.warnings)
    keep = None
    if parsed.parts is not None and not reply.plain_audio:
        raise bad_request("SSML that changes the voice, language or rate is sent whole, without timestamps", "text")
    if reply.plain_audio:
        if parsed.parts is not None:  # SSML of several parts: each its own request, joined (ssmlreply.py)
            return await ssml_reply(state, parsed)
        hit, keep = await phrases.find_reply(state, parsed, entry)  # serve --phrase-cache
        if hit is not None:
            return hit
    events = EventQueue()
    check = await anyio.to_thread.run_sync(verify_check, state, parsed)
    listener = await anyio.to_thread.run_sync(timestamps_recogniser, state, parsed)
    try:
        ticket = state.speaker.submit(parsed.request, events.put, check)
    except InvalidRequest as e:
        raise from_engine(e) from None
    except Busy as e:
        raise busy(str(e), e.retry_after) from None
    except ServiceStopped as e:
        raise busy(str(e), max(1, int(state.options.grace)), "shutting_down") from None
    return reply(parsed, ticket, events, entry, listener, state.speaker.mark, keep)


def model_names(state: ServerState) -> list[str]:
    return [*MODELS, *(p for p in preset_index() if p not in MODELS)]


async def list_models(request: Request) -> Response:
    names = model_names(request.app.state.server)
    return JSONResponse({"object": "list", "data": [_model(n) for n in names]})


async def model(request: Request) -> Response:
    name = request.path_params["id"]
    names = model_names(request.app.state.server)
    if name not in names:
        raise ApiError(
            404,
            f"unknown model {name!r}{did_you_mean(name, names)}; known: {', '.join(names)}",
            param="model",
            code="model_not_found",
        )
    return JSONResponse(_model(name))


def _model(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "omnivoice"}


async def audio_models(request: Request) -> Response:
    return JSONResponse({"models": [{"id": n, "name": n} for n in model_names(request.app.state.server)]})


async def schema(request: Request) -> Response:
    return JSONResponse(await anyio.to_thread.run_sync(schema_document, request.app.state.server.options))


async def health(request: Request) -> Response:
    """The server's state and counters: `open` speech requests (from arrival to their reply's last
    byte, so a streamed reply counts until it is all sent), `served` (replies sent in full), and
    the engine's: `generating` (requests in the engine, what --max-queue bounds), `active_jobs` /
    `waiting_jobs` (pieces in the forward / waiting for a place), `forwards`."""
    state: ServerState = request.app.state.server
    phase = state.speaker.phase  # loaded, loading, unloading / asleep (--idle-unload) or unloaded
    asleep = state.status == "ready" and phase not in ("loaded", "unloading")  # once its memory is given back
    body: dict[str, str | int | float] = {
        "status": "asleep" if asleep else state.status,
        "model": state.options.model,
        "max_queue": state.options.max_queue,
        "engine": phase,
        "loads": state.speaker.loads,
    }
    if state.options.replica:
        body.update(replica=state.options.replica, pid=os.getpid())
    if state.speaker.load_seconds is not None:
        body["load_seconds"] = round(state.speaker.load_seconds, 3)
    if state.error:
        body["error"] = state.error
    body.update(open=state.speaking, served=state.served)
    if state.service is not None:
        stats = state.service.stats()
        body.update(
            forwards=stats["forwards"],
            generating=stats["open"],
            active_jobs=stats["active_jobs"],
            waiting_jobs=stats["waiting_jobs"],
        )
    return JSONResponse(body, status_code=200 if state.status == "ready" else 503)


async def health_live(request: Request) -> Response:
    """Kubernetes' liveness probe: the process answers (200 at once, also while loading)."""
    return JSONResponse({"status": "live"})


async def health_ready(request: Request) -> Response:
    """Kubernetes' readiness probe: 200 once the model is loaded and, with --warmup, its warm-up
    request spoken (asleep under --idle-unload is ready: a request wakes it); else 503 and why."""
    state: ServerState = request.app.state.server
    reason = state.ready_reason()
    if reason is None:
        return JSONResponse({"status": "ready", "engine": state.speaker.phase, "warmed": state.warmed})
    return JSONResponse({"status": "not_ready", "reason": reason}, status_code=503, headers={"Retry-After": "5"})


def _metrics(state: ServerState) -> Metrics | None:
    """metrics.Metrics of the server, or None without prometheus_client (the serve extra)."""
    try:
        from .metrics import Metrics
    except ImportError:
        return None
    return Metrics(state)


async def _no_metrics(request: Request) -> Response:
    raise ApiError(
        501,
        "GET /metrics needs prometheus_client: pip install 'omnivoice-cli[serve]'",
        type="server_error",
        code="no_metrics",
    )


async def _socket(websocket: WebSocket) -> None:
    await tts_socket(websocket)


def create_app(state: ServerState) -> Starlette:
    """The app; the model starts loading when the app starts (lifespan) and the engine loop
    stops when it ends."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.voice_lock = asyncio.Lock()
        state.start_loading()
        try:
            yield
        finally:
            state.stop()

    middleware = [Middleware(Gate, state=state)]
    metrics = _metrics(state)
    if metrics is not None:  # metrics.py: GET /metrics, every request counted (outermost)
        from .metrics import Counted

        middleware.insert(0, Middleware(Counted, metrics=metrics))
    if state.options.cors:
        exposed = [
            "X-OmniVoice-Seed",
            REQUEST_ID_HEADER,
            INSTRUCT_HEADER,
            INSTRUCT_NOTES_HEADER,
            "X-OmniVoice-Cache",
            VOICE_PROMPT_HEADER,
        ]
        middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=list(state.options.cors),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["Authorization", "Content-Type", eleven_api.KEY_HEADER],
                expose_headers=exposed,
            ),
        )
    routes: list[BaseRoute] = [
        *eleven.routes(speech, list_models),  # elevenlabs/: ElevenLabs' API, through the same door
        Route(SPEECH_PATH, speech, methods=["POST"]),
        Route("/v1/audio/voices", voice_routes.list_voices, methods=["GET"]),
        Route("/v1/audio/voices", voice_routes.create_voice, methods=["POST"]),
        Route("/v1/audio/voices/{id}", voice_routes.delete_voice, methods=["DELETE"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{id}", model, methods=["GET"]),
        Route("/v1/audio/models", audio_models, methods=["GET"]),
        Route("/v1/omnivoice/schema", schema, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/health/live", health_live, methods=["GET"]),
        Route("/health/ready", health_ready, methods=["GET"]),
        Route("/v1/audio/script", script, methods=["POST"]),  # script.py: a dialogue, as `say --cast`
        WebSocketRoute("/tts/ws", _socket),  # socket.py: streaming text in, audio out, barge-in
        Route("/metrics", metrics.endpoint if metrics is not None else _no_metrics, methods=["GET"]),
    ]
    if state.options.ui:
        routes += [Route("/", ui.page, methods=["GET"]), Route("/ui/{name}", ui.asset, methods=["GET"])]
    handlers = {
        ApiError: on_api_error,
        HTTPException: on_http_error,
        InvalidRequest: on_api_error,
        SettingsError: on_api_error,
    }
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers, lifespan=lifespan)
    app.state.server = state
    return app
