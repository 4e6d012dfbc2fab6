"""The Wyoming protocol's events as `omnivoice wyoming` reads and answers them: an event read off
the wire within the limits (`read_event`: its data and payload at most `limit` bytes, a larger one
read and dropped up to `MAX_DRAIN` bytes: `TooLarge`; JSON nested at most `MAX_DEPTH` deep,
counted before it is parsed: else `BadEvent`), an event's reading as the `wyoming` package's class
(`parse`, InvalidRequest for a missing or wrong field), and the `info` event (`describe`'s
answer: the voices and the languages advertised).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TypeVar

from wyoming.event import Event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
)

from ...app.door.speaker import Speaker
from ...engine.errors import InvalidRequest
from ...engine.text.languages import list_languages

Read = TypeVar("Read")  # a wyoming event class's reading

PROGRAM = "omnivoice"
ATTRIBUTION = Attribution(name="k2-fsa (OmniVoice)", url="https://huggingface.co/k2-fsa/OmniVoice")
MAX_DRAIN = 16 * 1024 * 1024  # bytes of an oversized event read and dropped; beyond, the connection closes
# Languages the model has that no ISO 639-1 code names, advertised beside the two-letter ones.
EXTRA_LANGUAGES = ("yue", "fil", "ceb", "ckb", "nan", "ast", "haw")
MAX_DEPTH = 32  # JSON nesting of an event's header or data (a synthesize is 3 deep)
EVENTS = ("describe", "synthesize", "synthesize-start", "synthesize-chunk", "synthesize-stop", "ping")


class BadEvent(Exception):
    """What came is not an event this server can read on (the connection is closed after)."""


class TooLarge(Exception):
    """An event over the limit, read and dropped: the connection goes on."""


def advertised_languages() -> list[str]:
    codes = {code for code, _ in list_languages()}
    return sorted(c for c in codes if len(c) == 2) + [c for c in EXTRA_LANGUAGES if c in codes]


def info_event(speaker: Speaker, version: str) -> Event:
    languages = advertised_languages()
    languages += [code for code, _ in speaker.own().languages if code not in languages]  # a fine-tune's own
    voices = []
    for v in speaker.voices():
        if v["type"] == "saved":
            seconds = f"{v['seconds']:.1f} s" if v.get("seconds") else "a"
            about = f"saved voice ({seconds} reference)"
        elif v["type"] == "checkpoint":
            about = "the checkpoint's own voice" + (f" ({v['lang']})" if v.get("lang") else "")
        elif v["type"] == "openai":
            about = f"designed: {v['instruct']}"
        else:
            about = "the model's own voice (a new one per request, unless the server pins --seed)"
        voices.append(
            TtsVoice(
                name=v["name"],
                attribution=ATTRIBUTION,
                installed=True,
                description=about,
                version=None,
                languages=languages,
            )
        )
    program = TtsProgram(
        name=PROGRAM,
        attribution=ATTRIBUTION,
        installed=True,
        version=version,
        description="OmniVoice text to speech (omnivoice-cli): packed generation, saved and designed voices, streaming",
        voices=voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program]).event()


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """How deep the arrays and objects of the JSON text `raw` nest, counted up to `limit + 1`
    (a text with no more than `limit` brackets in all is not scanned): to refuse a deep one
    before json.loads recurses into it."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return 0
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', raw)):
        depth += 1 if m.group() in (b"[", b"{") else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def _json(raw: bytes, what: str, kind: str = "JSON") -> object:
    """json.loads of an event's header or data, its nesting checked first; BadEvent for either."""
    if json_depth(raw) > MAX_DEPTH:
        raise BadEvent(f"{what} nests JSON deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BadEvent(f"{what} is not {kind}") from None


async def read_event(reader: asyncio.StreamReader, limit: int) -> Event | None:
    """The next event (None at the end), its data and payload within `limit` bytes each."""
    try:
        line = await reader.readline()
    except ValueError:  # asyncio's LimitOverrunError: a header line over the reader's limit
        raise BadEvent(f"an event's header line is over {limit} bytes") from None
    if not line or not line.endswith(b"\n"):
        return None
    header = _json(line, "an event's header", "a line of JSON")
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise BadEvent("an event's header must be a JSON object with a 'type'")
    data = header.get("data") or {}
    lengths = [header.get("data_length") or 0, header.get("payload_length") or 0]
    if not isinstance(data, dict) or not all(isinstance(n, int) and n >= 0 for n in lengths):
        raise BadEvent("an event's 'data' must be an object and its lengths counts of bytes")
    kind = header["type"][:40]
    if max(lengths) > limit:
        await _drain(reader, sum(lengths))
        raise TooLarge(
            f"the {kind!r} event is {sum(lengths)} bytes long: at most {limit} bytes are allowed (--max-chars)"
        )
    try:
        raw = await reader.readexactly(lengths[0]) if lengths[0] else b""
        payload = await reader.readexactly(lengths[1]) if lengths[1] else None
    except asyncio.IncompleteReadError:
        return None
    if raw:
        more = _json(raw, f"the {kind!r} event's data")
        if not isinstance(more, dict):
            raise BadEvent(f"the {kind!r} event's data must be a JSON object")
        data.update(more)
    return Event(type=header["type"], data=data, payload=payload)


async def _drain(reader: asyncio.StreamReader, n: int) -> None:
    if n > MAX_DRAIN:
        raise BadEvent(f"an event of {n} bytes is announced: far over the limit")
    while n > 0:
        got = await reader.read(min(n, 65536))
        if not got:
            return
        n -= len(got)


def parse(cls: type[Read], event: Event) -> Read:
    """The wyoming class's reading of an event; InvalidRequest for a missing or wrong field."""
    if cls in (Synthesize, SynthesizeChunk) and event.data.get("text") is None:
        raise InvalidRequest(f"the {event.type!r} event has no 'text': give the text to speak")
    try:
        found = cls.from_event(event)  # type: ignore[attr-defined]  # every wyoming event class has it
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidRequest(f"the {event.type!r} event is missing a field or has a wrong one ({e!r})") from None
    text = getattr(found, "text", "")
    if not isinstance(text, str):
        raise InvalidRequest(f"the {event.type!r} event's 'text' must be a string, got {type(text).__name__}")
    voice = getattr(found, "voice", None)
    if voice is not None and not all(
        isinstance(v, (str, type(None))) for v in (voice.name, voice.language, voice.speaker)
    ):
        raise InvalidRequest(f"the {event.type!r} event's 'voice' fields must be strings")
    return found
