"""Writing audio files: WAV / FLAC (16-bit PCM) or Ogg Vorbis, chosen by extension, or WAV on stdout.

A file is written to a temporary file in the same folder and renamed over the target, so the
target is never left partial or empty: on any failure it is untouched (absent, or its old
contents). `check_output` runs before the model is loaded, so a bad path fails fast.
"""

from __future__ import annotations

import errno
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from .engine.errors import InvalidRequest

STDOUT = "-"

# extension -> (soundfile format, subtype)
FORMATS: dict[str, tuple[str, str]] = {
    ".wav": ("WAV", "PCM_16"),
    ".flac": ("FLAC", "PCM_16"),
    ".ogg": ("OGG", "VORBIS"),
}


@dataclass(frozen=True)
class OutputTarget:
    """Where the audio goes and in which format."""

    path: Path | None  # None = stdout
    format: str  # soundfile format name: WAV, FLAC, OGG
    subtype: str  # PCM_16 or VORBIS

    @property
    def to_stdout(self) -> bool:
        return self.path is None

    def __str__(self) -> str:
        return STDOUT if self.path is None else str(self.path)


def check_output(spec: str) -> OutputTarget:
    """Parse `-o`: '-' (WAV on stdout) or a path ending in .wav, .flac or .ogg in an existing folder.

    Raises InvalidRequest (a usage error) naming the value and what is allowed; PermissionError
    when the folder exists but cannot be written to.
    """
    if spec == STDOUT:
        return OutputTarget(None, *FORMATS[".wav"])
    if not spec or not spec.strip():
        raise InvalidRequest("output path is empty: give a file ending in .wav, .flac or .ogg, or - for stdout")
    path = Path(spec).expanduser()
    ext = path.suffix.lower()
    if ext not in FORMATS:
        shown = f"extension {ext!r}" if ext else "no extension"
        raise InvalidRequest(
            f"output {spec!r} has {shown}: use a file ending in .wav, .flac or .ogg, or - for WAV on stdout"
        )
    if path.is_dir():
        raise InvalidRequest(f"output {spec!r} is a folder: give a file name ending in {ext}")
    folder = path.parent
    if not folder.is_dir():
        raise InvalidRequest(
            f"output {spec!r}: folder '{folder}' does not exist; create it first or write somewhere else"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "cannot write to this folder", str(folder))
    return OutputTarget(path, *FORMATS[ext])


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


def _write_blocks(f, audio, sample_rate: int, format: str, subtype: str) -> None:
    import numpy as np
    import soundfile as sf

    a = np.asarray(audio)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {a.shape}")
    with sf.SoundFile(f, "w", samplerate=int(sample_rate), channels=1, format=format, subtype=subtype) as out:
        for i in range(0, max(len(a), 1), WRITE_BLOCK):
            out.write(prepare_audio(a[i : i + WRITE_BLOCK]))


def encode(audio, sample_rate: int, format: str = "WAV", subtype: str = "PCM_16") -> bytes:
    """The bytes of an audio file holding `audio` (mono)."""
    buf = io.BytesIO()
    _write_blocks(buf, audio, sample_rate, format, subtype)
    return buf.getvalue()


def write_audio(audio, sample_rate: int, target: OutputTarget, stdout: BinaryIO | None = None) -> None:
    """Write mono `audio` (float, [-1, 1]) at `sample_rate` to `target`.

    stdout: the binary stream used for '-' (default sys.stdout.buffer); the whole file is encoded
    in memory first, because WAV needs a seekable file for its header.
    """
    if target.path is None:
        import sys

        data = encode(audio, sample_rate, target.format, target.subtype)
        out = stdout if stdout is not None else sys.stdout.buffer
        out.write(data)
        out.flush()
        return
    _write_atomically(target.path, audio, sample_rate, target.format, target.subtype)


def _write_atomically(path: Path, audio, sample_rate: int, format: str, subtype: str) -> None:
    replace_atomically(path, lambda f: _write_blocks(f, audio, sample_rate, format, subtype))


def replace_atomically(path: Path, write: "Callable[[BinaryIO], None]") -> None:
    """Create or replace `path` with what write(f) writes, through a temporary file in the same
    folder that is synced and renamed: `path` is never partial, and on failure it is untouched."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
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
