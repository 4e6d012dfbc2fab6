"""The text of a canvas: `combine_text` (the reference text and the text, cleaned),
`tokenize_with_nonverbal_tags` (a tag such as '[laughter]' keeps its ids whatever surrounds it),
`add_punctuation` (the reference-text rule) and `nonverbal_tags` (the tags the model speaks)."""

from __future__ import annotations

import re
from functools import lru_cache

from .tables import punct_sets, table
from .tokenizer import TextTokenizer
from .vocabulary import contains_chinese

__all__ = ["combine_text", "tokenize_with_nonverbal_tags", "add_punctuation", "nonverbal_tags"]


@lru_cache(maxsize=None)
def _nonverbal_re() -> re.Pattern:
    return re.compile(table("text.json")["nonverbal_tags"])


_CJK_SPACE_RE = re.compile(r"(?<=[\u4e00-\u9fff])\s+|\s+(?=[\u4e00-\u9fff])")


def combine_text(text: str, ref_text: str | None = None) -> str:
    """The text of the canvas: ref_text.strip() + ' ' + text.strip() (or text.strip()), cleaned.

    Cleaning: drop \\r and \\n, map full-width parentheses to ASCII, collapse runs of
    spaces/tabs to one space, remove whitespace next to CJK ideographs (U+4E00..U+9FFF).
    """
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    full = re.sub(r"[\r\n]+", "", full)
    full = full.replace("\uff08", "(").replace("\uff09", ")")
    full = re.sub(r"[ \t]+", " ", full)
    return _CJK_SPACE_RE.sub("", full)


def tokenize_with_nonverbal_tags(tokenizer: TextTokenizer, text: str) -> list[int]:
    """Token ids of `text`, each non-verbal tag (e.g. '[laughter]') and each stretch between
    tags tokenized on its own, so a tag gets the same ids whatever surrounds it."""
    ids: list[int] = []
    last = 0
    for m in _nonverbal_re().finditer(text):
        if m.start() > last:
            ids.extend(tokenizer.encode(text[last : m.start()]))
        ids.extend(tokenizer.encode(m.group()))
        last = m.end()
    if last < len(text):
        ids.extend(tokenizer.encode(text[last:]))
    return ids


def add_punctuation(text: str) -> str:
    """Strip `text` and end it with '.' ('。' if it holds CJK) unless it already ends with
    punctuation from data/text.json end_punctuation (the reference-text rule)."""
    text = text.strip()
    if not text:
        return text
    if text[-1] not in punct_sets()[2]:
        text += "。" if contains_chinese(text) else "."
    return text


def nonverbal_tags() -> tuple[str, ...]:
    """The non-verbal tags the model speaks as sounds: ('[laughter]', '[sigh]', ...)."""
    pattern = table("text.json")["nonverbal_tags"]
    names = pattern[pattern.index("(") + 1 : pattern.rindex(")")].split("|")
    return tuple(f"[{name}]" for name in names)
