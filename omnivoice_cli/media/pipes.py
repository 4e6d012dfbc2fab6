"""Bytes to a pipe, a socket or stdout: `write_all` writes every byte (partial and non-blocking
writes looped over) and turns a reader that went away (EPIPE) into `StreamClosed`."""

from __future__ import annotations

import errno
import os
import select
import sys
from typing import BinaryIO


class StreamClosed(BrokenPipeError):
    """The reader of a stream went away (EPIPE): a pipe's reader exited, an HTTP client left."""


def stdout_is_open() -> bool:
    """False when the process was started with stdout closed (`>&-`)."""
    if sys.stdout is None:
        return False
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (a test runner's buffer)
        return True
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def wait_writable(fd: int) -> None:
    select.select([], [fd], [])


def write_all(out: int | BinaryIO, data: bytes) -> None:
    """Write every byte of `data` to `out` (an int file descriptor or a binary file object),
    looping over partial writes and waiting on a non-blocking one; EPIPE raises StreamClosed."""
    view = memoryview(data)
    total = len(view)
    try:
        while view:
            try:
                n = os.write(out, view) if isinstance(out, int) else out.write(view)
            except BlockingIOError as e:  # non-blocking and full: some bytes may have gone
                n = e.characters_written if not isinstance(out, int) else 0
                wait_writable(out if isinstance(out, int) else out.fileno())
            if n is None:  # a raw non-blocking file object that took nothing
                wait_writable(out.fileno())
                n = 0
            view = view[n:]
        if not isinstance(out, int) and hasattr(out, "flush"):
            out.flush()
    except BrokenPipeError:
        sent = total - len(view)
        raise StreamClosed(
            errno.EPIPE,
            f"the reader of the audio stream went away ({sent} of {total} bytes "
            "of this write sent): the audio is incomplete",
        ) from None


def quiet_stdout() -> None:
    """After stdout's reader went away: point fd 1 at /dev/null and drop what is buffered, so the
    interpreter's last flush does not fail again (and print a second error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
