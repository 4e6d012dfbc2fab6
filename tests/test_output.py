"""omnivoice_cli.output: formats, clipping, atomic writes, stdout."""

from __future__ import annotations

import io
import os
import stat

import numpy as np
import pytest

import omnivoice_cli.output as omnivoice_output
import soundfile as sf

from conftest import files_in
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.output import FORMATS, check_output, encode, prepare_audio, write_audio

SR = 24000


def tone(seconds=0.5, amp=0.5):
    t = np.arange(int(seconds * SR)) / SR
    return (amp * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


@pytest.mark.parametrize("ext", [".wav", ".flac", ".ogg", ".WAV"])
def test_check_output_formats(tmp_path, ext):
    t = check_output(str(tmp_path / f"a{ext}"))
    assert not t.to_stdout
    assert (t.format, t.subtype) == FORMATS[ext.lower()]


def test_check_output_stdout():
    t = check_output("-")
    assert t.to_stdout and t.format == "WAV" and str(t) == "-"


@pytest.mark.parametrize("name", ["a.mp3", "a", "a.wav.txt"])
def test_check_output_bad_extension(tmp_path, name):
    with pytest.raises(InvalidRequest, match=r"\.wav, \.flac or \.ogg"):
        check_output(str(tmp_path / name))


def test_check_output_missing_folder(tmp_path):
    with pytest.raises(InvalidRequest, match="does not exist"):
        check_output(str(tmp_path / "nope" / "a.wav"))


def test_check_output_is_a_folder(tmp_path):
    (tmp_path / "d.wav").mkdir()
    with pytest.raises(InvalidRequest, match="is a folder"):
        check_output(str(tmp_path / "d.wav"))


@pytest.mark.parametrize("ext", [".wav", ".flac"])
def test_pcm_roundtrip_24k_mono(tmp_path, ext):
    a = tone()
    path = tmp_path / f"x{ext}"
    write_audio(a, SR, check_output(str(path)))
    info = sf.info(str(path))
    assert (info.samplerate, info.channels, info.subtype) == (SR, 1, "PCM_16")
    back, sr = sf.read(str(path), dtype="float32")
    assert sr == SR and back.shape == a.shape
    assert np.abs(back - a).max() < 1e-4  # 16-bit quantisation
    assert files_in(tmp_path) == [path.name]  # no temporary file left


def test_ogg_vorbis(tmp_path):
    a = tone(1.0)
    path = tmp_path / "x.ogg"
    write_audio(a, SR, check_output(str(path)))
    info = sf.info(str(path))
    assert (info.format, info.subtype, info.samplerate, info.channels) == ("OGG", "VORBIS", SR, 1)
    back, _ = sf.read(str(path), dtype="float32")
    assert abs(len(back) - len(a)) < SR // 10


def test_clipping_and_nan(tmp_path):
    a = np.array([0.0, 1.7, -3.0, 0.25, np.nan, np.inf, -np.inf], dtype=np.float32)
    p = prepare_audio(a)
    assert p.dtype == np.float32 and p.min() >= -1 and p.max() <= 1
    assert p[1] == 1.0 and p[2] == -1.0 and p[4] == 0.0
    path = tmp_path / "c.wav"
    write_audio(a, SR, check_output(str(path)))
    back, _ = sf.read(str(path), dtype="float32")
    assert back.max() <= 1.0 and back.min() >= -1.0
    assert abs(back[1] - 1.0) < 1e-4 and back[2] == -1.0  # no wrap-around


def test_prepare_accepts_1xN_and_rejects_stereo():
    assert prepare_audio(np.zeros((1, 10))).shape == (10,)
    with pytest.raises(ValueError):
        prepare_audio(np.zeros((2, 10)))


def test_stdout_is_a_complete_wav():
    buf = io.BytesIO()
    a = tone()
    write_audio(a, SR, check_output("-"), stdout=buf)
    data = buf.getvalue()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert int.from_bytes(data[4:8], "little") + 8 == len(data)  # header sizes filled in
    back, sr = sf.read(io.BytesIO(data), dtype="float32")
    assert sr == SR and back.shape == a.shape
    assert data == encode(a, SR)


def test_failure_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "x.wav"

    def broken_write(file, data, samplerate, *args):
        file.write(b"RIFF partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(omnivoice_output, "_write_blocks", broken_write)
    with pytest.raises(OSError, match="No space"):
        write_audio(tone(), SR, check_output(str(path)))
    assert files_in(tmp_path) == []


def test_failure_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "x.wav"
    path.write_bytes(b"old contents")

    def broken_write(file, data, samplerate, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr(omnivoice_output, "_write_blocks", broken_write)
    with pytest.raises(RuntimeError):
        write_audio(tone(), SR, check_output(str(path)))
    assert path.read_bytes() == b"old contents"
    assert files_in(tmp_path) == ["x.wav"]


def test_overwrite_and_mode(tmp_path):
    path = tmp_path / "x.flac"
    path.write_bytes(b"old")
    write_audio(tone(), SR, check_output(str(path)))
    assert sf.info(str(path)).format == "FLAC"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
