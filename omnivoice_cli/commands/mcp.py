"""`omnivoice mcp`: speech as tools for agents over the Model Context Protocol (server/mcp.py).

The app layer and the server are imported inside the function that runs them: `omnivoice mcp
--help` reads only the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..engine.errors import InvalidRequest
from ..ui.messages import echo
from ..ui.options import (
    IDLE_UNLOAD_OPTION,
    MARK_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    SPEAKER_MAX_CHARS_OPTION,
    SPEAKER_MAX_QUEUE_OPTION,
    SPEAKER_SETTINGS,
    with_settings,
)

HELP = """Serve speech as MCP tools for agents (Claude Desktop, IDEs, any MCP client), over stdio.

Tools: speak (plays on this machine, through the player `say` uses), synthesize (writes a file
under --root, and nowhere else), list_voices, describe_voice_options. Their arguments are
checked as `say` checks its flags. The model loads on the first call and stays loaded; calls
at once share the engine's forwards. --http PORT serves MCP's streamable HTTP on
127.0.0.1:PORT/mcp instead. End of input (Ctrl-D) ends it; Ctrl-C too, with exit code 130.
Needs the mcp extra."""

EXAMPLES = """
omnivoice mcp --root ~/speech --voice alice --preset fast
omnivoice mcp --root ~/speech --http 8765
"""


def _root(spec: str) -> Path:
    root = Path(spec).expanduser()
    if root.exists() and not root.is_dir():
        raise InvalidRequest(f"--root '{spec}' is a file: give a folder (created if missing)")
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


@with_settings(*SPEAKER_SETTINGS, *MARK_SETTINGS)
def mcp(
    root: str = typer.Option(
        ...,
        "--root",
        metavar="DIR",
        rich_help_panel="Server",
        show_default=False,
        help="Folder synthesize writes under (created if missing); nothing is written elsewhere.",
    ),
    http: Optional[int] = typer.Option(
        None,
        "--http",
        min=1,
        max=65535,
        metavar="PORT",
        rich_help_panel="Server",
        show_default=False,
        help="Serve MCP's streamable HTTP on 127.0.0.1:PORT (path /mcp), not stdio.",
    ),
    max_queue: int = SPEAKER_MAX_QUEUE_OPTION,
    max_chars: int = SPEAKER_MAX_CHARS_OPTION,
    idle_unload: Optional[str] = IDLE_UNLOAD_OPTION,
    preset: Optional[str] = PRESET_OPTION,
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Serve speech as MCP tools for agents (Claude Desktop, IDEs, any MCP client), over stdio."""
    from ..app.door.speaker import Speaker
    from ..server.schema import package_version
    from .common import check_extra, engine_loader, speaker_options

    check_extra("omnivoice mcp", "mcp", ("mcp (2.x)", ("mcp.server.mcpserver",)))  # 1.x had FastMCP, another API
    from ..server.mcp import Tools, build_server  # (the mcp extra: loaded when serving, not by --help)

    settings, options = speaker_options(preset, flags, max_queue, max_chars, idle_unload)
    speaker = Speaker(options, load=engine_loader(settings, quiet, "omnivoice mcp"))
    speaker.check()  # the flags make a request (a voice that exists, ...) before any client comes
    tools = Tools(speaker, _root(root))
    server = build_server(tools, package_version())
    if not quiet:
        where = f"http://127.0.0.1:{http}/mcp" if http else "stdio"
        echo(f"omnivoice mcp: serving on {where}; files under {tools.root}; the model loads on the first call")
    try:
        if http:
            server.run("streamable-http", host="127.0.0.1", port=http)
        else:
            _run_stdio(server)
    except KeyboardInterrupt:
        if not http:
            raise typer.Exit(130) from None  # Ctrl-C: stopped (end of input, Ctrl-D, is exit 0)
    finally:
        speaker.stop()


def _run_stdio(server) -> None:
    """server.run("stdio") in a thread of its own, so that Ctrl-C reaches this one: on the main
    thread, asyncio's SIGINT handler only cancels the server, which then waits for a read of stdin
    (a worker thread) that only end of input ends. A Ctrl-C raises KeyboardInterrupt here."""
    import threading

    failed: list[BaseException] = []

    def serve() -> None:
        try:
            server.run("stdio")
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            failed.append(e)

    thread = threading.Thread(target=serve, name="omnivoice-mcp-stdio", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
    if failed:
        raise failed[0]
