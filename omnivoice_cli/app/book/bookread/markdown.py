"""The Markdown reader: a book parsed whole (markdown-it), chapters at `#` and `##` headings
(the rule in `_markdown_sections`), YAML front matter as its metadata."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from pathlib import Path

from ....engine.errors import InvalidRequest
from ....engine.text.markup import markdown_to_text
from .chapters import (
    Book,
    BookInfo,
    ChapterRef,
    count_words,
    file_title,
    kib,
    matter_by_title,
    not_utf8,
    open_book_file,
    speakable,
    squash,
)

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd", ".mkdn")
# a Markdown book is parsed whole (its tokens take several times its size): 16 MiB (2.5 million words)
MAX_MARKDOWN_BYTES = 16 * 1024 * 1024


def _front_matter(lines: list[str]) -> dict[str, str]:
    """A YAML front matter block ("---" first, up to "---" or "..."): its simple `key: value`
    lines, lower-cased keys. Its lines are blanked in `lines` (so line numbers stay right)."""
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, min(len(lines), 200)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return {}
    meta: dict[str, str] = {}
    for i in range(end + 1):
        key, sep, value = lines[i].partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t", "-")):
            meta[key.strip().lower()] = value.strip().strip("\"'")
        lines[i] = ""
    return meta


def _inline_words(token) -> str:
    """A heading's words: its text and code spans, image alt text; markup dropped."""
    parts = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return squash("".join(parts))


@dataclass
class _MdSection:
    title: str
    from_book: bool
    line: int
    blocks: list[tuple[int, int]] = field(default_factory=list)  # source line ranges, one a paragraph


def _markdown_sections(tokens, path: Path) -> list[_MdSection]:
    """The Markdown rule: each `#` and `##` heading (ATX or setext, not inside a quote or a list)
    starts a chapter titled by it; `##` under a `#` is a chapter of its own, not a sub-chapter
    (the `#` chapter holds only the text before that `##`). `###` and deeper headings are read in
    their chapter. Text before the first heading is a chapter titled from the file's name.
    Each top-level block (a paragraph, a quote, a table, a code block; each item of a list) is
    one paragraph."""
    sections = [_MdSection(file_title(path), False, 1)]
    for i, tok in enumerate(tokens):
        if tok.type == "list_item_open" and tok.level == 1 and tok.map:
            sections[-1].blocks.append(tuple(tok.map))
        elif tok.level != 0 or not tok.map or tok.nesting < 0:
            continue
        elif tok.type == "heading_open" and tok.tag in ("h1", "h2"):
            sections.append(_MdSection(_inline_words(tokens[i + 1]), True, tok.map[0] + 1))
        elif tok.type not in ("bullet_list_open", "ordered_list_open", "hr"):
            sections[-1].blocks.append(tuple(tok.map))
    return sections


def open_markdown(path: Path, keep: bool) -> Book:
    from markdown_it import MarkdownIt

    with open_book_file(path) as f:
        raw = f.read(MAX_MARKDOWN_BYTES + 1)
    if len(raw) > MAX_MARKDOWN_BYTES:
        raise InvalidRequest(f"{path}: over the {kib(MAX_MARKDOWN_BYTES)} a Markdown book may be: split it")
    skip = 3 if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        source = raw[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start + skip].count(b"\n") + 1
        raise not_utf8(path, raw, line, raw[e.start + skip]) from None
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    meta = _front_matter(lines)
    env: dict = {}
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse("\n".join(lines), env)
    refs = "\n".join(f"[{label}]: x" for label in env.get("references", {}))

    def block_text(start: int, end: int) -> str:
        block = "\n".join(lines[start:end])
        return squash(markdown_to_text(block + "\n\n" + refs if refs and "[" in block else block))

    outline: list[ChapterRef] = []
    texts: dict[int, str] = {}
    skipped: list[str] = []
    for sec in _markdown_sections(tokens, path):
        sec.title = sec.title or f"line {sec.line}"  # a heading without words
        if not keep and sec.from_book and matter_by_title(sec.title):
            skipped.append(f"{sec.title} ({'back' if outline else 'front'} matter, by its title)")
            continue
        text = "\n\n".join(p for p in (block_text(a, b) for a, b in sec.blocks) if p)
        if not speakable(text):
            if sec.from_book:
                skipped.append(f"{sec.title} (no text)")
            continue
        first = sec.line if sec.from_book else sec.blocks[0][0] + 1
        outline.append(
            ChapterRef(
                len(outline) + 1,
                sec.title or f"Chapter {len(outline) + 1}",
                f"{path.name} line {first}",
                count_words(text),
            )
        )
        texts[len(outline)] = text
    language = meta.get("language") or meta.get("lang") or None
    info = BookInfo(
        meta.get("title") or None, meta.get("author") or None, language, None, None, tuple(skipped), "markdown"
    )
    return Book(info, tuple(outline), lambda refs_: (texts[r.number] for r in refs_))


# --------------------------------------------------------------------------------------------- EPUB
