"""Messages on stderr: `echo`, `error`, `warn`, and the engine's notices (light: the top level's
usage errors print through here before any command's module is imported)."""

from __future__ import annotations

from typing import Callable

import typer

from .progress import print_above
from .text import visible


def echo(msg: str) -> None:
    """A message on stderr; its control characters made visible (it may quote a file: ui/text.py)."""
    msg = visible(msg, lines=True)
    if not print_above(msg):  # a progress bar on the terminal: above it
        typer.echo(msg, err=True)


def error(msg: str) -> None:
    echo(f"Error: {msg}")


def warn(msg: str) -> None:
    echo(f"Warning: {msg}")


def notice(quiet: bool) -> Callable[[str], None]:
    """The engine's on_notice: its messages (licence, download) on stderr unless quiet."""

    def show(msg: str) -> None:
        if not quiet:
            echo(msg)

    return show
