"""Which waiting jobs join the next forward: the one admission of the packed loop, for run_jobs
(Engine.generate, the streamed render) and for the service's loop (engine/service.py).

A forward holds at most `max_jobs` jobs and `max_tokens` packed positions; a job alone always
joins (it was checked against one forward when it was made). Waiting jobs belong to groups (a
request's pieces; run_jobs has one group) and each group's first waiting job is its head, so a
group's jobs join in their order. A head whose group has nothing in the forward is ready at once,
any other when the policy says so (`may_join`; `Stagger`: a group's jobs spaced so that they leave
one by one). Of the ready heads, the one whose group has the fewest jobs in the forward joins
first, then the one waiting longest, so a new request joins the next forward even beside a long
text; the first that does not fit ends the admission (a smaller one never jumps ahead of it).

`admit` is pure: it reads the jobs' sizes and steps and returns who joins, in order. The policies
are sized from the measured speed of the forwards: `forward_model` (seconds per forward by packed
tokens), `steady_width` (how many of a group in flight). Plain arithmetic, no torch.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence, TypeVar

T = TypeVar("T")

STEADY_SHARE = 0.2  # a steady run (Stagger.steady) has at most this share of its jobs in flight


def admit(
    active: Sequence[T],
    waiting: Sequence[T],
    *,
    max_jobs: int,
    max_tokens: int,
    tokens: Callable[[T], int],
    group: Callable[[T], Hashable] = lambda item: None,
    may_join: Callable[[list[T], T], bool] | None = None,
) -> list[T]:
    """The waiting items that join the forward now, in the order they join (see the module doc).

    active: the items in the forward (len <= max_jobs); waiting: the others, oldest first;
    tokens(item): its packed positions in a forward (Job.packed_len); group(item): whose it is
    (default: all one group); may_join(forward, item): whether a head whose group already has
    items in the forward may join it now, `forward` being the items in it so far, those admitted
    before it included (default: always, within the bounds)."""
    forward = list(active)
    used = sum(tokens(item) for item in forward)  # packed positions of the forward so far
    in_forward = Counter(group(item) for item in forward)  # group -> its items in the forward
    queues: dict[Hashable, deque[tuple[int, T]]] = {}  # group -> its waiting (place in `waiting`, item), in order
    for i, item in enumerate(waiting):
        queues.setdefault(group(item), deque()).append((i, item))
    joining: list[T] = []
    while queues and len(forward) < max_jobs:
        ready = [  # (its group's items in the forward, its place, group) of each ready head
            (in_forward[g], queue[0][0], g)
            for g, queue in queues.items()
            if not in_forward[g] or may_join is None or may_join(forward, queue[0][1])
        ]
        if not ready:
            break
        _, _, g = min(ready, key=lambda r: r[:2])
        item = queues[g][0][1]
        if forward and used + tokens(item) > max_tokens:
            break
        queues[g].popleft()
        if not queues[g]:
            del queues[g]
        forward.append(item)
        joining.append(item)
        in_forward[g] += 1
        used += tokens(item)
    return joining


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


@dataclass(frozen=True)
class Stagger:
    """A policy that makes a group's jobs leave one by one instead of together (admit's `may_join`).

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
        """Whether `job` may join beside `active` (its group's jobs in the forward, at least one)."""
        return len(active) < self.cap and min(j.step for j in active) >= self.gap(job)


def steady_width(
    model: Callable[[int], float], num_step: int, piece_tokens: int, cap: int, *, others: int = 0, slack: float = 1.1
) -> int:
    """How many pieces of one request to run at once, staggered (Stagger), from the measured speed
    (`model`: seconds per forward by packed tokens, forward_model). With n in flight beside
    `others` tokens of other work, one piece leaves every num_step * model(others + n *
    piece_tokens) / n seconds: the smallest n whose pace is within `slack` of the best pace. More
    in flight would only hold pieces back to finish them together: where a forward costs in
    proportion to its tokens (a CPU) that is one or two, where it costs about the same at any size
    (a GPU) about `cap`, still leaving one by one."""
    paces = [num_step * model(others + n * piece_tokens) / n for n in range(1, max(cap, 1) + 1)]
    best = min(paces)
    return next(n for n, pace in enumerate(paces, start=1) if pace <= slack * best)
