"""Scheduling a streamed render: after piece 0 the rest run in packed waves (all of a wave's jobs
share each forward). A wave is as large as can be generated, by the speed measured so far, before
the audio already handed out has played (`WavePlanner`); when even one piece cannot be, the device
is slower than real time and waves then double in size. Pure arithmetic on measured times."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

STEADY_SHARE = 0.2  # a steady run (Stagger.steady) has at most this share of its jobs in flight


def forward_model(points: list[tuple[int, float]]) -> Callable[[int], float]:
    """Seconds per forward as a function of the packed tokens, from measured (tokens, seconds)
    points: proportional to the tokens from a single point (pessimistic where a forward costs
    about the same at any size, as on a GPU), a line a + b * tokens (a, b >= 0) fitted by least
    squares through two or more distinct sizes."""
    if not points:
        raise ValueError("forward_model needs a measurement")
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    if len(set(xs)) < 2:
        rate = max(y / x for x, y in zip(xs, ys))
        return lambda tokens: rate * tokens
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    b = max(b, 0.0)
    a = max(my - b * mx, 0.0)
    return lambda tokens: a + b * tokens


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


@dataclass(frozen=True)
class Stagger:
    """Admission that makes jobs leave one by one instead of together (run_jobs' `admit`).

    Jobs that join one forward together and have the same steps finish together, at the end of
    the run for a whole group. Here at most `cap` jobs run at once, and a job joins only when the
    youngest one running has done 1/cap of its own steps: the jobs in the forward are spread
    evenly over their steps, and (each place refilled as its job leaves) one job leaves every
    num_step / cap forwards. A stop then loses only the jobs in flight, about cap / 2 jobs'
    steps. The tokens of a job do not depend on what shares its forwards (the packing is
    row-independent), so only the order in which jobs finish changes."""

    cap: int  # jobs in the forward at most (within the engine's max_batch_size)

    @classmethod
    def steady(cls, jobs: int, max_batch_size: int, share: float = STEADY_SHARE) -> "Stagger":
        """For a run of `jobs` jobs: at most `share` of them in flight (at least one), so that a
        stop halfway keeps about (0.5 - share / 2) of the jobs (a batch, a book)."""
        return cls(max(1, min(max_batch_size, math.ceil(jobs * share))))

    def gap(self, job: Any) -> int:
        """Steps the youngest running job must have done before `job` joins."""
        return math.ceil(len(job.schedule) / self.cap)

    def __call__(self, active: list, job: Any) -> bool:
        return len(active) < self.cap and min(j.step for j in active) >= self.gap(job)


def steady_width(
    model: Callable[[int], float], num_step: int, piece_tokens: int, cap: int, *, others: int = 0, slack: float = 1.1
) -> int:
    """How many pieces of one stream to run at once, staggered (Stagger), from the measured speed
    (`model`: seconds per forward by packed tokens, forward_model). With n in flight beside
    `others` tokens of other work, one piece leaves every num_step * model(others + n *
    piece_tokens) / n seconds: the smallest n whose pace is within `slack` of the best pace. More
    in flight would only hold pieces back to finish them together: where a forward costs in
    proportion to its tokens (a CPU) that is one or two, where it costs about the same at any size
    (a GPU) about `cap`, still leaving one by one."""
    paces = [num_step * model(others + n * piece_tokens) / n for n in range(1, max(cap, 1) + 1)]
    best = min(paces)
    return next(n for n, pace in enumerate(paces, start=1) if pace <= slack * best)
