"""An EPUB's content document (XHTML) read as text (`read_doc`): parsed as XML (HTML entities
allowed), else as HTML; what is not read dropped (`_dropped`: scripts, media, footnotes and their
markers, anything hidden); paragraphs, where the headings are, and where the TOC cuts it at
anchors (`Document`). `drop_title`: a chapter's heading is its title, not its text. lxml (the
`book` extra) is imported when a document is read."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from .chapters import squash

_OPS_TYPE = "{http://www.idpf.org/2007/ops}type"
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


def _numeric_entity(m: re.Match) -> bytes:
    """An HTML named entity (&nbsp; &mdash;) as a numeric one, which an XML parser reads."""
    import html.entities

    name = m.group(1).decode("ascii")
    if name in ("amp", "lt", "gt", "quot", "apos"):
        return m.group(0)
    chars = html.entities.html5.get(name + ";")
    return "".join(f"&#{ord(c)};" for c in chars).encode("ascii") if chars else m.group(0)


def parse_xhtml(data: bytes):
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


def tag_name(el) -> str | None:
    return el.tag.rpartition("}")[2].lower() if isinstance(el.tag, str) else None


def epub_types(el) -> set[str]:
    """The element's epub:type values and its DPUB-ARIA roles (doc-toc as toc)."""
    raw = (el.get(_OPS_TYPE) or el.get("epub:type") or "").split()
    raw += [r[4:] for r in (el.get("role") or "").split() if r.startswith("doc-")]
    return {t.lower().rpartition(":")[2] for t in raw}


def _is_marker(text: str) -> bool:
    return _MARKER_RE.fullmatch(squash(text)) is not None


def _dropped(el, tag: str) -> bool:
    """The XHTML reading rule for what is not read: see _DROP_TAGS, _NOTE_TYPES, _NOTE_CLASSES;
    anything hidden; a footnote marker: a <sup> holding only a number or a note sign (or a link),
    a link into a page (href with "#") whose text is only a number or a note sign ("[3]", "*")."""
    if tag in _DROP_TAGS or el.get("hidden") is not None:
        return True
    if "display:none" in (el.get("style") or "").replace(" ", "").lower():
        return True
    if epub_types(el) & _NOTE_TYPES or set((el.get("class") or "").lower().split()) & _NOTE_CLASSES:
        return True
    if tag == "sup":
        return _is_marker("".join(el.itertext())) or any(tag_name(a) == "a" and a.get("href") for a in el.iter())
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
        text = squash("".join(self._buf))
        self._buf = []
        if text:
            self.paragraphs.append(text)

    def walk(self, el) -> None:
        tag = tag_name(el)
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
class Document:
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


def read_doc(data: bytes, splits: Collection[str] = ()) -> Document:
    """The XHTML reading rule: the text of <body>, a paragraph break at each block element (<p>,
    <div>, headings, <li>, <br>, ...), white space squashed; see _dropped for what is not read.
    Cut at the elements whose id is in `splits` (the TOC's anchors in it)."""
    root = parse_xhtml(data)
    if root is None:
        return Document([], [], set())
    body = next((el for el in root.iter() if tag_name(el) == "body"), root)
    types, el = epub_types(body), body
    for _ in range(4):  # <body><section epub:type="copyright-page"><div>...: the wrappers' types too
        first = next((c for c in el if tag_name(c) is not None), None)
        if first is None or tag_name(first) not in ("section", "div", "article", "nav", "main"):
            break
        types |= epub_types(first)
        el = first
    out = _Paragraphs(splits)
    try:
        out.walk(body)
    except RecursionError:  # absurdly deep nesting: its text, one paragraph
        out = _Paragraphs()
        out.add(" ".join(body.itertext()))
    out.flush()
    return Document(out.paragraphs, out.headings, types, out.cuts)


def _key(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def drop_title(paragraphs: list[str], title: str | None) -> list[str]:
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
