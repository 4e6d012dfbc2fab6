"""Scheduling a streamed render: after piece 0 the rest run in packed waves (all of a wave's jobs
share each forward). A wave is as large as can be generated, by the speed measured so far, before
the audio already handed out has played (`WavePlanner`); when even one piece cannot be, the device
is slower than real time and waves then double in size. Pure arithmetic on measured times (the
forwards' speed: admission.forward_model; a wave's pieces join staggered: admission.Stagger)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.admission import forward_model


@dataclass
class WavePlanner:
    """Sizes the waves after piece 0 from the measured speed.

    A wave of pieces is ready when its forwards (num_step of them, all the wave's jobs packed in
    each) and the decoding of its first piece are done; it must be ready within `margin` of the
    audio still queued for playback when it starts. The largest such wave is taken (packing more
    pieces in one forward is cheaper per piece). When even one piece cannot be, `behind` is set
    and waves double in size from the last one."""

    num_step: int
    max_batch_size: int
    max_packed_tokens: int
    margin: float = 0.8
    points: list[tuple[int, float]] = field(default_factory=list)  # measured (packed tokens, s per forward)
    decode_rate: float = 0.0  # seconds of decoding + post-processing per second of audio
    behind: bool = False  # the device was found slower than real time
    last_size: int = 1

    def measure_wave(self, tokens: int, seconds_per_forward: float) -> None:
        self.points.append((tokens, seconds_per_forward))

    def measure_decode(self, seconds: float, audio_seconds: float) -> None:
        self.decode_rate = seconds / max(audio_seconds, 1e-3)  # the latest: the first decode warms up

    def predicted(self, tokens: int, first_audio_seconds: float) -> float:
        """Seconds until the first piece of a wave of `tokens` packed tokens is ready."""
        return self.num_step * forward_model(self.points)(tokens) + self.decode_rate * first_audio_seconds

    def size(self, lens: list[int], audio_seconds: list[float], queued: float) -> int:
        """How many of the next pieces (packed lengths `lens`, estimated audio seconds) to run
        together, given `queued` seconds of audio not yet played."""
        n, tokens = 0, 0
        while n < len(lens) and n < self.max_batch_size and (n == 0 or tokens + lens[n] <= self.max_packed_tokens):
            if self.predicted(tokens + lens[n], audio_seconds[0]) > self.margin * queued:
                break
            tokens += lens[n]
            n += 1
        if n == 0:  # not even one piece in time: slower than real time
            self.behind = True
            n = 1
        if self.behind:
            n = max(n, min(2 * self.last_size, len(lens)))
            n = min(n, self.max_batch_size, _fitting(lens, self.max_packed_tokens))
        self.last_size = n
        return n


def _fitting(lens: list[int], budget: int) -> int:
    """How many of lens fit in one forward of `budget` tokens (at least one)."""
    n, used = 0, 0
    for length in lens:
        if n and used + length > budget:
            break
        used += length
        n += 1
    return max(n, 1)
