"""Writing audio: checking an output (`-o`), and whole files, written atomically; the face of the
output modules (formats, pcm, encoders, aac, atomic, pipes, streams), whose names it re-exports.

The formats are the table of media/formats.py (`AUDIO_FORMATS`, one for `say`, `batch`, `book`
and the server), all 24 kHz mono, each written by its encoder (media/encoders.py: libsndfile, AAC
by PyAV or an `ffmpeg` on PATH, G.711 ours); docs/say.md shows the table (`formats_table`).
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

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..engine.errors import InvalidRequest
from .atomic import (
    check_name_length,
    check_writable,
    replace_atomically,
)
from .formats import (
    AUDIO_FORMATS,
    BY_EXTENSION,
    STDOUT,
    AudioFormat,
    check_available,
    check_fits,
    check_rate,
    extension_list,
    format_named,
    format_of,
)
from .pcm import mono
from .pipes import stdout_is_open, write_all
from .provenance import write_whole

if TYPE_CHECKING:
    from .marks import Mark

__all__ = ["OutputTarget", "check_output", "encode", "write_audio", "encode_aac"]  # its own names


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


def check_output(spec: str, format: str | None = None, sample_rate: int | None = None) -> OutputTarget:
    """Parse `-o`: '-' (stdout, WAV unless `format` names another) or a path whose extension is
    one of the table's, in an existing, writable folder; `format`, if given, must agree with the
    extension, and the format must carry `sample_rate` (check_rate; None: the model's).

    Raises InvalidRequest (a usage error) naming the value and what is allowed, a folder that
    cannot be written included; FormatUnavailable when libsndfile cannot write the format.
    """
    wanted = format_named(format) if format is not None else None
    if spec == STDOUT:
        piped = wanted or AUDIO_FORMATS["wav"]
        check_rate(piped, sample_rate)
        check_available(piped)
        if not stdout_is_open():
            raise InvalidRequest("-o - writes the audio to stdout, which is closed: give -o FILE")
        return OutputTarget(None, piped.sf_format, piped.subtype)
    if not spec or not spec.strip():
        raise InvalidRequest(f"output path is empty: give a file ending in {extension_list()}, or - for stdout")
    path = Path(spec).expanduser()
    ext = path.suffix.lower()
    fmt = BY_EXTENSION.get(ext)
    if fmt is None:
        shown = f"extension {ext!r}" if ext else "no extension"
        raise InvalidRequest(f"output {spec!r} has {shown}: use a file ending in {extension_list()}, or - for stdout")
    if wanted is not None and wanted is not fmt:
        raise InvalidRequest(f"output {spec!r} is {fmt.name} but the format asked is {wanted.name}: make them agree")
    check_rate(fmt, sample_rate)
    check_name_length(path, spec)
    if path.is_dir():
        raise InvalidRequest(f"output {spec!r} is a folder: give a file name ending in {ext}")
    folder = path.parent
    if not folder.is_dir():
        raise InvalidRequest(
            f"output {spec!r}: folder '{folder}' does not exist; create it first or write somewhere else"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidRequest(
            f"output {spec!r}: folder '{folder}' is not writable (Permission denied); write somewhere else"
        )
    check_available(fmt)
    check_writable(path, spec)
    return OutputTarget(path, fmt.sf_format, fmt.subtype)


def _write_blocks(f, audio, sample_rate: int, format: str, subtype: str, mark: Mark | None = None) -> None:
    a = mono(audio)
    fmt = format_of(format, subtype)
    check_rate(fmt, sample_rate)
    check_fits(fmt, len(a), sample_rate)
    write_whole(f, fmt, [a], sample_rate, mark)


def encode(audio, sample_rate: int, format: str = "WAV", subtype: str = "PCM_16", mark: Mark | None = None) -> bytes:
    """The bytes of a whole audio file holding `audio` (mono), with `mark` in its metadata."""
    buf = io.BytesIO()
    _write_blocks(buf, audio, sample_rate, format, subtype, mark)
    return buf.getvalue()


def encode_aac(audio, sample_rate: int, fmt: AudioFormat | str = "aac") -> bytes:
    """The bytes of a whole AAC file (ADTS for aac, MP4 for m4a) of mono float `audio`."""
    fmt = fmt if isinstance(fmt, AudioFormat) else format_named(fmt)
    check_available(fmt)
    return encode(audio, sample_rate, fmt.sf_format, fmt.subtype)


def write_audio(
    audio, sample_rate: int, target: OutputTarget, stdout: BinaryIO | None = None, mark: Mark | None = None
) -> None:
    """Write mono `audio` (float, [-1, 1]) at `sample_rate` to `target`, with `mark` in its metadata.

    stdout: the binary stream used for '-' (default sys.stdout.buffer); the whole file is encoded
    in memory first (a WAV header then holds its real sizes).
    """
    if target.path is None:
        data = encode(audio, sample_rate, target.format, target.subtype, mark)
        write_all(stdout if stdout is not None else sys.stdout.buffer, data)
        return
    replace_atomically(target.path, lambda f: _write_blocks(f, audio, sample_rate, target.format, target.subtype, mark))
