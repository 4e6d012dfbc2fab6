"""The `omnivoice` command line: the app, assembled from the commands (one file each in commands/).

Streams: stdout carries only data (the audio of `-o -`, the `--json` report when the audio is not
on stdout, the listings); messages, warnings, errors and progress go to stderr.

Exit codes, mapped once in `Group.invoke`: 0 ok; 1 runtime failure (an OmniVoiceError such as
CheckpointError or ModelUnavailable, an OSError; for `batch`, any line that failed); 2 usage
(InvalidRequest, SettingsError, a bad option value); 130 / 143 stopped by Ctrl-C / SIGTERM (a file
being written is finished first).

The engine (and torch) is imported inside the command functions only, so `omnivoice --help`
stays fast and never imports torch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import typer

from .app import settings as st
from .app.signals import ignore_stops
from .commands import batch as batch_cmd
from .commands import book as book_cmd
from .commands import cache, dub, info, mcp, models, presets, say, serve, voice, wyoming
from .commands.common import error
from .engine.errors import InvalidRequest, ModelUnavailable, OmniVoiceError
from .ui.helpfmt import HelpCommand, HelpGroup
from .ui.helpfmt import click_exceptions as _cx


def usage_error(e: _cx.UsageError) -> None:
    """A usage error as one line (never typer's boxed panel), exit code 2."""
    hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
    error(e.format_message() + hint)
    raise typer.Exit(2) from None


class Group(HelpGroup):
    """Maps exceptions to one-line messages and exit codes: the only place that does so."""

    def make_context(self, info_name: Any, args: list[str], parent: Any = None, **extra: Any) -> Any:
        """The top level's own options (`omnivoice --bogus`) are parsed here, before invoke."""
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _cx.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help itself
                raise
            usage_error(e)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
            raise
        except _cx.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help itself
                raise
            usage_error(e)
        except Exception as e:
            code = exit_code_for(e)
            if code is None:
                raise  # a bug: keep the traceback
            error(error_message(e))
            raise typer.Exit(code) from None


def exit_code_for(e: BaseException) -> int | None:
    """2 for usage errors, 1 for runtime failures, None for anything unexpected."""
    if isinstance(e, (InvalidRequest, st.SettingsError, _cx.UsageError)):
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


def _command(func: Callable[..., None], name: str | None = None, **kw: Any) -> None:
    app.command(name, cls=HelpCommand, **kw)(func)


_command(say.say, "say", help=say.HELP, epilog=say.EXAMPLES, no_args_is_help=True)
_command(batch_cmd.batch, "batch", help=batch_cmd.HELP, epilog=batch_cmd.EXAMPLES, no_args_is_help=True)
_command(dub.dub, "dub", help=dub.HELP, epilog=dub.EXAMPLES, no_args_is_help=True)
_command(book_cmd.book, "book", help=book_cmd.HELP, epilog=book_cmd.EXAMPLES, no_args_is_help=True)
app.add_typer(voice.app, name="voice")
app.add_typer(presets.app, name="presets")
app.add_typer(cache.app, name="cache")
_command(models.download, "download")
_command(models.models, "models")
_command(info.languages, "languages")
_command(info.instructs, "instructs")
_command(info.tags, "tags")
_command(info.system, "info")
_command(serve.serve, "serve", help=serve.HELP, epilog=serve.EXAMPLES)
_command(wyoming.wyoming, "wyoming", help=wyoming.HELP, epilog=wyoming.EXAMPLES)
_command(mcp.mcp, "mcp", help=mcp.HELP, epilog=mcp.EXAMPLES)


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
