"""How long a text takes to say: the reference's rule-based estimate (`data/duration.json`).

- `estimate_target_tokens`, `resolve_target_len`: how many audio frames to generate;
- `text_weight`, `estimate_duration`: the character weights the estimate sums;
- `speech_seconds`, `check_ref_transcript`: a transcript's speaking time against its recording.
"""

from __future__ import annotations

import bisect
import math
import unicodedata
from functools import lru_cache

from ..errors import InvalidRequest
from .tables import table

__all__ = [
    "text_weight",
    "estimate_duration",
    "estimate_target_tokens",
    "resolve_target_len",
    "speech_seconds",
    "check_ref_transcript",
]
_DEFAULT_REF_TEXT = "Nice to meet you."  # yardstick without a reference ...
_DEFAULT_REF_FRAMES = 25  # ... spoken in 25 frames (1 s)


@lru_cache(maxsize=None)
def _duration_tables() -> tuple[dict[str, float], list[int], list[str]]:
    d = table("duration.json")
    ranges = [(int(end, 16), script) for end, script in d["ranges_end_codepoint_to_script"]]
    return d["weights"], [e for e, _ in ranges], [s for _, s in ranges]


@lru_cache(maxsize=8192)
def _char_weight(ch: str) -> float:
    """Relative speaking time of one character (1.0 = one Latin letter)."""
    weights, ends, scripts = _duration_tables()
    code = ord(ch)
    if 65 <= code <= 90 or 97 <= code <= 122:
        return weights["latin"]
    if code == 32:
        return weights["space"]
    if code == 0x0640:  # Arabic tatweel is silent
        return weights["mark"]
    cat = unicodedata.category(ch)
    if cat[0] == "M":
        return weights["mark"]
    if cat[0] in "PS":
        return weights["punctuation"]
    if cat[0] == "Z":
        return weights["space"]
    if cat[0] == "N":
        return weights["digit"]
    idx = bisect.bisect_left(ends, code)
    if idx < len(ends):
        return weights.get(scripts[idx], weights["default"])
    if code > 0x20000:  # CJK extensions and other upper planes
        return weights["cjk"]
    return weights["default"]


def text_weight(text: str) -> float:
    """Sum of the character weights of `text`."""
    return sum(_char_weight(c) for c in text)


def estimate_duration(
    text: str, ref_text: str, ref_frames: float, low_threshold: float | None = 50, boost_strength: float = 3
) -> float:
    """Rule-based estimate of `text`'s length in frames, scaled by ref_text spoken in ref_frames.

    Estimates under `low_threshold` are boosted: low * (est/low) ** (1/boost_strength).
    Returns 0.0 when the reference is empty, weightless or has no frames.
    """
    if ref_frames <= 0 or not ref_text:
        return 0.0
    ref_weight = text_weight(ref_text)
    if ref_weight == 0:
        return 0.0
    est = text_weight(text) / (ref_weight / ref_frames)
    if low_threshold is not None and est < low_threshold:
        return low_threshold * (est / low_threshold) ** (1.0 / boost_strength)
    return est


def estimate_target_tokens(text: str, ref_text: str | None, num_ref_tokens: int | None, speed: float = 1.0) -> int:
    """Frames to generate for `text`: max(1, int(estimate / speed)).

    Without a reference (no ref_text, empty ref_text or no ref frames) the yardstick is
    "Nice to meet you." in 25 frames. speed <= 0 or == 1 leaves the estimate as is.
    """
    if num_ref_tokens is None or ref_text is None or len(ref_text) == 0:
        ref_text, num_ref_tokens = _DEFAULT_REF_TEXT, _DEFAULT_REF_FRAMES
    est = estimate_duration(text, ref_text, num_ref_tokens)
    if speed > 0 and speed != 1.0:
        est = est / speed
    return max(1, int(est))


def share_frames(total: int, texts: list[str]) -> list[int]:
    """`total` frames shared among `texts` in proportion to their weights (text_weight; equal shares
    where none weighs), each at least 1, summing to `total` where total >= len(texts) (largest
    remainders first): the pieces a fixed-length text is cut into keep its length."""
    weights = [text_weight(t) for t in texts]
    if sum(weights) <= 0:
        weights = [1.0] * len(texts)
    spare = max(total - len(texts), 0)  # beyond the 1 each piece gets
    exact = [spare * w / sum(weights) for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(len(texts)), key=lambda i: shares[i] - exact[i])  # the largest remainders first
    for i in order[: spare - sum(shares)]:
        shares[i] += 1
    return [1 + s for s in shares]


def speech_seconds(text: str) -> float:
    """How long `text` takes to say, in seconds, by the duration estimator at its plain rate
    ("Nice to meet you." in 1 s; no short-text boost: that one gives a target room, not a time)."""
    return estimate_duration(text, _DEFAULT_REF_TEXT, _DEFAULT_REF_FRAMES, low_threshold=None) / _DEFAULT_REF_FRAMES


def check_ref_transcript(ref_text: str | None, ref_seconds: float, max_ratio: float = 2.0) -> str | None:
    """A warning when a reference transcript and its prepared recording disagree in length.

    The transcript's speaking time (`speech_seconds`) and `ref_seconds` (the recording after
    preparation) differing by more than `max_ratio` either way usually means a partial or wrong
    transcript, which makes the target length estimate (scaled by the reference) far off.
    Returns None when they agree, or when there is no transcript or no recording to compare.
    """
    if not ref_text or not ref_text.strip() or not ref_seconds > 0:
        return None
    est = speech_seconds(ref_text)
    if est <= 0:
        return None
    if ref_seconds > max_ratio * est:
        return (
            f"the reference transcript reads as about {est:.1f} s but the recording is {ref_seconds:.1f} s: "
            "is the transcript complete?"
        )
    if est > max_ratio * ref_seconds:
        return (
            f"the reference transcript reads as about {est:.1f} s but the recording is only "
            f"{ref_seconds:.1f} s: is it the transcript of this recording?"
        )
    return None


def _check_positive(name: str, value, unit: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidRequest(f"{name} {value!r} is not allowed: use a number > 0{unit}")
    return float(value)


def resolve_target_len(
    text: str,
    ref_text: str | None,
    num_ref_tokens: int | None,
    speed: float | None = None,
    duration: float | None = None,
    frame_rate: float = 25.0,
) -> tuple[int, float | None]:
    """Target frames of one request and its effective speed (the reference's `_preprocess_all`).

    - duration (seconds) given: T = max(1, int(duration * frame_rate)) and the effective speed
      is est / T with est the estimate at speed 1 (speed is then ignored);
    - else speed given: T = the estimate at that speed, effective speed = speed;
    - else: T = the estimate, effective speed None (chunking then uses 1.0).
    `ref_text` is the already-punctuated reference text. A speed or duration that is not a
    finite number > 0 is an `InvalidRequest` (the reference silently ignores such values).
    """
    if speed is not None:
        speed = _check_positive("speed", speed)
    if duration is not None:
        duration = _check_positive("duration", duration, " (seconds)")
        est = estimate_target_tokens(text, ref_text, num_ref_tokens, speed=1.0)
        target = max(1, int(duration * frame_rate))
        return target, est / target
    est = estimate_target_tokens(text, ref_text, num_ref_tokens, speed=1.0 if speed is None else speed)
    return est, speed
