"""Saved voice files: a safetensors file with the codes as its one tensor and the transcript, the
RMS and the store's own records in its metadata. Reading the metadata needs no torch (so `omnivoice
voice list` and `voice show` start fast); `voice.py` reads and writes the codes.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InvalidRequest

VOICE_FORMAT = "omnivoice-voice"  # safetensors metadata "format"
VOICE_FORMAT_VERSION = "1"  # bump on any change of layout


def open_voice_file(path: Path):
    """The voice file opened (tensorfile.SafetensorsFile), its format and version checked;
    InvalidRequest if it is missing, not one of ours, or another version."""
    from .tensorfile import SafetensorsFile, TensorFileError

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


def read_voice_metadata(path: str | Path) -> dict[str, str]:
    """The metadata of a saved voice file; InvalidRequest if it is not one of ours, or another version."""
    return dict(open_voice_file(Path(path)).metadata)
