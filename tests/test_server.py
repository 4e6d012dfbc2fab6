"""`omnivoice serve` over real HTTP (uvicorn on 127.0.0.1, httpx) on the tiny checkpoint: the replies
equal `say` and the streamed render, requests share forwards, streams join to the plain reply."""

import base64
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
import numpy as np
from helpers.service import Forwards
from server_util import TINY_CKPT, decode, hold_engine, running_server, wait_for, wav_samples

from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request
from omnivoice_cli.engine.stream.render import stream
from omnivoice_cli.media.pcm import pcm16
from omnivoice_cli.server.config import ServeOptions
from omnivoice_cli.server.speech import serve_speaker_options

pytestmark = pytest.mark.slow  # every test here runs the tiny model end to end (or a server on it)

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
CLONE = json.loads((GOLDEN / "clone.json").read_text())["generate_kwargs"]
LONG = (
    "Good morning. The train to the city leaves at seven in the evening, so there is time for tea. "
    "[pause 0.4s] She packed her bags. She checked the tickets twice, and then she called a taxi. "
    "[pause 0.2s] The driver was late. It rained all the way to the station."
)
GREEDY = {"position_temperature": 0, "class_temperature": 0}


@pytest.fixture(scope="module")
def srv(engine, module_home):
    with running_server(engine) as (url, server, state):
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client, state


@pytest.fixture(scope="module")
def alice(srv):
    """A saved voice made by an upload."""
    client, _ = srv
    files = {"file": ("ref.wav", (GOLDEN / CLONE["ref_audio"]).read_bytes(), "audio/wav")}
    r = client.post("/v1/audio/voices", data={"name": "alice", "ref_text": CLONE["ref_text"]}, files=files)
    assert r.status_code == 201, r.text
    return "alice"


def speak(client, **body):
    return client.post("/v1/audio/speech", json={"model": "omnivoice", **body})


def forwards(client):
    return client.get("/health").json()["forwards"]


# --- the small endpoints ------------------------------------------------------------------------


def test_health_models_and_voices(srv):
    client, _ = srv
    h = client.get("/health")
    assert h.status_code == 200 and h.json()["status"] == "ready" and "forwards" in h.json()
    assert "x-request-id" in h.headers
    ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert {"omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts", "fast"} <= set(ids)
    assert client.get("/v1/models/tts-1").json()["id"] == "tts-1"
    assert {"id": "omnivoice", "name": "omnivoice"} in client.get("/v1/audio/models").json()["models"]
    voices = client.get("/v1/audio/voices").json()["voices"]
    assert {
        "id": "alloy",
        "name": "alloy",
        "type": "openai",
        "instruct": "female, young adult, moderate pitch",
    } in voices
    assert voices[-1]["id"] == "auto"
    r = client.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["message"] == "no such endpoint: GET /v1/nothing"


# --- check 1: the same samples as `say` ---------------------------------------------------------


def test_a_one_sentence_wav_equals_say_sample_for_sample(srv, invoke, tmp_path):
    client, _ = srv
    text, seed = "I can speak in the same voice.", 17
    body = {"input": text, "voice": "auto", "response_format": "wav", "seed": seed, "num_step": 4, **GREEDY}
    plain = speak(client, stream=False, **body)
    chunked = speak(client, stream=True, **body)
    assert plain.status_code == chunked.status_code == 200
    assert plain.headers["x-omnivoice-seed"] == chunked.headers["x-omnivoice-seed"] == str(seed)
    assert chunked.headers.get("transfer-encoding") == "chunked" and "content-length" in plain.headers
    out = tmp_path / "say.wav"
    r = invoke(
        "say",
        text,
        "--model",
        TINY_CKPT,
        "--seed",
        seed,
        "--num-step",
        4,
        "--position-temperature",
        0,
        "--class-temperature",
        0,
        "-o",
        out,
        "-q",
    )
    assert r.exit_code == 0, r.stderr
    assert plain.content == out.read_bytes()  # the whole file: byte for byte
    assert np.array_equal(wav_samples(chunked.content), wav_samples(out.read_bytes()))  # streamed: every sample


def test_a_multi_sentence_text_equals_the_streamed_render(srv, engine):
    client, _ = srv
    r = speak(client, input=LONG, response_format="pcm", seed=9, num_step=4, stream=False)
    assert r.status_code == 200 and r.headers["content-type"] == "audio/pcm"
    pieces = []
    stream(
        engine,
        Request(text=LONG, seed=9, generation=GenerationConfig(num_step=4)),
        pieces.append,
        config=serve_speaker_options(ServeOptions()).stream_config(),  # the server's cut
    )
    assert len([p for p in pieces if p.seed is not None]) >= 3
    assert r.content == pcm16(np.concatenate([p.audio for p in pieces]))


EIGHT = [
    {"input": "The first one.", "voice": "alice", "num_step": 8, "guidance_scale": 0, "seed": 1},
    {"input": "A designed voice.", "instructions": "female, low pitch", "num_step": 16, "seed": 2},
    {"input": "An automatic voice here.", "voice": "auto", "num_step": 8, "guidance_scale": 2, "seed": 3},
    {"input": "Mapped from alloy.", "voice": "alloy", "num_step": 16, "guidance_scale": 0, "seed": 4},
    {"input": "Alice again. With two sentences now.", "voice": "alice", "num_step": 16, "seed": 5},
    {"input": "Greedy and short.", "num_step": 8, "seed": 6, **GREEDY},
    {"input": "Elderly and male.", "instructions": "male, elderly", "num_step": 8, "guidance_scale": 0, "seed": 7},
    {"input": "The last of eight.", "voice": "onyx", "num_step": 16, "seed": 8},
]


def test_eight_concurrent_requests_equal_their_solo_results_in_fewer_forwards(srv, alice):
    client, state = srv
    solo, solo_forwards = [], 0
    for body in EIGHT:
        before = forwards(client)
        r = speak(client, response_format="pcm", stream=False, **body)
        assert r.status_code == 200, r.text
        solo.append(r.content)
        solo_forwards += forwards(client) - before
    before = forwards(client)
    gate = hold_engine(state)  # all eight queued before the first forward
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(speak, client, response_format="pcm", stream=False, **body) for body in EIGHT]
        wait_for(lambda: state.service.open == 8, what="eight requests queued")
        gate.set()
        replies = [f.result() for f in futures]
    together = forwards(client) - before
    for body, alone, r in zip(EIGHT, solo, replies):
        assert r.status_code == 200 and r.content == alone, body
    assert together < solo_forwards and together <= 2 * 16  # sharing: about the longest request's steps


# --- check 2: streams join to the plain reply ---------------------------------------------------


def sse_events(response):
    """(event, data) of a server-sent event stream, as they arrive."""
    kind = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            yield kind, json.loads(line[6:])


def test_sse_and_chunked_streams_join_to_the_plain_reply_and_start_early(srv):
    client, state = srv
    body = {"input": LONG, "seed": 4, "num_step": 4}
    for fmt in ("pcm", "wav", "mp3"):
        plain = speak(client, response_format=fmt, stream=False, **body).content
        received = threading.Event()
        held = []

        def on_forward(slots):  # a later piece's first forward waits until the client has audio
            if any(k > 0 for _, k in slots) and not held:
                held.append(received.wait(120))

        stop = state.service.observe(Forwards(on_forward))
        try:
            with client.stream(
                "POST", "/v1/audio/speech", json={"response_format": fmt, "stream_format": "sse", **body}
            ) as r:
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                deltas = []
                for kind, data in sse_events(r):
                    if kind == "speech.audio.delta":
                        deltas.append(base64.b64decode(data["audio"]))
                        received.set()
                    else:
                        done = (kind, data)
        finally:
            stop()
        assert held == [True]  # the first audio arrived before any later piece had run a step
        assert done[0] == "speech.audio.done" and done[1]["type"] == "speech.audio.done"
        chunked = speak(client, response_format=fmt, stream=True, **body).content
        joined = b"".join(deltas)
        assert joined == chunked
        if fmt == "pcm":
            assert joined == plain
        elif fmt == "wav":
            assert np.array_equal(wav_samples(joined), wav_samples(plain))
        else:  # mp3: the stream has no info frame; decoded, the same length within a frame of padding
            a, b = decode(joined)[0], decode(plain)[0]
            assert abs(len(a) - len(b)) <= 2 * 1152


@pytest.mark.parametrize(
    "fmt, mime",
    [
        ("mp3", "audio/mpeg"),
        ("opus", "audio/ogg; codecs=opus"),
        ("flac", "audio/flac"),
        ("ogg", "audio/ogg"),
        ("wav", "audio/wav"),
    ],
)
def test_every_format_decodes_at_24k_to_the_same_length(srv, fmt, mime):
    client, _ = srv
    body = {"input": "Formats of every kind.", "seed": 2, "num_step": 4}
    reference = speak(client, response_format="pcm", stream=False, **body).content
    r = speak(client, response_format=fmt, **body)
    assert r.status_code == 200 and r.headers["content-type"] == mime
    audio, rate = decode(r.content)
    assert rate == 24000
    assert abs(len(audio) - len(reference) // 2) <= (2 * 1152 if fmt in ("mp3", "opus") else 0)


# --- saved voices by upload ---------------------------------------------------------------------


def test_upload_use_and_delete_a_voice(srv, module_home):
    client, _ = srv
    ref = (GOLDEN / CLONE["ref_audio"]).read_bytes()
    r = client.post(
        "/v1/audio/voices",
        data={"name": "bob", "ref_text": CLONE["ref_text"]},
        files={"file": ("bob.wav", ref, "audio/wav")},
    )
    assert r.status_code == 201 and r.json()["id"] == "bob" and r.json()["seconds"] > 1
    assert (module_home / "voices" / "bob.safetensors").is_file()
    assert "bob" in [v["id"] for v in client.get("/v1/audio/voices").json()["voices"]]
    again = client.post("/v1/audio/voices", data={"name": "bob", "ref_text": "x"}, files={"file": ("b.wav", ref)})
    assert again.status_code == 409 and again.json()["error"]["param"] == "name"
    assert speak(client, input="Hello from Bob.", voice="bob", num_step=2, response_format="wav").status_code == 200
    assert client.delete("/v1/audio/voices/bob").json() == {"id": "bob", "object": "voice", "deleted": True}
    gone = client.delete("/v1/audio/voices/bob")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "voice_not_found"
    r = speak(client, input="Hi.", voice="bob")
    assert r.status_code == 400 and "unknown voice 'bob'" in r.json()["error"]["message"]
    builtin = client.delete("/v1/audio/voices/alloy")
    assert builtin.status_code == 400 and "only saved voices can be deleted" in builtin.json()["error"]["message"]


# --- the openai client, as users point it at us -------------------------------------------------


def test_the_openai_client(srv):
    openai = pytest.importorskip("openai")
    client, _ = srv
    api = openai.OpenAI(base_url=str(client.base_url) + "/v1", api_key="unused", max_retries=0)
    audio = api.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello there.", response_format="wav", extra_body={"seed": 3, "num_step": 2}
    )
    samples = wav_samples(audio.content)
    assert len(samples) > 1000
    with api.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="Hello there.", response_format="wav", extra_body={"seed": 3, "num_step": 2}
    ) as r:
        streamed = b"".join(r.iter_bytes())
    assert np.array_equal(wav_samples(streamed), samples)
    with pytest.raises(openai.BadRequestError) as e:
        api.audio.speech.create(model="tts-1", voice="alloy", input="Hi", extra_body={"num_steps": 2})
    assert "field 'num_steps' is not a known field (did you mean 'num_step'?)" in str(e.value)
