"""Word timings: when each word of the text is spoken in the final audio (--words, --subtitle-level word).

    words = word_timings(recogniser, result.audio, result.sample_rate, result.pieces, lang)
    write_words(path, words)       # {"words": [{"word", "start", "end", "piece", "estimated"}]}

A non-autoregressive model has no timings to give; the recogniser does. Each piece's stretch of
the final audio is transcribed with word timestamps, and the piece's own words (normalised as
--verify normalises them: verify.normalise) are mapped onto the words heard by sequence alignment
(least edits). Every word of the text is there once, in order: one the recogniser missed gets a
time interpolated between its neighbours and is marked "estimated". Times are seconds in the
audio, start <= end, never decreasing, inside the audio.

Used by `say --words` / `--subtitle-level word`, `batch --words`, `dub --words` (each cue's
pieces where they lie on the track, `span_words`; rows carry their "cue") and the server's
`timestamps: true` (replies.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .verify import by_characters, max_tokens, units


@dataclass(frozen=True)
class WordTime:
    word: str
    start: float
    end: float
    piece: int
    estimated: bool = False
    cue: int | None = None  # dub: the cue it is in (from 1, as the dub's report numbers them)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "word": self.word,
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "piece": self.piece,
            "estimated": self.estimated,
        }
        if self.cue is not None:
            out["cue"] = self.cue
        return out


def align(expected: list[str], heard: list[str]) -> list[int | None]:
    """For each expected unit, the index of the heard unit it lines up with (a match or a
    substitution), or None (the recogniser missed it): a least-edits alignment."""
    n, m = len(expected), len(heard)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (expected[i - 1] != heard[j - 1]))
    out: list[int | None] = [None] * n
    i, j = n, m
    while i > 0 and j > 0:
        if d[i][j] == d[i - 1][j - 1] + (expected[i - 1] != heard[j - 1]):
            out[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif d[i][j] == d[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    return out


def _heard_units(transcript: Any, chars: bool) -> list[tuple[str, float, float]]:
    """The recogniser's words as units (a word of several units shares its time among them)."""
    out = []
    for w in transcript.words:
        parts = units(w.text, chars)
        if not parts:
            continue
        step = (w.end - w.start) / len(parts)
        out += [(p, w.start + i * step, w.start + (i + 1) * step) for i, p in enumerate(parts)]
    return out


def piece_words(text: str, transcript: Any, lang: str | None, start: float, end: float, piece: int) -> list[WordTime]:
    """The words of one piece (its audio from `start` to `end` s), timed by its transcript
    (times relative to the piece's audio)."""
    chars = by_characters(text, lang)
    expected = units(text, chars)
    heard = _heard_units(transcript, chars)
    where = align(expected, [h[0] for h in heard])
    timed: list[tuple[float, float] | None] = [
        None if j is None else (start + heard[j][1], start + heard[j][2]) for j in where
    ]
    out: list[WordTime] = []
    k = 0
    while k < len(expected):
        if timed[k] is not None:
            s, e = timed[k]
            out.append(WordTime(expected[k], s, e, piece))
            k += 1
            continue
        run_end = k
        while run_end < len(expected) and timed[run_end] is None:
            run_end += 1
        lo = out[-1].end if out else start
        hi = timed[run_end][0] if run_end < len(expected) else end
        hi = max(hi, lo)
        step = (hi - lo) / (run_end - k)
        for i in range(k, run_end):
            out.append(WordTime(expected[i], lo + (i - k) * step, lo + (i - k + 1) * step, piece, True))
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
    recogniser: Any, audio: Any, sample_rate: int, text: str, start: int, end: int, lang: str | None, piece: int
) -> list[WordTime]:
    """The words of `text`, spoken in audio[start:end] (samples), timed in `audio` (seconds)."""
    if not units(text, by_characters(text, lang)):
        return []
    if end <= start:  # no audio kept: its words at its place
        from .listen import Transcript

        heard = Transcript("")
    else:
        heard = recogniser.transcribe(audio[start:end], sample_rate, lang, max_tokens=max_tokens(text, lang))
    return piece_words(text, heard, lang, start / sample_rate, end / sample_rate, piece)


def word_timings(
    recogniser: Any, audio: Any, sample_rate: int, pieces: list | None, text: str, lang: str | None = None
) -> list[WordTime]:
    """Every word of the text as spoken, timed in `audio` (see the module doc). `pieces`: the
    result's (text, start, end in samples); None: the whole audio is one piece of `text`."""
    pieces = pieces or [(text, 0, len(audio))]
    words: list[WordTime] = []
    for k, (piece_text, s, e) in enumerate(pieces):
        words += span_words(recogniser, audio, sample_rate, piece_text, s, e, lang, k)
    return monotonic(words, len(audio) / sample_rate)


def write_words(path: Path, words: list[WordTime]) -> None:
    from ..media.output import replace_atomically

    data = json.dumps({"words": [w.as_dict() for w in words]}, ensure_ascii=False, indent=1).encode("utf-8")
    replace_atomically(path, lambda f: f.write(data))


def word_vtt(subs: list, words: list[WordTime]) -> str:
    """A WebVTT file of the line cues `subs` (cues.Subtitle) with a timestamp tag before each word
    (karaoke / read-along): each cue's words take their times from `words`, in order."""
    import html

    import webvtt

    from ..media.cues import WRAP, timestamp, wrap_lines

    queue = list(words)
    captions = []
    for sub in subs:
        lines, last = [], sub.start_ms
        for line in wrap_lines(sub.text.replace("-->", "->"), WRAP) or [sub.text]:
            tokens = []
            for raw in line.split(" "):
                n = len(units(raw, by_characters(raw, None)))
                taken, queue = queue[:n], queue[n:]
                body = html.escape(raw, quote=False)
                ms = round(taken[0].start * 1000) if taken else None
                if ms is not None and last < ms < sub.end_ms and (tokens or lines):
                    body, last = f"<{timestamp(ms)}>{body}", ms  # strictly later than the one before
                tokens.append(body)
            lines.append(" ".join(tokens))
        captions.append(webvtt.Caption(timestamp(sub.start_ms), timestamp(sub.end_ms), "\n".join(lines)))
    return webvtt.WebVTT(captions=captions).content


def write_word_subtitles(path: Path, result: Any, text: str, words: list[WordTime]) -> None:
    """--subtitle-level word: the line cues of `write_result_subtitles`, each word timed (VTT)."""
    from ..engine.text import split_pauses
    from ..media.cues import finish_subtitles, subtitles_from_pieces
    from ..media.output import replace_atomically

    pieces = result.pieces or [(" ".join(split_pauses(text)[0]), 0, len(result.audio))]
    subs = finish_subtitles(
        subtitles_from_pieces(pieces, result.sample_rate), round(len(result.audio) * 1000 / result.sample_rate)
    )
    data = word_vtt(subs, words).encode("utf-8")
    replace_atomically(path, lambda f: f.write(data))
