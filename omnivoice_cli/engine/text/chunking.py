"""Splitting long text: `chunk_text` and `chunk_len_for` (the reference's chunker, `data/text.json`;
bounded, a sentence longer than a chunk is cut by `overlong.cut_overlong`), `is_sentence_break`
(the one rule of every cutter) and `cut_to_length` (a stretch without sentence punctuation cut at
clauses, words, else characters, so no generation exceeds its bound)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from .overlong import cut_overlong
from .tables import punct_sets

__all__ = ["chunk_len_for", "is_sentence_break", "chunk_text", "cut_to_length"]


def chunk_len_for(text: str, target_len: int, chunk_duration: float = 15.0, frame_rate: float = 25.0) -> int:
    """Characters per chunk so that a chunk lasts about `chunk_duration` seconds
    (the reference's `_generate_chunked`: int(duration * rate / (T / len(text))))."""
    avg_tokens_per_char = target_len / len(text)
    return int(chunk_duration * frame_rate / avg_tokens_per_char)


# Scripts written without spaces between words: an ASCII mark touching one of their characters
# ends a sentence as the reference has it ('你好,世界'), since no space follows marks there.
_UNSPACED_RANGES = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))  # Thai and Lao, Myanmar, Khmer
_ASCII_SPLIT = frozenset("!,.:;?")
# A dotted abbreviation up to a '.': letters (of a spaced script) in 1-3 letter groups with an
# internal dot, after no word character ('U.S', 'e.g', 'i.e', 'Ph.D', 'z.B'); checked on the 32 characters before the mark.
_DOTTED_RE = re.compile(r"(?<!\w)(?:[^\W\d_]{1,3}\.){1,6}[^\W\d_]{1,3}\Z")
_DOTTED_REACH = 32
_ABBREV_REACH = 12  # characters of a word looked at for data/text.json's abbreviations ('Mr.')


def _unspaced(ch: str) -> bool:
    """A character of a script written without spaces (CJK, kana, Hangul, full-width forms, Thai...)."""
    if unicodedata.east_asian_width(ch) in "WF":
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _UNSPACED_RANGES)


@lru_cache(maxsize=8192)
def _word_char(ch: str) -> bool:
    """A letter, digit or combining mark of a script that spaces its words."""
    return unicodedata.category(ch)[0] in "LNM" and not _unspaced(ch)


def is_sentence_break(text: str, i: int) -> bool:
    """Whether the split mark `text[i]` may end a sentence (or clause): False when it is inside a
    token, the one rule of every cutter (chunks, streamed pieces, subtitle cues, Wyoming's stream).

    Inside a token:
    - a digit on both sides, for any mark ('21:30', '3.5', '1,000', '１２：３０');
    - an ASCII mark (`!,.:;?`) between two word characters of a spaced script, so with no space
      after it ('U.S', 'e.g', 'example.com', 'a,b'); a mark before a space, a quote, a bracket,
      another mark or the end of the text is a break, and so is one touching a character of a
      script written without spaces ('你好,世界', 'OK.好的'), where no space after a mark is normal;
    - the '.' closing a dotted abbreviation ('U.S.', 'e.g.', 'i.e.', 'Ph.D.') or a word of
      data/text.json's abbreviations ('Mr.', 'Dr.': the reference's rule, which `chunk_text`
      also checks its own way, on the sentence so far).
    Everywhere else (full-width '。' and '，' however they are followed included) it is a break,
    as the reference has it.
    """
    ch = text[i]
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if before.isdigit() and after.isdigit():
        return False
    if ch in _ASCII_SPLIT and before and after and _word_char(before) and _word_char(after):
        return False
    if ch == "." and before.isalpha():
        m = _DOTTED_RE.search(text, max(0, i - _DOTTED_REACH), i)
        if m and not any(_unspaced(c) for c in m.group()):
            return False
        start = i  # the word the '.' ends, if it is short enough to be an abbreviation
        while start > 0 and i - start < _ABBREV_REACH and not text[start - 1].isspace():
            start -= 1
        if (start == 0 or text[start - 1].isspace()) and text[start : i + 1] in punct_sets()[3]:
            return False
    return True


def chunk_text(text: str, chunk_len: int, min_chunk_len: int | None = 3, *, longest: int | None = None) -> list[str]:
    """Split `text` at punctuation into chunks of about `chunk_len` characters.

    1. Sentences end at split punctuation, except a '.' ending a known abbreviation ('Mr.') and
       a mark inside a token (`is_sentence_break`: '21:30', '3.5', '1,000', 'U.S.'; a deliberate
       difference from the reference, which cuts there); punctuation or a closing mark that
       would start a sentence joins the previous one.
    2. Consecutive sentences are merged while the chunk stays <= chunk_len characters.
    3. A chunk shorter than min_chunk_len joins the previous chunk (a short first chunk takes
       the second one in).
    Chunks are stripped; empty ones dropped.

    longest: a sentence longer than this many characters (a text without sentence ends: an LLM's
    reply, a transcript; the plan passes what one generation holds) is first cut by `cut_overlong`
    into pieces of at most chunk_len (at clause marks, then spaces, then characters, never inside a
    grapheme cluster); such a piece is longer only where it cannot be cut (one grapheme cluster or
    tag) or where step 3 joined a short chunk to it. A text whose sentences are all at most
    `longest` is cut exactly as without it (the reference's cut, which keeps a sentence whole).
    """
    split, closing, _, abbrevs = punct_sets()

    sentences: list[list[str]] = []
    cur: list[str] = []
    for i, ch in enumerate(text):
        if not cur and sentences and (ch in split or ch in closing):
            sentences[-1].append(ch)
            continue
        cur.append(ch)
        if ch in split and is_sentence_break(text, i):
            if ch == ".":
                stripped = "".join(cur).strip()
                if stripped and stripped.split()[-1] in abbrevs:
                    continue
            sentences.append(cur)
            cur = []
    if cur:
        sentences.append(cur)
    if longest is not None:
        sentences = [
            list(piece)
            for sent in sentences
            for piece in (cut_overlong("".join(sent), chunk_len) if len(sent) > longest else ["".join(sent)])
        ]

    merged: list[list[str]] = []
    chunk: list[str] = []
    for sent in sentences:
        if len(chunk) + len(sent) <= chunk_len:
            chunk.extend(sent)
        else:
            if chunk:
                merged.append(chunk)
            chunk = sent
    if chunk:
        merged.append(chunk)

    if min_chunk_len is not None:
        first_short = bool(merged) and len(merged[0]) < min_chunk_len
        final: list[list[str]] = []
        for i, c in enumerate(merged):
            if i == 1 and first_short:
                final[-1].extend(c)
            elif len(c) >= min_chunk_len or not final:
                final.append(c)
            else:
                final[-1].extend(c)
    else:
        final = merged

    out = ["".join(c).strip() for c in final]
    return [c for c in out if c]


def cut_to_length(text: str, max_chars: int) -> list[str]:
    """Cut `text` into pieces of at most `max_chars` characters (stripped, none empty), for a
    stretch too long for one generation that has no sentence punctuation to cut at
    (`cut_overlong`: at clause marks, else spaces, a bracketed tag whole, else, as for a word
    longer than `max_chars` or text without spaces as Chinese is written, at grapheme clusters)."""
    return [p.strip() for p in cut_overlong(text, max_chars) if p.strip()]
