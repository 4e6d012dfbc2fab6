"""`omnivoice dub`'s plan (no model, nothing written; the run: dubbing.py): each cue of the subtitle
file planned on its own (`CuePlanner.plan_cue`): its speaker (--cast: a VTT voice span or a
`NAME:` label), its words (markup stripped; an empty cue is skipped), its pieces (a cue over 30 s
is cut into pieces that fill it) and one engine request per piece, whose duration is the piece's
length and whose seed is S + the cue's index (from 0, counting every cue of the file), and its
speed (its words' natural time / its length: cues over FAST_SPEED are warned about); then the
checks that span cues (`CuePlanner.plan`: how many, how long the track, overlaps, the cast).
Anything wrong is an InvalidRequest naming the file and line, raised before anything is written.
A `CuePlan` is one cue: what it says, in which voice, as which requests, and what became of it
(its manifest record, and the key a stem made from it is reused by)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from ...engine.errors import InvalidRequest
from ...engine.model.config import SAMPLE_RATE
from ...engine.planning import Result
from ...engine.text.duration import speech_seconds
from ...engine.text.pauses import split_pauses
from ...engine.text.textcheck import is_blank
from ...media.cues import Cue, read_cues, timestamp
from ...media.tracks import cue_pieces, ms_to_samples, overlaps
from ..marking import MARK_KEYS
from ..request import Built, References, Voices, build_request
from ..say.dialogue import Cast, Member, PlaceSource, check_voices, cue_speaker
from ..session import random_seed, seed_for
from ..settings.layers import FLAG_SOURCE
from ..settings.presets import Preset
from .sourcevoices import SourceVoices

MAX_CUES = 20_000  # cues in one file (a feature film has about 2,000)
MAX_TRACK_SECONDS = 4 * 3600  # the longest track (4 h: 1.4 GB of float32 samples while assembled)
NOT_FOR_CUES = ("speed", "duration", "chunk_duration", "chunk_threshold")  # settings a cue's times replace
MAX_SPEEDUP = 10  # a cue's words may take at most this many times its length (or 1 s) to say
FAST_SPEED = 2.0  # a cue whose words must be said faster than this (x their natural time) is warned about


@dataclass
class CuePlan:
    """One cue: what it says, in which voice, as which requests, and what became of it."""

    cue: Cue
    where: str  # "FILE: line N"
    speaker: Member | None = None
    text: str = ""
    seed: int = 0
    pieces: list[tuple[str, int]] = field(default_factory=list)  # (words, milliseconds) of each request
    built: list[Built] = field(default_factory=list)
    status: str | None = None  # empty | reused | done (None: to speak)
    stem: str | None = None  # its file in the stems folder
    results: dict[int, Result] = field(default_factory=dict)  # piece -> its engine Result
    audio_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    voice_prompt: str | None = None  # the voice prompt its speech cloned (design.voice_prompt), once spoken
    speed: float | None = None  # its words' natural time (text.speech_seconds) / its length: > 1 is faster

    def offsets(self) -> list[int]:
        """Where each piece starts, in ms from the cue's start."""
        out, pos = [], 0
        for _, ms in self.pieces:
            out.append(pos)
            pos += ms
        return out

    def key(self) -> dict[str, object]:
        """What makes its audio: a stem made with the same key can be reused."""
        skipped = ("duration", "format", *MARK_KEYS)  # the mark: the stem's metadata, not its audio
        settings = {k: v for k, v in self.built[0].settings.values.items() if k not in skipped}
        return {
            "text": self.text,
            "start_ms": self.cue.start_ms,
            "end_ms": self.cue.end_ms,
            "seed": self.seed,
            "pieces": [list(p) for p in self.pieces],
            "settings": settings,
        }

    def record(self) -> dict[str, object]:
        c = self.cue
        return {
            "cue": c.index + 1,
            "index": c.index,
            "line": c.line,
            "start": timestamp(c.start_ms),
            "end": timestamp(c.end_ms),
            "start_seconds": c.start_ms / 1000,
            "end_seconds": c.end_ms / 1000,
            "text": self.text,
            "speaker": self.speaker.name if self.speaker else None,
            "voice": self.speaker.spec if self.speaker else None,
            "status": self.status or "pending",
            "output": self.stem,
            "seed": self.seed if self.built else None,
            "audio_seconds": round(self.audio_seconds, 4) if self.status in ("done", "reused") else None,
            "pieces": [
                {"text": t, "offset_seconds": o / 1000, "seconds": ms / 1000}
                for (t, ms), o in zip(self.pieces, self.offsets())
            ],
            "speed": None if self.speed is None else round(self.speed, 2),
            "key": self.key() if self.built else None,
            "voice_prompt": self.voice_prompt,
            "warnings": self.warnings,
        }

    def voice(self) -> str | None:
        """Who speaks it: the cast member's voice, else the run's (--voice, --ref, --instruct) or auto."""
        if self.speaker is not None:
            return self.speaker.spec
        if not self.built:
            return None
        values = self.built[0].settings.values
        for key, shown in (("voice", "{}"), ("ref", "{}"), ("instruct", "instruct:{}")):
            if values.get(key):
                return shown.format(values[key])
        return "auto"


class CuePlanner:
    """The cues of one subtitle file planned (see the module doc) with the run's preset, flags
    and cast; `seed` (the base seed) and `track_samples` (the track's length) once planned."""

    def __init__(
        self,
        input_path: str,
        preset: Preset | None,
        flags: dict[str, object],
        cast: Cast,
        refs: References,
        voices: Voices,
        warn: Callable[[str], None],
        source: SourceVoices | None = None,
        cues: list[Cue] | None = None,
        track_ms: int = 0,
    ) -> None:
        self.input_path, self.preset, self.flags, self.cast = input_path, preset, flags, cast
        self.source = source  # --source-audio: the speakers' voices cut from the original (sourcevoices.py)
        self.cues = cues  # the cues themselves (revoice: a take's words), else read from input_path
        self.track_ms = track_ms  # the track at least this long (revoice: the take's length)
        self.refs, self.voices, self.warn = refs, voices, warn  # warn: each text once for the whole dub
        self.seed = 0
        self.track_samples = 0

    def layers(self) -> list:
        """The preset and the flags; a cue's times fix its length, so a preset's speed, duration
        and chunk settings do not apply (the seed is the cue's own)."""
        preset = self.preset
        own = [(preset.origin, {k: v for k, v in preset.settings.items() if k not in NOT_FOR_CUES})] if preset else []
        return [
            *own,
            (FLAG_SOURCE, {k: v for k, v in self.flags.items() if k != "seed"}),
        ]

    def base_seed(self, earlier: list[dict[str, object]]) -> int:
        """--seed, else the seed of the stems being resumed, else a random one."""
        given = self.flags.get("seed")
        if isinstance(given, int):  # an integer, or None (the setting's check)
            return given
        for rec in earlier:
            seed, index = rec.get("seed"), rec.get("index")
            if rec.get("status") in ("done", "reused") and isinstance(seed, int) and isinstance(index, int):
                return seed - index
        return random_seed()

    def plan_cue(self, cue: Cue, base: int) -> CuePlan:
        """One cue's speaker, words, pieces and requests (InvalidRequest "FILE: line N: ...")."""
        plan = CuePlan(cue, f"{self.input_path}: line {cue.line}")
        plan.speaker, plan.text = cue_speaker(cue.text, cue.voice, self.cast, plan.where)
        plan.text = plan.text.strip()
        if is_blank(plan.text):  # whitespace, zero-width or control characters: a silent cue
            plan.status = "empty"
            return plan
        if plan.speaker is None and self.source is not None:  # no speaker: the voice of its own stretch
            plan.speaker = self.source.cue_member(cue)
        try:
            parts, gaps = split_pauses(plan.text)
        except InvalidRequest as e:
            raise InvalidRequest(f"{plan.where}: {e}") from None
        if len(parts) != 1 or any(gaps):
            raise InvalidRequest(f"{plan.where}: [pause] tags cannot be used in a cue: its times fix its length")
        seconds, slot = speech_seconds(plan.text), (cue.end_ms - cue.start_ms) / 1000
        plan.speed = seconds / slot
        if seconds > MAX_SPEEDUP * max(slot, 1.0):
            raise InvalidRequest(
                f"{plan.where}: the cue's words take about {seconds:.0f} s to say, more than "
                f"{MAX_SPEEDUP:g} times its {slot:g} s: shorten them or lengthen the cue"
            )
        plan.seed = seed_for(base, cue.index)
        plan.pieces = cue_pieces(plan.text, cue.end_ms - cue.start_ms)
        if sum(ms for _, ms in plan.pieces) < cue.end_ms - cue.start_ms:
            self.warn(f"{plan.where}: the cue is longer than its words can fill (30 s a piece): its end is silent")
        source = PlaceSource("line", plan.where)
        for text, ms in plan.pieces:
            settings = self.cast.settings(
                plan.speaker, self.layers(), {"duration": ms / 1000, "seed": plan.seed}, source
            )
            try:
                built = build_request(text, settings, refs=self.refs, voices=self.voices)
            except InvalidRequest as e:
                raise InvalidRequest(str(e) if str(e).startswith(plan.where) else f"{plan.where}: {e}") from None
            plan.built.append(built)
            plan.warnings += [w for w in built.warnings if w not in plan.warnings]
        for w in plan.warnings:  # shown once for the whole dub (e.g. an unknown language)
            self.warn(w)
        return plan

    def plan(self, earlier: list[dict[str, object]]) -> list[CuePlan]:
        """Read and plan every cue; the checks that span cues (length, overlaps, the cast)."""
        cues = self.cues if self.cues is not None else read_cues(self.input_path)
        if len(cues) > MAX_CUES:
            raise InvalidRequest(
                f"{self.input_path}: {len(cues)} cues, more than {MAX_CUES} in one dub: split the file"
            )
        last = max(self.track_ms, *(c.end_ms for c in cues))
        spoken_ms = sum(c.end_ms - c.start_ms for c in cues if c.text.strip())
        for what, ms in ((f"ends at {timestamp(last)}", last), (f"holds {timestamp(spoken_ms)} of cues", spoken_ms)):
            if ms > MAX_TRACK_SECONDS * 1000:
                raise InvalidRequest(
                    f"{self.input_path}: the dub {what}, more than {MAX_TRACK_SECONDS // 3600} h: "
                    "split the subtitle file"
                )
        if self.source is not None:  # every speaker not in the cast: their voice cut from the original
            self.cast = self.source.cast_with(cues, self.cast)
        used_default = self.source is None and any(c.text.strip() and self._speaker_of(c) is None for c in cues)
        check_voices(self.cast, self.layers(), self.refs, self.voices, default=used_default)
        base = self.seed = self.base_seed(earlier)
        plans = [self.plan_cue(cue, base) for cue in cues]
        for member in self.cast.unused():
            self.warn(f"--cast {member.name} speaks no cue")
        self._warn_fast(plans)
        self._warn_overlaps(plans)
        self.track_samples = ms_to_samples(last, SAMPLE_RATE)
        return plans

    def _speaker_of(self, cue: Cue) -> Member | None:
        try:
            return cue_speaker(cue.text, cue.voice, self.cast, "")[0]
        except InvalidRequest:
            return None  # reported with its line when the cue is planned

    def _warn_fast(self, plans: list[CuePlan]) -> None:
        """One warning for the cues whose words must be said more than FAST_SPEED times faster
        than their natural pace to fit their times (their "speed" in --json and --dry-run)."""
        fast = [p for p in plans if p.speed is not None and p.speed > FAST_SPEED]
        if len(fast) == 1:
            p = fast[0]
            self.warn(
                f"{self.input_path}: the cue at line {p.cue.line} must be spoken {p.speed:.1f}x faster than its "
                "natural pace to fit its times: shorten its words or lengthen it"
            )
        elif fast:
            shown = ", ".join(f"line {p.cue.line} ({p.speed:.1f}x)" for p in fast[:5])
            more = f" and {len(fast) - 5} more" if len(fast) > 5 else ""
            self.warn(
                f"{self.input_path}: {len(fast)} cue{'s' * (len(fast) != 1)} must be spoken over {FAST_SPEED:g}x faster than their "
                f"natural pace to fit their times: {shown}{more}; shorten their words or lengthen them"
            )

    def _warn_overlaps(self, plans: list[CuePlan]) -> None:
        spoken = {p.cue.index: p for p in plans if p.status != "empty"}
        pairs, total = overlaps([(i, p.cue.start_ms, p.cue.end_ms) for i, p in spoken.items()])
        if pairs:
            shown = "; ".join(
                f"cues {i + 1} and {j + 1} (lines {spoken[i].cue.line} and {spoken[j].cue.line})" for i, j in pairs
            )
            more = f" and {total - len(pairs)} more pairs" if total > len(pairs) else ""
            self.warn(f"{self.input_path}: overlapping cues are mixed: {shown}{more}")


def jsonable(value: dict[str, object]) -> dict[str, object]:
    """As it reads back from JSON (tuples become lists), to compare with a manifest record."""
    return json.loads(json.dumps(value, ensure_ascii=False))
