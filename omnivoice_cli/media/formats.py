"""The table of output formats (`AUDIO_FORMATS`, one for `say`, `batch` and the server), all
24 kHz mono, and looking a format up by name, extension or libsndfile pair; see `media.output`
for the table as a whole. What can be written here: `media.encoders`."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.errors import InvalidRequest, OmniVoiceError
from .rates import SAMPLE_RATES

STDOUT = "-"

# MP3 at 24 kHz is MPEG-2 layer III; libsndfile maps compression_level c in [0, 1] to the bit rate
# 160 - c * 152 kbit/s (truncated). 95.5 / 152 gives 64 kbit/s: clear speech, 8 kB a second.
_MP3_64K = (160 - 64.5) / 152

# The sample rates a codec can carry: Opus codes 8, 12, 16, 24 and 48 kHz only; MPEG-1/2/2.5
# layer III the nine of its three versions; AAC (ADTS and MP4) its sampling-frequency table.
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
MP3_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)
AAC_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000)


@dataclass(frozen=True)
class AudioFormat:
    """One output format."""

    name: str  # what --format and the server's response_format say
    extensions: tuple[str, ...]  # file name endings (lower case), the usual one first
    sf_format: str  # soundfile major format
    subtype: str  # soundfile subtype
    lossy: bool  # decoded audio differs from the samples written (beyond 16-bit rounding)
    streams: bool  # can be written piece by piece to a non-seekable stream
    mime: str  # Content-Type of the bytes
    compression_level: float | None = None  # soundfile compression_level (None: libsndfile's default)
    bitrate_mode: str | None = None  # soundfile bitrate_mode (None: libsndfile's default)
    block: int | None = None  # samples per write when the encoding depends on how writes are split
    encoder: str = "sndfile"  # what writes it: libsndfile, "aac" (PyAV or ffmpeg, see aac_encoder), "g711" (ours)
    rates: tuple[int, ...] | None = None  # the sample rates (Hz) it can carry (None: any); check_rate

    @property
    def extension(self) -> str:
        return self.extensions[0]

    def sf_options(self) -> dict[str, str | float]:
        """Keyword arguments for soundfile.SoundFile when writing this format."""
        opts: dict[str, str | float] = {"format": self.sf_format, "subtype": self.subtype}
        if self.compression_level is not None:
            opts["compression_level"] = self.compression_level
        if self.bitrate_mode is not None:
            opts["bitrate_mode"] = self.bitrate_mode
        return opts


AUDIO_FORMATS: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat("wav", (".wav",), "WAV", "PCM_16", lossy=False, streams=True, mime="audio/wav"),
        AudioFormat("flac", (".flac",), "FLAC", "PCM_16", lossy=False, streams=False, mime="audio/flac"),
        AudioFormat("ogg", (".ogg",), "OGG", "VORBIS", lossy=True, streams=True, mime="audio/ogg", block=4096),
        AudioFormat(
            "opus",
            (".opus",),
            "OGG",
            "OPUS",
            lossy=True,
            streams=True,
            mime="audio/ogg; codecs=opus",
            rates=OPUS_RATES,
        ),
        AudioFormat(
            "mp3",
            (".mp3",),
            "MP3",
            "MPEG_LAYER_III",
            lossy=True,
            streams=True,
            mime="audio/mpeg",
            compression_level=_MP3_64K,
            bitrate_mode="CONSTANT",
            rates=MP3_RATES,
        ),
        AudioFormat("raw", (".raw", ".pcm"), "RAW", "PCM_16", lossy=False, streams=True, mime="audio/pcm"),
        AudioFormat(
            "aac", (".aac",), "ADTS", "AAC", lossy=True, streams=False, mime="audio/aac", encoder="aac", rates=AAC_RATES
        ),
        AudioFormat(
            "m4a", (".m4a",), "MP4", "AAC", lossy=True, streams=False, mime="audio/mp4", encoder="aac", rates=AAC_RATES
        ),
        # G.711 telephony audio, raw 8-bit codes (media/g711.py; usually with sample_rate 8000)
        AudioFormat(
            "mulaw", (".ulaw", ".mulaw"), "RAW", "ULAW", lossy=True, streams=True, mime="audio/basic", encoder="g711"
        ),
        AudioFormat(
            "alaw", (".alaw",), "RAW", "ALAW", lossy=True, streams=True, mime="audio/x-alaw-basic", encoder="g711"
        ),
    )
}
BY_EXTENSION: dict[str, AudioFormat] = {ext: f for f in AUDIO_FORMATS.values() for ext in f.extensions}

# extension -> (soundfile format, subtype): the older view of the table (batch.py builds targets from it)
FORMATS: dict[str, tuple[str, str]] = {ext: (f.sf_format, f.subtype) for ext, f in BY_EXTENSION.items()}


class FormatUnavailable(OmniVoiceError):
    """The installed libsndfile cannot write a format of the table (a runtime failure, exit 1)."""


class EncoderMissing(InvalidRequest):
    """A format of the table needs an encoder that is not installed (a usage error, exit 2)."""


def usual_extensions() -> str:
    """The usual extension of every format, for help and docs: '.wav .flac ... .alaw'."""
    return " ".join(f.extension for f in AUDIO_FORMATS.values())


def streaming_formats() -> str:
    """The formats written piece by piece, in words: 'wav, ogg, ... or alaw'."""
    names = [f.name for f in AUDIO_FORMATS.values() if f.streams]
    return ", ".join(names[:-1]) + " or " + names[-1]


def extension_list() -> str:
    exts = list(BY_EXTENSION)
    return ", ".join(exts[:-1]) + " or " + exts[-1]


def format_named(name: str) -> AudioFormat:
    """The format called `name` ('mp3', 'wav', ...; case and a leading dot ignored), else
    InvalidRequest listing the names."""
    key = (name or "").strip().lower().lstrip(".")
    fmt = AUDIO_FORMATS.get(key) or BY_EXTENSION.get("." + key)  # 'pcm' names raw
    if fmt is None:
        raise InvalidRequest(f"format {name!r} is not allowed: use {', '.join(AUDIO_FORMATS)}")
    return fmt


def format_of(format: str, subtype: str) -> AudioFormat:
    """The table's format for a (soundfile format, subtype) pair."""
    for f in AUDIO_FORMATS.values():
        if (f.sf_format, f.subtype) == (format.upper(), subtype.upper()):
            return f
    raise ValueError(f"no output format writes {format}/{subtype}")


# The most samples a file of a format can hold (mono 16-bit), where its header sets a limit: a
# WAV's RIFF size field is 32 bits (36 header bytes + 2 bytes a sample), about 24.8 h at 24 kHz.
MAX_SAMPLES = {"wav": (0xFFFFFFFF - 36) // 2}


def check_fits(fmt: AudioFormat, samples: int, sample_rate: int) -> None:
    """InvalidRequest when `samples` do not fit in one file of `fmt` (before anything is written)."""
    limit = MAX_SAMPLES.get(fmt.name)
    if limit is not None and samples > limit:
        raise InvalidRequest(
            f"the audio is {samples / sample_rate / 3600:.1f} h long: a {fmt.name} file holds at most "
            f"{limit / sample_rate / 3600:.1f} h (its header's 4 GiB limit); use .flac or .ogg"
        )


def check_rate(fmt: AudioFormat, sample_rate: int | None) -> None:
    """InvalidRequest (setting `sample_rate`) when `fmt` cannot carry audio at `sample_rate` (None:
    the model's 24 kHz, which every format carries). The one check of a format against a rate:
    every way in (say, batch, dialogue, the server's speech, script and socket) calls it before
    any work, and the writers call it again, so a pair that cannot meet never reaches the codec."""
    if sample_rate is None or fmt.rates is None or int(sample_rate) in fmt.rates:
        return
    usable = [r for r in SAMPLE_RATES if r in fmt.rates]
    rates = ", ".join(map(str, usable[:-1])) + " or " + str(usable[-1])
    others = [f.name for f in AUDIO_FORMATS.values() if f.rates is None or int(sample_rate) in f.rates][:4]
    raise InvalidRequest(
        f"format {fmt.name} cannot carry a sample rate of {sample_rate} Hz: use {rates} Hz with {fmt.name}, "
        f"or another format ({', '.join(others)})",
        "sample_rate",
    )
