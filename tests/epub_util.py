"""EPUBs made in a test with ebooklib (the `book` extra): make_epub(path, ...) -> path.

    from tests.epub_util import make_epub, tiny_png, CHAPTERS
    make_epub(tmp_path / "book.epub")   # the issue's check-1 book: a cover, a contents page, a
                                        # copyright page, 3 titled chapters, the 2nd with an image
                                        # and a footnote

What a reader should make of the default book: 3 chapters, CHAPTERS' titles in order, the texts
CHAPTER_TEXTS; the cover bytes tiny_png(); metadata TITLE, AUTHOR, LANGUAGE; none of the words of
IMAGE_ALT or FOOTNOTE_BODY, no footnote marker.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

TITLE = "The Lighthouse Keeper"
AUTHOR = "Ada Quill"
LANGUAGE = "en"
IMAGE_ALT = "A drawing of the lighthouse"
FOOTNOTE_BODY = "The lamp was lit by whale oil until 1870."
FOOTNOTE_MARKER = "1"

CHAPTERS: list[tuple[str, str]] = [
    (
        "The Storm",
        "<p>The wind rose in the evening and did not stop.</p><p>By midnight the sea was white.</p>",
    ),
    (
        "The Lamp",
        "<p>She climbed the stairs with the oil.</p><p>It was the oldest lamp on the coast.</p>",
    ),
    (
        "The Morning",
        "<p>At dawn a ship came round the point, its sails torn.</p><p>Nobody on the shore said a word.</p>",
    ),
]
FOOTNOTED = (
    '<p>The keeper trimmed the wick<a epub:type="noteref" href="#fn1" id="r1"><sup>1</sup></a> twice a night.</p>'
)
FOOTNOTED_TEXT = "The keeper trimmed the wick twice a night."
# Each default chapter's text as the reader gives it: its heading not in it, paragraphs apart, the
# image, the footnote marker and the footnote body gone.
CHAPTER_TEXTS = [
    "The wind rose in the evening and did not stop.\n\nBy midnight the sea was white.",
    "She climbed the stairs with the oil.\n\nIt was the oldest lamp on the coast.\n\n" + FOOTNOTED_TEXT,
    "At dawn a ship came round the point, its sails torn.\n\nNobody on the shore said a word.",
]


def tiny_png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid PNG of one colour (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def jpeg_head(width: int = 2, height: int = 2) -> bytes:
    """The start of a JPEG (SOI, then a baseline frame header giving its size): what the book's
    reader reads of a cover (its header), not an image that decodes."""
    return b"\xff\xd8" + b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"


def _page(epub, uid: str, file_name: str, title: str, body: str, epub_type: str | None = None):
    page = epub.EpubHtml(uid=uid, file_name=file_name, title=title, lang=LANGUAGE)
    wrapper = f'<section epub:type="{epub_type}">{body}</section>' if epub_type else body
    page.content = f"<html><head><title>{title}</title></head><body>{wrapper}</body></html>"
    return page


def make_epub(
    path: str | Path,
    *,
    chapters: list[tuple[str, str]] | None = None,
    title: str | None = TITLE,
    author: str | None = AUTHOR,
    language: str = LANGUAGE,
    cover: bytes | None = b"default",
    toc_page: bool = True,
    copyright_page: bool = True,
    with_image: bool = True,
    footnote: bool = True,
    encrypted: bool = False,
    obfuscated_font: bool = False,
    matter_types: bool = True,
    toc: bool = True,
    headings: bool = True,
    nav_in_spine: bool = False,
    extra_spine: list[tuple[str, str, str]] | None = None,
    toc_links: list | None = None,
    nav: bool = True,
) -> Path:
    """An EPUB 3 (with an NCX too) at `path`. `chapters`: (title, body HTML) each, a file
    chap_NN.xhtml with an <h1> of the title when `headings`, linked from the TOC when `toc`.
    `cover`: image bytes (default tiny_png()) or None. `toc_page`/`copyright_page`: a "Contents" and
    a "Copyright" page before the chapters, typed (epub:type toc / copyright-page and guide
    entries) when `matter_types`, else known only by their titles. `with_image`/`footnote`: the
    2nd chapter (the only one if there is one) gets an <img> and a noteref + <aside> footnote.
    `encrypted`: a META-INF/encryption.xml encrypting chap_01.xhtml (DRM); `obfuscated_font`: one
    obfuscating a font only (not DRM). `extra_spine`: (file name, title, body HTML) pages after the
    chapters, in the spine but not in the TOC. `toc_links`: the TOC instead, as (href, title) links
    and (href, title, [children]) sections."""
    from ebooklib import epub

    path = Path(path)
    chapters = list(CHAPTERS if chapters is None else chapters)
    book = epub.EpubBook()
    book.set_identifier("test-book-0001")
    if title is not None:
        book.set_title(title)
    book.set_language(language)
    if author is not None:
        book.add_author(author)
    spine: list = []
    if cover is not None:
        book.set_cover("images/cover.png", tiny_png() if cover == b"default" else cover)
        spine.append("cover")
        if matter_types:
            book.guide.append({"href": "cover.xhtml", "title": "Cover", "type": "cover"})
    if nav_in_spine:
        spine.append("nav")
    items = []
    if toc_page:
        links = "".join(f'<li><a href="chap_{i + 1:02d}.xhtml">{t}</a></li>' for i, (t, _) in enumerate(chapters))
        body = f"<h1>Contents</h1><ol>{links}</ol>"
        items.append(_page(epub, "contents", "contents.xhtml", "Contents", body, "toc" if matter_types else None))
        if matter_types:
            book.guide.append({"href": "contents.xhtml", "title": "Contents", "type": "toc"})
    if copyright_page:
        body = f"<h1>Copyright</h1><p>Copyright \u00a9 2024 {author}. All rights reserved.</p>"
        items.append(
            _page(epub, "copyright", "copyright.xhtml", "Copyright", body, "copyright-page" if matter_types else None)
        )
        if matter_types:
            book.guide.append({"href": "copyright.xhtml", "title": "Copyright", "type": "copyright-page"})
    spine += items
    chapter_items = []
    special = 1 if len(chapters) > 1 else 0
    for i, (ch_title, html) in enumerate(chapters):
        body = (f"<h1>{ch_title}</h1>" if headings else "") + html
        if i == special and with_image:
            book.add_item(
                epub.EpubImage(
                    uid="figure", file_name="images/figure.png", media_type="image/png", content=tiny_png(4, 4)
                )
            )
            body += f'<figure><img src="images/figure.png" alt="{IMAGE_ALT}"/></figure>'
        if i == special and footnote:
            body += FOOTNOTED + f'<aside epub:type="footnote" id="fn1"><p>{FOOTNOTE_BODY}</p></aside>'
        chapter_items.append(_page(epub, f"chap{i + 1}", f"chap_{i + 1:02d}.xhtml", ch_title, body))
    for name, page_title, html in extra_spine or ():
        chapter_items.append(_page(epub, name.replace(".", "_"), name, page_title, html))
    for item in items + chapter_items:
        book.add_item(item)
    spine += chapter_items
    book.toc = (
        [epub.Link(f"chap_{i + 1:02d}.xhtml", t, f"chap{i + 1}") for i, (t, _) in enumerate(chapters)] if toc else []
    )
    if toc_links is not None:
        book.toc = _toc(epub, toc_links)
    book.add_item(epub.EpubNcx())
    if nav:
        book.add_item(epub.EpubNav())
    book.spine = spine
    epub.write_epub(str(path), book)
    if encrypted or obfuscated_font:
        _add_encryption(path, encrypted, obfuscated_font)
    return path


def rewrite(path: str | Path, member: str, edit) -> Path:
    """The EPUB at `path` with one member's bytes replaced by edit(bytes) (in place)."""
    path = Path(path)
    with zipfile.ZipFile(path) as zf:
        files = [(info, zf.read(info.filename)) for info in zf.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in files:
            zf.writestr(info, edit(data) if info.filename == member else data)
    return path


def _toc(epub, links: list) -> list:
    out = []
    for n, link in enumerate(links):
        href, title, *children = link
        if children:
            out.append((epub.Section(title, href=href), _toc(epub, children[0])))
        else:
            out.append(epub.Link(href, title, f"l{abs(hash((href, n)))}"))
    return out


def _add_encryption(path: Path, encrypted: bool, obfuscated_font: bool) -> None:
    entries = []
    if encrypted:
        entries.append(("http://www.w3.org/2001/04/xmlenc#aes128-cbc", "EPUB/chap_01.xhtml"))
    if obfuscated_font:
        entries.append(("http://www.idpf.org/2008/embedding", "EPUB/fonts/serif.otf"))
    data = "".join(
        '<enc:EncryptedData xmlns:enc="http://www.w3.org/2001/04/xmlenc#">'
        f'<enc:EncryptionMethod Algorithm="{alg}"/>'
        f'<enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData>'
        for alg, uri in entries
    )
    xml = (
        f'<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container">{data}</encryption>'
    )
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("META-INF/encryption.xml", xml)
        if obfuscated_font:
            zf.writestr("EPUB/fonts/serif.otf", b"\x00" * 64)
