"""Many voices: the cast (`--cast NAME=VOICE`), speakers named in a text, dialogue scripts.

    cast = Cast.parse(["ALICE=alice", "BOB=bob.safetensors", "NARRATOR=instruct:male, low pitch"])
    lines = parse_script(text, cast, "script.txt")     # [ScriptLine(number, speaker, text)]
    settings = cast.settings(member, base_layers, flags, extra_layer)   # st.Resolved for build_request
    script = plan_script(text, "script.txt", cast_specs, preset, flags)  # every line built (`say --cast`)

A cast member's VOICE is a saved voice or a voice file (as --voice takes), `instruct:ITEMS` (a
designed voice, as --instruct takes) or `auto` (the model's own voice). It replaces the voice
the flags or a preset give (--voice, --instruct, --ref): a member is exactly that voice. Names
are matched without regard to case ("Alice:" is ALICE).

A script line is `NAME: text`; blank lines and lines starting with '#' are skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ...engine.errors import InvalidRequest
from ..request import Built, References, Voices, build_request
from ..session import check_seed_range, random_seed, seed_for
from ..settings.layers import FLAG_SOURCE, Resolved, Source, check_layer, resolve
from ..settings.presets import Preset
from ..settings.setting import LINE
from ..settings.values import join_lines

MAX_NAME = 40  # characters of a speaker's name
MAX_LINES = 20_000  # spoken lines of one script (all go to one packed run)
DEFAULT_GAP = 0.3  # seconds of silence between two lines of a script
MAX_GAP = 60.0
MAX_GAPS_TOTAL = 3600.0  # seconds of silence all the gaps of a script may add up to
PROBE_TEXT = "Hello."  # the text a voice is checked with before any line needs it
_LABEL_RE = re.compile(r"^\s*([^:\n]{1,%d}?)\s*:(?:\s+|$)(.*)$" % MAX_NAME, re.S)  # "NAME: text"
_SHOUTED_RE = re.compile(r"^[A-Z0-9][A-Z0-9 ._'&-]*$")  # how subtitles write a speaker's label


@dataclass(frozen=True)
class CastSource(Source):
    """Where a cast member's settings came from: named "--cast NAME" in messages. Its kind is
    "line" so that, like a JSON line's fields, it is later than the flags and the preset."""

    def name(self, key: str) -> str:
        return f"--cast {self.where}"

    def short(self, key: str) -> str:
        return "--cast"

    def describe(self) -> str:
        return f"cast {self.where}"


@dataclass(frozen=True)
class PlaceSource(Source):
    """Settings a place in a file gives (a cue's duration, a line's seed): named "FILE: line N"."""

    def name(self, key: str) -> str:
        return self.where

    def describe(self) -> str:
        return self.where


@dataclass(frozen=True)
class Member:
    """One speaker of the cast."""

    name: str  # as given
    kind: str  # "voice", "instruct", "auto", or "ref" (a recording: dub --source-audio's cut of the original)
    value: str | None  # the voice spec, the instruct items or the recording's path; None for auto

    @property
    def spec(self) -> str:
        if self.kind == "ref":
            return f"ref:{Path(self.value or '').name}"
        return {"voice": self.value, "instruct": f"instruct:{self.value}", "auto": "auto"}[self.kind] or ""


def parse_member(spec: str) -> Member:
    """One `--cast NAME=VOICE` value (InvalidRequest naming it when malformed)."""
    name, sep, voice = spec.partition("=")
    name, voice = name.strip(), voice.strip()
    if not sep or not name or not voice:
        raise InvalidRequest(
            f"--cast {spec!r}: expected NAME=VOICE, e.g. --cast ALICE=alice "
            "(VOICE: a saved voice, a voice file, instruct:ITEMS or auto)"
        )
    if len(name) > MAX_NAME or ":" in name or "\n" in name:
        raise InvalidRequest(f"--cast {spec!r}: a name is at most {MAX_NAME} characters, without ':'")
    if voice.lower() == "auto":
        return Member(name, "auto", None)
    if voice.lower().startswith("instruct:"):
        items = voice[len("instruct:") :].strip()
        if not items:
            raise InvalidRequest(
                f"--cast {spec!r}: instruct: needs voice-design items, e.g. instruct:female, low pitch"
            )
        return Member(name, "instruct", items)
    return Member(name, "voice", voice)


class Cast:
    """The speakers of a run, by name (case-insensitive)."""

    def __init__(self, members: Iterable[Member] = ()) -> None:
        self.members: dict[str, Member] = {}
        for m in members:
            key = m.name.casefold()
            if key in self.members:
                raise InvalidRequest(f"--cast {m.name} is given twice: give each speaker once")
            self.members[key] = m
        self.used: set[str] = set()

    @classmethod
    def parse(cls, specs: Iterable[str] | None) -> "Cast":
        return cls(parse_member(s) for s in (specs or []))

    def __bool__(self) -> bool:
        return bool(self.members)

    def names(self) -> str:
        return ", ".join(m.name for m in self.members.values())

    def find(self, name: str) -> Member | None:
        member = self.members.get(name.strip().casefold())
        if member is not None:
            self.used.add(member.name.casefold())
        return member

    def unused(self) -> list[Member]:
        return [m for k, m in self.members.items() if k not in self.used]

    def settings(
        self,
        member: Member | None,
        layers: list,
        extra: Mapping[str, object] | None = None,
        extra_source: Source | None = None,
    ) -> Resolved:
        """The resolved settings of one member's request: `layers` (preset, flags), then the
        member's voice (replacing voice, instruct and ref), then `extra` (e.g. a cue's duration
        and seed, from `extra_source`). member None: the layers as they are."""
        own: Mapping[str, object] = {}
        mine: list[tuple[Source, Mapping[str, object] | None]] = []
        if member is not None:
            source = CastSource("line", member.name)
            if member.kind != "auto":
                own = check_layer({member.kind: member.value}, source, LINE)
            mine.append((source, own))
        more: list[tuple[Source, Mapping[str, object] | None]] = (
            [(extra_source or Source("request"), dict(extra))] if extra else []
        )
        resolved = resolve(*layers, *mine, *more)
        if member is None:
            return resolved
        others = [key for key in ("voice", "instruct", "ref", "ref_text") if key != member.kind]
        return resolved.with_values(dict.fromkeys(others), source)  # the member is exactly its voice


def check_voices(cast: Cast, layers: list, refs: References, voices: Voices, default: bool) -> None:
    """Check every cast member's voice (used or not) and, when `default`, the voice the layers
    give, before any line or cue needs them: their errors then name --cast / --voice, not a line."""
    members: list[Member | None] = [*cast.members.values(), *([None] if default else [])]
    keep, refs.keep_designs = refs.keep_designs, False  # a probe designs no voice: the first line does
    try:
        for member in members:
            build_request(PROBE_TEXT, cast.settings(member, layers, {"seed": 0}), refs=refs, voices=voices)
    finally:
        refs.keep_designs = keep


# --------------------------------------------------------------------------------------------
# Speakers named in a text
# --------------------------------------------------------------------------------------------


def split_label(text: str) -> tuple[str | None, str]:
    """("NAME", rest) for a text that starts with "NAME:" (a name of at most MAX_NAME characters
    followed by a colon and a space or the end), else (None, text). "10:30" is no label."""
    m = _LABEL_RE.match(text)
    if not m or not any(c.isalpha() for c in m.group(1)):
        return None, text
    return m.group(1).strip(), m.group(2).strip()


def cue_speaker(text: str, voice: str | None, cast: Cast, where: str) -> tuple[Member | None, str]:
    """The cast member a cue names, and its words without the label.

    A VTT voice span names a speaker outright; else a "NAME:" label does when NAME is in the cast,
    or is written in capitals as subtitles write speakers ("JOHN:"), which then must be in the
    cast. Anything else is text ("Note: ..."). Without a cast, nothing is a speaker."""
    if not cast:
        return None, text
    if voice:
        member = cast.find(voice)
        if member is None:
            raise unknown_speaker(voice, cast, where)
        label, rest = split_label(text)
        return member, rest if label is not None and label.casefold() == voice.casefold() else text
    label, rest = split_label(text)
    if label is None:
        return None, text
    member = cast.find(label)
    if member is not None:
        return member, rest
    if _SHOUTED_RE.match(label):
        raise unknown_speaker(label, cast, where)
    return None, text


def unknown_speaker(name: str, cast: Cast, where: str) -> InvalidRequest:
    return InvalidRequest(f"{where}: speaker {name!r} is not in the cast ({cast.names()}): add --cast {name}=VOICE")


@dataclass(frozen=True)
class ScriptLine:
    """One spoken line of a dialogue script."""

    number: int  # its line number in the text, from 1
    speaker: Member
    text: str


def parse_script(text: str, cast: Cast, name: str) -> list[ScriptLine]:
    """The lines of a script: each non-blank line that does not start with '#' is `NAME: text`
    with NAME in the cast (InvalidRequest naming the line and the cast otherwise)."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        label, rest = split_label(stripped)
        where = f"{name}: line {number}"
        if label is None:
            raise InvalidRequest(f"{where}: no speaker: begin the line with NAME: (the cast: {cast.names()})")
        member = cast.find(label)
        if member is None:
            raise unknown_speaker(label, cast, where)
        if rest:
            lines.append(ScriptLine(number, member, rest))
    if not lines:
        raise InvalidRequest(f"{name} has no lines to speak: write lines like 'ALICE: Hello.'")
    if len(lines) > MAX_LINES:
        raise InvalidRequest(f"{name} has {len(lines)} lines, more than {MAX_LINES} in one dialogue: split it")
    return lines


# --------------------------------------------------------------------------------------------
# A dialogue script, planned (`say --cast`)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """A dialogue script checked and built without the model: line i (from 0, counting the
    spoken lines) is its own request with seed `seed` + i, in its speaker's voice."""

    lines: tuple[tuple[ScriptLine, Built], ...]  # (the line, its request)
    seed: int  # the base seed
    cast: Cast  # who speaks (`cast.unused()`: the members with no line)
    refs: References = field(default_factory=References)  # its designed voices, rendered once the model is there


def check_gap(gap: float | None) -> float:
    """--gap, the seconds of silence between two lines (DEFAULT_GAP when not given)."""
    if gap is None:
        return DEFAULT_GAP
    if not (math.isfinite(gap) and 0 <= gap <= MAX_GAP):
        raise InvalidRequest(f"--gap must be seconds in 0..{MAX_GAP:g}, got {gap!r}")
    return gap


def check_gaps_total(gap: float, lines: int) -> None:
    if gap * (lines - 1) > MAX_GAPS_TOTAL:
        raise InvalidRequest(
            f"--gap {gap:g} between {lines} lines is more than {MAX_GAPS_TOTAL / 3600:g} h "
            "of silence: give a shorter --gap"
        )


def plan_script(text: str, name: str, cast_specs: list[str], preset: Preset | None, flags: Mapping[str, Any]) -> Script:
    """Every line of the script `name` built (InvalidRequest naming its line), every cast member's
    voice checked first, the seeds S + i checked (S: --seed, else a random one)."""

    cast = Cast.parse(cast_specs)
    lines = parse_script(text, cast, name)
    layers = [
        *([(preset.origin, preset.settings)] if preset else []),
        (FLAG_SOURCE, {k: v for k, v in flags.items() if k != "seed"}),
    ]
    refs, voices = References(keep_designs=True), Voices()  # a designed member: its first line's voice, cloned
    check_voices(cast, layers, refs, voices, default=False)
    base = int(flags["seed"]) if flags.get("seed") is not None else random_seed()
    check_seed_range(base, len(lines))
    built = []
    for i, line in enumerate(lines):
        where = f"{name}: line {line.number}"
        settings = cast.settings(line.speaker, layers, {"seed": seed_for(base, i)}, PlaceSource("line", where))
        try:
            built.append((line, build_request(join_lines(line.text), settings, refs=refs, voices=voices)))
        except InvalidRequest as e:
            raise InvalidRequest(str(e) if str(e).startswith(where) else f"{where}: {e}") from None
    return Script(tuple(built), base, cast, refs)
