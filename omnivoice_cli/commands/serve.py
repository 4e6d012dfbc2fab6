"""`omnivoice serve`: an OpenAI-compatible speech server on the packed engine (server/).

The app layer and the server are imported inside the functions that run them: `omnivoice serve
--help` reads only the options (ui/options.py and the constants here) and the help texts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..app.settings.schema import GENERATION_KEYS
from ..engine.errors import InvalidRequest
from ..ui.messages import echo, warn
from ..ui.options import (
    HARDWARE_SETTINGS,
    IDLE_UNLOAD_OPTION,
    MARK_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    max_queue_option,
    with_settings,
)

if TYPE_CHECKING:
    from ..app.settings.layers import Resolved
    from ..server.state import ServerState

HELP = """Serve OpenAI's speech API (POST /v1/audio/speech) and the saved voices over HTTP.

Requests share the engine's forwards as they arrive (continuous batching), each with its own
settings and seed; a reply streams as its pieces are ready. The body is OpenAI's (model, input,
voice, instructions, response_format, speed, stream_format) plus any request setting of
`omnivoice say` (seed, lang, num_step, guidance_scale, duration, preset, ...).

Listens on 127.0.0.1 unless --host says otherwise; with --api-key (or OMNIVOICE_API_KEY) every
endpoint but /health and the page needs 'Authorization: Bearer KEY'. Another --host without a key
is refused unless --allow-no-key says so. A page to try it is on /
(on the same API; it asks for the key once; --no-ui: none). SIGTERM or Ctrl-C stops taking
requests (503), lets those in flight finish for up to --grace seconds, and exits 0."""

EXAMPLES = """
omnivoice serve --port 8000
omnivoice serve --host 0.0.0.0 --api-key "$KEY" --preset fast
curl -s localhost:8000/v1/audio/speech -H 'Content-Type: application/json' \\
  -d '{"model":"omnivoice","input":"Hello there.","voice":"alloy"}' -o hello.mp3
"""

SERVE_SETTINGS = (
    *GENERATION_KEYS,
    "chunk_duration",
    "chunk_threshold",
    "lexicon",
    *HARDWARE_SETTINGS,
    "asr_model",
    *MARK_SETTINGS,
)

# The serve extra: (package, the modules it may be imported as). python-multipart reads voice
# uploads; before 0.0.13 it was imported as `multipart`.
SERVE_STACK = (
    ("starlette", ("starlette",)),
    ("uvicorn", ("uvicorn",)),
    ("python-multipart", ("python_multipart", "multipart")),
)
MAX_CHARS = 4096  # --max-chars when not given (ServeOptions.max_input_chars's default: tests/test_server_ops.py)


# serve's own options (those the commands share: ui/options.py)
HOST_OPTION = typer.Option(
    "127.0.0.1",
    "--host",
    metavar="ADDR",
    rich_help_panel="Server",
    help="Address to listen on (0.0.0.0: every interface). Default: 127.0.0.1.",
)
PORT_OPTION = typer.Option(
    8000,
    "--port",
    min=0,
    max=65535,
    metavar="N",
    rich_help_panel="Server",
    help="Port to listen on (0: any free port, printed). Default: 8000.",
)
API_KEY_OPTION = typer.Option(
    None,
    "--api-key",
    envvar="OMNIVOICE_API_KEY",
    show_envvar=False,
    metavar="KEY",
    rich_help_panel="Server",
    show_default=False,
    help="Require 'Authorization: Bearer KEY' (also OMNIVOICE_API_KEY).",
)
ALLOW_NO_KEY_OPTION = typer.Option(
    False,
    "--allow-no-key",
    envvar="OMNIVOICE_ALLOW_NO_KEY",
    show_envvar=False,
    rich_help_panel="Server",
    help="Listen on an address other than loopback without an API key (refused otherwise; also "
    "OMNIVOICE_ALLOW_NO_KEY=1).",
)
CORS_OPTION = typer.Option(
    [],
    "--cors",
    metavar="ORIGIN",
    rich_help_panel="Server",
    show_default=False,
    help="Let pages of this origin call the server (repeatable).",
)
MAX_QUEUE_OPTION = max_queue_option("taken", "503")
MAX_CHARS_OPTION = typer.Option(
    None,
    "--max-chars",
    min=1,
    max=1_000_000,
    metavar="N",
    rich_help_panel="Server",
    show_default=False,
    help=f"Characters of 'input' (one text) at most. Default: {MAX_CHARS}.",
)
MAX_INPUT_CHARS_OPTION = typer.Option(  # --max-chars under its former name, still taken (not shown)
    None, "--max-input-chars", min=1, max=1_000_000, metavar="N", hidden=True
)
GRACE_OPTION = typer.Option(
    30.0,
    "--grace",
    min=0.0,
    max=86400.0,
    metavar="SECONDS",
    rich_help_panel="Server",
    help="Seconds requests in flight get to finish after SIGTERM / Ctrl-C. Default: 30.",
)
SOCKET_IDLE_TIMEOUT_OPTION = typer.Option(
    300.0,
    "--socket-idle-timeout",
    min=1.0,
    max=86400.0,
    metavar="SECONDS",
    rich_help_panel="Server",
    help="Close a /tts/ws socket that sends no text, config, flush or cancel for this long while "
    "nothing of its is spoken (pings do not count). Default: 300.",
)
SOCKET_MAX_PER_PEER_OPTION = typer.Option(
    32,
    "--socket-max-per-peer",
    min=1,
    max=100_000,
    metavar="N",
    rich_help_panel="Server",
    help="/tts/ws sockets one address may hold open (behind a proxy, all of its clients'); more are "
    "refused before the upgrade (429). All addresses together: half the connection limit. Default: 32.",
)
NO_UI_OPTION = typer.Option(False, "--no-ui", rich_help_panel="Server", help="No page on GET / (the API only).")
WARMUP_OPTION = typer.Option(
    False,
    "--warmup",
    rich_help_panel="Server",
    help="Speak one short request once the model is loaded, and render the OpenAI names' designed voices "
    "(kept per checkpoint); /health/ready says ready after it.",
)
PHRASE_CACHE_OPTION = typer.Option(
    None,
    "--phrase-cache",
    metavar="SIZE",
    rich_help_panel="Server",
    help="Keep each reply on disk (the cache folder's phrases/, at most SIZE MB: '256', '2GB') and "
    "answer the same request again from it (X-OmniVoice-Cache: hit). A request without a seed gets "
    "one derived from its text and voice, so a repeated phrase is a hit. Default: off.",
)
VOICE_MAP_OPTION = typer.Option(
    None,
    "--voice-map",
    metavar="FILE",
    rich_help_panel="Voice",
    show_default=False,
    help="JSON of OpenAI voice names -> voice-design items, over the shipped table.",
)
RAY_SERVE_OPTION = typer.Option(
    None,
    "--ray",
    metavar="ADDRESS|auto|local",
    rich_help_panel="Cluster",
    show_default=False,
    help="Serve as a Ray Serve application, a model per replica: local starts a cluster here, auto joins "
    "the one RAY_ADDRESS or a running head names, or give its address (pip install 'omnivoice-cli[ray]').",
)
REPLICAS_OPTION = typer.Option(
    1, "--replicas", min=1, max=10_000, metavar="N", rich_help_panel="Cluster", help="Replicas (--ray). Default: 1."
)
MIN_REPLICAS_OPTION = typer.Option(
    None,
    "--min-replicas",
    min=0,
    max=10_000,
    metavar="N",
    rich_help_panel="Cluster",
    show_default=False,
    help="Autoscale (--ray) on the requests ongoing per replica, from N replicas ...",
)
MAX_REPLICAS_OPTION = typer.Option(
    None,
    "--max-replicas",
    min=1,
    max=10_000,
    metavar="N",
    rich_help_panel="Cluster",
    show_default=False,
    help="... up to N replicas.",
)
GPUS_PER_REPLICA_OPTION = typer.Option(
    0.0,
    "--gpus-per-replica",
    min=0.0,
    max=64.0,
    metavar="N",
    rich_help_panel="Cluster",
    help="GPUs each replica takes (--ray; 1: a replica per GPU). Default: 0.",
)


@with_settings(*SERVE_SETTINGS)
def serve(
    host: str = HOST_OPTION,
    port: int = PORT_OPTION,
    api_key: Optional[str] = API_KEY_OPTION,
    allow_no_key: bool = ALLOW_NO_KEY_OPTION,
    cors: list[str] = CORS_OPTION,
    max_queue: int = MAX_QUEUE_OPTION,
    max_chars: Optional[int] = MAX_CHARS_OPTION,
    max_input_chars: Optional[int] = MAX_INPUT_CHARS_OPTION,
    grace: float = GRACE_OPTION,
    socket_idle_timeout: float = SOCKET_IDLE_TIMEOUT_OPTION,
    socket_max_per_peer: int = SOCKET_MAX_PER_PEER_OPTION,
    no_ui: bool = NO_UI_OPTION,
    warmup: bool = WARMUP_OPTION,
    idle_unload: Optional[str] = IDLE_UNLOAD_OPTION,
    phrase_cache: Optional[str] = PHRASE_CACHE_OPTION,
    voice_map: Optional[str] = VOICE_MAP_OPTION,
    ray: Optional[str] = RAY_SERVE_OPTION,
    replicas: int = REPLICAS_OPTION,
    min_replicas: Optional[int] = MIN_REPLICAS_OPTION,
    max_replicas: Optional[int] = MAX_REPLICAS_OPTION,
    gpus_per_replica: float = GPUS_PER_REPLICA_OPTION,
    preset: Optional[str] = PRESET_OPTION,
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Serve OpenAI's speech API (POST /v1/audio/speech) and the saved voices over HTTP."""
    from ..app.checkpoint import model_config
    from ..app.door.idle import idle_seconds
    from ..app.phrases.phrasecache import parse_size
    from ..app.settings.layers import FLAG_SOURCE
    from ..server.config import ServeOptions, load_voice_map
    from ..server.state import ServerState
    from .common import check_extra, engine_loader, run_settings
    from .say import check_listening

    check_extra("omnivoice serve", "serve", *SERVE_STACK)  # before server.run, which imports the web framework
    unload = idle_seconds(idle_unload)
    phrase_bytes = None if phrase_cache is None else parse_size(phrase_cache)
    if max_chars is not None and max_input_chars is not None:
        raise InvalidRequest("--max-input-chars is --max-chars under its former name: give one of them")
    from ..server.run import is_loopback  # (starlette, uvicorn: loaded when serving, not by --help)

    if not is_loopback(host) and not api_key and not allow_no_key:
        raise InvalidRequest(
            f"--host {host} is reachable from other machines and the server has no API key: set --api-key "
            "(or OMNIVOICE_API_KEY), or pass --allow-no-key (or OMNIVOICE_ALLOW_NO_KEY=1) to serve it open"
        )

    chosen, settings = run_settings(preset, flags)
    model_config(settings["model"])  # a fine-tune's declarations checked before listening (CheckpointError)
    if settings["verify"]:  # a preset's verify = true: every request listens back, so the recogniser must be there
        check_listening(settings, False, "--verify")
    layers = ((chosen.origin, chosen.settings),) if chosen else ()
    options = ServeOptions(
        host=host,
        port=port,
        api_key=api_key or None,
        cors=tuple(cors),
        max_queue=max_queue,
        max_input_chars=next((n for n in (max_chars, max_input_chars) if n is not None), MAX_CHARS),
        grace=grace,
        socket_idle_timeout=socket_idle_timeout,
        socket_max_per_peer=socket_max_per_peer,
        layers=(*layers, (FLAG_SOURCE, flags)),
        voice_map=load_voice_map(Path(voice_map) if voice_map else None),
        model=settings["model"],
        quiet=quiet,
        ui=not no_ui,
        asr_model=settings["asr_model"],
        warmup=warmup,
        idle_unload=unload,
        phrase_cache=phrase_bytes,
    )
    if not is_loopback(host) and options.api_key is None:
        warn(f"listening on {host} without --api-key: anyone who can reach this port can use the server")
    if ray is None:
        if min_replicas is not None or max_replicas is not None or replicas != 1 or gpus_per_replica:
            raise InvalidRequest("--replicas, --min-replicas, --max-replicas and --gpus-per-replica need --ray")
        _run(ServerState(options, engine_loader(settings, quiet, "omnivoice serve")), quiet)
        return
    from ..server.ray.rayserve import RayOptions, deploy  # (ray: loaded when serving on it)

    cluster = RayOptions(ray, replicas, min_replicas, max_replicas, gpus_per_replica, settings["threads"] or 1)
    deploy(options, _Loader(settings, quiet), cluster, echo)


class _Loader:
    """What a Ray Serve replica calls to make its model's loader (pickled to it)."""

    def __init__(self, settings: Resolved, quiet: bool) -> None:
        self.settings, self.quiet = settings, quiet

    def __call__(self):
        from .common import engine_loader

        return engine_loader(self.settings, self.quiet, "omnivoice serve", "; ready")


def _run(state: ServerState, quiet: bool) -> None:
    """Serve `state` (server.run.run_server) until it stops."""
    from ..server.run import run_server  # (the web framework, as above)

    def listening(url: str) -> None:
        if not quiet:
            page = f"; the page: {url}/" if state.options.ui else ""
            echo(
                f"omnivoice serve: listening on {url} (OpenAI base URL {url}/v1{page}); loading the model "
                f"({state.options.model}) ..."
            )

    def ready(url: str) -> None:  # the model loaded (and warmed up), the socket accepting: taken at once
        if not quiet:
            echo(f"omnivoice serve: {url} takes requests; ready")

    state.on_ready = ready
    code = run_server(state, listening)
    if state.status == "failed" and state.exception is not None:  # what loading the model raised
        raise state.exception
    if code:
        raise typer.Exit(code)
    if not quiet:
        echo(f"omnivoice serve: stopped (pid {os.getpid()})")
