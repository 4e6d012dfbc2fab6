"""`omnivoice wyoming` on the tiny checkpoint, driven by the `wyoming` package's own client
(AsyncTcpClient) over real TCP on 127.0.0.1: info, audio equal to `say --seed`, streamed pieces,
streaming synthesis, many satellites on one engine loop, clients that leave, bad events."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

pytest.importorskip("wyoming")  # the wyoming extra (CI installs it with the test extra)

from helpers.service import Forwards
from helpers.wyoming import NUM_STEP, SEED, Running, run
from server_util import TINY_CKPT, hold_loop, wait_for, wav_samples
from wyoming.audio import AudioChunk, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from omnivoice_cli.app.door.textparts import ready_text
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.stream.cut import cut_segments
from omnivoice_cli.server.wyoming.wyoming import parse_uri
from omnivoice_cli.server.wyoming.wyomingevents import MAX_DEPTH, json_depth

THREE = (
    "Good morning to all of you here today. "
    "The train to the city leaves at seven in the evening, so there is plenty of time left for tea. "
    "She packed her bags and then she checked the tickets twice before she called a taxi home."
)


@pytest.fixture(scope="module")
def alice(module_home, ref_voice):
    from omnivoice_cli.app.voices import voices

    voices.save("alice", ref_voice, source="test")
    return "alice"


@pytest.fixture(scope="module")
def srv(engine, module_home):
    running = Running(engine)
    yield running
    running.close()


async def synthesize(client, text, voice=None):
    """(audio-chunk payloads, every event's type) of one synthesize, up to audio-stop or error."""
    await client.write_event(Synthesize(text=text, voice=voice).event())
    chunks, kinds = [], []
    while True:
        event = await client.read_event()
        assert event is not None, "the server closed the connection"
        kinds.append(event.type)
        if AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            assert (chunk.rate, chunk.width, chunk.channels) == (24000, 2, 1)
            chunks.append(chunk.audio)
        if event.type in ("audio-stop", "error"):
            return chunks, kinds, event


def samples(chunks) -> np.ndarray:
    return np.frombuffer(b"".join(chunks), dtype="<i2")


async def speak_wyoming(srv, text, voice=None):
    async with srv.client() as client:
        chunks, kinds, last = await synthesize(client, text, voice)
    assert AudioStop.is_type(last.type), last
    return samples(chunks)


# --- pieces that need no server ------------------------------------------------------------------


def test_a_sentence_end_counts_once_a_space_follows_it():
    assert ready_text("Hello there. How are") == ("Hello there.", " How are")
    assert ready_text("It costs 3.") == ("", "It costs 3.")  # it may go on as '3.5 euros'
    assert ready_text("It costs 3.5 euros. And") == ("It costs 3.5 euros.", " And")
    assert ready_text("One! Two? Three") == ("One! Two?", " Three")


def test_the_uri_is_tcp_or_unix():
    assert parse_uri("tcp://0.0.0.0:10200") == ("tcp", "0.0.0.0", 10200)
    assert parse_uri("unix:///run/omnivoice.sock") == ("unix", "/run/omnivoice.sock", None)
    for bad in ("tcp://localhost", "http://x:1", "10200", "tcp://x:99999"):
        with pytest.raises(InvalidRequest, match="--uri must be tcp://HOST:PORT or unix://PATH"):
            parse_uri(bad)


# --- check 1 ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_describe_lists_the_voices_and_languages(srv, alice):
    async def go():
        async with srv.client() as client:
            await client.write_event(Describe().event())
            return Info.from_event(await client.read_event())

    info = run(go())
    assert len(info.tts) == 1 and not info.asr
    program = info.tts[0]
    assert program.name == "omnivoice" and program.installed and program.version
    assert program.supports_synthesize_streaming and "OmniVoice" in program.attribution.url
    names = [v.name for v in program.voices]
    assert names[0] == "alice" and names[-1] == "auto" and {"alloy", "onyx", "cedar"} <= set(names)
    assert "saved voice" in program.voices[0].description
    languages = program.voices[0].languages
    assert {"en", "de", "zh", "ja", "yue", "fil"} <= set(languages)
    assert all(len(code) in (2, 3) for code in languages) and all(v.languages == languages for v in program.voices)


@pytest.mark.slow
def test_a_one_piece_text_equals_say_with_the_seed(srv, invoke, tmp_path):
    text = "I can speak in the same voice."
    got = run(speak_wyoming(srv, text))
    out = tmp_path / "say.wav"
    r = invoke("say", text, "--model", TINY_CKPT, "--seed", SEED, "--num-step", NUM_STEP, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    assert len(got) > 0 and np.array_equal(got, wav_samples(out.read_bytes()))
    # a saved voice and a language, as a satellite names them, against `say --voice --lang`
    got = run(speak_wyoming(srv, text, SynthesizeVoice(name="alloy")))
    r = invoke(
        "say", text, "--model", TINY_CKPT, "--seed", SEED, "--num-step", NUM_STEP, "--voice", "alloy", "-o", out, "-q"
    )
    assert r.exit_code == 0, r.stderr
    assert np.array_equal(got, wav_samples(out.read_bytes()))


@pytest.mark.slow
def test_a_three_sentence_text_streams_its_first_piece_before_the_last_is_made(srv):
    config = srv.service.config
    assert (
        len(cut_segments(THREE, config.first_seconds, config.piece_seconds, sentence_seconds=config.sentence_seconds))
        == 3
    )
    first_chunk, waited = threading.Event(), []

    def on_forward(jobs):  # the engine loop, before each forward: hold the last piece's first forward
        if any(k == 2 for _, k in jobs) and not waited:
            waited.append(first_chunk.wait(120))  # released only by the client's first audio

    async def go():
        async with srv.client() as client:
            await client.write_event(Synthesize(text=THREE).event())
            chunks, kinds = 0, []
            while True:
                event = await client.read_event()
                kinds.append(event.type)
                if AudioChunk.is_type(event.type):
                    chunks += 1
                    first_chunk.set()
                if event.type in ("audio-stop", "error"):
                    return chunks, kinds

    stop = srv.service.observe(Forwards(on_forward))
    try:
        chunks, kinds = run(go())
    finally:
        stop()
    assert waited == [True]  # the first audio came while the last piece was not yet generated
    assert kinds[0] == "audio-start" and kinds[-1] == "audio-stop" and chunks >= 3
    assert set(kinds[1:-1]) == {"audio-chunk"}


@pytest.mark.slow
def test_streaming_synthesis_speaks_from_the_first_sentence_end(srv, monkeypatch):
    submitted = []
    real = srv.speaker.submit
    monkeypatch.setattr(
        srv.speaker, "submit", lambda req, on_event, **kw: (submitted.append(req), real(req, on_event, **kw))[1]
    )

    async def events_until(client, kind):
        got = []
        while True:
            event = await client.read_event()
            assert event is not None and not Error.is_type(event.type), event
            got.append(event)
            if event.type == kind:
                return got

    async def go():
        async with srv.client() as client:
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="onyx")).event())
            await client.write_event(SynthesizeChunk(text="Good morning to you").event())
            await client.write_event(SynthesizeChunk(text=" all. The tr").event())
            first = await events_until(client, "audio-stop")  # spoken before the stream goes on
            for text in ("ain leaves at seven. It", " rained all day"):
                await client.write_event(SynthesizeChunk(text=text).event())
            full = "Good morning to you all. The train leaves at seven. It rained all day"
            await client.write_event(
                Synthesize(text=full, voice=SynthesizeVoice(name="onyx")).event()
            )  # for old servers
            await client.write_event(SynthesizeStop().event())
            rest = await events_until(client, "synthesize-stopped")
            return first, rest

    first, rest = run(go())
    assert [e.type for e in first][0] == "audio-start" and len(submitted) >= 2
    assert submitted[0].text == "Good morning to you all."
    assert (
        " ".join(r.text.strip() for r in submitted)
        == "Good morning to you all. The train leaves at seven. It rained all day"
    )
    assert [r.seed for r in submitted] == [SEED + k for k in range(len(submitted))]
    # onyx's designed voice, rendered once, is every part's voice (the first part's, which it clones)
    assert submitted[0].ref is not None and all(r.ref is submitted[0].ref for r in submitted[1:])
    kinds = [e.type for e in rest]
    assert (
        kinds[-1] == "synthesize-stopped"
        and kinds.count("audio-start") == kinds.count("audio-stop") == len(submitted) - 1
    )


@pytest.mark.slow
def test_four_satellites_at_once_share_forwards_and_each_gets_its_own_audio(srv):
    texts = ["The kitchen light is on.", "It is seven degrees outside.", "Your timer is done.", "Good night."]
    solo, solo_forwards = [], 0
    for text in texts:
        before = srv.service.forwards
        solo.append(run(speak_wyoming(srv, text)))
        solo_forwards += srv.service.forwards - before

    async def together():
        return await asyncio.gather(*(speak_wyoming(srv, t) for t in texts))

    before = srv.service.forwards
    gate = hold_loop(srv.service)
    result: list = []
    thread = threading.Thread(target=lambda: result.append(run(together())))
    thread.start()
    wait_for(lambda: srv.service.open == 4, what="four requests queued")
    gate.set()
    thread.join(300)
    shared = srv.service.forwards - before
    assert all(np.array_equal(a, b) and len(a) for a, b in zip(result[0], solo))  # the seed pinned: the same audio
    assert shared < solo_forwards and shared <= 2 * NUM_STEP


@pytest.mark.slow
def test_a_client_that_drops_frees_its_work(srv):
    gate = hold_loop(srv.service)
    try:

        async def drop():
            client = srv.client()
            await client.connect()
            await client.write_event(Synthesize(text=THREE).event())
            await asyncio.to_thread(wait_for, lambda: srv.service.open == 1, 60, "the request queued")
            await client.disconnect()

        run(drop())
        wait_for(lambda: srv.service.open == 0, what="the request cancelled")  # before any forward ran
    finally:
        gate.set()
    assert len(run(speak_wyoming(srv, "Still here."))) > 0


async def refused(srv, *events, write=None):
    """The error event a new connection gets for `events` (or raw bytes), and what follows it."""
    async with srv.client() as client:
        if write is not None:
            client._writer.write(write)
        for event in events:
            await client.write_event(event)
        error = await client.read_event()
        assert error is not None and Error.is_type(error.type), error
        return Error.from_event(error), await client.read_event()


@pytest.mark.slow
def test_an_unknown_event_gets_an_error_and_the_connection_goes_on(srv):
    async def go():
        async with srv.client() as client:
            await client.write_event(Event(type="launch-rockets"))
            error = Error.from_event(await client.read_event())
            await client.write_event(Ping(text="p").event())
            pong = await client.read_event()
            await client.write_event(Describe().event())
            return error, pong, await client.read_event()

    error, pong, info = run(go())
    assert error.code == "unknown-event" and error.text.startswith("unknown event type 'launch-rockets': this server")
    assert pong.type == "pong" and pong.data["text"] == "p" and Info.is_type(info.type)


@pytest.mark.slow
def test_a_request_that_cannot_be_spoken_gets_an_error_then_the_connection_closes(srv):
    """As wyoming-piper does: Home Assistant reads a synthesis up to its audio-stop, so an error
    alone would leave it waiting; the close ends its wait. The server goes on serving."""
    cases = [
        (
            (Event(type="synthesize", data={"voice": {"name": "alloy"}}),),
            "invalid-request",
            "the 'synthesize' event has no 'text': give the text to speak",
        ),
        (
            (Synthesize(text="x" * 1_000_000).event(),),
            "too-large",
            "the 'synthesize' event is 1000012 bytes long: at most 40960 bytes are allowed (--max-chars)",
        ),
        (
            (Synthesize(text="y " * 2100).event(),),
            "invalid-request",
            "text is 4200 characters long: at most 4096 are allowed (--max-chars)",
        ),
        (
            (Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event(),),
            "invalid-request",
            "unknown voice 'nobody'",
        ),
        (
            (Synthesize(text="Hi.", voice=SynthesizeVoice(name="auto", speaker="purple")).event(),),
            "invalid-request",
            "field 'instruct': ",
        ),
        ((SynthesizeChunk(text="Hi.").event(),), "invalid-request", "synthesize-chunk outside a stream"),
        ((SynthesizeStart().event(), SynthesizeStart().event()), "invalid-request", "synthesize-start inside a stream"),
    ]
    for events, code, words in cases:
        error, after = run(refused(srv, *events))
        assert error.code == code and words in error.text and after is None, (events[0].type, error)
    error, after = run(refused(srv, write=b"this is not json\n"))
    assert (
        error.code == "bad-event" and error.text.startswith("an event's header is not a line of JSON") and after is None
    )
    assert len(run(speak_wyoming(srv, "Still here."))) > 0


@pytest.mark.slow
def test_a_full_engine_queue_is_an_error_event(engine, module_home):
    running = Running(engine, max_queue=1)
    try:
        gate = hold_loop(running.service)
        try:

            async def go():
                async with running.client() as a, running.client() as b:
                    await a.write_event(Synthesize(text="First.").event())
                    await asyncio.to_thread(wait_for, lambda: running.service.open == 1, 60, "the first queued")
                    await b.write_event(Synthesize(text="Second.").event())
                    return Error.from_event(await b.read_event()), await b.read_event()

            busy, after = run(go())
        finally:
            gate.set()
        assert (
            busy.code == "busy" and busy.text.startswith("the server is busy: 1 requests are queued") and after is None
        )
    finally:
        running.close()


@pytest.mark.slow
def test_a_unix_socket_serves_and_is_removed_at_the_end(engine, module_home, tmp_path):
    from wyoming.client import AsyncUnixClient

    from omnivoice_cli.server.wyoming.wyoming import remove_socket

    sock = tmp_path / "omnivoice.sock"
    sock.write_text("a file, not a socket")
    remove_socket(str(sock))  # what start does before it binds: only a stale socket goes
    assert sock.read_text() == "a file, not a socket"
    sock.unlink()
    running = Running(engine, uri=f"unix://{sock}")
    try:

        async def go():
            async with AsyncUnixClient(str(sock)) as client:
                chunks, kinds, last = await synthesize(client, "Over a socket.")
                return samples(chunks), last

        audio, last = run(go())
        assert AudioStop.is_type(last.type) and len(audio) > 0
    finally:
        running.close()
    assert not sock.exists()


@pytest.mark.slow
def test_a_long_stream_is_spoken_in_parts_within_max_chars(engine, module_home, monkeypatch):
    """An answer longer than --max-chars, with and without sentence ends, streamed in: spoken in
    parts of at most --max-chars (parts that waited are joined only up to it), never refused."""
    running = Running(engine, max_chars=60)
    submitted = []
    real = running.speaker.submit
    monkeypatch.setattr(
        running.speaker, "submit", lambda req, on, **kw: (submitted.append(req.text), real(req, on, **kw))[1]
    )
    text = "The lamp is on. " * 6 + "and then words without any end " * 5
    try:

        async def go():
            async with running.client() as client:
                await client.write_event(SynthesizeStart().event())
                for i in range(0, len(text), 23):
                    await client.write_event(SynthesizeChunk(text=text[i : i + 23]).event())
                await client.write_event(SynthesizeStop().event())
                kinds = []
                while not kinds or kinds[-1] not in ("synthesize-stopped", "error"):
                    kinds.append((await client.read_event()).type)
                return kinds

        kinds = run(go())
    finally:
        running.close()
    assert kinds[-1] == "synthesize-stopped" and "error" not in kinds
    assert all(len(t) <= 60 for t in submitted) and len(submitted) >= 4
    assert " ".join(t.strip() for t in submitted) == text.strip()


# --- clients that hold connections or send hostile JSON ----------------------------------------


def test_json_depth_is_counted_outside_strings():
    assert json_depth(b'{"type": "synthesize", "data": {"voice": {"name": "a"}}}') == 0  # few brackets: not scanned
    assert json_depth(b"[" * 40 + b"]" * 40) == MAX_DEPTH + 1  # counted up to the limit and one
    assert (
        json_depth(b'{"text": "' + b"[[[[" * 100 + b'\\"]"}') <= 1
    )  # brackets in a string (and an escape) do not count
    assert json_depth(b"[" * 20 + b"{}" * 100 + b"]" * 20) == 21


def idle_sockets(port, n, addresses=("127.0.0.2",)):
    """`n` TCP connections that send nothing, from the loopback addresses given in turn."""
    import socket

    socks = []
    for i in range(n):
        s = socket.socket()
        s.bind((addresses[i % len(addresses)], 0))
        s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def first_event(sock):
    """The first event a raw socket reads (its header with its data merged), or None at the end."""
    import json

    sock.settimeout(60)
    data = b""
    while True:
        if b"\n" in data:
            line, rest = data.split(b"\n", 1)
            header = json.loads(line)
            if len(rest) >= header.get("data_length", 0):
                more = json.loads(rest[: header["data_length"]]) if header.get("data_length") else {}
                return {**header, "data": {**header.get("data", {}), **more}}
        got = sock.recv(65536)
        if not got:
            return None
        data += got


@pytest.mark.slow
def test_300_idle_sockets_from_one_address_lock_no_one_else_out(srv):
    """Before: the first 256 took every place and every other client was told "busy". One address
    holds at most --max-per-peer (32) connections; a normal client from another is served."""
    socks = idle_sockets(srv.port, 300)
    try:
        wait_for(lambda: srv.server.peers.get("127.0.0.2") == 32, 120, "32 connections from 127.0.0.2")
        refused = first_event(socks[-1])
        assert refused["type"] == "error" and refused["data"]["code"] == "busy"
        assert refused["data"]["text"].startswith("127.0.0.2 has 32 connections open, the most one address may hold")
        assert len(run(speak_wyoming(srv, "Still here."))) > 0  # from 127.0.0.1, while the 300 are open
        assert srv.server.peers.get("127.0.0.2") == 32
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: "127.0.0.2" not in srv.server.peers, 120, "the idle connections gone")


IDLE = 2.0  # seconds: the idle timeout there (0.5 left a loaded machine too little to send the request)


@pytest.mark.slow
def test_idle_connections_are_closed_but_not_while_their_audio_is_made(engine, module_home):
    """300 idle sockets from 10 addresses (30 each, under the per-address limit; more than the 256
    places): each that got a place is told `idle-timeout` and closed; then a normal client is
    served. A client waiting for its audio (the engine held for three idle timeouts) is not idle."""
    running = Running(engine, wyoming={"idle_timeout": IDLE})
    try:
        socks = idle_sockets(running.port, 300, tuple(f"127.0.0.{i}" for i in range(2, 12)))
        try:
            codes = [(first_event(s) or {}).get("data", {}).get("code") for s in socks]
            assert set(codes) <= {"idle-timeout", "busy"} and codes.count("idle-timeout") >= 256, codes
            wait_for(lambda: not running.server.connections, 120, "every idle connection closed")
        finally:
            for s in socks:
                s.close()
        gate = hold_loop(running.service)

        async def go():
            async with running.client() as client:
                await client.write_event(Synthesize(text="Held a while.").event())
                await asyncio.sleep(3 * IDLE)  # three idle timeouts while its request waits in the engine
                gate.set()
                chunks = []
                while True:
                    event = await client.read_event()
                    assert event is not None and event.type != "error", event
                    if AudioChunk.is_type(event.type):
                        chunks.append(AudioChunk.from_event(event).audio)
                    if AudioStop.is_type(event.type):
                        return samples(chunks)

        try:
            assert len(run(go())) > 0
        finally:
            gate.set()
    finally:
        running.close()


@pytest.mark.slow
def test_a_deeply_nested_header_or_data_is_an_error_event_and_the_server_goes_on(srv):
    """Before: json.loads of 20,000 nested arrays raised RecursionError inside the server. The
    nesting is counted before parsing: a `bad-event` error, and the next client is served."""
    deep = b"[" * 20_000 + b"]" * 20_000
    error, after = run(refused(srv, write=b'{"type": "synthesize", "data": {"text": ' + deep + b"}}\n"))
    assert error.code == "bad-event" and after is None
    assert error.text.startswith(f"an event's header nests JSON deeper than {MAX_DEPTH} levels"), error
    error, after = run(refused(srv, write=b'{"type": "synthesize", "data_length": %d}\n' % len(deep) + deep))
    assert error.code == "bad-event" and after is None
    assert error.text.startswith(f"the 'synthesize' event's data nests JSON deeper than {MAX_DEPTH} levels"), error
    assert len(run(speak_wyoming(srv, "Still here."))) > 0
