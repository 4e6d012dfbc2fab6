"""The reply of an accepted speech request: audio sent as its pieces are ready, or one whole file.

    events = EventQueue()                                  # the engine loop's events, into asyncio
    ticket = service.submit(request, events.put)
    return SpeechReply(speech, ticket, events, log)        # an ASGI app

Nothing is sent before the first piece (or the error) is there, so an error found while the
request starts (its text, its voice) is still a proper 400 / 500 reply. Then:
- stream_format "sse": `speech.audio.delta` events (base64 of the encoded stream's bytes), then
  `speech.audio.done`;
- a format that streams (pcm, mp3, opus, ogg; wav, with unknown-size header fields, only with
  `"stream": true` or sse): chunked, each piece's bytes as soon as it is ready;
- flac, wav, or `"stream": false`: one whole file with its length (a WAV then has its real sizes);
- `"timestamps": true`: JSON, {"audio": the whole file's bytes in base64 (exactly the reply
  the same request gets with `"stream": false` instead), "format", "sample_rate", "seed", "audio_seconds", "words":
  [{"word", "start", "end", "piece", "estimated"}] (as `say --words` writes them: words.py),
  "verify" with `verify`}: the shape of the captioned-speech replies of other TTS servers
  (Kokoro-FastAPI's /dev/captioned_speech: base64 audio beside word timestamps).
The bytes of the chunks and of the SSE deltas are the same stream; every way decodes to the same
samples. A client that disconnects cancels its request (its jobs leave at the next forward).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import TYPE_CHECKING, Awaitable, Callable, ClassVar

import anyio

from ..app.deliver import Outputs, PieceEncoder, Take, deliver
from ..app.listening.verify import PieceRow, RequestCheck
from ..app.phrases.phrasecache import HEADER as CACHE_HEADER
from ..engine.errors import OmniVoiceError
from ..engine.pieces import PieceCheck
from ..engine.stream.render import StreamPiece
from ..engine.tickets import Event, Summary, Ticket
from ..media.marks import Mark
from .errors import ApiError, from_engine
from .speech import SpeechBody

if TYPE_CHECKING:
    from ..app.listening.listen import Recogniser
    from ..app.listening.words import WordTime

Receive = Callable[[], Awaitable[dict]]  # ASGI: the next message from the client
Send = Callable[[dict], Awaitable[None]]  # ASGI: a message to the client

SEED_HEADER = "X-OmniVoice-Seed"
MARK_HEADER = "X-OmniVoice-Mark"  # the AI mark's text (docs/marking.md): `say --server` marks its file with it
VERIFY_HEADER = "X-OmniVoice-Verify"  # `verify`: per piece, JSON (error, transcript, attempts, seed kept)
LOUDNESS_HEADER = "X-OmniVoice-Loudness"  # `loudness`: JSON (target, input and output LUFS / dBTP, gain)


def _piece(event: Event) -> StreamPiece:
    assert event.piece is not None  # a "piece" event
    return event.piece


def _error(event: Event) -> BaseException:
    assert event.error is not None  # an "error" event
    return event.error


def _summary(event: Event) -> Summary:
    assert event.summary is not None  # a "done" event
    return event.summary


def _checked(check: PieceCheck) -> list[PieceRow]:
    """`verify`: the per-piece report of the request's check (verify.RequestCheck, the only
    check a request is given)."""
    return check.report() if isinstance(check, RequestCheck) else []


def _heard(piece: StreamPiece) -> tuple[int, int]:
    """Where a streamed piece's text is heard in the reply (samples): as Result.pieces gives it."""
    start, end = piece.kept if piece.kept is not None else (0, len(piece.audio))
    return piece.start + start, piece.start + end


class EventQueue:
    """Events put from the engine loop's thread, taken in the event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Event] = asyncio.Queue()

    def put(self, event: Event) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, event)

    async def get(self) -> Event:
        return await self.queue.get()


def start_message(status: int, headers: dict[str, str]) -> dict:
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    return {"type": "http.response.start", "status": status, "headers": raw}


def sse_event(kind: str, payload: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()


class SpeechReply:
    """An ASGI app sending one request's audio (see the module doc)."""

    # the audio's bytes as POST /v1/audio/speech sends them, so a phrase-cache hit or joined SSML parts
    # can stand for it (False: a reply of another shape, ElevenLabs' captioned ones)
    plain_audio: ClassVar[bool] = True

    def __init__(
        self,
        speech: SpeechBody,
        ticket: Ticket,
        events: EventQueue,
        log: dict[str, object],
        listener: Recogniser | None = None,
        mark: Mark | None = None,
        keep: Callable[[bytes, dict], None] | None = None,
    ) -> None:
        self.speech, self.ticket, self.events, self.log = speech, ticket, events, log
        self.mark = mark  # the AI mark in the reply's metadata (the server's: Speaker.mark)
        self.listener = listener  # `timestamps`: the speech recogniser that times the words
        self.keep = keep  # serve --phrase-cache: the reply's bytes kept once whole (server/phrasereply.py)
        self.finished = False
        self.spans: list[tuple[str, int, int]] = []  # whole: each piece's text and where it is heard (samples)

    @property
    def json_reply(self) -> bool:
        """The whole reply is JSON (`captioned`): `timestamps`."""
        return self.speech.timestamps

    @property
    def out_rate(self) -> int:
        """The reply's sample rate: `sample_rate`, else the model's."""
        return int(self.speech.built.settings["sample_rate"] or self.ticket.service.engine.sample_rate)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        fmt = self.speech.format
        kind = "text/event-stream" if self.speech.sse else fmt.mime
        out = {"Content-Type": kind, SEED_HEADER: str(self.ticket.seed), **self.speech.headers()}
        if self.mark is not None and self.mark.text().isascii():
            out[MARK_HEADER] = self.mark.text()
        if self.speech.sse:
            out.update({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        if self.keep is not None:
            out[CACHE_HEADER] = "miss"
        return {**out, **(extra or {})}

    async def __call__(self, scope: dict[str, object], receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def watch() -> None:  # a client that leaves cancels its request
                while (await receive())["type"] != "http.disconnect":
                    pass
                if self.finished:  # the reply is complete (the server reads that as a disconnect too)
                    return
                self.log["disconnected"] = True
                self.ticket.cancel()
                group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                await self.reply(send)
            finally:
                if not self.finished:
                    self.ticket.cancel()
                group.cancel_scope.cancel()

    async def reply(self, send: Send) -> None:
        first = await self.events.get()
        if first.kind == "error":
            self.finished = True
            await self.send_error(send, from_engine(_error(first)))
            return
        if self.speech.stream:
            await self.stream(send, first)
        else:
            await self.whole(send, first)

    async def send_error(self, send: Send, error: ApiError) -> None:
        self.log["error"] = error.message
        body = error.body()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **error.headers}
        await send(start_message(error.status, headers))
        await send({"type": "http.response.body", "body": body})

    def done(self, event: Event) -> None:
        s = _summary(event)
        self.finished = True
        self.log.update(audio=s.audio_seconds, queued=s.queued, pieces=s.pieces, forwards=s.forwards)

    async def whole(self, send: Send, event: Event) -> None:
        """Every piece, then one file with its length (or, with `timestamps`, JSON)."""
        import numpy as np

        pieces = []
        while event.kind == "piece":
            pieces.append(_piece(event))
            event = await self.events.get()
        if event.kind == "error":
            self.finished = True
            await self.send_error(send, from_engine(_error(event)))
            return
        rate, req = self.ticket.service.engine.sample_rate, self.speech.request
        audio = np.concatenate([p.audio for p in pieces]) if pieces else np.zeros(0, dtype=np.float32)
        spans = [(p.text, *_heard(p)) for p in pieces if p.text]  # as say's pieces: where each text is heard
        self.spans = spans
        outputs = Outputs(
            timestamps=self.speech.timestamps,  # the words, timed on the model's own samples
            loudness=self.speech.built.settings["loudness"],  # over the whole reply (media/loudness.py)
            sample_rate=self.out_rate,  # resampled once, the whole reply (media/rates.py)
            encoded=self.speech.format,
            mark=self.mark,
        )
        take = Take(audio, rate, req.text, req.lang, spans)
        try:
            done = await anyio.to_thread.run_sync(lambda: deliver(take, outputs, listener=self.listener))
        except OmniVoiceError as e:  # the recogniser failed on the audio (timestamps): one reply, in words
            self.finished = True
            await self.send_error(send, from_engine(e))
            return
        data, extra = done.data or b"", {}
        if done.loudness is not None:
            extra[LOUDNESS_HEADER] = json.dumps(done.loudness.as_dict(), separators=(",", ":"))
        check = self.ticket.pieces.check
        if check is not None:  # the pieces are all checked now (a streamed reply's headers go out first)
            extra[VERIFY_HEADER] = json.dumps(_checked(check), ensure_ascii=True, separators=(",", ":"))
        if self.json_reply:
            body = self.captioned(data, done.out_rate, done.out_samples, done.words or [])
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            extra["Content-Type"] = "application/json"
        self.done(event)
        if self.keep is not None and not self.speech.timestamps:
            await self.kept(data, _summary(event), extra.get(LOUDNESS_HEADER))
        extra["Content-Length"] = str(len(data))
        await send(start_message(200, self.headers(extra)))
        await send({"type": "http.response.body", "body": data})

    def captioned(self, data: bytes, rate: int, samples: int, words: list[WordTime]) -> dict[str, object]:
        """The JSON reply of `timestamps` (see the module doc)."""
        body = {
            "audio": base64.b64encode(data).decode("ascii"),
            "format": self.speech.response_format,
            "sample_rate": rate,
            "seed": self.ticket.seed,
            "audio_seconds": round(samples / rate, 4),
            "words": [w.as_dict() for w in words],
        }
        check = self.ticket.pieces.check
        if check is not None:
            body["verify"] = _checked(check)
        return body

    async def stream(self, send: Send, event: Event) -> None:
        """Each piece's bytes as it comes (chunked, or as SSE deltas)."""
        encoder = PieceEncoder(self.speech.format, self.ticket.service.engine.sample_rate, self.out_rate, self.mark)
        feed, finish = encoder.feed, encoder.finish
        await send(start_message(200, self.headers()))
        sent: list[bytes] = []  # the stream's bytes, kept with --phrase-cache
        while True:
            if event.kind == "piece":
                piece = _piece(event)
                sent.append(await anyio.to_thread.run_sync(feed, piece.audio))
                await self.send_bytes(send, sent[-1], piece)
            elif event.kind == "done":
                sent.append(await anyio.to_thread.run_sync(finish))
                await self.send_bytes(send, sent[-1])
                self.done(event)
                break
            else:  # failed after audio went out: an SSE error event, or a cut connection
                self.log["error"] = from_engine(_error(event)).message
                if not self.speech.sse:
                    return  # the body is left incomplete: the client sees the failure, not a short file
                await send(
                    {
                        "type": "http.response.body",
                        "body": sse_event("error", {"error": self.log["error"]}),
                        "more_body": True,
                    }
                )
                break
            event = await self.events.get()
        if self.speech.sse and event.kind == "done":
            usage = {
                "input_tokens": self.speech.chars,
                "output_tokens": _summary(event).samples,
                "total_tokens": self.speech.chars + _summary(event).samples,
            }
            await send(
                {
                    "type": "http.response.body",
                    "body": sse_event("speech.audio.done", {"usage": usage}),
                    "more_body": True,
                }
            )
        if self.keep is not None and event.kind == "done":
            await self.kept(b"".join(sent), _summary(event), None)
        self.finished = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def kept(self, data: bytes, summary: Summary, loudness: str | None) -> None:
        """--phrase-cache: the whole reply's bytes kept before its last byte goes out (a client that
        has a reply finds it kept), with what a hit's headers and SSE usage need."""
        assert self.keep is not None
        meta: dict[str, object] = {"samples": summary.samples, "audio_seconds": summary.audio_seconds}
        if loudness is not None:
            meta["loudness"] = loudness
        await anyio.to_thread.run_sync(self.keep, data, meta)

    async def send_bytes(self, send: Send, data: bytes, piece: StreamPiece | None = None) -> None:
        """A stream's bytes (`piece`: the piece they end, None for the encoder's tail)."""
        if not data:
            return
        if self.speech.sse:
            data = sse_event("speech.audio.delta", {"audio": base64.b64encode(data).decode("ascii")})
        await send({"type": "http.response.body", "body": data, "more_body": True})
