"""Stopping a render promptly: a cancel event, checked between the layers of every forward.

    with cancellable(event):      # in the thread that runs the forwards
        run_jobs(...)             # event.set() from any thread: Cancelled before the next layer

A forward of a long packed batch on a CPU can take seconds; checking only between forwards would
keep a stopped render (Ctrl-C, a reader gone, a server shutting down) busy that long. The model's
forward calls `check()` before each decoder layer, so a cancelled render ends within one layer.
The event is the running thread's own (thread-local), so renders in other threads sharing the
model are not affected. A CUDA graph replay runs its layers without Python: it is checked between
forwards only (a replay is short), and a capture is not cut (`suspended`) so that no CUDA
stream is left half captured.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator, Protocol

_local = threading.local()


class StopFlag(Protocol):
    """What a render's cancel check reads: a threading.Event, or anything with its is_set()."""

    def is_set(self) -> bool: ...


class Cancelled(Exception):
    """The render was cancelled (its cancel event was set)."""


def check() -> None:
    """Raise Cancelled when this thread's render was cancelled (cheap: one lookup when not)."""
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise Cancelled("the render was cancelled")


@contextmanager
def cancellable(event: StopFlag | None) -> Iterator[None]:
    """Within the block, `check()` in this thread raises Cancelled once `event` is set."""
    previous = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = previous


@contextmanager
def suspended() -> Iterator[None]:
    """Within the block, `check()` in this thread does not raise (what must not be cut, such as a
    CUDA graph capture); a cancellation is seen at the next check after it."""
    previous = getattr(_local, "event", None)
    _local.event = None
    try:
        yield
    finally:
        _local.event = previous
