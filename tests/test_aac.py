"""AAC output: `-o x.aac` (ADTS), `-o x.m4a` (MP4) and the server's `response_format: aac`, through
PyAV (the `aac` extra) or an ffmpeg on PATH; without either, a usage error naming what to install.
Written audio is decoded back with PyAV and compared with what was encoded."""

from __future__ import annotations

import io
import json
import shutil
import stat

import numpy as np
import pytest
from conftest import files_in
from helpers.audio import speechlike

from omnivoice_cli.engine.errors import InvalidRequest, OmniVoiceError
from omnivoice_cli.media import encoders
from omnivoice_cli.media.encoders import EncoderMissing, aac_encoder
from omnivoice_cli.media.formats import AUDIO_FORMATS, writable_formats
from omnivoice_cli.media.output import check_output, encode, encode_aac, write_audio
from omnivoice_cli.media.streams import StreamEncoder

SR = 24000


def decoded(data: bytes) -> tuple[np.ndarray, int, str, int]:
    """(samples, sample rate, container format, channels) of an audio file, decoded with PyAV."""
    av = pytest.importorskip("av")
    with av.open(io.BytesIO(data)) as c:
        s = c.streams.audio[0]
        samples = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(s)])
        return samples, s.codec_context.sample_rate, c.format.name, s.codec_context.channels


def aligned_correlation(source: np.ndarray, back: np.ndarray, max_delay: int = 3000) -> tuple[float, int]:
    """The correlation of `back` with `source` at the delay (the encoder's priming) that fits best."""
    n = len(source) - max_delay
    delay = max(range(max_delay), key=lambda d: float(np.dot(source[:n], back[d : d + n])))
    return float(np.corrcoef(source[:n], back[delay : delay + n])[0, 1]), delay


def check_decodes(data: bytes, source: np.ndarray, container: str) -> None:
    back, rate, fmt, channels = decoded(data)
    assert (rate, channels) == (SR, 1) and container in fmt
    assert len(source) <= len(back) <= len(source) + 3 * 1024  # priming and the last frame's padding
    corr, delay = aligned_correlation(source, back)
    assert corr > 0.98 and delay <= 2048, (corr, delay)


@pytest.fixture
def pyav():
    pytest.importorskip("av")
    assert aac_encoder() == "pyav"


@pytest.mark.parametrize("name,container,head", [("x.aac", "aac", b"\xff\xf1"), ("x.m4a", "mp4", b"ftyp")])
def test_files_decode_back_to_the_source(tmp_path, pyav, name, container, head):
    a = speechlike()
    target = check_output(str(tmp_path / name))
    write_audio(a, SR, target)
    data = (tmp_path / name).read_bytes()
    assert head in data[:12] and files_in(tmp_path) == [name]  # no temporary file left
    check_decodes(data, a, container)
    assert encode(a, SR, target.format, target.subtype) == data  # the server's whole reply: the same bytes
    if name.endswith(".m4a"):
        assert data[8:12] == b"M4A "  # an iTunes-style .m4a, not a video .mp4


def test_the_aac_formats(pyav):
    aac, m4a = AUDIO_FORMATS["aac"], AUDIO_FORMATS["m4a"]
    assert (aac.extension, aac.mime, m4a.extension, m4a.mime) == (".aac", "audio/aac", ".m4a", "audio/mp4")
    assert not aac.streams and not m4a.streams and aac.lossy and m4a.lossy  # sent whole, like flac
    assert {"aac", "m4a"} <= set(writable_formats())
    assert check_output("-", "aac").audio_format is aac
    with pytest.raises(InvalidRequest, match="cannot be streamed"):
        StreamEncoder("aac", SR)


def test_without_an_encoder_aac_is_a_usage_error_naming_what_to_install(tmp_path, monkeypatch, invoke, fake_engine):
    monkeypatch.setattr(encoders, "aac_encoder", lambda: None)
    assert "aac" not in writable_formats() and "m4a" not in writable_formats()
    for name in ("x.aac", "x.m4a"):
        with pytest.raises(
            EncoderMissing,
            match=r"needs an AAC encoder and none is installed: pip install "
            r"'omnivoice-cli\[aac\]' \(PyAV\), or put ffmpeg on PATH",
        ):
            check_output(str(tmp_path / name))
    assert issubclass(EncoderMissing, InvalidRequest)  # exit 2, and a 400 from the server
    r = invoke("say", "Hi.", "-o", tmp_path / "x.m4a")
    assert r.exit_code == 2 and "pip install 'omnivoice-cli[aac]'" in r.stderr
    assert fake_engine.loads == [] and files_in(tmp_path) == []

    from omnivoice_cli.server.config import ServeOptions
    from omnivoice_cli.server.errors import ApiError
    from omnivoice_cli.server.speech import parse_speech

    with pytest.raises(ApiError) as e:
        parse_speech(json.dumps({"input": "Hi", "response_format": "aac"}).encode(), ServeOptions())
    assert e.value.status == 400 and e.value.param == "response_format"
    assert "field 'response_format' 'aac': format aac (AAC) needs an AAC encoder" in e.value.message


def _fake_ffmpeg(folder, script: str):
    folder.mkdir()
    path = folder / "ffmpeg"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def test_ffmpeg_on_path_is_the_fallback_and_its_failure_is_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(encoders, "_pyav_has_aac", lambda: False)
    monkeypatch.setenv("PATH", str(_fake_ffmpeg(tmp_path / "bin", "echo 'Unknown encoder aac' >&2; exit 1\n")))
    assert aac_encoder() == "ffmpeg"
    with pytest.raises(OmniVoiceError, match=r"ffmpeg could not encode AAC \(exit 1\): Unknown encoder aac"):
        encode_aac(speechlike(0.2), SR, "aac")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert aac_encoder() is None


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="no ffmpeg on PATH")
@pytest.mark.parametrize("fmt,container", [("aac", "aac"), ("m4a", "mp4")])
def test_a_real_ffmpeg_encodes_what_decodes_back(monkeypatch, fmt, container):
    monkeypatch.setattr(encoders, "_pyav_has_aac", lambda: False)
    assert aac_encoder() == "ffmpeg"
    a = speechlike()
    check_decodes(encode_aac(a, SR, fmt), a, container)


def test_say_writes_m4a_and_aac(invoke, fake_engine, tmp_path, pyav):
    for name in ("a.m4a", "b.aac"):
        r = invoke("say", "Hi.", "-o", tmp_path / name, "--seed", 4, "-q")
        assert r.exit_code == 0, r.stderr
        back, rate, _, _ = decoded((tmp_path / name).read_bytes())
        assert rate == SR and abs(len(back) / SR - 1.0) < 0.15  # FakeEngine speaks 1 s
    r = invoke("say", "Hi.", "-o", "-", "--format", "aac", "-q", "--no-mark")
    assert r.exit_code == 0 and r.stdout_bytes[:2] == b"\xff\xf1"
    r = invoke("say", "Hi.", "-o", "-", "--format", "aac", "-q")  # the AI mark: an ID3v2 tag, then ADTS
    assert r.exit_code == 0 and r.stdout_bytes[:3] == b"ID3"


@pytest.mark.slow
def test_the_server_replies_aac(engine, tmp_path, monkeypatch, pyav):
    pytest.importorskip("uvicorn")
    openai = pytest.importorskip("openai")
    from server_util import running_server, wav_samples

    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path))
    body = {"input": "Hello there, how are you?", "voice": "alloy", "extra_body": {"num_step": 4, "seed": 5}}
    with running_server(engine) as (url, _, _):
        api = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        wav = api.audio.speech.create(model="tts-1", response_format="wav", **body).content
        r = api.audio.speech.with_raw_response.create(model="tts-1", response_format="aac", **body)
    assert r.status_code == 200 and r.headers["content-type"] == "audio/aac"
    assert int(r.headers["content-length"]) == len(r.content)
    source = wav_samples(wav).astype(np.float32) / 32768
    check_decodes(r.content, source, "aac")
