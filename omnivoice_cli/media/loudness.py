"""Loudness: ITU-R BS.1770-4 integrated loudness and true peak, measured as a signal streams (an
output brought to a target: media/leveller.py).

    report = measure(audio, 24000)                        # LUFS and dBTP of a whole signal

The meter streams, so a ten-hour book is never held as float64: the K-weighting (the two biquads
pyloudnorm defines: a +4 dB high shelf at 1500 Hz, Q 1/sqrt 2, and a 38 Hz high pass, Q 0.5, both
RBJ cookbook designs, taken from pyloudnorm's own `IIRfilter`) runs with its state carried from
chunk to chunk; what is kept is one sum of squares per 100 ms, from which the 400 ms blocks (75 %
overlap) are gated at the end: absolute -70 LUFS, relative -10 LU. Only whole blocks count, as
BS.1770 counts them (pyloudnorm also counts a last block running past the end, as if whole, when
half a hop or more is left over: on such lengths the two differ by a few hundredths of a LU). The
hop sums are kept in one array of doubles, 8 bytes per 100 ms however small the chunks (2.9 MB
for ten hours). A signal shorter than one block is measured as one block. True peak is the
largest magnitude of the signal 4x oversampled (Annex 2 of BS.1770-4) by a 129-tap windowed-sinc (Kaiser) interpolator whose phase 0 is the signal itself.

numpy and scipy come with pyloudnorm (the `loudness` extra): without it, MissingExtra.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any

from ..engine.errors import MissingExtra
from ..engine.model.config import ValueRule

TARGET_RULE = ValueRule(-50.0, -5.0, note=" (LUFS, e.g. -18)")  # what the `loudness` setting allows
ABSOLUTE_GATE = -70.0  # LUFS
RELATIVE_GATE = -10.0  # LU under the absolutely gated loudness
BLOCK_HOPS = 4  # a 400 ms block is four 100 ms hops (75 % overlap)
HOPS_PER_SECOND = 10
OVERSAMPLE = 4  # true peak: 4x (BS.1770-4 Annex 2)
_TAPS_PER_PHASE = 32  # the interpolator: 4 * 32 + 1 taps, a delay of 16 input samples
_KAISER_BETA = 6.0
BLOCK = 1 << 18  # samples at a time for the in-memory functions
_OFFSET = -0.691  # BS.1770: loudness = -0.691 + 10 log10(mean square of the K-weighted signal)


def libraries() -> tuple[Any, Any]:
    """(numpy, scipy.signal), with pyloudnorm there (its filters are the K-weighting used)."""
    try:
        import numpy as np
        import pyloudnorm.iirfilter  # noqa: F401
        import scipy.signal as signal
    except ImportError:
        raise MissingExtra("loudness normalisation (--loudness)", "pyloudnorm", "loudness") from None
    return np, signal


def streaming_refused(name: str, streamer: str, instead: str) -> str:
    """The one wording of a stream asked for with a loudness target (`say --stream`, a request's
    stream: true): name, the setting as its source names it; streamer, what streams."""
    return f"{name} measures the whole output, which {streamer} sends piece by piece before its end is known: {instead}"


def require() -> None:
    """MissingExtra now (before a model loads) when the loudness extra is not installed."""
    libraries()


def check_target(lufs: float) -> float:
    """A target loudness within TARGET_RULE (ValueError naming what is allowed)."""
    if not isinstance(lufs, (int, float)) or isinstance(lufs, bool) or not TARGET_RULE.ok(float(lufs)):
        raise ValueError(f"the loudness target must be {TARGET_RULE.allowed}, got {lufs!r}")
    return float(lufs)


def k_weighting(sample_rate: int) -> Any:
    """The K-weighting filter at `sample_rate` as second-order sections (scipy's sos layout):
    pyloudnorm's high shelf, then its high pass."""
    np, _ = libraries()
    from pyloudnorm.iirfilter import IIRfilter

    stages = (
        IIRfilter(4.0, 1 / math.sqrt(2), 1500.0, sample_rate, "high_shelf"),
        IIRfilter(0.0, 0.5, 38.0, sample_rate, "high_pass"),
    )
    return np.array([[*s.b, *s.a] for s in stages], dtype=np.float64)


def interpolator() -> Any:
    """The 4x true-peak interpolator, phase by phase: row p gives the samples at n + p/4 (delayed)."""
    np, signal = libraries()
    taps = OVERSAMPLE * _TAPS_PER_PHASE + 1
    h = signal.firwin(taps, 1.0 / OVERSAMPLE, window=("kaiser", _KAISER_BETA)) * OVERSAMPLE
    h = np.concatenate([h, np.zeros(OVERSAMPLE - 1)])  # a whole number of taps per phase
    return h.reshape(-1, OVERSAMPLE).T.copy()


def as_mono(np: Any, chunk: Any) -> Any:
    a = np.asarray(chunk, dtype=np.float64)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {a.shape}")
    return a


def db(value: float) -> float:
    """20 log10 of a magnitude (-inf for 0)."""
    return 20.0 * math.log10(value) if value > 0 else -math.inf


class TruePeak:
    """The 4x oversampled signal, chunk by chunk (the interpolator's state carried)."""

    DELAY = _TAPS_PER_PHASE // 2  # input samples: oversampled row p at n is the time n - DELAY + p/4

    def __init__(self) -> None:
        self.np, self.signal = libraries()
        self.phases = interpolator()
        self.zi = self.np.zeros((OVERSAMPLE, self.phases.shape[1] - 1))
        self.peak = 0.0

    def oversample(self, x: Any) -> Any:
        """(4, len(x)): the interpolated values, DELAY samples late."""
        out = self.np.empty((OVERSAMPLE, len(x)))
        for p in range(OVERSAMPLE):
            out[p], self.zi[p] = self.signal.lfilter(self.phases[p], [1.0], x, zi=self.zi[p])
        return out

    def peaks(self, x: Any) -> Any:
        """The largest magnitude of each sample's four interpolated values; the running peak kept."""
        if len(x) == 0:
            return self.np.zeros(0)
        found = self.np.abs(self.oversample(x)).max(axis=0)
        self.peak = max(self.peak, float(found.max()))
        return found

    def tail(self) -> float:
        """The interpolator's last values (fed zeros), into the peak: the peak of the whole signal."""
        self.peaks(self.np.zeros(self.DELAY * 2))
        return self.peak


class LoudnessMeter:
    """BS.1770 integrated loudness and true peak of a mono signal given chunk by chunk."""

    def __init__(self, sample_rate: int) -> None:
        self.np, self.signal = libraries()
        self.rate = int(sample_rate)
        if self.rate < HOPS_PER_SECOND * 4:
            raise ValueError(f"sample rate {sample_rate} is too low to measure loudness")
        self.sos = k_weighting(self.rate)
        self.zi = self.np.zeros((self.sos.shape[0], 2))
        self.samples = 0
        self.hops = array("d")  # the sum of squares of every whole 100 ms hop: 8 bytes each, whatever the chunks
        self.partial = 0.0  # the sum of squares of the hop being filled (index `current`)
        self.current = 0
        self.total = 0.0  # the sum of squares of everything (a signal shorter than a block)
        self.tp = TruePeak()
        self._peak: float | None = None

    def edge(self, hop: Any) -> Any:
        """The first sample of 100 ms hop `hop` (ceil(hop * rate / 10))."""
        return -((-hop * self.rate) // HOPS_PER_SECOND)

    def add(self, chunk: Any) -> None:
        np = self.np
        x = as_mono(np, chunk)
        if len(x) == 0:
            return
        self.tp.peaks(x)
        self._peak = None
        y, self.zi = self.signal.sosfilt(self.sos, x, zi=self.zi)
        squares = y * y
        self.total += float(squares.sum())
        hop = (HOPS_PER_SECOND * (self.samples + np.arange(len(x), dtype=np.int64))) // self.rate
        first = int(hop[0])
        sums = np.bincount(hop - first, weights=squares)
        if first > self.current:  # the hop being filled was complete
            self.hops.append(self.partial)
        else:
            sums[0] += self.partial
        self.hops.frombytes(sums[:-1].tobytes())
        self.partial, self.current = float(sums[-1]), int(hop[-1])
        self.samples += len(x)

    def block_powers(self) -> Any:
        """The mean square of every whole 400 ms block (hops j..j+3), in order."""
        np = self.np
        hops = np.array(self.hops, dtype=np.float64)  # a copy (a view would stop `add` growing it)
        if self.samples == self.edge(self.current + 1):  # the last hop is whole
            hops = np.concatenate([hops, [self.partial]])
        if len(hops) < BLOCK_HOPS:
            return np.zeros(0)
        sums = np.convolve(hops, np.ones(BLOCK_HOPS), mode="valid")
        j = np.arange(len(sums), dtype=np.int64)
        length = self.edge(j + BLOCK_HOPS) - self.edge(j)
        return sums / length

    def integrated(self) -> float:
        """The gated integrated loudness so far (LUFS; -inf for silence or nothing)."""
        np = self.np
        z = self.block_powers()
        if len(z) == 0:  # shorter than one block: the whole as one
            z = np.array([self.total / self.samples]) if self.samples else np.zeros(0)
        with np.errstate(divide="ignore"):
            loud = _OFFSET + 10.0 * np.log10(z)
        z = z[loud >= ABSOLUTE_GATE]
        if len(z) == 0:
            return -math.inf
        relative = _OFFSET + 10.0 * math.log10(float(z.mean())) + RELATIVE_GATE
        with np.errstate(divide="ignore"):
            kept = z[_OFFSET + 10.0 * np.log10(z) > relative]
        return _OFFSET + 10.0 * math.log10(float(kept.mean())) if len(kept) else -math.inf

    def true_peak(self) -> float:
        """The true peak so far, dBTP (-inf for silence), the interpolator's tail included."""
        if self._peak is None:
            probe = TruePeak()
            probe.peak, probe.zi = self.tp.peak, self.tp.zi.copy()
            self._peak = probe.tail()
        return db(self._peak)


@dataclass(frozen=True)
class Measurement:
    lufs: float  # integrated loudness (-inf: silence)
    dbtp: float  # true peak (-inf: silence)
    seconds: float


def measure(audio: Any, sample_rate: int) -> Measurement:
    """Integrated loudness and true peak of a whole mono signal."""
    meter = LoudnessMeter(sample_rate)
    for i in range(0, len(audio), BLOCK):
        meter.add(audio[i : i + BLOCK])
    return Measurement(meter.integrated(), meter.true_peak(), meter.samples / int(sample_rate))
