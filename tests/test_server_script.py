"""POST /v1/audio/script (server/script.py): the lines of a dialogue on the packed engine, the
very samples `say --cast` gives with the same seeds, as one track or one track per speaker."""

import base64
import io

import numpy as np
import pytest

pytest.importorskip("uvicorn")

import httpx
import soundfile as sf
from conftest import TINY_CKPT
from server_util import running_server

pytestmark = pytest.mark.slow  # every test here runs the tiny model end to end (or a server on it)

LINES = [
    ("ALICE", "alloy", "Hello there, Bob."),
    ("BOB", "echo", "Hi Alice. How are you?"),
    ("ALICE", "alloy", "Fine, thank you."),
]


def pcm(data):
    return np.frombuffer(data, "<i2")


def test_script_equals_say_cast(engine, loaded, invoke, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    script = tmp_path / "s.txt"
    script.write_text("".join(f"{who}: {text}\n" for who, _v, text in LINES))
    casts = ["--cast", "ALICE=alloy", "--cast", "BOB=echo"]
    fast = ["--model", TINY_CKPT, "--num-step", "2", "--seed", "40", "--gap", "0.25"]
    r = invoke("say", "-f", script, *casts, *fast, "-o", tmp_path / "cast.raw")
    assert r.exit_code == 0, r.stderr
    said = pcm((tmp_path / "cast.raw").read_bytes())
    body = {
        "lines": [{"speaker": who, "voice": v, "text": t} for who, v, t in LINES],
        "seed": 40,
        "pause": 0.25,
        "num_step": 2,
        "response_format": "pcm",
    }
    with running_server(engine) as (url, _server, _state):
        c = httpx.Client(base_url=url, timeout=300)
        one = c.post("/v1/audio/script", json=body)
        assert one.status_code == 200, one.text
        assert one.headers["x-omnivoice-seed"] == "40"
        np.testing.assert_array_equal(pcm(one.content), said)
        stems = c.post("/v1/audio/script", json={**body, "tracks": "speakers"})
        assert stems.status_code == 200, stems.text
        tracks = stems.json()["tracks"]
        assert [t["speaker"] for t in tracks] == ["ALICE", "BOB"]
        audio = [pcm(base64.b64decode(t["audio"])) for t in tracks]
        assert all(len(a) == len(said) for a in audio)
        np.testing.assert_array_equal(audio[0].astype(int) + audio[1], said)  # silent where the other speaks
        assert not (audio[0].astype(bool) & audio[1].astype(bool)).any()
        wav = c.post("/v1/audio/script", json={**body, "response_format": "wav", "sample_rate": 8000})
        low, rate = sf.read(io.BytesIO(wav.content), dtype="int16")
        assert rate == 8000 and len(low) == -(-len(said) // 3)


def test_script_bad_requests(engine, home):
    with running_server(engine) as (url, _server, _state):
        c = httpx.Client(base_url=url, timeout=120)
        cases = [
            ({"lines": []}, "field 'lines' must be a list of {voice, text} objects"),
            ({"lines": [{"voice": "alloy"}]}, "lines[0] must be an object with 'text'"),
            ({"lines": [{"text": "Hi.", "voice": "nobody"}]}, "lines[0]: unknown voice 'nobody'"),
            (
                {"lines": [{"text": "Hi."}], "num_step": 100},
                "lines[0]: field 'num_step' must be an integer in 1..64, got 100",
            ),
            ({"lines": [{"text": "Hi."}], "pause": -1}, "field 'pause' must be seconds in 0..60"),
            ({"lines": [{"text": "Hi."}], "tracks": "all"}, "field 'tracks' must be one or speakers"),
            ({"lines": [{"text": "Hi."}], "sede": 1}, "did you mean 'seed'"),
        ]
        for body, words in cases:
            r = c.post("/v1/audio/script", json=body)
            assert r.status_code == 400 and words in r.json()["error"]["message"], (body, r.text)
