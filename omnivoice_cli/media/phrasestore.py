"""The phrase cache's store: finished audio kept on disk by content, so that the same request again
costs a file read (app/phrases/ makes the keys; this module knows only keys and bytes).

    store = PhraseStore(folder, cap_bytes=256 << 20)
    found = store.get(key)            # Found(data, meta) or None (a miss; a damaged entry is dropped)
    store.put(key, data, {"seed": 7}) # written through a temporary file and a rename

One file per entry, `<key>.phrase` (the key: 64 hex digits, a sha256): a magic line, the length
of a JSON header, the header (the key again, the data's length and sha256, the caller's metadata),
then the data. An entry is untrusted input: it is opened without following a link and without
blocking, used only when it is a regular file whose magic, header (read bounded), key, length and
sha256 all agree; a damaged entry of ours (its magic there, the rest off) is deleted, and the
request is a miss. A file at an entry's name that is not ours (no magic: a link, a folder, someone
else's file) is neither used, replaced nor deleted.

Writers never meet: each entry is written to its own temporary file (media/atomic.py's names) and
renamed into place, so a reader sees a whole entry or none, and two processes filling one folder
at once lose nothing (the same key twice: the same bytes, the last rename wins). The folder is
kept under `cap_bytes`, the least recently used entries (mtime, touched by each hit) evicted first
after each write; eviction and `clear` delete only the store's own files (names as it names them,
its magic inside), each only while it is still the file that was looked at (device, inode).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..engine.checkpoint.hub import READ_FLAGS, entry_stat, open_same, unlink_same
from .atomic import replace_atomically

MAGIC = b"OVPC1\n"  # the store's files begin with this; a change of layout bumps it
SUFFIX = ".phrase"
MAX_HEADER = 64 << 10  # bytes of an entry's header at most (a real one: a few hundred)
MAX_ENTRY = 512 << 20  # bytes of one entry's data at most (an hour of 24 kHz 16-bit WAV: 173 MB)
_KEY = re.compile(r"[0-9a-f]{64}")
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.phrase")
_TMP_NAME = re.compile(r"\.[0-9a-f]{64}\.phrase\.[a-z0-9_]{8}\.part")  # atomic.temporary's names of an entry
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Found:
    """An entry read and verified: its data and the metadata it was put with."""

    data: bytes
    meta: dict


@dataclass(frozen=True)
class StoredPhrase:
    """One of the store's files, as `omnivoice cache list` shows it."""

    path: Path
    size: int  # bytes on disk
    used: float  # last used (mtime), seconds since the epoch
    identity: tuple[int, int]  # (device, inode): deleted only while it is still this file


class PhraseStore:
    """The store in `folder`, bounded by `cap_bytes` (see the module doc). `notice(text)` hears of
    each damaged entry dropped and each write that failed (the request goes on either way)."""

    def __init__(self, folder: Path, cap_bytes: int, notice=None) -> None:
        self.folder, self.cap_bytes = Path(folder), int(cap_bytes)
        self.notice = notice or (lambda text: None)

    def path_of(self, key: str) -> Path:
        if not _KEY.fullmatch(key):
            raise ValueError(f"a phrase key is 64 lower-case hex digits, got {key!r}")
        return self.folder / f"{key}{SUFFIX}"

    # --- reading ------------------------------------------------------------------------------
    def get(self, key: str) -> Found | None:
        """The entry of `key`, verified, and marked used now; None when there is none, it is not
        ours, or it is damaged (then deleted)."""
        path = self.path_of(key)
        try:
            fd = os.open(path, READ_FLAGS)
        except OSError:
            return None  # none, a link (ELOOP), a FIFO's refusal, no permission: a miss
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or f.read(len(MAGIC)) != MAGIC:
                    return None  # not ours: left alone
                found, problem = _read_entry(f, key, st.st_size)
                if found is not None:
                    try:
                        os.utime(f.fileno())  # used now: the last to be evicted
                    except OSError:
                        pass
                    return found
        except OSError:
            return None
        self.notice(f"phrase cache: entry {path.name} is damaged ({problem}): dropped, the request is rendered")
        unlink_same(path, (st.st_dev, st.st_ino))
        return None

    # --- writing ------------------------------------------------------------------------------
    def put(self, key: str, data: bytes, meta: dict | None = None) -> bool:
        """Keep `data` under `key` (atomically; then evict past the cap). False when it was not
        kept: too large, a name held by what is not ours, or a write that failed (said once)."""
        path = self.path_of(key)
        if len(data) > min(MAX_ENTRY, self.cap_bytes):
            return False
        st = entry_stat(path)
        if st is not None and not _ours(path, st):
            return False  # never replace what is not ours
        header = json.dumps(
            {"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "meta": meta or {}},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()

        def write(f: BinaryIO) -> None:
            f.write(MAGIC + _LENGTH.pack(len(header)) + header)
            f.write(data)

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            replace_atomically(path, write)
        except OSError as e:
            self.notice(f"phrase cache: cannot write {_shown(self.folder)} ({e.strerror or e}): the reply is not kept")
            return False
        self.evict(keep=path)
        return True

    # --- the folder ---------------------------------------------------------------------------
    def entries(self) -> list[StoredPhrase]:
        """The store's own entries, least recently used first."""
        return sorted(
            (StoredPhrase(p, st.st_size, st.st_mtime, (st.st_dev, st.st_ino)) for p, st in self._own()), key=_used
        )

    def evict(self, keep: Path | None = None) -> int:
        """Delete the least recently used entries until they hold at most cap_bytes (never `keep`);
        -> how many were deleted."""
        found = self.entries()
        total, gone = sum(e.size for e in found), 0
        for e in found:
            if total <= self.cap_bytes:
                break
            if e.path != keep and unlink_same(e.path, e.identity):
                total, gone = total - e.size, gone + 1
        return gone

    def clear(self) -> tuple[int, int]:
        """Delete every entry of the store and its writers' leftover temporary files; -> (files, bytes)."""
        files = n = 0
        leftovers = [(p, st) for p, st in self._listed(_TMP_NAME) if stat.S_ISREG(st.st_mode)]
        for path, st in [*self._own(), *leftovers]:
            if unlink_same(path, (st.st_dev, st.st_ino)):
                files, n = files + 1, n + st.st_size
        return files, n

    def _listed(self, name: re.Pattern) -> list[tuple[Path, os.stat_result]]:
        try:
            paths = [p for p in self.folder.iterdir() if name.fullmatch(p.name)]
        except OSError:
            return []
        out = []
        for p in paths:
            st = entry_stat(p)
            if st is not None:
                out.append((p, st))
        return out

    def _own(self) -> list[tuple[Path, os.stat_result]]:
        return [(p, st) for p, st in self._listed(_ENTRY_NAME) if _ours(p, st)]


def _shown(path: Path) -> str:
    """A path as a notice shows it: one line, what is not printable (a newline, an escape) as its
    Python escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(path))


def _used(e: StoredPhrase) -> float:
    return e.used


def _read_entry(f: BinaryIO, key: str, size: int) -> tuple[Found | None, str]:
    """The rest of an entry after its magic, checked; (None, what is wrong) when it is damaged."""
    head = f.read(_LENGTH.size)
    if len(head) != _LENGTH.size:
        return None, "truncated"
    (n,) = _LENGTH.unpack(head)
    if not 0 < n <= min(MAX_HEADER, size):
        return None, "its header's length is wrong"
    try:
        header = json.loads(f.read(n))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, "its header is not JSON"
    if not isinstance(header, dict) or header.get("key") != key:
        return None, "made for another key"
    length, digest, meta = header.get("size"), header.get("sha256"), header.get("meta")
    if not isinstance(length, int) or not isinstance(digest, str) or not isinstance(meta, dict):
        return None, "its header lacks a field"
    if length != size - len(MAGIC) - _LENGTH.size - n or length > MAX_ENTRY:
        return None, "its length is wrong (truncated?)"
    data = f.read(length)
    if len(data) != length or hashlib.sha256(data).hexdigest() != digest:
        return None, "its checksum does not match"
    return Found(data, meta), ""


def _ours(path: Path, st: os.stat_result) -> bool:
    """A regular file (never through a link) that begins with the store's magic."""
    fd = open_same(path, st)
    if fd is None:
        return False
    try:
        return os.pread(fd, len(MAGIC), 0) == MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)
