"""`serve --phrase-cache`: a speech request answered from the phrase cache (app/phrases/), or
rendered and its reply kept there.

A reply is cached when it is audio (not `timestamps`' JSON) and nothing listens back to it
(`verify` off): its bytes are those the request gets, whole or streamed (a streamed reply's chunks,
or SSE's deltas, are one byte stream: kept whole, sent again as one chunk or one delta). The key
covers everything that determines those bytes (app/phrases/phrasekey.py), so a hit is the very
reply a render would send; the reply's header X-OmniVoice-Cache says `hit` or `miss`, and
/metrics counts both (omnivoice_phrase_cache_total{result}).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Callable

import anyio

from ..app.phrases.phrasecache import HEADER
from ..media.phrasestore import Found
from .replies import LOUDNESS_HEADER, SEED_HEADER, Receive, Send, sse_event, start_message
from .speech import SpeechBody

if TYPE_CHECKING:
    from .state import ServerState

Keep = Callable[[bytes, dict], None]  # a rendered reply's bytes and what its headers need, kept


def cacheable(speech: SpeechBody) -> bool:
    """Whether this reply may be kept and served again (the module doc)."""
    return not speech.timestamps and not speech.built.settings["verify"]


def _key(state: ServerState, speech: SpeechBody) -> str | None:
    phrases = state.phrases
    if phrases is None or not cacheable(speech):
        return None
    form = "stream" if speech.stream else "file"
    rate = int(speech.built.settings["sample_rate"] or 0)  # 0: the model's own (the checkpoint is keyed)
    return phrases.key_of(speech.built, speech.format.name, rate, form, state.options.model)


async def find_reply(state: ServerState, speech: SpeechBody, log: dict) -> tuple[CachedReply | None, Keep | None]:
    """(the reply of a hit, None) or (None, how to keep the rendered reply: None when not cached)."""
    phrases = state.phrases
    if phrases is None:
        return None, None
    if not cacheable(speech):
        return None, None
    key = await anyio.to_thread.run_sync(_key, state, speech)
    found = None if key is None else await anyio.to_thread.run_sync(phrases.get, key)
    if found is not None and not meta_holds(found.meta):
        found = None  # its metadata lies (a header it would send is no header): rendered and kept anew
    log["cache"] = "miss" if found is None else "hit"
    if found is not None:
        return CachedReply(speech, found, log), None

    def keep(data: bytes, meta: dict) -> None:
        # keyed once rendered when it had none before: a designed voice's first request renders it
        kept = key or _key(state, speech)
        if kept is not None:
            phrases.put(kept, data, meta)

    return None, keep


MAX_META_HEADER = 1024  # characters of a kept header's value (a real loudness: about 150)


def meta_holds(meta: dict) -> bool:
    """An entry's metadata is what a render keeps: its loudness (when there) a short printable
    ASCII line of a JSON object, its samples (when there) a count. The entry's checksum says only
    that its file is whole, not who wrote it."""
    loudness, samples = meta.get("loudness"), meta.get("samples")
    if loudness is not None:
        if not (isinstance(loudness, str) and len(loudness) <= MAX_META_HEADER and loudness.isascii()):
            return False
        if not loudness.isprintable():
            return False
        try:
            if not isinstance(json.loads(loudness), dict):
                return False
        except ValueError:
            return False
    return samples is None or (isinstance(samples, int) and not isinstance(samples, bool) and 0 <= samples < 1 << 40)


class CachedReply:
    """An ASGI app sending a hit: the kept bytes, with the headers their render sent."""

    def __init__(self, speech: SpeechBody, found: Found, log: dict) -> None:
        self.speech, self.found, self.log = speech, found, log

    def headers(self) -> dict[str, str]:
        speech, meta = self.speech, self.found.meta
        kind = "text/event-stream" if speech.sse else speech.format.mime
        out = {"Content-Type": kind, SEED_HEADER: str(speech.request.seed), **speech.headers(), HEADER: "hit"}
        if isinstance(meta.get("loudness"), str):
            out[LOUDNESS_HEADER] = meta["loudness"]
        if speech.sse:
            out.update({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return out

    async def __call__(self, scope: dict[str, object], receive: Receive, send: Send) -> None:
        meta, data = self.found.meta, self.found.data
        samples = meta.get("samples")
        self.log.update(audio=meta.get("audio_seconds"), pieces=0, forwards=0)
        headers = self.headers()
        if not self.speech.sse:
            headers["Content-Length"] = str(len(data))
            await send(start_message(200, headers))
            await send({"type": "http.response.body", "body": data})
            return
        chars = self.speech.chars
        out = samples if isinstance(samples, int) else 0
        usage = {"input_tokens": chars, "output_tokens": out, "total_tokens": chars + out}
        delta = sse_event("speech.audio.delta", {"audio": base64.b64encode(data).decode("ascii")}) if data else b""
        await send(start_message(200, headers))
        await send({"type": "http.response.body", "body": delta, "more_body": True})
        await send({"type": "http.response.body", "body": sse_event("speech.audio.done", {"usage": usage})})
