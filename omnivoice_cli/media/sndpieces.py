"""libsndfile piece by piece: a format's bytes as the pieces come, never seeking back. A stream
(a pipe, an HTTP body) cannot be seeked back into, so libsndfile writes into a sink that only goes
forward and any rewrite of already-sent bytes is dropped; WAV is our own header with 0xFFFFFFFF in
its RIFF and data size fields (as streaming servers do) before the raw sample data; an mp3
stream leaves out the info frame libsndfile would fill in at the end."""

from __future__ import annotations

import io
import struct
from typing import Protocol

from .pcm import WRITE_BLOCK, write_piece

UNKNOWN_SIZE = 0xFFFFFFFF  # RIFF and data sizes of a WAV whose length is not known yet


class Pieces(Protocol):
    """The bytes of one stream, piece by piece (an encoder's `pieces`)."""

    def feed(self, audio) -> bytes:
        """Encode one piece (mono float); return the bytes ready so far (b"" while a frame fills)."""
        ...

    def finish(self) -> bytes:
        """Flush; return the last bytes."""
        ...


def streaming_wav_header(sample_rate: int, strings: dict[str, str] | None = None) -> bytes:
    """The 44-byte header of a 16-bit mono PCM WAV of unknown length (sizes 0xFFFFFFFF); with
    `strings` (libsndfile's: comment, software, date), libsndfile's header holding them in a
    LIST/INFO chunk before the data, its sizes made unknown likewise."""
    if strings:
        return _header_with_strings(sample_rate, strings)
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


def _header_with_strings(sample_rate: int, strings: dict[str, str]) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=sample_rate, channels=1, format="WAV", subtype="PCM_16") as out:
        for key, value in strings.items():
            setattr(out, key, value)
    data = buf.getvalue()
    at = 12  # the chunks after RIFF....WAVE, up to and with the data chunk's header
    while at + 8 <= len(data) and data[at : at + 4] != b"data":
        at += 8 + (struct.unpack("<I", data[at + 4 : at + 8])[0] + 1) // 2 * 2
    if at + 8 > len(data):
        raise ValueError("libsndfile wrote a WAV without a data chunk")
    unknown = struct.pack("<I", UNKNOWN_SIZE)
    return data[:4] + unknown + data[8:at] + b"data" + unknown


class ForwardSink:
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


def id3v2_size(head: bytes) -> int | None:
    """Bytes of the ID3v2 tag `head` starts with (0: none; None: too few bytes to tell)."""
    if len(head) < 3 or head[:3] != b"ID3":
        return None if len(head) < 3 and b"ID3".startswith(head) else 0
    if len(head) < 10:
        return None
    size = (head[6] & 0x7F) << 21 | (head[7] & 0x7F) << 14 | (head[8] & 0x7F) << 7 | (head[9] & 0x7F)
    return 10 + size + (10 if head[5] & 0x10 else 0)  # header, frames, footer


class SndfilePieces:
    """libsndfile writing one stream into a ForwardSink: `prefix` first (a WAV's header), whole
    blocks of `block` samples where the encoding depends on how writes are split (Vorbis: the
    last partial block is held back until the end), and with `info_frame` the mp3's first frame
    left out when it is the placeholder libsndfile would rewrite at the end (a frame of zeros; after
    LAME's ID3v2 tag when there is one);
    `strings`: libsndfile's tags (Vorbis comments), set before the first write, so they lead."""

    def __init__(
        self,
        options: dict[str, str | float],
        sample_rate: int,
        *,
        block: int | None = None,
        prefix: bytes = b"",
        info_frame: bool = False,
        wav_samples: bool = False,
        strings: dict[str, str] | None = None,
    ) -> None:
        import numpy as np
        import soundfile as sf

        self._sink = ForwardSink()
        self._prefix = prefix
        self.header_size = len(prefix)  # bytes before the encoder's own (a WAV's header)
        self._block = block
        self._wav_samples = wav_samples
        self._head = b""  # mp3: bytes held until the first frame is seen whole
        self._head_done = not info_frame
        self._carry = np.zeros(0, dtype=np.float32)  # samples short of a whole block
        self._sf = sf.SoundFile(self._sink, "w", samplerate=sample_rate, channels=1, **options)
        for key, value in (strings or {}).items():
            setattr(self._sf, key, value)

    def feed(self, audio) -> bytes:
        import numpy as np

        a = audio
        step = self._block or WRITE_BLOCK
        if self._block:  # whole blocks only, as a file is written; the rest waits
            a = np.concatenate([self._carry, np.asarray(a, dtype=np.float32)])
            self._carry, a = a[len(a) - len(a) % step :], a[: len(a) - len(a) % step]
        for i in range(0, len(a), step):
            write_piece(self._sf, a[i : i + step], self._wav_samples)
        return self._take()

    def finish(self) -> bytes:
        if len(self._carry):
            write_piece(self._sf, self._carry, self._wav_samples)
        self._sf.close()
        out = self._take()
        if not self._head_done:  # shorter than one frame: nothing to leave out
            out, self._head, self._head_done = out + self._head, b"", True
        return out

    def _take(self) -> bytes:
        prefix, self._prefix = self._prefix, b""
        return prefix + self._after_head(self._sink.take())

    def _after_head(self, out: bytes) -> bytes:
        """The encoder's bytes, the mp3's info frame placeholder left out (held until it is seen)."""
        if self._head_done:
            return out
        self._head += out
        at = id3v2_size(self._head)  # LAME's ID3v2 tag (the AI mark) comes first: the frame after it
        if at is None or len(self._head) < at + 4:
            return b""
        n = mp3_frame_length(self._head[at : at + 4])
        if n is None:  # not a frame (never the case with libsndfile's mp3): nothing to leave out
            return self._release_head()
        if len(self._head) < at + n:
            return b""
        if not any(self._head[at + 4 : at + n]):  # the info frame's placeholder: header then zeros
            self._head = self._head[:at] + self._head[at + n :]
        return self._release_head()

    def _release_head(self) -> bytes:
        out, self._head, self._head_done = self._head, b"", True
        return out
