"""omnivoice_cli.media.output: formats, clipping, atomic writes, stdout."""

from __future__ import annotations

import io
import os
import stat

import numpy as np
import pytest
import soundfile as sf
from conftest import files_in
from helpers.audio import tone

import omnivoice_cli.media.output as omnivoice_output
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.media.encoders import FormatUnavailable
from omnivoice_cli.media.formats import AUDIO_FORMATS, FORMATS, format_named
from omnivoice_cli.media.output import check_output, encode, write_audio
from omnivoice_cli.media.pcm import pcm16, prepare_audio
from omnivoice_cli.media.pipes import StreamClosed, write_all
from omnivoice_cli.media.sndpieces import mp3_frame_length, streaming_wav_header
from omnivoice_cli.media.streams import StreamEncoder, StreamWriter

SR = 24000


@pytest.mark.parametrize("ext", [".wav", ".flac", ".ogg", ".WAV", ".opus", ".mp3", ".raw", ".pcm", ".MP3"])
def test_check_output_formats(tmp_path, ext):
    t = check_output(str(tmp_path / f"a{ext}"))
    assert not t.to_stdout
    assert (t.format, t.subtype) == FORMATS[ext.lower()]


def test_check_output_stdout():
    t = check_output("-")
    assert t.to_stdout and t.format == "WAV" and str(t) == "-"


@pytest.mark.parametrize("name", ["a.mp4", "a", "a.wav.txt"])
def test_check_output_bad_extension(tmp_path, name):
    with pytest.raises(
        InvalidRequest,
        match=r"use a file ending in \.wav, \.flac, \.ogg, \.opus, \.mp3, \.raw, \.pcm, \.aac, \.m4a, \.ulaw, \.mulaw or \.alaw, or - for stdout",
    ):
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
    a = tone(0.5)
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
    a = tone(0.5)
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
        write_audio(tone(0.5), SR, check_output(str(path)))
    assert files_in(tmp_path) == []


def test_failure_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "x.wav"
    path.write_bytes(b"old contents")

    def broken_write(file, data, samplerate, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr(omnivoice_output, "_write_blocks", broken_write)
    with pytest.raises(RuntimeError):
        write_audio(tone(0.5), SR, check_output(str(path)))
    assert path.read_bytes() == b"old contents"
    assert files_in(tmp_path) == ["x.wav"]


def test_overwrite_and_mode(tmp_path):
    path = tmp_path / "x.flac"
    path.write_bytes(b"old")
    write_audio(tone(0.5), SR, check_output(str(path)))
    assert sf.info(str(path)).format == "FLAC"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600


# --- the table of formats -------------------------------------------------------------------------


def test_the_table():
    assert list(AUDIO_FORMATS) == ["wav", "flac", "ogg", "opus", "mp3", "raw", "aac", "m4a", "mulaw", "alaw"]
    assert [n for n, f in AUDIO_FORMATS.items() if f.lossy] == ["ogg", "opus", "mp3", "aac", "m4a", "mulaw", "alaw"]
    assert FORMATS[".ulaw"] == FORMATS[".mulaw"] == ("RAW", "ULAW") and FORMATS[".alaw"] == ("RAW", "ALAW")
    assert [n for n, f in AUDIO_FORMATS.items() if not f.streams] == ["flac", "aac", "m4a"]
    assert FORMATS[".aac"] == ("ADTS", "AAC") and FORMATS[".m4a"] == ("MP4", "AAC")
    assert FORMATS[".pcm"] == FORMATS[".raw"] == ("RAW", "PCM_16")
    assert FORMATS[".opus"] == ("OGG", "OPUS") and FORMATS[".mp3"] == ("MP3", "MPEG_LAYER_III")


def test_format_names():
    assert format_named("MP3") is AUDIO_FORMATS["mp3"]
    assert format_named("pcm") is format_named(".raw") is AUDIO_FORMATS["raw"]
    assert format_named(".m4a") is AUDIO_FORMATS["m4a"] and format_named("AAC") is AUDIO_FORMATS["aac"]
    with pytest.raises(
        InvalidRequest, match="format 'mp4' is not allowed: use wav, flac, ogg, opus, mp3, raw, aac, m4a, mulaw, alaw"
    ):
        format_named("mp4")


def test_check_output_with_a_format(tmp_path):
    t = check_output("-", "raw")
    assert t.to_stdout and t.audio_format.name == "raw"
    assert check_output(str(tmp_path / "a.mp3"), "mp3").audio_format.name == "mp3"
    with pytest.raises(InvalidRequest, match="is mp3 but the format asked is raw"):
        check_output(str(tmp_path / "a.mp3"), "raw")


def test_a_format_libsndfile_lacks_is_named(tmp_path, monkeypatch):
    real = sf.available_subtypes
    monkeypatch.setattr(sf, "available_subtypes", lambda major=None: {} if major == "MP3" else real(major))
    with pytest.raises(
        FormatUnavailable, match=r"cannot write mp3 \(MP3/MPEG_LAYER_III\); it writes wav, flac, ogg, opus, raw"
    ):
        check_output(str(tmp_path / "a.mp3"))
    with pytest.raises(FormatUnavailable):
        StreamEncoder("mp3", SR)
    assert check_output(str(tmp_path / "a.opus")).audio_format.name == "opus"


# --- round trips ------------------------------------------------------------------------------------


def shaped_noise(n, seed=0):
    """Noise shaped by a slow envelope, in [-1, 1] (lossy codecs get something to work on)."""
    rng = np.random.default_rng(seed)
    env = 0.5 + 0.4 * np.sin(np.arange(n) / SR * 2 * np.pi * 3)
    return (0.3 * env * rng.standard_normal(n)).clip(-1, 1).astype(np.float32)


def wav_data(wav: bytes) -> bytes:
    """The bytes of the data chunk of a WAV file (walking its chunks)."""
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    pos = 12
    while pos < len(wav):
        kind, size = wav[pos : pos + 4], int.from_bytes(wav[pos + 4 : pos + 8], "little")
        if kind == b"data":
            return wav[pos + 8 : pos + 8 + size]
        pos += 8 + size + (size & 1)
    raise AssertionError("no data chunk")


def read_any(path_or_bytes, fmt):
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else str(path_or_bytes)
    if fmt == "raw":
        return sf.read(src, dtype="float32", samplerate=SR, channels=1, format="RAW", subtype="PCM_16")
    return sf.read(src, dtype="float32")


MP3_FRAME = 576  # samples per MPEG-2 layer III frame


@pytest.mark.parametrize("n", [1, 577, 24000, 61_111])
@pytest.mark.parametrize("name", ["flac", "ogg", "opus", "mp3", "raw"])
def test_file_roundtrip_same_length_as_the_wav(tmp_path, name, n):
    a = shaped_noise(n)
    write_audio(a, SR, check_output(str(tmp_path / "x.wav")))
    path = tmp_path / f"x{AUDIO_FORMATS[name].extension}"
    write_audio(a, SR, check_output(str(path)))
    ref, _ = sf.read(str(tmp_path / "x.wav"), dtype="float32")
    back, sr = read_any(path, name)
    assert sr == SR and back.ndim == 1
    # the same length as the WAV, mp3 included: libsndfile fills in its info frame (encoder delay
    # and padding), which the decoder uses to trim them (measured: exact for every length)
    assert len(back) == len(ref) == n
    if not AUDIO_FORMATS[name].lossy:
        assert np.array_equal(back, ref)
    if name == "raw":
        assert path.read_bytes() == wav_data((tmp_path / "x.wav").read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["x.wav", path.name])  # no temporary file


def test_pcm16_is_the_wav_sample_data():
    a = np.concatenate([shaped_noise(1000), [1.0, -1.0, 2.0, -2.0, np.nan]]).astype(np.float32)
    assert pcm16(a) == wav_data(encode(a, SR))
    assert len(pcm16(a)) == 2 * len(a)


# --- streams ------------------------------------------------------------------------------------------


def cut(a, sizes=(1, 0, 999, 4800, 17, 24000)):
    """a in pieces of the given sizes (then the rest): tiny and empty ones included."""
    out, pos = [], 0
    for s in sizes:
        out.append(a[pos : pos + s])
        pos += s
    return out + [a[pos:]]


def stream_encoded(name, pieces):
    enc = StreamEncoder(name, SR)
    out = [enc.feed(p) for p in pieces] + [enc.finish()]
    return out


def test_streamed_wav_has_unknown_sizes_and_the_whole_files_samples():
    a = shaped_noise(50_000)
    parts = stream_encoded("wav", cut(a))
    data = b"".join(parts)
    whole = encode(a, SR)
    header = bytearray(whole[:44])
    header[4:8] = header[40:44] = b"\xff\xff\xff\xff"
    assert data[:44] == bytes(header) == streaming_wav_header(SR)  # libsndfile's header, sizes unknown
    assert data[44:] == wav_data(whole)  # exactly the sample data of the WAV of the whole
    assert parts[0][:4] == b"RIFF" and len(parts[0]) == 44 + 2  # the header leaves with the first piece
    back, sr = sf.read(io.BytesIO(data), dtype="float32")  # readers take 0xFFFFFFFF as "to the end"
    ref, _ = sf.read(io.BytesIO(whole), dtype="float32")
    assert sr == SR and np.array_equal(back, ref)


def test_streamed_raw_is_the_raw_file():
    a = shaped_noise(50_000)
    assert b"".join(stream_encoded("raw", cut(a))) == encode(a, SR, "RAW", "PCM_16") == pcm16(a)


@pytest.mark.parametrize("n", [1, 575, 577, 24_000, 61_111])
def test_streamed_mp3_is_the_file_without_its_info_frame(n):
    a = shaped_noise(n, seed=n)
    data = b"".join(stream_encoded("mp3", cut(a)))
    whole = encode(a, SR, "MP3", "MPEG_LAYER_III")
    info = mp3_frame_length(whole[:4])
    assert info == 192  # 64 kbit/s at 24 kHz
    assert data == whole[info:]
    back, sr = sf.read(io.BytesIO(data), dtype="float32")
    ref, _ = sf.read(io.BytesIO(whole), dtype="float32")
    assert sr == SR and len(ref) == n
    # without the info frame nothing tells the decoder the encoder's delay and padding: it adds
    # the delay (one frame) and the padding to whole frames plus one (measured: 2 to 3 frames in all)
    assert 2 * MP3_FRAME <= len(back) - n < 3 * MP3_FRAME
    delay = MP3_FRAME + 529  # encoder delay + the decoder's own
    np.testing.assert_allclose(back[delay : delay + n], ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["ogg", "opus"])
def test_streamed_ogg_decodes_to_the_whole_files_samples(name):
    a = shaped_noise(61_111)
    fmt = AUDIO_FORMATS[name]
    parts = stream_encoded(name, cut(a))
    back, sr = sf.read(io.BytesIO(b"".join(parts)), dtype="float32")
    ref, _ = sf.read(io.BytesIO(encode(a, SR, fmt.sf_format, fmt.subtype)), dtype="float32")
    assert sr == SR and len(back) == len(a) and np.array_equal(back, ref)  # the stream serial differs, not the audio
    before_end = sum(map(len, parts[:-1]))
    assert before_end > (before_end + len(parts[-1])) / 2  # most of it leaves before the end


def test_flac_does_not_stream():
    with pytest.raises(InvalidRequest, match="format flac cannot be streamed: use one of wav, ogg, opus, mp3, raw"):
        StreamEncoder("flac", SR)


class Trickle:
    """A binary stream that takes at most 7 bytes a write (raw files may write partially)."""

    def __init__(self):
        self.data = bytearray()
        self.calls = 0

    def write(self, b):
        self.calls += 1
        self.data += bytes(b[:7])
        return min(7, len(b))


def test_write_all_loops_over_partial_writes():
    out = Trickle()
    write_all(out, bytes(range(256)) * 4)
    assert bytes(out.data) == bytes(range(256)) * 4 and out.calls == 147


def test_stream_writer_through_a_nonblocking_pipe():
    """Every byte arrives through a pipe whose writes are partial or refused (non-blocking, small
    reads on the other end): os.write's partial writes are looped over."""
    import threading

    r, w = os.pipe()
    os.set_blocking(w, False)
    got = bytearray()

    def reader():
        while chunk := os.read(r, 1000):
            got.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()
    a = shaped_noise(200_000)
    with StreamWriter(w, "wav", SR) as writer:
        for piece in cut(a):
            writer.write(piece)
    os.close(w)
    t.join()
    os.close(r)
    assert bytes(got) == streaming_wav_header(SR) + pcm16(a)
    assert writer.bytes_written == len(got)


def test_a_closed_reader_is_stream_closed():
    r, w = os.pipe()
    os.close(r)
    writer = StreamWriter(w, "raw", SR)
    with pytest.raises(StreamClosed) as e:
        writer.write(shaped_noise(100))
    assert isinstance(e.value, BrokenPipeError)  # what the CLI already maps
    os.close(w)
    with pytest.raises(StreamClosed):
        write_all(io.BufferedWriter(BrokenRaw()), b"x" * 10)


class BrokenRaw(io.RawIOBase):
    def writable(self):
        return True

    def write(self, b):
        raise BrokenPipeError(32, "Broken pipe")
