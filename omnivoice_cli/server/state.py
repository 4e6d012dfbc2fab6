"""What the `omnivoice serve` app shares: its options, its one Speaker and its lifecycle.

state = ServerState(options, load=lambda: Engine.load(...))
state.start_loading()             # the model loads in a thread; /health says "loading" meanwhile
state.require_service()           # the engine loop, or a 503 (loading, failed, stopping)

With --warmup, one request is spoken once the model is loaded, and the OpenAI names' designed
voices are rendered (`warmed` then; /health/ready waits for it). `on_ready(url)` is called once, when both have happened: the status is ready (what
/health/ready answers 200 to) and the listening socket accepts (`listening(url)`, server/run.py);
a request sent after it is taken, never answered "loading". With --idle-unload the Speaker unloads the model after a quiet spell: /health then says
"asleep" and the next request that needs the engine loads it again (`wake`).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import secrets
import sys
import threading
from typing import TYPE_CHECKING, Callable

from ..app.door.speaker import Speaker
from ..app.listening.listen import Recogniser
from ..app.phrases.phrasecache import PhraseCache
from ..engine.errors import one_line
from ..engine.service import Service
from .config import ServeOptions
from .errors import ApiError, busy
from .speech import serve_speaker_options

if TYPE_CHECKING:
    from ..engine.pipeline import Engine


class ServerState:
    """What the app shares: options, the one Speaker (presets, voices, the engine loop: the same
    door as Wyoming's and MCP's, app/door/speaker.py), and the lifecycle."""

    def __init__(self, options: ServeOptions, load: Callable[[], Engine | None]) -> None:
        self.options, self.load = options, load
        self.speaker = Speaker(serve_speaker_options(options), load=load)
        self.status = "loading"  # loading, ready, stopping or failed
        self.error: str | None = None  # why loading failed
        self.exception: BaseException | None = None  # what loading raised
        self.inflight = 0  # requests being answered (but /health)
        self.speaking = 0  # speech requests being answered, from arrival to their reply's last byte
        self.served = 0  # speech replies sent in full (200, the last byte out)
        self.sockets: collections.Counter[str] = collections.Counter()  # /tts/ws sockets open per address
        self.voice_lock: asyncio.Lock | None = None  # of the voice store (made in the event loop)
        self.recogniser: Recogniser | None = None  # listen.py: the one recogniser of `verify` and `timestamps`
        self.recogniser_lock = threading.Lock()  # (loaded on first use, kept while the server runs)
        self.loaded = threading.Event()
        self.warmed = False  # the warm-up request (--warmup) has been spoken
        self.rss_before_load: int | None = None  # the process's resident bytes before the first load
        self.phrases = (  # serve --phrase-cache (server/phrasereply.py)
            None if options.phrase_cache is None else PhraseCache.open(options.phrase_cache, notice=self._notice)
        )
        self._ids = itertools.count(1)
        self._prefix = secrets.token_hex(3)
        self.url: str | None = None  # where the listening socket accepts (listening(), once bound)
        self.on_ready: Callable[[str], None] | None = None  # told the url once ready and listening
        self._announce = threading.Lock()
        self._announced = False

    @property
    def service(self) -> Service | None:
        """The engine loop once the model is loaded (the Speaker's)."""
        return self.speaker.running

    def _notice(self, text: str) -> None:
        if not self.options.quiet:
            sys.stderr.write(f"omnivoice serve: {text}\n")

    def request_id(self) -> str:
        return f"req_{self._prefix}{next(self._ids):05d}"

    def start_loading(self) -> None:
        threading.Thread(target=self._load, name="omnivoice-load", daemon=True).start()

    def _load(self) -> None:
        try:
            import torch  # noqa: F401 - the library is no part of the model's memory: measured with it

            self.rss_before_load = resident_bytes()
            self.speaker.start()
            if self.options.warmup:
                self.warm_up()
            if self.status == "loading":
                self.status = "ready"
                self._tell_ready()
        except Exception as e:  # noqa: BLE001 - reported on stderr and by /health; the server then exits
            self.error = one_line(e)
            self.exception = e
            self.status = "failed"
        finally:
            self.loaded.set()

    def listening(self, url: str) -> None:
        """The server's socket accepts at `url` (server/run.py, after uvicorn's startup)."""
        self.url = url
        self._tell_ready()

    def _tell_ready(self) -> None:
        """on_ready(url), once: when the status is ready and the socket accepts, whichever is last."""
        with self._announce:
            if self._announced or self.url is None or self.status != "ready":
                return
            self._announced = True
        if self.on_ready is not None:
            self.on_ready(self.url)

    def warm_up(self) -> None:
        """One short request spoken through the engine (serve --warmup): the first request's own
        costs (allocations, graphs, caches) paid before /health/ready says ready; and the OpenAI
        names' designed voices rendered (or read, kept from before) so that each is ready to clone."""
        built = self.speaker.build("Hello.", settings={"seed": 0})
        self.speaker.render(built.request)
        self.speaker.render_designed_voices()
        self.warmed = True

    @property
    def asleep(self) -> bool:
        """Unloaded (or being unloaded) for being idle (--idle-unload): the next request loads the
        model again, once the unload is done (/health says "asleep" only then)."""
        return self.status == "ready" and self.speaker.phase != "loaded"

    def ready_reason(self) -> str | None:
        """Why /health/ready says not ready (None: ready): loading, the warm-up, failed, stopping."""
        if self.status == "failed":
            return f"the model failed to load: {self.error}"
        if self.status == "stopping":
            return "the server is shutting down"
        if self.status == "loading":
            warming = self.options.warmup and self.speaker.loaded
            return "the warm-up request is being spoken" if warming else "the model is loading"
        return None  # ready, or asleep: a request wakes it

    def wake(self) -> None:
        """Load the model again if it was unloaded for being idle (blocks: call in a thread)."""
        if self.asleep:
            self.speaker.start()

    def require_service(self) -> Service:
        """The engine service, or a 503 while the model loads (or after it failed to); asleep
        (--idle-unload), it is loaded again here."""
        if self.status == "stopping":
            raise busy("the server is shutting down", max(1, int(self.options.grace)), "shutting_down")
        service = self.service
        if service is None and self.asleep:
            service = self.speaker.start()
        if service is None:
            if self.status == "failed":
                raise ApiError(503, f"the model failed to load: {self.error}", type="server_error", code="no_model")
            raise busy("the model is still loading: try again shortly", 5, "loading")
        return service

    def stop(self) -> None:
        self.speaker.stop()


def resident_bytes() -> int | None:
    """The process's resident memory (VmRSS; Linux), or None where /proc has none."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
