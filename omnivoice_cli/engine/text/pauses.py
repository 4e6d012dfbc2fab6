"""Pause tags: `[pause]`, `[pause 1.5s]`, `[pause 500ms]` cut a text into parts and silences."""

from __future__ import annotations

import re

from ..errors import InvalidRequest
from .textcheck import is_blank

__all__ = ["split_pauses", "DEFAULT_PAUSE_SECONDS", "MAX_PAUSE_SECONDS", "MAX_TOTAL_PAUSE_SECONDS"]
_PAUSE_ANY_RE = re.compile(r"\[\s*pause\b[^\]]*\]?", re.IGNORECASE)
_PAUSE_RE = re.compile(r"\[pause(?:\s+(\d+(?:\.\d+)?|\.\d+)\s*(s|ms))?\]", re.IGNORECASE)
DEFAULT_PAUSE_SECONDS = 0.5
MAX_PAUSE_SECONDS = 60.0  # one tag (adjacent tags add up, so this bounds a tag, not a gap)
MAX_TOTAL_PAUSE_SECONDS = 3600.0  # all pause tags of one text together


def split_pauses(text: str) -> tuple[list[str], list[float]]:
    """Cut text at `[pause]`, `[pause 0.5s]`, `[pause 500ms]` tags.

    Returns (parts, gaps): the text parts with something to speak (an `is_blank` part is dropped),
    and len(parts) + 1 silences in seconds (gaps[0] before the first part, gaps[-1] after the last,
    gaps[i] between parts i-1 and i; adjacent tags add up). A tag that starts like a pause but is not one of these forms, a tag over
    MAX_PAUSE_SECONDS, or tags adding up to more than MAX_TOTAL_PAUSE_SECONDS are an
    InvalidRequest naming it.
    """
    parts: list[str] = []
    gaps: list[float] = [0.0]
    pos = 0
    for m in _PAUSE_ANY_RE.finditer(text):
        tag = m.group(0)
        ok = _PAUSE_RE.fullmatch(tag)
        if not ok:
            raise InvalidRequest(
                f"malformed pause tag {tag!r}: use [pause] (0.5 s), [pause 1.5s] or [pause 500ms]", "text"
            )
        seconds = DEFAULT_PAUSE_SECONDS
        if ok.group(1):
            seconds = float(ok.group(1)) / (1000.0 if ok.group(2).lower() == "ms" else 1.0)
        if seconds > MAX_PAUSE_SECONDS:
            raise InvalidRequest(f"pause tag {tag!r} is too long: at most {MAX_PAUSE_SECONDS:g} s", "text")
        before = text[pos : m.start()]
        if not is_blank(before):
            parts.append(before)
            gaps.append(0.0)
        gaps[-1] += seconds
        pos = m.end()
    if not is_blank(text[pos:]):
        parts.append(text[pos:])
        gaps.append(0.0)
    total = sum(gaps)
    if total > MAX_TOTAL_PAUSE_SECONDS:
        raise InvalidRequest(
            f"the pause tags add up to {total:g} s: at most {MAX_TOTAL_PAUSE_SECONDS:g} s of pauses in one text", "text"
        )
    return parts, gaps
