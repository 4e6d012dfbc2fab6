"""Output sample rates (the `sample_rate` setting): the model's 24 kHz resampled once, at the end.

    audio = at_rate(audio, 24000, 8000)          # a whole output (engine/sound/resample.py's sinc filter)
    r = StreamResampler(24000, 8000)              # a stream: pieces in, the same samples out
    out = [r.feed(p) for p in pieces] + [r.finish()]

The filter is the band-limited windowed sinc of engine/sound/resample.py (torchaudio's at its defaults:
Hann window over 6 zeros, roll-off 0.99), so a telephony output keeps its band up to 0.99 of the
new Nyquist frequency and nothing above it folds back. A stream is resampled as the whole is:
an output sample needs `half` input samples either side, so each feed hands out the outputs whose
right-hand context has arrived and keeps the input they still need; the first output phase of
each call stays aligned because the kept input starts at a multiple of the reduced input rate.
Joined, a stream's outputs are the whole output (to float rounding of the same sums).
"""

from __future__ import annotations

import math
from typing import Any

SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)  # what `sample_rate` allows


def at_rate(audio: Any, rate: int, new_rate: int | None) -> Any:
    """[N] float audio at `rate` -> [ceil(N * new / rate)] at `new_rate` (None or equal: unchanged)."""
    if not new_rate or new_rate == rate:
        return audio
    import numpy as np

    from ..engine.sound.resample import resample

    return resample(np.ascontiguousarray(audio, dtype=np.float32), int(rate), int(new_rate))


class StreamResampler:
    """Pieces of one stream resampled as its whole would be (see the module doc)."""

    def __init__(self, rate: int, new_rate: int | None) -> None:
        import numpy as np

        from ..engine.sound.resample import LOWPASS_FILTER_WIDTH, ROLLOFF, reduced_rates

        self.rate, self.new_rate = int(rate), int(new_rate or rate)
        self.same = self.rate == self.new_rate
        self.orig, self.new = reduced_rates(self.rate, self.new_rate)
        cutoff = min(self.orig, self.new) * ROLLOFF
        self.half = math.ceil(LOWPASS_FILTER_WIDTH * self.orig / cutoff)  # input taps each side
        self.kept = np.zeros(0, dtype=np.float32)  # input from `start` on
        self.start = 0  # global input index of kept[0] (a multiple of orig)
        self.seen = 0  # input samples fed
        self.emitted = 0  # output samples handed out

    def _outputs_ready(self, final: bool) -> int:
        """Output samples (global count) computable now: all of them at the end, else those
        whose last tap, at input m * orig / new + half + orig, has arrived."""
        total = -((-self.seen * self.new) // self.orig)  # ceil(seen * new / orig)
        if final:
            return total
        # output m needs input up to floor(m * orig / new) + half + orig - 1 < seen
        m = ((self.seen - self.half - self.orig) * self.new) // self.orig
        return max(self.emitted, min(total, m))

    def _run(self, final: bool) -> Any:
        import numpy as np

        from ..engine.sound.resample import resample

        ready = self._outputs_ready(final)
        if ready <= self.emitted:
            return np.zeros(0, dtype=np.float32)
        # window: from `start` (aligned); its output k is global output start * new / orig + k
        out = resample(self.kept, self.rate, self.new_rate)  # its zero-padded right edge: outputs past `ready`
        first = self.start * self.new // self.orig
        piece = out[self.emitted - first : ready - first]
        self.emitted = ready
        # keep the input the next output still needs on its left: from its first tap on, aligned down
        need = (self.emitted * self.orig) // self.new - self.half
        cut = max(self.start, (max(need, 0) // self.orig) * self.orig)
        self.kept = self.kept[cut - self.start :]
        self.start = cut
        return np.asarray(piece, dtype=np.float32)

    def feed(self, audio: Any) -> Any:
        """[n] float input -> the output samples now ready (maybe none)."""
        import numpy as np

        a = np.asarray(audio, dtype=np.float32).reshape(-1)
        if self.same:
            return a
        self.kept = np.concatenate([self.kept, a])
        self.seen += len(a)
        return self._run(final=False)

    def finish(self) -> Any:
        """The last output samples (the input's right edge zero-padded, as the whole's)."""
        import numpy as np

        if self.same:
            return np.zeros(0, dtype=np.float32)
        return self._run(final=True)
