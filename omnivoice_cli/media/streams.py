"""Streams, piece by piece: a stream (a pipe, an HTTP body) cannot be seeked back into, so
`StreamEncoder` turns float32 pieces into the bytes of one stream as they come: WAV with
0xFFFFFFFF in its RIFF and data size fields (as streaming servers do), raw PCM, and the lossy
formats through libsndfile with any rewrite of already-sent bytes dropped (mp3: the info frame).
`StreamWriter` writes them to a file descriptor or a binary file, every byte (`pipes.write_all`);
a WAV whose stream went to a regular file after all (`say --stream -o - > out.wav`) gets its real
sizes written into its header at the end."""

from __future__ import annotations

import io
import os
import struct
from typing import TYPE_CHECKING

from ..engine.errors import InvalidRequest
from .formats import AUDIO_FORMATS, AudioFormat, check_available, check_rate, format_named
from .pcm import mono
from .pipes import write_all
from .sndpieces import UNKNOWN_SIZE

if TYPE_CHECKING:
    from .marks import Mark


class StreamEncoder:
    """Float32 pieces in, the bytes of one audio stream out, in order, never seeking back.

        enc = StreamEncoder("wav", SAMPLE_RATE)
        for piece in pieces:
            send(enc.feed(piece))     # may be b"" while a lossy encoder fills a frame
        send(enc.finish())

    The bytes joined decode to the samples of the whole: WAV and raw exactly (the same s16le
    sample data as a WAV file of the whole), ogg / opus / mp3 as libsndfile encodes the whole
    (Vorbis's encoding depends on how the samples are split into writes, so files and streams
    both write it in blocks of 4096 samples; a stream holds back the last partial block).
    WAV has 0xFFFFFFFF as its RIFF and data sizes. An mp3 file starts with an info frame that
    libsndfile fills in at the end (length, encoder delay and padding, for exact decoding); a
    stream cannot go back to it, so its placeholder (a frame of zeros) is left out, and decoders
    add the encoder's delay and padding (about 0.05 s at the start, under a frame at the end).
    With a `mark` (media/marks.py), the stream's first bytes carry it where the format has a
    header to hold it (WAV's LIST/INFO, Ogg's comments, MP3's ID3v2); raw, mu-law, A-law cannot.
    """

    def __init__(self, fmt: AudioFormat | str, sample_rate: int, mark: Mark | None = None) -> None:
        self.format = fmt if isinstance(fmt, AudioFormat) else format_named(fmt)
        if not self.format.streams:
            streamable = ", ".join(f.name for f in AUDIO_FORMATS.values() if f.streams)
            raise InvalidRequest(f"format {self.format.name} cannot be streamed: use one of {streamable}")
        check_rate(self.format, sample_rate)
        check_available(self.format)
        self.sample_rate = int(sample_rate)
        self._pieces = self.format.encoder.pieces(self.sample_rate, mark)
        self.header_size = int(getattr(self._pieces, "header_size", 0))  # a WAV's header: its sizes end it
        self.samples = 0  # samples fed so far
        self.closed = False

    def feed(self, audio) -> bytes:
        """Encode one piece (mono float, clipped to [-1, 1]); return the bytes ready so far."""
        if self.closed:
            raise ValueError("this stream is finished")
        a = mono(audio)
        self.samples += len(a)
        return self._pieces.feed(a)

    def finish(self) -> bytes:
        """Flush the encoder; return the last bytes. The stream is then complete."""
        if self.closed:
            return b""
        out = self._pieces.finish()
        self.closed = True
        return out


def _fd(out) -> int | None:
    try:
        return out if isinstance(out, int) else int(out.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _rewritable_at(out) -> int | None:
    """Where the stream starts in `out` when `out` is a regular file that can be written at a
    place (not opened to append), else None (a pipe, a socket, a terminal, a buffer)."""
    import stat

    try:
        import fcntl
    except ImportError:  # Windows: left as a stream
        return None
    fd = _fd(out)
    if fd is None:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:
            return None
        if not isinstance(out, int):
            out.flush()
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None


def _write_wav_sizes(out, start: int, size: int, header: int) -> None:
    """The RIFF and data sizes of the WAV of `size` bytes written at `start`, its header `header`
    bytes long, the data size its last field (left unknown when they do not fit in 32 bits, or the
    file cannot be written there)."""
    data = size - header
    if data < 0 or size - 8 > UNKNOWN_SIZE:
        return
    fd = _fd(out)
    if fd is None:
        return
    try:
        if not isinstance(out, int):
            out.flush()
        os.pwrite(fd, struct.pack("<I", size - 8), start + 4)
        os.pwrite(fd, struct.pack("<I", data), start + header - 4)
    except OSError:
        pass


class StreamWriter:
    """Writes float32 pieces as one stream of `fmt` to `out` (a file descriptor or a binary file),
    each piece's bytes as soon as it is fed.

        with StreamWriter(sys.stdout.buffer, "wav", SAMPLE_RATE) as w:
            for piece in pieces:
                w.write(piece)
    """

    def __init__(self, out, fmt: AudioFormat | str, sample_rate: int, mark: Mark | None = None) -> None:
        self.out = out
        self.encoder = StreamEncoder(fmt, sample_rate, mark)
        self.bytes_written = 0
        self.start = _rewritable_at(out) if self.encoder.format.encoder.header_sizes else None

    def write(self, audio) -> None:
        self._send(self.encoder.feed(audio))

    def close(self) -> None:
        """Flush the encoder's last bytes; a WAV written to a regular file (`say --stream -o - >
        out.wav`) then gets its real sizes in its header, in place of the unknown-size fields."""
        self._send(self.encoder.finish())
        if self.start is not None:
            _write_wav_sizes(self.out, self.start, self.bytes_written, self.encoder.header_size)

    def stop(self) -> None:
        """The stream ends early (Ctrl-C, SIGTERM): a WAV in a regular file gets the sizes of the
        whole pieces written so far (the encoder's held tail is dropped), not the unknown sizes
        that would claim 24 hours of audio."""
        if self.start is not None:
            _write_wav_sizes(self.out, self.start, self.bytes_written, self.encoder.header_size)

    def _send(self, data: bytes) -> None:
        if data:
            write_all(self.out, data)
            self.bytes_written += len(data)

    def __enter__(self) -> "StreamWriter":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.stop()
