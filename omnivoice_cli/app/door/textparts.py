"""A stream's text cut into parts to speak (Wyoming's streaming events, the socket's text
messages): each part ends at a sentence end that a space follows (`ready_text`), and none is
longer than a limit (`within`, cut at its last sentence end, else its last space); `take_parts`
does both and keeps the rest for more text.
"""

from __future__ import annotations

import re

from ...engine.stream.cut import text_units
from ..ssml.parse import is_ssml

_SPEAK_END_RE = re.compile(r"</\s*speak\s*>", re.IGNORECASE)


def ready_text(buffer: str) -> tuple[str, str]:
    """(the text to speak now, the rest) of a stream's buffer (Wyoming's streaming events, the
    socket's text messages): up to its last sentence end that a space follows ('It costs 3.' may go on as '5 euros')."""
    cut = 0
    for _start, end, ends in text_units(buffer):
        if ends and end < len(buffer) and buffer[end].isspace():
            cut = end
    return buffer[:cut], buffer[cut:]


def within(text: str, limit: int) -> list[str]:
    """`text` in parts of at most `limit` characters (joined, they are the text), each cut at its
    last sentence end, else its last space."""
    parts: list[str] = []
    while len(text) > limit:
        head, _ = ready_text(text[: limit + 1])
        space = text.rfind(" ", 1, limit + 1)
        cut = len(head) if head.strip() else space if space > 0 else limit
        parts.append(text[:cut])
        text = text[cut:]
    return [*parts, text]


def take_parts(buffer: str, limit: int) -> tuple[list[str], str]:
    """(the parts to speak now, each of at most `limit` characters and not blank; the rest to
    keep) of a stream's text buffer: up to its last sentence end (ready_text), and, where no
    sentence has ended for `limit` characters, what is over it cut at a space (within). An SSML
    document (app/ssml/) is one part, kept until its </speak> has come (the door reads it)."""
    if is_ssml(buffer):
        end = _SPEAK_END_RE.search(buffer)
        if end is None:  # kept, up to the limit (then given whole: the door refuses it as too long)
            return ([buffer], "") if len(buffer) > limit else ([], buffer)
        parts, rest = take_parts(buffer[end.end() :].lstrip(), limit) if buffer[end.end() :].strip() else ([], "")
        return [buffer[: end.end()], *parts], rest
    ready, rest = ready_text(buffer)
    parts = within(ready, limit) if ready else []
    if len(rest) > limit:  # no sentence end for that long: spoken up to a space
        *more, rest = within(rest, limit)
        parts += more
    return [p for p in parts if p.strip()], rest
