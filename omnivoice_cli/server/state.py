"""What the `omnivoice serve` app shares: its options, its one Speaker and its lifecycle.

state = ServerState(options, load=lambda: Engine.load(...))
state.start_loading()             # the model loads in a thread; /health says "loading" meanwhile
state.require_service()           # the engine loop, or a 503 (loading, failed, stopping)
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import secrets
import threading
from typing import TYPE_CHECKING, Callable

from ..app.listen import Recogniser
from ..app.speaker import Speaker
from ..engine.service import Service
from .config import ServeOptions
from .errors import ApiError, busy
from .speech import speaker_options

if TYPE_CHECKING:
    from ..engine.pipeline import Engine


class ServerState:
    """What the app shares: options, the one Speaker (presets, voices, the engine loop: the same
    door as Wyoming's and MCP's, app/speaker.py), and the lifecycle."""

    def __init__(self, options: ServeOptions, load: Callable[[], Engine | None]) -> None:
        self.options, self.load = options, load
        self.speaker = Speaker(speaker_options(options), load=load)
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
        self._ids = itertools.count(1)
        self._prefix = secrets.token_hex(3)

    @property
    def service(self) -> Service | None:
        """The engine loop once the model is loaded (the Speaker's)."""
        return self.speaker.running

    def request_id(self) -> str:
        return f"req_{self._prefix}{next(self._ids):05d}"

    def start_loading(self) -> None:
        threading.Thread(target=self._load, name="omnivoice-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self.speaker.start()
            if self.status == "loading":
                self.status = "ready"
        except Exception as e:  # noqa: BLE001 - reported on stderr and by /health; the server then exits
            self.error = " ".join(str(e).split()) or type(e).__name__
            self.exception = e
            self.status = "failed"
        finally:
            self.loaded.set()

    def require_service(self) -> Service:
        """The engine service, or a 503 while the model loads (or after it failed to)."""
        if self.status == "stopping":
            raise busy("the server is shutting down", max(1, int(self.options.grace)), "shutting_down")
        service = self.service
        if service is None:
            if self.status == "failed":
                raise ApiError(503, f"the model failed to load: {self.error}", type="server_error", code="no_model")
            raise busy("the model is still loading: try again shortly", 5, "loading")
        return service

    def stop(self) -> None:
        self.speaker.stop()
