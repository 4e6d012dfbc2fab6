"""What `omnivoice serve` was started with, and the table of OpenAI voice names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..engine.errors import InvalidRequest
from ..engine.text.instructs import resolve_instruct

VOICE_MAP_FILE = Path(__file__).resolve().parent.parent / "data" / "openai_voices.json"
MAX_VOICE_MAP_BYTES = 256 * 1024
KiB = 1024


@dataclass(frozen=True)
class ServeOptions:
    """The server's settings (the command's options)."""

    host: str = "127.0.0.1"  # where to listen
    port: int = 8000  # 0: any free port
    api_key: str | None = None  # Bearer key every endpoint but /health needs; None: none
    cors: tuple[str, ...] = ()  # origins allowed to call from a browser
    max_queue: int = 64  # requests accepted at once (generating or waiting); more get 503
    max_input_chars: int = 4096  # characters of `input` at most
    grace: float = 30.0  # seconds in-flight requests get to finish after SIGTERM / Ctrl-C
    upload_limit: int = 20 * 1024 * KiB  # bytes of a voice upload at most
    layers: tuple = ()  # the server's settings layers: (settings.Source, values) of --preset and the flags
    voice_map: Mapping[str, str] = field(default_factory=dict)  # OpenAI voice name -> voice-design instruct
    model: str = "omnivoice"  # what --model named
    asr_model: str | None = None  # the speech recogniser (--asr-model): uploads without ref_text, `verify`
    quiet: bool = False  # no per-request log lines
    ui: bool = True  # the page on GET / (--no-ui: off)
    warmup: bool = False  # one request spoken once the model is loaded, before /health/ready says ready
    idle_unload: float | None = None  # seconds unused after which the model is unloaded (None: never)
    phrase_cache: int | None = None  # --phrase-cache: the phrase cache's bound in bytes (None: off)
    replica: str | None = None  # this replica's id under Ray Serve (serve --ray): the X-OmniVoice-Replica header
    # A reply's first piece: whole sentences up to this estimated length. A text up to it is one
    # piece, the same job as `say`'s, so a lone request costs what `say` costs; a longer one streams
    # its first piece while the rest are generated, a sentence a piece (a sentence up to this whole).
    piece_seconds: float = 10.0
    socket_idle_timeout: float = 300.0  # /tts/ws: seconds with no text, config, flush or cancel (pings do
    # not count) while nothing of the socket's is spoken, before it is closed
    socket_max_per_peer: int = 32  # /tts/ws: sockets one address may hold open (as Wyoming's --max-per-peer)

    @property
    def connection_limit(self) -> int:
        """Connections at once (uvicorn's limit_concurrency): beyond, uvicorn answers a plain 503."""
        return max(128, 4 * self.max_queue)

    @property
    def max_sockets(self) -> int:
        """/tts/ws sockets open at once, all addresses together: half the connection limit, so the
        other half is always there for HTTP (/health, speech) however many sockets are open."""
        return self.connection_limit // 2

    @property
    def json_limit(self) -> int:
        """Bytes of a JSON body at most: room for the input written as \\uXXXX escapes, and fields."""
        return 16 * KiB + 6 * self.max_input_chars


def load_voice_map(path: Path | None = None) -> dict[str, str]:
    """The shipped table of OpenAI voice names, with the entries of `path` (a JSON object of
    name -> instruct) over it; every instruct checked against the vocabulary."""
    table = _read_map(VOICE_MAP_FILE)
    if path is not None:
        table.update(_read_map(Path(path).expanduser()))
    return table


def _read_map(path: Path) -> dict[str, str]:
    try:
        with open(path, "rb") as f:
            data: object = json.loads(f.read(MAX_VOICE_MAP_BYTES + 1).decode("utf-8"))
    except FileNotFoundError:
        raise InvalidRequest(f"voice map '{path}' does not exist") from None
    except (OSError, ValueError, RecursionError) as e:
        raise InvalidRequest(f"voice map '{path}' is not a JSON object of voice names: {e}") from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"voice map '{path}' must be a JSON object of name -> voice-design items")
    out = {}
    for name, instruct in data.items():
        if name.startswith("_"):  # comments
            continue
        if not isinstance(instruct, str):
            raise InvalidRequest(f"voice map '{path}': voice {name!r} must map to voice-design items (a string)")
        try:
            resolve_instruct(instruct)
        except InvalidRequest as e:
            raise InvalidRequest(f"voice map '{path}': voice {name!r}: {e}") from None
        out[name.strip().lower()] = instruct
    return out
