"""Test signals for loudness: speech-like bursts, brought to a level measured by pyloudnorm (the
reference meter). test_loudness.py, test_leveller.py."""

from __future__ import annotations

import numpy as np
import pyloudnorm
import scipy.signal as ss

from helpers.audio import SR

ODD_CHUNKS = (1, 7, 999, 4801, 12345, 100003)


def bursts(seconds: float, seed: int = 0, rate: int = SR) -> np.ndarray:
    """Speech-like: band-passed noise in syllable-long bursts (0.1-0.4 s) with silences between."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    b, a = ss.butter(2, [100 / (rate / 2), 4000 / (rate / 2)], "band")
    x = ss.lfilter(b, a, rng.standard_normal(n))
    env, t = np.zeros(n), 0
    while t < n:
        on, off = int(rng.uniform(0.1, 0.4) * rate), int(rng.uniform(0.05, 0.6) * rate)
        env[t : t + on] = rng.uniform(0.3, 1.0) * np.hanning(min(on, n - t))
        t += on + off
    y = x * env
    return y / np.abs(y).max()


def lufs(x, rate: int = SR) -> float:
    return pyloudnorm.Meter(rate).integrated_loudness(np.asarray(x, dtype=np.float64))


def at(x: np.ndarray, level: float) -> np.ndarray:
    return x * 10 ** ((level - lufs(x)) / 20)


def quiet_source() -> np.ndarray:
    return at(bursts(30, seed=1), -40.0)
