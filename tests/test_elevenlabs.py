"""ElevenLabs' API on `omnivoice serve` (server/elevenlabs/), driven by their official Python SDK
(`elevenlabs`, PyPI) against a real uvicorn on 127.0.0.1: the same bytes as our own route for the
same voice, text and seed; their shapes of the alignment, the voices, the models and the errors."""

import base64
import json
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("elevenlabs", reason="the test extra's elevenlabs SDK")

import httpx
from conftest import AGENT_REPLY
from elevenlabs.client import ElevenLabs
from elevenlabs.core.api_error import ApiError
from server_util import running_server

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]

KEY = "sesame"
TEXT = "Hello there. This is a test of the other door."
LONG = ". ".join(AGENT_REPLY.split(". ")[:4]) + "."  # four sentences: pieces
FAST = {"num_step": 2}  # our setting beside their body (additional_body_parameters)


def ours(url, **fields):
    body = {"input": TEXT, "seed": 5, **FAST, **fields}
    r = httpx.post(url + "/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=300)
    assert r.status_code == 200, r.text
    return r.content


@pytest.fixture(scope="module")
def server(engine):
    with running_server(engine, api_key=KEY) as (url, _server, state):
        yield url, state


def client(url, key=KEY):
    return ElevenLabs(api_key=key, base_url=url, timeout=300)


OPTIONS = {"additional_body_parameters": FAST}


def test_convert_and_stream_are_our_routes_bytes(server):
    """convert (whole) and stream (chunked) in pcm_24000 and mp3_44100_128: the bytes of
    /v1/audio/speech for the same voice, text and seed."""
    url, _ = server
    el = client(url)
    for fmt, name, rate in (("pcm_24000", "pcm", 24000), ("mp3_44100_128", "mp3", 44100)):
        whole = b"".join(
            el.text_to_speech.convert(
                "alloy",
                text=TEXT,
                seed=5,
                output_format=fmt,
                model_id="eleven_multilingual_v2",
                request_options=OPTIONS,
            )
        )
        assert whole == ours(url, voice="alloy", response_format=name, sample_rate=rate, stream=False)
        streamed = b"".join(
            el.text_to_speech.stream("alloy", text=TEXT, seed=5, output_format=fmt, request_options=OPTIONS)
        )
        assert streamed == ours(url, voice="alloy", response_format=name, sample_rate=rate, stream=True)


def test_speed_and_language_are_ours(server):
    url, _ = server
    el = client(url)
    got = b"".join(
        el.text_to_speech.convert(
            "auto",
            text=TEXT,
            seed=5,
            language_code="en",
            voice_settings={"speed": 1.25, "stability": 0.5},
            output_format="pcm_16000",
            request_options=OPTIONS,
        )
    )
    assert got == ours(url, voice="auto", lang="en", speed=1.25, response_format="pcm", sample_rate=16000)


def _check_alignment(alignment, seconds):
    chars = alignment.characters
    starts, ends = alignment.character_start_times_seconds, alignment.character_end_times_seconds
    assert len(chars) == len(starts) == len(ends) > 10
    assert "".join(chars).replace(" ", "") == TEXT.replace(" ", "")
    assert all(a <= b for a, b in zip(starts, ends)) and starts == sorted(starts)
    assert 0 <= starts[0] and ends[-1] <= seconds + 1e-3


def test_with_timestamps_gives_the_audio_and_its_characters_times(server):
    """convert_with_timestamps: the whole pcm audio in base64 (our bytes) and each character's start
    and end (the pieces' spans: no recogniser here), in order, within the audio;
    stream_with_timestamps: the same stream's bytes, cut per piece, each with its characters."""
    url, _ = server
    el = client(url)
    reply = el.text_to_speech.convert_with_timestamps(
        "alloy", text=TEXT, seed=5, output_format="pcm_24000", request_options=OPTIONS
    )
    audio = base64.b64decode(reply.audio_base_64)
    assert audio == ours(url, voice="alloy", response_format="pcm", sample_rate=24000, stream=False)
    _check_alignment(reply.alignment, len(audio) / 2 / 24000)
    assert reply.normalized_alignment == reply.alignment
    chunks = list(
        el.text_to_speech.stream_with_timestamps(
            "alloy", text=LONG, seed=5, output_format="pcm_24000", request_options=OPTIONS
        )
    )
    streamed = ours(url, input=LONG, voice="alloy", response_format="pcm", sample_rate=24000, stream=True)
    assert b"".join(base64.b64decode(c.audio_base_64) for c in chunks) == streamed
    timed = [c.alignment for c in chunks if c.alignment is not None]
    assert len(timed) >= 3  # a piece a sentence (or two)
    assert "".join("".join(a.characters) for a in timed).split() == LONG.split()
    starts = [s for a in timed for s in a.character_start_times_seconds]
    assert starts == sorted(starts) and starts[-1] < len(streamed) / 2 / 24000


def test_voices_and_models_are_ours(server):
    url, state = server
    el = client(url)
    voices = el.voices.get_all().voices
    names = {v.voice_id for v in voices}
    assert {"alloy", "auto"} <= names
    assert names == {v["name"] for v in state.speaker.voices()}
    assert el.voices.get("alloy").name == "alloy"
    with pytest.raises(ApiError) as missing:
        el.voices.get("nobody")
    assert missing.value.status_code == 404 and missing.value.body["detail"]["status"] == "voice_not_found"
    models = el.models.list()
    assert models[0].model_id == "omnivoice" and all(m.can_do_text_to_speech for m in models)
    openai = httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert openai["object"] == "list"  # without their header: OpenAI's list


def test_a_bad_key_is_their_401_and_an_unknown_format_their_400(server):
    url, _ = server
    with pytest.raises(ApiError) as refused:
        b"".join(client(url, "wrong").text_to_speech.convert("alloy", text=TEXT))
    assert refused.value.status_code == 401
    assert refused.value.body == {"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}
    with pytest.raises(ApiError) as refused:
        client(url, "wrong").voices.get_all()
    assert refused.value.status_code == 401 and refused.value.body["detail"]["status"] == "invalid_api_key"
    with pytest.raises(ApiError) as bad:
        b"".join(client(url).text_to_speech.convert("alloy", text=TEXT, output_format="mp3_44100_999"))
    assert bad.value.status_code == 400
    detail = bad.value.body["detail"]
    assert detail["status"] == "invalid_output_format" and "mp3_44100_128" in detail["message"]


def test_refusals_name_their_fields(server):
    """The door's refusals, in their shape, naming their fields: an unknown voice, an unknown field,
    text over the server's limit."""
    url, state = server
    headers = {"xi-api-key": KEY}
    post = lambda path, body: httpx.post(url + path, json=body, headers=headers, timeout=120)  # noqa: E731
    r = post("/v1/text-to-speech/nobody", {"text": "Hi."})
    assert r.status_code == 400 and r.json()["detail"]["param"] == "voice_id", r.text
    r = post("/v1/text-to-speech/alloy", {"text": "Hi.", "langauge_code": "en"})
    assert r.status_code == 400 and "did you mean" in r.json()["detail"]["message"], r.text
    r = post("/v1/text-to-speech/alloy", {"text": "x" * (state.options.max_input_chars + 1)})
    detail = r.json()["detail"]
    assert r.status_code == 400 and detail["param"] == "text" and "field 'text'" in detail["message"], r.text
    assert json.loads(httpx.get(url + "/v1/voices", headers={"xi-api-key": KEY}).text)["voices"]


def test_with_timestamps_times_the_heard_words_where_the_recogniser_is(engine):
    """With a recogniser (the fixture's), the alignment is the words it heard: their characters,
    a space between, from the first word's start to the last one's end (as our `timestamps`)."""
    pytest.importorskip("faster_whisper")
    asr = Path(__file__).resolve().parent / "fixtures" / "asr-tiny"
    with running_server(engine, asr_model=str(asr)) as (url, _server, _state):
        reply = client(url).text_to_speech.convert_with_timestamps(
            "alloy", text=TEXT, seed=5, output_format="pcm_24000", request_options=OPTIONS
        )
        body = {"input": TEXT, "voice": "alloy", "seed": 5, **FAST, "response_format": "pcm", "sample_rate": 24000}
        timed = httpx.post(url + "/v1/audio/speech", json={**body, "timestamps": True}, timeout=300).json()
    assert base64.b64decode(reply.audio_base_64) == base64.b64decode(timed["audio"])
    heard = timed["words"]
    assert heard and "".join(reply.alignment.characters) == " ".join(w["word"] for w in heard)
    assert reply.alignment.character_start_times_seconds[0] == pytest.approx(heard[0]["start"], abs=1e-3)
    assert reply.alignment.character_end_times_seconds[-1] == pytest.approx(heard[-1]["end"], abs=1e-3)


def test_a_saved_voice_is_a_voice_id(server):
    """A voice saved by an upload (our route) is listed as theirs (`cloned`) and speaks by its
    voice_id: the bytes of our route with it."""
    url, _ = server
    golden = Path(__file__).resolve().parent / "fixtures" / "golden"
    clone = json.loads((golden / "clone.json").read_text())["generate_kwargs"]
    files = {"file": ("ref.wav", (golden / clone["ref_audio"]).read_bytes(), "audio/wav")}
    r = httpx.post(
        url + "/v1/audio/voices",
        data={"name": "alice", "ref_text": clone["ref_text"]},
        files=files,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=300,
    )
    assert r.status_code == 201, r.text
    el = client(url)
    listed = {v.voice_id: v for v in el.voices.get_all().voices}
    assert listed["alice"].category == "cloned" and listed["alice"].labels["type"] == "saved"
    got = b"".join(
        el.text_to_speech.convert("alice", text=TEXT, seed=5, output_format="pcm_24000", request_options=OPTIONS)
    )
    assert got == ours(url, voice="alice", response_format="pcm", sample_rate=24000, stream=False)
