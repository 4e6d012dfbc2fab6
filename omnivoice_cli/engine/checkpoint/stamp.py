"""A checkpoint's stamp: the one fingerprint of a checkpoint folder that every cache keyed by a
checkpoint uses (the weight cache, the designed voices, the phrase cache), so that they agree on
what "the same checkpoint" is and all miss together when its files change.

    stamp = checkpoint_stamp(folder)    # None: a file is missing, not a regular file, unreadable
    stamp.digest                        # 64 hex digits: what the caches key by

The stamp covers the folder's resolved path and, for each of its REQUIRED_FILES, its resolved
path, size and modification time (ns), and for the safetensors files the sha256 of their header
(tensor names, dtypes, shapes, offsets: a new layout of the same size and time is another stamp).
Weights rewritten in place with the same header are told apart by their modification time; their
data is never hashed (gigabytes on every load). A link (a hub snapshot's files are links to its
blobs) is resolved once to the file it names, and that file is then opened without following a
link (O_NOFOLLOW: a link put there since is refused, not followed) nor blocking (a FIFO), only
when it is a regular file; its size and time are the opened file's own (fstat). A header is read
bounded (MAX_HEADER bytes at most). Torch-free.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from .hub import REQUIRED_FILES

FORMAT = "1"  # what a stamp covers; a change bumps it (and every cache keyed by it misses once)
MAX_HEADER = 100_000_000  # bytes of a safetensors header read at most (a real one: tens of kB)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class FileStamp:
    """One file of the checkpoint, as its stamp knows it."""

    name: str  # relative to the folder ("audio_tokenizer/model.safetensors")
    path: str  # the file it names, links resolved
    size: int
    mtime_ns: int
    header_sha256: str | None  # a safetensors file's header (its 8-byte length included); else None


@dataclass(frozen=True)
class CheckpointStamp:
    """A checkpoint folder's stamp (the module doc)."""

    folder: str  # resolved
    files: tuple[FileStamp, ...]

    @property
    def digest(self) -> str:
        """sha256 (hex) of FORMAT, the folder and every file's stamp: the caches' key."""
        body = [FORMAT, self.folder, [[f.name, f.path, f.size, f.mtime_ns, f.header_sha256] for f in self.files]]
        return hashlib.sha256(json.dumps(body).encode("utf-8", "surrogatepass")).hexdigest()

    def file(self, name: str) -> FileStamp:
        """The stamp of the file `name` (one of REQUIRED_FILES)."""
        return next(f for f in self.files if f.name == name)


def checkpoint_stamp(folder: Path | str) -> CheckpointStamp | None:
    """The stamp of the checkpoint in `folder` (the module doc); None where one of its files is
    missing, is not a regular file or cannot be read (such a checkpoint is keyed by nothing)."""
    try:
        root = Path(os.path.realpath(folder))
    except (OSError, ValueError):
        return None
    files = []
    for name in REQUIRED_FILES:
        found = file_stamp(root, name)
        if found is None:
            return None
        files.append(found)
    return CheckpointStamp(str(root), tuple(files))


def file_stamp(root: Path, name: str) -> FileStamp | None:
    """One file's stamp (`root` resolved); None where it is missing, not a regular file or unreadable."""
    try:
        path = Path(os.path.realpath(root / name))
        fd = os.open(path, _READ_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            header = _header_sha256(f, st.st_size) if name.endswith(".safetensors") else None
    except OSError:
        return None
    if name.endswith(".safetensors") and header is None:
        return None
    return FileStamp(name, str(path), st.st_size, st.st_mtime_ns, header)


def _header_sha256(f, size: int) -> str | None:
    """sha256 of the open safetensors file's length field and header, read bounded; None where its
    length field is short or names more than the file or MAX_HEADER holds."""
    head = f.read(8)
    if len(head) != 8:
        return None
    (n,) = struct.unpack("<Q", head)
    if n > min(size - 8, MAX_HEADER):
        return None
    body = f.read(n)
    if len(body) != n:
        return None
    return hashlib.sha256(head + body).hexdigest()
