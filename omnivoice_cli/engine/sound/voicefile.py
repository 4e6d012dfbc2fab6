"""Saved voice files: a safetensors file with the codes as its one tensor and the transcript, the
RMS and the store's own records in its metadata. Reading the metadata needs no torch (so `omnivoice
voice list` and `voice show` start fast); `voice.py` reads and writes the codes. `prompt_checksum`
is a voice prompt's `voice_prompt`, the sha256 of its codes and words.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..checkpoint.tensorfile import SafetensorsFile, TensorFileError
from ..errors import InvalidRequest

VOICE_FORMAT = "omnivoice-voice"  # safetensors metadata "format"
VOICE_FORMAT_VERSION = "1"  # bump on any change of layout


def open_voice_file(path: Path):
    """The voice file opened (tensorfile.SafetensorsFile), its format and version checked;
    InvalidRequest if it is missing, not one of ours, or another version."""

    try:
        file = SafetensorsFile(path)
    except TensorFileError as e:
        if e.missing:
            raise InvalidRequest(f"voice file {path} does not exist") from None
        raise InvalidRequest(f"{path} is not a voice file ({e.detail})") from None
    meta = file.metadata
    if meta.get("format") != VOICE_FORMAT or set(file.keys()) != {"codes"}:
        raise InvalidRequest(f"{path} is not an omnivoice voice file")
    if meta.get("version") != VOICE_FORMAT_VERSION:
        raise InvalidRequest(
            f"{path} is a voice file of format version {meta.get('version')!r}; this omnivoice reads "
            f"version {VOICE_FORMAT_VERSION}: add the voice again from its recording"
        )
    return file


MAX_TEXT_CHARS = 100_000  # a voice's transcript at most


def voice_text(path: object, text: object, key: str = "text") -> str:
    """A voice's transcript: a non-empty string of at most MAX_TEXT_CHARS (InvalidRequest otherwise)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest(f"{path}: the voice has no transcript ({key} is missing or empty)")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidRequest(f"{path}: the voice's transcript is {len(text)} characters long: at most {MAX_TEXT_CHARS}")
    return text


def voice_rms(path: object, value: object, key: str = "rms") -> float | None:
    """A voice's level: a finite number >= 0, or None when not recorded (InvalidRequest otherwise)."""
    if value is None or value == "":
        return None
    rms = None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            rms = float(value)
        except ValueError:
            pass
    if rms is None or not math.isfinite(rms) or rms < 0:
        raise InvalidRequest(f"{path}: the voice's level ({key}) is {str(value)[:40]!r}, not a number >= 0")
    return rms


def read_voice_metadata(path: str | Path) -> dict[str, str]:
    """The metadata of a saved voice file; InvalidRequest if it is not one of ours, another version,
    or its transcript or level is missing or broken."""
    meta = dict(open_voice_file(Path(path)).metadata)
    voice_text(path, meta.get("text"))
    voice_rms(path, meta.get("rms"))
    return meta


def prompt_checksum(codes, text: str | None) -> str:
    """`voice_prompt`: the sha256 (hex) of a voice prompt's codes (shape and values, as int64) and
    its words, what a cloned request's voice is: two replies that name the same one were spoken in
    the same voice. `codes`: a [codebooks, frames] integer tensor (or array)."""
    import hashlib
    import json

    import numpy as np

    array = codes.detach().cpu().numpy() if hasattr(codes, "detach") else np.asarray(codes)
    array = np.ascontiguousarray(array, dtype="<i8")
    h = hashlib.sha256(b"omnivoice-voice-prompt\0")
    h.update(json.dumps(list(array.shape)).encode())
    h.update(array.tobytes())
    h.update((text or "").encode("utf-8"))
    return h.hexdigest()


MAX_CODES_BYTES = 16 << 20  # a voice file's codes read for its checksum at most (60 s of codes: 192 kB)


def file_voice_prompt(path: str | Path) -> str:
    """`prompt_checksum` of a saved voice file, read without torch (`voice show`): its int64 codes
    as raw bytes, its transcript from the metadata (InvalidRequest for a file that is not one)."""
    import numpy as np

    file = open_voice_file(Path(path))
    code, shape, begin, end = file.entries["codes"]
    if code != "I64" or len(shape) != 2 or end - begin > MAX_CODES_BYTES:
        raise InvalidRequest(f"{path}: the voice's codes are not an int64 [codebooks, frames] tensor of a voice")
    with open(file.path, "rb") as f:
        f.seek(file.data_start + begin)
        raw = f.read(end - begin)
    codes = np.frombuffer(raw, dtype="<i8").reshape(shape)
    return prompt_checksum(codes, voice_text(path, file.metadata.get("text")))
