"""A service's forwards watched by a test: an Observer (engine.service.Service.observe) that hands
each forward's (request id, piece index) pairs to a function; one that holds the engine before a
forward until the test lets it go."""

from __future__ import annotations

import threading
from typing import Callable


class Forwards:
    """Service.observe(Forwards(f)): f(pieces) before each forward; requests' ends ignored."""

    def __init__(self, on_forward: Callable[[list[tuple[int, int]]], object]) -> None:
        self.on_forward = on_forward

    def forward(self, pieces: list[tuple[int, int]], positions: int) -> None:
        self.on_forward(pieces)

    def finished(self, summary: object) -> None:
        pass

    def failed(self, error: BaseException) -> None:
        pass


class HeldForward(Forwards):
    """Service.observe(HeldForward()): each forward's request ids in `seen`; once `hold` is set, the
    next forward waits, `holding` set, until `release` is."""

    def __init__(self) -> None:
        super().__init__(self._before)
        self.seen: list[set[int]] = []
        self.hold, self.holding, self.release = threading.Event(), threading.Event(), threading.Event()

    def _before(self, pieces: list[tuple[int, int]]) -> None:
        self.seen.append({rid for rid, _ in pieces})
        if self.hold.is_set() and not self.holding.is_set():
            self.holding.set()
            self.release.wait(120)
