"""One `/tts/ws` socket (socket.py has the protocol): its messages read as they come (a cancel acts
at once), its utterances' parts spoken by a worker through the server's engine loop and sent back
as audio."""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..app.deliver import PieceEncoder
from ..app.door.speaker import USAGE_ERRORS
from ..app.door.textparts import take_parts
from ..app.request import Built
from ..app.session import seed_for
from ..app.settings.values import did_you_mean, or_list, shown_value, type_name
from ..app.voices.design import voice_prompt
from ..engine.errors import one_line
from ..engine.planning import Request
from ..engine.text.textcheck import unicode_problem
from ..engine.tickets import Busy, Event, ServiceStopped, Ticket
from .asgi import Message
from .errors import ApiError, from_engine
from .socketmessages import (
    CONFIG_KEYS,
    FORMATS,
    MAX_PENDING,
    MAX_WAITING,
    MESSAGES,
    BadMessage,
    Config,
    close_reason,
    parse_message,
)
from .speech import check_unicode

if TYPE_CHECKING:
    from ..engine.sound.voice import VoicePrompt
    from ..engine.stream.render import StreamPiece
    from .state import ServerState


@dataclass
class Utterance:
    """Text from the first fragment to its flush (or cancel)."""

    number: int
    config: Config | None = None  # the socket's config at its first fragment: all its audio's
    text: str = ""  # arrived, not yet handed on
    seed: int | None = None  # its first part's seed
    ref: VoicePrompt | None = None  # its first part's voice, for the others
    parts: int = 0  # parts spoken
    encoder: PieceEncoder | None = None  # of its audio (resampled, encoded as it comes)
    dropped: bool = False  # a cancel dropped it: nothing more of it is spoken or sent


@dataclass
class WorkItem:
    """What a socket's worker does next: speak a part of an utterance, or end it with `final`."""

    kind: Literal["speak", "final"]  # a part of the utterance to speak, or its end
    utterance: Utterance
    text: str = ""
    config: Config | None = None


class SocketSession:
    """One socket: messages read as they come (a cancel acts at once); a worker speaks the parts."""

    def __init__(self, websocket: WebSocket, state: ServerState) -> None:
        self.ws, self.state = websocket, state
        self.speaker = state.speaker  # the server's one: its requests built and spoken there
        self.rate = int(state.require_service().engine.sample_rate)
        self.config = Config(sample_rate=self.rate)
        self.jobs: collections.deque[WorkItem] = collections.deque()
        self.wake = asyncio.Event()
        self.numbers = iter(range(1, 1 << 62))
        self.utterance = Utterance(next(self.numbers))
        self.current: tuple[Ticket, asyncio.Queue[Event | None]] | None = (
            None  # the ticket being relayed and its events
        )
        self.speaking: WorkItem | None = None  # the job the worker is on
        self.closed = False
        self.send_lock = asyncio.Lock()
        self.active = asyncio.get_running_loop().time()  # the last text, config, flush or cancel (or audio sent)

    # --- sending ------------------------------------------------------------------------------
    async def send_json(self, message: dict) -> None:
        text = json.dumps(message, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: JSON's \\u escapes (send_error's are escaped already)
            text = json.dumps(message)
        async with self.send_lock:
            await self.ws.send_text(text)

    async def send_error(self, message: str, code: str) -> None:
        """An error event; what of `message` is not valid Unicode (a lone surrogate of the client's,
        echoed back) is shown as its escape, so the event can be sent as UTF-8."""
        shown = " ".join(message.split()).encode("utf-8", "backslashreplace").decode("utf-8")
        await self.send_json({"type": "error", "data": {"message": shown, "code": code}})

    async def send_event(self, kind: str, **more: object) -> None:
        await self.send_json({"type": "event", "data": {"event_type": kind, **more}})

    async def send_audio(self, data: bytes, config: Config, u: Utterance, piece: StreamPiece | None = None) -> None:
        """Audio of `u` (`piece`: the piece it ends, None for the encoder's tail), unless a cancel
        dropped it (checked once the socket is ours: nothing of a cancelled utterance follows what
        the cancel's own answers are sent after)."""
        if not data:
            return
        async with self.send_lock:
            if u.dropped:
                return
            if config.binary and config.format == "pcm":
                await self.ws.send_bytes(data)
                return
            audio = base64.b64encode(data).decode("ascii")
            message = {"audio": audio, "sample_rate": config.sample_rate, "format": config.format}
            await self.ws.send_text(json.dumps({"type": "audio", "data": message}))

    # --- reading ------------------------------------------------------------------------------
    async def run(self) -> None:
        worker = asyncio.create_task(self.work())
        limit = self.state.options.json_limit
        reading: asyncio.Future[Message] | None = None
        try:
            while True:
                reading = reading or asyncio.ensure_future(self.ws.receive())
                left = self.idle_left()
                if left <= 0:
                    await self.close_idle()
                    break
                done, _ = await asyncio.wait({reading}, timeout=left)
                if not done:
                    continue  # the clock is looked at again
                message, reading = reading.result(), None
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                try:
                    if raw is None:
                        raise BadMessage("binary frames are not taken: send JSON text frames", "invalid_message")
                    if len(raw) > limit:
                        raise BadMessage(
                            f"a message of {len(raw)} characters: at most {limit} are allowed", "message_too_large"
                        )
                    await self.read(raw)
                except BadMessage as e:
                    await self.send_error(str(e), e.code)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client left
        finally:
            if reading is not None and not reading.done():
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
            self.closed = True
            self.cancel()
            self.wake.set()
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    async def read(self, raw: str) -> None:
        """One text frame, within the size limit (BadMessage: an error event, and the socket goes on)."""
        await self.handle(parse_message(raw))

    def idle_left(self) -> float:
        """Seconds before the socket is idle for good: the idle timeout from its last text, config,
        flush or cancel, or from its last audio; while something of its is spoken, never."""
        timeout = self.state.options.socket_idle_timeout
        if self.jobs or self.speaking is not None:
            return timeout  # looked at again then (the worker's end of a job is activity)
        return self.active + timeout - asyncio.get_running_loop().time()

    def touch(self) -> None:
        self.active = asyncio.get_running_loop().time()

    async def close_idle(self) -> None:
        timeout = self.state.options.socket_idle_timeout
        reason = f"idle for {timeout:g} s: no text, config, flush or cancel (pings do not count)"
        try:
            await asyncio.wait_for(self.ws.close(code=1000, reason=close_reason(reason)), 10)
        except asyncio.TimeoutError:
            pass  # a client that reads nothing: the handler ends and the connection with it

    async def handle(self, message: dict) -> None:
        kind, data = message["type"], message.get("data")
        if kind == "ping":
            await self.send_json({"type": "pong"})
            return  # not activity: a ping keeps proxies awake, not the socket (idle_left)
        if kind == "cancel":
            self.cancel()
        elif kind == "config":
            if self.utterance.config is not None:
                raise BadMessage(
                    "a config cannot come between the fragments of an utterance (its audio keeps the format "
                    "and settings it began with): send it after the flush, or cancel first",
                    "invalid_config",
                )
            self.config = await asyncio.to_thread(self.configured, data)
            await self.send_event("config_accepted")
        elif kind == "text":
            if not isinstance(data, dict) or not isinstance(data.get("text"), str):
                raise BadMessage("a 'text' message needs data.text, a string: the text to speak")
            problem = unicode_problem(data["text"])
            if problem:
                raise BadMessage(f"data.text is {problem}: give UTF-8 text")
            if not data["text"]:
                return  # nothing: no activity either
            self.text(data["text"])
        elif kind == "flush":
            self.flush()
        else:
            raise BadMessage(
                f"unknown message type {json.dumps(kind)[:40]}: this socket takes {', '.join(MESSAGES)}",
                "invalid_type",
            )
        self.touch()

    def configured(self, data: object) -> Config:
        """The session's config after a config message (checked: a bad one leaves it as it was)."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise BadMessage(f"a 'config' message's data must be an object, got {type_name(data)}", "invalid_config")
        try:
            check_unicode(data)  # the speech endpoint's check: every string valid Unicode
        except ApiError as e:
            raise BadMessage(f"config {e.message}", "invalid_config") from None
        unknown = [k for k in data if k not in CONFIG_KEYS]
        if unknown:
            raise BadMessage(
                f"config field {shown_value(unknown[0])} is not known{did_you_mean(str(unknown[0]), CONFIG_KEYS)}; "
                f"known: {', '.join(CONFIG_KEYS)} (settings go in 'extra')",
                "invalid_config",
            )
        config = dataclasses.replace(self.config, settings=dict(self.config.settings))
        if data.get("format") is not None:
            fmt = data["format"]
            if not isinstance(fmt, str) or fmt.strip().lower() not in FORMATS:
                raise BadMessage(
                    f"config field 'format' must be {or_list(FORMATS)}, got {shown_value(fmt)}", "invalid_config"
                )
            config.format = fmt.strip().lower()
        if data.get("binary") is not None:
            if not isinstance(data["binary"], bool):
                raise BadMessage(
                    f"config field 'binary' must be true or false, got {shown_value(data['binary'])}",
                    "invalid_config",
                )
            config.binary = data["binary"]
        extra = data.get("extra") or {}
        if not isinstance(extra, dict):
            raise BadMessage(
                f"config field 'extra' must be an object of settings, got {type_name(extra)}", "invalid_config"
            )
        settings = {**config.settings, **extra}
        for key in ("speed", "sample_rate"):
            if data.get(key) is not None:
                settings[key] = data[key]
        config.voice = data.get("voice", config.voice)
        config.language = data.get("language", config.language)
        try:
            built = self.build("Hello.", config, settings)  # every setting checked now, by the schema
        except USAGE_ERRORS as e:
            raise BadMessage(one_line(e), "invalid_config") from None
        config.settings = settings
        config.sample_rate = int(built.settings["sample_rate"] or self.rate)
        return config

    def build(self, text: str, config: Config, settings: dict | None = None) -> Built:
        settings = config.settings if settings is None else settings
        return self.speaker.build(text, voice=config.voice, lang=config.language, settings=settings)

    # --- the utterance ------------------------------------------------------------------------
    def text(self, fragment: str) -> None:
        u = self.utterance
        if u.config is None:
            u.config = self.config  # its audio's format and settings, to its end
        parts, u.text = take_parts(u.text + fragment, self.state.options.max_input_chars)
        for part in parts:
            self.queue(WorkItem("speak", u, part, u.config))

    def flush(self) -> None:
        self.room_for_end()
        u, self.utterance = self.utterance, Utterance(next(self.numbers))
        config = u.config or self.config
        if u.text.strip():
            self.queue(WorkItem("speak", u, u.text, config))
        self.queue(WorkItem("final", u, config=config), force=True)

    def room_for_end(self) -> None:
        """An utterance's end may wait: the socket's backlog (of a client that sends and does not
        read: the worker is held by its sends) is under MAX_WAITING, else the busy error event."""
        if len(self.jobs) >= MAX_WAITING:
            raise BadMessage(
                f"{len(self.jobs)} parts and ends are already waiting on this socket: read their audio first", "busy"
            )

    def queue(self, job: WorkItem, force: bool = False) -> None:
        if not force and sum(j.kind == "speak" for j in self.jobs) >= MAX_PENDING:
            raise BadMessage(f"{MAX_PENDING} parts are already waiting on this socket: wait for their audio", "busy")
        self.jobs.append(job)
        self.wake.set()

    def cancel(self) -> None:
        """Barge-in: the text, the waiting parts and the request in the engine of this utterance
        (and of flushed ones not yet spoken) are dropped."""
        self.utterance.dropped = True
        for job in self.jobs:
            job.utterance.dropped = True
        if self.speaking is not None:
            self.speaking.utterance.dropped = True
        self.utterance = Utterance(next(self.numbers))
        self.jobs.clear()
        if self.current is not None:
            ticket, events = self.current
            ticket.cancel()  # its place is free at once; its jobs leave at the next forward
            events.put_nowait(None)  # the relay stops waiting
            self.current = None

    # --- the worker ---------------------------------------------------------------------------
    async def work(self) -> None:
        while not self.closed:
            while not self.jobs:
                self.wake.clear()
                await self.wake.wait()
                if self.closed:
                    return
            job = self.jobs.popleft()
            if job.kind == "final":
                await self.finish(job)
                self.touch()
                continue
            limit = self.state.options.max_input_chars
            while (
                self.jobs
                and self.jobs[0].kind == "speak"
                and self.jobs[0].utterance is job.utterance
                and len(job.text) + len(self.jobs[0].text) <= limit
            ):
                job.text += self.jobs.popleft().text  # parts that came while the last one spoke: one request
            self.speaking = job
            try:
                await self.speak(job)
            except (WebSocketDisconnect, RuntimeError, OSError):
                return
            finally:
                self.speaking = None
                self.touch()  # the idle time counts from the end of its audio

    def request_for(self, job: WorkItem) -> Request:
        assert job.config is not None
        request: Request = self.build(job.text, job.config).request
        u = job.utterance
        if u.parts == 0 or u.seed is None:
            u.seed = request.seed
            return request
        ref = u.ref if u.ref is not None else request.ref
        return dataclasses.replace(request, seed=seed_for(u.seed, u.parts), ref=ref)

    def encoder(self, job: WorkItem) -> tuple[Utterance, PieceEncoder]:
        u, config = job.utterance, job.config
        assert config is not None
        if u.encoder is None:
            u.encoder = PieceEncoder(FORMATS[config.format].name, self.rate, config.sample_rate, self.speaker.mark)
        return u, u.encoder

    async def speak(self, job: WorkItem) -> None:
        try:
            request = await asyncio.to_thread(self.request_for, job)
        except USAGE_ERRORS as e:
            await self.send_error(one_line(e), "invalid_request")
            return
        if job.utterance.dropped:  # cancelled while its request was built
            return
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Event | None] = asyncio.Queue()

        def put(e: Event) -> None:  # the engine loop's thread
            loop.call_soon_threadsafe(events.put_nowait, e)

        try:
            # the utterance's later parts go on from its first: their sentences leave one by one
            ticket = self.speaker.submit(request, put, continued=job.utterance.parts > 0)
        except (Busy, ServiceStopped) as e:
            await self.send_error(one_line(e), "busy")
            return
        except USAGE_ERRORS as e:
            await self.send_error(one_line(e), "invalid_request")
            return
        self.current = (ticket, events)
        done = False
        try:
            done = await self.relay(job, ticket, events)
        finally:
            if not done:
                ticket.cancel()
            if self.current is not None and self.current[0] is ticket:
                self.current = None

    async def relay(self, job: WorkItem, ticket: Ticket, events: asyncio.Queue[Event | None]) -> bool:
        u, encoder = self.encoder(job)
        assert job.config is not None
        while True:
            event = await events.get()
            if event is None:  # cancelled
                return False
            if event.kind == "error":
                error = event.error or RuntimeError("the request failed")
                await self.send_error(from_engine(error).message, "synthesis_failed")
                return True
            if event.kind == "done":
                if u.parts == 0:
                    u.ref = ticket.voice
                u.parts += 1
                return True
            assert event.piece is not None
            audio = event.piece.audio
            data = await asyncio.to_thread(encoder.feed, audio)
            if u.dropped:
                return False  # cancelled while it was encoded
            await self.send_audio(data, job.config, u, event.piece)

    async def finish(self, job: WorkItem) -> None:
        u = job.utterance
        if u.dropped:
            return
        if u.encoder is not None and job.config is not None:
            tail = u.encoder.finish()
            await self.send_audio(tail, job.config, u)
        # the voice its parts were spoken in: the prompt cloned, or its first part's own (design.voice_prompt)
        await self.send_event("final", voice_prompt=voice_prompt(u.ref))
