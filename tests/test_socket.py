"""`/tts/ws` (server/socket.py) against a real uvicorn on 127.0.0.1, by the `websockets` client,
speaking the livekit-streaming-tts protocol: fragments, flush, cancel (barge-in), ping, errors."""

import base64
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("websockets")  # the serve extra: uvicorn's WebSocket support

import httpx
import numpy as np
import websockets
from server_util import running_server, wait_for
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


def say(ws, fragments):
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
            audio, texts = say(ws, fragments)
            assert [m["type"] for m in texts] == ["event"]  # all the audio came as binary frames
            pcm = np.frombuffer(audio, "<i2")
            assert len(pcm) > 2400 and np.abs(pcm).max() > 0
            np.testing.assert_array_equal(pcm, http_pcm(url, "".join(fragments), seed=7, num_step=4))
            configure(ws, sample_rate=8000)  # the rest of the config stays
            low, _ = say(ws, fragments)
            assert len(low) // 2 == -(-len(pcm) // 3)
            np.testing.assert_array_equal(
                np.frombuffer(low, "<i2"), http_pcm(url, "".join(fragments), seed=7, num_step=4, sample_rate=8000)
            )
            configure(ws, binary=False)  # JSON audio messages, base64
            again, texts = say(ws, fragments)
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
            audio, texts = say(ws, ["A new ", "utterance."])
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
            audio, _ = say(ws, ["Still ", "here."])
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
                return np.frombuffer(say(ws, [texts[i][:5], texts[i][5:]])[0], "<i2")

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
