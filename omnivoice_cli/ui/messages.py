"""Messages on stderr: `echo`, `error`, `warn`, and the engine's notices (light: the top level's
usage errors print through here before any command's module is imported)."""

from __future__ import annotations

import sys
from typing import Any, Callable

import typer

from .helpfmt import click_exceptions
from .progress import print_above
from .text import columns, visible, wrap_row


def echo(msg: str) -> None:
    """A message on stderr; its control characters made visible (it may quote a file: ui/text.py)."""
    msg = visible(msg, lines=True)
    if not print_above(msg):  # a progress bar on the terminal: above it
        typer.echo(msg, err=True)


def error(msg: str) -> None:
    echo(f"Error: {msg}")


def warn(msg: str) -> None:
    """A warning, cut at spaces to the terminal's width (whole in a pipe or a file: one line)."""
    echo(wrap_row("Warning: ", msg, columns(sys.stderr, terminal_only=True), lead="  "))


def pace(rtf: float | None) -> str:
    """The real-time factor in words: "1.30 s per second of audio" (the time taken to make each
    second of audio; under 1: faster than real time)."""
    return "n/a" if rtf is None else f"{rtf:.2f} s per second of audio"


def notice(quiet: bool) -> Callable[[str], None]:
    """The engine's on_notice: its messages (licence, download) on stderr unless quiet."""

    def show(msg: str) -> None:
        if not quiet:
            echo(msg)

    return show


def usage_error(message: str, ctx: Any = None) -> Exception:
    """A click usage error (exit code 2, with a pointer to --help), of the click typer runs on."""
    return click_exceptions.UsageError(message, ctx)
