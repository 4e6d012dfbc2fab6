"""Word timings: when each word of the text is spoken in the final audio (--words, --subtitle-level word).

    words = word_timings(recogniser, result.audio, result.sample_rate, result.pieces, lang)
    write_words(path, words)       # {"words": [{"word", "start", "end", "piece", "estimated"}]}

A non-autoregressive model has no timings to give; the recogniser does. Each piece's stretch of
the final audio (known exactly from generation) is transcribed on its own with word timestamps,
and the piece's own words (normalised as --verify normalises them: verify.normalise) are mapped
onto the words heard by sequence alignment (least edits, ties broken by time: `align`). The words
heard exactly, and those misheard one for one between them, keep the times heard (`trusted`);
the others (missed, or only noise heard) are spread over the time between the words heard either
side of them, by speaking-time weight, and marked "estimated". Every word of the text is there
once, in order, inside its piece's span. Times are seconds in the audio, start <= end, never
decreasing, inside the audio.

Subtitles timed by the words (`word_cues`, `write_word_subtitles`): each piece's cues cut as the
line cues are (subtitles.cut_texts), retimed around their words (subtitles.retime_cues), a timestamp before
every word strictly inside its cue (subtitles.word_payload).

Used by `say --words` / `--subtitle-level word`, `batch --words`, `dub --words` (each cue's
pieces where they lie on the track, `span_words`; rows carry their "cue") and the server's
`timestamps: true` (replies.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Protocol, TypedDict

from ...engine.text.duration import text_weight
from ...engine.text.pauses import split_pauses
from ...media.atomic import replace_atomically
from ...media.cues import timestamp
from ...media.subtitles import WRAP, Subtitle, cut_texts, is_wide, retime_cues, subtitles_text, word_payload, wrap_lines
from .listen import Transcript
from .verify import by_characters, max_tokens, units

if TYPE_CHECKING:
    import numpy as np

    from .listen import Recogniser

    Audio = np.ndarray  # float32 [N]


class Rendered(Protocol):
    """What the word subtitles read of a render (an engine Result, deliver.Take)."""

    @property
    def audio(self) -> Audio: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def pieces(self) -> list[tuple[str, int, int]]:
        """(text, start, end in samples) of each piece; empty: unknown."""
        ...


class _WordRecord(TypedDict):
    word: str
    start: float  # seconds
    end: float
    piece: int
    estimated: bool


class WordRecord(_WordRecord, total=False):
    """One word of a words file (`--words`: {"words": [...]}) and of the server's reply."""

    cue: int  # dub: the cue it is in (from 1)


@dataclass(frozen=True)
class WordTime:
    word: str
    start: float
    end: float
    piece: int
    estimated: bool = False
    cue: int | None = None  # dub: the cue it is in (from 1, as the dub's report numbers them)

    def as_dict(self) -> WordRecord:
        out: WordRecord = {
            "word": self.word,
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "piece": self.piece,
            "estimated": self.estimated,
        }
        if self.cue is not None:
            out["cue"] = self.cue
        return out


def align(
    expected: list[str], heard: list[str], distance: Callable[[int, int], float] | None = None
) -> list[int | None]:
    """For each expected unit, the index of the heard unit it lines up with (a match or a
    substitution), or None (the recogniser missed it): a least-edits alignment; among the
    alignments of least edits, the one whose paired units lie closest by `distance(i, j)`
    (seconds between where expected unit i should be and heard unit j is), so a repeated or
    misheard word pairs with the one heard at its place, not the first or last of them."""
    n, m = len(expected), len(heard)
    # cost[i][j] = (edits, distance) of aligning expected[:i] with heard[:j]; move: 0 pair, 1 missed, 2 extra
    cost = [[(0, 0.0)] * (m + 1) for _ in range(n + 1)]
    move = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        cost[i][0], move[i][0] = (i, 0.0), 1
    for j in range(1, m + 1):
        cost[0][j], move[0][j] = (j, 0.0), 2
    for i in range(1, n + 1):
        row, up_row = cost[i], cost[i - 1]
        for j in range(1, m + 1):
            e, d = up_row[j - 1]
            pair = (e + (expected[i - 1] != heard[j - 1]), d + (distance(i - 1, j - 1) if distance else 0.0))
            missed = (up_row[j][0] + 1, up_row[j][1])
            extra = (row[j - 1][0] + 1, row[j - 1][1])
            best = min(pair, missed, extra)
            row[j], move[i][j] = best, (0 if best == pair else 1 if best == missed else 2)
    out: list[int | None] = [None] * n
    i, j = n, m
    while i > 0 and j > 0:
        if move[i][j] == 0:
            out[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif move[i][j] == 1:
            i -= 1
        else:
            j -= 1
    return out


def trusted(expected: list[str], heard: list[str], where: list[int | None]) -> list[int | None]:
    """The pairs of `where` (align) whose heard times are the expected words' own: every match,
    and the substitutions of a stretch between two matches (or the ends) that the recogniser
    heard word for word (as many heard as expected: a word misheard in its place). In any other
    stretch the heard words cannot be told apart from noise: its words are missed (None)."""
    out: list[int | None] = [None] * len(expected)
    prev_i, prev_j = -1, -1
    matches = [(i, j) for i, j in enumerate(where) if j is not None and expected[i] == heard[j]]
    for i, j in [*matches, (len(expected), len(heard))]:
        if i - prev_i == j - prev_j:  # word for word: every expected word of the stretch paired
            for k in range(prev_i + 1, i):
                out[k] = where[k]
        if i < len(expected):
            out[i] = j
        prev_i, prev_j = i, j
    return out


def _heard_units(transcript: Transcript, chars: bool) -> list[tuple[str, float, float]]:
    """The recogniser's words as units (a word of several units shares its time among them)."""
    out = []
    for w in transcript.words:
        parts = units(w.text, chars)
        if not parts:
            continue
        step = (w.end - w.start) / len(parts)
        out += [(p, w.start + i * step, w.start + (i + 1) * step) for i, p in enumerate(parts)]
    return out


def _weights(words: list[str]) -> list[float]:
    """Each word's share of speaking time (the engine's character weights; at least a letter's)."""
    return [max(text_weight(w), 1.0) for w in words]


def spread(weights: list[float], lo: float, hi: float) -> list[tuple[float, float]]:
    """(start, end) of words of these weights said one after the other from `lo` to `hi` s, each
    taking its share of the time."""
    total, done, out = sum(weights), 0.0, []
    span = max(hi - lo, 0.0)
    for w in weights:
        out.append((lo + span * done / total, lo + span * (done + w) / total))
        done += w
    return out


def piece_words(
    text: str, transcript: Transcript, lang: str | None, start: float, end: float, piece: int
) -> list[WordTime]:
    """The words of one piece (its audio from `start` to `end` s), timed by its transcript
    (times relative to the piece's audio), every one inside [start, end]: the heard words paired
    with the piece's own (`align`, then `trusted`) give theirs; a run of words not heard is
    spread over the time between the words heard either side of it (the piece's start and end
    at its ends) by the words' speaking-time weights, and marked estimated."""
    chars = by_characters(text, lang)
    expected = units(text, chars)
    if not expected:
        return []
    end = max(end, start)
    weights = _weights(expected)
    prior = [(a + b) / 2 for a, b in spread(weights, start, end)]  # where each word is, said evenly

    def inside(t: float) -> float:
        return min(max(start + t, start), end)

    heard = [(u, inside(s), inside(e)) for u, s, e in _heard_units(transcript, chars)]
    where = align(expected, [h[0] for h in heard], lambda i, j: abs(heard[j][1] - prior[i]))
    where = trusted(expected, [h[0] for h in heard], where)
    out: list[WordTime] = []
    k = 0
    while k < len(expected):
        w = where[k]
        if w is not None:
            _, s, e = heard[w]
            s = max(s, out[-1].start if out else start)  # never before the word before it
            out.append(WordTime(expected[k], s, max(e, s), piece))
            k += 1
            continue
        run_end = k
        while run_end < len(expected) and where[run_end] is None:
            run_end += 1
        lo = out[-1].end if out else start
        after = where[run_end] if run_end < len(expected) else None  # the heard word after the run
        hi = max(heard[after][1] if after is not None else end, lo)
        for i, (s, e) in zip(range(k, run_end), spread(weights[k:run_end], lo, hi)):
            out.append(WordTime(expected[i], s, e, piece, True))
        k = run_end
    return out


def monotonic(words: list[WordTime], duration: float) -> list[WordTime]:
    """start <= end, never decreasing, inside [0, duration]."""
    out: list[WordTime] = []
    last = 0.0
    for w in words:
        s = min(max(w.start, last, 0.0), duration)
        e = min(max(w.end, s), duration)
        out.append(replace(w, start=s, end=e))
        last = s
    return out


def span_words(
    recogniser: Recogniser,
    audio: Audio,
    sample_rate: int,
    text: str,
    start: int,
    end: int,
    lang: str | None,
    piece: int,
) -> list[WordTime]:
    """The words of `text`, spoken in audio[start:end] (samples), timed in `audio` (seconds),
    every one inside that span (the recogniser hears that span alone)."""
    if not units(text, by_characters(text, lang)):
        return []
    if end <= start:  # no audio kept: its words at its place
        heard = Transcript("")
    else:
        heard = recogniser.transcribe(audio[start:end], sample_rate, lang, max_tokens=max_tokens(text, lang))
    return piece_words(text, heard, lang, start / sample_rate, end / sample_rate, piece)


def word_timings(
    recogniser: Recogniser, audio: Audio, sample_rate: int, pieces: list | None, text: str, lang: str | None = None
) -> list[WordTime]:
    """Every word of the text as spoken, timed in `audio` (see the module doc). `pieces`: the
    result's (text, start, end in samples); None: the whole audio is one piece of `text`."""
    pieces = pieces or [(text, 0, len(audio))]
    words: list[WordTime] = []
    for k, (piece_text, s, e) in enumerate(pieces):
        words += span_words(recogniser, audio, sample_rate, piece_text, s, e, lang, k)
    return monotonic(words, len(audio) / sample_rate)


def _write(f: BinaryIO, data: bytes) -> None:
    f.write(data)


def write_words(path: Path, words: list[WordTime]) -> None:
    data = json.dumps({"words": [w.as_dict() for w in words]}, ensure_ascii=False, indent=1).encode("utf-8")
    replace_atomically(path, lambda f: _write(f, data))


def _parts(line: str, chars: bool) -> list[tuple[str, int]]:
    """A cue line's words as written, each with its number of units (verify.units) and the space
    before it: the words between spaces, and in a language written without spaces each wide
    character on its own (punctuation stays with what it follows; a run of letters is one)."""
    out: list[tuple[str, int]] = []
    for raw in line.split(" "):
        parts: list[str] = []
        for c in raw:
            spoken = bool(units(c, True))
            if parts and (not chars or not spoken or not (is_wide(c) or is_wide(parts[-1][-1]))):
                parts[-1] += c
            else:
                parts.append(c)
        sep = " " if out else ""
        out += [(sep + p if i == 0 else p, len(units(p, chars))) for i, p in enumerate(parts or [""])]
    return out


def word_cues(
    pieces: list, sample_rate: int, words: list[WordTime], audio_ms: int, lang: str | None = None
) -> list[tuple[Subtitle, list[list[tuple[str, int | None]]]]]:
    """The cues of a result timed by its words: each piece (text, start, end in samples) cut as
    `subtitles.cut_texts` cuts it, each cue's words given their times from the piece's `words` (in
    order), the cues retimed around them (`subtitles.retime_cues`: every word inside its cue, the
    cues inside their piece), the last one ending with the audio. Each cue comes with its lines
    of (word as written, its start in ms, None for a word of no units: punctuation)."""
    by_piece: dict[int, list[WordTime]] = {}
    for w in words:
        by_piece.setdefault(w.piece, []).append(w)
    out: list[tuple[Subtitle, list[list[tuple[str, int | None]]]]] = []
    for k, (text, s, e) in enumerate(pieces):
        s_ms, e_ms = round(s * 1000 / sample_rate), round(e * 1000 / sample_rate)
        text = " ".join(text.split())
        if e_ms <= s_ms or not text:
            continue
        chars = by_characters(text, lang)
        texts = cut_texts(Subtitle(s_ms, e_ms, text))
        laid = [[_parts(line, chars) for line in wrap_lines(t, WRAP) or [t]] for t in texts]
        mine = by_piece.get(k, [])
        total = sum(n for cue in laid for line in cue for _, n in line)
        done = 0
        timed: list[list[list[tuple[str, int | None]]]] = []
        firsts: list[int] = []
        lasts: list[int] = []
        counts: list[int] = []
        for cue in laid:
            lines, first, last, count = [], None, None, 0
            for line in cue:
                row: list[tuple[str, int | None]] = []
                for part, n in line:
                    ms = None
                    if n and mine:  # its first word's time (shared out evenly if the count differs)
                        a = done if total == len(mine) else done * len(mine) // total
                        b = done + n - 1 if total == len(mine) else (done + n - 1) * len(mine) // total
                        ms = min(max(round(mine[a].start * 1000), s_ms), e_ms)
                        end = min(max(round(mine[b].end * 1000), ms), e_ms)
                        first = ms if first is None else first
                        last, count = end, count + 1
                    done += n
                    row.append((part, ms))
                lines.append(row)
            timed.append(lines)
            firsts.append(first if first is not None else (lasts[-1] if lasts else s_ms))
            lasts.append(last if last is not None else firsts[-1])
            counts.append(count)
        for (a, b), lines, t in zip(retime_cues(firsts, lasts, counts, s_ms, e_ms), timed, texts):
            out.append((Subtitle(a, b, t), lines))
    if out and audio_ms > out[-1][0].start_ms:  # the text stays up while the audio's padding plays
        last_sub, lines = out[-1]
        out[-1] = (Subtitle(last_sub.start_ms, max(audio_ms, last_sub.end_ms), last_sub.text), lines)
    return [(sub, lines) for sub, lines in out if sub.end_ms > sub.start_ms]


def word_vtt(cues: list[tuple[Subtitle, list[list[tuple[str, int | None]]]]]) -> str:
    """A WebVTT file of `word_cues` with a timestamp tag before each word (karaoke /
    read-along): `subtitles.word_payload`."""
    import webvtt

    captions = [
        webvtt.Caption(timestamp(sub.start_ms), timestamp(sub.end_ms), word_payload(lines, sub.start_ms, sub.end_ms))
        for sub, lines in cues
    ]
    return webvtt.WebVTT(captions=captions).content


def write_word_subtitles(
    path: Path, result: Rendered, text: str, words: list[WordTime], lang: str | None = None, tags: bool = True
) -> None:
    """Subtitles timed by the words (`word_cues`): --subtitle-level word (VTT, `tags`: each word
    timed), or the line cues of an .srt / .vtt moved to where their words are heard."""
    pieces = result.pieces or [(" ".join(split_pauses(text)[0]), 0, len(result.audio))]
    cues = word_cues(pieces, result.sample_rate, words, round(len(result.audio) * 1000 / result.sample_rate), lang)
    fmt = path.suffix.lower().lstrip(".")
    data = (word_vtt(cues) if tags and fmt == "vtt" else subtitles_text([sub for sub, _ in cues], fmt)).encode("utf-8")
    replace_atomically(path, lambda f: _write(f, data))
