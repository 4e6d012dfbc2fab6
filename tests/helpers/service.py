"""A service's forwards watched by a test: an Observer (engine.service.Service.observe) that hands
each forward's (request id, piece index) pairs to a function."""

from __future__ import annotations

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
