"""Post-processing: parity with the reference's outputs and pydub-derived expectations."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from omnivoice_cli.engine.loading import load_codec_decoder
from omnivoice_cli.engine.model.config import ModelConfig
from omnivoice_cli.engine.sound import audio, postprocess

TINY = Path(__file__).parent / "fixtures" / "tiny" / "ckpt"
GOLDEN = Path(__file__).parent / "fixtures" / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.safetensors"))
SR = 24000


def _items(case):
    meta = json.loads((GOLDEN / f"{case}.json").read_text())
    return [(case, i, p["ref_rms"]) for i, p in enumerate(meta.get("post", []))]  # long_speed15 keeps none


ITEMS = [it for c in CASES for it in _items(c)]


@pytest.mark.parametrize("case,i,ref_rms", ITEMS, ids=[f"{c}-{i}" for c, i, _ in ITEMS])
def test_post_process_matches_reference(case, i, ref_rms):
    g = load_file(GOLDEN / f"{case}.safetensors")
    raw = g["item0.raw_waveform"][0] if "item0.raw_waveform" in g else g[f"decode{i}.audio_values"][0, 0]
    out = postprocess.post_process(raw, ref_rms, SR)
    ref = g[f"item{i}.audio"]
    assert out.dtype == np.float32 and out.shape == ref.shape
    assert np.abs(out - ref).max() < 1e-6  # bit-identical in practice


@pytest.mark.slow
def test_cross_fade_of_decoded_chunks_matches_reference():
    g = load_file(GOLDEN / "long.safetensors")
    dec = load_codec_decoder(TINY / "audio_tokenizer", ModelConfig.from_checkpoint(TINY).codec)
    chunks = [dec.decode(torch.from_numpy(g[f"decode{k}.codes"]))[0, 0].numpy() for k in range(5)]  # [N_k]
    merged = postprocess.cross_fade_chunks(chunks, SR)
    ref = g["item0.raw_waveform"][0]
    assert (
        merged.shape == ref.shape == (sum(c.shape[-1] for c in chunks) + 4 * 2400,)
    )  # 0.1 s of zeros per boundary; the fades overlap the chunks
    assert np.abs(merged - ref).max() < 1e-4


# ---------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------


def _tone(sec, amp=0.5, f=440.0):
    t = np.arange(int(round(sec * SR))) / SR
    return (amp * np.sin(2 * np.pi * f * t)).astype(np.float32)


def _sil(sec):
    return np.zeros(int(round(sec * SR)), np.float32)


@pytest.mark.parametrize(
    "gap,kept_gap",
    [(0.4, 0.4), (1.0, 1.0), (1.5, 1.0), (3.7, 1.0)],  # keep_silence 500 ms on each side: gaps > 1 s become 1 s
)
def test_inner_silence_is_shortened(gap, kept_gap):
    x = np.concatenate([_sil(0.3), _tone(1.0), _sil(gap), _tone(1.0), _sil(0.8)])
    out = audio.remove_silence(x, SR)
    # 0.1 s lead + 1 s tone + kept gap + 1 s tone + 0.1 s trail (lengths checked against pydub)
    assert len(out) == int(round((2.2 + kept_gap) * SR))
    q = audio.from_int16(audio.to_int16(x))
    np.testing.assert_array_equal(out[: int(1.1 * SR)], q[int(0.2 * SR) : int(1.3 * SR)])
    s2 = int(round((1.3 + gap) * SR))
    np.testing.assert_array_equal(out[-int(1.1 * SR) :], q[s2 : s2 + int(1.1 * SR)])


def test_remove_silence_noise_floor_case():
    # -62 dBFS noise floor (silent at -50 dBFS) with two louder stretches; expected cut points from pydub
    rng = np.random.default_rng(1234)
    x = (10 ** (-62 / 20)) * rng.standard_normal(5 * SR)
    x[16800:38400] += 0.2 * rng.standard_normal(21600)
    x[81600:98400] += 0.05 * np.sin(np.arange(16800) * 0.3)
    x = x.astype(np.float32)
    q = audio.from_int16(audio.to_int16(x))
    np.testing.assert_array_equal(audio.remove_silence(x, SR), np.concatenate([q[14400:50400], q[69600:100800]]))
    assert audio.detect_nonsilent(audio.to_int16(x), SR, 500, -50, 10) == [[700, 1600], [3400, 4100]]


def test_remove_silence_pydub_edge_quirks():
    # all silent -> empty; shorter than 1 ms -> empty; a length that rounds up in ms gets zero-padded
    assert audio.remove_silence(_sil(2.0), SR).shape == (0,)
    assert audio.remove_silence(np.full(7, 0.5, np.float32), SR).shape == (0,)
    out = audio.remove_silence(np.full(24013, 0.5, np.float32), SR)
    assert out.shape == (24024,) and np.all(out[:24013] == 0.5) and np.all(out[24013:] == 0)
    # 44.1 kHz: ms -> samples is int(ms * 44.1)
    assert audio.remove_silence(np.full(24013, 0.3, np.float32), 44100).shape == (24034,)


def test_int16_round_trip_and_clipping():
    x = np.array([-2.0, -1.0, -0.5, -1e-5, 0.0, 1e-5, 0.99999, 1.0, 3.0], np.float32)
    np.testing.assert_array_equal(audio.to_int16(x), [-32768, -32768, -16384, 0, 0, 0, 32767, 32767, 32767])
    assert audio.from_int16(audio.to_int16(x)).dtype == np.float32


def test_leading_silence_and_rms_geometry():
    x = audio.to_int16(np.concatenate([_sil(0.25), _tone(0.5)]))
    assert audio.detect_leading_silence(x, SR, -50.0) == 250
    assert audio.detect_leading_silence(np.zeros(SR, np.int16), SR, -50.0) == 1000
    assert audio.segment_ms(24013, SR) == 1001 and audio.segment_ms(24011, SR) == 1000
    assert audio.ms_to_sample(3, 44100) == 132


def fade_and_pad(x, sr, pad_duration=0.1, fade_duration=0.1):
    """post_process's fade and pad alone (no silence removal; a reference level that is kept)."""
    return postprocess.post_process(
        x, 0.2, sr, postprocess_output=False, pad_duration=pad_duration, fade_duration=fade_duration
    )


def adjust_volume(x, ref_rms):
    """post_process's level rule alone (no silence removal, fades or padding)."""
    return postprocess.post_process(x, ref_rms, SR, postprocess_output=False, pad_duration=0.0, fade_duration=0.0)


def test_fade_and_pad_lengths():
    x = np.ones(10000, np.float32)
    out = fade_and_pad(x, SR, pad_duration=0.1, fade_duration=0.1)
    assert out.shape == (10000 + 2 * 2400,)
    assert np.all(out[:2400] == 0) and np.all(out[-2400:] == 0)
    body = out[2400:-2400]
    np.testing.assert_array_equal(body[:2400], np.linspace(0, 1, 2400, dtype=np.float32))
    np.testing.assert_array_equal(body[-2400:], np.linspace(1, 0, 2400, dtype=np.float32))
    assert np.all(body[2400:-2400] == 1)
    short = fade_and_pad(np.ones(101, np.float32), SR, 0.0, 0.1)  # fade capped at half the length
    assert short.shape == (101,) and short[0] == 0 and short[49] == 1 and short[50] == 1 and short[-1] == 0
    assert fade_and_pad(np.zeros(0, np.float32), SR).shape == (0,)


def test_cross_fade_layout():
    a, b = np.ones(10000, np.float32), 2 * np.ones(9000, np.float32)
    out = postprocess.cross_fade_chunks([a, b], SR)
    assert out.shape == (10000 + 2400 + 9000,)
    np.testing.assert_array_equal(out[10000 - 2400 : 10000], np.linspace(1, 0, 2400, dtype=np.float32))
    assert np.all(out[10000:12400] == 0)
    np.testing.assert_array_equal(out[12400:14800], 2 * np.linspace(0, 1, 2400, dtype=np.float32))
    assert np.all(a == 1) and np.all(b == 2)  # inputs untouched
    np.testing.assert_array_equal(postprocess.cross_fade_chunks([a], SR), a)


def test_volume_rules():
    x = np.array([0.0, 0.2, -0.4], np.float32)
    np.testing.assert_allclose(adjust_volume(x, None), [0.0, 0.25, -0.5])
    np.testing.assert_allclose(adjust_volume(x, 0.05), x * 0.5)
    np.testing.assert_array_equal(adjust_volume(x, 0.2), x)
    np.testing.assert_array_equal(adjust_volume(np.full(3, 1e-7, np.float32), None), np.full(3, 1e-7, np.float32))


def test_post_process_without_silence_removal():
    x = np.concatenate([_sil(1.0), _tone(0.5, amp=0.8)])
    out = postprocess.post_process(x, None, SR, postprocess_output=False, pad_duration=0.05, fade_duration=0.0)
    assert out.shape == (len(x) + 2 * 1200,)
    np.testing.assert_allclose(np.abs(out).max(), 0.5, rtol=1e-6)
    assert postprocess.post_process(_sil(2.0), None, SR).shape == (0,)  # all silent: empty (the reference crashes)
