"""Timed audio, numpy only: cutting a long cue into pieces that fill its slot, placing audio on a
track (mixed where it meets other audio), joining lines with gaps of silence.

Times are whole milliseconds (as subtitle files give them) and samples; at 24 kHz a millisecond
is exactly 24 samples, so a cue's start sample is exact.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..engine.text.chunking import chunk_text
from ..engine.text.duration import text_weight

MAX_PIECE_MS = 30_000  # one request's fixed duration at most (the model's max_target_seconds)


def ms_to_samples(ms: int, sample_rate: int) -> int:
    """The sample at `ms` milliseconds (exact when sample_rate is a multiple of 1000)."""
    return (int(ms) * int(sample_rate) + 500) // 1000


def _split_words(text: str, n: int) -> list[str]:
    """`text` cut at spaces into at most n parts of about equal length."""
    words = text.split()
    n = max(1, min(n, len(words)))
    total = sum(len(w) + 1 for w in words)
    parts: list[str] = []
    cur: list[str] = []
    size = 0
    for i, w in enumerate(words):
        cur.append(w)
        size += len(w) + 1
        left_words, left_parts = len(words) - i - 1, n - len(parts) - 1
        if left_parts and (size >= total * (len(parts) + 1) / n or left_words == left_parts):
            parts.append(" ".join(cur))
            cur = []
    if cur:
        parts.append(" ".join(cur))
    return parts


def _shares(weights: list[float], total: int) -> list[int]:
    """Integers proportional to weights that add up to total (largest remainders)."""
    w = [max(x, 1e-9) for x in weights]
    exact = [total * x / sum(w) for x in w]
    out = [int(math.floor(x)) for x in exact]
    for i in sorted(range(len(w)), key=lambda i: out[i] - exact[i])[: total - sum(out)]:
        out[i] += 1
    return out


def cue_pieces(text: str, length_ms: int, max_ms: int = MAX_PIECE_MS) -> list[tuple[str, int]]:
    """(text, milliseconds) of the requests of one cue: the whole cue when it fits one request;
    else its text cut (at sentences, else at words) into pieces whose lengths, shared in
    proportion to each piece's estimated speaking time, fill the cue. When the text cannot be cut
    finely enough (one long word over a minute), the pieces are max_ms long and the rest of the
    cue is silent."""

    if length_ms <= max_ms:
        return [(text, length_ms)]
    n = math.ceil(length_ms / max_ms)
    while True:
        parts = chunk_text(text, max(1, math.ceil(len(text) / n)))
        shares = _shares([text_weight(p) for p in parts], length_ms)
        if len(parts) >= n and max(shares) <= max_ms:
            return list(zip(parts, shares))
        parts = _split_words(text, n)
        shares = _shares([text_weight(p) for p in parts], length_ms)
        if max(shares) <= max_ms:
            return list(zip(parts, shares))
        if len(parts) < n:  # no more words to cut at: the pieces are as long as allowed
            return [(p, min(s, max_ms)) for p, s in zip(parts, shares)]
        n += 1


def as_written(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """`audio` as a 16-bit PCM file holds it, read back: float32 multiples of 1/32768. Audio placed
    on a track this way is the same whether it was just made or read back from its stem file."""
    import io

    import soundfile as sf

    a = np.clip(np.nan_to_num(np.asarray(audio, dtype=np.float32), nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0)
    buf = io.BytesIO()
    sf.write(buf, a, int(sample_rate), format="WAV", subtype="PCM_16")
    buf.seek(0)
    return sf.read(buf, dtype="float32")[0]


def place(track: np.ndarray, audio: np.ndarray, start: int) -> None:
    """Add `audio` into `track` from sample `start` (what runs past the track's end is cut)."""
    end = min(len(track), start + len(audio))
    if end > start:
        track[start:end] += audio[: end - start]


def overlaps(spans: list[tuple[int, int, int]], limit: int = 5) -> tuple[list[tuple[int, int]], int]:
    """Which of the (id, start, end) spans overlap in time (start < other's end and other's start
    < end): the first `limit` pairs found in order of time, each as (smaller id, larger id), and
    how many pairs there are in all. O(n log n), however many pairs there are."""
    import heapq

    order = sorted(spans, key=lambda s: (s[1], s[2]))
    found: list[tuple[int, int]] = []
    active: list[tuple[int, int]] = []  # heap of (end, id) of the spans still open
    total = 0
    for ident, start, end in order:
        while active and active[0][0] <= start:
            heapq.heappop(active)
        total += len(active)
        if len(found) < limit:
            found += sorted((min(i, ident), max(i, ident)) for _, i in active)[: limit - len(found)]
        heapq.heappush(active, (end, ident))
    return found, total


def join_with_gaps(audios: list[np.ndarray], gap: int | Sequence[int]) -> tuple[np.ndarray, list[int]]:
    """The audios one after another with `gap` zero samples between (a sequence: gap[i - 1]
    before audio i, an SSML document's breaks), and where each starts."""
    gaps = [gap] * max(0, len(audios) - 1) if isinstance(gap, int) else list(gap)
    total = sum(len(a) for a in audios) + sum(gaps[: max(0, len(audios) - 1)])
    out = np.zeros(total, dtype=np.float32)
    starts, pos = [], 0
    for i, a in enumerate(audios):
        out[pos : pos + len(a)] = a
        starts.append(pos)
        pos += len(a) + (gaps[i] if i < len(audios) - 1 else 0)
    return out, starts
