"""The `alignment` of ElevenLabs' replies: each character with its start and end.

Two sources, said in docs/server.md:
- the words, heard by the server's speech recogniser (`from_words`; the with-timestamps route
  where the recogniser can be had): each word's characters share its time evenly, the space
  after it runs to the next word's start;
- the pieces' spans (`from_spans`, everywhere else): each spoken piece's text is where the
  piece is heard, its characters sharing that time evenly, and a space after it.
The HTTP replies give seconds ({"characters", "character_start_times_seconds",
"character_end_times_seconds"}); the sockets milliseconds ({"chars", "charStartTimesMs",
"charDurationsMs"}: `in_ms`). `normalized_alignment` is the same: the pieces' text is what was
spoken.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...app.listening.words import WordTime

Alignment = dict[str, list]
Span = tuple[str, float, float]  # text, start and end seconds


def _spread(out: Alignment, text: str, start: float, end: float) -> None:
    step = (end - start) / len(text) if text else 0.0
    for i, ch in enumerate(text):
        out["characters"].append(ch)
        out["character_start_times_seconds"].append(round(start + i * step, 3))
        out["character_end_times_seconds"].append(round(start + (i + 1) * step, 3))


def empty() -> Alignment:
    return {"characters": [], "character_start_times_seconds": [], "character_end_times_seconds": []}


def from_spans(spans: Iterable[Span]) -> Alignment:
    """The pieces' texts, each over where it is heard, a space after each but the last."""
    out, spans = empty(), [(t.strip(), s, e) for t, s, e in spans if t.strip()]
    for i, (text, start, end) in enumerate(spans):
        _spread(out, text, start, end)
        if i + 1 < len(spans):
            _spread(out, " ", end, max(end, spans[i + 1][1]))
    return out


def from_words(words: Sequence[WordTime]) -> Alignment:
    """The heard words, each over its time, a space to the next word's start."""
    return from_spans((w.word, w.start, w.end) for w in words)


def of_piece(text: str, start: float, end: float) -> Alignment:
    """One streamed piece: its text over where it is heard, and a space at its end (so that the
    next piece's first word is a word of its own)."""
    out = empty()
    if text.strip():
        _spread(out, text.strip(), start, end)
        _spread(out, " ", end, end)
    return out


def in_ms(alignment: Alignment, offset: float = 0.0) -> dict[str, list]:
    """The sockets' form, `offset` seconds added."""
    starts = alignment["character_start_times_seconds"]
    ends = alignment["character_end_times_seconds"]
    return {
        "chars": list(alignment["characters"]),
        "charStartTimesMs": [round((s + offset) * 1000) for s in starts],
        "charDurationsMs": [round((e - s) * 1000) for s, e in zip(starts, ends)],
    }
