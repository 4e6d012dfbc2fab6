"""Subtitles written for audio we made (.srt / .vtt), from its pieces' texts and places.

    write_subtitles(path, [Subtitle(start_ms, end_ms, text, speaker)])

They follow the usual broadcast rules: at most MAX_LINES (2) lines of WRAP (42) columns (a CJK
character takes two) and about MAX_CUE_MS (7 s) a cue; a piece of the audio that is longer is cut
at sentence ends, else at clauses, else between words (cut_cue), and timed within the piece by
its characters' speaking-time weights until word timings exist. Reading subtitle files: cues.py.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ..engine.errors import InvalidRequest
from ..engine.text.chunking import is_sentence_break
from ..engine.text.duration import text_weight
from ..engine.text.pauses import split_pauses
from .atomic import replace_atomically
from .cues import SUFFIXES, timestamp

WRAP = 42  # columns per subtitle line written (the usual broadcast limit); a wide (CJK) character takes 2
MAX_LINES = 2  # lines per cue written
MAX_CUE_MS = 7000  # the longest cue written, when its piece can be cut (at words at the least)


@dataclass(frozen=True)
class Subtitle:
    """One cue to write."""

    start_ms: int
    end_ms: int
    text: str
    speaker: str | None = None  # written as a voice span (VTT) or a "NAME: " prefix (SRT)


def check_subtitles_path(spec: str, flag: str = "--subtitles") -> Path:
    """A subtitles file to write: .srt or .vtt, in an existing folder (InvalidRequest otherwise)."""
    path = Path(spec).expanduser()
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        shown = f"extension {suffix!r}" if suffix else "no extension"
        raise InvalidRequest(f"{flag} {spec!r} has {shown}: give a file ending in .srt or .vtt")
    if path.is_dir():
        raise InvalidRequest(f"{flag} {spec!r} is a folder: give a file ending in {suffix}")
    if not path.parent.is_dir():
        raise InvalidRequest(f"{flag} {spec!r}: folder '{path.parent}' does not exist")
    return path


def subtitles_from_pieces(pieces, sample_rate: int, offset: int = 0, speaker: str | None = None) -> list[Subtitle]:
    """The cues of one engine result: each piece (text, start, end in samples) that kept any
    audio, moved by `offset` samples, as cues of at most MAX_LINES lines and MAX_CUE_MS (cut_cue)."""
    out = []
    for text, start, end in pieces:
        s, e = round((offset + start) * 1000 / sample_rate), round((offset + end) * 1000 / sample_rate)
        if e > s and text.strip():
            out += cut_cue(Subtitle(s, e, " ".join(text.split()), speaker))
    return out


# A cue is cut at the end of a sentence, else of a clause, else between words (or wide characters).
_SENTENCE_END = re.compile(
    r"[.!?\u2026]+[\"'\u201d\u2019\u00bb)\]]*\s+|[\u3002\uff01\uff1f]+[\u300d\u300f\u201d\u2019\uff09]*\s*"
)
_CLAUSE_END = re.compile(r"[,;:]+[\"'\u201d\u2019\u00bb)\]]*\s+|\s+[\u2013\u2014-]+\s+|[\uff0c\u3001\uff1b\uff1a]\s*")


def _cut_points(text: str, level: int) -> list[int]:
    """Where a cue of `text` may end (offsets of the next cue's start): sentences (0), clauses (1),
    words and wide characters (2). A mark inside a token ('U.S.', 'Mr.', 'e.g.') ends nothing
    (engine.chunking.is_sentence_break, the chunker's rule)."""
    if level < 2:
        ends = (_SENTENCE_END if level == 0 else _CLAUSE_END).finditer(text)
        return [m.end() for m in ends if is_sentence_break(text, m.start())]
    points, pos = [], 0
    for word in re.finditer(r"\S+", text):
        if word.start() > 0:
            points.append(word.start())
        pos = word.start()
        for unit in _units(word.group())[:-1]:
            pos += len(unit)
            points.append(pos)
    return points


def cut_texts(sub: Subtitle, max_lines: int = MAX_LINES, width: int = WRAP, max_ms: int = MAX_CUE_MS) -> list[str]:
    """The texts of one piece's cues (in order, every word of the piece once): at most
    `max_lines` lines of `width` columns and, where a sentence or clause ends in time, at most
    `max_ms` as the characters' speaking-time weights share the piece's time: cut at sentence
    ends, else at clauses, each cue holding as many as fit; a clause still too long for the
    lines is cut between words into parts of even length. A word longer than a cue stays whole."""
    text, span = sub.text, sub.end_ms - sub.start_ms
    prefix = f"{sub.speaker}: " if sub.speaker else ""  # as SRT shows it
    total = text_weight(text) or 1.0

    def fits(a: int, b: int, level: int) -> bool:
        part = text[a:b].strip()
        short = level >= 2 or span * text_weight(part) / total <= max_ms  # words are cut for the lines only
        return short and len(wrap_lines(prefix + part, width)) <= max_lines

    def cut(a: int, b: int, level: int) -> list[tuple[int, int]]:
        if level > 2 or fits(a, b, level):
            return [(a, b)]
        bounds = [a, *(c for c in _cut_points(text, level) if a < c < b), b]
        ends, i = [], 0
        while i < len(bounds) - 1:  # each part as long as it may be
            j = i + 1
            while j + 1 < len(bounds) and fits(bounds[i], bounds[j + 1], level):
                j += 1
            ends.append(j)
            i = j
        if level == 2 and len(ends) > 1:  # between words: the same number of parts, of even length
            even = [
                min(range(1, len(bounds) - 1), key=lambda j: abs(bounds[j] - a - k * (b - a) / len(ends)))
                for k in range(1, len(ends))
            ] + [len(bounds) - 1]
            starts = [0, *even[:-1]]
            if even == sorted(set(even)) and all(fits(bounds[x], bounds[y], 2) for x, y in zip(starts, even)):
                ends = even
        return [part for x, y in zip([0, *ends[:-1]], ends) for part in cut(bounds[x], bounds[y], level + 1)]

    return [text[a:b].strip() for a, b in cut(0, len(text), 0) if text[a:b].strip()] or [text]


def cut_cue(sub: Subtitle, max_lines: int = MAX_LINES, width: int = WRAP, max_ms: int = MAX_CUE_MS) -> list[Subtitle]:
    """One piece's cue as cues of at most `max_lines` lines of `width` columns and, where a
    sentence or clause ends in time, at most `max_ms` (their texts: `cut_texts`). The piece's
    time is shared by the engine's speaking-time weights of the characters (text.text_weight),
    since where each word falls is not known (with word times: `retime_cues`)."""
    texts = cut_texts(sub, max_lines, width, max_ms)
    if len(texts) <= 1:
        return [sub]
    span = sub.end_ms - sub.start_ms
    weights = [text_weight(t) or 1.0 for t in texts]
    out, done, whole = [], 0.0, sum(weights)
    for n, (part, weight) in enumerate(zip(texts, weights)):
        start = sub.start_ms + round(span * done / whole)
        done += weight
        end = sub.end_ms if n == len(texts) - 1 else sub.start_ms + round(span * done / whole)
        if end > start:
            out.append(Subtitle(start, end, part, sub.speaker))
    return out


def is_wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in "WF"


def _units(word: str) -> list[str]:
    """A word cut where a line may break inside it: before each wide (CJK) character, except a
    closing punctuation mark (kept with what it closes) and after an opening one."""
    units: list[str] = []
    for c in word:
        closing = unicodedata.category(c) in ("Po", "Pe", "Pf")
        after_opening = bool(units) and unicodedata.category(units[-1][-1]) in ("Ps", "Pi")
        if units and (closing or after_opening or not (is_wide(c) or is_wide(units[-1][-1]))):
            units[-1] += c
        else:
            units.append(c)
    return units


def wrap_lines(text: str, width: int = WRAP) -> list[str]:
    """`text` as lines of at most `width` columns (a wide character takes two), broken at
    spaces and between wide characters, as few lines as fit and of even length; a word longer
    than a line stays whole on its own."""
    lines = _fill(text, width)
    if len(lines) == 2:  # two lines: broken after a sentence or clause if one fits, the most even one
        text = " ".join(text.split())
        halves: list[tuple[str, str]] = [
            (text[:c].strip(), text[c:].strip()) for level in (0, 1) for c in _cut_points(text, level)
        ]
        halves = [h for h in halves if h[0] and h[1] and max(_columns(h[0]), _columns(h[1])) <= width]
        if halves:
            best = min(halves, key=lambda h: abs(_columns(h[0]) - _columns(h[1])))
            return list(best)
    if len(lines) > 1:  # the narrowest width that needs no more lines: even lines
        for narrower in range(max(1, sum(_columns(ln) for ln in lines) // len(lines)), width):
            even = _fill(text, narrower)
            if len(even) == len(lines):
                return even
    return lines


def _columns(text: str) -> int:
    return sum(2 if is_wide(c) else 1 for c in text)


def _fill(text: str, width: int) -> list[str]:
    """Lines filled greedily up to `width` columns."""
    lines, line, used = [], "", 0
    for word in text.split():
        for k, unit in enumerate(_units(word)):
            sep = " " if k == 0 and line else ""
            w = _columns(unit)
            if line and used + len(sep) + w > width:
                lines.append(line)
                line, used, sep = "", 0, ""
            line, used = line + sep + unit, used + len(sep) + w
    return [*lines, line] if line else lines


def retime_cues(
    firsts: list[int], lasts: list[int], counts: list[int], start_ms: int, end_ms: int
) -> list[tuple[int, int]]:
    """The (start, end) ms of one piece's cues from their words' times: cue j's first word starts
    at firsts[j] and its last ends at lasts[j] (ms, in order); counts[j] word times go inside it.
    The first cue starts with the piece, the last ends with it, and a cue ends where the next
    begins: half-way between the words either side of the cut (at the next's first word when
    they touch), kept later than the cue before by more than its words' count (each word's
    timestamp strictly inside its cue, strictly after the one before)."""
    n = len(firsts)
    bounds = [start_ms]
    for j in range(1, n):
        cut = (lasts[j - 1] + firsts[j]) // 2 if lasts[j - 1] < firsts[j] else firsts[j]
        room = end_ms - sum(c + 1 for c in counts[j:])  # what the cues from j on need
        bounds.append(max(bounds[-1] + counts[j - 1] + 1, min(cut, firsts[j], room)))
    bounds.append(end_ms)
    return [(bounds[j], max(bounds[j + 1], bounds[j])) for j in range(n)]


def word_payload(lines: list[list[tuple[str, int | None]]], start_ms: int, end_ms: int) -> str:
    """The text of a word-level WebVTT cue: its lines of (word, ms or None) (a word written after
    a space begins with it: words of a language without spaces follow each other), each timed word
    after a timestamp tag <HH:MM:SS.mmm>, strictly inside (start_ms, end_ms) and strictly
    later than the tag before (WebVTT's rule), the words' own times where they allow; a word
    without a time (only punctuation) and a tag with no room left (a cue shorter than a
    millisecond a word) go untagged."""
    tagged = sum(ms is not None for line in lines for _, ms in line)
    out, last, k = [], start_ms, 0
    for line in lines:
        tokens = []
        for word, ms in line:
            space = word[: len(word) - len(word.lstrip(" "))]
            body = html.escape(word.lstrip(" ").replace("-->", "->"), quote=False)
            if ms is not None:
                k += 1
                t = min(max(ms, last + 1), end_ms - 1 - (tagged - k))
                if last < t < end_ms:
                    body, last = f"<{timestamp(t)}>{body}", t
            tokens.append(space + body)
        out.append("".join(tokens))
    return "\n".join(out)


def finish_subtitles(subs: list[Subtitle], audio_ms: int) -> list[Subtitle]:
    """Cues in order without overlaps, the last one ending at the audio's end (its trailing
    padding included, so the text stays up while the audio plays)."""
    out: list[Subtitle] = []
    for sub in subs:
        start = max(sub.start_ms, out[-1].end_ms if out else 0)
        if sub.end_ms > start:
            out.append(Subtitle(start, sub.end_ms, sub.text, sub.speaker))
    if out and audio_ms > out[-1].start_ms:
        last = out[-1]
        out[-1] = Subtitle(last.start_ms, audio_ms, last.text, last.speaker)
    return out


def _wrapped(text: str) -> str:
    return "\n".join(wrap_lines(text.replace("-->", "->"), WRAP)) or text


def subtitles_text(subs: list[Subtitle], fmt: str) -> str:
    """The text of an .srt or .vtt file ("srt" / "vtt") holding `subs`."""
    if fmt == "srt":
        import srt

        items = [
            srt.Subtitle(
                i + 1,
                timedelta(milliseconds=s.start_ms),
                timedelta(milliseconds=s.end_ms),
                _wrapped(f"{s.speaker}: {s.text}" if s.speaker else s.text),
            )
            for i, s in enumerate(subs)
        ]
        return srt.compose(items, reindex=False)
    import webvtt

    captions = []
    for s in subs:
        body = html.escape(_wrapped(s.text), quote=False)
        if s.speaker:
            body = f"<v {html.escape(s.speaker, quote=False)}>{body}"
        captions.append(webvtt.Caption(timestamp(s.start_ms), timestamp(s.end_ms), body))
    return webvtt.WebVTT(captions=captions).content


def write_subtitles(path: Path, subs: list[Subtitle]) -> None:
    """Write an .srt or .vtt file atomically (temporary file, then rename)."""
    data = subtitles_text(subs, path.suffix.lower().lstrip(".")).encode("utf-8")
    replace_atomically(path, lambda f: f.write(data))


def write_result_subtitles(path: Path, result, text: str) -> None:
    """The subtitles of one engine result: its pieces at their places in the audio, each cut into
    cues of two lines / 7 s at most (cut_cue), the last one ending with the audio. A result that
    does not say where its pieces are is one piece."""
    pieces = result.pieces or [(" ".join(split_pauses(text)[0]), 0, len(result.audio))]
    subs = subtitles_from_pieces(pieces, result.sample_rate)
    write_subtitles(path, finish_subtitles(subs, round(len(result.audio) * 1000 / result.sample_rate)))
