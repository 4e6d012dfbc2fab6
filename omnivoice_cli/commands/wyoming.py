"""`omnivoice wyoming`: a Wyoming TTS server for Home Assistant (server/wyoming/wyoming.py).

The app layer and the server are imported inside the function that runs them: `omnivoice wyoming
--help` reads only the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

from typing import Optional

import typer

from ..ui.messages import echo, warn
from ..ui.options import (
    IDLE_UNLOAD_OPTION,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    SPEAKER_MAX_CHARS_OPTION,
    SPEAKER_MAX_QUEUE_OPTION,
    SPEAKER_SETTINGS,
    with_settings,
)

HELP = """Serve text to speech over the Wyoming protocol, for Home Assistant's voice pipeline.

In Home Assistant: Settings > Devices & services > Add integration > Wyoming Protocol, with the
host and port of --uri. Its voices are the saved voices, OpenAI's names (alloy, ...) and auto.
Every satellite shares one loaded model, their requests packed into the same forwards; audio
streams as each piece is ready, and a text streamed in (an LLM's answer) is spoken from its
first sentence end. --seed pins the seed: a text of one piece then equals `say --seed`.
Needs the wyoming extra. SIGTERM or Ctrl-C stops it."""

EXAMPLES = """
omnivoice wyoming --uri tcp://0.0.0.0:10200 --preset fast
omnivoice wyoming --voice alice --lang en
"""


WYOMING_SETTINGS = (
    *(k for k in SPEAKER_SETTINGS if k != "loudness"),
    "sample_rate",
)  # its audio streams: no whole output to level


@with_settings(*WYOMING_SETTINGS)
def wyoming(
    uri: str = typer.Option(
        "tcp://127.0.0.1:10200",
        "--uri",
        metavar="URI",
        rich_help_panel="Server",
        help="Where to listen: tcp://HOST:PORT (0.0.0.0: every interface) or unix://PATH. "
        "Default: tcp://127.0.0.1:10200.",
    ),
    idle_timeout: float = typer.Option(
        60.0,
        "--idle-timeout",
        min=1.0,
        metavar="SECONDS",
        rich_help_panel="Server",
        help="Close a connection that sends nothing for this long while nothing of its is spoken "
        "(a half-open socket, a client gone without a word). Default: 60.",
    ),
    max_per_peer: int = typer.Option(
        32,
        "--max-per-peer",
        min=1,
        metavar="N",
        rich_help_panel="Server",
        help="Connections one address may hold at once (of 256 in all); more are refused as busy. Default: 32.",
    ),
    max_queue: int = SPEAKER_MAX_QUEUE_OPTION,
    max_chars: int = SPEAKER_MAX_CHARS_OPTION,
    idle_unload: Optional[str] = IDLE_UNLOAD_OPTION,
    preset: Optional[str] = PRESET_OPTION,
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Serve text to speech over the Wyoming protocol, for Home Assistant's voice pipeline."""
    from ..app.door.speaker import Speaker
    from ..server.schema import package_version
    from .common import check_extra, load_model, speaker_options

    check_extra("omnivoice wyoming", "wyoming", ("wyoming", ("wyoming.server",)))
    import asyncio

    from ..server.wyoming.wyoming import WyomingOptions, WyomingServer, parse_uri  # (the wyoming extra, not for --help)

    parse_uri(uri)
    settings, options = speaker_options(preset, flags, max_queue, max_chars, idle_unload)
    if settings["loudness"] is not None:  # from a preset (there is no flag)
        warn("loudness is not applied by omnivoice wyoming: its audio streams as each piece is ready")
    speaker = Speaker(options, load=lambda: load_model(settings, quiet)[0])
    speaker.check()  # the flags make a request (a voice that exists, ...) before the model loads
    speaker.start()
    server = WyomingServer(
        speaker,
        WyomingOptions(
            uri=uri,
            quiet=quiet,
            version=package_version(),
            log=echo,
            idle_timeout=idle_timeout,
            max_per_peer=max_per_peer,
        ),
    )
    asyncio.run(_serve(server, quiet))
    if not quiet:
        echo("omnivoice wyoming: stopped")


async def _serve(server, quiet: bool) -> None:
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, server.close)
        except (NotImplementedError, RuntimeError):  # not on this platform: Ctrl-C still ends the run
            pass

    def ready(address: str) -> None:
        if not quiet:
            echo(f"omnivoice wyoming: listening on {address} (model {server.speaker.options.model})")

    await server.serve(ready)
