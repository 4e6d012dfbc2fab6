"""`omnivoice wyoming`: the Wyoming protocol (Home Assistant's voice pipeline) on the engine loop.

    server = WyomingServer(speaker, WyomingOptions(uri="tcp://127.0.0.1:10200"))
    asyncio.run(server.serve(on_ready=print))     # until server.close() (SIGTERM, Ctrl-C)

Events (the `wyoming` package's own classes; needs the `wyoming` extra):
- `describe` -> `info`: one TTS program whose voices are the saved voices, OpenAI's names and
  `auto`, each with the languages advertised (ISO 639-1 codes and a few three-letter ones the
  model has that have none; a request may give any code, tag or name `--lang` takes);
- `synthesize` (text; voice name, language, speaker: the speaker is read as voice-design items,
  e.g. "female, low pitch") -> `audio-start` (24000 Hz, or --sample-rate; 16-bit, mono), `audio-chunk`s as the
  pieces of the text are ready (the streamed render: a long text's first sentence plays while
  the rest is generated), `audio-stop`;
- streaming: `synthesize-start`, `synthesize-chunk`s, `synthesize-stop` -> `synthesize-stopped`.
  The text is spoken as it arrives, from its first sentence end (a sentence mark followed by a
  space): each part that is ready is one audio-start .. audio-stop. The parts after the first
  are spoken in the first part's voice (its piece 0, as the streamed render of a whole text
  does) with seeds seed + 1, seed + 2, ...; the `synthesize` sent for older servers inside a
  stream is not spoken twice;
- `ping` -> `pong`; an event of another type -> an `error` event (the connection stays open).

A request that cannot be spoken (a bad value, a full engine, a failure) gets an `error` event in
the words of the command line, and then the connection is closed, as wyoming-piper does: Home
Assistant reads a synthesis until its audio-stop (or synthesize-stopped) and would otherwise wait.

Every satellite shares the one engine loop (`speaker.Speaker`): their requests are packed into
the same forwards. A client that disconnects cancels its work at once. Bounds: `max_queue`
requests in the engine (`Busy`), `MAX_PENDING` requests waiting per connection, `max_connections`
connections, `max_per_peer` of them from one address (Home Assistant opens one per request; a
host that holds more is refused with a `busy` error, so no one address locks the others out),
and an event's data of at most `event_limit` bytes (16 KiB and 6 per character of --max-chars):
a larger one is read and dropped (up to `MAX_DRAIN` bytes) and answered with an error event. A
header or data is JSON nested at most `MAX_DEPTH` deep, counted before it is parsed (a deeper one
is a `bad-event` error, never a RecursionError). A connection that sends nothing for
`idle_timeout` seconds while nothing of its is being spoken (a half-open socket, a client gone
without a word) gets an `idle-timeout` error and is closed; so is one that reads none of its
audio for that long. Nothing a client sends stops the server or another client.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, TypeVar
from urllib.parse import urlparse

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from ..app.deliver import PiecePcm
from ..app.session import seed_for
from ..app.speaker import USAGE_ERRORS, Speaker, one_line, take_parts
from ..engine.errors import InvalidRequest
from ..engine.pipeline import Request
from ..engine.text import list_languages
from ..engine.tickets import Busy, ServiceStopped, Summary, Ticket
from ..engine.tickets import Event as EngineEvent

if TYPE_CHECKING:
    from ..engine.voice import VoicePrompt

Read = TypeVar("Read")  # a wyoming event class's reading

PROGRAM = "omnivoice"
ATTRIBUTION = Attribution(name="k2-fsa (OmniVoice)", url="https://huggingface.co/k2-fsa/OmniVoice")
WIDTH, CHANNELS = 2, 1  # 16-bit mono
CHUNK_SAMPLES = 2400  # samples per audio-chunk (0.1 s at 24 kHz)
MAX_PENDING = 32  # requests waiting on one connection (beyond: an error event)
MAX_DRAIN = 16 * 1024 * 1024  # bytes of an oversized event read and dropped; beyond, the connection closes
# Languages the model has that no ISO 639-1 code names, advertised beside the two-letter ones.
EXTRA_LANGUAGES = ("yue", "fil", "ceb", "ckb", "nan", "ast", "haw")
MAX_DEPTH = 32  # JSON nesting of an event's header or data (a synthesize is 3 deep)
IDLE_TIMEOUT = 60.0  # seconds a connection may send nothing while nothing of its is spoken
MAX_PER_PEER = 32  # connections from one address
EVENTS = ("describe", "synthesize", "synthesize-start", "synthesize-chunk", "synthesize-stop", "ping")


@dataclass(frozen=True)
class WyomingOptions:
    uri: str = "tcp://127.0.0.1:10200"  # tcp://HOST:PORT (port 0: any free one) or unix://PATH
    max_connections: int = 256
    max_per_peer: int = MAX_PER_PEER  # connections from one address (a unix socket's clients: no limit)
    idle_timeout: float = IDLE_TIMEOUT  # seconds without an event (and nothing spoken) before a close
    quiet: bool = False  # no per-request log lines
    version: str = "0"  # what `info` says of the program
    log: Callable[[str], None] | None = None  # where log lines go (default: stderr)

    def say(self, line: str) -> None:
        if self.quiet:
            return
        if self.log is not None:
            self.log(line)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()


class BadEvent(Exception):
    """What came is not an event this server can read on (the connection is closed after)."""


class TooLarge(Exception):
    """An event over the limit, read and dropped: the connection goes on."""


def parse_uri(uri: str) -> tuple[str, str, int | None]:
    """("tcp", host, port) or ("unix", path, None); InvalidRequest in --uri's words."""
    try:
        parsed = urlparse(uri)
        port = parsed.port
    except ValueError:
        parsed, port = None, None
    if parsed is not None and parsed.scheme == "tcp" and parsed.hostname and port is not None:
        return "tcp", parsed.hostname, port
    if parsed is not None and parsed.scheme == "unix" and parsed.path:
        return "unix", parsed.path, None
    raise InvalidRequest(f"--uri must be tcp://HOST:PORT or unix://PATH, got {uri!r}")


def advertised_languages() -> list[str]:
    codes = {code for code, _ in list_languages()}
    return sorted(c for c in codes if len(c) == 2) + [c for c in EXTRA_LANGUAGES if c in codes]


def info_event(speaker: Speaker, version: str) -> Event:
    languages = advertised_languages()
    languages += [code for code, _ in speaker.own().languages if code not in languages]  # a fine-tune's own
    voices = []
    for v in speaker.voices():
        if v["type"] == "saved":
            seconds = f"{v['seconds']:.1f} s" if v.get("seconds") else "a"
            about = f"saved voice ({seconds} reference)"
        elif v["type"] == "checkpoint":
            about = "the checkpoint's own voice" + (f" ({v['lang']})" if v.get("lang") else "")
        elif v["type"] == "openai":
            about = f"designed: {v['instruct']}"
        else:
            about = "the model's own voice (a new one per request, unless the server pins --seed)"
        voices.append(
            TtsVoice(
                name=v["name"],
                attribution=ATTRIBUTION,
                installed=True,
                description=about,
                version=None,
                languages=languages,
            )
        )
    program = TtsProgram(
        name=PROGRAM,
        attribution=ATTRIBUTION,
        installed=True,
        version=version,
        description="OmniVoice text to speech (omnivoice-cli): packed generation, saved and designed voices, streaming",
        voices=voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program]).event()


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """How deep the arrays and objects of the JSON text `raw` nest, counted up to `limit + 1`
    (a text with no more than `limit` brackets in all is not scanned): to refuse a deep one
    before json.loads recurses into it."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return 0
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', raw)):
        depth += 1 if m.group() in (b"[", b"{") else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def _json(raw: bytes, what: str, kind: str = "JSON") -> object:
    """json.loads of an event's header or data, its nesting checked first; BadEvent for either."""
    if json_depth(raw) > MAX_DEPTH:
        raise BadEvent(f"{what} nests JSON deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BadEvent(f"{what} is not {kind}") from None


async def read_event(reader: asyncio.StreamReader, limit: int) -> Event | None:
    """The next event (None at the end), its data and payload within `limit` bytes each."""
    try:
        line = await reader.readline()
    except ValueError:  # asyncio's LimitOverrunError: a header line over the reader's limit
        raise BadEvent(f"an event's header line is over {limit} bytes") from None
    if not line or not line.endswith(b"\n"):
        return None
    header = _json(line, "an event's header", "a line of JSON")
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise BadEvent("an event's header must be a JSON object with a 'type'")
    data = header.get("data") or {}
    lengths = [header.get("data_length") or 0, header.get("payload_length") or 0]
    if not isinstance(data, dict) or not all(isinstance(n, int) and n >= 0 for n in lengths):
        raise BadEvent("an event's 'data' must be an object and its lengths counts of bytes")
    kind = header["type"][:40]
    if max(lengths) > limit:
        await _drain(reader, sum(lengths))
        raise TooLarge(
            f"the {kind!r} event is {sum(lengths)} bytes long: at most {limit} bytes are allowed (--max-chars)"
        )
    try:
        raw = await reader.readexactly(lengths[0]) if lengths[0] else b""
        payload = await reader.readexactly(lengths[1]) if lengths[1] else None
    except asyncio.IncompleteReadError:
        return None
    if raw:
        more = _json(raw, f"the {kind!r} event's data")
        if not isinstance(more, dict):
            raise BadEvent(f"the {kind!r} event's data must be a JSON object")
        data.update(more)
    return Event(type=header["type"], data=data, payload=payload)


async def _drain(reader: asyncio.StreamReader, n: int) -> None:
    if n > MAX_DRAIN:
        raise BadEvent(f"an event of {n} bytes is announced: far over the limit")
    while n > 0:
        got = await reader.read(min(n, 65536))
        if not got:
            return
        n -= len(got)


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
class Job:
    kind: str  # "speak" or "stopped"
    text: str = ""
    voice: SynthesizeVoice | None = None
    stream: Stream | None = None
    chars: int = field(default=0)


class Connection:
    """One client: events read in order; requests spoken one after the other by a worker."""

    def __init__(self, server: "WyomingServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server, self.reader, self.writer = server, reader, writer
        self.jobs: collections.deque[Job] = collections.deque()
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
                    await self.queue(Job("speak", s.text, s.voice))
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
            await self.queue(Job("speak", part, stream.voice, stream))

    async def stop_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is None:
            raise InvalidRequest("synthesize-stop outside a stream: send synthesize-start first")
        rest = stream.text if stream.handed or stream.text.strip() else stream.fallback
        if rest.strip():
            await self.queue(Job("speak", rest, stream.voice, stream))
        await self.queue(Job("stopped"), force=True)

    async def queue(self, job: Job, force: bool = False) -> None:
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


def parse(cls: type[Read], event: Event) -> Read:
    """The wyoming class's reading of an event; InvalidRequest for a missing or wrong field."""
    if cls in (Synthesize, SynthesizeChunk) and event.data.get("text") is None:
        raise InvalidRequest(f"the {event.type!r} event has no 'text': give the text to speak")
    try:
        found = cls.from_event(event)  # type: ignore[attr-defined]  # every wyoming event class has it
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidRequest(f"the {event.type!r} event is missing a field or has a wrong one ({e!r})") from None
    text = getattr(found, "text", "")
    if not isinstance(text, str):
        raise InvalidRequest(f"the {event.type!r} event's 'text' must be a string, got {type(text).__name__}")
    voice = getattr(found, "voice", None)
    if voice is not None and not all(
        isinstance(v, (str, type(None))) for v in (voice.name, voice.language, voice.speaker)
    ):
        raise InvalidRequest(f"the {event.type!r} event's 'voice' fields must be strings")
    return found


class Speaking:
    """One request of a connection: built, submitted, its audio relayed as it is ready."""

    def __init__(self, connection: Connection, job: Job) -> None:
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
            f"seconds={summary.seconds:.2f} seed={summary.seed} voice={voice} forwards={summary.forwards}"
            + (f" stream-part={stream.parts}" if stream is not None else "")
        )


class WyomingServer:
    """Listens on options.uri; one Connection per client, all on one Speaker."""

    def __init__(self, speaker: Speaker, options: WyomingOptions) -> None:
        self.speaker, self.options = speaker, options
        self.event_limit = 16 * 1024 + 6 * speaker.options.max_chars
        self.connections: set[asyncio.Task[None]] = set()
        self.peers: collections.Counter[str] = collections.Counter()  # connections open per address
        self._server: asyncio.AbstractServer | None = None
        self._closed: asyncio.Event | None = None
        self.address: str | None = None  # where it listens, once it does
        self._socket: str | None = None  # the unix socket's file, removed at the end

    async def start(self) -> str:
        kind, where, port = parse_uri(self.options.uri)
        limit = self.event_limit + 4096  # a header line with its data inline
        if kind == "tcp":
            self._server = await asyncio.start_server(self._accept, where, port, limit=limit)
            host, bound = self._server.sockets[0].getsockname()[:2]
            self.address = f"tcp://{f'[{host}]' if ':' in host else host}:{bound}"
        else:
            _remove_socket(where)  # a stale one of an earlier run
            self._server = await asyncio.start_unix_server(self._accept, where, limit=limit)
            self.address = f"unix://{where}"
            self._socket = where
        self._closed = asyncio.Event()
        return self.address

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_address(writer)
        refused = None
        if len(self.connections) >= self.options.max_connections:
            refused = f"the server has {len(self.connections)} connections, the most it takes: try again shortly"
        elif peer is not None and self.peers[peer] >= self.options.max_per_peer:
            refused = (
                f"{peer} has {self.peers[peer]} connections open, the most one address may hold: "
                "close one or try again shortly"
            )
        if refused is not None:
            try:
                await asyncio.wait_for(async_write_event(Error(text=refused, code="busy").event(), writer), 5)
            except (asyncio.TimeoutError, ConnectionError, OSError):
                pass
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None  # a connection's handler runs as a task
        self.connections.add(task)
        if peer is not None:
            self.peers[peer] += 1
        try:
            with self.speaker.hold():  # --idle-unload: never while a connection is open
                await Connection(self, reader, writer).run()
        finally:
            self.connections.discard(task)
            if peer is not None:
                self.peers[peer] -= 1
                if self.peers[peer] <= 0:
                    del self.peers[peer]

    async def serve(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Listen until close(); then the connections are ended and the engine loop stopped."""
        address = self.address or await self.start()
        if on_ready is not None:
            on_ready(address)
        closed, server = self._closed, self._server
        assert closed is not None and server is not None  # start() made them
        try:
            await closed.wait()
        finally:
            server.close()
            for task in list(self.connections):
                task.cancel()
            await asyncio.gather(*self.connections, return_exceptions=True)
            if self._socket is not None:
                _remove_socket(self._socket)
            await asyncio.to_thread(self.speaker.stop)

    def close(self) -> None:
        """Stop serving (from the event loop's thread)."""
        if self._closed is not None:
            self._closed.set()


def peer_address(writer: asyncio.StreamWriter) -> str | None:
    """The client's IP address (a TCP connection), or None (a unix socket's: all local)."""
    name = writer.get_extra_info("peername")
    return str(name[0]) if isinstance(name, tuple) and name else None


def _remove_socket(path: str) -> None:
    """Remove a unix socket's file (only a socket: never another file at that path)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass
