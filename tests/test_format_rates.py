"""A format and a sample rate that cannot meet (Opus at 22050 or 44100 Hz) are refused before any
work, in the same words by the CLI (exit 2) and the server (400): media/formats.check_rate, the
rates of the table of formats."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
from conftest import error_line

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.media.formats import AUDIO_FORMATS, check_rate
from omnivoice_cli.media.output import encode
from omnivoice_cli.media.rates import SAMPLE_RATES

OPUS_22050 = (
    "format opus cannot carry a sample rate of 22050 Hz: use 8000, 16000, 24000 or 48000 Hz with opus, "
    "or another format (wav, flac, ogg, mp3)"
)


def test_the_table_says_each_rate_each_format_carries():
    """Every pair the table allows encodes; every pair it refuses is what the codec refuses."""
    audio = np.zeros(4800, np.float32)
    for fmt in AUDIO_FORMATS.values():
        if fmt.encoder == "aac":
            continue  # an optional encoder; its rates are AAC's table (formats.AAC_RATES, m4b's too)
        for rate in SAMPLE_RATES:
            try:
                check_rate(fmt, rate)
            except InvalidRequest:
                with pytest.raises(Exception):
                    sf.write(io.BytesIO(), audio, rate, **fmt.sf_options())
            else:
                assert encode(audio, rate, fmt.sf_format, fmt.subtype)
    with pytest.raises(InvalidRequest) as e:
        check_rate(AUDIO_FORMATS["opus"], 22050)
    assert str(e.value) == OPUS_22050


@pytest.mark.parametrize("rate", [22050, 44100])
def test_say_refuses_opus_at_a_rate_it_cannot_carry(invoke, fake_engine, tmp_path, rate):
    for out in (tmp_path / "x.opus", "-"):
        extra = ["--format", "opus"] if out == "-" else []
        r = invoke("say", "Hello.", "--sample-rate", rate, "-o", out, *extra)
        assert r.exit_code == 2, r.stderr
        assert error_line(r) == "Error: " + OPUS_22050.replace("22050", str(rate))
    assert fake_engine.loads == [] and fake_engine.requests == []  # refused before the model
    assert not list(tmp_path.iterdir())


@pytest.mark.slow  # the resampler's first use imports torch
def test_say_writes_opus_at_the_rates_it_carries(invoke, fake_engine, tmp_path):
    for rate in (16000, 48000):
        r = invoke("say", "Hello.", "--sample-rate", rate, "-o", tmp_path / f"{rate}.opus")
        assert r.exit_code == 0, r.stderr
        info = sf.info(str(tmp_path / f"{rate}.opus"))
        assert info.samplerate == rate and info.frames == rate  # 1 s of the fake engine
    r = invoke("say", "Hello.", "--sample-rate", 22050, "-o", tmp_path / "x.ogg")
    assert r.exit_code == 0, r.stderr
    assert sf.info(str(tmp_path / "x.ogg")).samplerate == 22050


@pytest.mark.slow
def test_the_server_refuses_opus_at_22050_with_the_cli_words(engine, home):
    pytest.importorskip("uvicorn")
    import httpx
    from server_util import running_server

    with running_server(engine) as (url, _server, state):
        c = httpx.Client(base_url=url, timeout=120)
        before = state.service.stats()["forwards"]
        for stream in (False, True):
            r = c.post(
                "/v1/audio/speech",
                json={"input": "Hello.", "response_format": "opus", "sample_rate": 22050, "stream": stream},
            )
            assert r.status_code == 400, r.text
            assert r.json()["error"]["message"] == OPUS_22050
            assert r.json()["error"]["param"] == "sample_rate"
        body = {"lines": [{"text": "Hi."}], "response_format": "opus", "sample_rate": 44100, "tracks": "speakers"}
        r = c.post("/v1/audio/script", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"] == OPUS_22050.replace("22050", "44100")
        assert state.service.stats()["forwards"] == before  # refused before any generation
        ok = c.post("/v1/audio/speech", json={"input": "Hi.", "response_format": "opus", "sample_rate": 16000})
        assert ok.status_code == 200, ok.text
        assert ok.content[:4] == b"OggS"
        ok = c.post("/v1/audio/script", json={**body, "sample_rate": 48000, "tracks": "one"})
        assert ok.status_code == 200, ok.text
        assert ok.content[:4] == b"OggS"
