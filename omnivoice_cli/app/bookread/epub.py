"""The EPUB reader: a zip checked (`_epub_checks`: what is refused, DRM among it), its package,
navigation and NCX read by ebooklib (bounded, `_reader_class`), the content documents read from
the zip one at a time (`_member`, bounded against zip bombs) as XHTML text (`_read_doc`,
`_dropped`); chaptering and titles (`_toc`, `_epub_units`), front and back matter
(`_matter_reason`), the cover (`_cover`). ebooklib and lxml (the `book` extra) are imported
when an EPUB is read."""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from ...engine.errors import InvalidRequest, MissingExtra
from ...media.m4b import MAX_COVER_BYTES, cover_problem
from .chapters import MATTER_TYPES, Book, BookInfo, ChapterRef, _kib, _speakable, _squash, count_words, matter_by_title

_OPS_TYPE = "{http://www.idpf.org/2007/ops}type"
_XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_FONT_SUFFIXES = (".otf", ".ttf", ".ttc", ".woff", ".woff2", ".eot")
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Read as nothing: scripts, styles, images and media, ruby annotations (the base text is read),
# and <aside> (in an EPUB, a footnote or a pop-up; a sidebar interrupts the reading anyway).
_DROP_TAGS = frozenset(
    {"script", "style", "head", "title", "svg", "math", "img", "image", "object", "embed", "video", "audio"}
    | {"iframe", "noscript", "template", "rt", "rp", "canvas", "map", "input", "button", "select", "textarea", "aside"}
)
# Each one ends a paragraph ("\n\n"), before and after.
_BLOCK_TAGS = frozenset(
    _HEADINGS
    | {"p", "div", "li", "blockquote", "section", "article", "header", "footer", "pre", "tr", "dt", "dd", "hr", "br"}
    | {"figcaption", "figure", "table", "caption", "ul", "ol", "dl", "nav", "main", "address", "center", "body"}
    | {"hgroup", "details", "summary", "legend", "fieldset", "form", "tbody", "thead", "tfoot"}
)
# epub:type values (and DPUB-ARIA roles, as doc-VALUE) of an element that is not read where it
# stands: footnote and endnote bodies, note references, page-break markers, hidden navigation.
_NOTE_TYPES = frozenset(
    {"footnote", "footnotes", "endnote", "endnotes", "rearnote", "rearnotes", "note", "notes", "noteref"}
    | {"annoref", "backlink", "pagebreak", "page-list", "pagelist", "landmarks"}
)
_NOTE_CLASSES = frozenset({"footnote", "footnotes", "endnote", "endnotes", "footnote-ref", "noteref"})
_MARKER_RE = re.compile(r"[\[(]?(?:\d{1,4}|[a-z]|[*\u2020\u2021\u00a7\u00b6#\u2016]{1,3})[\])]?", re.IGNORECASE)
_ENTITY_RE = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")


def _epub_checks(path: Path) -> None:
    """An EPUB is a zip with META-INF/container.xml naming its package (OPF) file. DRM: a
    META-INF/encryption.xml that encrypts anything but fonts (font obfuscation, IDPF or Adobe, is
    not DRM and is read) is refused."""
    if not zipfile.is_zipfile(path):
        raise InvalidRequest(f"{path}: not an EPUB (not a zip file)")
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "META-INF/container.xml" not in names:
                raise InvalidRequest(f"{path}: not an EPUB (a zip without META-INF/container.xml)")
            opf = _container_opf(_member(zf, "META-INF/container.xml", MAX_META_INF_BYTES))
            if opf is None:
                raise InvalidRequest(f"{path}: not an EPUB (its META-INF/container.xml names no package (OPF) file)")
            if opf not in names:
                raise InvalidRequest(f"{path}: not an EPUB (its package file {opf} is missing)")
            encryption = "META-INF/encryption.xml"
            if encryption in names and _encrypts_content(_member(zf, encryption, MAX_META_INF_BYTES)):
                raise InvalidRequest(
                    f"{path}: DRM-protected (META-INF/encryption.xml encrypts its content); only DRM-free EPUBs can be read"
                )
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
        raise InvalidRequest(f"{path}: not an EPUB (a damaged zip file: {_squash(str(e))})") from None


def _xml_elements(data: bytes):
    import xml.etree.ElementTree as ET

    try:
        return list(ET.fromstring(data).iter())
    except ET.ParseError:
        return None


def _container_opf(data: bytes) -> str | None:
    for el in _xml_elements(data) or ():
        if (
            el.tag.endswith("rootfile")
            and el.get("media-type") == "application/oebps-package+xml"
            and el.get("full-path")
        ):
            return posixpath.normpath(el.get("full-path"))
    return None


def _encrypts_content(data: bytes) -> bool:
    elements = _xml_elements(data)
    if elements is None:
        return True  # unreadable: assume the worst
    for el in elements:
        if el.tag.endswith("EncryptionMethod") and el.get("Algorithm") not in _FONT_OBFUSCATION:
            return True
        if el.tag.endswith("CipherReference") and not unquote(el.get("URI", "")).lower().endswith(_FONT_SUFFIXES):
            return True
    return False


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
            return _member(self.zf, name, MAX_META_INF_BYTES if name.startswith("META-INF/") else MAX_PACKAGE_BYTES)

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
        raise InvalidRequest(f"{path}: not a readable EPUB ({type(e).__name__}: {_squash(str(e))[:200]})") from None


def _numeric_entity(m: re.Match) -> bytes:
    """An HTML named entity (&nbsp; &mdash;) as a numeric one, which an XML parser reads."""
    import html.entities

    name = m.group(1).decode("ascii")
    if name in ("amp", "lt", "gt", "quot", "apos"):
        return m.group(0)
    chars = html.entities.html5.get(name + ";")
    return "".join(f"&#{ord(c)};" for c in chars).encode("ascii") if chars else m.group(0)


def _parse_xhtml(data: bytes):
    """The document's root element: as XML (HTML entities allowed), else as HTML; None if empty."""
    from lxml import etree, html

    data = _ENTITY_RE.sub(_numeric_entity, data)
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True, remove_pis=True
    )
    try:
        return etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        pass
    try:
        return html.document_fromstring(data, parser=html.HTMLParser(encoding="utf-8", remove_comments=True))
    except (etree.ParserError, ValueError):
        return None


def _tag(el) -> str | None:
    return el.tag.rpartition("}")[2].lower() if isinstance(el.tag, str) else None


def _types(el) -> set[str]:
    """The element's epub:type values and its DPUB-ARIA roles (doc-toc as toc)."""
    raw = (el.get(_OPS_TYPE) or el.get("epub:type") or "").split()
    raw += [r[4:] for r in (el.get("role") or "").split() if r.startswith("doc-")]
    return {t.lower().rpartition(":")[2] for t in raw}


def _is_marker(text: str) -> bool:
    return _MARKER_RE.fullmatch(_squash(text)) is not None


def _dropped(el, tag: str) -> bool:
    """The XHTML reading rule for what is not read: see _DROP_TAGS, _NOTE_TYPES, _NOTE_CLASSES;
    anything hidden; a footnote marker: a <sup> holding only a number or a note sign (or a link),
    a link into a page (href with "#") whose text is only a number or a note sign ("[3]", "*")."""
    if tag in _DROP_TAGS or el.get("hidden") is not None:
        return True
    if "display:none" in (el.get("style") or "").replace(" ", "").lower():
        return True
    if _types(el) & _NOTE_TYPES or set((el.get("class") or "").lower().split()) & _NOTE_CLASSES:
        return True
    if tag == "sup":
        return _is_marker("".join(el.itertext())) or any(_tag(a) == "a" and a.get("href") for a in el.iter())
    if tag == "a" and "#" in (el.get("href") or ""):
        return _is_marker("".join(el.itertext()))
    return False


class _Paragraphs:
    """Text gathered from a document: paragraphs, where its headings are, where it is cut."""

    def __init__(self, splits: Collection[str] = ()) -> None:
        self.paragraphs: list[str] = []
        self.headings: list[tuple[int, str]] = []  # (the heading's paragraph, its text)
        self.cuts: list[tuple[int, str]] = []  # (the first paragraph after the anchor, the anchor)
        self._splits = splits
        self._buf: list[str] = []
        self._pre = 0

    def add(self, text: str) -> None:
        if not self._pre:
            self._buf.append(text)
            return
        for i, part in enumerate(text.split("\n")):  # in <pre>, each line its own paragraph
            if i:
                self.flush()
            self._buf.append(part)

    def flush(self) -> None:
        text = _squash("".join(self._buf))
        self._buf = []
        if text:
            self.paragraphs.append(text)

    def walk(self, el) -> None:
        tag = _tag(el)
        if tag is None or _dropped(el, tag):
            return
        block = tag in _BLOCK_TAGS
        if block:
            self.flush()
        if self._splits and el.get("id") in self._splits:
            self.flush()
            self.cuts.append((len(self.paragraphs), el.get("id")))
        heading_at = len(self.paragraphs) if tag in _HEADINGS else None
        self._pre += tag == "pre"
        if el.text:
            self.add(el.text)
        for child in el:
            self.walk(child)
            if child.tail:
                self.add(child.tail)
        self._pre -= tag == "pre"
        if block:
            self.flush()
        elif tag in ("td", "th"):
            self.add(" ")
        if heading_at is not None and len(self.paragraphs) > heading_at:
            self.headings.append((heading_at, " ".join(self.paragraphs[heading_at:])))


@dataclass
class _Doc:
    paragraphs: list[str]
    headings: list[tuple[int, str]]
    types: set[str]  # epub:type / doc- roles of its <body> and the sections that wrap its content
    cuts: list[tuple[int, str]] = field(default_factory=list)

    @property
    def heading(self) -> str | None:
        return self.headings[0][1] if self.headings else None

    def pieces(self) -> list[tuple[str | None, list[str], str | None]]:
        """(anchor, paragraphs, first heading) of each part the cuts make; the part before the
        first cut has anchor None (the whole document when nothing cuts it)."""
        bounds = [(0, None)] + [c for c in self.cuts]
        out = []
        for i, (start, anchor) in enumerate(bounds):
            end = bounds[i + 1][0] if i + 1 < len(bounds) else len(self.paragraphs)
            heading = next((h for at, h in self.headings if start <= at < end), None)
            out.append((anchor, self.paragraphs[start:end], heading))
        return out


def _read_doc(data: bytes, splits: Collection[str] = ()) -> _Doc:
    """The XHTML reading rule: the text of <body>, a paragraph break at each block element (<p>,
    <div>, headings, <li>, <br>, ...), white space squashed; see _dropped for what is not read.
    Cut at the elements whose id is in `splits` (the TOC's anchors in it)."""
    root = _parse_xhtml(data)
    if root is None:
        return _Doc([], [], set())
    body = next((el for el in root.iter() if _tag(el) == "body"), root)
    types, el = _types(body), body
    for _ in range(4):  # <body><section epub:type="copyright-page"><div>...: the wrappers' types too
        first = next((c for c in el if _tag(c) is not None), None)
        if first is None or _tag(first) not in ("section", "div", "article", "nav", "main"):
            break
        types |= _types(first)
        el = first
    out = _Paragraphs(splits)
    try:
        out.walk(body)
    except RecursionError:  # absurdly deep nesting: its text, one paragraph
        out = _Paragraphs()
        out.add(" ".join(body.itertext()))
    out.flush()
    return _Doc(out.paragraphs, out.headings, types, out.cuts)


def _key(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def _drop_title(paragraphs: list[str], title: str | None) -> list[str]:
    """The chapter's heading is its title, not its text: the first paragraphs (up to 3) that
    together read as the title ("Chapter 1" + "The Storm" under "Chapter 1: The Storm") are
    dropped, or a first paragraph the title ends with ("The Storm" under "1. The Storm")."""
    if not title or not paragraphs:
        return paragraphs
    rest = _key(title)
    for i, paragraph in enumerate(paragraphs[:3]):
        key = _key(paragraph)
        if not key or not rest.startswith(key):
            break
        rest = rest[len(key) :]
        if not rest:
            return paragraphs[i + 1 :]
    first = _key(paragraphs[0])
    if len(first) >= 3 and _key(title).endswith(first):
        return paragraphs[1:]
    return paragraphs


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
        file, title = _href_file(base, href), _squash(getattr(entry, "title", None) or "")
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
        root = _parse_xhtml(nav.content)
        for el in root.iter() if root is not None else ():
            if _tag(el) == "nav" and "landmarks" in _types(el):
                for a in el.iter():
                    file = _href_file(posixpath.dirname(nav.file_name), a.get("href")) if _tag(a) == "a" else None
                    if file:
                        out.setdefault(file, []).extend(f"landmarks type {t}" for t in _types(a))
    return out


def _image_type(data: bytes) -> str | None:
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    return None


def _cover_page_image(data: bytes, page: str) -> str | None:
    """The first image a cover page (XHTML) shows: <img src> or SVG <image xlink:href>."""
    root = _parse_xhtml(data)
    for el in root.iter() if root is not None else ():
        src = (
            el.get("src")
            if _tag(el) == "img"
            else el.get(_XLINK_HREF) or el.get("href")
            if _tag(el) == "image"
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
                files.append(_cover_page_image(_member(zf, posixpath.join(opf_dir, page)), page))
            except KeyError:
                pass
    for file in dict.fromkeys(files):
        try:
            data = _member(zf, posixpath.normpath(posixpath.join(opf_dir, file)), MAX_COVER_BYTES) if file else b""
        except KeyError:
            continue
        except _TooBig:
            warnings.append(f"the cover {file} is not used: it is over {_kib(MAX_COVER_BYTES)} unpacked")
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
        return [v for v in (_squash(value or "") for value, _ in book.get_metadata("DC", name)) if v]

    titles, creators, languages = values("title"), values("creator"), values("language")
    author = ", ".join(dict.fromkeys(creators)) or None
    return (titles[0] if titles else None), author, (languages[0] if languages else None)


# What each member of an EPUB may be, unpacked (a zip bomb, or a member parsed into a tree many
# times its size, is refused): checked from the zip's own sizes, and again while it is unpacked
# (a header that lies about the size is caught by reading at most the limit and one byte more).
MAX_MEMBER_BYTES = 16 * 1024 * 1024  # a content document (XHTML): 16 MiB is some 2.5 million words
MAX_PACKAGE_BYTES = 8 * 1024 * 1024  # the package (OPF), the navigation document, the NCX
MAX_META_INF_BYTES = 1024 * 1024  # META-INF/container.xml, META-INF/encryption.xml
# the cover: at most media.m4b.MAX_COVER_BYTES and MAX_COVER_PIXELS (a larger one is not used)


class _TooBig(InvalidRequest):
    """A member over its limit (an InvalidRequest: the book is refused, the cover skipped)."""


def _member(zf: zipfile.ZipFile, name: str, limit: int | None = None) -> bytes:
    """One file of the EPUB's zip, at most `limit` bytes unpacked (MAX_MEMBER_BYTES by default;
    KeyError when it has none of that name; _TooBig beyond the limit; InvalidRequest when it
    does not unpack)."""
    limit = MAX_MEMBER_BYTES if limit is None else limit
    info = zf.getinfo(name)
    too_big = _TooBig(
        f"{zf.filename}: {name} unpacks to over {_kib(limit)}, more than a {_member_kind(name, limit)} may be"
    )
    if info.file_size > limit:
        raise too_big
    try:
        with zf.open(info) as f:
            data = f.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError) as e:
        raise InvalidRequest(
            f"{zf.filename}: {name} does not unpack (a damaged EPUB: {_squash(str(e))[:120]})"
        ) from None
    if len(data) > limit:
        raise too_big
    return data


def _member_kind(name: str, limit: int) -> str:
    if limit == MAX_META_INF_BYTES:
        return "META-INF file"
    if limit == MAX_PACKAGE_BYTES:
        return "package, navigation or NCX file"
    return "document of a book" if limit == MAX_MEMBER_BYTES else "cover"


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


def _matter_reason(file: str, linear: str, is_nav: bool, doc: _Doc, structure: dict, title: str | None) -> str | None:
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
            doc = _read_doc(_member(zf, posixpath.join(opf_dir, file)), toc.splits.get(file, ()))
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
    _epub_checks(path)
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
            text = "\n\n".join(_drop_title(unit.paragraphs, unit.title))
            if not _speakable(text):
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
                        doc = _read_doc(_member(zf, posixpath.join(opf_dir, file)), toc.splits.get(file, ()))
                        last = (file, {a: p for a, p, _ in doc.pieces()})
                    paragraphs += last[1].get(anchor, [])
                yield "\n\n".join(_drop_title(paragraphs, title))

    title, author, language = _metadata(book)
    info = BookInfo(title, author, language, cover, cover_type, tuple(skipped), "epub", tuple(warnings))
    return Book(info, tuple(outline), read)
