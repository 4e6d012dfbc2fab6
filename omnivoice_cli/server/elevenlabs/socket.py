"""ElevenLabs' streaming input sockets, as our `/tts/ws` socket (socketsession.SocketSession: the
same admission, caps, limits, idle timeout, engine loop and cancellation) speaking their messages.

    WS /v1/text-to-speech/{voice_id}/stream-input?output_format=pcm_24000&language_code=en
    WS /v1/text-to-speech/{voice_id}/multi-stream-input?...      (LiveKit's and Pipecat's plugins)

The key: the `xi-api-key` header (or `Authorization: Bearer`), checked before the upgrade (their
401 shape); `output_format` (default mp3_44100_128) and `language_code` come from the query,
`model_id` is taken and left out (one model); with `auto_mode=true` (Pipecat's) each text
message is a whole sentence or phrase and is spoken as it comes (as with a flush). Client -> server, JSON:
- `{"text": " ", "voice_settings": {"speed"}, "generation_config", ...}`: the first message (and a
  context's first in multi): the settings of the utterance it starts (`speed` ours, the rest
  taken and left out);
- `{"text": "..."}`: a piece of the text; it is spoken from its sentence ends on, as /tts/ws does
  (`try_trigger_generation` and `generation_config.chunk_length_schedule` are hints we need not:
  a sentence is handed on as soon as it ends);
- `"flush": true` beside it (or alone, with no `text`: Pipecat's): the text so far is spoken now,
  the utterance goes on;
- stream-input: `{"text": ""}` ends the input: the rest is spoken, `{"isFinal": true}` is sent
  and the socket is closed (1000);
- multi-stream-input: every message names its `context_id`; `{"context_id", "close_context":
  true}` ends the context: after a flush (LiveKit's end of input: `{"text": "", "flush": true}`,
  then close_context) its audio is finished and its `isFinal` follows; without one it is a
  barge-in, /tts/ws's cancel (its work in the engine dropped within one forward, nothing more of
  it sent), and its `isFinal` at once. A message for a new context ends the open one as a close
  after a flush would (contexts are spoken one after another); `{"close_socket": true}` ends the
  open one so and closes the socket once it is spoken; `{"text": "", "context_id"}` is a
  keep-alive.
Server -> client: `{"audio": base64, "isFinal": null, "alignment": {"chars", "charStartTimesMs",
"charDurationsMs"}, "normalizedAlignment": the same}` per piece (alignment.py: the piece's span,
times from the utterance's start; `contextId` in multi), `{"isFinal": true}`, and errors as
`{"error": code, "message"}` (the socket goes on). A refusal ends the socket as theirs do:
`{"message", "error", "code"}`, `code` the close code that follows: 1008 for a bad query, 1013
(try again later) for load (`busy`: a full engine, `--max-queue`, or the socket's backlog,
MAX_PENDING parts or MAX_WAITING jobs). Before the upgrade (the caps, a loading server) the
refusal is their HTTP error, `{"detail": {"status", "message"}}` (api.eleven).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

from starlette.websockets import WebSocket

from ...app.deliver import PieceEncoder
from ...app.door.speaker import USAGE_ERRORS
from ...app.settings.values import type_name
from ...engine.errors import one_line
from ...engine.text.textcheck import unicode_problem
from ...media.formats import served_formats
from ..socket import tts_socket
from ..socketmessages import TRY_AGAIN_LATER, BadMessage, Config, close_reason
from ..socketsession import SocketSession, Utterance, WorkItem
from .alignment import in_ms, of_piece
from .api import ElevenError, eleven, key_refusal, output_format

if TYPE_CHECKING:
    from ...engine.stream.render import StreamPiece
    from ..state import ServerState

POLICY_VIOLATION = 1008  # the close code of a refused query (RFC 6455's, as theirs)
MAX_CONTEXT_ID = 256  # characters of a context id (each of its messages sends it back)
VOICE_SETTINGS = ("stability", "similarity_boost", "style", "use_speaker_boost", "speed")


def _key(websocket: WebSocket, key: str) -> ElevenError | None:
    return key_refusal(dict(websocket.scope["headers"]), key)


class ElevenSession(SocketSession):
    """One stream-input socket (multi: multi-stream-input)."""

    multi = False

    def __init__(self, websocket: WebSocket, state: ServerState) -> None:
        super().__init__(websocket, state)
        self.contexts: dict[int, str | None] = {}  # an utterance's number -> its context id
        self.offsets: dict[int, float] = {}  # an utterance's number -> seconds of its audio so far
        self.open: str | None = None  # the context being written (multi)
        self.flushed = False  # the open context's last text message had a flush
        self.closing = False  # the socket closes after the last final (stream-input's end, close_socket)
        self.problem: str | None = None  # the query's, said once the socket is open
        self.refused = False  # a refusal was sent and the socket closed
        # `auto_mode=true` (Pipecat's): each text message is a whole sentence or phrase, spoken as it
        # comes (as after a flush; its messages carry no space between the sentences)
        self.auto = websocket.query_params.get("auto_mode") == "true"
        query = websocket.query_params
        try:
            name, rate = output_format(query.get("output_format"))
            self.config = Config(
                sample_rate=rate,
                format=name,
                voice=websocket.path_params["voice_id"],
                language=query.get("language_code"),
            )
            self.build("Hello.", self.config)  # the voice and language checked now
        except ElevenError as e:
            self.problem = e.message
        except USAGE_ERRORS as e:
            self.problem = one_line(e)

    async def run(self) -> None:
        if self.problem is not None:
            await self.refuse(self.problem, "invalid_request", POLICY_VIOLATION)
            return
        await super().run()

    # --- reading ------------------------------------------------------------------------------
    async def read(self, raw: str) -> None:
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise BadMessage(f"the message is not valid JSON: {e}", "parse_error") from None
        if not isinstance(message, dict):
            raise BadMessage(f"a message must be a JSON object, got {type_name(message)}")
        if self.multi:
            if message.get("close_socket"):
                self.end_context()
                self.closing = True
                self.wake.set()
                self.touch()
                return
            self.enter(message.get("context_id"))
        if message.get("voice_settings") is not None:
            self.voice_settings(message["voice_settings"])
        if self.multi and message.get("close_context"):
            self.close_context()
            self.touch()
            return
        text = message.get("text")
        if text is None:
            if message.get("flush"):  # `{"context_id", "flush": true}` with no text (Pipecat's end of a turn)
                self.push()
                self.flushed = True
            return
        if not isinstance(text, str):
            raise BadMessage(f"'text' must be a string, got {type_name(text)}")
        problem = unicode_problem(text)
        if problem:
            raise BadMessage(f"'text' is {problem}: give UTF-8 text")
        if text == "" and not self.multi and not message.get("flush"):
            self.closing = True  # stream-input's end of input
            self.end_context()
            self.touch()
            return
        if text.strip() or self.utterance.text:
            self.text(text)
        if message.get("flush") or (self.auto and text.strip()):
            self.push()
        self.flushed = bool(message.get("flush"))
        self.touch()

    def enter(self, context: object) -> None:
        """A message of `context`: a new one ends the open one (as a close after a flush would)."""
        if context is not None and not isinstance(context, str):
            raise BadMessage(f"'context_id' must be a string, got {type_name(context)}")
        if context is not None and len(context) > MAX_CONTEXT_ID:
            raise BadMessage(f"'context_id' is {len(context)} characters long: at most {MAX_CONTEXT_ID} are allowed")
        if context != self.open:
            if self.open is not None:
                self.end_context()
            self.open, self.flushed = context, False

    def voice_settings(self, value: object) -> None:
        """`voice_settings`: `speed` for the utterances that begin from now on."""
        if not isinstance(value, dict) or any(k not in VOICE_SETTINGS for k in value):
            raise BadMessage(f"'voice_settings' must be an object of {', '.join(VOICE_SETTINGS)}", "invalid_config")
        if value.get("speed") is None:
            return
        settings = {**self.config.settings, "speed": value["speed"]}
        try:
            self.build("Hello.", self.config, settings)
        except USAGE_ERRORS as e:
            raise BadMessage(one_line(e), "invalid_config") from None
        self.config = Config(**{**self.config.__dict__, "settings": settings})

    def queue(self, job: WorkItem, force: bool = False) -> None:
        """A part joins the waiting part of its utterance before it while they fit one request (the
        worker would join them so): an agent's long reply never fills the socket's queue."""
        last = self.jobs[-1] if self.jobs else None
        fits = last is not None and len(last.text) + len(job.text) <= self.state.options.max_input_chars
        if last is not None and fits and job.kind == last.kind == "speak" and last.utterance is job.utterance:
            last.text += job.text
            return
        super().queue(job, force)

    def push(self) -> None:
        """`flush`: the utterance's text so far is spoken now; the utterance goes on."""
        u = self.utterance
        if u.text.strip():
            self.queue(WorkItem("speak", u, u.text, u.config or self.config))
            u.text = ""

    def end_context(self) -> None:
        """The open utterance ends: its rest is spoken, then its final."""
        self.contexts[self.utterance.number] = self.open
        self.flush()

    def close_context(self) -> None:
        if self.flushed:
            self.end_context()
        else:  # a barge-in: nothing more of it, and its final at once
            u = self.utterance
            self.contexts[u.number] = self.open
            self.cancel()
            self.queue(WorkItem("final", u), force=True)
        self.open, self.flushed = None, False

    # --- sending ------------------------------------------------------------------------------
    def encoder(self, job: WorkItem) -> tuple[Utterance, PieceEncoder]:
        u, config = job.utterance, job.config
        assert config is not None
        if u.encoder is None:
            u.encoder = PieceEncoder(served_formats()[config.format], self.rate, config.sample_rate)
        return u, u.encoder

    def tagged(self, number: int, message: dict) -> dict:
        if self.multi:
            message["contextId"] = self.contexts.get(number, self.open)
        return message

    async def send_error(self, message: str, code: str) -> None:
        if code == "busy":  # a refusal for load: theirs, and the socket ends (try again later)
            await self.refuse(message, code, TRY_AGAIN_LATER)
            return
        shown = " ".join(message.split()).encode("utf-8", "backslashreplace").decode("utf-8")
        await self.send_json(self.tagged(self.utterance.number, {"error": code, "message": shown}))

    async def refuse(self, message: str, error: str, close_code: int) -> None:
        """Their error message, `{"message", "error", "code"}` (`code`: the close code), then the
        close; nothing of the socket is spoken after it."""
        if self.refused:
            return
        self.refused = True
        shown = " ".join(message.split()).encode("utf-8", "backslashreplace").decode("utf-8")
        tagged = self.tagged(self.utterance.number, {"message": shown, "error": error, "code": close_code})
        self.closed = True  # the worker takes nothing more
        self.cancel()
        self.wake.set()
        await self.send_json(tagged)
        await self.ws.close(code=close_code, reason=close_reason(shown))

    async def send_audio(self, data: bytes, config: Config, u: Utterance, piece: StreamPiece | None = None) -> None:
        offset = self.offsets.get(u.number, 0.0)
        alignment = None
        if piece is not None:
            self.offsets[u.number] = offset + len(piece.audio) / self.rate
            start, end = piece.kept if piece.kept is not None else (0, len(piece.audio))
            if piece.text.strip():
                alignment = in_ms(of_piece(piece.text, start / self.rate, end / self.rate), offset)
        if not data and alignment is None:
            return
        message: dict[str, object] = {
            "audio": base64.b64encode(data).decode("ascii") if data else None,
            "isFinal": None,
        }
        if alignment is not None:
            message.update(alignment=alignment, normalizedAlignment=alignment)
        async with self.send_lock:
            if u.dropped:
                return
            await self.ws.send_text(json.dumps(self.tagged(u.number, message)))

    async def finish(self, job: WorkItem) -> None:
        u = job.utterance
        if not u.dropped and u.encoder is not None and job.config is not None:
            await self.send_audio(u.encoder.finish(), job.config, u)
        if not u.dropped or self.multi:  # a cancelled context's final tells the client it is over
            await self.send_json(self.tagged(u.number, {"isFinal": True}))
        self.contexts.pop(u.number, None)
        self.offsets.pop(u.number, None)
        if self.closing and not any(j.kind == "final" for j in self.jobs):
            await self.ws.close(code=1000)


class MultiSession(ElevenSession):
    """One multi-stream-input socket."""

    multi = True


async def stream_input(websocket: WebSocket) -> None:
    await tts_socket(websocket, ElevenSession, _key, eleven)


async def multi_stream_input(websocket: WebSocket) -> None:
    await tts_socket(websocket, MultiSession, _key, eleven)
