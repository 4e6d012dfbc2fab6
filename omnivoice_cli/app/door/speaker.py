"""One model behind one engine loop: the one door of every network request, `omnivoice serve`
(HTTP, its socket and script), `omnivoice wyoming` (Home Assistant's satellites) and `omnivoice
mcp` (agents). Presets, voices, the request's build and the plan's size check are done here,
once; a front end only translates its protocol into these calls and their errors into its
replies. Free of typer, rich and of any protocol's package.

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

Every front end's request is made by `make` (a counter, `requests_built`, says how many), after
`resolve` (the layers and the voice): it builds the request by `request.build_request`, the
checks of `say`, which plan it as the CLI plans it (`engine.pipeline.plan_request`): what the
plan refuses is refused in its words, and what it plans the engine loop takes (a stretch over
one forward is cut at words: `engine.forwardfit.fit_sizes`). `choose_voice` is the one reading of a
request's voice name (voicechoice.py: saved, mapped, auto; a path or an unknown name:
`VoiceRefused`, whose `kind` a front end may word in its own protocol's terms). A stream's text
is cut into parts to speak by textparts.py.

Many clients share the one `engine.service.Service` (packed forwards, `max_queue` open requests
at most); the model is loaded once, by the first request (or by `start()`), and stays loaded,
unless `idle_unload` is set: then, once nothing has used it for that many seconds (no request
open in the engine, nobody holding it: `hold()`, what a server does for each request and socket),
the engine loop is stopped and the model's memory freed (`unload`: idle.free_memory, gc, the
CUDA cache, glibc's malloc_trim); the next request loads it again (`loads`, `load_seconds`, `on_load` say so).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from ...engine.errors import InvalidRequest
from ...engine.planning import Request
from ...engine.service import Service
from ...engine.stream.cut import StreamConfig
from ...engine.stream.render import StreamPiece
from ...engine.tickets import Event, Places, Summary, Ticket
from ...media.marks import Mark
from ..checkpoint import model_config
from ..marking import run_mark
from ..request import VOICE_MAP, Built, References, Voices, build_request, named, reference_prompt
from ..settings.layers import Resolved, Source, check_layer, resolve
from ..settings.presets import find_preset, is_preset_path, preset_index
from ..settings.schema import DEFAULT_MODEL, RUN_WIDE
from ..settings.setting import HTTP, SettingsError
from ..settings.values import did_you_mean, shown_value, type_name
from ..ssml.parse import is_ssml
from ..ssml.spoken import Parts, build_parts
from ..voices import voices as store
from ..voices.instruct import merge
from . import voicechoice
from .idle import free_memory
from .voicechoice import ListedVoice, VoiceChoice

if TYPE_CHECKING:
    import numpy as np

    from ...engine.checkpoint.finetune import CheckpointOwn
    from ...engine.pieces import PieceCheck
    from ...engine.pipeline import Engine
    from ...engine.sound.voice import VoicePrompt

REQUEST = Source("request")
USAGE_ERRORS = (InvalidRequest, SettingsError)  # a request's own fault: the client is told why
DROPPED_PRESET_KEYS = (*RUN_WIDE, "format")  # fixed when the command starts
Layer = tuple[Source, dict]  # one settings layer: where it came from, its checked values


@dataclass(frozen=True)
class SpeakerOptions:
    """What the command was started with."""

    layers: tuple = ()  # (settings.Source, values) of its --preset and its flags
    model: str = DEFAULT_MODEL  # what --model named (for messages)
    max_queue: int = 64  # requests open in the engine at once (generating or waiting); more: Busy
    max_chars: int = 4096  # characters of one text at most
    first_seconds: float = 4.0  # a text's first piece: whole sentences up to this estimated length
    piece_seconds: float = StreamConfig.piece_seconds  # its later pieces (short: its sentences leave one by one)
    sentence_seconds: float = StreamConfig.sentence_seconds  # a later sentence kept whole up to this
    voice_map: Mapping[str, str] | None = None  # OpenAI voice name -> items (None: the built-in table)
    idle_unload: float | None = None  # seconds unused after which the model is unloaded (None: never)
    phrase_seed: bool = False  # a request without a seed gets one from its text and voice (the phrase cache's)

    def stream_config(self) -> StreamConfig:
        """How its engine loop cuts a text (engine/stream/cut.py)."""
        return StreamConfig(self.first_seconds, self.piece_seconds, sentence_seconds=self.sentence_seconds)


class NoModel(RuntimeError):
    """A Speaker that only builds requests was asked for its engine loop."""


class Speaker:
    """The shared engine loop and the requests built for it (see the module doc). Thread-safe."""

    def __init__(self, options: SpeakerOptions, load: Callable[[], Engine | None]) -> None:
        self.options, self._load = options, load
        self._lock = threading.Lock()
        self._service: Service | None = None
        self.load_seconds: float | None = None  # how long the model took to load (the last load)
        self.loads = 0  # times the model was loaded
        self.unloads = 0  # times it was unloaded for being idle (idle_unload)
        self.loading = False  # a load is under way
        self.unloading = False  # an idle unload is under way: the engine loop stopping, its memory freed
        self.on_load: list[Callable[[float], None]] = []  # called with each load's seconds, once running
        self.requests_built = 0  # requests made by `make` (every front end's)
        self._own_prompts: dict[tuple[str, str], VoicePrompt] = {}  # the checkpoint's voices, encoded
        self._count = threading.Lock()
        self._idle = threading.Condition()  # guards _users, _quiet_since, _closed
        self._users = 0  # holders (hold()): requests and sockets being answered
        self._quiet_since = time.monotonic()  # when it was last used
        self._closed = False
        self._watcher: threading.Thread | None = None

    # --- the engine loop ----------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._service is not None

    @property
    def running(self) -> Service | None:
        """The engine loop once started (None before: nothing is loaded by asking)."""
        return self._service

    @property
    def phase(self) -> str:
        """ "loaded", "loading", "unloading" (idle: its memory being given back), "asleep" (given back) or "unloaded"."""
        if self._service is not None:
            return "loaded"
        if self.unloading:
            return "unloading"
        if self.loading:
            return "loading"
        return "asleep" if self.unloads else "unloaded"

    def service(self) -> Service:
        """The engine loop, the model loaded on the first call (a failure is raised, and the
        next call tries again), and again on the first after an idle unload."""
        with self._lock:
            if self._service is None:
                t0 = time.perf_counter()
                self.loading = True
                try:
                    engine = self._load()
                finally:
                    self.loading = False
                if engine is None:
                    raise NoModel("this speaker only builds requests: it has no model to load")
                self.load_seconds = time.perf_counter() - t0
                self.loads += 1
                config = self.options.stream_config()
                # fit: a stretch over one forward is cut at words, as the CLI's plan cuts it (`make`
                # has planned the request: what the plan takes, the loop takes)
                service = Service(engine, max_queue=self.options.max_queue, config=config, fit=True)
                del engine
                self._touch()
                self._service = service.start()
                for listener in self.on_load:
                    listener(self.load_seconds)
                if self.options.idle_unload is not None and self._watcher is None:
                    self._watcher = threading.Thread(target=self._watch, name="omnivoice-idle", daemon=True)
                    self._watcher.start()
            return self._service

    start = service

    def stop(self) -> None:
        with self._idle:
            self._closed = True
            self._idle.notify_all()
        with self._lock:
            if self._service is not None:
                self._service.stop()

    # --- idle unloading -----------------------------------------------------------------------
    @contextmanager
    def hold(self) -> Iterator[None]:
        """While held (a request or socket being answered), the model is not unloaded."""
        with self._idle:
            self._users += 1
        try:
            yield
        finally:
            with self._idle:
                self._users -= 1
                self._quiet_since = time.monotonic()
                self._idle.notify_all()

    def _touch(self) -> None:
        with self._idle:
            self._quiet_since = time.monotonic()
            self._idle.notify_all()

    def _idle_for(self) -> float | None:
        """Seconds it has been unused (None: it is in use, or not loaded); call with _idle held."""
        service = self._service
        if service is None or self._users or service.open:
            return None
        return time.monotonic() - self._quiet_since

    def _watch(self) -> None:
        """The idle watcher's thread: unloads once unused for idle_unload seconds. Engine requests
        end without telling it (a client's cancel), so it also looks every `poll` seconds."""
        limit = float(self.options.idle_unload or 0.0)
        poll = min(max(limit / 4, 0.05), 1.0)
        while True:
            with self._idle:
                if self._closed:
                    return
                idle = self._idle_for()
                if idle is None:
                    if self._service is not None:
                        self._quiet_since = time.monotonic()  # in use now: quiet from now at the earliest
                    self._idle.wait(poll)
                    continue
                if idle < limit:
                    self._idle.wait(min(limit - idle, poll))
                    continue
            self.unload(idle=limit)

    def unload(self, idle: float | None = None) -> bool:
        """Stop the engine loop and free the model's memory (the next request loads it again);
        with `idle`, only if it has been unused for that many seconds. Whether it unloaded."""
        with self._lock:  # no load meanwhile: a request now waits for this, then loads
            with self._idle:
                quiet = self._idle_for()
                if self._service is None or (idle is not None and (quiet is None or quiet < idle)):
                    return False
                self.unloading = True  # (before the loop is gone: a reader never sees "asleep" early)
                service, self._service = self._service, None
            try:
                service.stop()
                del service
                free_memory()
            finally:
                with self._idle:  # counted (and "asleep") once the memory is given back, not before
                    self.unloads += 1
                    self.unloading = False
        return True

    @property
    def sample_rate(self) -> int:
        return int(self.service().engine.sample_rate)

    @property
    def output_rate(self) -> int:
        """The rate audio is sent at: the command's `sample_rate` (--sample-rate), else the model's."""
        return int(resolve(*self.options.layers)["sample_rate"] or self.sample_rate)

    def submit(
        self,
        request: Request,
        on_event: Callable[[Event], None],
        check: PieceCheck | None = None,
        places: Places | None = None,
        continued: bool = False,
    ) -> Ticket:
        """service().submit: a Ticket, or InvalidRequest / Busy / ServiceStopped. `check`: its per-piece
        check (verify.py), run as each piece is done; `places`: reserved ones it takes (reserve);
        `continued`: the next part of a streamed text (its first piece cut as a later one)."""
        with self.hold():  # not unloaded between the load and the submit (then the request is open)

            def on(event: Event) -> None:
                if event.kind != "piece":
                    self._touch()  # quiet from its end on
                on_event(event)

            service = self.service()
            if check is None and places is None and not continued:
                return service.submit(request, on)
            return service.submit(request, on, check=check, places=places, continued=continued)

    def reserve(self, size: int) -> Places:
        """service().reserve: `size` places of --max-queue held at once for one caller's requests
        (a dialogue's lines: one admission), or Busy / ServiceStopped."""
        with self.hold():
            return self.service().reserve(size)

    def render(
        self, request: Request, on_piece: Callable[[StreamPiece], None] | None = None
    ) -> tuple[np.ndarray, Summary]:
        """(audio, Summary) of a request, waited for; on_piece(StreamPiece) as each is ready. An
        exception (in on_piece too) cancels the request."""
        import numpy as np

        events: queue.Queue[Event] = queue.Queue()
        ticket = self.submit(request, events.put)
        pieces: list[np.ndarray] = []
        done = False
        try:
            while True:
                event = events.get()
                if event.kind == "error":
                    done = True
                    raise event.error or RuntimeError("the request failed")
                if event.kind == "done":
                    done = True
                    audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
                    assert event.summary is not None
                    return audio, event.summary
                assert event.piece is not None
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
        self,
        text: object,
        *,
        voice: object = None,
        lang: object = None,
        instruct: object = None,
        settings: object = None,
    ) -> Built:
        """A request.Built for `text` (InvalidRequest / SettingsError in the CLI's words): the
        protocol's fields as they came (Wyoming, MCP, the socket, a script's lines)."""
        checked = self.check_text(text)
        layers = self.request_layers(settings, lang=lang, instruct=instruct)
        return self.make(checked, self.resolve(layers, self.choose_voice(voice)))

    @property
    def mark(self) -> Mark | None:
        """The AI mark of what it writes: the command's settings and the model it runs (run-wide:
        a request never changes it)."""
        return run_mark({**resolve(*self.options.layers).values, "model": self.options.model})

    def resolve(self, layers: list[Layer], voice: VoiceChoice | None = None) -> Resolved:
        """The command's layers under the request's, and the voice named (None: none named,
        the command's own stands)."""
        resolved = resolve(*self.options.layers, *layers)
        return resolved if voice is None else self.with_voice(resolved, voice)

    def with_voice(self, resolved: Resolved, voice: VoiceChoice, source: Source = REQUEST) -> Resolved:
        """The settings with the voice named (a request's `voice`, an SSML <voice name>)."""
        resolved = resolved.with_values({"voice": voice.setting}, source)
        if voice.items is not None and voice.items != store.builtin_voices().get(voice.shown.lower()):
            # the voice map's own items (serve --voice-map): what request.build_request makes of a
            # built-in name, with these items
            try:
                instruct = merge(voice.items, resolved["instruct"])
            except InvalidRequest as e:
                raise named(resolved, e, "instruct") from None
            resolved = resolved.with_values({"instruct": instruct, "voice": None}, VOICE_MAP)
        return resolved

    def make(self, text: str, settings: Resolved) -> Built:
        """The request every front end sends: built by the checks of `say` (request.build_request,
        which plans it as the CLI plans it: engine.pipeline.plan_request, its refusals in its
        words, before the engine sees it; the engine loop then takes what the plan takes). An
        SSML document is read here (`make_parts`): one of several parts is refused."""
        if is_ssml(text):
            parts = self.make_parts(text, settings)
            if len(parts.built) > 1:
                raise InvalidRequest(
                    f"SSML at line {parts.parts[1].line}: the voice, language or rate changes, and this door "
                    "speaks one request with one of each: POST /v1/audio/speech speaks each part in its own",
                    "text",
                )
            return parts.built[0]
        return self._make_one(text, settings)

    def make_parts(self, text: str, settings: Resolved) -> Parts[Built]:
        """An SSML document's parts (app/ssml/spoken.py), each made as `make` makes a request; a
        <voice name> is read as a request's `voice` (a saved voice, an OpenAI name or auto)."""
        return build_parts(text, settings, self._ssml_voice, self._make_one)

    def _ssml_voice(self, settings: Resolved, name: str, source: Source) -> Resolved:
        choice = self.choose_voice(name)
        plain = settings.with_values({"voice": None, "instruct": None, "ref": None, "ref_text": None}, source)
        return plain if choice is None else self.with_voice(plain, choice, source)

    def _make_one(self, text: str, settings: Resolved) -> Built:
        built = build_request(text, settings, refs=References(), voices=Voices(), phrase_seed=self.options.phrase_seed)
        if built.reference is not None:  # the checkpoint's own voice, or a designed one: made once, by the engine loop
            ref = built.reference
            key = (str(ref.path), ref.transcript)
            if key not in self._own_prompts:
                try:
                    call = self.service().call(lambda engine: reference_prompt(engine, ref))
                except NoModel:
                    if ref.design is None:
                        raise
                    with self._count:  # a speaker that only builds: the design is left to render
                        self.requests_built += 1
                    return built
                self._own_prompts[key] = call.result()
            built = dataclasses.replace(
                built, request=dataclasses.replace(built.request, ref=self._own_prompts[key]), reference=None
            )
        with self._count:
            self.requests_built += 1
        return built

    def render_designed_voices(self) -> list[str]:
        """Every OpenAI name (and voice-map entry) no saved voice has, rendered now and kept per
        checkpoint (app/voices/designcache.py), so that no request waits for its first rendering
        (`serve --warmup`); the names, in order."""
        done = []
        for item in self.voices():
            if item["type"] == "openai":
                self.build("Hello.", voice=item["name"], settings={"seed": 0})
                done.append(item["name"])
        return done

    def check_text(self, text: object) -> str:
        if not isinstance(text, str):
            raise InvalidRequest(f"text must be a string, got {type_name(text)}", "text")
        limit = self.options.max_chars
        if len(text) > limit:
            raise InvalidRequest(
                f"text is {len(text)} characters long: at most {limit} are allowed (--max-chars)", "text"
            )
        return text  # its line breaks kept for `markdown` (request.spoken_text joins the lines)

    def request_layers(self, settings: object, **given: object) -> list[Layer]:
        """The request's preset and settings as layers, checked; `given` (lang, instruct: the
        protocol's own fields) are settings too, given once."""
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            raise InvalidRequest(f"settings must be an object of setting names and values, got {type_name(settings)}")
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
        layers.append((REQUEST, check_layer(values, REQUEST, HTTP)))
        return layers

    # --- voices -------------------------------------------------------------------------------
    def own(self) -> CheckpointOwn:
        """What the command's checkpoint declares (its own voices, items, languages)."""
        return model_config(self.options.model).own

    def voice_table(self) -> Mapping[str, str]:
        """OpenAI's voice names (lower case) -> their voice-design items."""
        table = self.options.voice_map
        return store.builtin_voices() if table is None else table

    def choose_voice(self, spec: object) -> VoiceChoice | None:
        """What a request's voice name means (voicechoice.choose_voice: None when none is named,
        the command's own stands; VoiceRefused for a path, an unknown name or not a name)."""
        return voicechoice.choose_voice(spec, self.voice_table(), self.own())

    def voices(self) -> list[ListedVoice]:
        """Every voice a request may name: saved ones (readable), the checkpoint's own, OpenAI's
        names no saved voice has, and auto; each {"name", "type", ...}."""
        return voicechoice.voice_listing(self.voice_table(), self.own())


def preset_layer(name: object, field: str = "preset") -> Layer:
    """A preset a request names (by name only) as a layer, without the settings fixed at start
    (InvalidRequest naming `field`; a broken preset file: SettingsError)."""
    index = preset_index()
    if not isinstance(name, str) or is_preset_path(name) or name not in index:
        hint = (
            " (a request cannot name a file)"
            if isinstance(name, str) and is_preset_path(name)
            else (did_you_mean(name, index) if isinstance(name, str) else "")
        )
        raise InvalidRequest(
            f"field {field!r} must be a preset's name ({', '.join(index) or 'none'}), got {shown_value(name)}{hint}",
            field,
        )
    found = find_preset(name)
    return Source("preset", found.name), {k: v for k, v in found.settings.items() if k not in DROPPED_PRESET_KEYS}
