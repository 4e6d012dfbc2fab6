"""`omnivoice book` against hostile input: zip bombs in every EPUB member and the cover, covers
that only look like images, terminal escapes in titles, text books that never end, a tampered
work folder, and what must be checked before the model loads. Each case is one line (exit 2), a
warning and a book written anyway, or a part spoken again: never a traceback, never a read
outside the work folder, never the memory of the whole bomb."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
import soundfile as sf
from conftest import ROOT, TINY_CKPT, error_line
from helpers.extras import omnivoice, one_line
from helpers.memory import PEAK_RSS

from omnivoice_cli.app.book.book import BookRun
from omnivoice_cli.app.book.bookread import epubzip
from omnivoice_cli.app.book.bookread import open as bookopen
from omnivoice_cli.app.book.bookread import text as plaintext
from omnivoice_cli.app.book.bookread.open import open_book
from omnivoice_cli.app.book.booktrack import BookState
from omnivoice_cli.app.book.bookwork import pieces_name
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.media.m4b import MAX_COVER_PIXELS, cover_image, image_size
from omnivoice_cli.ui.progress import BookBars
from omnivoice_cli.ui.text import visible
from tests.epub_util import jpeg_head, make_epub, tiny_png

pytest.importorskip("ebooklib")
pytest.importorskip("av")
slow = pytest.mark.slow
BOMB = 320 * 1024 * 1024  # unpacked: more than the 300 MB a dry run may take, were it read whole
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything a terminal obeys, a line feed aside


# ----------------------------------------------------------------------------------- EPUB members


def replace_member(src: Path, dst: Path, member: str, size: int, head: bytes = b"") -> Path:
    """A copy of the EPUB `src` whose `member` is `head` and then zeros up to `size` bytes, deflated
    as it is written (a bomb: a few hundred kB in the zip)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zout:
        for info in zin.infolist():
            if info.filename != member:
                zout.writestr(info, zin.read(info))
        with zout.open(zipfile.ZipInfo(member), "w", force_zip64=True) as f:
            f.write(head)
            block = bytes(1 << 20)
            for _ in range((size - len(head)) >> 20):
                f.write(block)
    return dst


def lie_about_size(path: Path, member: str, size: int) -> None:
    """Say in the zip's headers (the local one and the central directory's) that `member` unpacks
    to `size` bytes, whatever it really unpacks to."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = -1
        while (pos := data.find(sig, pos + 1)) >= 0:
            n = struct.unpack(
                "<H", data[pos + (26 if sig == b"PK\x03\x04" else 28) : pos + (28 if sig == b"PK\x03\x04" else 30)]
            )[0]
            start = pos + (30 if sig == b"PK\x03\x04" else 46)
            if data[start : start + n] == name:
                data[pos + at : pos + at + 4] = struct.pack("<I", size)
    path.write_bytes(bytes(data))


MEMBERS = {  # member of make_epub's EPUB -> what the refusal says
    "META-INF/container.xml": "META-INF/container.xml unpacks to over 1 MiB, more than a META-INF file may be",
    "META-INF/encryption.xml": "META-INF/encryption.xml unpacks to over 1 MiB, more than a META-INF file may be",
    "EPUB/content.opf": "EPUB/content.opf unpacks to over 8 MiB, more than a package, navigation or NCX file",
    "EPUB/nav.xhtml": "EPUB/nav.xhtml unpacks to over 8 MiB, more than a package, navigation or NCX file",
    "EPUB/toc.ncx": "EPUB/toc.ncx unpacks to over 8 MiB, more than a package, navigation or NCX file",
    "EPUB/chap_01.xhtml": "EPUB/chap_01.xhtml unpacks to over 16 MiB, more than a document of a book may be",
}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    """An EPUB per member of MEMBERS with that member a BOMB, and one whose cover is."""
    folder = tmp_path_factory.mktemp("bombs")
    good = make_epub(folder / "good.epub")
    names = zipfile.ZipFile(good).namelist()
    assert set(MEMBERS) - {"META-INF/encryption.xml"} <= set(names), names
    out = {}
    for member in [*MEMBERS, "EPUB/images/cover.png"]:
        head = tiny_png(16, 16)[:33] if member.endswith(".png") else b"<?xml version='1.0'?>"
        out[member] = replace_member(good, folder / f"{member.replace('/', '_')}.epub", member, BOMB, head)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("member", list(MEMBERS))
def test_a_bomb_in_any_member_is_refused_in_one_line(invoke, fake_engine, bombs, member, home):
    r = invoke("book", str(bombs[member]), "--dry-run")
    assert bombs[member].name in error_line(r, MEMBERS[member], exit_code=2)
    assert fake_engine.loads == []


@pytest.mark.slow
@pytest.mark.parametrize("member", list(MEMBERS))
def test_a_member_whose_header_lies_about_its_size_is_read_at_most_to_its_limit(tmp_path, monkeypatch, member):
    """A header that says 1000 bytes of a member that unpacks to 20 MiB: every read of the zip asks
    for at most a limit and one byte (never "all of it"), and the book reads (that member cut
    short, as a zip reader gives it) or is refused in one line; a header that says more than
    the limit is refused from the header."""
    src = make_epub(tmp_path / "a.epub", encrypted=member.endswith("encryption.xml"))
    path = replace_member(src, tmp_path / "b.epub", member, 20 << 20, b"<?xml version='1.0'?>")
    lie_about_size(path, member, 1000)
    assert zipfile.ZipFile(path).getinfo(member).file_size == 1000
    read = []
    real = zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read", lambda self, n=-1: read.append(n) or real(self, n))
    try:
        open_book(path)
    except InvalidRequest as e:
        assert "b.epub" in str(e) and "\n" not in str(e)
    assert read and all(0 <= n <= epubzip.MAX_MEMBER_BYTES + 1 for n in read), read
    lie_about_size(path, member, 1 << 30)
    with pytest.raises(InvalidRequest, match=re.escape(MEMBERS[member])):
        open_book(path)


@pytest.mark.slow
def test_a_bomb_cover_is_left_out_with_a_warning(bombs):
    info = open_book(bombs["EPUB/images/cover.png"]).info
    assert info.cover is None
    assert info.warnings == ("the cover images/cover.png is not used: it is over 10 MiB unpacked",)


def big_png(width: int, height: int) -> bytes:
    """A real PNG of width x height black pixels (its rows compressed: a few hundred kB)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    comp, row, parts = zlib.compressobj(9), bytes(1 + 3 * width), []
    for _ in range(height):
        parts.append(comp.compress(row))
    parts.append(comp.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def huge_cover() -> bytes:
    return big_png(16000, 16000)  # 768 MB decoded; about 750 kB as a file


@pytest.mark.slow
def test_a_16000_px_cover_is_measured_from_its_header_and_left_out(tmp_path, huge_cover, monkeypatch):
    import av

    assert len(huge_cover) < 2 << 20 and image_size(huge_cover) == ("image/png", 16000, 16000)
    monkeypatch.setattr(av, "open", lambda *a, **k: pytest.fail("the cover was decoded"))
    with pytest.raises(InvalidRequest, match="16000x16000 pixels, over the 16.8 million pixels a cover may have"):
        cover_image(huge_cover)  # the .m4b writer: refused by its header, not decoded
    info = open_book(make_epub(tmp_path / "b.epub", cover=huge_cover)).info
    assert info.cover is None and "16000x16000 pixels" in info.warnings[0]


GARBAGE = [
    ("png-magic", b"\x89PNG\r\n\x1a\n" + os.urandom(2000)),
    ("png-header-then-garbage", tiny_png(64, 64)[:33] + os.urandom(2000)),
    ("jpeg-header-then-garbage", jpeg_head(64, 64) + os.urandom(2000)),
]


@pytest.mark.slow
@pytest.mark.parametrize("cover", [c for _, c in GARBAGE], ids=[n for n, _ in GARBAGE])
def test_a_cover_that_only_looks_like_an_image_is_found_before_anything_is_spoken(
    invoke, fake_engine, tmp_path, home, cover
):
    """Found by the dry run already (no model), and the run writes the book without it."""
    path = make_epub(tmp_path / "b.epub", cover=cover)
    out = tmp_path / "b.m4b"
    r = invoke("book", str(path), "-o", str(out), "--dry-run", "--json")
    assert r.exit_code == 0 and fake_engine.loads == [], r.stderr
    assert json.loads(r.stdout)["cover"] is None and "Warning: the cover " in r.stderr, r.stderr
    r = invoke("book", str(path), "-o", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    warning = next(ln for ln in r.stderr.splitlines() if ln.startswith("Warning: the cover "))
    assert r.stderr.index(warning) < r.stderr.index("no --voice")  # before the parts (and their warning)
    from omnivoice_cli.media.m4b import read_m4b

    assert read_m4b(out)["cover"] is None


def test_image_size_reads_each_format_from_its_header():
    assert image_size(tiny_png(3, 5)) == ("image/png", 3, 5)
    assert image_size(jpeg_head(640, 480)) == ("image/jpeg", 640, 480)
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + bytes(9)
    assert image_size(b"\xff\xd8" + app0 + b"\xff\xff" + jpeg_head(7, 9)[2:]) == ("image/jpeg", 7, 9)  # APP0, fill
    assert image_size(b"GIF89a" + struct.pack("<HH", 320, 200) + bytes(8)) == ("image/gif", 320, 200)
    vp8 = b"RIFF" + bytes(4) + b"WEBPVP8 " + bytes(4) + bytes(3) + b"\x9d\x01\x2a" + struct.pack("<HH", 100, 50)
    assert image_size(vp8) == ("image/webp", 100, 50)
    bits = (100 - 1) | ((50 - 1) << 14)
    vp8l = b"RIFF" + bytes(4) + b"WEBPVP8L" + bytes(4) + b"\x2f" + bits.to_bytes(4, "little")
    assert image_size(vp8l) == ("image/webp", 100, 50)
    vp8x = b"RIFF" + bytes(4) + b"WEBPVP8X" + bytes(8) + (99).to_bytes(3, "little") + (49).to_bytes(3, "little")
    assert image_size(vp8x) == ("image/webp", 100, 50)
    bmp = b"BM" + bytes(12) + struct.pack("<Iii", 40, 30, -20) + bytes(30)
    assert image_size(bmp) == ("image/bmp", 30, 20)
    for bad in (b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff\xda" + bytes(10), b"\xff\xd8" + b"\x00" * 20, b"GIF89a"):
        assert image_size(bad) is None, bad
    assert image_size(tiny_png(1, 1)[:16] + bytes(8)) is None  # 0x0
    assert MAX_COVER_PIXELS == 4096 * 4096


HOSTILE_EPUBS = [*MEMBERS, "EPUB/images/cover.png"]


def at_the_limit(src: Path, dst: Path) -> Path:
    """A copy of `src` whose first chapter is as large as a document may be: MAX_MEMBER_BYTES of
    real paragraphs (read, parsed and planned, not refused)."""
    para = b"<p>The sea was calm that night and the keeper wrote in his log until the lamp burned low.</p>\n"
    head, tail = b"<html xmlns='http://www.w3.org/1999/xhtml'><body><h1>One</h1>\n", b"</body></html>\n"
    n = (epubzip.MAX_MEMBER_BYTES - len(head) - len(tail)) // len(para)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info) if info.filename != "EPUB/chap_01.xhtml" else head + para * n + tail)
    return dst


@slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM: Linux")
def test_a_dry_run_of_any_hostile_epub_stays_under_300_mb(bombs, huge_cover, tmp_path):
    """Each bomb (BOMB bytes unpacked, in each member and the cover) and the 16000 px cover, and
    the largest an EPUB may be within the limits (a 16 MiB chapter; a 4096 x 4096 cover, decoded
    by the check of an .m4b's cover), through `omnivoice book X --dry-run` in a fresh process
    each: the peak RSS under the issue's 300 MB."""
    cases = {m: (bombs[m],) for m in HOSTILE_EPUBS}
    cases["16000px cover"] = (make_epub(tmp_path / "huge.epub", cover=huge_cover), "-o", "x.m4b")
    cases["16 MiB chapter"] = (at_the_limit(make_epub(tmp_path / "a.epub"), tmp_path / "limit.epub"),)
    cases["4096px cover"] = (make_epub(tmp_path / "big.epub", cover=big_png(4096, 4096)), "-o", "x.m4b")
    peaks = {}
    for what, (path, *more) in cases.items():
        peak = tmp_path / "peak"
        env = {
            "PYTHONPATH": str(ROOT),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "OMNIVOICE_HOME": str(tmp_path),
        }
        cmd = [sys.executable, "-c", PEAK_RSS, str(peak), "book", str(path), "--dry-run", *more]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
        assert "Traceback" not in r.stderr and r.returncode in (0, 2), r.stderr[-2000:]
        assert (r.returncode == 0) == (
            what in ("EPUB/images/cover.png", "16000px cover", "16 MiB chapter", "4096px cover")
        )
        peaks[what] = int(peak.read_text())
    print("peak RSS (MiB) of book --dry-run:", peaks)
    assert max(peaks.values()) < 300, peaks


# ------------------------------------------------------------------------------ terminal escapes

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\r\x08"


def test_visible_shows_every_control_character_as_its_escape():
    assert visible(ESCAPES) == "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x0d\\x08"
    assert visible("a\u202eb\u2066c\x7f") == "a\\u202eb\\u2066c\\x7f"
    assert visible("Élan — 第一章 🎧") == "Élan — 第一章 🎧"  # any script is left as it is
    assert visible("one\ntwo\x1b", lines=True) == "one\ntwo\\x1b" and visible("one\ntwo") == "one\\x0atwo"


def check_shown(result) -> None:
    assert result.exit_code == 0, result.stderr
    for stream in (result.stdout, result.stderr):
        assert not CONTROL.search(stream), repr(stream)


def test_epub_titles_are_shown_escaped_by_the_dry_run(invoke, fake_engine, tmp_path, home):
    """C1 controls are XML characters (ESC is not), so an EPUB can carry a CSI (U+009B) or an OSC
    (U+009D) in its titles, its metadata and its table of contents."""
    chapters = [("Storm\x9b2J\x9d0;pwned\x9c", "<p>The wind rose.</p>"), ("Calm", "<p>It fell.</p>")]
    path = make_epub(tmp_path / "b.epub", chapters=chapters, title="Keeper\x9b31m", author="Ada\x9dQuill")
    r = invoke("book", str(path), "--dry-run")
    check_shown(r)
    assert "Storm\\x9b2J\\x9d0;pwned\\x9c" in r.stdout and r.stdout.startswith("Keeper\\x9b31m, by Ada\\x9dQuill")


@pytest.mark.parametrize("name", ["book.md", "book.txt"])
def test_markdown_and_text_titles_are_shown_escaped(invoke, fake_engine, tmp_path, home, name):
    head = "# Storm" if name.endswith(".md") else "Chapter 1: Storm"
    (tmp_path / name).write_text(f"{head}{ESCAPES}\n\nThe wind rose.\n", encoding="utf-8")
    r = invoke("book", str(tmp_path / name), "--dry-run")
    check_shown(r)
    assert "Storm\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m" in r.stdout


def test_the_progress_line_shows_a_title_escaped():
    state = BookState(0, 2, 1, f"Storm{ESCAPES}", 0, 1, 0.0, 10.0, None)
    line = BookBars.describe(state)
    assert not CONTROL.search(line) and "Storm\\x1b]0;pwned\\x07" in line
    shown = []
    bars = BookBars(enabled=True, live=False, echo=shown.append)
    with bars:
        bars.update(state)
    assert shown == [line]


def test_say_dry_run_and_its_messages_show_a_files_escapes(invoke, fake_engine, tmp_path, home):
    (tmp_path / "t.txt").write_text(f"Hello{ESCAPES} there.", encoding="utf-8")
    r = invoke("say", "-f", str(tmp_path / "t.txt"), "--dry-run")
    check_shown(r)
    assert "\\x1b]0;pwned" in r.stdout


# ----------------------------------------------------------------------------- unbounded text reads


@pytest.mark.parametrize("name", ["z.md", "z.txt"])
def test_a_device_or_a_fifo_as_a_book_is_refused_in_one_line(invoke, fake_engine, tmp_path, home, name):
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    error_line(
        invoke("book", str(link), "--dry-run"),
        f"{link}: not a regular file (a device, a FIFO or a socket)",
        exit_code=2,
    )
    error_line(invoke("book", "/dev/zero", "--dry-run"), "/dev/zero: not a regular file", exit_code=2)
    fifo = tmp_path / f"fifo-{name}"
    os.mkfifo(fifo)  # nobody writes it: reading it would wait for ever
    error_line(invoke("book", str(fifo), "--dry-run"), f"{fifo}: not a regular file", exit_code=2)
    assert fake_engine.loads == []


@pytest.mark.parametrize(
    "name, size, words",
    [
        ("z.txt", 2 << 30, "z.txt: 2048 MiB, over the 256 MiB a plain-text book may be"),
        ("z.md", 20 << 20, "z.md: 20 MiB, over the 16 MiB a Markdown book may be"),
    ],
)
def test_a_book_over_its_size_limit_is_refused_before_it_is_read(
    invoke, fake_engine, tmp_path, home, name, size, words
):
    path = tmp_path / name
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: one line of NULs, as long as the file
    error_line(invoke("book", str(path), "--dry-run"), words, exit_code=2)


def test_a_line_over_1_mib_is_refused_not_read_whole(invoke, fake_engine, tmp_path, home):
    path = tmp_path / "z.txt"
    path.write_bytes(b"Chapter 1\n\n" + b"word " * (300 * 1024) + b"\n")
    error_line(invoke("book", str(path), "--dry-run"), "z.txt: line 3 is over 1 MiB long", exit_code=2)


def test_a_book_that_grows_while_it_is_read_stops_at_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "z.txt"
    path.write_bytes(b"Chapter 1\n\nsome words\n" * 20)
    monkeypatch.setattr(plaintext, "MAX_TEXT_BOOK_BYTES", 100)  # the file "grew" past it after the check
    monkeypatch.setattr(bookopen, "regular_size", lambda p: 10)
    with pytest.raises(InvalidRequest, match="over the 100 bytes a plain-text book may be"):
        open_book(path)


# ----------------------------------------------------------------------------------- the work folder

MD = "# One\n\nThe wind rose over the sea.\n\n# Two\n\nIt fell again by morning.\n"


@pytest.fixture
def spoken(invoke, fake_engine, tmp_path, home):
    """A two-chapter book spoken once into out.m4b (FakeEngine); (book, out, work, run again)."""
    book = tmp_path / "b.md"
    book.write_text(MD, encoding="utf-8")
    out = tmp_path / "out.m4b"

    first = invoke("book", str(book), "-o", str(out), "--json", "--subtitles", "srt")
    assert first.exit_code == 0, first.stderr
    work = tmp_path / "out.m4b.parts"
    parts = sorted(p for p in work.iterdir() if p.suffix == ".flac")
    assert len(parts) == 2
    return book, out, work, parts


def tamper_cases(tmp_path: Path) -> dict:
    outside = tmp_path / "outside.flac"
    sf.write(str(outside), [0.5] * 24000, 24000, format="FLAC")

    def link(target):
        def do(part: Path) -> None:
            part.unlink()
            part.symlink_to(target)

        return do

    return {
        "symlink-to-audio-outside": link(outside),
        "symlink-to-etc-passwd": link("/etc/passwd"),
        "random-bytes": lambda part: part.write_bytes(os.urandom(5000)),
        "truncated-flac": lambda part: part.write_bytes(part.read_bytes()[: part.stat().st_size // 2]),
        "other-valid-flac": lambda part: part.write_bytes(outside.read_bytes()),
        "corrupt-pieces": lambda part: (part.parent / pieces_name(part.name)).write_text("{not json"),
        "pieces-deep": lambda part: (part.parent / pieces_name(part.name)).write_text("[" * 100000),
    }


CASES = [
    "symlink-to-audio-outside",
    "symlink-to-etc-passwd",
    "random-bytes",
    "truncated-flac",
    "other-valid-flac",
    "corrupt-pieces",
    "pieces-deep",
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_tampered_part_is_spoken_again_never_read_outside(spoken, invoke, tmp_path, case, monkeypatch):
    book, out, work, parts = spoken
    tamper_cases(tmp_path)[case](parts[0])
    outside = tmp_path / "outside.flac"
    before = outside.stat().st_mtime
    os.utime(outside, (before - 1000, before))  # relatime: a read of it now sets its atime
    opened = []
    real_open = os.open

    def record(p, *a, **k):
        fd = real_open(p, *a, **k)
        opened.append(os.path.realpath(p))
        return fd

    monkeypatch.setattr(os, "open", record)
    r = invoke("book", str(book), "-o", str(out), "--json", "--subtitles", "srt")
    assert r.exit_code == 0 and "Traceback" not in r.stderr, r.stderr
    data = json.loads(r.stdout)
    assert (data["done"], data["skipped"]) == (1, 1), data
    assert not parts[0].is_symlink() and parts[0].is_file() and sf.info(str(parts[0])).frames > 0
    assert not any(p in (str(outside), "/etc/passwd") for p in opened), opened
    assert outside.stat().st_atime < before  # not read by anything (libsndfile included)
    json.loads((work / pieces_name(parts[0].name)).read_text())  # written again whole


@pytest.mark.slow
def test_an_unchanged_m4b_is_written_again_when_a_part_or_the_file_changed(spoken, invoke):
    book, out, work, parts = spoken
    r = invoke("book", str(book), "-o", str(out), "--json")
    data = json.loads(r.stdout)
    assert (data["done"], data["written"], data["kept"]) == (0, [], [str(out)])
    raw = bytearray(out.read_bytes())  # the same size, other bytes
    raw[len(raw) // 2] ^= 0xFF
    out.write_bytes(bytes(raw))
    data = json.loads(invoke("book", str(book), "-o", str(out), "--json").stdout)
    assert (data["done"], data["written"]) == (0, [str(out)])
    (work / "book.json").write_text("[" * 50000)  # a corrupt state: every output written again
    data = json.loads(invoke("book", str(book), "-o", str(out), "--json").stdout)
    assert (data["done"], data["written"]) == (0, [str(out)])


@pytest.mark.slow
def test_a_corrupt_or_missing_manifest_speaks_the_parts_again(spoken, invoke):
    book, out, work, parts = spoken
    (work / "manifest.jsonl").write_bytes(os.urandom(3000))
    r = invoke("book", str(book), "-o", str(out), "--json")
    assert r.exit_code == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["done"] == 2  # nothing vouches for them: spoken again


@pytest.mark.slow
def test_the_dry_run_calls_done_only_parts_the_manifest_vouches_for(spoken, invoke):
    book, out, work, parts = spoken
    r = invoke("book", str(book), "-o", str(out), "--dry-run", "--json")
    assert [c["done"] for c in json.loads(r.stdout)["chapters"]] == [True, True]
    parts[1].write_bytes(os.urandom(100))
    r = invoke("book", str(book), "-o", str(out), "--dry-run", "--json")
    assert sorted(c["done"] for c in json.loads(r.stdout)["chapters"]) == [False, True]
    assert parts[1].exists()  # a dry run deletes nothing


# ---------------------------------------------------------------------------- checks before the work


@pytest.mark.slow
def test_without_pyloudnorm_a_book_stops_before_the_model_loads(blocker, tmp_path):  # noqa: F811
    (tmp_path / "b.md").write_text(MD, encoding="utf-8")
    for out in ("b.m4b", "out/"):
        proc = omnivoice(blocker, "pyloudnorm", "book", "b.md", "-o", out, "--model", TINY_CKPT, cwd=tmp_path)
        line = one_line(proc, "book")
        assert "pyloudnorm" in line and "the loudness of a book's outputs" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.md"]  # no work folder, no part: nothing spoken


@pytest.mark.slow
def test_without_pyav_an_m4b_stops_before_the_model_loads(blocker, tmp_path):  # noqa: F811
    (tmp_path / "b.md").write_text(MD, encoding="utf-8")
    proc = omnivoice(blocker, "av", "book", "b.md", "-o", "b.m4b", "--model", TINY_CKPT, cwd=tmp_path)
    assert "PyAV" in one_line(proc, "book")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.md"]


def test_an_output_that_cannot_be_written_stops_before_the_model_loads(invoke, fake_engine, tmp_path, home):
    (tmp_path / "b.md").write_text(MD, encoding="utf-8")
    (tmp_path / "file").write_text("a file, not a folder")
    error_line(
        invoke("book", str(tmp_path / "b.md"), "-o", str(tmp_path / "file" / "b.m4b")), "cannot make", exit_code=2
    )
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "01-One.wav").mkdir()  # a folder where a chapter's file goes
    error_line(
        invoke("book", str(tmp_path / "b.md"), "-o", str(tmp_path / "out") + "/"), "01-One.wav is a folder", exit_code=2
    )
    assert fake_engine.loads == []


def test_the_book_run_checks_its_cover_when_planned(tmp_path):
    path = make_epub(tmp_path / "b.epub", cover=jpeg_head(64, 64) + os.urandom(500))
    run = BookRun(path, str(tmp_path / "b.m4b"), preset=None, flags={})
    run.plan(keep_text=False)
    assert run.cover_ok is False and run.tags().cover is None
    assert len(run.warnings) == 1 and re.fullmatch(
        r"the cover is not used: it does not decode \(\d+ bytes of image/jpeg: a damaged image\); "
        r"the book is written without it",
        run.warnings[0],
    ), run.warnings
