"""One model behind one engine loop, for the ways in that name a voice by its name: `omnivoice
wyoming` (Home Assistant's satellites) and `omnivoice mcp` (agents). Free of typer, rich and of
any protocol's package.

    speaker = Speaker(SpeakerOptions(layers=..., model=...), load=lambda: engine)
    built = speaker.build("Hello.", voice="alice", lang="en", settings={"num_step": 16})
    ticket = speaker.submit(built.request, on_event)      # engine/service.py: events per piece
    audio, summary = speaker.render(built.request)        # the same, waited for (a worker thread)
    speaker.voices()                                      # saved voices, OpenAI's names, auto

Layers, later wins: defaults < the command's --preset < its flags < the request's preset (a
name, never a file) < the request's settings, checked by the schema as a server request's fields
are (`settings.HTTP_SETTINGS`): a bad value reads "field 'num_step' must be an integer in 1..64,
got 100", the words of the command line after the name. A request names a voice, never a file:
a saved voice (case aside when one name fits), one of OpenAI's names (its voice-design items,
under the request's own `instruct`: `say --voice alloy` does the same), or `auto` (the model's
own voice; it also sets aside the command's --voice). The request is then built by
`request.build_request`, the checks of `say`.

Many clients share the one `engine.service.Service` (packed forwards, `max_queue` open requests
at most); the model is loaded once, by the first request (or by `start()`), and stays loaded.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..engine.errors import InvalidRequest
from . import settings as st

REQUEST = st.Source("request")
USAGE_ERRORS = (InvalidRequest, st.SettingsError)  # a request's own fault: the client is told why
MAX_LISTED = 40  # voice names listed in an unknown-voice message
DROPPED_PRESET_KEYS = (*st.RUN_WIDE, "format")  # fixed when the command starts


@dataclass(frozen=True)
class SpeakerOptions:
    """What the command was started with."""

    layers: tuple = ()  # (settings.Source, values) of its --preset and its flags
    model: str = st.DEFAULT_MODEL  # what --model named (for messages)
    max_queue: int = 64  # requests open in the engine at once (generating or waiting); more: Busy
    max_chars: int = 4096  # characters of one text at most
    first_seconds: float = 4.0  # a text's first piece: whole sentences up to this estimated length
    piece_seconds: float = 10.0  # its later pieces


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


class Speaker:
    """The shared engine loop and the requests built for it (see the module doc). Thread-safe."""

    def __init__(self, options: SpeakerOptions, load: Callable[[], Any]) -> None:
        self.options, self._load = options, load
        self._lock = threading.Lock()
        self._service: Any = None
        self.load_seconds: float | None = None  # how long the model took to load, once loaded

    # --- the engine loop ----------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._service is not None

    def service(self) -> Any:
        """The engine loop, the model loaded on the first call (a failure is raised, and the
        next call tries again)."""
        with self._lock:
            if self._service is None:
                from ..engine.service import Service
                from ..engine.streaming import StreamConfig

                t0 = time.perf_counter()
                engine = self._load()
                self.load_seconds = time.perf_counter() - t0
                config = StreamConfig(
                    first_seconds=self.options.first_seconds, piece_seconds=self.options.piece_seconds
                )
                self._service = Service(engine, max_queue=self.options.max_queue, config=config).start()
            return self._service

    start = service

    def stop(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.stop()

    @property
    def sample_rate(self) -> int:
        return int(self.service().engine.sample_rate)

    @property
    def output_rate(self) -> int:
        """The rate audio is sent at: the command's `sample_rate` (--sample-rate), else the model's."""
        return int(st.resolve(*self.options.layers)["sample_rate"] or self.sample_rate)

    def submit(self, request: Any, on_event: Callable[[Any], None]) -> Any:
        """service().submit: a Ticket, or InvalidRequest / Busy / Stopped."""
        return self.service().submit(request, on_event)

    def render(self, request: Any, on_piece: Callable[[Any], None] | None = None) -> tuple[Any, Any]:
        """(audio, Summary) of a request, waited for; on_piece(StreamPiece) as each is ready. An
        exception (in on_piece too) cancels the request."""
        import numpy as np

        events: queue.Queue = queue.Queue()
        ticket = self.submit(request, events.put)
        pieces, done = [], False
        try:
            while True:
                event = events.get()
                if event.kind == "error":
                    done = True
                    raise event.error
                if event.kind == "done":
                    done = True
                    audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
                    return audio, event.summary
                pieces.append(event.piece.audio)
                if on_piece is not None:
                    on_piece(event.piece)
        finally:
            if not done:
                ticket.cancel()

    # --- requests -----------------------------------------------------------------------------
    def check(self) -> None:
        """The command's own settings make a request (before the model loads: fail fast)."""
        self.build("Hello.")

    def build(
        self, text: Any, *, voice: Any = None, lang: Any = None, instruct: Any = None, settings: Any = None
    ) -> Any:
        """A request.Built for `text` (InvalidRequest / SettingsError in the CLI's words)."""
        from .request import References, Voices, build_request

        text = self.check_text(text)
        layers = self.request_layers(settings, lang=lang, instruct=instruct)
        named = voice_setting(voice)
        resolved = st.resolve(*self.options.layers, *layers)
        if named is not _UNSET:
            resolved = resolved.with_values({"voice": named}, REQUEST)
        return build_request(text, resolved, refs=References(), voices=Voices())

    def check_text(self, text: Any) -> str:
        if not isinstance(text, str):
            raise InvalidRequest(f"text must be a string, got {st.type_name(text)}", "text")
        limit = self.options.max_chars
        if len(text) > limit:
            raise InvalidRequest(
                f"text is {len(text)} characters long: at most {limit} are allowed (--max-chars)", "text"
            )
        return text  # its line breaks kept for `markdown` (request.spoken_text joins the lines)

    def request_layers(self, settings: Any, **given: Any) -> list[tuple[st.Source, dict]]:
        """The request's preset and settings as layers, checked; `given` (lang, instruct: the
        protocol's own fields) are settings too, given once."""
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            raise InvalidRequest(
                f"settings must be an object of setting names and values, got {st.type_name(settings)}"
            )
        values = dict(settings)
        layers = []
        preset = values.pop("preset", None)
        if preset is not None:
            layers.append(preset_layer(preset))
        for key, value in given.items():
            if value is None:
                continue
            if values.get(key) is not None:
                raise InvalidRequest(f"{key!r} is given twice (as {key!r} and in settings): give it once")
            values[key] = value
        layers.append((REQUEST, st.check_layer(values, REQUEST, st.HTTP)))
        return layers

    # --- voices -------------------------------------------------------------------------------
    def voices(self) -> list[dict[str, Any]]:
        """Every voice a request may name: saved ones (readable), OpenAI's names no saved voice
        has, and auto; each {"name", "type", ...}."""
        from . import voices as store

        out: list[dict[str, Any]] = []
        saved = store.list_voices()
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
        for name, items in store.builtin_voices().items():
            if name.casefold() not in names:
                out.append({"name": name, "type": "openai", "instruct": items})
        out.append({"name": "auto", "type": "auto"})
        return out


_UNSET = object()  # no voice named: the command's own stands


def voice_setting(spec: Any) -> Any:
    """The `voice` setting a request's voice name means: the name (saved or built in), None for
    auto, _UNSET when none is named; InvalidRequest for a path or an unknown name."""
    from . import voices as store

    if spec is None:
        return _UNSET
    if not isinstance(spec, str):
        raise InvalidRequest(f"voice must be a voice's name, got {st.type_name(spec)}", "voice")
    name = spec.strip()
    if not name or name.lower() == "auto":
        return None
    known = _known_voices()
    if store.is_voice_path(name):
        raise InvalidRequest(
            f"voice {st.shown_value(spec)} is a path: a request names a voice, not a file "
            f"(known voices: {_listed(known)})",
            "voice",
        )
    index = store.voice_index()
    if name in index or len([n for n in index if n.casefold() == name.casefold()]) == 1:
        return name
    if name.lower() in store.builtin_voices():
        return name.lower()
    raise InvalidRequest(
        f"unknown voice {st.shown_value(name)}{st.did_you_mean(name, known)}; known voices: {_listed(known)}", "voice"
    )


def _known_voices() -> list[str]:
    from . import voices as store

    index = store.voice_index()
    folded = {n.casefold() for n in index}
    return [*index, *(n for n in store.builtin_voices() if n not in folded), "auto"]


def _listed(names: list[str]) -> str:
    more = len(names) - MAX_LISTED
    return ", ".join(names[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def preset_layer(name: Any) -> tuple[st.Source, dict]:
    """A preset a request names (by name only) as a layer, without the settings fixed at start."""
    index = st.preset_index()
    if not isinstance(name, str) or st.is_preset_path(name) or name not in index:
        hint = (
            " (a request cannot name a file)"
            if isinstance(name, str) and st.is_preset_path(name)
            else (st.did_you_mean(name, index) if isinstance(name, str) else "")
        )
        raise InvalidRequest(
            f"field 'preset' must be a preset's name ({', '.join(index) or 'none'}), got {st.shown_value(name)}{hint}"
        )
    found = st.find_preset(name)
    return found.origin, {k: v for k, v in found.settings.items() if k not in DROPPED_PRESET_KEYS}


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def ready_text(buffer: str) -> tuple[str, str]:
    """(the text to speak now, the rest) of a stream's buffer (Wyoming's streaming events, the
    socket's text messages): up to its last sentence end that a space follows ('It costs 3.' may go on as '5 euros')."""
    from ..engine.streaming import text_units

    cut = 0
    for _start, end, ends in text_units(buffer):
        if ends and end < len(buffer) and buffer[end].isspace():
            cut = end
    return buffer[:cut], buffer[cut:]


def within(text: str, limit: int) -> list[str]:
    """`text` in parts of at most `limit` characters (joined, they are the text), each cut at its
    last sentence end, else its last space."""
    parts = []
    while len(text) > limit:
        head, _ = ready_text(text[: limit + 1])
        space = text.rfind(" ", 1, limit + 1)
        cut = len(head) if head.strip() else space if space > 0 else limit
        parts.append(text[:cut])
        text = text[cut:]
    return [*parts, text]


def take_parts(buffer: str, limit: int) -> tuple[list[str], str]:
    """(the parts to speak now, each of at most `limit` characters and not blank; the rest to
    keep) of a stream's text buffer: up to its last sentence end (ready_text), and, where no
    sentence has ended for `limit` characters, what is over it cut at a space (within)."""
    ready, rest = ready_text(buffer)
    parts = within(ready, limit) if ready else []
    if len(rest) > limit:  # no sentence end for that long: spoken up to a space
        *more, rest = within(rest, limit)
        parts += more
    return [p for p in parts if p.strip()], rest
