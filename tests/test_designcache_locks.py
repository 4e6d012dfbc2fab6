"""The designed voices' lock files (app/voices/designcache.py): removed by their holder when done, so
designed/ keeps only voice files; removal is safe (a waiter whose file was removed as it got it
locks the one at the name now, so no two hold the name at once); a link or a FIFO at a lock
file's name is neither followed, locked nor removed."""

from __future__ import annotations

import os

import pytest

fcntl = pytest.importorskip("fcntl")  # Windows has no flock: no lock files at all

from omnivoice_cli.app.voices import designcache  # noqa: E402 - after the skip
from omnivoice_cli.app.voices.design import Design, voice_prompt  # noqa: E402

DESIGN = Design("female, low pitch", 3, "Hello there, friend.", "en")
KEY = "0" * 64


def _voice():
    import torch

    from omnivoice_cli.engine.sound.voice import VoicePrompt

    return VoicePrompt(torch.arange(16, dtype=torch.int64).reshape(2, 8), "Hello there, friend.", None)


def _others_lock(lock_file) -> bool:
    """Whether another open of the lock file at its name could take its lock now (no one holds it)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_keeping_and_reading_a_voice_leave_no_lock_file(home):
    kept = designcache.kept(KEY, DESIGN, _voice)
    assert designcache.lookup(KEY, DESIGN) is not None and voice_prompt(kept) is not None
    path = designcache.entry_path(KEY, DESIGN)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_lock_file_removed_as_it_is_got_is_taken_again_at_its_name(home, monkeypatch):
    """The holder before us removes its lock file and lets go just as we get it: we hold a lock on
    a file no longer at the name, so we lock the one there now, and nobody else can take it."""
    path = designcache.entry_path(KEY, DESIGN)
    lock_file = path.with_name(f".{path.name}.lock")
    real, calls = fcntl.flock, []

    def removed_first(fd, op):
        if not calls:
            os.unlink(lock_file)  # what the holder before us did as it let go
        calls.append(op)
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", removed_first)
    with designcache._locked(path):
        monkeypatch.setattr(fcntl, "flock", real)
        assert lock_file.is_file() and not _others_lock(lock_file)
    assert len(calls) == 2 and not lock_file.exists()


@pytest.mark.parametrize("thing", ["link", "fifo"])
def test_a_link_or_fifo_at_a_lock_files_name_is_left_alone(home, tmp_path, thing):
    path = designcache.entry_path(KEY, DESIGN)
    lock_file = path.with_name(f".{path.name}.lock")
    lock_file.parent.mkdir(parents=True)
    target = tmp_path / "not-a-lock"
    target.write_text("mine")
    if thing == "link":
        lock_file.symlink_to(target)
    else:
        os.mkfifo(lock_file)
    designcache.kept(KEY, DESIGN, _voice)  # rendered and kept, unlocked
    assert designcache.lookup(KEY, DESIGN) is not None
    assert os.path.lexists(lock_file) and target.read_text() == "mine"
    assert lock_file.is_symlink() if thing == "link" else not lock_file.is_file()
