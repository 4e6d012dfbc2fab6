"""A bad -o is refused before the model loads, with one exit code (2) and a line naming the path
and why: a folder that does not exist, one that cannot be written, `batch -o NAME.wav`."""

from __future__ import annotations

import os

import pytest
from conftest import error_line


def test_an_unwritable_folder_and_a_missing_one_are_both_usage_errors(invoke, fake_engine, tmp_path, monkeypatch):
    r = invoke("say", "Hello.", "-o", "/nonexistent/x.wav")
    assert r.exit_code == 2, r.stderr
    assert error_line(r) == (
        "Error: output '/nonexistent/x.wav': folder '/nonexistent' does not exist; "
        "create it first or write somewhere else"
    )
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.access(ro, os.W_OK):  # root writes anywhere: the system's answer for this folder, as a user gets it
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(ro) else real(p, mode, **kw))
    r = invoke("say", "Hello.", "-o", ro / "x.wav")
    assert r.exit_code == 2, r.stderr
    assert (
        error_line(r)
        == f"Error: output '{ro / 'x.wav'}': folder '{ro}' is not writable (Permission denied); write somewhere else"
    )
    assert fake_engine.loads == []  # both before the model
    assert not list(ro.iterdir())


def test_a_folder_whose_files_cannot_be_created_is_a_usage_error(invoke, fake_engine, tmp_path, monkeypatch):
    """The folder says it is writable, but creating the file there is refused (EACCES: a read-only
    mount, /sys, an ACL): the same exit code and words."""
    import errno
    import tempfile

    real = tempfile.mkstemp

    def refused(*args, dir=None, **kw):
        if str(dir) == str(tmp_path):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    r = invoke("say", "Hello.", "-o", tmp_path / "x.wav")
    assert r.exit_code == 2, r.stderr
    assert error_line(r) == (
        f"Error: output '{tmp_path / 'x.wav'}': folder '{tmp_path}' is not writable (Permission denied); "
        "write somewhere else"
    )
    assert fake_engine.loads == []


@pytest.mark.parametrize("name", ["hello.wav", "out.MP3", "take.opus"])
def test_batch_refuses_an_audio_file_name_for_its_folder(invoke, fake_engine, tmp_path, name):
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello.\nWorld.\n")
    r = invoke("batch", lines, "-o", tmp_path / name)
    assert r.exit_code == 2, r.stderr
    assert error_line(r) == (
        f"Error: -o '{tmp_path / name}' names an audio file, but batch writes a folder (one audio file a line "
        f"and manifest.jsonl): give a folder, e.g. -o '{tmp_path / name.rsplit('.', 1)[0]}'"
    )
    assert not (tmp_path / name).exists() and fake_engine.loads == []


def test_batch_takes_a_folder_that_exists_whatever_its_name(invoke, fake_engine, tmp_path):
    """A folder already named like a file (made by an older version) is still a folder."""
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello.\n")
    (tmp_path / "old.wav").mkdir()
    r = invoke("batch", lines, "-o", tmp_path / "old.wav")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "old.wav" / "0001.wav").is_file()


# -- one run at a time on an output (media/lock.py) -------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from omnivoice_cli.media.lock import output_lock
with output_lock(Path(sys.argv[1]), folder=sys.argv[2] == "folder"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(path, folder=False):
    """Another process holding the lock of `path`, once it has said so (an event, not a delay)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), "folder" if folder else "file"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "held\n"
    return proc


def test_a_second_say_on_the_same_file_is_refused(invoke, fake_engine, tmp_path):
    out = tmp_path / "same.wav"
    holder = _holder(out)
    try:
        r = invoke("say", "Hello.", "-o", out)
        assert r.exit_code == 1, r.stderr
        assert error_line(r) == (
            f"Error: output '{out}' is being written by another run (process {holder.pid}): "
            "wait for it to end, or give another -o"
        )
        assert not out.exists() and fake_engine.loads == []  # refused before the model
        other = invoke("say", "Hello.", "-o", tmp_path / "other.wav")  # another file is free
        assert other.exit_code == 0, other.stderr
    finally:
        holder.communicate("")
    r = invoke("say", "Hello.", "-o", out)  # the holder ended: free again
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.wav", "same.wav"]  # no lock file left


def test_a_second_batch_on_the_same_folder_is_refused(invoke, fake_engine, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello.\nWorld.\n")
    out = tmp_path / "out"
    holder = _holder(tmp_path / "." / "out", folder=True)  # another spelling of the same folder
    try:
        r = invoke("batch", lines, "-o", f"{out}/")
        assert r.exit_code == 1, r.stderr
        assert "is being written by another run" in error_line(r)
        assert not out.exists() and fake_engine.loads == []
    finally:
        holder.communicate("")
    r = invoke("batch", lines, "-o", out)
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["0001.wav", "0002.wav", "manifest.jsonl"]


def test_a_killed_runs_lock_file_never_blocks(invoke, fake_engine, tmp_path):
    from omnivoice_cli.media.lock import lock_path

    out = tmp_path / "x.wav"
    holder = _holder(out)
    holder.kill()
    holder.wait()
    assert lock_path(out).exists()  # left behind by the killed run
    r = invoke("say", "Hello.", "-o", out)
    assert r.exit_code == 0, r.stderr
    assert out.is_file() and not lock_path(out).exists()


# -- a lock file that is not ours: never followed, never truncated, never made elsewhere -------


def _plant(where, kind, victim):
    if kind == "link":
        where.symlink_to(victim)
    elif kind == "dangling":
        where.symlink_to(victim.with_name("made-elsewhere"))
    elif kind == "fifo":
        os.mkfifo(where)
    else:  # a hard link to someone's file
        os.link(victim, where)


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "hardlink"])
def test_say_refuses_a_lock_file_that_is_a_link_or_not_a_file(invoke, fake_engine, tmp_path, kind):
    from omnivoice_cli.media.lock import lock_path

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    victim = theirs / "precious.txt"
    victim.write_text("someone's work\n")
    out = tmp_path / "out.wav"
    _plant(lock_path(out), kind, victim)
    r = invoke("say", "Hello.", "-o", out)
    line = error_line(r, str(lock_path(out)), exit_code=1)
    assert "a regular file" in line and "remove it" in line, line
    assert victim.read_text() == "someone's work\n" and sorted(p.name for p in theirs.iterdir()) == ["precious.txt"]
    assert not out.exists() and fake_engine.loads == []
    assert os.path.lexists(lock_path(out))  # not ours: left where it was


@pytest.mark.parametrize("kind", ["link", "dangling"])
def test_batch_refuses_a_folder_lock_that_is_a_link(invoke, fake_engine, tmp_path, kind):
    from omnivoice_cli.media.lock import lock_path

    lines = tmp_path / "lines.txt"
    lines.write_text("Hello.\n")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    victim = theirs / "precious.txt"
    victim.write_text("someone's work\n")
    out = tmp_path / "out"
    _plant(lock_path(out, folder=True), kind, victim)
    r = invoke("batch", lines, "-o", out)
    error_line(r, str(lock_path(out, folder=True)), exit_code=1)
    assert victim.read_text() == "someone's work\n" and sorted(p.name for p in theirs.iterdir()) == ["precious.txt"]
    assert not out.exists() and fake_engine.loads == []
