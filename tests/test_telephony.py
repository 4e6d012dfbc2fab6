"""Telephony audio: `sample_rate` and raw G.711 (mulaw, alaw) on the HTTP speech endpoint, the
socket, Wyoming (its audio-start says the rate) and `say` (-o x.ulaw, --sample-rate)."""

import base64
import json
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    audioop = pytest.importorskip("audioop")  # audioop-lts on Python 3.13+

from conftest import TINY_CKPT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]  # all end to end; an empty OMNIVOICE_HOME

DECODE = {"mulaw": audioop.ulaw2lin, "alaw": audioop.alaw2lin}
ENCODE = {"mulaw": audioop.lin2ulaw, "alaw": audioop.lin2alaw}
FAST = ["--model", TINY_CKPT, "--num-step", "2", "--seed", "5"]
TEXT = "The line is open. Please hold for a moment."
ONE = "The line is open, please hold for a moment."  # one sentence: one request on the socket


def correlation(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.corrcoef(a, b)[0, 1])


def test_http_mulaw_and_alaw_at_8k_decode_to_its_pcm(engine):
    pytest.importorskip("uvicorn")
    import httpx
    from server_util import running_server

    with running_server(engine) as (url, _server, _state):
        post = lambda **f: httpx.post(
            url + "/v1/audio/speech", json={"input": TEXT, "seed": 5, "num_step": 2, **f}, timeout=120
        )
        full = np.frombuffer(post(response_format="pcm", stream=False).content, "<i2")
        pcm = post(response_format="pcm", sample_rate=8000, stream=False)
        assert pcm.status_code == 200, pcm.text
        low = np.frombuffer(pcm.content, "<i2")
        assert len(low) == -(-len(full) // 3)
        for name in ("mulaw", "alaw"):
            for stream in (False, True):
                r = post(response_format=name, sample_rate=8000, stream=stream)
                assert r.status_code == 200 and len(r.content) == len(low), r.text
                decoded = np.frombuffer(DECODE[name](r.content, 2), "<i2")
                assert correlation(decoded, low) >= 0.99
                assert r.content == ENCODE[name](pcm.content, 2)  # exactly the G.711 codes of the pcm
        bad = post(response_format="pcm", sample_rate=11025)
        assert bad.status_code == 400
        assert bad.json()["error"]["message"] == (
            "field 'sample_rate' must be one of 8000, 16000, 22050, 24000, 44100, 48000, got 11025"
        )


def test_the_socket_sends_mulaw_at_8k(engine):
    pytest.importorskip("uvicorn")
    pytest.importorskip("websockets")
    import httpx
    from server_util import running_server
    from websockets.sync.client import connect

    with running_server(engine) as (url, _server, _state):
        pcm = httpx.post(
            url + "/v1/audio/speech",
            json={"input": ONE, "seed": 5, "num_step": 2, "response_format": "pcm", "sample_rate": 8000},
            timeout=120,
        ).content
        with connect(url.replace("http", "ws") + "/tts/ws", open_timeout=120) as ws:
            ws.send(json.dumps({"type": "config", "data": {"format": "mulaw", "sample_rate": 8000, "binary": True}}))
            assert json.loads(ws.recv(timeout=120))["data"]["event_type"] == "config_accepted"
            ws.send(json.dumps({"type": "config", "data": {"extra": {"seed": 5, "num_step": 2}}}))
            ws.recv(timeout=120)
            for word in ONE.split(" "):
                ws.send(json.dumps({"type": "text", "data": {"text": word + " "}}))
            ws.send(json.dumps({"type": "flush"}))
            data = b""
            while True:
                m = json.loads(ws.recv(timeout=120))  # G.711 is never binary: JSON audio messages
                if m["type"] == "audio":
                    assert m["data"]["sample_rate"] == 8000 and m["data"]["format"] == "mulaw"
                    data += base64.b64decode(m["data"]["audio"])
                elif m["data"].get("event_type") == "final":
                    break
        assert data == ENCODE["mulaw"](pcm, 2)  # one sentence: the HTTP request's samples, coded


def test_wyoming_at_16k(engine, module_home):
    pytest.importorskip("wyoming")
    from helpers.wyoming import Running, run
    from wyoming.audio import AudioChunk, AudioStart
    from wyoming.tts import Synthesize

    from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE

    plain = Running(engine)
    try:
        full = run(_wyoming(plain, Synthesize(text=TEXT), AudioStart, AudioChunk))
    finally:
        plain.close()
    srv = Running(engine)
    flags = {"num_step": 4, "seed": 17, "sample_rate": 16000}  # `omnivoice wyoming --sample-rate 16000`
    old = srv.speaker
    srv.speaker = Speaker(SpeakerOptions(layers=((FLAG_SOURCE, flags),), model=str(TINY_CKPT)), load=lambda: engine)
    srv.server.speaker = srv.speaker
    old.stop()
    try:
        rate, audio = run(_wyoming(srv, Synthesize(text=TEXT), AudioStart, AudioChunk))
    finally:
        srv.close()
    assert full[0] == 24000 and rate == 16000
    assert len(audio) == -(-len(full[1]) * 2 // 3)
    from omnivoice_cli.media.rates import at_rate

    expected = at_rate(full[1].astype(np.float32) / 32768, 24000, 16000)
    assert correlation(audio, expected) > 0.99


async def _wyoming(srv, synth, AudioStart, AudioChunk):
    client = srv.client()
    await client.connect()
    try:
        await client.write_event(synth.event())
        rate, chunks = None, []
        while True:
            event = await client.read_event()
            if AudioStart.is_type(event.type):
                rate = AudioStart.from_event(event).rate
            elif AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                assert chunk.rate == rate
                chunks.append(chunk.audio)
            elif event.type in ("audio-stop", "error"):
                assert event.type == "audio-stop", event
                return rate, np.frombuffer(b"".join(chunks), "<i2")
    finally:
        await client.disconnect()


def test_say_writes_ulaw_and_alaw_at_8k(invoke, loaded, tmp_path):
    r = invoke("say", TEXT, *FAST, "-o", tmp_path / "full.raw")
    assert r.exit_code == 0, r.stderr
    full = (tmp_path / "full.raw").read_bytes()
    r = invoke("say", TEXT, *FAST, "--sample-rate", "8000", "-o", tmp_path / "low.raw")
    assert r.exit_code == 0, r.stderr
    low = (tmp_path / "low.raw").read_bytes()
    assert len(low) // 2 == -(-len(full) // 2 // 3)
    for name, ext in (("mulaw", "ulaw"), ("alaw", "alaw")):
        r = invoke("say", TEXT, *FAST, "--sample-rate", "8000", "-o", tmp_path / f"x.{ext}")
        assert r.exit_code == 0, r.stderr
        assert (tmp_path / f"x.{ext}").read_bytes() == ENCODE[name](low, 2)
    streamed = invoke("say", TEXT, *FAST, "--sample-rate", "8000", "--stream", "-o", "-", "--format", "raw")
    assert streamed.exit_code == 0, streamed.stderr
    assert np.abs(np.frombuffer(streamed.stdout_bytes, "<i2").astype(int) - np.frombuffer(low, "<i2")).max() <= 1
    bad = invoke("say", TEXT, *FAST, "--sample-rate", "9000", "-o", tmp_path / "y.wav")
    assert bad.exit_code == 2
    assert "--sample-rate must be one of 8000, 16000, 22050, 24000, 44100, 48000, got 9000" in bad.stderr
