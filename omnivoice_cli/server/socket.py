"""`/tts/ws`: streaming text in, audio out, with barge-in, in the protocol of livekit-streaming-tts
(PyPI 0.1.3), so that its LiveKit plugin works against `omnivoice serve` unchanged.

Client -> server, JSON text frames:
- `{"type": "config", "data": {sample_rate, format, binary, voice, language, speed, extra}}`: the
  session's settings (each optional; a later config changes the utterances that follow: one sent
  between the fragments of an utterance, before its flush or a cancel, is refused with an error
  event, so an utterance's audio has one format and rate). `format` is pcm (s16le), mulaw or
  alaw (raw G.711); `binary` true with pcm sends the audio as binary frames; `extra` is any
  request setting of the one schema (seed, num_step, instruct, preset, ...), checked as an HTTP
  field is (every string valid Unicode too); `normalize` beside them is the plugin's own text
  clean-up and is not ours (give `extra.normalize` for ours). Answered by
  `{"type":"event","data":{"event_type":"config_accepted"}}`;
- `{"type": "text", "data": {"text": "..."}}`: a fragment of the utterance (an LLM's tokens);
- `{"type": "flush"}`: the utterance ends: its rest is spoken, then the `final` event;
- `{"type": "cancel"}`: barge-in: the utterance's work is dropped at once (its place in the engine is
  free, its jobs leave the forward within one layer when they are all it holds, else at the next
  forward; nothing more of it is sent) and the socket takes the
  next utterance (no `final` for the cancelled one);
- `{"type": "ping"}` -> `{"type": "pong"}`.

Server -> client: audio as binary frames (pcm and `binary`) or `{"type":"audio","data":{"audio":
base64, "sample_rate", "format"}}`; `{"type":"event","data":{"event_type":"final"}}` after a
flush's audio; `{"type":"error","data":{"message","code"}}` in the words of the command line (a
bad message, a bad setting, a full engine: the socket stays open and goes on; what cannot be sent
as UTF-8, a lone surrogate echoed back, is escaped as `\\udXXX`).

Text is spoken from its first sentence end on, as Wyoming's streaming events do: the text up to
the last sentence end that a space follows is handed on, parts that arrive while one is spoken
are joined into one request, and the parts of one utterance are spoken as `say --stream` speaks
a whole text: in its first part's voice (piece 0 of the first request, or the reference), with
seeds seed, seed + 1, ... The audio is resampled to `sample_rate` once, as one stream per
utterance (media/rates.py). Every socket shares the server's one engine loop.

The API key is checked before the socket is accepted (the HTTP reply is the 401 of any endpoint);
bounds: a frame of at most the server's JSON body limit, `MAX_PENDING` parts (`MAX_WAITING` jobs with the ends) waiting per socket,
`--max-queue` requests in the engine; `socket_max_per_peer` sockets open from one address and
`max_sockets` in all (half uvicorn's connection limit, so HTTP, /health first, always has the other
half): one over is refused before the upgrade, as a bad key is: an HTTP reply saying why (429 past
the address's cap, 503 past the total, with Retry-After) and its connection ended by the server,
so that handshakes left idle hold no connection (without the denial extension: closed before the
accept, 1013 and the reason); a socket that sends no text, config, flush or cancel for `socket_idle_timeout`
seconds while nothing of its is spoken is closed (1000, the reason says so): pings keep the
connection's proxies awake but do not keep the socket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.websockets import WebSocket

from .errors import ApiError, busy, check_key
from .socketmessages import TRY_AGAIN_LATER, close_reason
from .socketsession import SocketSession

if TYPE_CHECKING:
    from .state import ServerState

PATH = "/tts/ws"


KeyCheck = Callable[[WebSocket, str], "ApiError | None"]  # the socket's key refusal, given the server's key
Shape = Callable[[ApiError], ApiError]  # a refusal before the upgrade, in the socket's own words (ours: as it is)


def bearer(websocket: WebSocket, key: str) -> ApiError | None:
    """`Authorization: Bearer KEY`, as every endpoint checks it."""
    return check_key(websocket.headers.get("authorization", "").encode("latin-1"), key)


def socket_refusal(websocket: WebSocket, state: ServerState, key_check: KeyCheck = bearer) -> ApiError | None:
    """Why the socket is refused before it is accepted (an ApiError), or None."""
    options = state.options
    if options.api_key is not None:
        refused = key_check(websocket, options.api_key)
        if refused is not None:
            return refused
    try:
        state.require_service()
    except ApiError as e:  # loading, failed, stopping
        return e
    except Exception as e:  # noqa: BLE001 - not the server's own refusal: try again shortly
        return busy(str(e), 5)
    return None


async def tts_socket(
    websocket: WebSocket,
    session: Callable[[WebSocket, ServerState], SocketSession] = SocketSession,
    key_check: KeyCheck = bearer,
    shape: Shape | None = None,
) -> None:
    """The endpoint (a Starlette WebSocketRoute); the ElevenLabs sockets give their own `session`
    (a SocketSession speaking their messages), `key_check` (their header) and `shape` (their error
    body for the refusals before the upgrade: the caps' 429 and 503, a loading server's 503), on
    the same caps."""
    state: ServerState = websocket.app.state.server
    peer = websocket.client.host if websocket.client is not None else ""
    refused = socket_refusal(websocket, state, key_check) or crowded(state, peer)
    if refused is not None:
        await deny(websocket, refused if shape is None else shape(refused))
        return
    state.sockets[peer] += 1  # counted before the first await: handshakes at once see each other
    try:
        await websocket.accept()
        await session(websocket, state).run()
    finally:
        state.sockets[peer] -= 1
        if state.sockets[peer] <= 0:
            del state.sockets[peer]


async def deny(websocket: WebSocket, refused: ApiError) -> None:
    """Refuse the socket before the upgrade: the HTTP reply of any endpoint (the server then ends the
    connection), or where the server cannot send one, a close before the accept (1008 for a bad
    key, else 1013, and the reason)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(
            Response(refused.body(), refused.status, refused.headers, media_type="application/json")
        )
    else:
        await websocket.close(
            code=1008 if refused.status == 401 else TRY_AGAIN_LATER, reason=close_reason(refused.message)
        )


def crowded(state: ServerState, peer: str) -> ApiError | None:
    """Why one more socket from `peer` is refused (the caps of the module doc), or None."""
    options, held = state.options, state.sockets[peer]
    total = sum(state.sockets.values())
    if total >= options.max_sockets:
        return busy(f"the server has {total} sockets open, the most it takes: try again shortly", 5, code="busy")
    if held >= options.socket_max_per_peer:
        why = f"{peer} has {held} sockets open, the most one address may hold: close one first"
        return ApiError(429, why, code="busy", type="rate_limit_error", headers={"Retry-After": "5"})
    return None
