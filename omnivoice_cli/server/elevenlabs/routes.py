"""ElevenLabs' routes on `omnivoice serve`, so that their clients work by changing the base URL.

    POST /v1/text-to-speech/{voice_id}                        the audio, whole
    POST /v1/text-to-speech/{voice_id}/stream                 the audio, as the pieces are ready
    POST /v1/text-to-speech/{voice_id}/with-timestamps        JSON: audio_base64 and alignment
    POST /v1/text-to-speech/{voice_id}/stream/with-timestamps JSON lines, one per piece
    GET  /v1/voices, GET /v1/voices/{voice_id}                the voices a request may name
    GET  /v1/models (with the xi-api-key header)              the model and the presets
    WS   /v1/text-to-speech/{voice_id}/stream-input, .../multi-stream-input   (socket.py)

Each text-to-speech request is translated (api.py) into a body of POST /v1/audio/speech and goes
through the server's one door (app.open_speech, handed in as `door`): the same settings schema,
limits, admission, cancellation and errors, worded in their shape. `voice_id` is any voice the
server knows: a saved voice, the checkpoint's own, an OpenAI name, or auto.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from ...app.door.voicechoice import ListedVoice
from ...app.door.voicechoice import listed as names_listed
from ...app.settings.presets import preset_index
from ...app.settings.setting import SettingsError
from ...app.settings.values import shown_value
from ...engine.errors import InvalidRequest
from ..errors import ApiError, from_engine
from ..phrasereply import CachedReply
from ..replies import SpeechReply
from ..speech import MODELS, parse_json
from ..state import ServerState
from . import socket
from .api import KEY_HEADER, MODELS_PATH, TTS_PREFIX, VOICES_PATH, ElevenError, eleven, speech_body
from .reply import ElevenReply, StreamedTimedReply, TimedReply

# what the door answers: the reply, or a phrase-cache hit or joined SSML parts (plain audio)
Reply = SpeechReply | CachedReply | Response
Door = Callable[[Request, bytes, type[SpeechReply]], Awaitable[Reply]]

# our voice types as their categories
CATEGORIES = {"saved": "cloned", "checkpoint": "premade", "openai": "premade", "auto": "premade"}


async def speak(request: Request, door: Door, stream: bool, timed: bool) -> Reply:
    """One text-to-speech request through the door (see the module doc)."""
    try:
        data = parse_json(await request.body())
        body = speech_body(data, request.path_params["voice_id"], request.query_params)
        body["stream"] = stream
        reply: type[SpeechReply] = ElevenReply
        if timed and stream:
            reply = StreamedTimedReply
        elif timed:  # the heard words where the recogniser can be had, else the pieces' spans
            try:
                return await door(request, _encoded({**body, "timestamps": True}), TimedReply)
            except ApiError as e:
                if e.status != 501 or e.code != "no_recogniser":
                    raise
            reply = TimedReply
        return await door(request, _encoded(body), reply)
    except (ApiError, InvalidRequest, SettingsError) as e:
        raise eleven(from_engine(e)) from None


def _encoded(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


def voice_entry(voice: ListedVoice) -> dict[str, object]:
    """One of our voices as their Voice."""
    labels = {"type": voice["type"], **{k: str(voice[k]) for k in ("lang", "instruct") if voice.get(k)}}
    return {
        "voice_id": voice["name"],
        "name": voice["name"],
        "category": CATEGORIES.get(voice["type"], "premade"),
        "labels": labels,
        "description": voice.get("text") or None,
        "samples": None,
        "settings": None,
    }


async def _voices(request: Request) -> list[ListedVoice]:
    state: ServerState = request.app.state.server
    return await anyio.to_thread.run_sync(state.speaker.voices)


async def voices_list(request: Request) -> Response:
    return JSONResponse({"voices": [voice_entry(v) for v in await _voices(request)]})


async def get_voice(request: Request) -> Response:
    wanted = request.path_params["voice_id"]
    listed = await _voices(request)
    for v in listed:
        if v["name"] == wanted or v["name"].casefold() == wanted.casefold():
            return JSONResponse(voice_entry(v))
    known = names_listed([v["name"] for v in listed])
    raise ElevenError(
        404, f"voice {shown_value(wanted)} is not one this server knows; known: {known}", code="voice_not_found"
    )


def models_reply(names: list[str]) -> Response:
    """GET /v1/models in their shape: our model names and presets, each for text to speech."""
    return JSONResponse(
        [
            {
                "model_id": name,
                "name": name,
                "can_do_text_to_speech": True,
                "can_do_voice_conversion": False,
                "description": "OmniVoice" if name == names[0] else f"OmniVoice ({name})",
            }
            for name in names
        ]
    )


def listed_models() -> list[str]:
    return [*MODELS, *(p for p in preset_index() if p not in MODELS)]


def routes(door: Door, ours: Callable[[Request], Awaitable[Response]]) -> list[BaseRoute]:
    """The routes, their requests spoken through `door` (app.open_speech); GET /v1/models is
    theirs when asked with their key header, else `ours` (OpenAI's list)."""

    async def list_models(request: Request) -> Response:
        return models_reply(listed_models()) if KEY_HEADER in request.headers else await ours(request)

    def handler(stream: bool, timed: bool) -> Callable[[Request], Awaitable[Reply]]:
        async def endpoint(request: Request) -> Reply:
            return await speak(request, door, stream, timed)

        return endpoint

    voice = TTS_PREFIX + "{voice_id}"
    return [
        Route(voice, handler(False, False), methods=["POST"]),
        Route(voice + "/stream", handler(True, False), methods=["POST"]),
        Route(voice + "/with-timestamps", handler(False, True), methods=["POST"]),
        Route(voice + "/stream/with-timestamps", handler(True, True), methods=["POST"]),
        Route(MODELS_PATH, list_models, methods=["GET"]),
        Route(VOICES_PATH, voices_list, methods=["GET"]),
        Route(VOICES_PATH + "/{voice_id}", get_voice, methods=["GET"]),
        WebSocketRoute(voice + "/stream-input", socket.stream_input),
        WebSocketRoute(voice + "/multi-stream-input", socket.multi_stream_input),
    ]
