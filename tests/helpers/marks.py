"""The AI mark (media/marks.py) read back from a file's bytes by the container's own readers: the
WAV's LIST/INFO and nothing else by libsndfile, Vorbis comments, ID3v2 and MP4 atoms by mutagen:
test_marks.py, test_marks_runs.py."""

from __future__ import annotations

import io

from omnivoice_cli.media.marks import parse_mark

NO_CONTAINER = ("raw", "mulaw", "alaw")  # no metadata to hold a mark


def mark_text(data: bytes, fmt: str) -> str | None:
    """The mark's text where the format keeps it (None: none there)."""
    f = io.BytesIO(data)
    if fmt in NO_CONTAINER:
        return None
    if fmt == "wav":
        import soundfile as sf

        with sf.SoundFile(f) as s:
            return s.comment or None
    if fmt in ("mp3", "aac"):
        from mutagen.id3 import ID3, ID3NoHeaderError

        try:
            tag = ID3(f)
        except ID3NoHeaderError:
            return None
        frames = tag.getall("COMM") + tag.getall("TXXX:comment")  # LAME's COMM; FFmpeg's ADTS: TXXX
        return frames[0].text[0] if frames else None
    if fmt in ("m4a", "m4b"):
        from mutagen.mp4 import MP4

        tags = MP4(f).tags or {}
        return (tags.get("desc") or [None])[0]
    from mutagen.flac import FLAC
    from mutagen.oggopus import OggOpus
    from mutagen.oggvorbis import OggVorbis

    reader = {"flac": FLAC, "ogg": OggVorbis, "opus": OggOpus}[fmt]
    tags = reader(f).tags or {}
    return (tags.get("comment") or [None])[0]


def mark_of(data: bytes, fmt: str) -> dict[str, str] | None:
    """The mark's fields read back (parse_mark), or None when the file carries none."""
    return parse_mark(mark_text(data, fmt))
