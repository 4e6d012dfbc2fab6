"""A text to speak: the one check (say, batch lines, dub cues, the server's input).

`check_text` refuses what cannot be spoken (not a string, not valid Unicode, nothing to say);
`is_blank`, `has_words`, `unicode_problem` and `wordless_warning` are its parts.
"""

from __future__ import annotations

import unicodedata

from ..errors import InvalidRequest

__all__ = ["unicode_problem", "is_blank", "has_words", "check_text", "wordless_warning"]
# Characters with nothing to say on their own: whitespace and separators, control and format
# characters (zero-width space and joiners, BOM, word joiner, bidi marks), lone surrogates, and
# combining marks without a letter to sit on.
_BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Mn", "Mc", "Me"})
_SHOWN_CHARS = 3  # characters a message names


def unicode_problem(text: str) -> str | None:
    """Why `text` is not valid Unicode, or None: a lone surrogate (U+D800..U+DFFF), which is what
    a JSON escape such as \\ud800 or bytes that are not UTF-8 (a command-line argument, read with
    surrogateescape) become; no encoder or tokenizer takes it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (
            f"not valid Unicode: character {e.start + 1} is U+{ord(text[e.start]):04X}, a lone surrogate "
            "(half of a UTF-16 pair, or a byte that is not UTF-8)"
        )
    return None


def is_blank(text: str) -> bool:
    """True when `text` has nothing to speak: only whitespace, invisible (zero-width, format) or
    control characters and combining marks (what `str.strip` alone leaves, such as U+200B)."""
    return all(unicodedata.category(ch) in _BLANK_CATEGORIES for ch in text)


def has_words(text: str) -> bool:
    """True when `text` holds a letter or a digit (of any script)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def _named_chars(text: str) -> str:
    seen = list(dict.fromkeys(ch for ch in text if not ch.isspace()))
    shown = [f"U+{ord(ch):04X} {unicodedata.name(ch, '')}".strip() for ch in seen[:_SHOWN_CHARS]]
    return ", ".join(shown) + (", ..." if len(seen) > _SHOWN_CHARS else "")


def check_text(text: str) -> None:
    """The text of a request can be spoken: InvalidRequest (about the setting "text") when it is
    not a string, not valid Unicode, or has nothing to speak (empty, whitespace, only invisible or
    control characters)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("text is empty: give some text to speak", "text")
    problem = unicode_problem(text)
    if problem:
        raise InvalidRequest(f"text is {problem}: give UTF-8 text", "text")
    if is_blank(text):
        raise InvalidRequest(
            f"text is empty: it has only invisible or control characters ({_named_chars(text)}): "
            "give some text to speak",
            "text",
        )


def wordless_warning(text: str) -> str | None:
    """A warning when `text` (checked, pause tags out) has no letter or digit: only punctuation or
    symbols such as emoji, which the model has no words for."""
    if has_words(text):
        return None
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 20 else shown[:20] + "..."
    return f"text {shown!r} has no letters or digits, only punctuation or symbols: it may not come out as speech"
