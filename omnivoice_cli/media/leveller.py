"""Levelling: one output brought to a target loudness (BS.1770, measured by media/loudness.py)
with its true peaks under a ceiling.

    audio, report = normalize(audio, 24000, -18.0)        # one output at -18 LUFS, <= -1 dBTP
    report = normalize_in_place(track, 24000, -16.0)      # the same, written over a long track itself

    lev = Leveller(lambda: read_blocks(), 24000, -18.0).measure()   # a book: read from its parts,
    for block in lev.output(): out.write(block)           # never held whole; the same algorithm
    lev.report()

Normalising is one gain for the whole output (never per piece: the level would jump between
pieces), then, only where the gained signal's true peak would pass the ceiling, a look-ahead
limiter: the gain it needs at each sample (ceiling / true peak around it) is held over the 5 ms
ahead, released with an 80 ms time constant (on the attenuation in nepers) and smoothed by a
5 ms moving average, so it is down before the peak arrives and changes by at most 1/240 of full
scale a sample (no clicks); elsewhere the gain is exactly 1. It aims 0.3 dB under the ceiling so
that any 4x interpolation of its output stays under. The limiter takes a little loudness off
loud peaks: `normalize` measures its output and corrects the gain once or twice more. The gain
is at most +30 dB (MAX_GAIN_DB): an output of near-silence (faint hiss at -62 LUFS, a muted take)
is raised by that much only, with a warning that names its measured level, never brought up to
speech level.

numpy and scipy come with pyloudnorm (the `loudness` extra): without it, MissingExtra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .loudness import (
    ABSOLUTE_GATE,
    BLOCK,
    LoudnessMeter,
    Measurement,
    TruePeak,
    as_mono,
    check_target,
    libraries,
)

CEILING_DBTP = -1.0  # true peak at most this after normalising
LOOKAHEAD = 0.005  # seconds: the limiter's gain is down before the peak comes
RELEASE = 0.080  # seconds: the time constant of its way back up
MARGIN_DB = 0.3  # the limiter aims this far under the ceiling
MISS_LU = 0.5  # an output further than this from its target is warned about
MAX_MAKEUP_DB = 3.0  # gain added at most to give back what the limiter took
MAX_GAIN_DB = 30.0  # the most an output is raised: near-silence (hiss, a muted take) is not brought up to speech level


def gain_db_for(lufs: float, target: float) -> float:
    """The gain in dB that brings `lufs` to `target`, at most MAX_GAIN_DB (0 for silence)."""
    return 0.0 if not math.isfinite(lufs) else min(target - lufs, MAX_GAIN_DB)


def gain_for(lufs: float, target: float) -> float:
    """The linear gain that brings `lufs` to `target`, at most +MAX_GAIN_DB (1 for silence:
    nothing to bring up)."""
    return 10.0 ** (gain_db_for(lufs, target) / 20.0)


class Normaliser:
    """One gain, then a look-ahead true-peak limiter, chunk by chunk (see the module doc).

    `process` returns the output that is ready (it lags the input by the look-ahead and the
    interpolator's delay); `flush` returns the rest: all calls together give exactly as many
    samples as went in. `limited` counts the samples whose gain the limiter took down.

    At sample t: env[t] is the largest interpolated value between t - 1 and t + 1, A[t] =
    max(0, ln(env[t] / ceiling)) the attenuation it needs (nepers), held over the look-ahead
    (the max of A[t .. t+L-1]), released, and the gain is the mean of exp(-attenuation) over the
    L samples up to t: every term of that mean is at most exp(-A[t]), so the gain is too
    (the L - 1 samples before the start count as silent samples with that same look-ahead, so a
    peak at sample 0 is held as well as one later on)."""

    def __init__(self, gain: float, sample_rate: int, ceiling: float = CEILING_DBTP, margin: float = MARGIN_DB) -> None:
        np, _ = libraries()
        self.np, self.gain, self.rate = np, float(gain), int(sample_rate)
        self.ceiling = 10.0 ** ((ceiling - margin) / 20.0)
        self.span = max(2, round(LOOKAHEAD * self.rate))  # L: the look-ahead and the smoothing, samples
        self.release = 1.0 / (RELEASE * self.rate)  # the attenuation decays by exp(-this) a sample
        self.tp = TruePeak()
        self.taken = 0  # samples given (the output has as many)
        self.fed = 0  # samples through the interpolator (padding included)
        self.sent = 0  # samples sent out
        self.x = np.zeros(0)  # the gained input from `sent` on
        self.peaks = np.zeros(0)  # interpolated peaks, from input index `peaks_from`
        self.peaks_from = 0
        self.atten = np.zeros(0)  # A[t] from `sent` to `atten_end`
        self.atten_end = 0
        self.lost = np.zeros(self.span - 1)  # 1 - gain of the L - 1 samples before `sent`
        self.log_held = -math.inf  # ln of the released attenuation at `sent` - 1
        self.limited = 0

    def process(self, chunk: Any) -> Any:
        x = as_mono(self.np, chunk) * self.gain
        self.taken += len(x)
        self.x = self.np.concatenate([self.x, x])
        return self._feed(x).astype(self.np.float32)

    def flush(self) -> Any:
        """The rest of the output (the input is over)."""
        np = self.np
        pad = np.zeros(TruePeak.DELAY + self.span)
        self.x = np.concatenate([self.x, pad])
        out = self._feed(pad)
        return out[: max(0, self.taken - (self.sent - len(out)))].astype(np.float32)

    def _feed(self, x: Any) -> Any:
        np, d = self.np, TruePeak.DELAY
        self.peaks = np.concatenate([self.peaks, self.tp.peaks(x)])
        self.fed += len(x)
        last = self.fed - 1 - d  # env[t] needs the peaks at t + d - 1 and t + d
        if last >= self.atten_end:
            i = self.atten_end + d - 1 - self.peaks_from
            count = last - self.atten_end + 1
            env = np.maximum(self.peaks[i : i + count], self.peaks[i + 1 : i + 1 + count])
            need = np.log(np.maximum(env, 1e-300) / self.ceiling)
            self.atten = np.concatenate([self.atten, np.maximum(need, 0.0)])
            self.atten_end = last + 1
            drop = self.atten_end + d - 1 - self.peaks_from
            self.peaks, self.peaks_from = self.peaks[drop:], self.peaks_from + drop
        n = self.atten_end - self.span + 1 - self.sent  # whose look-ahead is known
        if n <= 0:
            return np.zeros(0)
        out = self._limit(n)
        self.atten, self.x, self.sent = self.atten[n:], self.x[n:], self.sent + n
        return out

    def _limit(self, n: int) -> Any:
        """The output of the next n samples."""
        np, span = self.np, self.span
        window = self.atten[: n + span - 1]
        if not window.any() and not self.lost.any() and self.log_held == -math.inf:
            return self.x[:n].copy()  # nothing over the ceiling in reach: the gain alone, exactly
        from scipy.ndimage import maximum_filter1d

        # At the start, the L - 1 (silent) samples before it are limited too: their look-ahead
        # reaches a peak in the first L samples, so the mean that smooths the gain there is
        # already down (were they taken as gain 1, a peak at sample 0 would get 1/L of its cut).
        before = 0 if self.sent else span - 1
        window = np.concatenate([np.zeros(before), window])
        ahead = maximum_filter1d(window, span, mode="constant", cval=0.0)[span // 2 : span // 2 + n + before]
        lose = -np.expm1(-self._released(ahead))  # 1 - gain, before smoothing
        both = lose if before else np.concatenate([self.lost, lose])
        sums = np.concatenate([[0.0], np.cumsum(both)])
        near = np.concatenate([[0], np.cumsum(both > 0)])
        mean = np.clip((sums[span:] - sums[:-span]) / span, 0.0, 1.0)
        gain = np.where(near[span:] - near[:-span] > 0, 1.0 - mean, 1.0)  # 1 exactly where nothing is near
        self.lost = both[len(both) - (span - 1) :]
        self.limited += int(np.count_nonzero(gain < 1.0))
        return self.x[:n] * gain

    def _released(self, ahead: Any) -> Any:
        """held[t] = max(ahead[t], held[t-1] * exp(-release)): a running max in the log domain."""
        np = self.np
        steps = np.arange(len(ahead)) * self.release
        with np.errstate(divide="ignore"):
            v = np.log(ahead) + steps
        v[0] = max(v[0], self.log_held - self.release)
        logs = np.maximum.accumulate(v) - steps
        self.log_held = float(logs[-1])
        if self.log_held < math.log(1e-12):  # released: exactly no attenuation from here on
            self.log_held = -math.inf
        return np.exp(logs)


@dataclass(frozen=True)
class LoudnessReport:
    """What normalising one output did: its loudness and true peak before and after."""

    target: float  # LUFS asked for
    before_lufs: float
    before_dbtp: float
    gain_db: float  # the one gain applied (0 for silence)
    lufs: float  # after
    dbtp: float  # after
    limited: float  # the share of samples the limiter took down (0: only scaled)

    @property
    def missed(self) -> bool:
        """The output is more than MISS_LU off its target (its peaks allowed no more under the ceiling)."""
        return math.isfinite(self.lufs) and abs(self.lufs - self.target) > MISS_LU

    @property
    def capped(self) -> bool:
        """The gain the target needs is over MAX_GAIN_DB: the audio is near-silence, raised by that much only."""
        return math.isfinite(self.before_lufs) and self.target - self.before_lufs > MAX_GAIN_DB

    def warning(self, what: str = "the audio") -> str | None:
        """One line when the target was missed (or the output is silent), else None."""
        if not math.isfinite(self.before_lufs):
            return f"{what} is silent (under {ABSOLUTE_GATE:g} LUFS): its loudness is left as it is"
        if self.capped:
            return (
                f"{what} measures {self.before_lufs:.1f} LUFS, near silence: raised by at most "
                f"+{MAX_GAIN_DB:g} dB, to {self.lufs:.1f} LUFS, not the {self.target:g} asked for"
            )
        if self.missed:
            return (
                f"{what} reaches {self.lufs:.1f} LUFS, not the {self.target:g} asked for: "
                f"its peaks are held under {CEILING_DBTP:g} dBTP"
            )
        return None

    def as_dict(self) -> dict[str, Any]:
        def r(v: float) -> float | None:
            return round(v, 2) if math.isfinite(v) else None

        return {
            "target_lufs": self.target,
            "input_lufs": r(self.before_lufs),
            "input_dbtp": r(self.before_dbtp),
            "gain_db": r(self.gain_db),
            "lufs": r(self.lufs),
            "dbtp": r(self.dbtp),
            "limited": round(self.limited, 4),
        }


Chunks = Callable[[], Iterable[Any]]  # an output's audio anew at each call: mono float blocks


class Leveller:
    """One output brought to a target loudness, streamed (`normalize` is it over one array; a
    book's output is read from its parts, never held whole): the audio measured; one gain to the
    target (at most MAX_GAIN_DB); where the gained peaks would pass the ceiling, the true-peak
    limiter, and since it takes a little loudness off, the gained and limited audio measured
    again and the gain raised to give that back (twice at most, by MAX_MAKEUP_DB in all). Then
    `output()` gives the audio at the gain found and `report()` what it did.

        lev = Leveller(lambda: blocks_of_the_output(), 24000, -18.0).measure()
        for block in lev.output(): write(block)
        lev.report()

    `chunks()` gives the output's audio anew at each call (it is read up to four times). With
    `keep`, the last measuring pass's output is kept (in memory) and given again by `output()`
    when it is the output (normalize: no pass twice)."""

    def __init__(
        self, chunks: Chunks, sample_rate: int, target: float, ceiling: float = CEILING_DBTP, *, keep: bool = False
    ) -> None:
        self.np, _ = libraries()
        self.chunks, self.rate, self.ceiling, self.keep = chunks, int(sample_rate), ceiling, keep
        self.target = check_target(target)
        self.before = Measurement(-math.inf, -math.inf, 0.0)  # the audio as given
        self.gain_db = 0.0  # the one gain (0 for silence)
        self.limits = False  # the limiter is in the way at that gain
        self._meter: LoudnessMeter | None = None  # of the output given, once given
        self._norm: Normaliser | None = None
        self._kept: tuple[list[Any], LoudnessMeter, Normaliser | None] | None = None  # with keep: the output

    def _pass(self, gain_db: float, limit: bool, meter: LoudnessMeter) -> Iterator[Any]:
        """The output at this gain (limited or only scaled), each block into `meter`."""
        np = self.np
        norm = self._norm = Normaliser(10.0 ** (gain_db / 20.0), self.rate, self.ceiling) if limit else None
        scale = np.float32(10.0 ** (gain_db / 20.0))
        for chunk in self.chunks():
            if norm is not None:
                out = norm.process(chunk)
            else:
                out = as_mono(np, chunk).astype(np.float32, copy=False) * scale
            if len(out):
                meter.add(out)
                yield out
        if norm is not None:
            out = norm.flush()
            if len(out):
                meter.add(out)
                yield out

    def measure(self) -> Leveller:
        """The audio measured and the gain found (see the class doc)."""
        meter = LoudnessMeter(self.rate)
        for chunk in self.chunks():
            meter.add(chunk)
        self.before = Measurement(meter.integrated(), meter.true_peak(), meter.samples / self.rate)
        if not math.isfinite(self.before.lufs):
            return self  # silence: left as it is
        first = self.gain_db = gain_db_for(self.before.lufs, self.target)  # hiss is not raised to speech level
        for _ in range(2):
            self.limits = self.before.dbtp + self.gain_db > self.ceiling - MARGIN_DB
            if not self.limits:
                return self  # only scaled: on its target (or raised by MAX_GAIN_DB)
            after = LoudnessMeter(self.rate)
            blocks = list(self._pass(self.gain_db, True, after)) if self.keep else None
            if blocks is None:
                for _block in self._pass(self.gain_db, True, after):
                    pass
            lufs = after.integrated()
            more = min(self.target - lufs, first + MAX_MAKEUP_DB - self.gain_db, MAX_GAIN_DB - self.gain_db)
            if not math.isfinite(lufs) or abs(self.target - lufs) <= 0.1 or more < 0.05:
                if blocks is not None:  # this pass is the output
                    self._kept = (blocks, after, self._norm)
                return self
            self.gain_db += more
        self.limits = self.before.dbtp + self.gain_db > self.ceiling - MARGIN_DB
        return self

    def output(self) -> Iterator[Any]:
        """The output's audio (float32 blocks), at the gain found."""
        if self._kept is not None:
            blocks, self._meter, self._norm = self._kept
            return iter(blocks)
        self._meter = LoudnessMeter(self.rate)
        return self._pass(self.gain_db, self.limits, self._meter)

    def report(self) -> LoudnessReport:
        """What leveling did, once the output was given (its loudness and true peak as given)."""
        samples = max(1, round(self.before.seconds * self.rate))
        limited = self._norm.limited / samples if self._norm is not None else 0.0
        lufs = self._meter.integrated() if self._meter is not None else self.before.lufs
        dbtp = self._meter.true_peak() if self._meter is not None else self.before.dbtp
        return LoudnessReport(self.target, self.before.lufs, self.before.dbtp, self.gain_db, lufs, dbtp, limited)


def normalize(
    audio: Any, sample_rate: int, target_lufs: float, peak_dbtp: float = CEILING_DBTP
) -> tuple[Any, LoudnessReport]:
    """`audio` (mono) at `target_lufs` integrated, its true peak at most `peak_dbtp` (Leveller
    over the whole array): one gain, then the limiter where the peaks need it. The limiter
    lowers the loudness a little where it works, so the output is measured and the gain raised
    to give that back (at most twice more, by MAX_MAKEUP_DB in all: a limiter is for peaks, not
    for loudness; a target the peaks do not allow under the ceiling is missed, and the report
    says by how much). Silence (no block over -70 LUFS) is left as it is; near-silence is raised
    by MAX_GAIN_DB (+30 dB) at most, and the report's warning names its level. Returns float32
    audio and the report."""
    np, _ = libraries()
    target = check_target(target_lufs)
    audio = as_mono(np, audio).astype(np.float32, copy=False)
    blocks = lambda: (audio[i : i + BLOCK] for i in range(0, len(audio), BLOCK))  # noqa: E731
    lev = Leveller(blocks, sample_rate, target, peak_dbtp, keep=True).measure()
    out = np.concatenate([np.zeros(0, np.float32), *lev.output()])
    return out, lev.report()


def normalize_in_place(
    audio: Any, sample_rate: int, target_lufs: float, peak_dbtp: float = CEILING_DBTP
) -> LoudnessReport:
    """`normalize`, its output written over `audio` itself (a writable float32 [N] array, a
    dub's track): the Leveller reads the array in blocks (views) and its output, which lags its
    input, goes back where it was read from, so no second copy is ever made: the memory it adds
    is a few blocks', whatever the length. The result is the one `normalize` gives."""
    np, _ = libraries()
    target = check_target(target_lufs)
    if not (isinstance(audio, np.ndarray) and audio.dtype == np.float32 and audio.ndim == 1 and audio.flags.writeable):
        raise ValueError("normalize_in_place: expected a writable float32 [N] array")
    blocks = lambda: (audio[i : i + BLOCK] for i in range(0, len(audio), BLOCK))  # noqa: E731
    lev = Leveller(blocks, sample_rate, target, peak_dbtp).measure()
    at = 0
    for block in lev.output():  # block i ends at or before the input read so far: nothing unread is overwritten
        audio[at : at + len(block)] = block
        at += len(block)
    assert at == len(audio), (at, len(audio))
    return lev.report()


def level(
    audio: Any, sample_rate: int, target: float | None, *, in_place: bool = False
) -> tuple[Any, LoudnessReport | None]:
    """`normalize` when a target is set; with None, `audio` itself (the very object) and no report.
    With `in_place`, a writable float32 [N] array is levelled where it lies (normalize_in_place:
    `audio` itself comes back, levelled); any other audio as `normalize` does it."""
    if target is None:
        return audio, None
    np, _ = libraries()
    if in_place and isinstance(audio, np.ndarray) and audio.dtype == np.float32 and audio.ndim == 1:
        if audio.flags.writeable:
            return audio, normalize_in_place(audio, sample_rate, target)
    return normalize(audio, sample_rate, target)
