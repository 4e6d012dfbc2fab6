"""Designed voices kept per checkpoint: the built-in names (alloy ... cedar) and `--voice-map`
entries, rendered once (design.py) and cloned after that, on every request and after a restart.

One voice file per (checkpoint, design) in `designed/` of the user's data folder
(`engine.checkpoint.hub.user_home`), named `voice-<32 hex>.safetensors` by a sha256 of FORMAT,
the checkpoint's key (`checkpoint_key`: its stamp, engine/checkpoint/stamp.py, the one the weight
cache and the phrase cache key by too) and the design. FORMAT 2 keys by the stamp: the entries of
FORMAT 1 (keyed by the folder and its weights' and config's sizes and times) are never asked for
again, so each design is rendered once more per checkpoint. The folder is untrusted: an entry is read only when it is a
regular file of at most MAX_ENTRY_BYTES, it is a voice file whose recorded checkpoint key and
design are the ones asked for, and its recorded `voice_prompt` is the sha256 of the codes and
words it holds; else it is deleted and rendered again (never a failure). An entry is written
through a temporary file and a rename (engine.voice.save_voice), under a lock (a thread lock,
and `flock` on `.NAME.lock` beside it where the system has one), so concurrent first uses (two
requests, two servers) render it once and never leave a broken file. The lock file is removed by
its holder when done (`_flock` says why that is safe), so the folder keeps only voice files.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ...engine.checkpoint.hub import unlink_same, user_home
from ...engine.checkpoint.stamp import checkpoint_stamp
from ...engine.errors import InvalidRequest
from .design import Design, voice_prompt

if TYPE_CHECKING:
    from ...engine.sound.voice import VoicePrompt

FORMAT = "2"  # the entry's layout and key (2: the checkpoint's stamp); a change bumps it
MAX_ENTRY_BYTES = 4 << 20  # a voice file: a sample's codes are a few kB
_LOCK_FLAGS = (
    os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)
_LOCK_TRIES = 64  # lock files removed by their holders under us in a row before going on unlocked
_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def design_dir() -> Path:
    """Where designed voices are kept: `designed/` in the user's data folder."""
    return user_home() / "designed"


def checkpoint_key(folder: Path | None) -> str | None:
    """The checkpoint's key: its stamp's digest (engine/checkpoint/stamp.py). None: no folder here,
    or a file of it unreadable (nothing is kept)."""
    stamp = None if folder is None else checkpoint_stamp(folder)
    return None if stamp is None else stamp.digest


def entry_path(key: str, design: Design) -> Path:
    """The file a design is kept in for the checkpoint `key`."""
    text = json.dumps([FORMAT, key, design.fields()], sort_keys=True, ensure_ascii=False)
    return design_dir() / f"voice-{hashlib.sha256(text.encode()).hexdigest()[:32]}.safetensors"


def read(path: Path, key: str, design: Design) -> VoicePrompt | None:
    """The designed voice kept at `path`, verified (see the module doc); None where there is none
    or it fails (then it is deleted)."""
    from ...engine.sound import voice as vmod
    from ...engine.sound.voicefile import read_voice_metadata

    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
        _drop(path)
        return None
    try:
        meta = read_voice_metadata(path)
        voice = vmod.load_voice(path)
    except (InvalidRequest, OSError, ValueError):
        _drop(path)
        return None
    wanted = {**design.fields(), "checkpoint": key}
    if any(meta.get(k, "") != v for k, v in wanted.items()) or meta.get("voice_prompt") != voice_prompt(voice):
        _drop(path)
        return None
    return voice


def write(path: Path, voice: VoicePrompt, key: str, design: Design, model: str | None = None) -> None:
    """Keep a rendered design (atomically: a temporary file, then a rename)."""
    from ...engine.sound import voice as vmod

    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {**design.fields(), "checkpoint": key, "model": model or "", "voice_prompt": voice_prompt(voice) or ""}
    vmod.save_voice(path, voice, **meta)


def kept(key: str | None, design: Design, render: Callable[[], VoicePrompt], model: str | None = None) -> VoicePrompt:
    """The design's voice on the checkpoint `key`: the kept one, else rendered now and kept (a
    write that fails is no failure: the voice is used, and rendered again next time)."""
    if key is None:
        return render()
    path = entry_path(key, design)
    with _locked(path):
        found = read(path, key, design)
        if found is not None:
            return found
        voice = render()
        try:
            write(path, voice, key, design, model)
        except OSError:
            pass
        return voice


def lookup(key: str | None, design: Design) -> VoicePrompt | None:
    """The design's kept voice, if there is a good one (no rendering: before the model loads)."""
    if key is None:
        return None
    path = entry_path(key, design)
    if not path.exists():
        return None
    with _locked(path):
        return read(path, key, design)


def _drop(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One renderer of `path` at a time: in this process (a thread lock), and across processes
    (`flock` on `.NAME.lock`, where the system and the folder allow it; `_flock`)."""
    with _locks_guard:
        lock = _locks.setdefault(path, threading.Lock())
    with lock:
        lock_file = path.with_name(f".{path.name}.lock")
        fd = _flock(lock_file)
        try:
            yield
        finally:
            if fd is not None:
                _unlock(lock_file, fd)


def _flock(lock_file: Path) -> int | None:
    """The lock file held (an exclusive `flock`, waited for), as it stands at `lock_file` once held;
    None where there is no lock to be had (no `flock`, a folder that refuses the file, a link or
    something not a regular file at its name, left as it is): the render goes on unlocked, its
    write atomic all the same.

    Lock files are removed by their holder (`_unlock`), so one waited for may be gone by the time
    it is held: a holder checks that the file at the name is the one it locked (as media/lock.py
    does), else it locks the one there now. A file is only ever removed by the process holding
    it, so no two processes hold the name's lock at once; a run of a version that leaves its lock
    files and does not check may render a design once more beside ours (never a broken file)."""
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    for _ in range(_LOCK_TRIES):
        try:
            fd = os.open(lock_file, _LOCK_FLAGS, 0o600)
        except OSError:  # a link (O_NOFOLLOW), a folder, a folder we may not write: unlocked
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, a device: not ours, left as it is
                raise OSError(f"{lock_file} is not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # that, or no locks on this file system: unlocked
            os.close(fd)
            return None
        try:
            same = os.path.samestat(os.fstat(fd), os.lstat(lock_file))
        except OSError:  # the name is gone
            same = False
        if same:
            return fd
        os.close(fd)  # removed (or replaced) by its holder as it let go: lock the one there now
    return None


def _unlock(lock_file: Path, fd: int) -> None:
    """Remove our lock file while still holding it (only while the name is still the file we hold:
    never a link, nor a file put there since), then let go."""
    try:
        held = os.fstat(fd)
        unlink_same(lock_file, (held.st_dev, held.st_ino))
    except OSError:
        pass
    finally:
        os.close(fd)
