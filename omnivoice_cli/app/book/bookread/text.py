"""The plain-text reader: UTF-8 text read a line at a time (never whole), chapters at heading
lines (`text_heading`, the rule in `_text_segments`), a Project Gutenberg header and licence
skipped."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ....engine.errors import InvalidRequest
from .chapters import Book, BookInfo, ChapterRef, count_words, file_title, kib, not_utf8, open_book_file, squash

# a plain-text book is read a line at a time, so its limit is about time (256 MiB: some 45
# million words, weeks of audio)
MAX_TEXT_BOOK_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024  # one line of a plain-text book (a paragraph is far shorter)


_NUMBER_WORDS = (
    r"(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[-\s](?:one|two|three|four|five|six|seven|eight|nine))?"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
    r"|seventeen|eighteen|nineteen"
)
_ROMAN = r"(?=[mdclxvi])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"
_NUMBERED = r"chapter|chap\.|part|book"
_NAMED = r"prologue|epilogue|preface|introduction|afterword|interlude"
TEXT_HEADING_RE = re.compile(
    rf"(?P<head>(?:{_NUMBERED})\s+(?:\d{{1,4}}|{_ROMAN}|{_NUMBER_WORDS})\b|(?:{_NAMED})\b)"
    r"(?:\s*[.:]?|\s*[.:\-\u2013\u2014]\s*(?P<title>\S.{0,79}))",
    re.IGNORECASE,
)
TEXT_TITLE_MAX_WORDS = 10
_GUTENBERG_START_RE = re.compile(r"\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
_GUTENBERG_END_RE = re.compile(r"\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)


def text_heading(line: str) -> tuple[str, bool] | None:
    """(title, has its own title) when the line, stripped, is a chapter heading on its own:
    "Chapter 12", "CHAPTER XII.", "Chapter Twelve", "Chapter 3: The Storm", "Part II", "Book One",
    "Prologue"; else None. A heading's own title (after ":", ".", "-" or a dash) is at most
    TEXT_TITLE_MAX_WORDS words, so "Chapter 12 was where..." or a sentence is not one."""
    m = TEXT_HEADING_RE.fullmatch(line.strip())
    if not m:
        return None
    title = m.group("title")
    if title is not None and len(title.split()) > TEXT_TITLE_MAX_WORDS:
        return None
    head = squash(m.group("head"))
    if title is None:
        return head, False
    return f"{head}: {squash(title).rstrip('.')}", True


def _subtitle(line: str) -> str | None:
    """The line under a bare "CHAPTER I" that names it ("Down the Rabbit-Hole"), when it can."""
    text = squash(line)
    if not text or len(text) > 80 or len(text.split()) > TEXT_TITLE_MAX_WORDS or text_heading(text):
        return None
    return text.rstrip(".")


def _bounded_lines(path: Path, f, lineno: int = 1, offset: int = 0) -> Iterator[bytes]:
    """The raw lines of the open book `f`, each at most MAX_LINE_BYTES and all together at most
    MAX_TEXT_BOOK_BYTES (the file may grow after it was measured): InvalidRequest beyond."""
    for raw in iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""):
        if len(raw) > MAX_LINE_BYTES:
            raise InvalidRequest(
                f"{path}: line {lineno} is over {kib(MAX_LINE_BYTES)} long: not a book's text "
                "(a plain-text book has a line a paragraph at most)"
            )
        offset += len(raw)
        if offset > MAX_TEXT_BOOK_BYTES:
            raise InvalidRequest(f"{path}: over the {kib(MAX_TEXT_BOOK_BYTES)} a plain-text book may be: split it")
        lineno += 1
        yield raw


def _lines(path: Path) -> Iterator[tuple[int, int, str]]:
    """(line number, byte offset, text) of each line, decoded as UTF-8 (a BOM dropped)."""
    with open_book_file(path) as f:
        offset = 0
        for lineno, raw in enumerate(_bounded_lines(path, f), 1):
            start = offset
            offset += len(raw)
            skip = 3 if lineno == 1 and raw.startswith(codecs.BOM_UTF8) else 0
            try:
                line = raw[skip:].decode("utf-8")
            except UnicodeDecodeError as e:
                raise not_utf8(path, raw, lineno, raw[e.start + skip]) from None
            yield lineno, start, line.rstrip("\r\n")


@dataclass
class _Segment:
    title: str
    from_book: bool  # the title is the book's own (a heading), not the file's name
    line: int  # the heading's line (or the first text line)
    start: int  # byte offset where its text starts
    end: int = -1  # byte offset where it ends (-1: the end of the file)
    words: int = 0


def _text_segments(path: Path, keep: bool) -> tuple[list[_Segment], list[str]]:
    """The plain-text rule: a chapter starts at a heading line (text_heading) that stands alone:
    a blank line (or the file's start) before it and a blank line (or the end) after it, or after
    the one short line under it that names it ("CHAPTER I." then "Down the Rabbit-Hole": title
    "CHAPTER I: Down the Rabbit-Hole"). Text before the first heading is a chapter titled from the
    file's name. A Project Gutenberg file's header (up to "*** START OF ...") and licence (from
    "*** END OF ...") are skipped as front/back matter."""
    segments: list[_Segment] = [_Segment(file_title(path), False, 1, 0)]
    skipped: list[str] = []
    prev_blank = True
    pending: list[tuple[int, int, str]] = []  # the lines of a heading not yet confirmed
    head: tuple[str, bool] = ("", False)  # text_heading of its first line
    for lineno, offset, line in _lines(path):
        blank = not line.strip()
        if not keep and _GUTENBERG_START_RE.match(line.strip()):
            segments, pending = [_Segment(file_title(path), False, lineno + 1, offset + len(line) + 1)], []
            skipped = [f"Project Gutenberg header (front matter, before line {lineno})"]
            prev_blank = True
            continue
        if not keep and _GUTENBERG_END_RE.match(line.strip()):
            segments[-1].end = offset
            skipped.append(f"Project Gutenberg licence (back matter, from line {lineno})")
            pending = []
            break
        if pending:
            if blank:
                title = head[0] if len(pending) == 1 else f"{head[0].rstrip('.')}: {_subtitle(pending[1][2])}"
                segments[-1].end = pending[0][1]
                segments.append(_Segment(title, True, pending[0][0], offset))
                pending = []
            elif len(pending) == 1 and not head[1] and _subtitle(line):
                pending.append((lineno, offset, line))
                continue
            else:
                for p in pending:
                    segments[-1].words += count_words(p[2])
                pending = []
        elif prev_blank and not blank and (found := text_heading(line)):
            pending, head = [(lineno, offset, line)], found
            continue
        segments[-1].words += count_words(line) if not blank else 0
        prev_blank = blank
    if pending:  # a heading on the last lines
        title = head[0] if len(pending) == 1 else f"{head[0].rstrip('.')}: {_subtitle(pending[1][2])}"
        segments[-1].end = pending[0][1]
        segments.append(_Segment(title, True, pending[0][0], -2))  # -2: nothing after it
    return segments, skipped


def _text_paragraphs(lines: Iterator[str]) -> str:
    """Lines as paragraphs: a blank line ends one, the lines of one are joined by a space."""
    paragraphs: list[str] = []
    buf: list[str] = []
    for line in lines:
        if line.strip():
            buf.append(line)
        elif buf:
            paragraphs.append(squash(" ".join(buf)))
            buf = []
    if buf:
        paragraphs.append(squash(" ".join(buf)))
    return "\n\n".join(p for p in paragraphs if p)


def _segment_lines(path: Path, start: int, end: int) -> Iterator[str]:
    if start < 0:
        return
    with open_book_file(path) as f:
        f.seek(start)
        pos = start
        for raw in _bounded_lines(path, f, offset=start):
            if 0 <= end <= pos:
                break
            if pos == 0 and raw.startswith(codecs.BOM_UTF8):
                pos, raw = 3, raw[3:]
            pos += len(raw)
            yield raw.decode("utf-8").rstrip("\r\n")


def open_text(path: Path, keep: bool) -> Book:
    segments, skipped = _text_segments(path, keep)
    outline: list[ChapterRef] = []
    spans: dict[int, tuple[int, int]] = {}
    for seg in segments:
        if seg.words == 0:
            if seg.from_book:
                skipped.append(f"{seg.title} (no text)")
            continue
        n = len(outline) + 1
        outline.append(ChapterRef(n, seg.title, f"{path.name} line {seg.line}", seg.words))
        spans[n] = (seg.start, seg.end)

    def read(refs: list[ChapterRef]) -> Iterator[str]:
        for ref in refs:
            yield _text_paragraphs(_segment_lines(path, *spans[ref.number]))

    info = BookInfo(None, None, None, None, None, tuple(skipped), "text")
    return Book(info, tuple(outline), read)


# ------------------------------------------------------------------------------------------ Markdown
