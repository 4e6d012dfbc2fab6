"""What one forward holds: a streamed request's segments fitted to the engine's max_packed_tokens
and max_target_seconds (`fit_sizes`: a stretch over them cut at words, as the CLI's plan cuts it) and checked
(`check_sizes`: InvalidRequest naming the piece). Used by the service before a request is accepted."""

from __future__ import annotations

from .errors import InvalidRequest
from .model.config import ModelConfig
from .pieces import speed_against
from .planning import Request, cut_at_words
from .stream.cut import Segment
from .text.duration import resolve_target_len


def _target(req: Request, text: str, cfg: ModelConfig) -> int:
    """Frames a segment's text is estimated to generate (against the request's voice, if any)."""
    ref = req.ref
    return resolve_target_len(
        text,
        ref.text if ref else None,
        ref.codes.shape[-1] if ref else None,
        speed_against(req.speed, ref.rate if ref else None),
        req.duration,
        cfg.frame_rate,
    )[0]


def fit_sizes(req: Request, segments: list[Segment], cfg: ModelConfig) -> list[Segment]:
    """The segments, each one that would not fit one forward (check_sizes: a long stretch without
    punctuation at a slow speed) or one generation (max_target_seconds: a slow speed or voice)
    cut at words into pieces of about the chunk duration (at most 0.9 of a generation) by the rule
    the CLI's plan cuts with (planning.cut_at_words). What cannot be cut so (pieces under
    MIN_CUT_CHARS characters) is left for check_sizes to refuse."""
    rows = 2 if req.generation.guidance_scale != 0 else 1
    preferred = req.generation.audio_chunk_duration * cfg.frame_rate
    limit = cfg.max_target_seconds * cfg.frame_rate
    out: list[Segment] = []
    for seg in segments:
        if seg.text is None or req.duration is not None:
            out.append(seg)
            continue
        target = _target(req, seg.text, cfg)
        over = target * rows + len(seg.text) > cfg.max_packed_tokens
        size = preferred if target <= limit else min(preferred, 0.9 * limit)
        cut = cut_at_words(seg.text, target, size) if over or target > limit else []
        out += [Segment(piece) for piece in cut] if cut else [seg]
    return out


def check_sizes(req: Request, segments: list[Segment], cfg: ModelConfig) -> None:
    """InvalidRequest when a piece would not fit one forward (max_packed_tokens: a long text
    without punctuation at a slow speed would otherwise make one huge generation) or is longer
    than one generation may be (max_target_seconds: what fit_sizes could not cut, e.g. one
    bracketed tag longer than that, or any such piece when the caller does not fit)."""
    rows = 2 if req.generation.guidance_scale != 0 else 1
    for seg in segments:
        if seg.text is None:
            continue
        target = _target(req, seg.text, cfg)
        if target * rows + len(seg.text) > cfg.max_packed_tokens:
            raise InvalidRequest(
                f"the text has a piece of about {target / cfg.frame_rate:.0f} s of audio ({seg.text[:30]!r}...), more "
                "than one generation holds: add punctuation to cut it, or raise the speed"
            )
        if req.duration is None and target > cfg.max_target_seconds * cfg.frame_rate:
            raise InvalidRequest(
                f"the text has a piece of about {target / cfg.frame_rate:.0f} s of audio ({seg.text[:30]!r}...), over "
                f"the {cfg.max_target_seconds:g} s one generation may be: add spaces or punctuation to cut it, or "
                "raise the speed"
            )
