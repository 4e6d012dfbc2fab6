"""Audiobooks as .m4b: AAC in an MP4 with chapter marks, tags and a cover, written as it is spoken.

`write_m4b` takes the audio as float32 mono chunks of any sizes (a generator: the whole book is
never in memory) and encodes each as it comes, through PyAV (the `book` extra, FFmpeg's libraries
in a wheel; `MissingExtra` without it). What it writes, and why:

- AAC-LC at the input's rate (24 kHz mono for the model), 64 kbit/s by default, with the encoder
  settings of `-o x.m4a` (media/output.py). 24 kHz is one of AAC's own sampling rates
  (ISO/IEC 14496-3) and inside what players decode (Android: AAC-LC at 8 to 48 kHz; Apple's AAC
  decoder likewise), so nothing is resampled: a 44.1/48 kHz file would be larger for no gain.
- FFmpeg's "mp4" muxer with the major brand "M4B ": FFmpeg picks its "ipod" muxer for .m4b, which
  writes the same boxes, but it refuses an MJPEG/PNG stream, so it cannot hold a cover. Chapters
  are written twice by the muxer: a QuickTime text chapter track (the `chap` track reference:
  what Apple's players read; FFmpeg reads it back, in milliseconds) and a Nero `chpl` box in
  `udta` (what many Android players and older tools read; in 100 ns units, at most 255 chapters
  and 255 bytes a title: titles are cut to 255 UTF-8 bytes at a character, for both).
- iTunes tags in `udta/meta/ilst`: ©nam (title), ©ART and aART (author), ©alb (album; the title
  when none), ©day (year), ©cmt (comment), ©gen "Audiobook", stik 2 (audiobook); the language as
  the audio track's ISO 639-2/T code ("en-US" -> "eng"); the cover as `covr` (JPEG or PNG bytes
  as given; another image PyAV can decode is converted to PNG). With a `Mark` (media/marks.py):
  its text in `desc` (and ©cmt when the book gives no comment), omnivoice in ©too, its day in
  ©day when the book gives no year.
- No wall clock: the muxer writes 0 as the creation and modification times, so the same audio,
  chapters and tags give byte-identical files (the book's resume compares them), however the
  audio is split into chunks (it is re-cut into the encoder's 1024-sample frames here).
- The index (`moov`) is at the end (MP4's "faststart" rewrites the whole file); the muxer keeps
  it in memory while writing, about 6 MB an hour of audio (measured: 1 MB of peak RSS for ten
  minutes fed a second at a time, 6 MB for an hour), and nothing else grows with the book.

The file is written to a temporary name beside the target and renamed over it
(`output.replace_atomically`): the target is never partial. Chapter starts are given in seconds;
they must tile the audio (the first at 0, each end the next start); the last end is set to the
audio's real duration, which it may miss by at most one AAC frame (1024 samples).
"""

from __future__ import annotations

import io
import json
import os
import struct
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Iterable, cast

from ..engine.errors import InvalidRequest, MissingExtra, OmniVoiceError
from .aac import AAC_BITRATE
from .atomic import replace_atomically
from .formats import AAC_RATES
from .pcm import prepare_audio

if TYPE_CHECKING:
    import numpy as np
    from av.container.core import Chapter

    from .marks import Mark

AAC_FRAME = 1024  # samples in one AAC-LC frame
MAX_TITLE_BYTES = 255  # what a Nero chpl entry holds
BRAND = "M4B "  # the ftyp major brand of an audiobook
GENRE = "Audiobook"
_STIK_AUDIOBOOK = "2"  # iTunes media kind


@dataclass(frozen=True)
class ChapterMark:
    title: str
    start: float  # seconds from the start of the file
    end: float


@dataclass(frozen=True)
class BookTags:
    title: str | None = None
    author: str | None = None
    album: str | None = None
    year: str | None = None
    language: str | None = None  # a BCP-47 tag or ISO 639 code ("en", "en-US", "fra")
    comment: str | None = None
    cover: bytes | None = None
    cover_type: str | None = None  # image/jpeg | image/png (the bytes themselves decide)


def _require_av():
    try:
        import av
    except ImportError:
        raise MissingExtra("writing an .m4b audiobook", "PyAV", "book") from None
    return av


def cut_title(title: str) -> str:
    """`title` cut to MAX_TITLE_BYTES of UTF-8 at a character boundary."""
    raw = title.encode("utf-8")
    return title if len(raw) <= MAX_TITLE_BYTES else raw[:MAX_TITLE_BYTES].decode("utf-8", "ignore")


def check_chapters(chapters: list[ChapterMark], sample_rate: int) -> list[int]:
    """The chapters' starts in samples, after checking that they tile: the first starts at 0,
    each ends where the next starts, and each is longer than nothing (ValueError otherwise)."""
    half = 0.5 / sample_rate
    starts = []
    for i, ch in enumerate(chapters):
        if not isinstance(ch.title, str):
            raise ValueError(f"chapter {i + 1}: the title must be a string, not {type(ch.title).__name__}")
        if not ch.end > ch.start:
            raise ValueError(f"chapter {i + 1} ({ch.title!r}) ends at {ch.end} s, not after its start {ch.start} s")
        if i == 0 and abs(ch.start) > half:
            raise ValueError(f"the first chapter starts at {ch.start} s: it must start at 0")
        if i > 0 and abs(ch.start - chapters[i - 1].end) > half:
            raise ValueError(
                f"chapter {i + 1} ({ch.title!r}) starts at {ch.start} s but chapter {i} ends at "
                f"{chapters[i - 1].end} s: chapters must tile the audio"
            )
        starts.append(round(ch.start * sample_rate))
    return starts


def _av_chapters(chapters: list[ChapterMark], starts: list[int], samples: int, sample_rate: int) -> list[Chapter]:
    """PyAV's chapter dicts (in samples), the last ending at the audio's end (`samples`)."""
    if not chapters:
        return []
    claimed = round(chapters[-1].end * sample_rate)
    if abs(claimed - samples) > AAC_FRAME or starts[-1] >= samples:
        raise ValueError(
            f"the chapters end at {chapters[-1].end:.3f} s but the audio is {samples / sample_rate:.3f} s long"
        )
    ends = starts[1:] + [samples]
    base = Fraction(1, sample_rate)
    return [
        {"id": i + 1, "start": s, "end": e, "time_base": base, "metadata": {"title": cut_title(ch.title)}}
        for i, (ch, s, e) in enumerate(zip(chapters, starts, ends))
    ]


def iso639_2(language: str | None) -> str | None:
    """The ISO 639-2/T code of a BCP-47 tag or ISO 639 code ("en-US" -> "eng"), else None."""
    if not language or not language.strip():
        return None
    import langcodes

    try:
        return langcodes.Language.get(language.strip().replace("_", "-")).to_alpha3()
    except (LookupError, ValueError):
        return None


def _container_tags(tags: BookTags, mark: Mark | None = None) -> dict[str, str]:
    """FFmpeg's metadata keys for the mp4 muxer's iTunes tags (the book's over the mark's)."""
    fields: dict[str, str | None] = {**(mark.ffmpeg() if mark is not None else {})}
    fields |= {
        "title": tags.title,
        "artist": tags.author,
        "album_artist": tags.author,
        "album": tags.album or tags.title,
        "date": tags.year or fields.get("date"),
        "comment": tags.comment or fields.get("comment"),
        "genre": GENRE,
        "media_type": _STIK_AUDIOBOOK,
    }
    return {k: str(v) for k, v in fields.items() if v is not None and str(v) != ""}


_JPEG, _PNG = b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n"
MAX_COVER_BYTES = 10 * 1024 * 1024  # a cover's file at most
MAX_COVER_PIXELS = 4096 * 4096  # a cover's width x height at most (decoded: 64 MB of RGBA)
# JPEG start-of-frame markers (they hold the height and width): SOF0..SOF15 but DHT, JPG, DAC
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """(MIME type, width, height) of a PNG, JPEG, GIF, WebP or BMP image, read from its header
    alone (the image is never decoded): PNG's IHDR, JPEG's start-of-frame segment (the markers
    before it skipped by their lengths), GIF's logical screen, WebP's VP8 / VP8L / VP8X header,
    BMP's BITMAPINFOHEADER. None when
    `data` is none of these or its header is cut short or says 0 pixels."""
    found: tuple[str, int, int] | None = None
    if data.startswith(_PNG):
        if len(data) >= 24 and data[12:16] == b"IHDR":
            found = ("image/png", *struct.unpack(">II", data[16:24]))
    elif data.startswith(_JPEG):
        found = _jpeg_size(data)
    elif data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        found = ("image/gif", *struct.unpack("<HH", data[6:10]))
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        found = _webp_size(data)
    elif data[:2] == b"BM" and len(data) >= 26 and struct.unpack("<I", data[14:18])[0] >= 40:
        w, h = struct.unpack("<ii", data[18:26])  # BITMAPINFOHEADER; a negative height: top-down rows
        found = ("image/bmp", w, abs(h))
    if found is None or found[1] <= 0 or found[2] <= 0:
        return None
    return found


def _jpeg_size(data: bytes) -> tuple[str, int, int] | None:
    pos = 2  # after SOI
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None  # not at a marker: damaged
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # TEM, RSTn: no length
            pos += 2
            continue
        if marker in (0xD9, 0xDA):  # EOI, or SOS (the image data) before any frame header
            return None
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if length < 2:
            return None
        if marker in _SOF:
            if pos + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return "image/jpeg", width, height
        pos += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[str, int, int] | None:
    kind = data[12:16]
    if kind == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return "image/webp", w & 0x3FFF, h & 0x3FFF
    if kind == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X" and len(data) >= 30:
        return "image/webp", int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def cover_problem(data: bytes) -> str | None:
    """Why `data` is no cover an .m4b can hold (its header alone: the bytes and pixels limits),
    else None. Cheap: nothing is decoded."""
    if len(data) > MAX_COVER_BYTES:
        return f"its file is {len(data) / 2**20:.1f} MiB, over the {MAX_COVER_BYTES >> 20} MiB a cover may be"
    size = image_size(data)
    if size is None:
        return "not an image (PNG, JPEG, GIF, WebP or BMP) with a readable header"
    kind, w, h = size
    if w * h > MAX_COVER_PIXELS:
        return f"it is {w}x{h} pixels, over the {MAX_COVER_PIXELS / 1e6:.1f} million pixels a cover may have"
    return None


def cover_image(data: bytes) -> tuple[bytes, str, int, int]:
    """(bytes, PyAV codec, width, height) of a cover: JPEG and PNG as they are, any other image
    PyAV decodes as PNG; InvalidRequest when it is not one an .m4b can hold (cover_problem: its
    size from the header, before anything is decoded), or the image does not decode whole to
    the size its header gives. What the writer does with a cover, and what `book` checks before
    it speaks anything."""
    problem = cover_problem(data)
    if problem is not None:
        raise InvalidRequest(f"the cover is not used: {problem}")
    size = image_size(data)
    if size is None:  # (cover_problem said so already)
        raise InvalidRequest("the cover is not used: its header does not read as an image's")
    kind, width, height = size
    av = _require_av()
    try:
        with av.open(io.BytesIO(data)) as c:
            stream = c.streams.video[0]
            stream.codec_context.options = {"err_detect": "explode"}  # a damaged image is an error, not a grey frame
            frame = next(c.decode(stream))
    except (av.FFmpegError, StopIteration, IndexError, ValueError, OSError):
        raise InvalidRequest(
            f"the cover is not used: it does not decode ({len(data)} bytes of {kind}: a damaged image)"
        ) from None
    if (frame.width, frame.height) != (width, height):
        raise InvalidRequest(
            f"the cover is not used: its header says {width}x{height} pixels but it decodes to "
            f"{frame.width}x{frame.height}"
        )
    if data.startswith(_JPEG):
        return data, "mjpeg", width, height
    if data.startswith(_PNG):
        return data, "png", width, height
    enc = av.CodecContext.create("png", "w")
    enc.width, enc.height, enc.pix_fmt = frame.width, frame.height, "rgb24"
    png = b"".join(bytes(p) for p in [*enc.encode(frame.reformat(format="rgb24")), *enc.encode(None)])
    return png, "png", frame.width, frame.height


def write_m4b(
    path,
    chunks: Iterable,
    sample_rate: int,
    chapters: list[ChapterMark],
    tags: BookTags,
    *,
    bitrate: int = AAC_BITRATE,
    mark: Mark | None = None,
) -> float:
    """Encode float32 mono chunks (any sizes, streamed: never the whole book in memory) as AAC in
    an MP4 (.m4b) with chapter marks, tags and cover; written to a temporary name then renamed;
    returns the duration in seconds."""
    _require_av()
    sample_rate = int(sample_rate)
    if sample_rate not in AAC_RATES:
        raise InvalidRequest(f"sample rate {sample_rate} Hz is not one of AAC's: {', '.join(map(str, AAC_RATES))}")
    chapters = list(chapters)
    starts = check_chapters(chapters, sample_rate)
    cover = cover_image(tags.cover) if tags.cover else None
    samples = 0

    def write(f) -> None:
        nonlocal samples
        samples = _mux(f, chunks, sample_rate, chapters, starts, (tags, mark), cover, int(bitrate))

    replace_atomically(Path(path), write)
    return samples / sample_rate


def _mux(f, chunks, sample_rate, chapters, starts, marked, cover, bitrate) -> int:
    """Write the whole MP4 to the binary file `f` (`marked`: the tags and the mark); return the samples written."""
    import av
    from av.stream import Disposition

    with av.open(f, "w", format="mp4", options={"brand": BRAND}) as out:
        tags = marked[0]
        out.metadata.update(_container_tags(*marked))
        stream = out.add_stream("aac", rate=sample_rate, layout="mono")
        stream.bit_rate = bitrate
        language = iso639_2(tags.language)
        if language:
            stream.metadata["language"] = language
        pic = None
        if cover is not None:
            pic = out.add_mux_stream(cover[1], width=cover[2], height=cover[3])
            pic.disposition = Disposition.attached_pic
        out.start_encoding()
        if pic is not None:
            packet = av.Packet(cover[0])
            packet.stream, packet.pts, packet.dts, packet.time_base = pic, 0, 0, Fraction(1, 90000)
            out.mux(packet)
        samples = _encode(out, stream, chunks, sample_rate)
        if not samples:
            raise ValueError("no audio to write: an .m4b needs at least one sample")
        # Set now, before the trailer: the muxer then writes the chapter track (and chpl) with the
        # last chapter ending at the audio's real end.
        out.set_chapters(_av_chapters(chapters, starts, samples, sample_rate))
    return samples


def _encode(out, stream, chunks, sample_rate: int) -> int:
    """Feed the chunks to the encoder in whole 1024-sample frames (the same frames however the
    audio is split), then the rest and the flush; return the samples fed."""
    import av
    import numpy as np

    pending = np.zeros(0, dtype=np.float32)
    fed = 0

    def frame(a) -> None:
        nonlocal fed
        fr = av.AudioFrame.from_ndarray(a[None, :], format="flt", layout="mono")
        fr.sample_rate, fr.pts, fr.time_base = sample_rate, fed, Fraction(1, sample_rate)
        out.mux(stream.encode(fr))
        fed += len(a)

    for chunk in chunks:
        a = cast("np.ndarray", prepare_audio(chunk))
        if not len(a):
            continue
        a = np.concatenate([pending, a]) if len(pending) else a
        whole = len(a) - len(a) % AAC_FRAME
        for i in range(0, whole, AAC_FRAME):
            frame(a[i : i + AAC_FRAME])
        pending = a[whole:].copy()
    if len(pending):
        frame(pending)
    out.mux(stream.encode(None))
    return fed


# ---------------------------------------------------------------------------------------------
# Reading back: for the tests and for the book's own check of what it wrote
# ---------------------------------------------------------------------------------------------

_TAG_KEYS = {"title": "title", "author": "artist", "album": "album", "year": "date", "comment": "comment"}


def read_m4b(path) -> dict:
    """What an .m4b holds, read back with PyAV (and the chpl box by hand):

    {"duration": seconds of audio, "sample_rate", "codec", "brand",
     "chapters": [(title, start, end)] (FFmpeg's reading: the QuickTime chapter track),
     "chpl": [(title, start)] (the Nero box, None when absent),
     "tags": {"title", "author", "album", "year", "comment", "genre", "language"} (those present),
     "cover": bytes | None}"""
    av = _require_av()
    try:
        c = av.open(str(path))
    except av.FFmpegError as e:
        raise OmniVoiceError(f"cannot read {str(path)!r} as an MP4: {e}") from None
    with c:
        if not c.streams.audio:
            raise OmniVoiceError(f"{str(path)!r} holds no audio")
        audio = c.streams.audio[0]
        duration = float(audio.duration * audio.time_base) if audio.duration else float(c.duration or 0) / 1e6
        meta = dict(c.metadata)
        tags = {k: meta[v] for k, v in _TAG_KEYS.items() if v in meta}
        if "genre" in meta:
            tags["genre"] = meta["genre"]
        language = audio.metadata.get("language")
        if language and language != "und":
            tags["language"] = language
        chapters = [
            (ch["metadata"].get("title", ""), float(ch["start"] * ch["time_base"]), float(ch["end"] * ch["time_base"]))
            for ch in c.chapters()
        ]
        cover = None
        pics = [s for s in c.streams.video if s.disposition & av.stream.Disposition.attached_pic]
        if pics:
            packets = [p for p in c.demux(pics[0]) if p.size]
            cover = bytes(packets[0]) if packets else None
        info = {
            "duration": duration,
            "sample_rate": audio.codec_context.sample_rate,
            "codec": audio.codec_context.name,
            "brand": meta.get("major_brand"),
        }
    return {**info, "chapters": chapters, "chpl": read_chpl(path), "tags": tags, "cover": cover}


def _boxes(f, start: int, end: int):
    """(type, body start, body end) of the MP4 boxes between two offsets of the file `f`."""
    pos = start
    while pos + 8 <= end:
        f.seek(pos)
        size, kind = struct.unpack(">I4s", f.read(8))
        head = 8
        if size == 1:
            size, head = struct.unpack(">Q", f.read(8))[0], 16
        elif size == 0:
            size = end - pos
        if size < head:
            return
        yield kind, pos + head, min(pos + size, end)
        pos += size


def _box(f, start: int, end: int, kind: bytes):
    return next(((s, e) for k, s, e in _boxes(f, start, end) if k == kind), None)


def read_chpl(path) -> list[tuple[str, float]] | None:
    """The Nero chapter list (moov/udta/chpl) as [(title, start seconds)], None when absent."""
    body = box_path(path, b"moov", b"udta", b"chpl")
    if body is None:
        return None
    count, pos, out = body[8], 9, []  # version and flags (4), 4 reserved bytes, the count
    for _ in range(count):
        start, n = struct.unpack(">QB", body[pos : pos + 9])
        out.append((body[pos + 9 : pos + 9 + n].decode("utf-8", "replace"), start / 1e7))
        pos += 9 + n
    return out


def box_path(path, *kinds: bytes) -> bytes | None:
    """The body of the box at moov/.../kinds[-1] (the first of each type), None when absent; `kinds`
    start below the file's top level (b"moov", b"mvhd")."""
    with open(path, "rb") as f:
        found = (0, os.fstat(f.fileno()).st_size)
        for kind in kinds:
            found = _box(f, *found, kind)
            if found is None:
                return None
        f.seek(found[0])
        return f.read(found[1] - found[0])


# ---------------------------------------------------------------------------------------------
# The chapter list beside the output
# ---------------------------------------------------------------------------------------------


def write_chapters_json(path, chapters: list[ChapterMark], tags: BookTags, files: list[str] | None = None) -> None:
    """The chapter list as JSON (atomically): the book's title, author and language, then each
    chapter's number (from 1), title, start and end (seconds, to the millisecond) and, with one
    file per chapter, its file name (`files`, in the chapters' order)."""
    if files is not None and len(files) != len(chapters):
        raise ValueError(f"{len(files)} file names for {len(chapters)} chapters")
    items = []
    for i, ch in enumerate(chapters):
        item = {"number": i + 1, "title": ch.title, "start": round(ch.start, 3), "end": round(ch.end, 3)}
        if files is not None:
            item["file"] = files[i]
        items.append(item)
    book = {"title": tags.title, "author": tags.author, "language": tags.language, "chapters": items}
    raw = (json.dumps(book, ensure_ascii=False, indent=2) + "\n").encode("utf-8")

    def write(f: BinaryIO) -> None:
        f.write(raw)

    replace_atomically(Path(path), write)
