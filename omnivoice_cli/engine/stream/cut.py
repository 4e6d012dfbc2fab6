"""Cutting a streamed text: at its pause tags, then at sentence boundaries (`cut_segments`): the
first piece short (whole sentences up to `first_seconds`, or clauses of a longer first sentence),
the others whole sentences up to `piece_seconds` (by default a sentence each, so that a reply's
sentences leave one by one), a later sentence longer than that kept whole up to `sentence_seconds`
(beyond, its clauses); then a stretch without a mark to cut at, longer than one generation may
be, at clauses, words or characters (`cut_stretches`, `overlong.cut_overlong`); then a piece that
its voice and speed would make longer than one generation (a slow cloned voice, a speed under
about 1/3), re-estimated as the engine estimates it, cut again (`fit_voice`). A pause is a
segment of its exact silence. Pure functions of the text and the voice's shape (no model, no
torch, nothing measured: the same text and seed give the same audio on any device): the server
and Wyoming cut with them too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidRequest
from ..model.config import MAX_TARGET_SECONDS
from ..pieces import speed_against
from ..planning import MIN_CUT_CHARS
from ..text.chunking import chunk_text
from ..text.duration import estimate_duration, resolve_target_len
from ..text.overlong import cut_overlong
from ..text.pauses import split_pauses
from ..text.tags import cut_at_tags

if TYPE_CHECKING:
    from ..model.config import ModelConfig
    from ..planning import Request, VoiceShape

_SENTENCE_END = frozenset(".!?。！？…")  # a unit ending with one of these ends a sentence
_CLOSING = "\"')]}>»’”」』】）》"  # marks that may follow a sentence's end
_YARDSTICK = ("Nice to meet you.", 25)  # the engine's duration yardstick: this text in 25 frames (1 s)


@dataclass(frozen=True)
class StreamConfig:
    """How a streamed text is cut and scheduled."""

    first_seconds: float = 4.0  # first piece: whole sentences up to this estimated length (else clauses)
    # later pieces: whole sentences up to this estimated length; short, so that the sentences of a
    # long text leave one by one and steadily (how many run at once is sized from the measured speed)
    piece_seconds: float = 4.0
    sentence_seconds: float = 10.0  # a later sentence over piece_seconds stays whole up to this (else clauses)
    margin: float = 0.8  # a wave must be ready within this share of the audio queued when it starts


@dataclass(frozen=True)
class Segment:
    """A piece of the streamed output: text to speak, or an exact silence."""

    text: str | None  # what to say; None for a pause
    pause: float = 0.0  # seconds of silence (pauses only)


def estimated_seconds(s: str) -> float:
    """Rough spoken length of `s` at speed 1 (linear in the text; for sizing pieces only)."""
    return estimate_duration(s, _YARDSTICK[0], _YARDSTICK[1], low_threshold=None) / 25.0


def text_units(part: str) -> list[tuple[int, int, bool]]:
    """The part cut by the engine's splitting rules (`chunking.chunk_text` at every punctuation mark):
    (start, end, ends_a_sentence) spans, in order; the spans plus the whitespace between them
    are the whole part."""
    units = chunk_text(part, 1, min_chunk_len=None)  # each unit alone: the splitting only
    spans, pos = [], 0
    for u in units:
        start = part.index(u, pos)
        pos = start + len(u)
        core = u.rstrip(_CLOSING)
        spans.append((start, pos, bool(core) and core[-1] in _SENTENCE_END))
    return spans


def group_units(
    seconds: list[float], ends: list[bool], first_limit: float | None, limit: float, whole_limit: float | None = None
) -> list[int]:
    """How many units go in each piece: whole sentences while the piece stays within its limit
    (first_limit for the first piece, if given), at least one; a sentence over the limit alone is
    cut into clauses (units) the same way, except that a later sentence is kept whole up to
    `whole_limit` (if given; beyond it, its clauses up to whole_limit). Returns the count of units
    per piece."""
    sizes: list[int] = []
    i, n = 0, len(seconds)
    while i < n:
        first = first_limit is not None and not sizes
        cap = first_limit if first_limit is not None and first else limit
        alone = cap if first or whole_limit is None else max(limit, whole_limit)  # a lone sentence whole up to this
        j, total = i, 0.0
        while j < n:  # whole sentences
            k = j
            while k < n - 1 and not ends[k]:
                k += 1
            s = sum(seconds[j : k + 1])
            if j > i and total + s > cap:
                break
            if j == i and s > alone:  # the first sentence alone is too long: its clauses
                while j < n and (j == i or total + seconds[j] <= alone) and not (j > i and ends[j - 1]):
                    total += seconds[j]
                    j += 1
                break
            total, j = total + s, k + 1
        sizes.append(j - i)
        i = j
    return sizes


def cut_long_units(part: str, spans: list[tuple[int, int, bool]], longest: float, size: float) -> list:
    """The spans, each one estimated longer than `longest` seconds (no punctuation to cut it at)
    cut by `cut_overlong` into spans of about `size` seconds; only the last of them keeps its
    sentence end."""
    out: list[tuple[int, int, bool]] = []
    for start, end, ends in spans:
        seconds = estimated_seconds(part[start:end])
        if seconds <= longest:
            out.append((start, end, ends))
            continue
        pos, cuts = start, []
        for piece in cut_overlong(part[start:end], int((end - start) * size / seconds)):
            cuts.append((pos, pos + len(piece.rstrip()), False))
            pos += len(piece)
        out += cuts[:-1] + [(cuts[-1][0], cuts[-1][1], ends)]
    return out


def cut_part(
    part: str, first_limit: float | None, limit: float, whole_limit: float | None = None, longest: float | None = None
) -> list[str]:
    """Slices of `part` (joined they are the part) for its pieces (group_units' limits); a unit
    estimated longer than `longest` seconds is cut first (`cut_long_units`, into units of `limit`)."""
    spans = text_units(part)
    if longest is not None:
        spans = cut_long_units(part, spans, longest, min(limit, first_limit or limit))
    if len(spans) <= 1:
        return [part]
    seconds = [estimated_seconds(part[s:e]) for s, e, _ in spans]
    sizes = group_units(seconds, [end for _, _, end in spans], first_limit, limit, whole_limit)
    cuts, u = [0], 0
    for size in sizes[:-1]:
        u += size
        cuts.append(spans[u][0])
    cuts.append(len(part))
    return [part[a:b] for a, b in zip(cuts, cuts[1:])]


def cut_segments(
    text: str,
    first_seconds: float | None,
    piece_seconds: float,
    whole: bool = False,
    sentence_seconds: float | None = None,
    longest: float | None = None,
) -> list[Segment]:
    """The text as segments, in order: pieces to speak and the exact silences of its pause tags
    (a leading or trailing pause included). whole: no cutting at sentences (one piece per part).
    first_seconds None: the first piece cut as a later one (a text that goes on from another).
    longest: a stretch without a mark to cut at estimated longer than this is cut at clauses,
    words or characters (cut_part)."""
    parts, gaps = split_pauses(text)
    out: list[Segment] = [Segment(None, gaps[0])] if gaps[0] > 0 else []
    for p, part in enumerate(parts):
        first = first_seconds if p == 0 else None
        for piece in [part] if whole else cut_part(part, first, piece_seconds, sentence_seconds, longest):
            out += [Segment(t) for t in ([piece] if whole else cut_at_tags(piece))]  # one tag a piece
        if gaps[p + 1] > 0:
            out.append(Segment(None, gaps[p + 1]))
    return out


def _piece_limits(req: "Request", config: StreamConfig, cap: float = float("inf")) -> tuple[float, float]:
    """(a piece's seconds, a sentence's seconds kept whole) for `req` under `config`: at most the
    request's audio_chunk_threshold and `cap`."""
    threshold = min(req.generation.audio_chunk_threshold, cap)
    limit = min(config.piece_seconds, threshold)
    return limit, min(max(config.sentence_seconds, limit), threshold)


def cut_request(req: "Request", config: StreamConfig, continued: bool = False) -> list[Segment]:
    """A request's segments as the streamed render (and the server) cut them: pieces up to the
    config's lengths; a stretch without a mark to cut at is left whole (`cut_streamed` cuts it);
    a fixed duration is not cut.
    continued: the request goes on from one already spoken (the next part of a socket's or
    Wyoming's streamed text), so its first piece is cut as a later one (no short first piece for
    the first audio, no long one to keep a short text whole: its sentences leave one by one)."""
    whole = req.duration is not None  # a fixed length is one generation: not cut
    limit, sentence = _piece_limits(req, config)
    first = None if continued else config.first_seconds
    return cut_segments(req.text, first, limit, whole=whole, sentence_seconds=sentence)


def cut_stretches(
    req: "Request",
    segments: list[Segment],
    config: StreamConfig,
    continued: bool = False,
    max_seconds: float = MAX_TARGET_SECONDS,
) -> list:
    """`cut_request`'s segments, each spoken one holding a stretch without a mark to cut at that
    is estimated longer than one generation may be (`max_seconds`: the checkpoint's
    max_target_seconds; at a speed under 1, sooner) cut again (`cut_part`'s `longest`: at clauses,
    words, else characters, grouped as sentences are); every other segment as it was."""
    if req.duration is not None:
        return segments
    limit, sentence = _piece_limits(req, config)
    longest = max_seconds * min(1.0, req.speed or 1.0)  # seconds at speed 1 that take that at req.speed
    out: list[Segment] = []
    first = None if continued else config.first_seconds
    for seg in segments:
        text = seg.text
        if text is None or estimated_seconds(text) <= longest:
            out.append(seg)
        else:
            out += [Segment(t) for t in cut_part(text, first, limit, sentence, longest)]
        first = first if text is None else None  # the first piece's limit: the first spoken segment's only
    return out


def _recut(text: str, frames: int, frame_rate: float, max_seconds: float, config: StreamConfig, first: bool, req):
    """`text`, estimated at `frames` frames in its voice, cut as `cut_part` cuts (its limits
    shrunk by how much slower than the yardstick at speed 1 that voice says it: into pieces of at
    most 0.9 of a generation)."""
    yardstick = estimated_seconds(text) * frame_rate
    cap = 0.9 * max_seconds * yardstick / frames if yardstick > 0 else 0.0  # yardstick seconds a piece may hold
    if cap <= 0:
        return [text]
    limit, sentence = _piece_limits(req, config, cap)
    return cut_part(text, min(config.first_seconds, cap) if first else None, limit, sentence, cap)


def fit_voice(
    req: "Request",
    segments: list[Segment],
    config: StreamConfig,
    continued: bool = False,
    max_seconds: float = MAX_TARGET_SECONDS,
    voice: "VoiceShape | None" = None,
    frame_rate: float = 25.0,
) -> list[Segment]:
    """The segments, each spoken one re-estimated as the engine will estimate it (Engine.prepare:
    against the voice, `voice` or else the request's reference; without one, piece 0 against the
    yardstick and the later pieces against piece 0; at the speed relative to the voice's rate,
    pieces.speed_against) and, over one generation (`max_seconds`), cut again (`_recut`, then
    checked again), so that a slow cloned voice or a slow speed streams instead of being refused
    mid-stream. A segment that fits stays as it was (so does a fixed duration's, never cut). A
    voice or speed so slow that a generation holds fewer than MIN_CUT_CHARS characters is an
    InvalidRequest before anything is generated, as the plan refuses it."""
    if req.duration is not None:
        return segments
    ref = req.ref
    shape = (
        (voice.text, voice.frames, voice.rate)
        if voice is not None
        else (ref.text, int(ref.codes.shape[-1]), ref.rate)
        if ref is not None
        else None
    )
    limit = max_seconds * frame_rate
    out: list[Segment] = []
    queue = list(reversed(segments))
    piece0: tuple | None = None  # (text, frames, rate) of piece 0 as the voice of the others (no reference)
    spoken = False  # a spoken segment is out (the first piece's limit is the first one's only)
    while queue:
        seg = queue.pop()
        text = seg.text
        if text is None:
            out.append(seg)
            continue
        known = shape or piece0 or (None, None, None)
        frames = resolve_target_len(text, known[0], known[1], speed_against(req.speed, known[2]), None, frame_rate)[0]
        if frames > limit and len(text.strip()) * 0.9 * limit / frames < MIN_CUT_CHARS:  # as the plan refuses it
            raise InvalidRequest(
                f"{text.strip()[:40]!r} would take {frames / frame_rate:.0f} s to say at this speed and voice: one "
                f"generation is at most {max_seconds:g} s (a higher speed, or a voice whose transcript matches its "
                "recording)"
            )
        first = not continued and not spoken
        cut = _recut(text, frames, frame_rate, max_seconds, config, first, req) if frames > limit else [text]
        if len(cut) > 1:
            queue += [Segment(t) for t in reversed(cut)]
            continue
        out.append(seg)
        spoken = True
        if shape is None and piece0 is None:
            piece0 = (text.strip(), frames, req.speed)
    return out


def cut_streamed(
    req: "Request",
    config: StreamConfig,
    continued: bool = False,
    cfg: "ModelConfig | None" = None,
    voice: "VoiceShape | None" = None,
) -> list[Segment]:
    """A request's segments as the streamed render, the server and the dry run speak them:
    `cut_request`'s, then `cut_stretches`', then `fit_voice`'s (against `voice`, else the
    request's reference), to one generation of `cfg` (the loaded checkpoint's config; None: the
    defaults)."""
    max_seconds = MAX_TARGET_SECONDS if cfg is None else cfg.max_target_seconds
    frame_rate = 25.0 if cfg is None else cfg.frame_rate
    segments = cut_stretches(req, cut_request(req, config, continued), config, continued, max_seconds)
    return fit_voice(req, segments, config, continued, max_seconds, voice, frame_rate)
