"""`serve --phrase-cache` over real HTTP on the tiny checkpoint: the same request twice is a hit
byte-identical to the miss and to a render with the cache off; a damaged entry is re-rendered; the
header and /metrics say hit or miss; streamed and SSE replies are kept as their bytes."""

import base64
import json

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
from server_util import running_server

from omnivoice_cli.media.phrasestore import PhraseStore

pytestmark = pytest.mark.slow  # a server on the tiny model

CAP = 64 << 20
BODY = {"model": "omnivoice", "input": "One moment, please.", "voice": "alloy", "response_format": "wav"}


@pytest.fixture
def phrases(tmp_path, monkeypatch):
    folder = tmp_path / "phrases"
    monkeypatch.setenv("OMNIVOICE_PHRASE_CACHE", str(folder))
    return folder


@pytest.fixture
def cached(engine, module_home, phrases):
    with running_server(engine, phrase_cache=CAP) as (url, server, state):
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client, state


def speak_cached(client, **extra):
    r = client.post("/v1/audio/speech", json={**BODY, **extra})
    assert r.status_code == 200, r.text
    return r


def test_the_same_request_twice_is_a_hit_equal_to_the_miss_and_to_a_render_without_the_cache(cached, engine, phrases):
    client, state = cached
    first, second = speak_cached(client), speak_cached(client)
    assert first.headers["x-omnivoice-cache"] == "miss" and second.headers["x-omnivoice-cache"] == "hit"
    assert first.content == second.content and first.content[:4] == b"RIFF"
    seed = first.headers["x-omnivoice-seed"]
    assert second.headers["x-omnivoice-seed"] == seed  # no seed given: derived from the text and voice
    assert (state.phrases.hits, state.phrases.misses) == (1, 1)
    metrics = client.get("/metrics").text
    assert 'omnivoice_phrase_cache_total{result="hit"} 1.0' in metrics
    assert 'omnivoice_phrase_cache_total{result="miss"} 1.0' in metrics
    other = speak_cached(client, input="Another phrase entirely.")
    assert other.headers["x-omnivoice-cache"] == "miss" and other.headers["x-omnivoice-seed"] != seed
    with running_server(engine) as (url, _, plain_state):  # the cache off: the seed given
        assert plain_state.phrases is None
        with httpx.Client(base_url=url, timeout=120) as plain:
            fresh = speak_cached(plain, seed=int(seed))
    assert "x-omnivoice-cache" not in fresh.headers
    assert fresh.content == first.content


def test_a_flipped_byte_in_an_entry_is_found_and_the_request_rendered_again(cached, phrases):
    client, state = cached
    first = speak_cached(client, input="Please hold.")
    [entry] = PhraseStore(phrases, CAP).entries()
    raw = bytearray(entry.path.read_bytes())
    raw[-100] ^= 0x01  # in the audio: the header still reads
    entry.path.write_bytes(bytes(raw))
    again = speak_cached(client, input="Please hold.")
    assert again.headers["x-omnivoice-cache"] == "miss"  # the damaged entry dropped, the request rendered
    assert again.content == first.content
    third = speak_cached(client, input="Please hold.")
    assert third.headers["x-omnivoice-cache"] == "hit" and third.content == first.content


def test_streamed_and_sse_replies_are_kept_as_their_byte_stream(cached):
    client, _ = cached
    body = {"input": "Thank you for waiting.", "response_format": "pcm"}
    chunked = [speak_cached(client, stream=True, **body) for _ in range(2)]
    assert [r.headers["x-omnivoice-cache"] for r in chunked] == ["miss", "hit"]
    assert chunked[0].content == chunked[1].content and len(chunked[0].content) > 0
    events = speak_cached(client, stream_format="sse", **body).text  # the same stream, as SSE: a hit
    deltas = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: ")]
    audio = b"".join(base64.b64decode(d["audio"]) for d in deltas if d["type"] == "speech.audio.delta")
    assert audio == chunked[0].content
    assert deltas[-1]["type"] == "speech.audio.done" and deltas[-1]["usage"]["output_tokens"] == len(audio) // 2


def test_timestamps_replies_are_not_cached(cached):
    client, state = cached
    r = client.post("/v1/audio/speech", json={**BODY, "timestamps": False, "stream": False})
    assert r.headers["x-omnivoice-cache"] == "miss"
    assert state.phrases.misses == 1


def test_two_servers_filling_one_cache_at_once_lose_nothing(tmp_path, module_home):
    """Two `serve --phrase-cache` processes on one folder, asked different phrases at the same time:
    every reply is kept, and each server then answers the other's phrases as hits, byte for byte."""
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from server_util import TINY_CKPT, ready_url

    env = {**os.environ, "OMNIVOICE_PHRASE_CACHE": str(tmp_path / "phrases"), "OMNIVOICE_HOME": str(module_home)}
    cmd = [sys.executable, "-m", "omnivoice_cli.cli", "serve", "--model", str(TINY_CKPT), "--port", "0"]
    cmd += ["--num-step", "4", "--phrase-cache", "64"]
    procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        urls = [ready_url(p) for p in procs]
        phrases = [[f"Server {s} says phrase number {n}." for n in range(6)] for s in range(2)]

        def fill(s):
            with httpx.Client(base_url=urls[s], timeout=300) as client:
                return {t: speak_cached(client, input=t).content for t in phrases[s]}

        with ThreadPoolExecutor(2) as pool:  # both at once
            made = [*pool.map(fill, range(2))]
        assert len(PhraseStore(tmp_path / "phrases", CAP).entries()) == 12
        for s in range(2):
            with httpx.Client(base_url=urls[1 - s], timeout=300) as other:
                for text, data in made[s].items():
                    r = speak_cached(other, input=text)
                    assert r.headers["x-omnivoice-cache"] == "hit" and r.content == data
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(120)


@pytest.mark.parametrize(
    "lie",
    [{"loudness": '{"gain":1}\r\nSet-Cookie: a=b'}, {"loudness": "x" * 100_000}, {"loudness": "[]"}, {"samples": -5}],
)
def test_an_entry_whose_metadata_lies_is_rendered_anew(cached, phrases, lie):
    """An entry whole by its checksum but with metadata no render keeps (a header value with a
    newline, a huge one, a count below zero): a miss, rendered and kept anew, never sent."""
    client, _ = cached
    body = {"input": f"A lie of {sorted(lie)[0]} {len(str(lie))}."}
    first = speak_cached(client, **body)
    store = PhraseStore(phrases, CAP)
    for entry in store.entries():
        key = entry.path.name.split(".")[0]
        found = store.get(key)
        store.put(key, found.data, {**found.meta, **lie})
    again = speak_cached(client, **body)
    assert again.headers["x-omnivoice-cache"] == "miss"
    assert "set-cookie" not in again.headers and again.content == first.content
    assert speak_cached(client, **body).headers["x-omnivoice-cache"] == "hit"
