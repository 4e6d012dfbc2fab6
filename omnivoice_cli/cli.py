"""The `omnivoice` command line: the app, assembled from the commands (one file each in commands/).

Streams: stdout carries only data (the audio of `-o -`, the `--json` report when the audio is not
on stdout, the listings); messages, warnings, errors and progress go to stderr.

Exit codes, mapped once in `Group.invoke`: 0 ok; 1 runtime failure (an OmniVoiceError such as
CheckpointError or ModelUnavailable, an OSError; for `batch`, any line that failed); 2 usage
(InvalidRequest, SettingsError, a bad option value); 130 / 143 stopped by Ctrl-C / SIGTERM (a file
being written is finished first).

Commands are registered lazily (`COMMANDS`): a command's module is imported only when that
command runs or its help is shown, and the engine (and torch) only inside the command functions,
so `omnivoice --help` and `omnivoice say --help` stay fast and never import torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, NamedTuple, Optional

import typer

from .app.settings.setting import SettingsError
from .app.signals import ignore_stops
from .engine.errors import InvalidRequest, ModelUnavailable, OmniVoiceError
from .ui.helpfmt import HelpCommand, HelpGroup
from .ui.helpfmt import click_exceptions as _cx
from .ui.hints import option_instead, say_instead, text_instead
from .ui.messages import error


def exit_usage(e: _cx.UsageError) -> None:
    """A usage error as one line (never typer's boxed panel), exit code 2; an option named as
    other tools name it (`--rate`) gets ours (`--speed`)."""
    message = e.format_message()
    if isinstance(e, _cx.NoSuchOption) and e.ctx is not None:
        ours, words = option_instead(e.option_name, e.ctx.command), text_instead(e.option_name, e.ctx.command)
        if ours is not None:
            message = f"{e.message}. Did you mean {ours}?"
        elif words is not None:
            message = f"{e.message}: {words}"
    hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
    error(message + hint)
    raise typer.Exit(2) from None


class Lazy(NamedTuple):
    """A command of the top level: where it is (commands/MODULE.py, its function or Typer app NAME),
    its summary (the first line of its help: the top level's listing shows it without importing
    the module) and whether no arguments shows its help."""

    module: str
    name: str
    summary: str
    no_args_is_help: bool = False


COMMANDS = {
    "say": Lazy(
        "say",
        "say",
        "Speak TEXT (or the text of -f FILE): play it, or write it to a file (-o), or to stdout (-o -).",
        True,
    ),
    "batch": Lazy("batch", "batch", "Speak every line of INPUT into its own audio file in the folder -o.", True),
    "dub": Lazy(
        "dub", "dub", "Speak every cue of an SRT or WebVTT file into one audio track, each in its time slot.", True
    ),
    "edit": Lazy(
        "edit",
        "edit",
        "Change words inside a recording: only the changed stretch is made again, in the take's voice.",
        True,
    ),
    "revoice": Lazy(
        "edit",
        "revoice",
        "Speak a take again in another voice, in its own timing: its words in the slots they had.",
        True,
    ),
    "book": Lazy(
        "book", "book", "Read a book aloud: an .m4b audiobook with chapter marks, or one audio file per chapter.", True
    ),
    "download": Lazy(
        "models",
        "download",
        "Download a model into the Hugging Face cache (with a progress bar), so `say` needs no network.",
    ),
    "models": Lazy(
        "models",
        "models",
        "List the OmniVoice checkpoints in the Hugging Face cache: hub id, size, complete or not, where.",
    ),
    "languages": Lazy(
        "info", "languages", "List the accepted languages, one 'code<TAB>name' per line (--lang takes either)."
    ),
    "instructs": Lazy(
        "info",
        "instructs",
        "List the voice-design items accepted by --instruct, by category (at most one item per category).",
    ),
    "tags": Lazy(
        "info", "tags", "List the tags a text may hold: non-verbal sounds such as [laughter], and [pause] silences."
    ),
    "info": Lazy(
        "info",
        "system",
        "Show this machine: the CPU's class and flags, and the paths --dtype auto and --quantize auto take on it.",
    ),
    "serve": Lazy(
        "serve", "serve", "Serve OpenAI's speech API (POST /v1/audio/speech) and the saved voices over HTTP."
    ),
    "wyoming": Lazy(
        "wyoming", "wyoming", "Serve text to speech over the Wyoming protocol, for Home Assistant's voice pipeline."
    ),
    "mcp": Lazy(
        "mcp", "mcp", "Serve speech as MCP tools for agents (Claude Desktop, IDEs, any MCP client), over stdio."
    ),
    "voice": Lazy(
        "voice",
        "app",
        "Saved voices: add one from a recording, list, show, remove, import a reference .pt prompt or a voice "
        "file, or export one to take elsewhere.",
        True,
    ),
    "presets": Lazy(
        "presets",
        "app",
        "List the presets (built-in and user), or show one's resolved settings with `presets show NAME`.",
    ),
    "cache": Lazy(
        "cache",
        "app",
        "The weight cache (the int8 body's coded weights) and the phrase cache (replies kept by "
        "serve --phrase-cache and say --cache).",
    ),
}


def load_command(name: str) -> Any:
    """The click command of COMMANDS[name], its module imported now. A module's HELP and EXAMPLES
    are its main command's help and examples; a function's docstring is its help otherwise."""
    lazy = COMMANDS[name]
    module = importlib.import_module(f"{__package__}.commands.{lazy.module}")
    target = getattr(module, lazy.name)
    command: Any
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        main = lazy.name == lazy.module
        one = typer.Typer(add_completion=False)
        one.command(
            name,
            cls=HelpCommand,
            help=getattr(module, "HELP", None) if main else None,
            epilog=getattr(module, "EXAMPLES", None) if main else None,
            no_args_is_help=lazy.no_args_is_help,
        )(target)
        command = typer.main.get_command(one)
    command.name = name
    return command


class LazyCommands(MutableMapping):
    """A group's `commands` that imports a command of COMMANDS on first use (click reads the
    mapping: `get`, iteration, `items`)."""

    def __init__(self, loaded: Mapping[str, Any]) -> None:
        self.loaded = dict(loaded)

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self.loaded[name] = load_command(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(COMMANDS), **self.loaded})

    def __len__(self) -> int:
        return len({**dict.fromkeys(COMMANDS), **self.loaded})


class Group(HelpGroup):
    """Maps exceptions to one-line messages and exit codes: the only place that does so. Its
    commands are COMMANDS, imported when used (`omnivoice --help` lists their summaries)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.commands)

    def listed_commands(self, ctx: Any) -> list[tuple[str, str]] | None:
        return [(name, lazy.summary) for name, lazy in COMMANDS.items()]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """An unknown command that is no typo of one (`omnivoice hello world`): words to say?"""
        try:
            return super().resolve_command(ctx, args)
        except _cx.UsageError as e:
            if "Did you mean" in e.message or not args or args[0].startswith("-"):
                raise
            raise _cx.UsageError(f"{e.message.rstrip('.')}. Did you mean {say_instead(args)}?", ctx) from None

    def make_context(self, info_name: Any, args: list[str], parent: Any = None, **extra: Any) -> Any:
        """The top level's own options (`omnivoice --bogus`) are parsed here, before invoke."""
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _cx.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help itself
                raise
            exit_usage(e)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
            raise
        except _cx.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help itself
                raise
            exit_usage(e)
        except Exception as e:
            code = exit_code_for(e)
            if code is None:
                raise  # a bug: keep the traceback
            error(error_message(e))
            raise typer.Exit(code) from None


def exit_code_for(e: BaseException) -> int | None:
    """2 for usage errors, 1 for runtime failures, None for anything unexpected."""
    if isinstance(e, (InvalidRequest, SettingsError, _cx.UsageError)):
        return 2
    if isinstance(e, (OmniVoiceError, OSError)):
        return 1
    return None


# What to do when the model is neither cached nor downloadable (the engine's advice, in flags).
MODEL_ADVICE = (
    "Connect once to fetch it (`omnivoice download`), or use a local checkpoint folder: "
    "--model DIR, or OMNIVOICE_MODEL=DIR"
)


def error_message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    if isinstance(e, ModelUnavailable) and e.problem:
        return f"{e.problem}. {MODEL_ADVICE}."
    msg = str(e).strip() or type(e).__name__
    return " ".join(msg.splitlines())  # one line


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("omnivoice-cli")
    except Exception:  # not installed (run from a checkout)
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"omnivoice {_version()}")
        raise typer.Exit()


app = typer.Typer(
    cls=Group,
    name="omnivoice",
    help="Text to speech with the OmniVoice model (plain PyTorch, runs on CPU or GPU).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog='\nomnivoice say "Hello world" -o hello.wav\nomnivoice batch lines.txt -o out/\n'
    "omnivoice voice add alice --ref alice.flac   # alice.txt holds its transcript\n",
)


@app.callback()
def main_options(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Text to speech with the OmniVoice model (plain PyTorch, runs on CPU or GPU)."""


def main() -> None:
    """Entry point of the `omnivoice` script."""
    try:
        app(prog_name="omnivoice")
    except SystemExit as e:
        if e.code in (130, 143):  # stopped: a signal that follows must not interrupt the exit
            ignore_stops()
        raise


if __name__ == "__main__":
    main()
