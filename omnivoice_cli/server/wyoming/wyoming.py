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

Here: the options and the listening server (`WyomingServer`: connections accepted within the
bounds); one client's events and syntheses: wyomingconnection.py; reading events off the wire, and
the `info` event: wyomingevents.py.
"""

from __future__ import annotations

import asyncio
import collections
import os
import stat
import sys
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlparse

from wyoming.error import Error
from wyoming.event import async_write_event

from ...app.door.speaker import Speaker
from ...engine.errors import InvalidRequest
from .wyomingconnection import Connection

IDLE_TIMEOUT = 60.0  # seconds a connection may send nothing while nothing of its is spoken
MAX_PER_PEER = 32  # connections from one address


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
            remove_socket(where)  # a stale one of an earlier run
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
                remove_socket(self._socket)
            await asyncio.to_thread(self.speaker.stop)

    def close(self) -> None:
        """Stop serving (from the event loop's thread)."""
        if self._closed is not None:
            self._closed.set()


def peer_address(writer: asyncio.StreamWriter) -> str | None:
    """The client's IP address (a TCP connection), or None (a unix socket's: all local)."""
    name = writer.get_extra_info("peername")
    return str(name[0]) if isinstance(name, tuple) and name else None


def remove_socket(path: str) -> None:
    """Remove a unix socket's file (only a socket: never another file at that path)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass
