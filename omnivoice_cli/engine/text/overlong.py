"""Cutting a stretch too long for one piece that has no sentence end to cut at (`cut_overlong`):
at clause marks and line breaks, else at spaces, else (scripts written without spaces, one
absurdly long word) at characters, never inside a grapheme cluster or a bracketed tag."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["cut_overlong", "graphemes"]

# Clause and sentence marks that data/text.json's split punctuation lacks: dashes, ellipses, the
# ideographic and small-form commas and stops, and the marks of other scripts (Arabic, Urdu,
# Devanagari, Ethiopic, Armenian, Greek, Myanmar, Khmer, Tibetan). A line break counts as one.
CLAUSE_MARKS = frozenset(
    "\u2012\u2013\u2014\u2015"  # figure, en and em dash, horizontal bar
    "\u2026\u2025\u203c\u2047\u2048\u2049"  # ellipses, double marks
    "\u3001\uff64\ufe50\ufe51\ufe52\ufe54\ufe55\ufe56\ufe57\uff61\uff0e"  # 、 ､ small forms, ｡ ．
    "\u060c\u061b\u061f\u06d4"  # Arabic comma, semicolon, question mark; Urdu full stop
    "\u0964\u0965\u1361\u1362\u1363\u1364\u0589\u037e"  # dandas, Ethiopic, Armenian, Greek question mark
    "\u104a\u104b\u17d4\u17d5\u0f0d\n"  # Myanmar, Khmer, Tibetan; a line break
)
_CLOSING = frozenset("\"')]}»’”」』】）》")  # marks that stay with the clause mark before them
_TAG_RE = re.compile(r"\[[^\[\]]*\]")  # a bracketed tag ([laughter], [B EY1 S]): never cut
_WORD_RE = re.compile(r"(?:\[[^\[\]]*\]|\S)+\s*|\s+")  # a word (tags whole) with the spaces after it


def _size(s: str) -> int:
    return len(s.strip())


def _clause_units(text: str) -> list[str]:
    """`text` cut after each clause mark (with the closing marks and spaces after it); a mark
    between two digits ('1–5') is not a cut."""
    units, start, i, n = [], 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in CLAUSE_MARKS and not (0 < i < n - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()):
            i += 1
            while i < n and (text[i] in _CLOSING or text[i].isspace()):
                i += 1
            units.append(text[start:i])
            start = i
        else:
            i += 1
    if start < n:
        units.append(text[start:])
    return units


def _word_units(text: str) -> list[str]:
    return _WORD_RE.findall(text)


def _extends(prev: str, ch: str, ri_run: int) -> bool:
    """Whether `ch` belongs to the grapheme cluster that `prev` is in (a simplified UAX #29:
    combining marks, variation selectors, ZWJ sequences, skin tones, emoji tags, regional
    indicator pairs, Hangul jamo, CR LF and surrogate pairs). ri_run: regional indicators in a row
    so far, ending at `prev`."""
    c, p = ord(ch), ord(prev)
    if 0xDC00 <= c <= 0xDFFF and 0xD800 <= p <= 0xDBFF:  # a surrogate pair kept as two code points
        return True
    if (prev, ch) == ("\r", "\n") or p == 0x200D or c in (0x200C, 0x200D):  # CR LF; ZWJ/ZWNJ
        return True
    if unicodedata.category(ch) in ("Mn", "Mc", "Me"):  # combining marks, variation selectors
        return True
    if 0x1F3FB <= c <= 0x1F3FF or 0xE0020 <= c <= 0xE007F:  # skin tone modifiers, emoji tag characters
        return True
    if 0x1F1E6 <= c <= 0x1F1FF:  # a regional indicator pairs with an unpaired one before it (a flag)
        return ri_run % 2 == 1
    if 0x1160 <= c <= 0x11FF or 0xD7B0 <= c <= 0xD7FF:  # a Hangul vowel or final jamo after its syllable
        return 0x1100 <= p <= 0x11FF or 0xAC00 <= p <= 0xD7A3 or 0xA960 <= p <= 0xA97F or 0xD7B0 <= p <= 0xD7FF
    return (0x1100 <= c <= 0x115F or 0xA960 <= c <= 0xA97F) and (0x1100 <= p <= 0x115F or 0xA960 <= p <= 0xA97F)


def graphemes(text: str) -> list[str]:
    """`text` as its grapheme clusters (what a reader sees as one character), in order."""
    out: list[str] = []
    ri_run = 0
    for ch in text:
        if out and _extends(out[-1][-1], ch, ri_run):
            out[-1] += ch
        else:
            out.append(ch)
        ri_run = ri_run + 1 if 0x1F1E6 <= ord(ch) <= 0x1F1FF else 0
    return out


def _grapheme_units(text: str) -> list[str]:
    """`text` as grapheme clusters, a bracketed tag as one unit."""
    units, pos = [], 0
    for m in _TAG_RE.finditer(text):
        units += graphemes(text[pos : m.start()]) + [m.group()]
        pos = m.end()
    return units + graphemes(text[pos:])


_LEVELS = (_clause_units, _word_units, _grapheme_units)


def _pack(units: list[str], max_len: int, count: int | None = None) -> list[str]:
    """The units joined, in order, into pieces of at most max_len characters (stripped) and of
    about even length: as few pieces as a greedy fill makes, each closing at the unit boundary
    nearest to the next of the even cuts of the whole, unless one more unit would not fit."""
    if count is None:
        count = len(_pack(units, max_len, 0))  # the fewest pieces (a greedy fill)
    step = len("".join(units)) / max(1, count)
    pieces: list[str] = []
    cur, pos = "", 0
    for u in units:
        ideal = (len(pieces) + 1) * step
        if cur.strip() and (_size(cur + u) > max_len or (count and abs(pos + len(u) - ideal) > abs(pos - ideal))):
            pieces.append(cur)
            cur = ""
        cur += u
        pos += len(u)
    if cur:
        pieces.append(cur)
    return pieces


def _cut(text: str, max_len: int, level: int) -> list[str]:
    if _size(text) <= max_len or level == len(_LEVELS):
        return [text]
    units: list[str] = []
    for u in _LEVELS[level](text):
        units += _cut(u, max_len, level + 1) if _size(u) > max_len else [u]
    return _pack(units, max_len)


def cut_overlong(text: str, max_len: int) -> list[str]:
    """`text` cut into slices (joined, they are `text`; the spaces at a cut stay with the slice
    before it) of at most `max_len` characters each once stripped: at clause marks (`CLAUSE_MARKS`:
    dashes, '、', '…', a line break...) first, a clause still too long at spaces, a word still too
    long (or a text without spaces, as Chinese, Japanese and Thai are written) at grapheme
    clusters. Slices of one level are packed to about even lengths. What cannot be cut stays over
    `max_len`: one grapheme cluster or one bracketed tag longer than it."""
    return [text] if not text else _cut(text, max(1, int(max_len)), 0)
