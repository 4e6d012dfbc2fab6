"""`/tts/ws` (server/socket.py) against a real uvicorn on 127.0.0.1, by the `websockets` client,
speaking the livekit-streaming-tts protocol: fragments, flush, cancel (barge-in), ping, errors."""

import base64
import json
import logging
import os
import subprocess
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("websockets")  # the serve extra: uvicorn's WebSocket support

import httpx
import numpy as np
import websockets
from conftest import AGENT_REPLY as REPLY
from server_util import hold_engine, running_server, wait_for
from websockets.sync.client import connect

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]  # all end to end; an empty OMNIVOICE_HOME


def ws_url(url):
    return url.replace("http://", "ws://") + "/tts/ws"


def configure(ws, **data):
    ws.send(json.dumps({"type": "config", "data": data}))
    reply = json.loads(ws.recv(timeout=120))
    assert reply == {"type": "event", "data": {"event_type": "config_accepted"}}, reply


def until_final(ws):
    """(the audio bytes, the text messages) up to the final event."""
    audio, texts = b"", []
    while True:
        m = ws.recv(timeout=120)
        if isinstance(m, bytes):
            audio += m
            continue
        m = json.loads(m)
        texts.append(m)
        if m["type"] == "audio":
            audio += base64.b64decode(m["data"]["audio"])
        elif m["type"] == "event" and m["data"]["event_type"] == "final":
            return audio, texts
        elif m["type"] == "error":
            raise AssertionError(m)


def say_over(ws, fragments):
    for f in fragments:
        ws.send(json.dumps({"type": "text", "data": {"text": f}}))
    ws.send(json.dumps({"type": "flush"}))
    return until_final(ws)


def http_pcm(url, text, **fields):
    body = {"input": text, "response_format": "pcm", "stream": False, **fields}
    r = httpx.post(url + "/v1/audio/speech", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2")


def test_fragments_then_flush_give_pcm_and_final(engine):
    """5 fragments of one sentence, then flush: binary PCM at 24 kHz, the very samples of the HTTP
    request of the whole text with the same seed; at 8000 Hz a third of the samples."""
    fragments = ["Hello", " there,", " my good", " old", " friend."]
    with running_server(engine) as (url, _server, _state):
        with connect(ws_url(url)) as ws:
            configure(ws, format="pcm", binary=True, sample_rate=24000, extra={"seed": 7, "num_step": 4})
            audio, texts = say_over(ws, fragments)
            assert [m["type"] for m in texts] == ["event"]  # all the audio came as binary frames
            pcm = np.frombuffer(audio, "<i2")
            assert len(pcm) > 2400 and np.abs(pcm).max() > 0
            np.testing.assert_array_equal(pcm, http_pcm(url, "".join(fragments), seed=7, num_step=4))
            configure(ws, sample_rate=8000)  # the rest of the config stays
            low, _ = say_over(ws, fragments)
            assert len(low) // 2 == -(-len(pcm) // 3)
            np.testing.assert_array_equal(
                np.frombuffer(low, "<i2"), http_pcm(url, "".join(fragments), seed=7, num_step=4, sample_rate=8000)
            )
            configure(ws, binary=False)  # JSON audio messages, base64
            again, texts = say_over(ws, fragments)
            assert {m["type"] for m in texts} == {"audio", "event"}
            assert all(m["data"]["sample_rate"] == 8000 for m in texts if m["type"] == "audio")
            assert again == low


def test_sentences_start_before_the_flush(engine):
    """A sentence end followed by more text is spoken at once: its audio comes before any flush."""
    with running_server(engine) as (url, _server, _state):
        with connect(ws_url(url)) as ws:
            configure(ws, binary=True, extra={"seed": 3, "num_step": 2})
            ws.send(json.dumps({"type": "text", "data": {"text": "First sentence here. Sec"}}))
            first = ws.recv(timeout=120)
            assert isinstance(first, bytes) and len(first) > 0
            ws.send(json.dumps({"type": "text", "data": {"text": "ond one."}}))
            ws.send(json.dumps({"type": "flush"}))
            rest, _ = until_final(ws)
            assert len(rest) > 0


def test_a_long_reply_comes_sentence_by_sentence(engine):
    """The reply sent as 20-character messages, then flush (as a voice agent sends a model's
    tokens): its audio comes a sentence at a time (a binary frame each), not a reply's worth at
    once, then `final`."""
    fragments = [REPLY[i : i + 20] for i in range(0, len(REPLY), 20)]
    with running_server(engine) as (url, _server, _state):
        with connect(ws_url(url)) as ws:
            configure(ws, format="pcm", binary=True, extra={"seed": 5, "num_step": 2})
            frames = []
            for f in fragments:
                ws.send(json.dumps({"type": "text", "data": {"text": f}}))
            ws.send(json.dumps({"type": "flush"}))
            while True:
                m = ws.recv(timeout=120)
                if isinstance(m, bytes):
                    frames.append(m)
                    continue
                final = json.loads(m)
                voice = final["data"].pop("voice_prompt")  # its first part's voice, the others spoke in
                assert final == {"type": "event", "data": {"event_type": "final"}} and len(voice) == 64, m
                break
            assert len(frames) == REPLY.count(". ") + 1 and all(frames)  # a frame a sentence


def test_cancel_frees_the_engine_and_the_socket_goes_on(engine):
    """A cancel after the first audio: /health's `generating` is back at 0 within 30 s, no more
    audio of that utterance comes, and the same socket speaks the next utterance."""
    long_text = " ".join(f"This is sentence number {i} of a long answer." for i in range(40))
    with running_server(engine, piece_seconds=1.0) as (url, _server, state):
        with connect(ws_url(url)) as ws:
            configure(ws, binary=True, extra={"seed": 1, "num_step": 16})
            ws.send(json.dumps({"type": "text", "data": {"text": long_text}}))
            ws.send(json.dumps({"type": "flush"}))
            first = ws.recv(timeout=120)
            assert isinstance(first, bytes)
            assert httpx.get(url + "/health").json()["generating"] == 1  # still speaking the long text
            ws.send(json.dumps({"type": "cancel"}))
            t0 = time.monotonic()
            wait_for(lambda: httpx.get(url + "/health").json()["generating"] == 0, 30.0, "generating 0")
            assert time.monotonic() - t0 < 30.0
            wait_for(lambda: state.service.stats()["active_jobs"] == 0, 30.0, "the jobs to leave the forward")
            ws.send(json.dumps({"type": "ping"}))
            while True:  # audio sent before the cancel was read may still come; then the pong
                m = ws.recv(timeout=120)
                if not isinstance(m, bytes):
                    assert json.loads(m) == {"type": "pong"}
                    break
            audio, texts = say_over(ws, ["A new ", "utterance."])
            assert len(audio) > 0 and texts[-1]["data"]["event_type"] == "final"


def test_ping_and_bad_messages(engine):
    """Each bad message gets an error event in the CLI's words; the socket keeps working."""
    bad = [
        ("not json", "parse_error", "the message is not valid JSON"),
        (json.dumps([1, 2]), "invalid_message", "a message must be a JSON object with a 'type'"),
        (json.dumps({"type": "shout"}), "invalid_type", 'unknown message type "shout"'),
        (json.dumps({"type": "text", "data": {"text": 5}}), "invalid_message", "needs data.text"),
        (
            json.dumps({"type": "config", "data": {"sample_rate": 9000}}),
            "invalid_config",
            "field 'sample_rate' must be one of 8000, 16000, 22050, 24000, 44100, 48000, got 9000",
        ),
        (
            json.dumps({"type": "config", "data": {"extra": {"num_step": 100}}}),
            "invalid_config",
            "field 'num_step' must be an integer in 1..64, got 100",
        ),
        (
            json.dumps({"type": "config", "data": {"format": "wav"}}),
            "invalid_config",
            "'format' must be pcm, mulaw or alaw",
        ),
        (json.dumps({"type": "config", "data": {"voice": "nobody"}}), "invalid_config", "unknown voice 'nobody'"),
        (json.dumps({"type": "config", "data": {"sampel_rate": 8000}}), "invalid_config", "did you mean 'sample_rate'"),
        (b"\x00\x01", "invalid_message", "binary frames are not taken"),
    ]
    with running_server(engine, max_input_chars=100) as (url, _server, _state):
        with connect(ws_url(url)) as ws:
            ws.send(json.dumps({"type": "ping"}))
            assert json.loads(ws.recv(timeout=120)) == {"type": "pong"}
            for raw, code, words in bad:
                ws.send(raw)
                m = json.loads(ws.recv(timeout=120))
                assert m["type"] == "error" and m["data"]["code"] == code, (raw, m)
                assert words in m["data"]["message"] and "\n" not in m["data"]["message"], (raw, m)
            ws.send("x" * 20000)  # over the message limit (the JSON body limit)
            m = json.loads(ws.recv(timeout=120))
            assert m["data"]["code"] == "message_too_large"
            configure(ws, binary=True, extra={"num_step": 2})  # the bad configs left nothing behind
            audio, _ = say_over(ws, ["Still ", "here."])
            assert len(audio) > 0


def test_the_api_key_is_checked_before_accept(engine):
    with running_server(engine, api_key="s3cret") as (url, _server, _state):
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            connect(ws_url(url))
        assert refused.value.response.status_code == 401
        assert b"missing API key" in refused.value.response.body
        with pytest.raises(websockets.exceptions.InvalidStatus):
            connect(ws_url(url), additional_headers={"Authorization": "Bearer nope"})
        with connect(ws_url(url), additional_headers={"Authorization": "Bearer s3cret"}) as ws:
            ws.send(json.dumps({"type": "ping"}))
            assert json.loads(ws.recv(timeout=120)) == {"type": "pong"}


def test_many_sockets_share_the_engine(engine):
    """Three sockets at once, each its own seed: each gets the audio its text gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    texts = ["One socket speaks.", "Another one talks.", "A third says this."]
    with running_server(engine) as (url, _server, _state):
        alone = [http_pcm(url, t, seed=i, num_step=2) for i, t in enumerate(texts)]

        def one(i):
            with connect(ws_url(url)) as ws:
                configure(ws, binary=True, extra={"seed": i, "num_step": 2})
                return np.frombuffer(say_over(ws, [texts[i][:5], texts[i][5:]])[0], "<i2")

        with ThreadPoolExecutor(3) as pool:
            together = list(pool.map(one, range(3)))
        for a, b in zip(alone, together):
            np.testing.assert_array_equal(a, b)


LIVEKIT_PYTHON = os.environ.get("OMNIVOICE_LIVEKIT_PYTHON")  # a Python with livekit-agents and livekit-streaming-tts


@pytest.mark.skipif(not LIVEKIT_PYTHON, reason="set OMNIVOICE_LIVEKIT_PYTHON to a Python with livekit-agents")
def test_the_livekit_plugin_itself(engine, tmp_path):
    """livekit-streaming-tts's own StreamingTTS (synthesize and stream, run in a Python that has
    livekit-agents: tests/livekit_client.py): the samples of the HTTP request of the same text."""
    text = "Hello there, my good old friend."
    with running_server(engine) as (url, _server, _state):
        client = Path(__file__).resolve().parent / "livekit_client.py"
        done = subprocess.run(
            [LIVEKIT_PYTHON, str(client), ws_url(url), str(tmp_path)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        alone = http_pcm(url, text, seed=9, num_step=2)
    assert json.loads((tmp_path / "report.json").read_text()) == {"rates": [24000, 24000]}
    for name in ("synthesize.raw", "stream.raw"):
        np.testing.assert_array_equal(np.frombuffer((tmp_path / name).read_bytes(), "<i2"), alone)


def test_a_frame_far_over_the_limit_closes_the_socket(engine):
    with running_server(engine, max_input_chars=100) as (url, _server, state):
        with connect(ws_url(url)) as ws:
            ws.send("x" * (4 * state.options.json_limit + 10))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                ws.recv(timeout=120)
            assert closed.value.rcvd.code == 1009  # message too big
        with connect(ws_url(url)) as ws:  # the server goes on
            ws.send(json.dumps({"type": "ping"}))
            assert json.loads(ws.recv(timeout=120)) == {"type": "pong"}


@contextmanager
def server_errors():
    """The records of ERROR and above that the server logs meanwhile (uvicorn's "Exception in ASGI
    application" with its traceback, asyncio's "Task exception was never retrieved"). Entered once
    the server is made: uvicorn's Config sets its loggers' handlers anew."""
    records = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = records.append
    loggers = [logging.getLogger("uvicorn.error"), logging.getLogger()]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def refused_before_upgrade(url):
    """The HTTP reply that refused a handshake (websockets' InvalidStatus): (status, JSON error)."""
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        connect(ws_url(url)).close()
    response = refused.value.response
    return response.status_code, json.loads(response.body)["error"], response.headers


def test_a_peer_over_its_socket_cap_is_told_why_and_health_answers(engine):
    """With 3 sockets a peer: the 4th is refused before the upgrade, told why (429, Retry-After, the
    reason); /health answers 200 meanwhile; once one closes, a new one is let in."""
    with running_server(engine, socket_max_per_peer=3) as (url, _server, state), ExitStack() as sockets:
        held = [sockets.enter_context(connect(ws_url(url))) for _ in range(3)]
        for ws in held:
            ws.send(json.dumps({"type": "ping"}))
            assert json.loads(ws.recv(timeout=120)) == {"type": "pong"}
        status, error, headers = refused_before_upgrade(url)
        assert status == 429 and error["code"] == "busy" and headers["Retry-After"] == "5", (status, error)
        assert "127.0.0.1 has 3 sockets open, the most one address may hold" in error["message"]
        health = httpx.get(url + "/health", timeout=120)
        assert health.status_code == 200 and health.json()["status"] == "ready"
        held.pop().close()
        wait_for(lambda: state.sockets["127.0.0.1"] == 2, 30, "the closed socket to be let go")
        with connect(ws_url(url)) as again:
            again.send(json.dumps({"type": "ping"}))
            assert json.loads(again.recv(timeout=120)) == {"type": "pong"}


def _raw_handshake(url):
    """A WebSocket handshake on a plain TCP socket that then stays idle (never answers a frame):
    (the socket, the reply's head and what came after it up to the server's end of the connection).
    The server must end it: a read that waits on that, not a delay."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=120)
    conn.sendall(
        f"GET /tts/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = conn.recv(4096)
        assert chunk, got
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):  # refused: the server ends the connection after its reply
        while chunk := conn.recv(4096):
            rest += chunk
    return conn, head.decode("latin-1"), rest


def test_idle_sockets_past_the_cap_are_refused_before_the_upgrade(engine):
    """A peer at its cap of 3 sockets floods the server with more handshakes than its connection
    limit, each left idle: each is refused before the upgrade (an HTTP 429 naming the cap) and its
    connection dropped by the server, so /health and speech are served while the flood is held."""
    with running_server(engine, socket_max_per_peer=3) as (url, server, state), ExitStack() as stack:
        for _ in range(3):
            stack.enter_context(connect(ws_url(url)))
        flood = []
        for _ in range(server.config.limit_concurrency + 2):
            conn, head, body = _raw_handshake(url)
            stack.callback(conn.close)
            flood.append(conn)
            assert head.startswith("HTTP/1.1 429"), head
            assert "127.0.0.1 has 3 sockets open, the most one address may hold" in json.loads(body)["error"]["message"]
        assert state.sockets["127.0.0.1"] == 3
        health = httpx.get(url + "/health", timeout=120)
        assert health.status_code == 200 and health.json()["status"] == "ready"
        assert len(http_pcm(url, "Still served.", num_step=2)) > 0


def test_sockets_in_all_stay_under_the_connection_limit(engine):
    """`max_sockets` sockets open (every address's together): the next is refused before the upgrade
    (503), and /health and speech still answer, uvicorn's connection limit has room to spare."""
    with running_server(engine, max_queue=1, socket_max_per_peer=1000) as (url, server, state), ExitStack() as sockets:
        cap = state.options.max_sockets
        assert cap < server.config.limit_concurrency  # the other half is HTTP's
        for _ in range(cap):
            sockets.enter_context(connect(ws_url(url)))
        status, error, _ = refused_before_upgrade(url)
        assert status == 503 and f"the server has {cap} sockets open" in error["message"], (status, error)
        assert httpx.get(url + "/health", timeout=120).status_code == 200
        assert len(http_pcm(url, "Still served.", num_step=2)) > 0


def test_an_idle_socket_is_closed_though_it_pings(engine):
    """Pings do not keep a socket: one that only pings is closed after the idle timeout (1000 and
    the reason); one whose utterance is being spoken is not, however long that takes."""
    with running_server(engine, socket_idle_timeout=2.0) as (url, _server, state):  # (1 s: a loaded
        # machine's pause between the connection and its first frame could take it)
        gate = hold_engine(state)  # the utterance waits on the engine for 2.5 idle timeouts
        with connect(ws_url(url)) as ws:
            ws.send(json.dumps({"type": "text", "data": {"text": "Spoken though it waits."}}))
            ws.send(json.dumps({"type": "flush"}))
            time.sleep(5.0)
            gate.set()
            audio, _ = until_final(ws)
            assert len(audio) > 0
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                for _ in range(1000):  # a ping every 50 ms, until the server closes the socket
                    ws.send(json.dumps({"type": "ping"}))
                    assert json.loads(ws.recv(timeout=120)) == {"type": "pong"}
                    time.sleep(0.05)
            close = closed.value.rcvd
            assert close is not None and close.code == 1000, closed.value
            assert "idle for 2 s" in close.reason and "pings do not count" in close.reason, close.reason


def test_a_config_inside_an_utterance_is_refused_and_its_audio_keeps_its_format(engine):
    """A config between two fragments of an utterance: an error event, and the utterance is spoken
    in the format it began with (24 kHz pcm, the samples of the HTTP request); after the flush the
    same config is taken and the next utterance is mu-law at 8 kHz."""
    fragments = ["Hello there,", " my good", " old friend."]
    with running_server(engine) as (url, _server, _state):
        with connect(ws_url(url)) as ws:
            configure(ws, format="pcm", binary=True, sample_rate=24000, extra={"seed": 7, "num_step": 2})
            ws.send(json.dumps({"type": "text", "data": {"text": fragments[0]}}))
            ws.send(json.dumps({"type": "config", "data": {"sample_rate": 8000, "format": "mulaw"}}))
            told = json.loads(ws.recv(timeout=120))
            assert told["type"] == "error" and told["data"]["code"] == "invalid_config", told
            assert "between the fragments of an utterance" in told["data"]["message"]
            audio, texts = say_over(ws, fragments[1:])
            assert [m["type"] for m in texts] == ["event"]  # binary pcm frames, no mu-law audio messages
            expected = http_pcm(url, "".join(fragments), seed=7, num_step=2)
            np.testing.assert_array_equal(np.frombuffer(audio, "<i2"), expected)
            configure(ws, sample_rate=8000, format="mulaw")  # between utterances: taken
            law, texts = say_over(ws, fragments)
            assert {(m["data"]["format"], m["data"]["sample_rate"]) for m in texts if m["type"] == "audio"} == {
                ("mulaw", 8000)
            }
            assert len(law) == -(-len(expected) // 3)  # one byte a sample at 8 kHz


def test_lone_surrogates_get_error_events_and_the_socket_goes_on(engine):
    """A lone surrogate (a JSON \\ud800 escape) in the config's `extra` or `language`, or in a text:
    an error event naming the field, the speech endpoint's words; no traceback in the server's log,
    and the socket speaks on."""
    cases = [
        ({"type": "config", "data": {"extra": {"instruct": "male\ud800"}}}, "config field 'extra': its value"),
        ({"type": "config", "data": {"language": "x\ud800"}}, "config field 'language': its value"),
        ({"type": "config", "data": {"voice\ud800": "x"}}, "a field's name is not valid Unicode"),
        ({"type": "text", "data": {"text": "Hi\ud800 there."}}, "data.text is not valid Unicode"),
    ]
    with running_server(engine) as (url, _server, _state), server_errors() as errors:
        with connect(ws_url(url)) as ws:
            for message, words in cases:
                ws.send(json.dumps(message))  # ASCII JSON: the surrogate as its \\u escape
                m = json.loads(ws.recv(timeout=120))
                assert m["type"] == "error" and words in m["data"]["message"], (message, m)
                assert "U+D800, a lone surrogate" in m["data"]["message"], m
            configure(ws, binary=True, extra={"num_step": 2})
            audio, _ = say_over(ws, ["Still ", "here."])
            assert len(audio) > 0
    assert [r.getMessage() for r in errors] == []


def test_an_error_event_escapes_what_utf8_cannot_carry():
    """An error message echoing a lone surrogate is sent with it escaped (as UTF-8 text)."""
    import asyncio

    from omnivoice_cli.server.socketsession import SocketSession

    sent = []

    class Socket:
        async def send_text(self, text):
            text.encode("utf-8")  # what uvicorn does with it
            sent.append(text)

    session = SocketSession.__new__(SocketSession)
    session.ws = Socket()

    async def both():
        session.send_lock = asyncio.Lock()
        await session.send_error("unknown voice 'male\ud800'", "invalid_config")
        await session.send_json({"type": "event", "data": {"text": "x\udfff"}})

    asyncio.run(both())
    assert json.loads(sent[0])["data"]["message"] == "unknown voice 'male\\ud800'"
    assert json.loads(sent[1])["data"]["text"] == "x\udfff"  # JSON's \u escape, sent as ASCII
