"""One Wyoming client of `omnivoice wyoming` (`Connection`): its events read in order, its
syntheses queued (`QueuedSynthesis`, at most `MAX_PENDING` waiting) and spoken one after the other
by a worker (`Speaking`: built, submitted to the shared engine loop, its audio relayed as
audio-start, audio-chunks, audio-stop as the pieces are ready); a streamed synthesis
(synthesize-start .. synthesize-stop, `Stream`) spoken part by part as its text arrives.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from ...app.deliver import PiecePcm
from ...app.door.speaker import USAGE_ERRORS, Speaker
from ...app.door.textparts import take_parts
from ...app.session import seed_for
from ...app.voices.design import voice_prompt
from ...engine.errors import InvalidRequest, one_line
from ...engine.planning import Request
from ...engine.tickets import Busy, ServiceStopped, Summary, Ticket
from ...engine.tickets import Event as EngineEvent
from .wyomingevents import EVENTS, PROGRAM, BadEvent, TooLarge, info_event, parse, read_event

if TYPE_CHECKING:
    from ...engine.sound.voice import VoicePrompt

WIDTH, CHANNELS = 2, 1  # 16-bit mono
CHUNK_SAMPLES = 2400  # samples per audio-chunk (0.1 s at 24 kHz)
MAX_PENDING = 32  # requests waiting on one connection (beyond: an error event)


class ServerOptions(Protocol):
    """What a connection reads of the server's options (wyoming.WyomingOptions)."""

    @property
    def idle_timeout(self) -> float: ...

    @property
    def version(self) -> str: ...

    def say(self, line: str) -> None: ...


class Server(Protocol):
    """What a connection uses of the server that accepted it (wyoming.WyomingServer)."""

    @property
    def speaker(self) -> Speaker: ...

    @property
    def options(self) -> ServerOptions: ...

    @property
    def event_limit(self) -> int: ...


@dataclass
class Stream:
    """A streamed synthesis (synthesize-start .. synthesize-stop)."""

    voice: SynthesizeVoice | None
    text: str = ""  # arrived, not yet handed on
    fallback: str = ""  # the text of a `synthesize` inside the stream (spoken only if no chunk came)
    handed: bool = False  # some text was handed on
    ref: VoicePrompt | None = None  # the voice of its first part, for the others
    seed: int | None = None  # its first part's seed
    parts: int = 0  # parts spoken


@dataclass
class QueuedSynthesis:
    """What a connection has to do next, in order: speak a text (a `synthesize`, or a part of a
    stream's text) or say its stream ended (`synthesize-stopped`)."""

    kind: Literal["speak", "stopped"]  # a text to speak, or the stream's end
    text: str = ""
    voice: SynthesizeVoice | None = None
    stream: Stream | None = None
    chars: int = field(default=0)


class Connection:
    """One client: events read in order; requests spoken one after the other by a worker."""

    def __init__(self, server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server, self.reader, self.writer = server, reader, writer
        self.jobs: collections.deque[QueuedSynthesis] = collections.deque()
        self.wake = asyncio.Event()
        self.stream: Stream | None = None
        self.closed = False
        self.speaking = False  # the worker is on a request (its audio is being made or sent)

    @property
    def idle(self) -> bool:
        """Nothing of this connection's is waiting or being spoken: it is the client's turn."""
        return not self.jobs and not self.speaking

    async def send(self, event: Event) -> None:
        """One event written; a client that reads none of it for idle_timeout is cut off."""
        try:
            await asyncio.wait_for(async_write_event(event, self.writer), self.server.options.idle_timeout)
        except asyncio.TimeoutError:
            self.closed = True
            self.writer.transport.abort()
            raise ConnectionError("the client read nothing for the idle timeout") from None

    async def next_event(self) -> Event | None:
        """The next event, or None at the end or after idle_timeout seconds of nothing while the
        connection is idle (then an `idle-timeout` error is sent and the connection closed)."""
        timeout = self.server.options.idle_timeout
        reading = asyncio.ensure_future(read_event(self.reader, self.server.event_limit))
        try:
            while True:
                done, _ = await asyncio.wait({reading}, timeout=timeout)
                if done:
                    return reading.result()
                if self.idle:
                    await self.fail(
                        f"nothing came for {timeout:g} s: closing the connection (--idle-timeout)", "idle-timeout"
                    )
                    return None
        finally:
            if not reading.done():
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)

    async def send_error(self, text: str, code: str) -> None:
        await self.send(Error(text=text, code=code).event())

    async def fail(self, text: str, code: str) -> None:
        """A request that cannot be spoken: its error event, then the connection closed."""
        if self.closed:
            return
        self.closed = True
        try:
            await self.send_error(text, code)
        finally:
            self.writer.close()  # the reader then sees the end

    async def run(self) -> None:
        worker = asyncio.create_task(self.work())
        try:
            while not self.closed:
                try:
                    event = await self.next_event()
                except TooLarge as e:
                    await self.fail(str(e), "too-large")
                    break
                except BadEvent as e:
                    await self.fail(f"{e}: closing the connection", "bad-event")
                    break
                if event is None or self.closed:
                    break
                await self.handle(event)
        except (ConnectionError, OSError):
            pass  # the client left
        except Exception as e:  # noqa: BLE001 - a fault of ours: this client hears of it, the server goes on
            self.server.options.say(f"omnivoice wyoming: internal error on a connection: {one_line(e)}")
            try:
                await self.fail(f"internal error: {one_line(e)}", "internal-error")
            except (ConnectionError, OSError):
                pass
        finally:
            worker.cancel()  # its request, if any, is cancelled (Speaking.relay)
            await asyncio.gather(worker, return_exceptions=True)
            self.writer.close()

    async def handle(self, event: Event) -> None:
        kind = event.type
        if Describe.is_type(kind):
            info = await asyncio.to_thread(info_event, self.server.speaker, self.server.options.version)
            await self.send(info)
        elif Ping.is_type(kind):
            await self.send(Pong(text=event.data.get("text")).event())
        elif kind == "select-program":
            if event.data.get("name") != PROGRAM:
                await self.send_error(
                    f"unknown program {event.data.get('name')!r}: this server has {PROGRAM!r}", "unknown-program"
                )
        elif kind.startswith("synthesize"):
            await self.synthesis_event(event)
        else:
            await self.send_error(
                f"unknown event type {kind[:40]!r}: this server takes {', '.join(EVENTS)}", "unknown-event"
            )

    async def synthesis_event(self, event: Event) -> None:
        kind = event.type
        try:
            if Synthesize.is_type(kind):
                s = parse(Synthesize, event)
                if self.stream is not None:  # sent for older servers inside a stream: spoken by the chunks
                    self.stream.fallback = s.text
                else:
                    await self.queue(QueuedSynthesis("speak", s.text, s.voice))
            elif SynthesizeStart.is_type(kind):
                if self.stream is not None:
                    raise InvalidRequest("synthesize-start inside a stream: send synthesize-stop first")
                self.stream = Stream(parse(SynthesizeStart, event).voice)
            elif SynthesizeChunk.is_type(kind):
                await self.chunk(parse(SynthesizeChunk, event).text)
            elif SynthesizeStop.is_type(kind):
                await self.stop_stream()
            else:
                await self.send_error(
                    f"unknown event type {kind[:40]!r}: this server takes {', '.join(EVENTS)}", "unknown-event"
                )
        except InvalidRequest as e:
            await self.fail(one_line(e), "invalid-request")

    async def chunk(self, text: str) -> None:
        stream = self.stream
        if stream is None:
            raise InvalidRequest("synthesize-chunk outside a stream: send synthesize-start first")
        parts, stream.text = take_parts(stream.text + text, self.server.speaker.options.max_chars)
        for part in parts:
            stream.handed = True
            await self.queue(QueuedSynthesis("speak", part, stream.voice, stream))

    async def stop_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is None:
            raise InvalidRequest("synthesize-stop outside a stream: send synthesize-start first")
        rest = stream.text if stream.handed or stream.text.strip() else stream.fallback
        if rest.strip():
            await self.queue(QueuedSynthesis("speak", rest, stream.voice, stream))
        await self.queue(QueuedSynthesis("stopped"), force=True)

    async def queue(self, job: QueuedSynthesis, force: bool = False) -> None:
        if len(self.jobs) >= MAX_PENDING and not force:
            raise InvalidRequest(f"{MAX_PENDING} requests are already waiting on this connection: wait for their audio")
        self.jobs.append(job)
        self.wake.set()

    async def work(self) -> None:
        while not self.closed:
            while not self.jobs:
                self.wake.clear()
                await self.wake.wait()
            job = self.jobs.popleft()
            if self.closed:
                return
            if job.kind == "stopped":
                await self.send(SynthesizeStopped().event())
                continue
            self.speaking = True
            limit = self.server.speaker.options.max_chars
            while (
                job.stream is not None
                and self.jobs
                and self.jobs[0].stream is job.stream
                and len(job.text) + len(self.jobs[0].text) <= limit
            ):
                job.text += self.jobs.popleft().text  # parts that arrived while the last one spoke: one request
            try:
                await Speaking(self, job).run()
            finally:
                self.speaking = False


class Speaking:
    """One request of a connection: built, submitted, its audio relayed as it is ready."""

    def __init__(self, connection: Connection, job: QueuedSynthesis) -> None:
        self.connection, self.job = connection, job
        self.speaker = connection.server.speaker

    async def run(self) -> None:
        conn = self.connection
        try:
            request = await asyncio.to_thread(self.build)
        except USAGE_ERRORS as e:
            await conn.fail(one_line(e), "invalid-request")
            return
        except Exception as e:  # noqa: BLE001 - a fault of ours: the client hears of it, the server goes on
            await conn.fail(f"internal error: {one_line(e)}", "internal-error")
            return
        await self.relay(request)

    def build(self) -> Request:
        job, voice = self.job, self.job.voice
        built = self.speaker.build(
            job.text,
            voice=voice.name if voice else None,
            lang=voice.language if voice else None,
            instruct=voice.speaker if voice else None,
        )
        request: Request = built.request
        stream = job.stream
        if stream is None:
            return request
        if stream.parts == 0 or stream.seed is None:
            stream.seed = request.seed
            return request
        return dataclasses.replace(
            request, seed=seed_for(stream.seed, stream.parts), ref=stream.ref if stream.ref is not None else request.ref
        )

    async def relay(self, request: Request) -> None:
        conn, loop = self.connection, asyncio.get_running_loop()
        events: asyncio.Queue[EngineEvent] = asyncio.Queue()

        def put(e: EngineEvent) -> None:  # the engine loop's thread
            loop.call_soon_threadsafe(events.put_nowait, e)

        try:
            if not self.speaker.loaded:  # asleep (--idle-unload): loaded again off the event loop
                await asyncio.to_thread(self.speaker.start)
            stream = self.job.stream  # its parts after the first go on from it: a sentence a piece
            continued = stream is not None and stream.parts > 0
            ticket = self.speaker.submit(request, put, continued=continued)  # quick, never left behind by a cancel
        except (Busy, ServiceStopped) as e:
            await conn.fail(one_line(e), "busy")
            return
        except USAGE_ERRORS as e:
            await conn.fail(one_line(e), "invalid-request")
            return
        done = False
        try:
            done = await self.send_audio(events, ticket)
        finally:
            if not done:
                ticket.cancel()

    async def send_audio(self, events: asyncio.Queue[EngineEvent], ticket: Ticket) -> bool:
        conn, rate, started = self.connection, self.speaker.output_rate, False
        pcm, sent = PiecePcm(self.speaker.sample_rate, rate), 0  # --sample-rate: e.g. 16000
        while True:
            event = await events.get()
            if event.kind == "error":
                error = event.error or RuntimeError("the request failed")
                code = "invalid-request" if isinstance(error, USAGE_ERRORS) else "synthesis-failed"
                await conn.fail(one_line(error), code)
                return True
            if not started:
                await conn.send(AudioStart(rate=rate, width=WIDTH, channels=CHANNELS).event())
                started = True
            done = event.kind == "done"
            if done:
                data = pcm.finish()
            else:
                assert event.piece is not None
                data = pcm.feed(event.piece.audio)
            step = CHUNK_SAMPLES * WIDTH
            for i in range(0, len(data), step):
                chunk = AudioChunk(
                    rate=rate,
                    width=WIDTH,
                    channels=CHANNELS,
                    audio=data[i : i + step],
                    timestamp=(sent + i // WIDTH) * 1000 // rate,
                )
                await conn.send(chunk.event())
            sent += len(data) // WIDTH
            if done:
                await conn.send(AudioStop().event())
                assert event.summary is not None
                self.finished(ticket, event.summary)
                return True

    def finished(self, ticket: Ticket, summary: Summary) -> None:
        stream = self.job.stream
        if stream is not None:
            if stream.parts == 0:
                stream.ref = ticket.voice
            stream.parts += 1
        voice = self.job.voice.name if self.job.voice and self.job.voice.name else "default"
        self.connection.server.options.say(
            f"omnivoice wyoming: synthesize chars={len(self.job.text)} audio={summary.audio_seconds:.2f}s "
            f"seconds={summary.seconds:.2f} seed={summary.seed} voice={voice} forwards={summary.forwards} "
            f"voice_prompt={voice_prompt(ticket.request.ref) or 'none'}"
            + (f" stream-part={stream.parts}" if stream is not None else "")
        )
