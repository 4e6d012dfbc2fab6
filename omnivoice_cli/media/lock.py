"""One run at a time on an output: `say -o same.wav` or `batch -o out/` started twice would both
write (and the manifest could disagree with the files), so a run holds a lock on its output and a
second one is refused (OutputBusy, exit 1) before its model loads.

The lock is an advisory `flock` on a lock file beside the output, '.NAME.lock' (NAME cut as the
temporary files' names are, atomic.temporary_prefix; a folder's by its real path, so that two
spellings of one folder share a lock, and before the folder is made). The
system drops a lock when its process ends, however it ends, so a stale lock file (a killed run's)
never blocks; a run removes its lock file when it is done. Where the system has no `flock`
(Windows) or the file system refuses locks, the run goes on unlocked.

The lock file's name is in a folder others may write, so what stands there is untrusted: it is
opened without following a link (O_NOFOLLOW) and without blocking, and used only when it is a
regular file with no other name (no hard link); else the run is refused (LockRefused, exit 1),
the thing at that name left as it was. A file is removed only when it is still the one locked."""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..engine.errors import OmniVoiceError
from .atomic import temporary_prefix


class OutputBusy(OmniVoiceError):
    """Another run is writing the same output (a runtime failure, exit 1)."""


class LockRefused(OmniVoiceError):
    """The lock file's name holds a link or something not a plain file of ours (exit 1)."""


def lock_path(output: Path, folder: bool = False) -> Path:
    """The lock file of an output file or folder, beside it."""
    if folder:
        output = output.expanduser().resolve()
        if not output.name:  # the root: its lock inside
            return output / ".omnivoice.lock"
    return output.with_name(temporary_prefix(output) + "lock")


@contextmanager
def output_lock(output: Path | None, folder: bool = False) -> Iterator[None]:
    """Hold the lock of `output` (a file, or a folder; None: stdout, nothing to lock)
    while the block runs; OutputBusy when another process holds it."""
    if output is None:
        yield
        return
    path = lock_path(output, folder)
    fd = _acquire(path, output)
    try:
        yield
    finally:
        if fd is not None:
            _release(path, fd)


def _acquire(path: Path, output: Path) -> int | None:
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            if os.path.islink(path) or e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise _refused(path, output, "a symbolic link" if os.path.islink(path) else "not a file") from None
            return None  # a folder the checks let pass but that refuses this file: unlocked
        try:
            st = os.fstat(fd)
        except OSError:
            st = None
        # (no names at all: removed as its holder let go, and retried below)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            os.close(fd)
            what = (
                "not a file" if st is None or not stat.S_ISREG(st.st_mode) else "a file with another name (a hard link)"
            )
            raise _refused(path, output, what)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            by = f" (process {holder})" if holder else ""
            raise OutputBusy(
                f"output '{output}' is being written by another run{by}: wait for it to end, or give another -o"
            ) from None
        except OSError:  # no locks on this file system (ENOLCK): unlocked
            os.close(fd)
            return None
        try:  # the holder before may have removed the file as it let go: lock the one at the path
            same = os.path.samestat(os.fstat(fd), os.lstat(path))
        except OSError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _refused(path: Path, output: Path, what: str) -> LockRefused:
    return LockRefused(
        f"lock file '{path}' of output '{output}' is {what}, where only a regular file of a run may stand: "
        "remove it, or give another -o"
    )


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""


def _release(path: Path, fd: int) -> None:
    try:  # while still held: a run waiting on the old file finds it gone and retries; only our file
        if os.path.samestat(os.fstat(fd), os.lstat(path)):
            os.unlink(path)
    except OSError:
        pass
    os.close(fd)
