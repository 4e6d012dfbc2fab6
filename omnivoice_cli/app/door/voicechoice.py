"""A request's voice name: what it means (`VoiceChoice`: a saved voice, one of OpenAI's names, the
checkpoint's own voice, or auto), the refusal of one that names no voice (`VoiceRefused`, whose
`kind` a front end may word in its protocol's terms), and the voices a request may name
(`voice_listing`: what `Speaker.voices`, a server's voice list and Wyoming's `info` show).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Mapping, TypedDict

from ...engine.errors import InvalidRequest
from ..settings.values import did_you_mean, shown_value, type_name
from ..voices import voices as store

if TYPE_CHECKING:
    from ...engine.checkpoint.finetune import CheckpointOwn

MAX_LISTED = 40  # voice names listed in an unknown-voice message


class ListedVoice(TypedDict, total=False):
    """A voice a request may name, as `Speaker.voices` lists it."""

    name: str
    type: str  # "saved", "checkpoint" (the fine-tune's own), "openai" or "auto"
    lang: str  # a checkpoint voice's language
    seconds: float | None  # a saved voice's reference length
    text: str  # a saved voice's transcript
    instruct: str  # an OpenAI name's voice-design items


@dataclass(frozen=True)
class VoiceChoice:
    """What a request's voice name means."""

    shown: str  # 'auto', or the name as the request gave it (stripped)
    saved: str | None = None  # the saved voice's own name (case aside when one name fits)
    items: str | None = None  # an OpenAI name's voice-design items (the voice map's)
    own: bool = False  # a voice the checkpoint ships (engine/checkpoint/finetune.py)

    @property
    def setting(self) -> str | None:
        """The `voice` setting it is: the saved voice, an OpenAI name (request.build_request
        reads its items, under the instruct given), the checkpoint's own voice, None for auto."""
        if self.own:
            return self.shown
        return self.saved if self.items is None else self.shown.lower()


class VoiceRefused(InvalidRequest):
    """A request's voice name that names no voice: `kind` says why, `known` what may be named."""

    def __init__(self, message: str, kind: Literal["type", "path", "unknown"], spec: object, known: list[str]) -> None:
        super().__init__(message, "voice")
        self.kind, self.spec, self.known = kind, spec, known


def choose_voice(spec: object, table: Mapping[str, str], own: CheckpointOwn) -> VoiceChoice | None:
    """What a request's voice name means (None: none named, the command's own stands): a
    saved voice (case aside when one name fits), an OpenAI name no saved voice has, or auto;
    VoiceRefused for a path, an unknown name or not a name. `table`: OpenAI's names -> their
    voice-design items; `own`: what the checkpoint declares."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        message = f"voice must be a voice's name, got {type_name(spec)}"
        raise VoiceRefused(message, "type", spec, [])
    name = spec.strip()
    if not name or name.lower() == "auto":
        return VoiceChoice("auto")
    index = store.voice_index()
    folded = {n.casefold() for n in index}
    known = [*index, *(n for n in table if n not in folded), *(v.name for v in own.voices), "auto"]
    if store.is_voice_path(name):
        message = (
            f"voice {shown_value(spec)} is a path: a request names a voice, not a file (known voices: {listed(known)})"
        )
        raise VoiceRefused(message, "path", spec, known)
    same = [n for n in index if n.casefold() == name.casefold()]
    if name in index or len(same) == 1:
        return VoiceChoice(name, saved=name if name in index else same[0])
    if own.voice(name) is not None:  # the checkpoint's own name wins over an OpenAI name
        return VoiceChoice(own.voice(name).name, own=True)  # type: ignore[union-attr]
    if name.lower() in table:
        return VoiceChoice(name, items=table[name.lower()])
    message = f"unknown voice {shown_value(name)}{did_you_mean(name, known)}; known voices: {listed(known)}"
    raise VoiceRefused(message, "unknown", spec, known)


def voice_listing(table: Mapping[str, str], own: CheckpointOwn) -> list[ListedVoice]:
    """Every voice a request may name: saved ones (readable), OpenAI's names no saved voice
    has, and auto; each {"name", "type", ...}."""
    out: list[ListedVoice] = []
    saved = store.saved_voices()
    for e in saved:
        if e.meta is None:
            continue  # a broken file: `omnivoice voice list` says why
        out.append(
            {
                "name": e.name,
                "type": "saved",
                "seconds": _number(e.meta.get("seconds")),
                "text": e.meta.get("text", ""),
            }
        )
    names = {e.name.casefold() for e in saved}
    for v in own.voices:
        if v.name.casefold() not in names:
            out.append({"name": v.name, "type": "checkpoint", "text": v.text, "lang": v.lang or ""})
    names |= {v.name.casefold() for v in own.voices}
    for name, items in table.items():
        if name.casefold() not in names:
            out.append({"name": name, "type": "openai", "instruct": items})
    out.append({"name": "auto", "type": "auto"})
    return out


def listed(names: list[str]) -> str:
    more = len(names) - MAX_LISTED
    return ", ".join(names[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
