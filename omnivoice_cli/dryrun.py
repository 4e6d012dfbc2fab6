"""`--dry-run`: what would be spoken, without loading the model.

    {"text": ..., "lang": "en", "pieces": [{"text": ..., "seconds": 3.2}, ...],
     "pauses": [0.0, 1.5, 0.0], "seconds": 7.9, "settings": {"num_step": {"value": 16, "from": "preset ..."}}}

The text is what the model would be given (after SSML, Markdown and normalisation), cut into the
pieces the engine would generate (the parts between pause tags, and the chunks of long parts),
each with the length the engine would estimate for it; `pauses` are the exact silences before,
between and after the parts. The estimates use the engine's own rules (engine.text), so they are
the lengths the model is asked for, before silence removal.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from . import settings as st
from .request import Built


def _voice(built: Built) -> Any:
    """The request's voice for estimates: a saved voice as is; a recording by its prepared length."""
    if built.reference is None:
        return built.request.ref
    from .engine.text import add_punctuation
    from .engine.voice import HOP_LENGTH

    frames = len(built.reference.prepared.wav) // HOP_LENGTH
    return SimpleNamespace(codes=SimpleNamespace(shape=(8, frames)), text=add_punctuation(built.reference.transcript))


def _piece_frames(plan: Any, voice: Any, frame_rate: float) -> list[int]:
    """Frames the engine would generate for each piece (chunks estimated as Engine.prepare does:
    against the voice, or without one against the text's first chunk)."""
    from .engine.text import resolve_target_len

    frames: list[int] = []
    for k, piece in enumerate(plan.pieces):
        if piece.target_len is not None:
            frames.append(piece.target_len)
            continue
        ref_text, ref_len = (voice.text, voice.codes.shape[-1]) if voice is not None else (None, None)
        if voice is None and k > 0:
            ref_text, ref_len = plan.pieces[0].text, frames[0]  # piece 0 is the voice of the others
        target, _ = resolve_target_len(piece.text, ref_text, ref_len, piece.speed, None, frame_rate)
        frames.append(target)
    return frames


def describe(built: Built) -> dict[str, Any]:
    """The dry run of one request (see the module doc)."""
    import dataclasses

    from .engine.config import ModelConfig
    from .engine.pipeline import plan_request
    from .engine.text import resolve_language

    cfg = ModelConfig()
    voice = _voice(built)
    plan = plan_request(dataclasses.replace(built.request, ref=voice), cfg)
    frames = _piece_frames(plan, voice, cfg.frame_rate)
    pieces = [{"text": p.text.strip(), "seconds": round(f / cfg.frame_rate, 2)} for p, f in zip(plan.pieces, frames)]
    settings = {key: {"value": built.settings[key], "from": built.settings.source(key).describe()}
                for key in st.SCHEMA}  # fmt: skip
    return {
        "text": built.request.text,
        "lang": resolve_language(built.request.lang)[0],
        "pieces": pieces,
        "pauses": [round(g, 3) for g in plan.gaps],
        "seconds": round(sum(frames) / cfg.frame_rate + sum(plan.gaps), 2),
        "seed": built.request.seed,
        "settings": settings,
        "warnings": list(built.warnings),
    }


def render(report: dict[str, Any]) -> str:
    """The dry run as lines for a person."""
    lines = [f"text: {report['text']}", f"lang: {report['lang'] or 'none (any language)'}",
             f"pieces: {len(report['pieces'])}, about {report['seconds']:.1f} s with pauses"]  # fmt: skip
    for i, piece in enumerate(report["pieces"], start=1):
        text = piece["text"] if len(piece["text"]) <= 60 else piece["text"][:57] + "..."
        lines.append(f"  {i:>3}. {piece['seconds']:6.2f} s  {text}")
    pauses = [p for p in report["pauses"] if p]
    if pauses:
        lines.append("pauses: " + ", ".join(f"{p:g} s" for p in pauses))
    lines.append("settings:")
    for key, entry in report["settings"].items():
        if entry["value"] is not None or entry["from"] != "default":
            lines.append(f"  {key} = {entry['value']!r}  ({entry['from']})")
    return "\n".join(lines) + "\n"
