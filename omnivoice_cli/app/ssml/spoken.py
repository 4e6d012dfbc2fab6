"""An SSML document at the door: its parts (parse.py) as requests, each with its settings.

    parts = build_parts(text, settings, saved_voice, build)   # build(text, settings) -> request.Built
    parts.built, parts.pauses, parts.parts                     # one request per part; seconds before each

A part's language (`xml:lang`) and rate (`prosody rate`, times the request's speed) are settings
of a layer "SSML line N" over the request's; its `<voice name>` is read by the front end's
`VoiceHook`: `saved_voice` (the CLI: a saved voice or a voice file, as --voice; `cast_voice`
first asks the --cast), the server's Speaker (a saved voice, an OpenAI name or auto, never a
file). The voice is then exactly that voice (no instruct, recording or voice of the request's).

One part is one request, spoken as any other text. Several are several requests (seed S + i
for part i, as a dialogue's lines), joined with each part's `pause_before` of silence: `say`
speaks them as a dialogue, POST /v1/audio/speech as one reply; a door that speaks one request
(`one_part`: batch lines, Wyoming, MCP, the socket) refuses them in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

from ...engine.errors import InvalidRequest
from ..session import check_seed_range, random_seed
from ..settings.layers import Resolved, Source
from .parse import MAX_RATE, MIN_RATE, Part, SsmlDocument, is_ssml, parse_ssml

__all__ = ["SsmlSource", "Parts", "build_parts", "one_part", "saved_voice", "cast_voice", "as_ssml"]

B = TypeVar("B")  # a built request (request.Built)
VoiceHook = Callable[[Resolved, str, Source], Resolved]  # (settings, <voice name>, its source) -> settings


@dataclass(frozen=True)
class SsmlSource(Source):
    """Settings a place of an SSML document gives: named "SSML line N" in messages."""

    def name(self, key: str) -> str:
        return f"SSML line {self.where}: {key}"

    def short(self, key: str) -> str:
        return repr(key)

    def describe(self) -> str:
        return f"SSML line {self.where}"


def as_ssml(text: str) -> str:
    """`--ssml`: the text as a document (wrapped in <speak> unless it is one)."""
    return text if is_ssml(text) else f"<speak>{text}</speak>"


def saved_voice(settings: Resolved, name: str, source: Source) -> Resolved:
    """A <voice name> read as --voice reads it (a saved voice, a voice file, a built-in name;
    auto: the model's own voice), in place of the request's voice."""
    voice = None if name.strip().lower() == "auto" else name
    return settings.with_values({"voice": voice, "instruct": None, "ref": None, "ref_text": None}, source)


def cast_voice(cast: Any) -> VoiceHook:
    """A <voice name> that names a --cast member is that member's voice (dialogue.Cast), else
    read as --voice reads it."""

    def hook(settings: Resolved, name: str, source: Source) -> Resolved:
        member = cast.find(name) if cast else None
        if member is None:
            return saved_voice(settings, name, source)
        changes: dict[str, object] = dict.fromkeys(("voice", "instruct", "ref", "ref_text"))
        if member.kind != "auto":
            changes[member.kind] = member.value
        return settings.with_values(changes, source)

    return hook


def part_settings(settings: Resolved, part: Part, voice: VoiceHook) -> Resolved:
    """The settings of one part: the request's, under its language, rate and voice."""
    source = SsmlSource("line", str(part.line))
    changes: dict[str, object] = {}
    if part.lang is not None:
        changes["lang"] = part.lang
    if part.rate is not None:
        speed = round(float(settings["speed"] or 1.0) * part.rate, 4)
        if not MIN_RATE <= speed <= MAX_RATE:
            raise InvalidRequest(
                f"SSML line {part.line}: <prosody rate> makes a speed of {speed:g}: at most {MIN_RATE:g}..{MAX_RATE:g}",
                "text",
            )
        changes["speed"] = speed
    if changes:
        settings = settings.with_values(changes, source)
    return voice(settings, part.voice, source) if part.voice is not None else settings


@dataclass(frozen=True)
class Parts(Generic[B]):
    """An SSML document's requests: one per part, in order."""

    built: tuple[B, ...]
    parts: tuple[Part, ...]
    seed: int | None  # part i has seed + i (None: one part, its own seed)
    warnings: tuple[str, ...]

    @property
    def pauses(self) -> tuple[float, ...]:
        """Seconds of silence before each part (0 before the first: its leading pause is its own)."""
        return tuple(p.pause_before for p in self.parts)


def _where(part: Part, e: InvalidRequest) -> InvalidRequest:
    message = str(e)
    if message.startswith("SSML"):
        return e
    return InvalidRequest(f"SSML line {part.line}: {message}", e.setting)


def build_parts(
    text: str,
    settings: Resolved,
    voice: VoiceHook,
    build: Callable[[str, Resolved], B],
    doc: SsmlDocument | None = None,
) -> Parts[B]:
    """Each part of the document `text` built by `build` with its settings (see the module doc);
    the document's warnings go with the first part's request (its `warnings` list)."""
    doc = doc or parse_ssml(text, settings["lang"])
    several = len(doc.parts) > 1
    base: int | None = None
    if several:
        base = int(settings["seed"]) if settings["seed"] is not None else random_seed()
        check_seed_range(base, len(doc.parts))
    built: list[B] = []
    for i, part in enumerate(doc.parts):
        try:
            own = part_settings(settings, part, voice)
            if base is not None:
                kind = "random" if settings["seed"] is None else settings.source("seed").kind
                own = own.with_values({"seed": base + i}, Source(kind, settings.source("seed").where))
            built.append(build(part.text, own))
        except InvalidRequest as e:
            raise _where(part, e) from None
    first = getattr(built[0], "warnings", None)
    if isinstance(first, list):
        first[:0] = list(doc.warnings)
    return Parts(tuple(built), doc.parts, base, doc.warnings)


def one_part(text: str, settings: Resolved, voice: VoiceHook, here: str) -> tuple[str, Resolved, list[str]]:
    """The text and settings of a document of one part (a door that speaks one request: `here`
    names it); several parts are refused in one line."""
    doc = parse_ssml(text, settings["lang"])
    if len(doc.parts) > 1:
        raise InvalidRequest(
            f"SSML at line {doc.parts[1].line}: the voice, language or rate changes, and {here} speaks one "
            "request with one of each: `say` and POST /v1/audio/speech speak each part in its own",
            "text",
        )
    part = doc.parts[0]
    return part.text, part_settings(settings, part, voice), list(doc.warnings)


def voice_shown(settings: Resolved) -> str:
    """A part's voice as --dry-run shows it: the saved voice, instruct:ITEMS, or auto."""
    if settings["voice"] is not None:
        return str(settings["voice"])
    if settings["instruct"] is not None:
        return f"instruct:{settings['instruct']}"
    return "auto"


def describe_parts(parts: Parts, records: Sequence[dict]) -> dict:
    """The dry run of a document (app/dryrun.describe of each part, `records`) as one record: each
    piece with its voice, language, speed and the pause before it (seconds)."""
    pieces: list[dict] = []
    after = 0.0
    for part, built, record in zip(parts.parts, parts.built, records):
        plan = built.plan
        gaps = list(plan.gaps) if plan is not None else [0.0, 0.0]
        speed = built.settings["speed"]
        for k, (piece, shown) in enumerate(zip(plan.pieces if plan is not None else [], record["pieces"])):
            pause = (gaps[piece.part] if piece.chunk == 0 else 0.0) + (after if k == 0 else 0.0)
            pause += part.pause_before if k == 0 else 0.0
            pieces.append(
                {
                    **shown,
                    "voice": voice_shown(built.settings),
                    "lang": record["lang"],
                    "speed": 1.0 if speed is None else speed,
                    "pause": round(pause, 3),
                }
            )
        after = gaps[-1]
    first = records[0]
    return {
        **first,
        "ssml": True,
        "text": " ".join(r["text"] for r in records),
        "pieces": pieces,
        "pauses": [p["pause"] for p in pieces] + [round(after, 3)],
        "seconds": round(sum(r["seconds"] for r in records) + sum(parts.pauses), 2),
        "seed": parts.seed if parts.seed is not None else first["seed"],
        "parts": len(records),
        "warnings": list(dict.fromkeys(w for r in records for w in r["warnings"])),
    }
