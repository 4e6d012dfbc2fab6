"""Reading a book (EPUB, Markdown, plain text) into chapters of plain text: `omnivoice book`'s input.

    book = open_book("novel.epub")            # InvalidRequest (one line naming the file) if unreadable
    book.info.title, book.info.skipped        # metadata; front/back matter and empty chapters left out
    for ch in book.chapters():                # one chapter's text in memory at a time
        ch.number, ch.title, ch.text, ch.source

A chapter's text is plain text, paragraphs separated by a blank line ("\\n\\n"); its heading is not
in it (the title is the chapter's `title`, spoken or not by the caller). Which files are which:
`.epub` (or any zip) is an EPUB, `.md`/`.markdown` Markdown, anything else UTF-8 plain text.

The readers are apart: bookread/epub.py (with epubzip.py, its zip, and xhtml.py, its documents),
bookread/markdown.py, bookread/text.py, each giving a `Book` of the types in bookread/chapters.py
(words, front/back matter by title, the file checked).

`open_book` reads the whole book once to lay out the chapters (titles, what is skipped and why,
words per chapter: `Book.outline`); `chapters()` reads each chapter again when it is asked for,
so a 50 MB text file or a large EPUB never sits in memory whole (Markdown is read whole, and an
EPUB one content document at a time). The rules, each with its table test in tests/test_bookread.py,
are in the docstrings: EPUB `check_epub` (what is refused), `_toc` and `_epub_units`
(chaptering, titles), `_matter_reason` with MATTER_TYPES and MATTER_TITLES (front and back matter),
`read_doc` and `_dropped` (XHTML as text), `_cover`; Markdown `_markdown_sections`; plain text
`_text_segments` and `text_heading`; `count_words`. docs/book.md says them for users.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ....engine.errors import InvalidRequest
from . import epub, markdown, text
from .chapters import Book, kib, regular_size
from .markdown import MARKDOWN_SUFFIXES, MAX_MARKDOWN_BYTES


def open_book(path: str | Path, *, keep_front_matter: bool = False) -> Book:
    """The book at `path`, laid out in chapters. EPUB for `.epub` or any zip file, Markdown for
    `.md`/`.markdown`, else UTF-8 plain text. InvalidRequest (one line naming the file) for a
    missing or unreadable file, one that is not a regular file or is over its limit
    (text.MAX_TEXT_BOOK_BYTES, MAX_MARKDOWN_BYTES, an EPUB's members: epubzip.MAX_MEMBER_BYTES and
    the limits beside it), MissingExtra for an EPUB without ebooklib installed."""
    path = Path(path)
    if not path.exists():
        raise InvalidRequest(f"{path}: no such file")
    size = regular_size(path)
    suffix = path.suffix.lower()
    limit = MAX_MARKDOWN_BYTES if suffix in MARKDOWN_SUFFIXES else text.MAX_TEXT_BOOK_BYTES
    is_epub = suffix == ".epub" or (suffix not in MARKDOWN_SUFFIXES and zipfile.is_zipfile(path))
    if not is_epub and size > limit:
        kind = "a Markdown book" if suffix in MARKDOWN_SUFFIXES else "a plain-text book"
        raise InvalidRequest(f"{path}: {size / 2**20:.0f} MiB, over the {kib(limit)} {kind} may be: split it")
    if is_epub:
        return epub.open_epub(path, keep_front_matter)
    if suffix in MARKDOWN_SUFFIXES:
        return markdown.open_markdown(path, keep_front_matter)
    return text.open_text(path, keep_front_matter)
