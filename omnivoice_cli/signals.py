"""Ctrl-C and SIGTERM while audio is written: hold the signal until the file is complete.

    with HoldSignals() as signals:
        audio = generate(...)            # Ctrl-C / SIGTERM here raises Stop at once
        with signals.protect():
            write(audio)                 # ... here it waits until the write is done

Used by `omnivoice say` (one file, or WAV on stdout) and `omnivoice batch` (a file and its
manifest record). A stop never lands inside soundfile's C callbacks (where an exception would be
swallowed) nor between a file and its record. The caller maps Stop to exit code 128 + signum.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Any


class Stop(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else f"signal {int(signum)}"


class HoldSignals:
    """SIGINT and SIGTERM raise Stop, except inside `protect()`: there they wait until it ends."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None
        self._old: dict[int, Any] = {}

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

    def _handler(self, signum, frame) -> None:
        if self.depth:
            self.pending = signum
            return
        raise Stop(signum)

    @contextmanager
    def protect(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending is not None:
                signum, self.pending = self.pending, None
                raise Stop(signum)
