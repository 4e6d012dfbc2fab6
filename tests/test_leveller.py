"""media/leveller.Leveller: the one leveller of `normalize` (one array) and of a book (its
outputs streamed from their parts): the same gain, output and report however the audio comes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyloudnorm")

from helpers.audio import SR
from helpers.loudness import ODD_CHUNKS, at, bursts, quiet_source  # noqa: E402

from omnivoice_cli.media import leveller as LV  # noqa: E402


def odd_chunks(x: np.ndarray):
    """`x` in blocks of the odd sizes, anew at each call (as a book's parts are read again)."""

    def chunks():
        i = j = 0
        while i < len(x):
            size = ODD_CHUNKS[j % len(ODD_CHUNKS)]
            yield x[i : i + size]
            i, j = i + size, j + 1

    return chunks


@pytest.mark.parametrize("target", [-18.0, -30.0])
def test_the_streamed_leveller_gives_normalize_in_odd_chunks(target):
    """Limited (a quiet source raised 22 dB: its peaks pass the ceiling) and only scaled: the
    streamed leveller, fed odd blocks and reading them again for each pass, finds normalize's gain
    and gives its output (to float32 rounding) and report."""
    x = quiet_source().astype(np.float32)
    whole, report = LV.normalize(x, SR, target)
    lev = LV.Leveller(odd_chunks(x), SR, target).measure()
    streamed = np.concatenate(list(lev.output()))
    rep = lev.report()
    assert len(streamed) == len(x) and abs(rep.gain_db - report.gain_db) < 1e-6
    assert (rep.limited > 0) == (report.limited > 0) == (target == -18.0)
    assert np.allclose(streamed, whole, atol=1e-5)
    assert abs(rep.lufs - report.lufs) < 0.01 and rep.dbtp <= -1.0 and rep.warning() is None


def test_the_leveller_holds_the_gain_ceiling_and_leaves_silence():
    """Hiss at -62 LUFS gets +30 dB (MAX_GAIN_DB) streamed as in one array, with the warning that
    names its level; silence is left as it is (gain 0, its warning)."""
    hiss = at(np.random.default_rng(9).standard_normal(10 * SR) * 0.01, -62.0).astype(np.float32)
    lev = LV.Leveller(odd_chunks(hiss), SR, -18.0).measure()
    out = np.concatenate(list(lev.output()))
    assert abs(lev.gain_db - LV.MAX_GAIN_DB) < 1e-9 and lev.report().capped
    assert np.allclose(out, hiss * np.float32(10**1.5), rtol=1e-5)
    assert lev.report().warning().startswith("the audio measures -62.0 LUFS, near silence")
    silent = LV.Leveller(lambda: iter([np.zeros(SR, np.float32)]), SR, -18.0).measure()
    assert not np.concatenate(list(silent.output())).any() and silent.gain_db == 0.0
    assert "silent" in silent.report().warning()


def test_a_loud_source_is_only_scaled_in_one_pass():
    """Under the ceiling after the gain: no limiter, the audio read twice only (measured, given)."""
    x = (0.05 * bursts(5, seed=8)).astype(np.float32)
    reads = []

    def chunks():
        reads.append(1)
        return iter([x])

    lev = LV.Leveller(chunks, SR, -30.0).measure()
    out = np.concatenate(list(lev.output()))
    assert len(reads) == 2 and not lev.limits and lev.report().limited == 0
    assert np.array_equal(out, x * np.float32(10 ** (lev.gain_db / 20)))
