"""Atomic writing: a file is written to a temporary file in the same folder ('.NAME.XXXXXXXX.part',
NAME cut so the name stays within the file system's limit), synced and renamed over the target,
so the target is never left partial or empty: on any failure it is untouched (absent, or its old
contents); a replaced file keeps its mode. `check_writable` creates (and removes) that temporary
file before any work, so a bad path, a name too long or a read-only folder fails fast."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

from ..engine.errors import InvalidRequest


def name_max(folder: Path) -> int:
    """The longest file name (bytes) the folder's file system allows (255 where it cannot tell)."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def check_writable(path: Path, shown: str | None = None) -> None:
    """Before any work: the file name fits the file system, and its temporary file can be created
    there (then removed). InvalidRequest for a name that is too long or a folder that cannot be
    written (no permission, a read-only file system: a bad -o, as a folder that does not exist);
    OSError naming the output for anything else (a full file system)."""
    shown = str(path) if shown is None else shown
    check_name_length(path, shown)
    try:
        fd, tmp = temporary(path)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise InvalidRequest(f"output {shown!r}: the path is too long for this file system") from None
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise InvalidRequest(
                f"output {shown!r}: folder '{path.parent}' is not writable ({e.strerror or e}); write somewhere else"
            ) from None
        raise OSError(e.errno, f"cannot write the output {shown!r}: {e.strerror or e}") from None


def check_name_length(path: Path, shown: str) -> None:
    """Every name in the path fits the file system's limit (the file's own: its folder's limit;
    folders: 255 bytes), and the whole path fits 4095 bytes (InvalidRequest)."""
    if len(os.fsencode(str(path))) >= 4096:
        raise InvalidRequest(f"output {shown[:60]!r}...: the path is longer than 4095 bytes")
    for folder in path.parent.parts:
        if len(os.fsencode(folder)) > 255:
            raise InvalidRequest(
                f"output {shown[:80]!r}...: a folder name is {len(os.fsencode(folder))} bytes long; at most 255"
            )
    try:
        limit = name_max(path.parent) if path.parent.is_dir() else 255
    except OSError:
        limit = 255
    size = len(os.fsencode(path.name))
    if size > limit:
        raise InvalidRequest(
            f"output {shown!r}: the file name is {size} bytes long; this file system allows at most {limit}"
        )


TEMPORARY_SUFFIX = ".part"
_RANDOM_CHARS = 8  # what mkstemp puts between the prefix and the suffix


def temporary_prefix(path: Path) -> str:
    """The start of the temporary files' names of `path`: '.NAME.', NAME cut (at a character) so
    that a whole temporary name fits in the file system's name limit (a legal 255-byte NAME
    gives a legal temporary name)."""
    room = name_max(path.parent) - _RANDOM_CHARS - len(TEMPORARY_SUFFIX) - 2
    raw = os.fsencode(path.name)
    if len(raw) > room:
        raw = raw[: max(room, 1)]
        name = raw.decode("utf-8", "ignore") or os.fsdecode(raw)  # never half a character
    else:
        name = path.name
    return f".{name}."


def temporary_files(path: Path) -> list[Path]:
    """The temporary files that writing `path` may have left (a killed run's)."""
    prefix = "".join(f"[{c}]" if c in "*?[" else c for c in temporary_prefix(path))
    try:
        return [p for p in path.parent.glob(f"{prefix}*{TEMPORARY_SUFFIX}") if p.is_file()]
    except OSError:
        return []


def temporary(path: Path) -> tuple[int, str]:
    return tempfile.mkstemp(prefix=temporary_prefix(path), suffix=TEMPORARY_SUFFIX, dir=path.parent)


def mode_for(path: Path) -> int:
    """The mode of the regular file `path` replaces (kept), else (nothing there, or a link, which
    is replaced rather than followed) what a new file gets: 0666 less the umask."""
    import stat

    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except (OSError, ValueError):
        pass
    return 0o666 & ~_umask()


def replace_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Create or replace `path` with what write(f) writes, through a temporary file in the same
    folder that is synced and renamed: `path` is never partial, and on failure it is untouched.
    A replaced file keeps its mode (permissions)."""
    fd, tmp = temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
