"""The chapters of a book, whatever its format: the types the readers give (Book, Chapter,
ChapterRef, BookInfo), words (count_words), front and back matter by title (matter_by_title), and
the book's file opened and checked (a regular file, bounded), shared by the three readers."""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from ....engine.errors import InvalidRequest


@dataclass(frozen=True)
class Chapter:
    number: int  # 1-based, in reading order, after skipping front/back matter and empty chapters
    title: str  # from the navigation/TOC, a heading, a "Chapter 12" line; else "Chapter N" / the file's name
    text: str  # plain text; paragraphs separated by "\n\n"
    source: str  # an EPUB item's href ("Text/ch1.xhtml"), "notes.md line 12", "book.txt line 40"


@dataclass(frozen=True)
class ChapterRef:
    """A chapter as open_book laid it out (no text): for a dry run, a progress total, a selection."""

    number: int
    title: str
    source: str
    words: int


@dataclass(frozen=True)
class BookInfo:
    title: str | None  # the book's own (EPUB metadata, Markdown front matter); None when it says none
    author: str | None  # its creators, joined by ", "
    language: str | None  # as the book gives it ("en", "en-GB")
    cover: bytes | None  # the cover image, JPEG or PNG only (other formats are not used)
    cover_type: str | None  # "image/jpeg" | "image/png", from the bytes themselves
    skipped: tuple[str, ...] = ()  # each "TITLE (why)": front/back matter, empty chapters
    format: str = "text"  # "epub" | "markdown" | "text"
    warnings: tuple[str, ...] = ()  # what was read past (a cover not used, and why)


class Book:
    """A book laid out in chapters: `info`, `outline` (the chapters without text), `chapters()`."""

    def __init__(
        self, info: BookInfo, outline: tuple[ChapterRef, ...], read: Callable[[list[ChapterRef]], Iterator[str]]
    ):
        self.info = info
        self.outline = outline
        self._read = read

    def __len__(self) -> int:
        return len(self.outline)

    def chapters(self, numbers: Collection[int] | None = None) -> Iterator[Chapter]:
        """The chapters in order (only those `numbers` when given), each read when reached."""
        wanted = [ref for ref in self.outline if numbers is None or ref.number in numbers]
        for ref, text in zip(wanted, self._read(wanted)):
            yield Chapter(ref.number, ref.title, text, ref.source)


# ----------------------------------------------------------------------------------------- words

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")
_SPEAKABLE_RE = re.compile(r"[^\W_]")  # a letter or a digit, in any script


def count_words(text: str) -> int:
    """Words in `text`: runs between spaces that hold a letter or a digit ("--" and "*" are not
    words), and each Chinese character or Japanese kana/kanji one word (they are written without
    spaces). Streams over the text (no list of words), so a huge text counts in little memory."""
    n = 0
    for m in _TOKEN_RE.finditer(text):
        token = m.group()
        if _SPEAKABLE_RE.search(token):
            n += 1
    return n


def speakable(text: str) -> bool:
    return _SPEAKABLE_RE.search(text) is not None


def squash(text: str) -> str:
    """Runs of white space (newlines, no-break spaces) as one space; soft hyphens and zero-width
    characters dropped."""
    return " ".join(text.replace("\xad", "").replace("\u200b", "").replace("\ufeff", "").split())


# ----------------------------------------------------------------------------------- front/back matter

# Chapter titles that mark front or back matter (compared case-insensitively, punctuation and
# spaces aside): what each is, and the titles. Titles that start with one of MATTER_TITLE_PREFIXES
# (advertisements for other books) too. Only titles the book gives count: not a file-name or a
# "Chapter N" fallback.
MATTER_TITLES: dict[str, tuple[str, ...]] = {
    "cover": ("cover", "front cover", "back cover", "cover page"),
    "title page": ("title page", "title", "half title", "half title page", "halftitle"),
    "table of contents": ("contents", "table of contents", "toc", "brief contents"),
    "copyright page": ("copyright", "copyright page", "copyright notice", "copyrights", "imprint", "legal notice"),
    "list of illustrations": ("list of illustrations", "list of figures", "list of tables", "illustrations"),
    "colophon": ("colophon",),
    "index": ("index", "general index"),
    "notes": ("notes", "endnotes", "footnotes"),
    "bibliography": ("bibliography", "references", "works cited"),
    "glossary": ("glossary",),
}
MATTER_TITLE_PREFIXES = ("also by", "other books by", "other titles by", "books by", "more from", "about the publisher")
# EPUB structural types (epub:type on the document's <body>/<section>, EPUB 3 landmarks, EPUB 2
# guide types, DPUB-ARIA roles as doc-TYPE) that mark front or back matter. Not skipped, because
# audiobooks read them: dedication, epigraph, foreword, preface, introduction, prologue, epilogue,
# afterword, acknowledgments, appendix.
MATTER_TYPES = frozenset(
    {
        "cover",
        "titlepage",
        "title-page",
        "halftitlepage",
        "toc",
        "loi",
        "lot",
        "lov",
        "loa",
        "copyright-page",
        "imprint",
        "colophon",
        "index",
        "glossary",
        "bibliography",
        "notes",
        "footnotes",
        "endnotes",
        "rearnotes",
        "errata",
        "landmarks",
        "page-list",
        "other-credits",
    }
)
_TITLE_KEY_RE = re.compile(r"[^\w\s]+")


def _title_key(title: str) -> str:
    return " ".join(_TITLE_KEY_RE.sub(" ", title.casefold()).split())


def matter_by_title(title: str) -> str | None:
    """What front/back matter a chapter title names ("table of contents"), or None."""
    key = _title_key(title)
    for what, titles in MATTER_TITLES.items():
        if key in titles:
            return what
    if key.startswith(MATTER_TITLE_PREFIXES):
        return "advertisement"
    return None


def file_title(path: Path) -> str:
    """A chapter title from the file's name: "my_notes.md" -> "my notes"."""
    return " ".join(re.sub(r"[-_]+", " ", path.stem).split()) or path.name


# ----------------------------------------------------------------------------------------- open


# ----------------------------------------------------------------------------------------- the file


def kib(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} bytes"


def regular_size(path: Path) -> int:
    """The size of the book's file; InvalidRequest when it is not a regular file: a device such
    as /dev/zero, a FIFO or a socket would be read without end (or wait for a writer)."""
    try:
        info = path.stat()
    except OSError as e:
        raise InvalidRequest(f"{path}: cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidRequest(f"{path}: a folder, not a book (EPUB, Markdown or plain text)")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidRequest(f"{path}: not a regular file (a device, a FIFO or a socket): give the book's file")
    return info.st_size


def open_book_file(path: Path):
    """The book's file opened for reading, checked to be a regular file once open (O_NONBLOCK:
    a FIFO put in its place after the check does not hang the open)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise InvalidRequest(f"{path}: cannot be read: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InvalidRequest(f"{path}: not a regular file (a device, a FIFO or a socket): give the book's file")
    return os.fdopen(fd, "rb")


def not_utf8(path: Path, head: bytes, line: int, byte: int) -> InvalidRequest:
    hint = " (it is UTF-16)" if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else ""
    return InvalidRequest(f"{path}: not UTF-8 text{hint}: line {line} has the byte 0x{byte:02x}; save it as UTF-8")
