"""Text that is not plain: SSML and Markdown, turned into the words to speak.

- `looks_like_ssml` / `convert_ssml`: the model reads no SSML. Text that looks like it (a
  `<speak>`, `<break/>`, `<prosody>`, ... tag) is converted: `<break time="500ms"/>` becomes
  `[pause 500ms]`, `time="1.5s"` `[pause 1.5s]`, a strength-only break the pause of that strength,
  `<sub alias="...">` its alias, and every other tag is dropped with its words kept. The caller
  shows the returned warning.
- `markdown_to_text`: Markdown (markdown-it-py, CommonMark with tables and strikethrough) spoken
  as its words: emphasis, links (their text, never the URL), images (their alt text), code spans
  (their content), block quotes (their words); code blocks (fenced or indented) are skipped, and
  list markers and `#` are not spoken.
  Headings, list items and table rows each end as a sentence ('.' added when they end without
  punctuation), and so does a paragraph that another block follows: the chunker and the cue
  cutters cut between them. It must be given
  the raw text, line breaks and all: a text whose lines were already joined is one paragraph
  (`# Notes - a - b` is a heading of everything).

Inline control syntax ([laughter], [B EY1 S], [pause 500ms]) passes through both unchanged.
"""

from __future__ import annotations

import html
import re

from .canvastext import add_punctuation  # the reference-text rule: '.' or '。' unless punctuated

__all__ = ["looks_like_ssml", "convert_ssml", "markdown_to_text", "BREAK_STRENGTH_SECONDS"]

# SSML 1.1 elements plus the common vendor ones; a tag with one of these names marks SSML.
_SSML_TAGS = (
    "speak|break|prosody|emphasis|say-as|phoneme|sub|voice|audio|mark|lang|p|s|paragraph|sentence|"
    "w|token|lexicon|meta|metadata|desc|amazon:[\\w-]+|mstts:[\\w-]+|google:[\\w-]+"
)
_SSML_RE = re.compile(rf"<\s*/?\s*(?:{_SSML_TAGS})(?:\s[^<>]*)?/?\s*>", re.IGNORECASE)
_TAG_RE = re.compile(r"<\s*(/?)\s*([A-Za-z][\w:.-]*)((?:\s[^<>]*)?)/?\s*>")
_ATTR_RE = re.compile(r"([\w:-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_SUB_RE = re.compile(r"<\s*sub\b([^<>]*)>(.*?)<\s*/\s*sub\s*>", re.IGNORECASE | re.DOTALL)
_JUNK_RE = re.compile(r"<!--.*?-->|<\?.*?\?>|<!\[CDATA\[|\]\]>|<!DOCTYPE[^>]*>", re.DOTALL | re.IGNORECASE)
_TIME_RE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)\s*", re.IGNORECASE)
# Pause lengths of the SSML break strengths (Azure's documented values; 'none' is no pause).
BREAK_STRENGTH_SECONDS = {"none": 0.0, "x-weak": 0.25, "weak": 0.5, "medium": 0.75, "strong": 1.0, "x-strong": 1.25}
# Tags that separate blocks of text: dropped as a space, the others as nothing.
_BLOCK_TAGS = frozenset({"speak", "p", "s", "paragraph", "sentence", "voice", "lang", "audio"})


def looks_like_ssml(text: str) -> bool:
    """True when `text` holds an SSML tag (<speak>, <break .../>, <prosody>, <say-as>, ...)."""
    return bool(_SSML_RE.search(text))


def _attrs(raw: str) -> dict[str, str]:
    return {k.lower(): (a if a is not None else b) for k, a, b in _ATTR_RE.findall(raw)}


def _break_tag(attrs: dict[str, str]) -> str:
    """Our pause tag for one <break>: its time, else its strength, else the default [pause]."""
    m = _TIME_RE.fullmatch(attrs.get("time", ""))
    if m:
        return f" [pause {m.group(1)}{m.group(2).lower()}] "
    strength = attrs.get("strength", "").strip().lower()
    if strength in BREAK_STRENGTH_SECONDS:
        seconds = BREAK_STRENGTH_SECONDS[strength]
        return f" [pause {seconds:g}s] " if seconds > 0 else " "
    return " [pause] "


def _replace_tag(m: re.Match) -> str:
    closing, name, raw = m.group(1), m.group(2).lower(), m.group(3)
    if name == "break" and not closing:
        return _break_tag(_attrs(raw))
    return " " if name in _BLOCK_TAGS else ""


def convert_ssml(text: str) -> tuple[str, str | None]:
    """(speakable text, warning) for SSML-looking text; (text, None) unchanged otherwise.

    Breaks become pause tags, `<sub alias>` its alias, other tags go (their words stay), XML
    entities are decoded, runs of spaces collapse.
    """
    if not looks_like_ssml(text):
        return text, None
    out = _JUNK_RE.sub("", text)
    out = _SUB_RE.sub(lambda m: _attrs(m.group(1)).get("alias", m.group(2)), out)
    out = _TAG_RE.sub(_replace_tag, out)
    out = html.unescape(out)
    out = re.sub(r"[ \t]+", " ", out).strip()
    warning = (
        "the text looks like SSML, which the model does not read: <break> tags became pause tags "
        "and the other tags were dropped (their words are kept)"
    )
    return out, warning


# ----------------------------------------------------------------------------------- Markdown


def _inline_text(token) -> str:
    """The words of one inline token: text, code spans, image alt text; markup dropped."""
    parts: list[str] = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return "".join(parts)


def _sentence(text: str) -> str:
    return add_punctuation(text)


def markdown_to_text(text: str) -> str:
    """Markdown spoken as its words (see the module docstring); blocks joined by a space."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)
    blocks: list[str] = []
    paragraphs: set[int] = set()  # the blocks that end as a sentence when another block follows
    row: list[str] | None = None  # the cells of the table row being read
    sentence_depth = 0  # inside a heading or a list item: the block ends as a sentence
    for tok in tokens:
        if tok.type in ("heading_open", "list_item_open"):
            sentence_depth += 1
        elif tok.type in ("heading_close", "list_item_close"):
            sentence_depth -= 1
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            cells = [c for c in row or () if c]
            if cells:
                blocks.append(_sentence(", ".join(cells)))
            row = None
        elif tok.type == "inline":
            words = " ".join(_inline_text(tok).split())
            if row is not None:
                row.append(words)
            elif words and sentence_depth:
                blocks.append(_sentence(words))
            elif words:  # a paragraph (also in a quote)
                paragraphs.add(len(blocks))
                blocks.append(words)
        elif tok.type in ("fence", "code_block"):
            continue  # code is not read aloud (it ran into the next block as noise)
        elif tok.type == "html_block":
            blocks.append(" ".join(re.sub(r"<[^<>]*>", " ", tok.content).split()))
    blocks = [_sentence(b) if i in paragraphs and i < len(blocks) - 1 else b for i, b in enumerate(blocks)]
    return " ".join(b for b in blocks if b)
