"""Command-line options built from the settings schema, and the options commands share.

    @app.command(cls=HelpCommand, epilog=EXAMPLES)
    @with_settings("lang", "num_step", ...)
    def say(text: ..., flags: dict = NO_FLAGS) -> None: ...

`with_settings` adds one typer option per schema setting to the command's signature (flag name,
metavar, help and panel from `settings.SCHEMA`) and hands the command the values given as one
checked dict, `flags` (None = not given). Numbers are taken as text and parsed by the schema, so a
bad one gets the same words as in a preset or a JSON line.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable, Optional

import typer

from ..app.settings.schema import GENERATION_KEYS, SCHEMA
from ..app.settings.setting import HTTP, LINE, LISTENING, PANELS, PRESET, Setting, SettingsError, flag_name
from ..app.settings.values import check_setting, parse_text

NO_FLAGS: dict[str, Any] = {}


def setting_help(s: Setting) -> str:
    """The help line of a setting's flag, with its default."""
    if s.default_help:
        default = s.default_help
    elif s.kind is bool:
        default = "on" if s.default else "off"
    elif s.default is None:
        default = "none"
    else:
        default = str(s.default)
    return f"{s.help} Default: {default}."


def setting_option(s: Setting) -> Any:
    """The typer option of one setting, in the panel the schema gives it."""
    panel = s.help_panel
    if s.kind is bool:
        decl = f"{s.flag}/--no-{s.flag[2:]}"
        return typer.Option(None, decl, help=setting_help(s), rich_help_panel=panel, show_default=False)
    return typer.Option(  # an envvar is a default (settings.resolve), below a preset: not read here
        None,
        s.flag,
        metavar=s.metavar or "VALUE",
        help=setting_help(s),
        rich_help_panel=panel,
        show_default=False,
    )


def parse_flags(raw: dict[str, Any]) -> dict[str, Any]:
    """The values typed on the command line (text, or bool for switches) -> checked settings.

    Raises SettingsError "--num-step must be an integer in 1..64, got 'abc'"."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        try:
            out[key] = check_setting(key, value) if isinstance(value, bool) else parse_text(key, value)
        except SettingsError as e:
            raise SettingsError(f"{flag_name(key)} {e}") from None
    return out


def with_settings(*names: str) -> Callable:
    """Add the schema's options for `names` to a command; it receives them as `flags` (checked)."""

    def decorate(func: Callable) -> Callable:
        sig = inspect.signature(func)
        own = [p for p in sig.parameters.values() if p.name != "flags"]
        added = []
        for name in names:
            s = SCHEMA[name]
            annotation = Optional[bool] if s.kind is bool else Optional[str]
            added.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=setting_option(s),
                    annotation=annotation,
                )
            )

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            raw = {name: kwargs.pop(name, None) for name in names}
            return func(*args, flags=parse_flags(raw), **kwargs)

        hints = typing.get_type_hints(func, include_extras=True)  # the command's own, evaluated
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own]
        wrapper.__signature__ = sig.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*params, *added]}
        del wrapper.__wrapped__  # typer must read the new signature, not the function's own
        return wrapper

    return decorate


# ------------------------------------------------------------------------------ shared options

PRESET_OPTION = typer.Option(
    None,
    "--preset",
    metavar="NAME|FILE",
    show_default=False,
    rich_help_panel="Input",
    help="Settings from a preset (`omnivoice presets`) or a .toml file; flags override it.",
)
MAX_QUEUE = 64  # --max-queue when not given (serve, wyoming, mcp)


def max_queue_option(taken: str, refused: str) -> Any:
    """--max-queue N of a server: requests `taken` at once (generating or waiting); more get `refused`."""
    return typer.Option(
        MAX_QUEUE,
        "--max-queue",
        min=1,
        max=100_000,
        metavar="N",
        rich_help_panel="Server",
        help=f"Requests {taken} at once (generating or waiting); more get {refused}. Default: {MAX_QUEUE}.",
    )


# the engine-loop servers' bounds (`omnivoice wyoming`, `omnivoice mcp`: app/door/speaker.py)
SPEAKER_MAX_QUEUE_OPTION = max_queue_option("in the engine", "an error")
SPEAKER_MAX_CHARS_OPTION = typer.Option(
    4096,
    "--max-chars",
    min=1,
    max=1_000_000,
    metavar="N",
    rich_help_panel="Server",
    help="Characters of one text at most. Default: 4096.",
)
IDLE_UNLOAD_OPTION = typer.Option(
    None,
    "--idle-unload",
    metavar="DURATION",
    rich_help_panel="Server",
    show_default=False,
    help="Free the model's memory after this long unused (30s, 5m, 1h); the next request loads it again.",
)
QUIET_OPTION = typer.Option(
    False, "--quiet", "-q", help="Only warnings and errors on stderr.", rich_help_panel="Output"
)


# Options that several commands take, each with its own words (say, dub, edit, revoice)
def output_option(help: str) -> Any:
    """-o / --output PATH, in the Output panel."""
    return typer.Option(None, "-o", "--output", metavar="PATH", show_default=False, rich_help_panel="Output", help=help)


def words_file_option(help: str) -> Any:
    """--words FILE.json: when each word is spoken, heard by the speech recogniser (the Listening panel)."""
    return typer.Option(None, "--words", metavar="FILE.json", show_default=False, rich_help_panel=LISTENING, help=help)


def dry_run_option(help: str) -> Any:
    """--dry-run: load no model, write nothing (the Output panel)."""
    return typer.Option(False, "--dry-run", rich_help_panel="Output", help=help)


def json_option(help: str) -> Any:
    """--json: a JSON report (the Output panel)."""
    return typer.Option(False, "--json", rich_help_panel="Output", help=help)


# The settings of `say` and `batch` (what a request and its engine are made of).
SPEECH_SETTINGS = (
    "lang",
    "lexicon",
    "normalize",
    "markdown",
    "chunk_duration",
    "chunk_threshold",
    "instruct",
    "instruct_text",
    "voice",
    "speed",
    "duration",
    *GENERATION_KEYS,
    "seed",
    "format",
    "loudness",
)
HARDWARE_SETTINGS = ("model", "device", "dtype", "threads", "quantize", "compile")
# The AI mark of what a command writes and its C2PA manifest (docs/marking.md): say, batch, book, dub, serve, mcp.
MARK_SETTINGS = ("mark", "c2pa_cert", "c2pa_key")
# The settings of the engine-loop servers (`omnivoice wyoming`, `omnivoice mcp`: app/door/speaker.py):
# say's, less duration and format (a request's own), with the engine's hardware.
SPEAKER_SETTINGS = tuple(k for k in SPEECH_SETTINGS if k not in ("duration", "format")) + HARDWARE_SETTINGS
LISTEN_SETTINGS = (
    "asr_model",
    "verify",
    "verify_retries",
    "verify_max_error",
)  # the speech recogniser (listen.py, verify.py)


RAY_OPTION = typer.Option(
    None,
    "--ray",
    metavar="ADDRESS|auto|local",
    show_default=False,
    rich_help_panel="Cluster",
    help="Speak on a Ray cluster: local starts one on this machine, auto joins the one RAY_ADDRESS "
    "or a running head names, or give its address (needs pip install 'omnivoice-cli[ray]'). Default: off.",
)
WORKERS_OPTION = typer.Option(
    None,
    "--workers",
    metavar="N",
    show_default=False,
    rich_help_panel="Cluster",
    help="With --ray: engines on the cluster, each loading the model once and taking --threads CPU cores "
    "(default 1). Default: 1.",
)
GPUS_PER_WORKER_OPTION = typer.Option(
    None,
    "--gpus-per-worker",
    metavar="G",
    show_default=False,
    rich_help_panel="Cluster",
    help="With --ray: GPUs each worker takes (0.5: two share one). Default: 0 (on the CPU).",
)


_WAYS = ((PRESET, "preset"), (LINE, "line"), (HTTP, "server"))


def settings_table() -> str:
    """The table of settings in docs/settings.md, made from the schema (a test keeps the page in step)."""
    rows = ["| flag | key | also as | meaning | default |", "| --- | --- | --- | --- | --- |"]
    for panel in PANELS:
        for key, s in SCHEMA.items():
            if s.panel != panel:
                continue
            flag = f"{s.flag} / --no-{s.flag[2:]}" if s.kind is bool else f"{s.flag} {s.metavar}"
            ways = ", ".join(name for way, name in _WAYS if way in s.where) or "-"
            default = setting_help(s).rsplit("Default: ", 1)[1].rstrip(".")
            bounds = "".join(f", at {w} {b:g}" for w, b in (("least", s.low), ("most", s.high)) if b is not None)
            meaning = f"{s.help} Allowed: {s.allowed}{bounds}."
            cells = [f"`{flag}`" + (" (advanced)" if s.advanced else ""), f"`{key}`", ways, meaning, default]
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"
