"""The table of output formats (`AUDIO_FORMATS`, one for `say`, `batch`, `book` and the server),
all 24 kHz mono: each row its names and extensions, its encoder object (media/encoders.py: what
writes it, whole and piece by piece, and whether it can be written here), the rates it can carry,
whether it streams, its MIME type and the name the server's `response_format` gives it. Every
check (a format from `-o` or its name, a rate, what can be written here), the server's list of
formats, the help texts and the docs' table (`formats_table`, tests/test_formats.py) are read
from it."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.errors import InvalidRequest
from .encoders import G711, Aac, Encoder, Sndfile, Wav
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

# The most samples a WAV holds (mono 16-bit): its RIFF size field is 32 bits (36 header bytes +
# 2 bytes a sample), about 24.8 h at 24 kHz.
WAV_MAX_SAMPLES = (0xFFFFFFFF - 36) // 2

# OpenAI's `response_format` values, in its order: the server lists them first, then its others
OPENAI_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")


@dataclass(frozen=True)
class AudioFormat:
    """One output format: a row of the table."""

    name: str  # what --format and the server's response_format say
    extensions: tuple[str, ...]  # file name endings (lower case), the usual one first
    encoder: Encoder  # what writes it (media/encoders.py)
    encoding: str  # what the bytes are, in words (the docs' table)
    lossy: bool  # decoded audio differs from the samples written (beyond 16-bit rounding)
    streams: bool  # can be written piece by piece to a non-seekable stream
    mime: str  # Content-Type of the bytes
    rates: tuple[int, ...] | None = None  # the sample rates (Hz) it can carry (None: any); check_rate
    max_samples: int | None = None  # the most samples a file holds, where its header sets a limit; check_fits
    served: str | None = None  # the server's response_format name for it (None: not served)

    @property
    def extension(self) -> str:
        return self.extensions[0]

    @property
    def sf_format(self) -> str:
        """soundfile major format (the pair an OutputTarget holds)."""
        return self.encoder.sf_format

    @property
    def subtype(self) -> str:
        """soundfile subtype."""
        return self.encoder.subtype

    def sf_options(self) -> dict[str, str | float]:
        """Keyword arguments for soundfile.SoundFile when writing this format."""
        return self.encoder.sf_options()


_G711 = "headerless 8-bit codes (telephony: `--sample-rate 8000`)"

AUDIO_FORMATS: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat(
            "wav",
            (".wav",),
            Wav("WAV", "PCM_16", marked_in="LIST/INFO"),
            "16-bit PCM",
            lossy=False,
            streams=True,
            mime="audio/wav",
            max_samples=WAV_MAX_SAMPLES,
            served="wav",
        ),
        AudioFormat(
            "flac",
            (".flac",),
            Sndfile("FLAC", "PCM_16", marked_in="Vorbis comments", wav_samples=True),
            "16-bit FLAC",
            lossy=False,
            streams=False,
            mime="audio/flac",
            served="flac",
        ),
        AudioFormat(
            "ogg",
            (".ogg",),
            Sndfile("OGG", "VORBIS", marked_in="Vorbis comments", block=4096),
            "Ogg Vorbis",
            lossy=True,
            streams=True,
            mime="audio/ogg",
            served="ogg",
        ),
        AudioFormat(
            "opus",
            (".opus",),
            Sndfile("OGG", "OPUS", marked_in="Vorbis comments"),
            "Ogg Opus",
            lossy=True,
            streams=True,
            mime="audio/ogg; codecs=opus",
            rates=OPUS_RATES,
            served="opus",
        ),
        AudioFormat(
            "mp3",
            (".mp3",),
            Sndfile(
                "MP3",
                "MPEG_LAYER_III",
                marked_in="ID3v2 (LAME's)",
                compression_level=_MP3_64K,
                bitrate_mode="CONSTANT",
                info_frame=True,
            ),
            "MPEG-2 layer III, 64 kbit/s",
            lossy=True,
            streams=True,
            mime="audio/mpeg",
            rates=MP3_RATES,
            served="mp3",
        ),
        AudioFormat(
            "raw",
            (".raw", ".pcm"),
            Sndfile("RAW", "PCM_16"),  # no container: no mark
            "headerless s16le: exactly the WAV's sample data",
            lossy=False,
            streams=True,
            mime="audio/pcm",
            served="pcm",
        ),
        AudioFormat(
            "aac",
            (".aac",),
            Aac("ADTS", "AAC", marked_in="ID3v2", muxer="adts", id3=True),
            "AAC in ADTS, 64 kbit/s",
            lossy=True,
            streams=False,
            mime="audio/aac",
            rates=AAC_RATES,
            served="aac",
        ),
        AudioFormat(
            "m4a",
            (".m4a",),
            Aac("MP4", "AAC", marked_in="ilst", muxer="ipod"),  # ipod: an iTunes-style .m4a, not a video .mp4
            "AAC in MP4, 64 kbit/s",
            lossy=True,
            streams=False,
            mime="audio/mp4",
            rates=AAC_RATES,
        ),
        AudioFormat(
            "mulaw",
            (".ulaw", ".mulaw"),
            G711("RAW", "ULAW"),
            "G.711 mu-law, " + _G711,
            lossy=True,
            streams=True,
            mime="audio/basic",
            served="mulaw",
        ),
        AudioFormat(
            "alaw",
            (".alaw",),
            G711("RAW", "ALAW"),
            "G.711 A-law, " + _G711,
            lossy=True,
            streams=True,
            mime="audio/x-alaw-basic",
            served="alaw",
        ),
    )
}
BY_EXTENSION: dict[str, AudioFormat] = {ext: f for f in AUDIO_FORMATS.values() for ext in f.extensions}

# extension -> (soundfile format, subtype): the older view of the table (batch.py builds targets from it)
FORMATS: dict[str, tuple[str, str]] = {ext: (f.sf_format, f.subtype) for ext, f in BY_EXTENSION.items()}

# format name -> the most samples a file of it holds, where its header sets a limit
MAX_SAMPLES = {f.name: f.max_samples for f in AUDIO_FORMATS.values() if f.max_samples is not None}


def served_formats() -> dict[str, AudioFormat]:
    """The server's `response_format` names and their formats: OpenAI's first, in its order, then
    the table's others in its order."""
    served = {f.served: f for f in AUDIO_FORMATS.values() if f.served is not None}
    order = [n for n in OPENAI_FORMATS if n in served] + [n for n in served if n not in OPENAI_FORMATS]
    return {n: served[n] for n in order}


def headerless_served() -> dict[str, AudioFormat]:
    """The served formats whose bytes are samples alone (no header): what a socket's pieces may be."""
    return {name: f for name, f in served_formats().items() if f.sf_format == "RAW"}


def writable_formats() -> list[str]:
    """Names of the table's formats that can be written here (libsndfile's, AAC with an encoder)."""
    return [f.name for f in AUDIO_FORMATS.values() if f.encoder.available()]


def check_available(fmt: AudioFormat) -> None:
    """The encoder's error when `fmt` cannot be written here: FormatUnavailable when the installed
    libsndfile cannot write it, naming what it can; EncoderMissing when it is AAC and there is no
    AAC encoder, naming what to install."""
    if not fmt.encoder.available():
        raise fmt.encoder.missing(fmt.name, writable_formats())


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


def check_fits(fmt: AudioFormat, samples: int, sample_rate: int) -> None:
    """InvalidRequest when `samples` do not fit in one file of `fmt` (before anything is written)."""
    limit = fmt.max_samples
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


def formats_table() -> str:
    """The table of formats as the docs show it (docs/say.md; tests/test_formats.py compares)."""
    head = "| format | extensions | encoding | lossy | streams on stdout / HTTP | AI mark (docs/marking.md) |"
    rows = [head, "| --- | --- | --- | --- | --- | --- |"]
    for f in AUDIO_FORMATS.values():
        streams = ("yes (unknown-size header)" if f.encoder.header_sizes else "yes") if f.streams else "no"
        exts = ", ".join(f"`{e}`" for e in f.extensions)
        mark = f.encoder.marked_in or "none (no container)"
        rows.append(f"| {f.name} | {exts} | {f.encoding} | {'yes' if f.lossy else 'no'} | {streams} | {mark} |")
    return "\n".join(rows) + "\n"
