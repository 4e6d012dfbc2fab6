"""The EPUB reader: the zip checked and its members read bounded (epubzip.py), its package,
navigation and NCX read by ebooklib (bounded, `_reader_class`), the content documents read from
the zip one at a time as XHTML text (xhtml.py); chaptering and titles (`_toc`, `_epub_units`),
front and back matter (`_matter_reason`), the cover (`_cover`). ebooklib and lxml (the `book`
extra) are imported when an EPUB is read."""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from ....engine.errors import InvalidRequest, MissingExtra
from ....media.m4b import MAX_COVER_BYTES, cover_problem
from .chapters import MATTER_TYPES, Book, BookInfo, ChapterRef, count_words, kib, matter_by_title, speakable, squash
from .epubzip import MAX_META_INF_BYTES, MAX_PACKAGE_BYTES, MemberTooBig, check_epub, read_member
from .xhtml import Document, drop_title, epub_types, parse_xhtml, read_doc, tag_name

_XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


def _reader_class():
    """ebooklib's EpubReader, reading only the package, the navigation document and the NCX: the
    content documents and images are read from the zip one at a time when needed."""
    from ebooklib import epub

    class _Reader(epub.EpubReader):
        _lazy = False
        toc_base = ""  # the folder the TOC's hrefs are relative to (the NCX's; the nav's are resolved)

        def read_file(self, name):
            """The container, the package, the navigation document and the NCX: bounded."""
            if self._lazy:
                return b""
            name = posixpath.normpath(name)
            return read_member(self.zf, name, MAX_META_INF_BYTES if name.startswith("META-INF/") else MAX_PACKAGE_BYTES)

        def _load_manifest(self):
            self._lazy = True
            try:
                super()._load_manifest()
            finally:
                self._lazy = False
            for item in self.book.get_items():
                if isinstance(item, (epub.EpubNav, epub.EpubNcx)):
                    item.content = self.read_file(posixpath.join(self.opf_dir, item.file_name))

        def _parse_nav(self, data, base_path, navtype="toc"):
            try:
                super()._parse_nav(data, base_path, navtype)
            except Exception:  # a navigation document without a usable list: the NCX or the headings
                pass

        def _load_opf_file(self):
            super()._load_opf_file()
            nav = next((i for i in self.book.get_items() if isinstance(i, epub.EpubNav)), None)
            ncx = next((i for i in self.book.get_items() if isinstance(i, epub.EpubNcx)), None)
            if ncx is not None and (nav is None or not self.book.toc):
                if not self.book.toc:
                    try:
                        self._parse_ncx(ncx.content)
                    except Exception:
                        self.book.toc = []
                self.toc_base = posixpath.dirname(ncx.file_name)

    return _Reader


def _load_epub(path: Path):
    """(ebooklib's book, its reader): InvalidRequest for a package ebooklib cannot read."""
    try:
        import ebooklib.epub  # noqa: F401
    except ImportError:
        raise MissingExtra(f"{path}: reading an EPUB", "ebooklib", "book") from None
    reader = _reader_class()(str(path), {"ignore_ncx": True})
    try:
        return reader.load(), reader
    except InvalidRequest:
        raise
    except Exception as e:  # ebooklib raises what lxml, zipfile and its own code raise
        raise InvalidRequest(f"{path}: not a readable EPUB ({type(e).__name__}: {squash(str(e))[:200]})") from None


def _href_file(base: str, href: str | None) -> str | None:
    """A link's file, relative to the package (OPF) folder: fragment dropped, %-escapes decoded."""
    file = unquote((href or "").partition("#")[0])
    return posixpath.normpath(posixpath.join(base, file)) if file else None


def _flat_toc(entries, parent=None) -> Iterator[tuple[object, object]]:
    """(entry, its parent entry or None), depth first."""
    if entries and not isinstance(entries, (tuple, list)):
        entries = [entries]  # ebooklib's NCX reading gives a lone entry bare
    for entry in entries or ():
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], (list, tuple)):
            yield entry[0], parent
            yield from _flat_toc(entry[1], entry[0])
        elif isinstance(entry, (tuple, list)):
            yield from _flat_toc(entry, parent)
        else:
            yield entry, parent


@dataclass
class _Toc:
    titles: dict[tuple[str, str | None], str]  # (file, anchor or None) -> title
    splits: dict[str, frozenset[str]]  # a file the TOC cuts at anchors -> those anchors

    def title(self, file: str, anchor: str | None) -> str | None:
        return self.titles.get((file, anchor if file in self.splits else None))

    def names(self, file: str) -> bool:
        return any(f == file for f, _ in self.titles)


def _toc(book, base: str) -> _Toc:
    """The TOC (navigation document, else NCX), every level (parts and their chapters). A file
    it links to is titled by the first link to it. A file it links to at anchors ("book.xhtml#ch2")
    is cut there, each part titled by its link, when two or more such links, or one and a link to
    the file itself, are not sections of a chapter in that file (their TOC parent links elsewhere)."""
    links: dict[str, list[tuple[str | None, str, bool]]] = {}  # file -> (anchor, title, a section of the file)
    for entry, parent in _flat_toc(book.toc):
        href = getattr(entry, "href", None) or ""
        file, title = _href_file(base, href), squash(getattr(entry, "title", None) or "")
        if not file or not title:
            continue
        anchor = unquote(href.partition("#")[2]) or None
        section = parent is not None and _href_file(base, getattr(parent, "href", None)) == file
        if all(a != anchor for a, _, _ in links.setdefault(file, [])):
            links[file].append((anchor, title, section))
    titles: dict[tuple[str, str | None], str] = {}
    splits: dict[str, frozenset[str]] = {}
    for file, entries in links.items():
        cuts = [(a, t) for a, t, section in entries if a and not section]
        whole = [t for a, t, _ in entries if a is None]
        if len(cuts) >= 2 or (cuts and whole):
            splits[file] = frozenset(a for a, _ in cuts)
            titles.update({(file, a): t for a, t in cuts})
            if whole:
                titles[(file, None)] = whole[0]
        else:
            titles[(file, None)] = entries[0][1]
    return _Toc(titles, splits)


def _structure_types(book, reader) -> dict[str, list[str]]:
    """Each file the EPUB 2 guide or the EPUB 3 landmarks name, with how: ["guide type toc"]."""
    from ebooklib import epub

    out: dict[str, list[str]] = {}
    for ref in getattr(book, "guide", None) or ():
        file = _href_file("", ref.get("href"))
        if file and ref.get("type"):
            out.setdefault(file, []).append(f"guide type {ref['type'].lower()}")
    for nav in book.get_items():
        if not isinstance(nav, epub.EpubNav) or not nav.content:
            continue
        root = parse_xhtml(nav.content)
        for el in root.iter() if root is not None else ():
            if tag_name(el) == "nav" and "landmarks" in epub_types(el):
                for a in el.iter():
                    file = _href_file(posixpath.dirname(nav.file_name), a.get("href")) if tag_name(a) == "a" else None
                    if file:
                        out.setdefault(file, []).extend(f"landmarks type {t}" for t in epub_types(a))
    return out


def _image_type(data: bytes) -> str | None:
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    return None


def _cover_page_image(data: bytes, page: str) -> str | None:
    """The first image a cover page (XHTML) shows: <img src> or SVG <image xlink:href>."""
    root = parse_xhtml(data)
    for el in root.iter() if root is not None else ():
        src = (
            el.get("src")
            if tag_name(el) == "img"
            else el.get(_XLINK_HREF) or el.get("href")
            if tag_name(el) == "image"
            else None
        )
        if src:
            return _href_file(posixpath.dirname(page), src)
    return None


def _cover(
    book, zf: zipfile.ZipFile, opf_dir: str, structure: dict[str, list[str]], warnings: list[str]
) -> tuple[bytes | None, str | None]:
    """The cover image: the manifest's cover-image item, else the item <meta name="cover"> names,
    else the image on the page the guide or landmarks call the cover; JPEG or PNG only. A cover
    over media.m4b's limits (MAX_COVER_BYTES, MAX_COVER_PIXELS: its size read from the image's
    header, never decoded), or whose header does not read, is not used: a warning says why."""
    import ebooklib

    files = [item.file_name for item in book.get_items_of_type(ebooklib.ITEM_COVER)]
    for _, attrs in book.get_metadata("OPF", "cover"):
        item = book.get_item_with_id((attrs or {}).get("content"))
        if item is not None:
            files.append(item.file_name)
    for page, how in structure.items():
        if any(h.endswith(" cover") for h in how):
            try:
                files.append(_cover_page_image(read_member(zf, posixpath.join(opf_dir, page)), page))
            except KeyError:
                pass
    for file in dict.fromkeys(files):
        try:
            data = read_member(zf, posixpath.normpath(posixpath.join(opf_dir, file)), MAX_COVER_BYTES) if file else b""
        except KeyError:
            continue
        except MemberTooBig:
            warnings.append(f"the cover {file} is not used: it is over {kib(MAX_COVER_BYTES)} unpacked")
            return None, None
        if _image_type(data):
            problem = cover_problem(data)
            if problem is not None:
                warnings.append(f"the cover {file} is not used: {problem}")
                return None, None
            return data, _image_type(data)
    return None, None


def _metadata(book) -> tuple[str | None, str | None, str | None]:
    def values(name: str) -> list[str]:
        return [v for v in (squash(value or "") for value, _ in book.get_metadata("DC", name)) if v]

    titles, creators, languages = values("title"), values("creator"), values("language")
    author = ", ".join(dict.fromkeys(creators)) or None
    return (titles[0] if titles else None), author, (languages[0] if languages else None)


_XHTML_TYPES = ("application/xhtml+xml", "text/html", "application/html+xml")
TITLE_MAX_CHARS = 150  # a longer "heading" is not used as a title


@dataclass
class _Unit:
    title: str | None  # the book's own: the TOC's, else the first heading
    pieces: list[tuple[str, str | None]]  # (file, anchor): the documents (or parts) it reads
    reason: str | None  # why it is front/back matter, when it is
    paragraphs: list[str]

    def source(self) -> str:
        return ", ".join(f + (f"#{a}" if a else "") for f, a in self.pieces)


def _matter_reason(
    file: str, linear: str, is_nav: bool, doc: Document, structure: dict, title: str | None
) -> str | None:
    """The EPUB front/back matter rule, first match: the navigation document itself; a file the
    guide or landmarks give a MATTER_TYPES type; a document whose <body> (or its wrapping
    <section>) has one as epub:type or doc- role; a spine item marked linear="no"; a title in
    MATTER_TITLES."""
    if is_nav:
        return "the navigation document"
    for how in structure.get(file, ()):
        if how.rpartition(" ")[2] in MATTER_TYPES:
            return how
    for t in sorted(doc.types & MATTER_TYPES):
        return f"epub:type {t}"
    if (linear or "yes").strip().lower() == "no":
        return 'linear="no" in the spine'
    if title and matter_by_title(title):
        return "by its title"
    return None


def _epub_units(zf: zipfile.ZipFile, opf_dir: str, book, toc: _Toc, structure: dict, skipped: list) -> Iterator[_Unit]:
    """The spine, in order, as chapters-to-be. The EPUB chaptering rule: a spine document (or a
    part of one the TOC cuts at anchors, see _toc) is a chapter of its own, titled by the TOC's
    link to it, else by its first heading. When the TOC links to some spine documents, one it does
    not link to that has no heading and is not front or back matter continues the chapter before it
    (a chapter split over files)."""
    from ebooklib import epub

    spine = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is not None:
            spine.append((posixpath.normpath(item.file_name), linear, isinstance(item, epub.EpubNav), item.media_type))
    named_any = any(toc.names(file) for file, *_ in spine)
    unit = None
    for file, linear, is_nav, media_type in spine:
        if media_type not in _XHTML_TYPES and not file.lower().endswith((".xhtml", ".html", ".htm")):
            skipped.append(f"{file} (not a text document: {media_type})")
            continue
        try:
            doc = read_doc(read_member(zf, posixpath.join(opf_dir, file)), toc.splits.get(file, ()))
        except KeyError:
            skipped.append(f"{file} (missing from the EPUB)")
            continue
        for anchor, paragraphs, heading in doc.pieces():
            if anchor is None and not paragraphs and doc.cuts:
                continue  # nothing before the first anchor
            heading = heading if heading and len(heading) <= TITLE_MAX_CHARS else None
            toc_title = toc.title(file, anchor)
            title = toc_title or heading
            reason = _matter_reason(file, linear, is_nav, doc, structure, title)
            if unit is not None and named_any and toc_title is None and reason is None and heading is None:
                unit.pieces.append((file, anchor))
                unit.paragraphs += paragraphs
                continue
            if unit is not None:
                yield unit
            unit = _Unit(title, [(file, anchor)], reason, paragraphs)
    if unit is not None:
        yield unit


def open_epub(path: Path, keep: bool) -> Book:
    check_epub(path)
    book, reader = _load_epub(path)
    opf_dir = reader.opf_dir
    toc = _toc(book, reader.toc_base)
    structure = _structure_types(book, reader)
    skipped: list[str] = []
    outline: list[ChapterRef] = []
    plan: dict[int, tuple[list[tuple[str, str | None]], str | None]] = {}
    warnings: list[str] = []
    with zipfile.ZipFile(path) as zf:
        cover, cover_type = _cover(book, zf, opf_dir, structure, warnings)
        for unit in _epub_units(zf, opf_dir, book, toc, structure, skipped):
            name = unit.title or unit.pieces[0][0]
            if unit.reason and not keep:
                skipped.append(f"{name} ({'back' if outline else 'front'} matter, {unit.reason})")
                continue
            text = "\n\n".join(drop_title(unit.paragraphs, unit.title))
            if not speakable(text):
                skipped.append(f"{name} (no text)")
                continue
            n = len(outline) + 1
            outline.append(ChapterRef(n, unit.title or f"Chapter {n}", unit.source(), count_words(text)))
            plan[n] = (unit.pieces, unit.title)

    def read(refs: list[ChapterRef]) -> Iterator[str]:
        last: tuple[str, dict] | None = None  # the document read last, in parts (a book in one file is read once)
        with zipfile.ZipFile(path) as zf:
            for ref in refs:
                pieces, title = plan[ref.number]
                paragraphs = []
                for file, anchor in pieces:
                    if last is None or last[0] != file:
                        doc = read_doc(read_member(zf, posixpath.join(opf_dir, file)), toc.splits.get(file, ()))
                        last = (file, {a: p for a, p, _ in doc.pieces()})
                    paragraphs += last[1].get(anchor, [])
                yield "\n\n".join(drop_title(paragraphs, title))

    title, author, language = _metadata(book)
    info = BookInfo(title, author, language, cover, cover_type, tuple(skipped), "epub", tuple(warnings))
    return Book(info, tuple(outline), read)
