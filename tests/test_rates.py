"""Output sample rates (media/rates.py): a stream resampled piece by piece is the whole resampled."""

import numpy as np
import pytest

from omnivoice_cli.media.rates import SAMPLE_RATES, StreamResampler, at_rate


@pytest.mark.parametrize("rate", [r for r in SAMPLE_RATES if r != 24000])
@pytest.mark.parametrize("cuts", [[1, 7, 100, 5000, 12345, 30000], [24000], [3, 6, 9]])
def test_a_stream_is_the_whole(rate, cuts):
    x = (np.random.RandomState(0).randn(50000) * 0.2).astype(np.float32)
    whole = at_rate(x, 24000, rate)
    r, parts, last = StreamResampler(24000, rate), [], 0
    for c in [*cuts, len(x)]:
        parts.append(r.feed(x[last:c]))
        last = c
    parts.append(r.finish())
    joined = np.concatenate(parts)
    assert len(joined) == len(whole) == -(-len(x) * rate // 24000)
    np.testing.assert_allclose(joined, whole, atol=1e-6)


def test_a_tone_keeps_its_pitch_and_level_at_8k():
    t = np.arange(24000) / 24000
    x = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    y = at_rate(x, 24000, 8000)
    assert len(y) == 8000
    spectrum = np.abs(np.fft.rfft(y[1000:7000] * np.hanning(6000)))
    assert abs(np.argmax(spectrum) * 8000 / 6000 - 440) < 2
    assert abs(np.sqrt(np.mean(y[1000:7000] ** 2)) - 0.5 / np.sqrt(2)) < 0.01


def test_the_same_rate_is_left_alone():
    x = np.ones(10, dtype=np.float32)
    assert at_rate(x, 24000, None) is x and at_rate(x, 24000, 24000) is x
    r = StreamResampler(24000, 24000)
    assert np.array_equal(r.feed(x), x) and len(r.finish()) == 0
