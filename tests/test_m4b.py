"""The .m4b writer (media/m4b.py): chapters that tile the file in both of the muxer's chapter lists
(the QuickTime chapter track and the Nero chpl box), Unicode titles, iTunes tags, the cover byte for
byte, audio that decodes back to the source, byte-identical files however the audio is chunked,
atomic writes, and memory that stays flat on a long book. Everything is read back with PyAV and
by walking the MP4's boxes (no ffprobe here)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from conftest import files_in
from helpers.audio import speechlike

from omnivoice_cli.engine.errors import InvalidRequest, MissingExtra, OmniVoiceError
from omnivoice_cli.media import m4b
from omnivoice_cli.media.m4b import BookTags, ChapterMark, read_m4b, write_chapters_json, write_m4b

av = pytest.importorskip("av")

SR = 24000
FRAME = 1024 / SR  # one AAC frame, in seconds


def image(codec: str, width: int = 40, height: int = 30) -> bytes:
    """A small image encoded by PyAV: mjpeg (JPEG), png, bmp."""
    pix = {"mjpeg": "yuvj420p", "png": "rgb24", "bmp": "bgr24"}[codec]
    enc = av.CodecContext.create(codec, "w")
    enc.width, enc.height, enc.pix_fmt, enc.time_base = width, height, pix, Fraction(1, 25)
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[:, : width // 2] = (200, 30, 30)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=pix)
    return b"".join(bytes(p) for p in [*enc.encode(frame), *enc.encode(None)])


def chunked(a: np.ndarray, size: int):
    for i in range(0, len(a), size):
        yield a[i : i + size]


TITLES = ["Prologue — «début»", "第二章 旅程", "Глава 3 🚂"]


def chapters_audio(seconds=(2.0, 1.5, 2.25)) -> tuple[np.ndarray, list[ChapterMark]]:
    parts = [speechlike(s, i) for i, s in enumerate(seconds)]
    bounds = np.concatenate([[0], np.cumsum([len(p) for p in parts])]) / SR
    marks = [ChapterMark(t, float(bounds[i]), float(bounds[i + 1])) for i, t in enumerate(TITLES[: len(parts)])]
    return np.concatenate(parts), marks


TAGS = BookTags(title="Le Livre ☃", author="Ana Autora", album="Série", year="1999", language="fr-FR", comment="ok")


def test_chapters_tags_and_cover_read_back(tmp_path):
    audio, marks = chapters_audio()
    cover = image("mjpeg")
    target = tmp_path / "x.m4b"
    duration = write_m4b(target, chunked(audio, 5000), SR, marks, BookTags(**{**TAGS.__dict__, "cover": cover}))
    assert duration == len(audio) / SR and files_in(tmp_path) == ["x.m4b"]  # no temporary file left
    got = read_m4b(target)
    assert (got["codec"], got["sample_rate"], got["brand"]) == ("aac", SR, "M4B ")
    assert abs(got["duration"] - duration) <= FRAME
    chapters = got["chapters"]  # FFmpeg reads the QuickTime chapter track
    assert [c[0] for c in chapters] == TITLES
    assert chapters[0][1] == 0 and all(a[2] == b[1] for a, b in zip(chapters, chapters[1:]))  # they tile
    assert abs(chapters[-1][2] - got["duration"]) <= FRAME
    for (_, start, end), mark in zip(chapters, marks):
        assert abs(start - mark.start) <= 0.001 and abs(end - mark.end) <= 0.001  # the track counts ms
    assert [t for t, _ in got["chpl"]] == TITLES  # and the Nero list says the same
    assert all(abs(s - c[1]) <= 0.001 for (_, s), c in zip(got["chpl"], chapters))
    assert got["tags"] == {
        "title": "Le Livre ☃",
        "author": "Ana Autora",
        "album": "Série",
        "year": "1999",
        "comment": "ok",
        "genre": "Audiobook",
        "language": "fra",
    }
    assert got["cover"] == cover


def test_the_boxes_players_read(tmp_path):
    """ftyp M4B, a chap track reference from the audio to a disabled text track, iTunes tags with
    the audiobook media kind (stik 2) and the cover as covr (JPEG: type 13)."""
    audio, marks = chapters_audio()
    cover = image("mjpeg")
    write_m4b(tmp_path / "x.m4b", [audio], SR, marks, BookTags(title="T", author="A", cover=cover))
    path = tmp_path / "x.m4b"
    assert m4b.box_path(path, b"ftyp")[:4] == b"M4B "
    chap = m4b.box_path(path, b"moov", b"trak", b"tref", b"chap")  # in the first track: the audio's
    assert [kind for kind, _ in traks(path)] == [b"soun", b"text"]  # the cover is no track (a covr)
    ((text_id, text_flags),) = [head for kind, head in traks(path) if kind == b"text"]
    assert chap == text_id.to_bytes(4, "big") and text_flags == 2  # in the movie, not enabled: no subtitles
    data = path.read_bytes()
    assert b"\xa9ART" in data and b"aART" in data and b"\xa9gen" in data
    stik = data.index(b"stik")
    assert data[stik + 8 : stik + 12] == b"data" and data[stik + 20] == 2  # type, locale, then the value
    covr = data.index(b"covr")
    assert data[covr + 8 : covr + 16] == b"data\x00\x00\x00\x0d" and data[covr + 20 :].startswith(cover)
    with av.open(str(path)) as c:
        assert [s.type for s in c.streams] == ["audio", "data", "video"]  # the chapter track, then the cover


def traks(path) -> list[tuple[bytes, tuple[int, int]]]:
    """(handler type, (track id, tkhd flags)) of each trak of the moov."""
    out = []
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        moov = m4b._box(f, 0, size, b"moov")
        for kind, start, end in list(m4b._boxes(f, *moov)):
            if kind != b"trak":
                continue
            tkhd = m4b._box(f, start, end, b"tkhd")
            f.seek(tkhd[0])
            head = f.read(16)
            hdlr = m4b._box(f, *m4b._box(f, start, end, b"mdia"), b"hdlr")
            f.seek(hdlr[0] + 8)
            out.append((f.read(4), (int.from_bytes(head[12:16], "big"), int.from_bytes(head[1:4], "big"))))
    return out


def decoded_file(path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)])


def test_audio_decodes_back_to_the_source(tmp_path):
    audio, marks = chapters_audio()
    write_m4b(tmp_path / "x.m4b", chunked(audio, 777), SR, marks, BookTags())
    back = decoded_file(tmp_path / "x.m4b")
    assert abs(len(back) - len(audio)) <= 1024  # the priming samples are trimmed (the edit list)
    n = len(audio) - 3000
    delay = max(range(3000), key=lambda d: float(np.dot(audio[:n], back[d : d + n])))
    corr = float(np.corrcoef(audio[:n], back[delay : delay + n])[0, 1])
    assert corr > 0.99 and delay <= 1024, (corr, delay)


def test_the_same_input_gives_the_same_bytes_however_it_is_chunked(tmp_path):
    audio, marks = chapters_audio()
    tags = BookTags(**{**TAGS.__dict__, "cover": image("png")})
    for name, size in (("a.m4b", 24000), ("b.m4b", 24000), ("c.m4b", 333)):
        write_m4b(tmp_path / name, chunked(audio, size), SR, marks, tags)
    a, b, c = ((tmp_path / n).read_bytes() for n in ("a.m4b", "b.m4b", "c.m4b"))
    assert a == b == c
    mvhd = m4b.box_path(tmp_path / "a.m4b", b"moov", b"mvhd")
    assert mvhd[4:12] == bytes(8)  # creation and modification times: 0, not the wall clock
    other = BookTags(**{**tags.__dict__, "title": "Other"})
    write_m4b(tmp_path / "d.m4b", [audio], SR, marks, other)
    assert (tmp_path / "d.m4b").read_bytes() != a  # the comparison can fail


def test_covers_png_as_is_and_other_images_as_png(tmp_path):
    for codec, kind in (("png", "png"), ("bmp", "bmp")):
        pic = image(codec)
        write_m4b(tmp_path / "x.m4b", [speechlike(0.5)], SR, [], BookTags(cover=pic, cover_type=f"image/{kind}"))
        got = read_m4b(tmp_path / "x.m4b")["cover"]
        if codec == "png":
            assert got == pic
        else:  # converted: a PNG of the same picture
            assert got.startswith(b"\x89PNG") and got != pic
            with av.open(io.BytesIO(got)) as c:
                frame = next(c.decode(video=0))
            assert (frame.width, frame.height) == (40, 30)
            assert tuple(frame.to_ndarray(format="rgb24")[5, 5]) == (200, 30, 30)
    with pytest.raises(InvalidRequest, match="the cover is not used: it is 28192x29807 pixels"):
        write_m4b(tmp_path / "y.m4b", [speechlike(0.5)], SR, [], BookTags(cover=b"GIF89a not really"))
    assert not (tmp_path / "y.m4b").exists()


def test_no_chapters_no_cover_no_tags(tmp_path):
    write_m4b(tmp_path / "x.m4b", [speechlike(1.0)], SR, [], BookTags())
    got = read_m4b(tmp_path / "x.m4b")
    assert got["chapters"] == [] and got["chpl"] is None and got["cover"] is None
    assert got["tags"] == {"genre": "Audiobook"}


@pytest.mark.parametrize(
    "marks,match",
    [
        ([ChapterMark("a", 0.5, 1.0), ChapterMark("b", 1.0, 2.0)], "must start at 0"),
        ([ChapterMark("a", 0, 1.0), ChapterMark("b", 1.1, 2.0)], "must tile"),
        ([ChapterMark("a", 0, 1.0), ChapterMark("b", 1.0, 1.0)], "not after its start"),
    ],
)
def test_chapters_that_do_not_tile_are_refused_before_anything_is_written(tmp_path, marks, match):
    fed = []

    def chunks():
        fed.append(1)
        yield speechlike(2.0)

    with pytest.raises(ValueError, match=match):
        write_m4b(tmp_path / "x.m4b", chunks(), SR, marks, BookTags())
    assert not fed and files_in(tmp_path) == []


def test_chapters_that_miss_the_audio_end_leave_the_old_file(tmp_path):
    target = tmp_path / "x.m4b"
    target.write_bytes(b"old")
    with pytest.raises(ValueError, match="the chapters end at 3.000 s but the audio is 2.000 s"):
        write_m4b(target, [speechlike(2.0)], SR, [ChapterMark("a", 0, 3.0)], BookTags())
    assert target.read_bytes() == b"old" and files_in(tmp_path) == ["x.m4b"]
    # within one AAC frame, the last end is the audio's real end
    write_m4b(target, [speechlike(2.0)], SR, [ChapterMark("a", 0, 2.0 + 0.9 * FRAME)], BookTags())
    assert read_m4b(target)["chapters"] == [("a", 0.0, 2.0)]


def test_no_audio_is_refused_and_what_is_not_an_m4b_is_named(tmp_path):
    with pytest.raises(ValueError, match="no audio to write"):
        write_m4b(tmp_path / "x.m4b", [np.zeros(0, np.float32)], SR, [], BookTags())
    assert files_in(tmp_path) == []
    (tmp_path / "x.m4b").write_bytes(b"not an mp4 at all" * 10)
    with pytest.raises(OmniVoiceError, match="cannot read .*x.m4b.* as an MP4"):
        read_m4b(tmp_path / "x.m4b")


def test_a_failing_source_leaves_nothing(tmp_path):
    def chunks():
        yield speechlike(1.0)
        raise RuntimeError("the model failed")

    with pytest.raises(RuntimeError, match="the model failed"):
        write_m4b(tmp_path / "x.m4b", chunks(), SR, [], BookTags())
    assert files_in(tmp_path) == []


def test_long_titles_are_cut_at_a_character_and_many_chapters_kept(tmp_path):
    long = "é" * 200  # 400 bytes of UTF-8
    marks = [ChapterMark(long if i == 0 else f"Chapitre {i + 1}", i * 0.1, (i + 1) * 0.1) for i in range(300)]
    write_m4b(tmp_path / "x.m4b", [speechlike(30.0)], SR, marks, BookTags())
    got = read_m4b(tmp_path / "x.m4b")
    assert got["chapters"][0][0] == "é" * 127  # 254 bytes: the 128th would be half in
    assert len(got["chapters"]) == 300 and got["chapters"][-1][0] == "Chapitre 300"
    assert len(got["chpl"]) == 255 and got["chpl"][0][0] == "é" * 127  # a chpl holds at most 255


def test_bad_rates_and_languages():
    with pytest.raises(InvalidRequest, match="sample rate 23000 Hz is not one of AAC's"):
        write_m4b("never.m4b", [], 23000, [], BookTags())
    assert [m4b.iso639_2(x) for x in ("en", "en-US", "pt_BR", "zho", "xx-nonsense", "", None)] == [
        "eng",
        "eng",
        "por",
        "zho",
        None,
        None,
        None,
    ]


def test_without_pyav_the_book_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "av", None)  # import av raises ImportError
    with pytest.raises(MissingExtra, match=r"\.m4b audiobook needs PyAV.*pip install 'omnivoice-cli\[book\]'"):
        write_m4b("never.m4b", [], SR, [], BookTags())
    with pytest.raises(MissingExtra, match=r"omnivoice-cli\[book\]"):
        read_m4b("never.m4b")


def test_chapters_json(tmp_path):
    _, marks = chapters_audio()
    write_chapters_json(tmp_path / "book.json", marks, TAGS)
    got = json.loads((tmp_path / "book.json").read_text(encoding="utf-8"))
    assert (got["title"], got["author"], got["language"]) == ("Le Livre ☃", "Ana Autora", "fr-FR")
    assert [c["number"] for c in got["chapters"]] == [1, 2, 3]
    assert [c["title"] for c in got["chapters"]] == TITLES and "file" not in got["chapters"][0]
    assert got["chapters"][1]["start"] == got["chapters"][0]["end"] == 2.0
    files = ["01-Prologue.mp3", "02-Chapter.mp3", "03-Chapter.mp3"]
    write_chapters_json(tmp_path / "book.json", marks, TAGS, files)
    assert [c["file"] for c in json.loads((tmp_path / "book.json").read_text())["chapters"]] == files
    assert "第二章" in (tmp_path / "book.json").read_text(encoding="utf-8")  # not \u-escaped
    with pytest.raises(ValueError, match="2 file names for 3 chapters"):
        write_chapters_json(tmp_path / "book.json", marks, TAGS, files[:2])


_RSS_SCRIPT = """
import resource, sys
import numpy as np
from omnivoice_cli.media.m4b import BookTags, ChapterMark, write_m4b
seconds = int(sys.argv[2])
t = np.arange(24000) / 24000
second = (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)
write_m4b(sys.argv[1] + "/warm.m4b", [second], 24000, [], BookTags())  # libraries loaded, encoder warm
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
marks = [ChapterMark(f"Chapter {i + 1}", i * 60.0, (i + 1) * 60.0) for i in range(seconds // 60)]
write_m4b(sys.argv[1] + "/long.m4b", (second for _ in range(seconds)), 24000, marks, BookTags(title="Long"))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.slow
def test_a_long_book_is_written_in_bounded_memory(tmp_path):
    """Ten minutes fed one second at a time: the peak RSS grows by far less than the audio's
    57.6 MB of float32 (it would hold it all if the writer gathered the book)."""
    seconds = 600
    done = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(tmp_path), str(seconds)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    growth_mb = int(done.stdout.strip())
    assert growth_mb < 20, growth_mb
    got = read_m4b(tmp_path / "long.m4b")
    assert abs(got["duration"] - seconds) <= FRAME and len(got["chapters"]) == 10
    assert got["chapters"][-1] == ("Chapter 10", 540.0, 600.0)
