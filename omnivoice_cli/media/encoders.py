"""What writes a format, behind one small interface (`Encoder`): whether it can be written here
(`available`, else the error that says what to install: `missing`), a whole file from float
blocks (`write`) and a stream's bytes piece by piece (`pieces`). The encoders: libsndfile
(`Sndfile`, as the installed library has it; `Wav`: its stream has our own header), AAC (`Aac`:
PyAV, the `aac` extra, else an `ffmpeg` on PATH) and G.711 (`G711`: ours, media/g711.py). Each
row of the table of formats (media/formats.py) holds one. Given a `Mark` (media/marks.py), each puts
it in its container's own metadata, in a file and at a stream's start; `marked_in` says where."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, ClassVar

from ..engine.errors import InvalidRequest, OmniVoiceError
from .aac import aac_bytes
from .pcm import RAW_PCM16, WRITE_BLOCK, blocks_of, mono, pcm16, write_piece
from .sndpieces import Pieces, SndfilePieces, streaming_wav_header

if TYPE_CHECKING:
    from .marks import Mark

AAC_INSTALL = "pip install 'omnivoice-cli[aac]' (PyAV), or put ffmpeg on PATH"


class FormatUnavailable(OmniVoiceError):
    """The installed libsndfile cannot write a format of the table (a runtime failure, exit 1)."""


class EncoderMissing(InvalidRequest):
    """A format of the table needs an encoder that is not installed (a usage error, exit 2)."""


@dataclass(frozen=True)
class Encoder:
    """What writes one format. `sf_format` / `subtype` name it (the pair an `OutputTarget` holds:
    libsndfile's names, also for the formats libsndfile does not write)."""

    sf_format: str
    subtype: str
    marked_in: str = ""  # where a file's AI mark goes, in words ("": no container to hold one)
    header_sizes: ClassVar[bool] = False  # a stream's header holds sizes a regular file can be given at the end

    def sf_options(self) -> dict[str, str | float]:
        """Keyword arguments for soundfile.SoundFile when writing this format."""
        return {"format": self.sf_format, "subtype": self.subtype}

    def available(self) -> bool:
        """Whether it can be written here."""
        raise NotImplementedError

    def missing(self, name: str, writable: list[str]) -> OmniVoiceError:
        """The error when it cannot (`writable`: the formats that can)."""
        raise NotImplementedError

    def write(self, f: BinaryIO, blocks: Iterable, sample_rate: int, mark: Mark | None = None) -> None:
        """A whole file of the mono float `blocks` (any sizes) into the binary file `f`, with `mark`."""
        raise NotImplementedError

    def pieces(self, sample_rate: int, mark: Mark | None = None) -> Pieces:
        """A stream of it, piece by piece (formats that stream), with `mark` at its start."""
        raise ValueError(f"{self.sf_format}/{self.subtype} is written whole, not piece by piece")


def sndfile_writes(f: Encoder) -> bool:
    import soundfile as sf

    return f.sf_format in sf.available_formats() and f.subtype in sf.available_subtypes(f.sf_format)


@dataclass(frozen=True)
class Sndfile(Encoder):
    """libsndfile (through soundfile) with these options, written in blocks of `block` samples
    where the encoding depends on how writes are split (Vorbis); `wav_samples`: the WAV's own
    16-bit samples (FLAC); `info_frame`: a stream leaves out the info frame's placeholder (mp3);
    the AI mark goes in as libsndfile's strings where `marked_in` says it goes."""

    compression_level: float | None = None  # None: libsndfile's default
    bitrate_mode: str | None = None  # None: libsndfile's default
    block: int | None = None
    wav_samples: bool = False
    info_frame: bool = False

    def sf_options(self) -> dict[str, str | float]:
        opts = super().sf_options()
        if self.compression_level is not None:
            opts["compression_level"] = self.compression_level
        if self.bitrate_mode is not None:
            opts["bitrate_mode"] = self.bitrate_mode
        return opts

    def available(self) -> bool:
        return sndfile_writes(self)

    def missing(self, name: str, writable: list[str]) -> OmniVoiceError:
        import soundfile as sf

        return FormatUnavailable(
            f"the installed libsndfile ({sf.__libsndfile_version__}) cannot write {name} "
            f"({self.sf_format}/{self.subtype}); it writes {', '.join(writable)} "
            "(a newer soundfile wheel brings a libsndfile with mp3 and opus: pip install -U soundfile)"
        )

    def write(self, f: BinaryIO, blocks: Iterable, sample_rate: int, mark: Mark | None = None) -> None:
        import soundfile as sf

        with sf.SoundFile(f, "w", samplerate=int(sample_rate), channels=1, **self.sf_options()) as out:
            if mark is not None and self.marked_in:
                for key, value in mark.strings().items():
                    setattr(out, key, value)  # before the first write: into the header
            for block in blocks_of(blocks, self.block or WRITE_BLOCK):
                write_piece(out, block, self.wav_samples)

    def pieces(self, sample_rate: int, mark: Mark | None = None) -> Pieces:
        return SndfilePieces(
            self.sf_options(),
            sample_rate,
            block=self.block,
            info_frame=self.info_frame,
            wav_samples=self.wav_samples,
            strings=mark.strings() if mark is not None and self.marked_in else None,
        )


@dataclass(frozen=True)
class Wav(Sndfile):
    """WAV: a file by libsndfile (its header holds the real sizes); a stream is our own header
    with unknown sizes (0xFFFFFFFF) and then the raw sample data."""

    header_sizes: ClassVar[bool] = True

    def pieces(self, sample_rate: int, mark: Mark | None = None) -> Pieces:
        header = streaming_wav_header(sample_rate, mark.strings() if mark is not None else None)
        return SndfilePieces(RAW_PCM16, sample_rate, prefix=header)


def _pyav_has_aac() -> bool:
    try:
        import av
        from av.codec import Codec

        Codec("aac", "w")
        return av is not None
    except Exception:  # not installed, or built without the encoder
        return False


def aac_encoder() -> str | None:
    """What encodes AAC here: "pyav", "ffmpeg" (an ffmpeg command on PATH), or None."""
    import shutil

    if _pyav_has_aac():
        return "pyav"
    return "ffmpeg" if shutil.which("ffmpeg") else None


@dataclass(frozen=True)
class Aac(Encoder):
    """AAC-LC at 64 kbit/s in FFmpeg's `muxer` (adts; ipod: an .m4a MP4), encoded whole."""

    muxer: str = "adts"
    id3: bool = False  # the mark in an ID3v2 tag before the frames (ADTS has no metadata of its own)

    def available(self) -> bool:
        return aac_encoder() is not None

    def missing(self, name: str, writable: list[str]) -> OmniVoiceError:
        return EncoderMissing(f"format {name} (AAC) needs an AAC encoder and none is installed: {AAC_INSTALL}")

    def write(self, f: BinaryIO, blocks: Iterable, sample_rate: int, mark: Mark | None = None) -> None:
        import numpy as np

        via = aac_encoder()
        if via is None:  # checked before (formats.check_available): gone since
            raise EncoderMissing(f"AAC needs an AAC encoder and none is installed: {AAC_INSTALL}")
        parts = [np.asarray(b, dtype=np.float32) for b in blocks]
        audio = parts[0] if len(parts) == 1 else np.concatenate(parts or [np.zeros(0, np.float32)])
        tags = mark.ffmpeg() if mark is not None else {}
        f.write(aac_bytes(audio, sample_rate, self.muxer, pyav=via == "pyav", tags=tags, id3=self.id3))


def _g711(audio, subtype: str) -> bytes:
    from .g711 import encode_pcm16  # numpy at import: not for --help

    return encode_pcm16(pcm16(audio), subtype)


@dataclass(frozen=True)
class G711(Encoder):
    """G.711 (`subtype` ULAW or ALAW): raw 8-bit codes, each sample coded on its own (ours)."""

    def available(self) -> bool:
        return True

    def missing(self, name: str, writable: list[str]) -> OmniVoiceError:
        raise AssertionError("G.711 is always available")

    def write(self, f: BinaryIO, blocks: Iterable, sample_rate: int, mark: Mark | None = None) -> None:
        for block in blocks_of(blocks, WRITE_BLOCK):  # no container: no mark
            f.write(_g711(block, self.subtype))

    def pieces(self, sample_rate: int, mark: Mark | None = None) -> Pieces:
        return G711Pieces(self.subtype)


class G711Pieces:
    """A G.711 stream: each piece coded as it comes (nothing held back)."""

    def __init__(self, subtype: str) -> None:
        self.subtype = subtype

    def feed(self, audio) -> bytes:
        return _g711(mono(audio), self.subtype)

    def finish(self) -> bytes:
        return b""
