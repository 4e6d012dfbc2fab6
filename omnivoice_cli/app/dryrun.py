"""`--dry-run`: what would be spoken, without loading the model.

    {"text": ..., "replaced": [{"words": "GIF", "say": "jif"}], "lang": "en",
     "pieces": [{"text": ..., "seconds": 3.2}, ...], "pauses": [0.0, 1.5, 0.0], "seconds": 7.9,
     "settings": {"num_step": {"value": 16, "from": "preset ..."}}}

The text is what the model would be given (after SSML, Markdown, the lexicon and normalisation),
cut into the pieces the engine would generate (the parts between pause tags, and the chunks of
long parts), each with the length the engine would estimate for it; `replaced` is what the lexicon
replaced (the words as in the text, and their replacement); `pauses` are the exact silences
before, between and after the parts. The estimates use the engine's own rules (its text modules), so they are
the lengths the model is asked for, before silence removal.
"""

from __future__ import annotations

from typing import Any

from ..engine.planning import VoiceShape, plan_request
from ..engine.stream.cut import StreamConfig, cut_streamed, estimated_seconds
from ..engine.text.languages import resolve_language
from .checkpoint import model_config
from .request import Built
from .settings.schema import SCHEMA

Record = dict[str, Any]  # a dry run's JSON record (what --json prints) and its entries


def _voice(built: Built) -> VoiceShape | None:
    """A recording's voice by its prepared length (it is not encoded in a dry run); None for the
    request's own voice (a saved voice, or none)."""
    if built.reference is None:
        return None
    return VoiceShape.of_recording(len(built.reference.prepared.wav), built.reference.transcript)


def describe(built: Built, streamed: bool = False) -> Record:
    """The dry run of one request (see the module doc); `streamed`: the pieces `--stream` runs
    (cut at sentences, engine/stream/cut.py), not the whole render's chunks."""
    cfg = model_config(built.settings["model"])
    plan = built.plan or plan_request(built.request, cfg, _voice(built))  # the plan made when it was built
    frames = plan.frames  # each piece's, as the engine estimates it (chunks after 0 against piece 0 without a voice)
    pieces = [{"text": p.text.strip(), "seconds": round(f / cfg.frame_rate, 2)} for p, f in zip(plan.pieces, frames)]
    pauses = [round(g, 3) for g in plan.gaps]
    seconds = sum(frames) / cfg.frame_rate + sum(plan.gaps)
    if streamed:
        segments = cut_streamed(built.request, StreamConfig(), cfg=cfg, voice=_voice(built))
        spoken = [(g.text.strip(), round(estimated_seconds(g.text), 2)) for g in segments if g.text]
        pieces = [{"text": text, "seconds": length} for text, length in spoken]
        pauses = [round(g.pause, 3) for g in segments if g.text is None]
        seconds = sum(length for _, length in spoken) + sum(pauses)
    settings = {key: {"value": built.settings[key], "from": built.settings.source(key).describe()} for key in SCHEMA}
    return {
        "text": built.request.text,
        "replaced": [{"words": words, "say": say} for words, say in built.replaced],  # by the lexicon
        "lang": resolve_language(built.request.lang, cfg.own)[0],
        "render": "streamed" if streamed else "whole",
        "pieces": pieces,
        "pauses": pauses,
        "seconds": round(seconds, 2),
        "seed": built.request.seed,
        "settings": settings,
        "warnings": list(built.warnings),
    }


def dry_run_text(report: Record) -> str:
    """The dry run as lines for a person."""
    lines = [
        f"text: {report['text']}",
        *([f"lexicon: {len(report['replaced'])} replaced"] if report.get("replaced") else []),
        f"lang: {report['lang'] or 'none (any language)'}",
        f"pieces: {len(report['pieces'])}, about {report['seconds']:.1f} s with pauses",
    ]
    if report.get("render") == "streamed":
        lines[-1] += " (--stream: a piece per sentence or so, each sent as it is ready)"
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


def _shown(entry: Record) -> bool:
    return entry["value"] is not None or entry["from"] != "default"


def render_script(rows: list[Record], output: str, gap: float) -> str:
    """A dialogue's dry run for a person (`say --cast ... --dry-run`): the settings every line
    shares, once; then a row per line (its speaker, length, text and its own settings: the voice
    its cast gives, its seed), `gap` seconds apart; then where the audio goes."""
    first = rows[0]["settings"] if rows else {}
    shared = {k: e for k, e in first.items() if all(r["settings"][k] == e for r in rows[1:])}
    langs = {r["lang"] for r in rows}
    lines = ["settings (every line):"]
    lines += [f"  {key} = {entry['value']!r}  ({entry['from']})" for key, entry in shared.items() if _shown(entry)]
    if len(langs) == 1:
        lines.append(f"lang: {langs.pop() or 'none (any language)'}")
    total = sum(r["seconds"] for r in rows)
    gaps = f" and {len(rows) - 1} gaps of {gap:g} s" if len(rows) > 1 else ""
    lines.append(f"lines: {len(rows)}, about {total:.1f} s of speech{gaps}")
    for r in rows:
        own = [f"{k}={e['value']!r}" for k, e in r["settings"].items() if k not in shared and e["value"] is not None]
        if r["lang"] and "lang" not in shared:
            own.insert(0, f"lang={r['lang']}")
        text = r["text"] if len(r["text"]) <= 40 else r["text"][:37] + "..."
        pieces = f", {len(r['pieces'])} pieces" if len(r["pieces"]) > 1 else ""
        lines.append(f"  {r['line']:>3}. {r['speaker']} ({r['seconds']:.1f} s{pieces}): {text}  [{', '.join(own)}]")
    lines.append(f"output: {output}")
    return "\n".join(lines) + "\n"
