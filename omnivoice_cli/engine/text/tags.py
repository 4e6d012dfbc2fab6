"""Non-verbal tags as the model takes them: its 13 (`[laughter]`, `[sigh]`, ...), one a piece.

- `drop_unknown_tags`: a bracketed word the model does not know (`[breath]`, `[cough]`,
  `[clears throat]`, as some READMEs advertise) is dropped with a warning naming the 13 (the
  reference reads it as text); a known tag in other capitals (`[Laughter]`) is written as the
  model knows it. Pause tags (`[pause 1s]`) and pronunciations in capitals (`[B EY1 S]`) are
  not tags here and stay.
- `cut_at_tags`: several tags in one generation turn it into drone or noise (0 of 15 windows
  speech-like with three tags, maemreyo/omnivoice-server#37), so a piece holds at most one: a
  text with more is cut between them, at the last sentence break between two tags, else at the
  last space, else right before the next tag.

Both are deliberate differences from the reference (docs/correctness.md).
"""

from __future__ import annotations

import re

from .canvastext import nonverbal_tags
from .chunking import is_sentence_break
from .tables import punct_sets

__all__ = ["drop_unknown_tags", "cut_at_tags", "count_tags"]

# A bracketed word or three in lower case (a capital first letter allowed): what reads as a tag.
# All capitals with digits ('[B EY1 S]', '[AH0]') is a pronunciation and never matches.
# At most three words, and not a Markdown link's text ('[release notes](url)', '[text][ref]', '[ref]: url').
_TAGLIKE_RE = re.compile(r"[ \t]*(?<!\])\[\s*([A-Za-z][a-z]*(?:[ _-][a-z]+){0,2})\s*\](?![(\[:])[ \t]*")
_PAUSE_WORD = "pause"


def _known() -> dict[str, str]:
    """Each known tag's name, lower-cased -> the tag as the model knows it."""
    return {t[1:-1].lower(): t for t in nonverbal_tags()}


def drop_unknown_tags(text: str) -> tuple[str, str | None]:
    """(text, warning): unknown tags dropped (a space left where one stood) and named in the
    warning, which lists the tags the model speaks; (text, None) when every tag is known."""
    known = _known()
    unknown: list[str] = []
    out: list[str] = []
    last = ""  # the last character written so far (never the text rebuilt to find it: linear time)
    pos = 0
    for m in _TAGLIKE_RE.finditer(text):
        word, whole = m.group(1), m.group()
        name = word.lower()
        if m.start() > pos:
            out.append(text[pos : m.start()])
            last = text[m.start() - 1]
        pos = m.end()
        if name == _PAUSE_WORD or (name not in known and word.isupper()):
            out.append(whole)  # a pause tag, or a pronunciation such as [B]
            last = whole[-1]
        elif name in known:  # as the model knows it, its spaces kept
            out.append(whole.replace(f"[{word}]", known[name]) if f"[{word}]" in whole else whole)
            last = whole[-1]
        else:
            unknown.append(f"[{word}]")
            after = text[pos : pos + 1]
            glued = not last or last.isspace() or (after and not after.isalnum() and after not in " \t[")
            if not glued:  # one space between the words it stood between
                out.append(" ")
                last = " "
    out.append(text[pos:])
    if not unknown:
        return "".join(out), None
    names = ", ".join(dict.fromkeys(unknown))
    warning = (
        f"the model does not know the tag{'s' if len(set(unknown)) > 1 else ''} {names}: dropped "
        f"(it speaks {', '.join(nonverbal_tags())})"
    )
    return "".join(out), warning


def _tag_re() -> re.Pattern:
    return re.compile("|".join(re.escape(t) for t in nonverbal_tags()))


def count_tags(text: str) -> int:
    """How many of the model's non-verbal tags `text` holds."""
    return len(_tag_re().findall(text))


def _cut_between(text: str, start: int, end: int) -> int:
    """Where to cut `text` between one tag's end (`start`) and the next one's start (`end`)."""
    split = punct_sets()[0]
    for i in range(end - 1, start - 1, -1):
        if text[i] in split and is_sentence_break(text, i):
            return i + 1
    space = text.rfind(" ", start, end)
    return space if space >= 0 else end


def cut_at_tags(text: str) -> list[str]:
    """`text` cut so each piece holds at most one non-verbal tag (see the module doc); a text
    with one tag or none comes back whole, as [text]."""
    spans = [m.span() for m in _tag_re().finditer(text)]
    if len(spans) < 2:
        return [text]
    pieces: list[str] = []
    pos = 0
    for (_, prev_end), (next_start, _) in zip(spans, spans[1:]):
        cut = _cut_between(text, prev_end, next_start)
        pieces.append(text[pos:cut])
        pos = cut
    pieces.append(text[pos:])
    return [p.strip() for p in pieces if p.strip()]
