"""Writing audio: the table of formats, whole files (atomically), and streams piece by piece.

Formats (`AUDIO_FORMATS`, one table for `say`, `batch` and the server), all 24 kHz mono, through
soundfile / libsndfile but for AAC (PyAV, the `aac` extra, else an `ffmpeg` on PATH):

| name | extensions    | encoding                         | lossy | streams |
| ---- | ------------- | -------------------------------- | ----- | ------- |
| wav  | .wav          | 16-bit PCM                       | no    | yes (unknown-size header) |
| flac | .flac         | 16-bit FLAC                      | no    | no (its header is finished at the end) |
| ogg  | .ogg          | Ogg Vorbis                       | yes   | yes     |
| opus | .opus         | Ogg Opus                         | yes   | yes     |
| mp3  | .mp3          | MPEG-2 layer III, 64 kbit/s CBR  | yes   | yes (no info frame) |
| raw  | .raw, .pcm    | headerless s16le                 | no    | yes     |
| aac  | .aac          | AAC-LC in ADTS, 64 kbit/s        | yes   | no (encoded whole) |
| m4a  | .m4a          | AAC-LC in MP4 (iPod), 64 kbit/s  | yes   | no (the index is written at the end) |

Without an AAC encoder, asking for aac or m4a is a usage error (`EncoderMissing`) naming what to
install. ADTS has no length field: decoders give the encoder's 1024 priming samples first and pad
the end to a whole frame; MP4 records both, so players trim them.

A file is written to a temporary file in the same folder ('.NAME.XXXXXXXX.part', NAME cut so the
name stays within the file system's limit) and renamed over the target, so the target is never
left partial or empty: on any failure it is untouched (absent, or its old contents); a replaced
file keeps its mode. `check_output` runs before the model is loaded and creates (and removes)
that temporary file, so a bad path, a name too long or a read-only folder fails fast; a WAV
longer than its header can say (about 24.8 h, `MAX_SAMPLES`) is refused before a byte is written.

A stream (a pipe, an HTTP body) cannot be seeked back into, so `StreamEncoder` turns float32
pieces into the bytes of one stream as they come: WAV with 0xFFFFFFFF in its RIFF and data size
fields (as streaming servers do), raw PCM, and the lossy formats through libsndfile with any
rewrite of already-sent bytes dropped (mp3: the info frame, see `StreamEncoder`).
`StreamWriter` writes them to a file descriptor or a binary file, every byte, and turns a reader
that went away (EPIPE) into `StreamClosed`.
"""

from __future__ import annotations

import errno
import io
import os
import select
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from ..engine.config import SAMPLE_RATE
from ..engine.errors import InvalidRequest, OmniVoiceError

STDOUT = "-"

# MP3 at 24 kHz is MPEG-2 layer III; libsndfile maps compression_level c in [0, 1] to the bit rate
# 160 - c * 152 kbit/s (truncated). 95.5 / 152 gives 64 kbit/s: clear speech, 8 kB a second.
_MP3_64K = (160 - 64.5) / 152


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

    @property
    def extension(self) -> str:
        return self.extensions[0]

    def sf_options(self) -> dict:
        """Keyword arguments for soundfile.SoundFile when writing this format."""
        opts = {"format": self.sf_format, "subtype": self.subtype}
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
        AudioFormat("opus", (".opus",), "OGG", "OPUS", lossy=True, streams=True, mime="audio/ogg; codecs=opus"),
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
        ),
        AudioFormat("raw", (".raw", ".pcm"), "RAW", "PCM_16", lossy=False, streams=True, mime="audio/pcm"),
        AudioFormat("aac", (".aac",), "ADTS", "AAC", lossy=True, streams=False, mime="audio/aac", encoder="aac"),
        AudioFormat("m4a", (".m4a",), "MP4", "AAC", lossy=True, streams=False, mime="audio/mp4", encoder="aac"),
        # G.711 telephony audio, raw 8-bit codes (media/g711.py; usually with sample_rate 8000)
        AudioFormat(
            "mulaw", (".ulaw", ".mulaw"), "RAW", "ULAW", lossy=True, streams=True, mime="audio/basic", encoder="g711"
        ),
        AudioFormat(
            "alaw", (".alaw",), "RAW", "ALAW", lossy=True, streams=True, mime="audio/x-alaw-basic", encoder="g711"
        ),
    )
}
_BY_EXTENSION: dict[str, AudioFormat] = {ext: f for f in AUDIO_FORMATS.values() for ext in f.extensions}

# extension -> (soundfile format, subtype): the older view of the table (batch.py builds targets from it)
FORMATS: dict[str, tuple[str, str]] = {ext: (f.sf_format, f.subtype) for ext, f in _BY_EXTENSION.items()}


class FormatUnavailable(OmniVoiceError):
    """The installed libsndfile cannot write a format of the table (a runtime failure, exit 1)."""


class EncoderMissing(InvalidRequest):
    """A format of the table needs an encoder that is not installed (a usage error, exit 2)."""


class StreamClosed(BrokenPipeError):
    """The reader of a stream went away (EPIPE): a pipe's reader exited, an HTTP client left."""


def _extension_list() -> str:
    exts = list(_BY_EXTENSION)
    return ", ".join(exts[:-1]) + " or " + exts[-1]


def format_named(name: str) -> AudioFormat:
    """The format called `name` ('mp3', 'wav', ...; case and a leading dot ignored), else
    InvalidRequest listing the names."""
    key = (name or "").strip().lower().lstrip(".")
    fmt = AUDIO_FORMATS.get(key) or _BY_EXTENSION.get("." + key)  # 'pcm' names raw
    if fmt is None:
        raise InvalidRequest(f"format {name!r} is not allowed: use {', '.join(AUDIO_FORMATS)}")
    return fmt


def format_of(format: str, subtype: str) -> AudioFormat:
    """The table's format for a (soundfile format, subtype) pair."""
    for f in AUDIO_FORMATS.values():
        if (f.sf_format, f.subtype) == (format.upper(), subtype.upper()):
            return f
    raise ValueError(f"no output format writes {format}/{subtype}")


def _sndfile_writes(f: AudioFormat) -> bool:
    import soundfile as sf

    return f.sf_format in sf.available_formats() and f.subtype in sf.available_subtypes(f.sf_format)


def writable_formats() -> list[str]:
    """Names of the table's formats that can be written here (libsndfile's, AAC with an encoder)."""
    aac = aac_encoder() is not None
    return [
        f.name
        for f in AUDIO_FORMATS.values()
        if (aac if f.encoder == "aac" else f.encoder == "g711" or _sndfile_writes(f))
    ]


AAC_INSTALL = "pip install 'omnivoice-cli[aac]' (PyAV), or put ffmpeg on PATH"


def check_available(fmt: AudioFormat) -> None:
    """FormatUnavailable when the installed libsndfile cannot write `fmt`, naming what it can;
    EncoderMissing when `fmt` is AAC and there is no AAC encoder, naming what to install."""
    import soundfile as sf

    if fmt.encoder == "aac":
        if aac_encoder() is None:
            raise EncoderMissing(f"format {fmt.name} (AAC) needs an AAC encoder and none is installed: {AAC_INSTALL}")
        return
    if fmt.encoder == "g711" or _sndfile_writes(fmt):
        return
    raise FormatUnavailable(
        f"the installed libsndfile ({sf.__libsndfile_version__}) cannot write {fmt.name} "
        f"({fmt.sf_format}/{fmt.subtype}); it writes {', '.join(writable_formats())} "
        "(a newer soundfile wheel brings a libsndfile with mp3 and opus: pip install -U soundfile)"
    )


@dataclass(frozen=True)
class OutputTarget:
    """Where the audio goes and in which format."""

    path: Path | None  # None = stdout
    format: str  # soundfile format name: WAV, FLAC, OGG, MP3, RAW
    subtype: str  # soundfile subtype: PCM_16, VORBIS, OPUS, MPEG_LAYER_III

    @property
    def to_stdout(self) -> bool:
        return self.path is None

    @property
    def audio_format(self) -> AudioFormat:
        return format_of(self.format, self.subtype)

    def __str__(self) -> str:
        return STDOUT if self.path is None else str(self.path)


def check_output(spec: str, format: str | None = None) -> OutputTarget:
    """Parse `-o`: '-' (stdout, WAV unless `format` names another) or a path whose extension is
    one of the table's, in an existing folder; `format`, if given, must agree with the extension.

    Raises InvalidRequest (a usage error) naming the value and what is allowed; FormatUnavailable
    when libsndfile cannot write the format; PermissionError when the folder is not writable.
    """
    wanted = format_named(format) if format is not None else None
    if spec == STDOUT:
        fmt = wanted or AUDIO_FORMATS["wav"]
        check_available(fmt)
        if not stdout_is_open():
            raise InvalidRequest("-o - writes the audio to stdout, which is closed: give -o FILE")
        return OutputTarget(None, fmt.sf_format, fmt.subtype)
    if not spec or not spec.strip():
        raise InvalidRequest(f"output path is empty: give a file ending in {_extension_list()}, or - for stdout")
    path = Path(spec).expanduser()
    ext = path.suffix.lower()
    fmt = _BY_EXTENSION.get(ext)
    if fmt is None:
        shown = f"extension {ext!r}" if ext else "no extension"
        raise InvalidRequest(f"output {spec!r} has {shown}: use a file ending in {_extension_list()}, or - for stdout")
    if wanted is not None and wanted is not fmt:
        raise InvalidRequest(f"output {spec!r} is {fmt.name} but the format asked is {wanted.name}: make them agree")
    _check_name_length(path, spec)
    if path.is_dir():
        raise InvalidRequest(f"output {spec!r} is a folder: give a file name ending in {ext}")
    folder = path.parent
    if not folder.is_dir():
        raise InvalidRequest(
            f"output {spec!r}: folder '{folder}' does not exist; create it first or write somewhere else"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "cannot write to this folder", str(folder))
    check_available(fmt)
    check_writable(path, spec)
    return OutputTarget(path, fmt.sf_format, fmt.subtype)


def name_max(folder: Path) -> int:
    """The longest file name (bytes) the folder's file system allows (255 where it cannot tell)."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def check_writable(path: Path, shown: str | None = None) -> None:
    """Before any work: the file name fits the file system, and its temporary file can be created
    there (then removed). InvalidRequest for a name that is too long; OSError naming the output
    for anything else (a read-only or full file system, no permission)."""
    shown = str(path) if shown is None else shown
    _check_name_length(path, shown)
    try:
        fd, tmp = _temporary(path)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise InvalidRequest(f"output {shown!r}: the path is too long for this file system") from None
        raise OSError(e.errno, f"cannot write the output {shown!r}: {e.strerror or e}") from None


def _check_name_length(path: Path, shown: str) -> None:
    """Every name in the path fits the file system's limit (the file's own: its folder's limit;
    folders: 255 bytes), and the whole path fits 4095 bytes (InvalidRequest)."""
    if len(os.fsencode(str(path))) >= 4096:
        raise InvalidRequest(f"output {shown[:60]!r}...: the path is longer than 4095 bytes")
    for folder in path.parent.parts:
        if len(os.fsencode(folder)) > 255:
            raise InvalidRequest(
                f"output {shown[:80]!r}...: a folder name is {len(os.fsencode(folder))} bytes long; at most 255"
            )
    try:
        limit = name_max(path.parent) if path.parent.is_dir() else 255
    except OSError:
        limit = 255
    size = len(os.fsencode(path.name))
    if size > limit:
        raise InvalidRequest(
            f"output {shown!r}: the file name is {size} bytes long; this file system allows at most {limit}"
        )


def stdout_is_open() -> bool:
    """False when the process was started with stdout closed (`>&-`)."""
    import sys

    if sys.stdout is None:
        return False
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (a test runner's buffer)
        return True
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def prepare_audio(audio) -> "object":
    """A 1-D float32 copy of `audio`, NaN/inf replaced and clipped to [-1, 1]."""
    import numpy as np

    a = np.asarray(audio, dtype=np.float32)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {a.shape}")
    a = np.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0)
    return np.clip(a, -1.0, 1.0)


WRITE_BLOCK = 1 << 18  # samples prepared and written at a time: a long file needs no full-size copies


def _mono(audio):
    import numpy as np

    a = np.asarray(audio)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {a.shape}")
    return a


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


def _write_blocks(f, audio, sample_rate: int, format: str, subtype: str) -> None:
    import soundfile as sf

    a = _mono(audio)
    fmt = format_of(format, subtype)
    check_fits(fmt, len(a), sample_rate)
    if fmt.encoder == "aac":
        f.write(encode_aac(a, sample_rate, fmt))
        return
    if fmt.encoder == "g711":
        from .g711 import encode_pcm16

        for i in range(0, len(a), WRITE_BLOCK):
            f.write(encode_pcm16(pcm16(a[i : i + WRITE_BLOCK]), fmt.subtype))
        return
    step = fmt.block or WRITE_BLOCK
    with sf.SoundFile(f, "w", samplerate=int(sample_rate), channels=1, **fmt.sf_options()) as out:
        for i in range(0, max(len(a), 1), step):
            _write_piece(out, fmt, a[i : i + step])


def _write_piece(out, fmt: AudioFormat, audio) -> None:
    """One block of float audio into a soundfile. 16-bit formats other than WAV / raw get the
    WAV's own 16-bit samples (libsndfile's FLAC encoder rounds floats differently, by one step)."""
    import numpy as np

    a = prepare_audio(audio)
    if fmt.subtype == "PCM_16" and fmt.sf_format not in ("WAV", "RAW"):
        a = np.frombuffer(pcm16(a), dtype="<i2")
    out.write(a)


def encode(audio, sample_rate: int, format: str = "WAV", subtype: str = "PCM_16") -> bytes:
    """The bytes of a whole audio file holding `audio` (mono)."""
    buf = io.BytesIO()
    _write_blocks(buf, audio, sample_rate, format, subtype)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# AAC: PyAV (the `aac` extra: FFmpeg's libraries in a wheel), else an ffmpeg command on PATH
# ---------------------------------------------------------------------------------------------

AAC_BITRATE = 64000  # bits a second: as the mp3's, clear speech at 24 kHz mono
_AAC_MUXERS = {"aac": "adts", "m4a": "ipod"}  # FFmpeg's muxer of each format (ipod: an .m4a MP4)


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


def encode_aac(audio, sample_rate: int, fmt: AudioFormat | str = "aac") -> bytes:
    """The bytes of a whole AAC file (ADTS for aac, MP4 for m4a) of mono float `audio`."""
    fmt = fmt if isinstance(fmt, AudioFormat) else format_named(fmt)
    check_available(fmt)
    a = prepare_audio(audio)
    if aac_encoder() == "pyav":
        return _aac_pyav(a, int(sample_rate), _AAC_MUXERS[fmt.name])
    return _aac_ffmpeg(a, int(sample_rate), _AAC_MUXERS[fmt.name])


def _aac_pyav(a, sample_rate: int, muxer: str) -> bytes:
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=muxer) as out:
        stream = out.add_stream("aac", rate=sample_rate, layout="mono")
        stream.bit_rate = AAC_BITRATE
        for i in range(0, len(a), WRITE_BLOCK):
            frame = av.AudioFrame.from_ndarray(a[None, i : i + WRITE_BLOCK], format="flt", layout="mono")
            frame.sample_rate = sample_rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def _aac_ffmpeg(a, sample_rate: int, muxer: str) -> bytes:
    import shutil
    import subprocess

    ffmpeg = shutil.which("ffmpeg") or "ffmpeg"
    with tempfile.TemporaryDirectory(prefix="omnivoice-aac-") as folder:
        target = os.path.join(folder, "out")  # MP4 seeks back to write its index: a file, not a pipe
        cmd = [
            ffmpeg,
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "f32le",
            "-ar",
            str(sample_rate),
            "-ac",
            "1",
            "-i",
            "pipe:0",
            "-c:a",
            "aac",
            "-b:a",
            str(AAC_BITRATE),
            "-f",
            muxer,
        ]
        try:
            done = subprocess.run([*cmd, "-y", target], input=a.astype("<f4").tobytes(), capture_output=True)
        except OSError as e:
            raise OmniVoiceError(f"cannot run {ffmpeg} to encode AAC: {e.strerror or e}") from None
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise OmniVoiceError(
                f"{ffmpeg} could not encode AAC (exit {done.returncode}): {said[-1] if said else 'no message'}"
            )
        with open(target, "rb") as f:
            return f.read()


def pcm16(audio) -> bytes:
    """s16le bytes of mono float `audio`: exactly the sample data of the WAV (and raw) output."""
    return encode(audio, SAMPLE_RATE, "RAW", "PCM_16")  # the rate is not stored in raw PCM


def write_audio(audio, sample_rate: int, target: OutputTarget, stdout: BinaryIO | None = None) -> None:
    """Write mono `audio` (float, [-1, 1]) at `sample_rate` to `target`.

    stdout: the binary stream used for '-' (default sys.stdout.buffer); the whole file is encoded
    in memory first (a WAV header then holds its real sizes).
    """
    if target.path is None:
        import sys

        data = encode(audio, sample_rate, target.format, target.subtype)
        write_all(stdout if stdout is not None else sys.stdout.buffer, data)
        return
    _write_atomically(target.path, audio, sample_rate, target.format, target.subtype)


def _write_atomically(path: Path, audio, sample_rate: int, format: str, subtype: str) -> None:
    replace_atomically(path, lambda f: _write_blocks(f, audio, sample_rate, format, subtype))


TEMPORARY_SUFFIX = ".part"
_RANDOM_CHARS = 8  # what mkstemp puts between the prefix and the suffix


def temporary_prefix(path: Path) -> str:
    """The start of the temporary files' names of `path`: '.NAME.', NAME cut (at a character) so
    that a whole temporary name fits in the file system's name limit (a legal 255-byte NAME
    gives a legal temporary name)."""
    room = name_max(path.parent) - _RANDOM_CHARS - len(TEMPORARY_SUFFIX) - 2
    raw = os.fsencode(path.name)
    if len(raw) > room:
        raw = raw[: max(room, 1)]
        name = raw.decode("utf-8", "ignore") or os.fsdecode(raw)  # never half a character
    else:
        name = path.name
    return f".{name}."


def temporary_files(path: Path) -> list[Path]:
    """The temporary files that writing `path` may have left (a killed run's)."""
    prefix = "".join(f"[{c}]" if c in "*?[" else c for c in temporary_prefix(path))
    try:
        return [p for p in path.parent.glob(f"{prefix}*{TEMPORARY_SUFFIX}") if p.is_file()]
    except OSError:
        return []


def _temporary(path: Path) -> tuple[int, str]:
    return tempfile.mkstemp(prefix=temporary_prefix(path), suffix=TEMPORARY_SUFFIX, dir=path.parent)


def _mode_for(path: Path) -> int:
    """The mode of the regular file `path` replaces (kept), else (nothing there, or a link, which
    is replaced rather than followed) what a new file gets: 0666 less the umask."""
    import stat

    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except (OSError, ValueError):
        pass
    return 0o666 & ~_umask()


def replace_atomically(path: Path, write: "Callable[[BinaryIO], None]") -> None:
    """Create or replace `path` with what write(f) writes, through a temporary file in the same
    folder that is synced and renamed: `path` is never partial, and on failure it is untouched.
    A replaced file keeps its mode (permissions)."""
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------

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

        a = _mono(audio)
        self.samples += len(a)
        if self._sf is None:  # g711
            from .g711 import encode_pcm16

            return encode_pcm16(pcm16(a), self.format.subtype)
        step = self.format.block or WRITE_BLOCK
        if self.format.block:  # whole blocks only, as a file is written; the rest waits
            a = np.concatenate([self._carry, np.asarray(a, dtype=np.float32)])
            self._carry, a = a[len(a) - len(a) % step :], a[: len(a) - len(a) % step]
        for i in range(0, len(a), step):
            _write_piece(self._sf, self.format, a[i : i + step])
        return self._take()

    def finish(self) -> bytes:
        """Flush the encoder; return the last bytes. The stream is then complete."""
        if self.closed:
            return b""
        if self._sf is None:  # g711
            self.closed = True
            return b""
        if len(self._carry):
            _write_piece(self._sf, self.format, self._carry)
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


def _wait_writable(fd: int) -> None:
    select.select([], [fd], [])


def write_all(out, data: bytes) -> None:
    """Write every byte of `data` to `out` (an int file descriptor or a binary file object),
    looping over partial writes and waiting on a non-blocking one; EPIPE raises StreamClosed."""
    view = memoryview(data)
    total = len(view)
    try:
        while view:
            try:
                n = os.write(out, view) if isinstance(out, int) else out.write(view)
            except BlockingIOError as e:  # non-blocking and full: some bytes may have gone
                n = e.characters_written if not isinstance(out, int) else 0
                _wait_writable(out if isinstance(out, int) else out.fileno())
            if n is None:  # a raw non-blocking file object that took nothing
                _wait_writable(out.fileno())
                n = 0
            view = view[n:]
        if not isinstance(out, int) and hasattr(out, "flush"):
            out.flush()
    except BrokenPipeError:
        sent = total - len(view)
        raise StreamClosed(
            errno.EPIPE,
            f"the reader of the audio stream went away ({sent} of {total} bytes "
            "of this write sent): the audio is incomplete",
        ) from None


def quiet_stdout() -> None:
    """After stdout's reader went away: point fd 1 at /dev/null and drop what is buffered, so the
    interpreter's last flush does not fail again (and print a second error)."""
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
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

    def write(self, audio) -> None:
        self._send(self.encoder.feed(audio))

    def close(self) -> None:
        """Flush the encoder's last bytes."""
        self._send(self.encoder.finish())

    def _send(self, data: bytes) -> None:
        if data:
            write_all(self.out, data)
            self.bytes_written += len(data)

    def __enter__(self) -> "StreamWriter":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
