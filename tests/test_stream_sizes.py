"""A streamed WAV that went to a regular file after all (`say --stream -o - > out.wav`) gets its
real sizes in its header at the end (media/streams.StreamWriter), and at a stop (Ctrl-C) the sizes
of what it holds; a pipe, and a file opened to append, keep the unknown-size fields."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT
from helpers.audio import wav_sizes

from omnivoice_cli.media.sndpieces import UNKNOWN_SIZE
from omnivoice_cli.media.streams import StreamWriter

PIECES = [np.full(n, 0.25, np.float32) for n in (1000, 2400, 7)]


def sizes(data: bytes) -> tuple[int, int]:
    return struct.unpack("<I", data[4:8])[0], struct.unpack("<I", data[40:44])[0]


def test_a_regular_file_gets_the_real_sizes_where_its_stream_began(tmp_path):
    path = tmp_path / "x.bin"
    with open(path, "wb") as f:
        f.write(b"junk")  # the stream starts at 4
        with StreamWriter(f, "wav", 24000) as w:
            for p in PIECES:
                w.write(p)
    data = path.read_bytes()[4:]
    assert sizes(data) == (36 + 2 * 3407, 2 * 3407) and len(data) == 44 + 2 * 3407
    (tmp_path / "x.wav").write_bytes(data)
    assert sf.info(str(tmp_path / "x.wav")).frames == 3407


def test_a_stopped_stream_gets_the_sizes_of_what_was_written(tmp_path):
    path = tmp_path / "x.wav"
    with open(path, "wb") as f, pytest.raises(KeyboardInterrupt):
        with StreamWriter(f, "wav", 24000) as w:
            w.write(PIECES[0])
            w.write(PIECES[1])
            raise KeyboardInterrupt  # Ctrl-C before the last piece
    data = path.read_bytes()
    assert sizes(data) == (36 + 2 * 3400, 2 * 3400) and len(data) == 44 + 2 * 3400
    assert sf.info(str(path)).frames == 3400


def test_a_pipe_and_an_appended_file_keep_the_unknown_sizes(tmp_path):
    path = tmp_path / "a.wav"
    with open(path, "ab") as f:
        with StreamWriter(f, "wav", 24000) as w:
            w.write(PIECES[0])
    assert sizes(path.read_bytes()) == (UNKNOWN_SIZE, UNKNOWN_SIZE)
    r, wfd = os.pipe()
    with StreamWriter(wfd, "wav", 24000) as w:
        w.write(PIECES[0])
    os.close(wfd)
    with os.fdopen(r, "rb") as f:
        assert sizes(f.read()) == (UNKNOWN_SIZE, UNKNOWN_SIZE)


@pytest.mark.slow
def test_say_stream_to_stdout_redirected_to_a_file(tmp_path):
    out = tmp_path / "s.wav"
    with open(out, "wb") as f:
        r = subprocess.run(
            [sys.executable, "-m", "omnivoice_cli.cli", "say", "Hello there. How are you today?"]
            + ["--model", str(TINY_CKPT), "--num-step", "2", "--seed", "3", "--stream", "-o", "-"],
            stdout=f,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    riff, size, at = wav_sizes(data)
    assert size == len(data) - at and riff == len(data) - 8
    info = sf.info(str(out))
    assert info.frames == size // 2 and info.frames > 0
    assert len(sf.read(str(out))[0]) == info.frames


@pytest.mark.slow
def test_say_stream_stopped_by_ctrl_c_leaves_a_true_header(invoke, loaded, tmp_path, monkeypatch):
    """`say --stream -o - > f.wav` stopped by Ctrl-C after its first piece: exit 130, and the file's
    header gives the sizes of the audio it holds (not the unknown sizes: 24 h 51 min)."""
    import typer

    from omnivoice_cli.app import deliver

    out = tmp_path / "s.wav"
    stdout = open(out, "wb")
    real = typer.get_binary_stream
    monkeypatch.setattr(typer, "get_binary_stream", lambda name: stdout if name == "stdout" else real(name))
    writes = []
    write = deliver.PieceWriter.write

    def stopped_after_one(self, audio):
        if writes:
            raise KeyboardInterrupt
        writes.append(len(audio))
        write(self, audio)

    monkeypatch.setattr(deliver.PieceWriter, "write", stopped_after_one)
    text = "The first sentence is short. The second one is a little longer than the first. Third."
    r = invoke("say", text, "--model", TINY_CKPT, "--num-step", "2", "--seed", "3", "--stream", "-o", "-")
    stdout.close()
    assert r.exit_code == 130, r.stderr
    data = out.read_bytes()
    riff, size, at = wav_sizes(data)
    assert writes and size == len(data) - at > 0 and riff == len(data) - 8
    assert sf.info(str(out)).frames == size // 2
