"""Ctrl-C and SIGTERM while audio is written: hold the signal until the file is complete.

    with HoldSignals() as signals:
        audio = generate(...)            # Ctrl-C / SIGTERM here raises Stop at once
        with signals.protect():
            write(audio)                 # ... here it waits until the write is done

Used by `omnivoice say` (one file, or WAV on stdout) and `omnivoice batch` (a file and its
manifest record). A stop never lands inside soundfile's C callbacks (where an exception would be
swallowed) nor between a file and its record. The caller maps Stop to exit code 128 + signum.

Once a Stop has been raised, the signals that follow while the block cleans up (a second Ctrl-C,
or the copy `timeout -s INT` sends to the process group) are ignored, so the clean-up (the
render's thread joined, the player ended) is not cut short; the `omnivoice` entry point then
ignores them for the interpreter's exit too (`ignore_stops`), so none ends in a traceback.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from types import FrameType
from typing import Callable, Union


class Stop(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else f"signal {int(signum)}"


# What signal.signal returns and takes: a function, SIG_DFL / SIG_IGN, or None (not set from Python).
_Handler = Union[Callable[[int, Union[FrameType, None]], object], int, None]


class HoldSignals:
    """SIGINT and SIGTERM raise Stop, except inside `protect()`: there they wait until it ends."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None
        self.stopping = False  # a Stop was raised: later signals are ignored
        self._old: dict[int, _Handler] = {}  # each signal's handler before ours

    def __enter__(self) -> "HoldSignals":
        for sig in self.SIGNALS:
            try:
                self._old[sig] = signal.signal(sig, self._handler)
            except (ValueError, OSError):  # not the main thread: leave signals alone
                pass
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError):
                pass
        self._old = {}

    def reclaim(self) -> None:
        """Install the handlers again, after a library put its own in their place (ray.init does,
        for SIGTERM); leaving the block still restores the handlers from before it was entered."""
        for sig in self.SIGNALS:
            try:
                signal.signal(sig, self._handler)
            except (ValueError, OSError):  # not the main thread
                pass

    def _handler(self, signum, frame) -> None:
        if self.stopping:
            return
        if self.depth:
            self.pending = signum
            return
        self.stopping = True
        raise Stop(signum)

    @contextmanager
    def protect(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending is not None and not self.stopping:
                signum, self.pending = self.pending, None
                self.stopping = True
                raise Stop(signum)


def ignore_stops() -> None:
    """Ignore SIGINT and SIGTERM from now on (the process is exiting after a stop)."""
    for sig in HoldSignals.SIGNALS:
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):
            pass
