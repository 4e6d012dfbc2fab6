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

from ..engine.errors import InvalidRequest
from .encoders import check_available
from .formats import AUDIO_FORMATS, AudioFormat, check_rate, format_named
from .pcm import WRITE_BLOCK, mono, pcm16, write_piece
from .pipes import write_all

UNKNOWN_SIZE = 0xFFFFFFFF  # RIFF and data sizes of a WAV whose length is not known yet


def streaming_wav_header(sample_rate: int) -> bytes:
    """The 44-byte header of a 16-bit mono PCM WAV of unknown length (sizes 0xFFFFFFFF)."""
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)  # PCM, mono, rate, bytes/s, align, bits
    return (
        b"RIFF"
        + struct.pack("<I", UNKNOWN_SIZE)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + (b"data" + struct.pack("<I", UNKNOWN_SIZE))
    )


class _ForwardSink:
    """A file for libsndfile's virtual I/O that only goes forward: bytes are collected until taken,
    and a seek back (to rewrite a header once the length is known) fails, so libsndfile skips it."""

    def __init__(self) -> None:
        self.pending = bytearray()
        self.size = 0  # bytes written in all

    def write(self, data) -> int:
        self.pending += bytes(data)
        self.size += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self.size + offset  # SEEK_CUR and SEEK_END are both the end
        return self.size if target == self.size else -1

    def tell(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        return b""

    def take(self) -> bytes:
        out, self.pending = bytes(self.pending), bytearray()
        return out


# MPEG audio frame header: bit rates (kbit/s) of layer III and sample rates, by MPEG version
_MP3_KBPS = {
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MP3_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}  # version bits -> Hz


def mp3_frame_length(header: bytes) -> int | None:
    """Bytes of the MPEG layer III frame starting with these 4 header bytes (None if not one)."""
    if len(header) < 4 or header[0] != 0xFF or header[1] & 0xE0 != 0xE0 or (header[1] >> 1) & 3 != 1:
        return None
    version = (header[1] >> 3) & 3  # 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
    rate_i, kbps_i, padding = (header[2] >> 2) & 3, header[2] >> 4, (header[2] >> 1) & 1
    if version == 1 or rate_i == 3 or kbps_i in (0, 15):
        return None
    kbps = _MP3_KBPS[1 if version == 3 else 2][kbps_i]
    per_frame = 144 if version == 3 else 72  # samples per frame / 8
    return per_frame * kbps * 1000 // _MP3_RATES[version][rate_i] + padding


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
    """

    def __init__(self, fmt: AudioFormat | str, sample_rate: int) -> None:
        import soundfile as sf

        self.format = fmt if isinstance(fmt, AudioFormat) else format_named(fmt)
        if not self.format.streams:
            streamable = ", ".join(f.name for f in AUDIO_FORMATS.values() if f.streams)
            raise InvalidRequest(f"format {self.format.name} cannot be streamed: use one of {streamable}")
        check_rate(self.format, sample_rate)
        check_available(self.format)
        self.sample_rate = int(sample_rate)
        self._sink = _ForwardSink()
        self._head = b""  # mp3: bytes held until the first frame is seen whole
        self._head_done = self.format.name != "mp3"
        self.samples = 0  # samples fed so far
        self.closed = False
        self._carry = _empty()  # samples short of a whole block (formats with a block)
        self._sf = None
        if self.format.encoder == "g711":  # each sample coded on its own: nothing to hold back
            self._prefix = b""
            return
        if self.format.name == "wav":  # our own header, then the raw sample data
            self._prefix = streaming_wav_header(self.sample_rate)
            opts = AUDIO_FORMATS["raw"].sf_options()
        else:
            self._prefix = b""
            opts = self.format.sf_options()
        self._sf = sf.SoundFile(self._sink, "w", samplerate=self.sample_rate, channels=1, **opts)

    def feed(self, audio) -> bytes:
        """Encode one piece (mono float, clipped to [-1, 1]); return the bytes ready so far."""
        if self.closed:
            raise ValueError("this stream is finished")
        import numpy as np

        a = mono(audio)
        self.samples += len(a)
        if self._sf is None:  # g711
            from .g711 import encode_pcm16

            return encode_pcm16(pcm16(a), self.format.subtype)
        step = self.format.block or WRITE_BLOCK
        if self.format.block:  # whole blocks only, as a file is written; the rest waits
            a = np.concatenate([self._carry, np.asarray(a, dtype=np.float32)])
            self._carry, a = a[len(a) - len(a) % step :], a[: len(a) - len(a) % step]
        for i in range(0, len(a), step):
            write_piece(self._sf, self.format, a[i : i + step])
        return self._take()

    def finish(self) -> bytes:
        """Flush the encoder; return the last bytes. The stream is then complete."""
        if self.closed:
            return b""
        if self._sf is None:  # g711
            self.closed = True
            return b""
        if len(self._carry):
            write_piece(self._sf, self.format, self._carry)
        self._sf.close()
        self.closed = True
        out = self._take()
        if not self._head_done:  # shorter than one frame: nothing to leave out
            out, self._head, self._head_done = out + self._head, b"", True
        return out

    def _take(self) -> bytes:
        out = self._prefix + self._sink.take()
        self._prefix = b""
        if self._head_done:
            return out
        self._head += out
        if len(self._head) < 4:
            return b""
        n = mp3_frame_length(self._head[:4])
        if n is None:  # not a frame (never the case with libsndfile's mp3): nothing to leave out
            return self._release_head()
        if len(self._head) < n:
            return b""
        if not any(self._head[4:n]):  # the info frame's placeholder: header then zeros
            self._head = self._head[n:]
        return self._release_head()

    def _release_head(self) -> bytes:
        out, self._head, self._head_done = self._head, b"", True
        return out


def _empty():
    import numpy as np

    return np.zeros(0, dtype=np.float32)


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


def _write_wav_sizes(out, start: int, size: int) -> None:
    """The RIFF and data sizes of the WAV of `size` bytes written at `start` (left unknown when
    they do not fit in 32 bits, or the file cannot be written there)."""
    data = size - len(streaming_wav_header(1))
    if data < 0 or 36 + data > UNKNOWN_SIZE:
        return
    fd = _fd(out)
    if fd is None:
        return
    try:
        if not isinstance(out, int):
            out.flush()
        os.pwrite(fd, struct.pack("<I", 36 + data), start + 4)
        os.pwrite(fd, struct.pack("<I", data), start + 40)
    except OSError:
        pass


class StreamWriter:
    """Writes float32 pieces as one stream of `fmt` to `out` (a file descriptor or a binary file),
    each piece's bytes as soon as it is fed.

        with StreamWriter(sys.stdout.buffer, "wav", SAMPLE_RATE) as w:
            for piece in pieces:
                w.write(piece)
    """

    def __init__(self, out, fmt: AudioFormat | str, sample_rate: int) -> None:
        self.out = out
        self.encoder = StreamEncoder(fmt, sample_rate)
        self.bytes_written = 0
        self.start = _rewritable_at(out) if self.encoder.format.name == "wav" else None

    def write(self, audio) -> None:
        self._send(self.encoder.feed(audio))

    def close(self) -> None:
        """Flush the encoder's last bytes; a WAV written to a regular file (`say --stream -o - >
        out.wav`) then gets its real sizes in its header, in place of the unknown-size fields."""
        self._send(self.encoder.finish())
        if self.start is not None:
            _write_wav_sizes(self.out, self.start, self.bytes_written)

    def _send(self, data: bytes) -> None:
        if data:
            write_all(self.out, data)
            self.bytes_written += len(data)

    def __enter__(self) -> "StreamWriter":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
