"""ElevenLabs' streaming input sockets (server/elevenlabs/socket.py) against a real uvicorn on
127.0.0.1, driven by the `websockets` client in their documented messages (the SDK's own helper,
convert_realtime, always dials wss://, so it cannot reach a plain local server): text in pieces,
flush, the end of input, alignment, isFinal, a barge-in, the key and the query's refusals."""

import base64
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("websockets")

import httpx
import websockets
from conftest import AGENT_REPLY as REPLY
from helpers.elevensocket import KEY, dial, socket_url
from helpers.service import Forwards, HeldForward
from server_util import running_server, wait_for
from websockets.sync.client import connect

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]

FIXED = {"num_step": 2, "seed": 5}  # the server's own: their socket has no seed


@pytest.fixture(scope="module")
def server(engine):
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE

    with running_server(engine, api_key=KEY, layers=((FLAG_SOURCE, FIXED),)) as (url, _server, state):
        yield url, state


def our_pcm(url, text):
    body = {"input": text, "voice": "alloy", "response_format": "pcm", "stream": False}
    r = httpx.post(url + "/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=300)
    assert r.status_code == 200, r.text
    return r.content


def received(ws):
    """The messages up to the server's close (stream-input closes after the final)."""
    out = []
    try:
        while True:
            out.append(json.loads(ws.recv(timeout=300)))
    except websockets.exceptions.ConnectionClosedOK:
        return out


def words(messages):
    return "".join(c for m in messages if m.get("alignment") for c in m["alignment"]["chars"]).split()


def test_one_sentence_in_pieces_is_our_routes_audio(server):
    """A sentence sent in five pieces after the first message, then the end of input: the samples
    of /v1/audio/speech for the text, then isFinal, then the socket closes (1000)."""
    url, _ = server
    text = "Hello there, my good old friend."
    with dial(url) as ws:
        ws.send(json.dumps({"text": " ", "voice_settings": {"stability": 0.5}, "generation_config": {}}))
        for piece in ("Hello", " there,", " my good", " old", " friend. "):
            ws.send(json.dumps({"text": piece, "try_trigger_generation": True}))
        ws.send(json.dumps({"text": ""}))
        messages = received(ws)
    assert messages[-1] == {"isFinal": True}
    audio = b"".join(base64.b64decode(m["audio"]) for m in messages if m.get("audio"))
    assert audio == our_pcm(url, text)
    assert words(messages) == text.split()
    timed = [m["alignment"] for m in messages if m.get("alignment")]
    assert all(a == m["normalizedAlignment"] for a, m in zip(timed, messages))
    assert all(len(a["chars"]) == len(a["charStartTimesMs"]) == len(a["charDurationsMs"]) for a in timed)


def test_an_agents_reply_comes_in_order_with_its_alignment(server):
    """The 13-sentence reply as 20-character pieces, a flush, then the end of input: audio a piece
    at a time, the alignment's words the reply's in order, its times from the utterance's start
    never going back, within the audio sent."""
    url, _ = server
    with dial(url) as ws:
        ws.send(json.dumps({"text": " "}))
        for i in range(0, len(REPLY), 20):
            ws.send(json.dumps({"text": REPLY[i : i + 20]}))
        ws.send(json.dumps({"text": " ", "flush": True}))
        ws.send(json.dumps({"text": ""}))
        messages = received(ws)
    assert messages[-1] == {"isFinal": True} and not any(m.get("isFinal") for m in messages[:-1])
    assert words(messages) == REPLY.split()
    starts = [t for m in messages if m.get("alignment") for t in m["alignment"]["charStartTimesMs"]]
    assert starts == sorted(starts)
    samples = sum(len(base64.b64decode(m["audio"])) // 2 for m in messages if m.get("audio"))
    assert starts[-1] <= samples / 24000 * 1000
    assert sum(1 for m in messages if m.get("audio")) >= REPLY.count(". ")  # a piece a sentence, or so


def test_a_barge_in_stops_the_context_within_one_forward(server):
    """multi-stream-input: a context's long text, no flush; after its first audio, the engine is held
    before a forward, then close_context: its isFinal comes, its place is free, and once the engine
    goes on no forward of it follows the held one; the next context is spoken."""
    url, state = server
    long_text = " ".join(f"This is sentence number {i} of a long answer." for i in range(40))
    held = HeldForward()
    stop = state.service.observe(held)
    try:
        with dial(url, multi=True) as ws:
            ws.send(json.dumps({"text": " ", "context_id": "a"}))
            ws.send(json.dumps({"text": long_text + " ", "context_id": "a"}))
            first = json.loads(ws.recv(timeout=300))
            assert first["contextId"] == "a" and first["audio"], first
            held.hold.set()
            assert held.holding.wait(120)
            running = set().union(*held.seen)
            held_at = len(held.seen)
            ws.send(json.dumps({"context_id": "a", "close_context": True}))
            while not json.loads(ws.recv(timeout=300)).get("isFinal"):
                pass  # audio sent before the close was read may still come; then its final
            wait_for(lambda: state.service.stats()["open"] == 0, 120.0, "the context's place to be free")
            held.release.set()
            ws.send(json.dumps({"text": "A new context. ", "context_id": "b"}))
            ws.send(json.dumps({"text": "", "context_id": "b", "flush": True}))
            ws.send(json.dumps({"context_id": "b", "close_context": True}))
            messages = []
            while not (messages and messages[-1].get("isFinal")):
                messages.append(json.loads(ws.recv(timeout=300)))
    finally:
        held.release.set()
        stop()
    assert all(not (ids & running) for ids in held.seen[held_at:])  # no forward of it after the held one
    assert {m["contextId"] for m in messages} == {"b"} and words(messages) == "A new context.".split()


def test_a_flush_without_text_then_close_context_speaks_the_context(server):
    """Pipecat's end of a turn: `{"context_id", "flush": true}` with no `text`, then close_context:
    the context's audio in full (a close after a flush, not a barge-in), then its isFinal."""
    url, _ = server
    text = "Hello there, my good old friend."
    with dial(url, multi=True) as ws:
        ws.send(json.dumps({"text": " ", "context_id": "turn"}))
        ws.send(json.dumps({"text": text, "context_id": "turn"}))
        ws.send(json.dumps({"context_id": "turn", "flush": True}))
        ws.send(json.dumps({"context_id": "turn", "close_context": True}))
        messages = []
        while not messages or not messages[-1].get("isFinal"):
            messages.append(json.loads(ws.recv(timeout=300)))
    pcm = b"".join(base64.b64decode(m["audio"]) for m in messages if m.get("audio"))
    assert pcm == our_pcm(url, text) and words(messages) == text.split()
    assert messages[-1] == {"isFinal": True, "contextId": "turn"}


def test_the_key_and_the_query_are_checked(server):
    """A wrong key: their 401 before the upgrade; an unknown output_format or voice: an error
    message, then the socket is closed (1008)."""
    url, _ = server
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        connect(socket_url(url), additional_headers={"xi-api-key": "wrong"}).close()
    response = refused.value.response
    assert response.status_code == 401
    assert json.loads(response.body) == {"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}
    for kw in ({"query": "output_format=mp3_1_2"}, {"voice": "nobody"}):
        with dial(url, **kw) as ws:
            error = json.loads(ws.recv(timeout=120))
            assert error["error"] == "invalid_request" and error["message"], error
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                ws.recv(timeout=120)
            assert closed.value.rcvd.code == 1008


LIVEKIT_PYTHON = os.environ.get("OMNIVOICE_LIVEKIT_PYTHON")  # a Python with livekit-plugins-elevenlabs


@pytest.mark.skipif(not LIVEKIT_PYTHON, reason="set OMNIVOICE_LIVEKIT_PYTHON to a Python with livekit-agents")
def test_livekits_elevenlabs_plugin(server, tmp_path):
    """LiveKit's own ElevenLabs plugin (multi-stream-input; run in its Python:
    tests/elevenlabs_livekit_client.py), pointed at the server by its base_url: the 13-sentence
    reply's audio, its timed words the reply's in order; then a stream closed mid-text (LiveKit's
    barge-in): no forward of it after the one the engine was held at."""
    url, state = server
    (tmp_path / "reply.txt").write_text(REPLY)
    client = Path(__file__).resolve().parent / "elevenlabs_livekit_client.py"
    held = HeldForward()
    stop = state.service.observe(held)
    proc = subprocess.Popen(
        [LIVEKIT_PYTHON, str(client), url, KEY, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "audio", proc.stderr.read()[-3000:]
        held.hold.set()
        assert held.holding.wait(120)
        running, held_at = set().union(*held.seen), len(held.seen)
        proc.stdin.write("cancel\n")
        proc.stdin.flush()
        wait_for(lambda: state.service.stats()["open"] == 0, 120.0, "the stream's place to be free")
        held.release.set()
        assert proc.stdout.readline().strip() == "closed"
        assert proc.wait(120) == 0, proc.stderr.read()[-3000:]
    finally:
        held.release.set()
        stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert all(not (ids & running) for ids in held.seen[held_at:])  # no forward of it after the held one
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["rate"] == 24000 and len((tmp_path / "reply.raw").read_bytes()) > 24000 * 2
    timed = report["words"]
    assert [w.strip() for w, _s, _e in timed if w.strip()] == REPLY.split()
    starts = [s for _w, s, _e in timed]
    assert starts == sorted(starts) and all(s <= e for _w, s, e in timed)


PIPECAT_PYTHON = os.environ.get("OMNIVOICE_PIPECAT_PYTHON")  # a Python with pipecat-ai[elevenlabs]


@pytest.mark.skipif(not PIPECAT_PYTHON, reason="set OMNIVOICE_PIPECAT_PYTHON to a Python with pipecat-ai[elevenlabs]")
def test_pipecats_elevenlabs_service(server, tmp_path):
    """Pipecat's own ElevenLabs TTS service (multi-stream-input; run in its Python:
    tests/elevenlabs_pipecat_client.py) in a pipeline, the 13-sentence reply as an LLM's tokens: its
    audio at 24 kHz, and the words it timed from our alignment, the reply's, in order."""
    url, _ = server
    (tmp_path / "reply.txt").write_text(REPLY)
    client = Path(__file__).resolve().parent / "elevenlabs_pipecat_client.py"
    done = subprocess.run([PIPECAT_PYTHON, str(client), url, KEY, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["rate"] == [24000] and len((tmp_path / "reply.raw").read_bytes()) > 24000 * 2 * 13
    timed = report["words"]
    assert [w for w, _pts in timed] == REPLY.split()
    times = [pts for _w, pts in timed]
    assert times == sorted(times) and times[-1] > times[0]


@pytest.mark.skipif(not PIPECAT_PYTHON, reason="set OMNIVOICE_PIPECAT_PYTHON to a Python with pipecat-ai[elevenlabs]")
def test_pipecats_interruption_cancels_the_context_and_keeps_the_socket(server, tmp_path):
    """Pipecat's ElevenLabs TTS service interrupted mid-reply (an InterruptionFrame while the LLM's
    tokens are still its turn; tests/elevenlabs_pipecat_client.py cancel): after its first audio the
    engine is held before a forward, then the interruption: the context's place is free, and once the
    engine goes on no forward of it follows the held one; the next turn is spoken in full on the
    same socket."""
    url, state = server
    (tmp_path / "reply.txt").write_text(REPLY)
    (tmp_path / "next.txt").write_text("A new turn. ")
    client = Path(__file__).resolve().parent / "elevenlabs_pipecat_client.py"
    seen, hold, holding, release = [], threading.Event(), threading.Event(), threading.Event()

    def on_forward(pieces):
        seen.append({rid for rid, _ in pieces})
        if hold.is_set() and not holding.is_set():
            holding.set()
            release.wait(120)

    stop = state.service.observe(Forwards(on_forward))
    proc = subprocess.Popen(
        [PIPECAT_PYTHON, str(client), url, KEY, str(tmp_path), "cancel"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def told(line):
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    try:
        assert proc.stdout.readline().strip() == "audio", proc.stderr.read()[-3000:]
        hold.set()
        assert holding.wait(120)
        running, held_at = set().union(*seen), len(seen)
        told("cancel")
        assert proc.stdout.readline().strip() == "interrupted"
        wait_for(lambda: state.service.stats()["open"] == 0, 120.0, "the context's place to be free")
        release.set()
        told("next")
        assert proc.stdout.readline().strip() == "done", proc.stderr.read()[-3000:]
        assert proc.wait(120) == 0, proc.stderr.read()[-3000:]
    finally:
        release.set()
        stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert running and all(not (ids & running) for ids in seen[held_at:])  # no forward of it after the held one
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["same_socket"] is True
    assert [w.strip() for w in report["words"] if w.strip()] == "A new turn.".split() and report["audio"] > 0
