"""The band-limited resampler: equal to the reference's torchaudio resample, and sane on its own."""

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from omnivoice_cli.engine.sound.resample import output_length, reduced_rates, resample, resample_tensor

FIX = Path(__file__).parent / "fixtures"
CASES = [("ref24k_to_16k", "ref_24k.wav", 16000), ("ref16k_to_24k", "ref_16k.wav", 24000)]


def _load(name: str) -> tuple[np.ndarray, int]:
    data, sr = sf.read(str(FIX / "golden" / name), dtype="float32", always_2d=True)
    return np.ascontiguousarray(data.T), sr  # [1, N] as the reference loads it


def direct_resample_f64(
    x: np.ndarray, orig_freq: int, new_freq: int, width: int = 6, rolloff: float = 0.99
) -> np.ndarray:
    """Independent float64 formula: y[m] = sum_n x[n] h(n/orig - m/new) with the Hann-windowed sinc
    h(t) = sinc(c t) cos^2(pi c t / (2 width)) c / orig, c = min(orig, new) * rolloff, |c t| <= width
    (rates reduced by their gcd)."""
    g = math.gcd(orig_freq, new_freq)
    orig, new = orig_freq // g, new_freq // g
    c = min(orig, new) * rolloff
    n_out = -((-len(x) * new) // orig)
    m = np.arange(n_out)
    reach = math.ceil(width * orig / c) + orig  # input samples that can fall in the window
    centre = (m * orig) // new
    n = centre[:, None] + np.arange(-reach, reach + 1)[None, :]  # [n_out, taps]
    t = np.clip(c * (n / orig - m[:, None] / new), -width, width)
    h = np.sinc(t) * np.cos(np.pi * t / (2 * width)) ** 2 * (c / orig)
    xs = np.where((n >= 0) & (n < len(x)), x.astype(np.float64)[np.clip(n, 0, len(x) - 1)], 0.0)
    return (xs * h).sum(axis=1)


@pytest.mark.parametrize("name,wav,new", CASES)
def test_matches_reference_fixture(name, wav, new):
    x, sr = _load(wav)
    ref = np.load(FIX / "resample" / f"{name}.npz")
    y = resample(x, sr, new)
    assert y.dtype == np.float32 and y.shape == (1, int(ref["n"]))
    y = y[0]
    assert np.abs(y[:4800] - ref["head"]).max() <= 1e-6
    assert np.abs(y[::97] - ref["stride97"]).max() <= 1e-6
    y64 = y.astype(np.float64)
    assert abs(y64.sum() - float(ref["sum"])) <= 1e-6 * len(y)
    assert abs((y64**2).sum() - float(ref["sumsq"])) <= 1e-6 * len(y)
    assert abs(np.abs(y64).sum() - float(ref["sumabs"])) <= 1e-6 * len(y)
    # informative: the implementation follows torchaudio's float32 op order, so it is normally
    # bit-identical; a different CPU / BLAS may change the last bit, which the tolerances allow
    bit_exact = hashlib.sha256(y.tobytes()).digest() == ref["sha256"].tobytes()
    print(f"{name}: bit-exact with the reference: {bit_exact}")


@pytest.mark.parametrize("name,wav,new", CASES)
def test_matches_direct_float64_formula(name, wav, new):
    x, sr = _load(wav)
    y = resample(x[0], sr, new)
    expect = direct_resample_f64(x[0], sr, new)
    assert y.shape == expect.shape
    assert np.abs(y - expect).max() <= 1e-6


@pytest.mark.parametrize("orig,new", [(44100, 24000), (48000, 24000), (22050, 24000), (8000, 24000), (24000, 8000)])
def test_other_rate_pairs_match_direct_formula(orig, new):
    rng = np.random.default_rng(orig + new)
    x = (0.3 * rng.standard_normal(3001)).astype(np.float32)
    expect = direct_resample_f64(x, orig, new)
    # float64 input: the kernel is built in float64 too, so only summation order differs
    assert np.abs(resample(x.astype(np.float64), orig, new) - expect).max() <= 1e-9
    # float32: like torchaudio, the kernel is built in the input's dtype; with large reduced rates
    # (147:80, 441:480) its float32 phase arithmetic costs a few 1e-6
    assert np.abs(resample(x, orig, new) - expect).max() <= 2e-5


@pytest.mark.parametrize(
    "orig,new", [(24000, 16000), (16000, 24000), (44100, 24000), (48000, 24000), (22050, 24000), (8000, 24000)]
)
@pytest.mark.parametrize("n", [1, 2, 3, 959, 960, 12345])
def test_output_length_is_ceil(orig, new, n):
    expect = math.ceil(n * new / orig)
    assert output_length(n, orig, new) == expect
    x = torch.randn(n)
    assert resample_tensor(x, orig, new).shape == (expect,)


def test_equal_rates_is_identity():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    assert resample(x, 24000, 24000) is x
    t = torch.from_numpy(x)
    assert resample_tensor(t, 16000, 16000) is t


@pytest.mark.parametrize(
    "orig,new,freq", [(24000, 16000, 3000.0), (16000, 24000, 3000.0), (44100, 24000, 1000.0), (48000, 24000, 7000.0)]
)
def test_tone_below_nyquist_keeps_amplitude(orig, new, freq):
    n = orig  # 1 s
    x = np.sin(2 * np.pi * freq * np.arange(n) / orig).astype(np.float32)
    y = resample(x, orig, new)
    mid = y[new // 4 : 3 * new // 4]  # away from the zero-padded edges
    expect = np.sin(2 * np.pi * freq * np.arange(len(y)) / new)[new // 4 : 3 * new // 4]
    assert abs(np.abs(mid).max() - 1.0) < 5e-3
    assert np.abs(mid - expect).max() < 5e-3  # same phase: no delay


def test_tone_above_new_nyquist_is_removed():
    x = np.sin(2 * np.pi * 10000.0 * np.arange(24000) / 24000).astype(np.float32)
    y = resample(x, 24000, 16000)  # new Nyquist 8 kHz
    assert np.abs(y[4000:12000]).max() < 1e-2


def test_dtypes_and_batch_shapes():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4000)).astype(np.float32)
    y = resample(x, 24000, 16000)
    assert y.shape == (2, 3, 2667) and y.dtype == np.float32
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(y[i, j], resample(x[i, j], 24000, 16000), rtol=0, atol=1e-6)
    y64 = resample(x.astype(np.float64), 24000, 16000)
    assert y64.dtype == np.float64
    assert np.abs(y64 - y).max() < 1e-5
    t = resample(torch.from_numpy(x), 24000, 16000)
    assert torch.is_tensor(t) and t.shape == (2, 3, 2667)


def test_bad_arguments():
    with pytest.raises(TypeError):
        resample(np.zeros(10, dtype=np.int16), 24000, 16000)
    with pytest.raises(TypeError):
        resample_tensor(torch.zeros(10, dtype=torch.long), 24000, 16000)
    for bad in (0, -16000, 16000.5):
        with pytest.raises(ValueError):
            resample(np.zeros(10, dtype=np.float32), 24000, bad)
    assert reduced_rates(24000, 16000) == (3, 2)
    assert reduced_rates(44100, 24000) == (147, 80)
