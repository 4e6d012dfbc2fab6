"""Reference audio: loading, the reference's preparation, encoding to codes, errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.numpy import load_file

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.model.encoder import load_codec_encoder
from omnivoice_cli.engine.sound.resample import resample
from omnivoice_cli.engine.sound.voice import (
    MAX_SECONDS,
    encode_reference,
    load_reference,
    prepare_reference,
    reference_rms,
    trim_long_audio,
)

FIX = Path(__file__).parent / "fixtures"
GOLDEN = FIX / "golden"
TINY_AT = FIX / "tiny" / "ckpt" / "audio_tokenizer"
CASES = [("clone", "ref_24k.wav"), ("clone_16k", "ref_16k.wav")]
SR = 24000


def _case(case):
    return load_file(GOLDEN / f"{case}.safetensors"), json.loads((GOLDEN / f"{case}.json").read_text())


@pytest.fixture(scope="module")
def encoder():
    return load_codec_encoder(TINY_AT)


def _bursts(seconds: float, burst: float = 2.0, gap: float = 0.5, amp: float = 0.3) -> np.ndarray:
    """Tone bursts separated by true silences."""
    t = np.arange(int(seconds * SR)) / SR
    on = (t % (burst + gap)) < burst
    return (amp * np.sin(2 * np.pi * 220 * t) * on).astype(np.float32)


# --------------------------------------------------------------------------- parity


@pytest.mark.parametrize("case,wav", CASES)
def test_prepared_waveform_and_rms_match_reference(case, wav):
    g, meta = _case(case)
    audio = load_reference(GOLDEN / wav)
    assert audio.dtype == np.float32 and audio.ndim == 1 and len(audio) == 3 * SR
    prepared = prepare_reference(audio, meta["generate_kwargs"]["ref_text"])
    expect = g["encode0.input_values"][0, 0]
    assert prepared.wav.shape == expect.shape and len(prepared.wav) % 960 == 0
    assert np.abs(prepared.wav - expect).max() <= 1e-6
    assert abs(prepared.rms - meta["task"]["ref_rms"][0]) <= 1e-6
    assert prepared.warnings == ()


@pytest.mark.slow
@pytest.mark.parametrize("case,wav", CASES)
def test_end_to_end_codes_match_reference(encoder, case, wav):
    g, meta = _case(case)
    prompt = encode_reference(encoder, GOLDEN / wav, meta["generate_kwargs"]["ref_text"])
    ref = g["prompt0.ref_audio_tokens"]
    assert prompt.codes.dtype == torch.int64 and tuple(prompt.codes.shape) == ref.shape
    assert np.array_equal(prompt.codes.numpy(), ref)
    assert prompt.text == meta["task"]["ref_texts"][0]  # punctuated
    assert abs(prompt.rms - meta["prompts"][0]["ref_rms"]) <= 1e-6


@pytest.mark.slow
def test_array_input_is_treated_like_a_file(encoder):
    data, sr = sf.read(str(GOLDEN / "ref_16k.wav"), dtype="float32")
    from_file = encode_reference(encoder, GOLDEN / "ref_16k.wav", "hi")
    from_array = encode_reference(encoder, (data, sr), "hi")
    assert torch.equal(from_file.codes, from_array.codes) and from_array.rms == from_file.rms


# --------------------------------------------------------------------------- loading


def test_stereo_is_averaged_and_other_rates_resampled(tmp_path):
    mono, _ = sf.read(str(GOLDEN / "ref_24k.wav"), dtype="float32")
    stereo = np.stack([mono, 0.5 * mono], axis=1)
    sf.write(str(tmp_path / "st.wav"), stereo, SR, subtype="FLOAT")
    got = load_reference(tmp_path / "st.wav")
    assert np.abs(got - 0.75 * mono).max() <= 1e-6
    sf.write(str(tmp_path / "a.flac"), mono, 44100)  # any soundfile format and rate
    got = load_reference(tmp_path / "a.flac")
    assert len(got) == -(-len(mono) * 24000 // 44100) and got.dtype == np.float32
    data, _ = sf.read(str(tmp_path / "a.flac"), dtype="float32")
    assert np.array_equal(got, resample(data[None], 44100, SR)[0])


def test_missing_file(tmp_path):
    with pytest.raises(InvalidRequest, match="not found.*nope.wav"):
        load_reference(tmp_path / "nope.wav")
    with pytest.raises(InvalidRequest, match="folder"):
        load_reference(tmp_path)


@pytest.mark.parametrize("content", [b"", b"definitely not audio" * 20, None])
def test_unreadable_file(tmp_path, content):
    path = tmp_path / "bad.wav"
    if content is None:  # a WAV cut inside its header
        content = (GOLDEN / "ref_24k.wav").read_bytes()[:30]
    path.write_bytes(content)
    with pytest.raises(InvalidRequest, match=r"cannot read reference audio .*bad\.wav"):
        load_reference(path)


def test_empty_audio_file(tmp_path):
    sf.write(str(tmp_path / "empty.wav"), np.zeros(0, dtype=np.float32), SR)
    with pytest.raises(InvalidRequest, match="empty"):
        prepare_reference(load_reference(tmp_path / "empty.wav"), "x")
    sf.write(str(tmp_path / "empty16.wav"), np.zeros(0, dtype=np.float32), 16000)
    with pytest.raises(InvalidRequest, match="empty"):
        load_reference(tmp_path / "empty16.wav")


# --------------------------------------------------------------------------- preparation


def test_silent_reference_is_refused(tmp_path):
    with pytest.raises(InvalidRequest, match="silent"):
        prepare_reference(np.zeros(2 * SR, dtype=np.float32), "text")
    sf.write(str(tmp_path / "zeros.wav"), np.zeros(2 * SR, dtype=np.float32), SR)
    with pytest.raises(InvalidRequest, match="silent"):
        prepare_reference(load_reference(tmp_path / "zeros.wav"), None)
    # a quiet but non-silent reference is scaled up to RMS 0.1 first (as the reference does), so it
    # survives the -50 dBFS silence removal
    quiet = (1e-4 * np.sin(np.arange(2 * SR) * 0.1)).astype(np.float32)
    assert len(prepare_reference(quiet, "text").wav) > SR


def test_too_short_reference_is_refused():
    with pytest.raises(InvalidRequest, match="too short"):
        prepare_reference(_bursts(0.3, burst=0.3), "text")
    ok = prepare_reference(_bursts(0.6, burst=0.6), "text")
    assert len(ok.wav) >= SR // 2 and len(ok.wav) % 960 == 0


def test_quiet_reference_is_scaled_and_keeps_its_rms():
    wav = _bursts(2.0, burst=2.0, amp=0.02)
    rms = reference_rms(wav)
    p = prepare_reference(wav, "text", preprocess=False)
    assert p.rms == pytest.approx(rms) and rms < 0.1
    assert reference_rms(p.wav) == pytest.approx(0.1, rel=1e-3)
    loud = _bursts(2.0, burst=2.0, amp=0.5)
    assert np.array_equal(prepare_reference(loud, "text", preprocess=False).wav, loud[: len(loud) // 960 * 960])


def test_silence_removal_parameters():
    # 1 s tone, 1 s silence, 1 s tone, 1 s trailing silence, 0.5 s leading silence
    lead, tone, gap = np.zeros(SR // 2), _bursts(1.0, burst=1.0), np.zeros(SR)
    wav = np.concatenate([lead, tone, gap, tone, gap]).astype(np.float32)
    p = prepare_reference(wav, "text")
    # inner pause -> 2 x 200 ms kept, 100 ms lead, 200 ms trail (10 ms granularity, hop cut)
    expect = 0.1 + 1.0 + 0.4 + 1.0 + 0.2
    assert abs(len(p.wav) / SR - expect) < 0.05
    raw = prepare_reference(wav, "text", preprocess=False)
    assert len(raw.wav) == len(wav) // 960 * 960


def test_long_reference_with_transcript_is_kept_and_warned():
    wav = _bursts(25.0)  # ends in a pause (one cut mid-burst gets the padding's note too)
    p = prepare_reference(wav, "a long transcript")
    assert len(p.wav) / SR > MAX_SECONDS
    assert len(p.warnings) == 1 and ">20s" in p.warnings[0]


def test_long_reference_without_transcript_is_trimmed_at_a_pause():
    wav = _bursts(24.0)  # stretches start every 2.5 s: the last start <= 15 s is 15.0 s
    trimmed = trim_long_audio(wav, SR)
    assert len(trimmed) == 15 * SR
    assert np.abs(trimmed - wav[: 15 * SR]).max() <= 1 / 32768  # through int16, as pydub
    p = prepare_reference(wav, None)
    assert 3.0 <= len(p.wav) / SR < 15.0
    assert len(p.warnings) == 1 and "trimmed" in p.warnings[0]
    # short audio is left alone; no pause at all: cut at 15 s
    assert trim_long_audio(wav[: 10 * SR], SR) is not None and len(trim_long_audio(wav[: 10 * SR], SR)) == 10 * SR
    tone = _bursts(21.0, burst=21.0)
    assert len(trim_long_audio(tone, SR)) == 15 * SR


def test_transcript_punctuation():
    wav = _bursts(2.0, burst=2.0)
    assert prepare_reference(_bursts(4.5, burst=4.0), "x").warnings == ()  # 3-10 s, ends in a pause: nothing to say

    class Fake:
        sample_rate, hop_length = SR, 960

        def encode(self, w):
            assert w.shape[:2] == (1, 1) and w.shape[2] % 960 == 0
            return torch.zeros(1, 8, w.shape[2] // 960, dtype=torch.long)

    assert encode_reference(Fake(), (wav, SR), "hello there").text == "hello there."
    assert encode_reference(Fake(), (wav, SR), "你好").text == "你好。"
    assert encode_reference(Fake(), (wav, SR), "done!").text == "done!"
    assert encode_reference(Fake(), (wav, SR), "raw", preprocess=False).text == "raw"
    assert encode_reference(Fake(), (wav, SR), None).text is None
    assert encode_reference(Fake(), (wav, SR), "x").codes.shape == (8, 55)  # 2 s, cut off: 0.2 s of padding


# --------------------------------------------------------------------------- preparation: the length warnings


def _prepare(seconds, transcript="Some words."):
    from omnivoice_cli.engine.sound.voice import prepare_reference

    t = np.arange(int(seconds * SR)) / SR
    wav = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    wav[-SR // 8 :] = 0  # it ends in silence (one cut mid-word gets the padding's note: test_voice_tail.py)
    return prepare_reference(wav, transcript, source="reference audio me.wav")


def test_a_short_reference_is_warned_about_and_why():
    [warning] = _prepare(2.0).warnings
    assert warning.startswith("reference audio me.wav is only 2.0 s long: under 3 s the voice is poorly captured")
    assert "3-10 s" in warning


def test_a_long_reference_is_warned_about_and_why():
    [warning] = _prepare(14.0).warnings
    assert warning.startswith("reference audio me.wav holds 14.0 s of sound once its silences are removed: over 10 s")
    assert "slower" in warning and "memory" in warning and "trim it to 3-10 s" in warning


def test_no_length_warning_inside_3_to_10_s_and_one_warning_over_20_s():
    assert _prepare(3.0).warnings == () and _prepare(9.5).warnings == ()
    [over] = _prepare(25.0).warnings  # with a transcript: the reference's own warning only
    assert over.startswith("reference audio me.wav is 25.0s long (>20s). This may cause slower generation")
    [trimmed, padded] = _prepare(25.0, None).warnings  # without one: trimmed, and that warning says so
    assert "has no transcript: trimmed to" in trimmed
    assert "ends while still sounding" in padded  # a tone without pauses is cut mid-tone
