"""What the commands share: messages on stderr, the run's session (status line, bars), loading the engine."""

from __future__ import annotations

from typing import Any

import typer

from .. import settings as st
from ..progress import BatchProgress, print_above, status
from ..session import Hardware, Session


def usage_error(message: str, ctx: Any = None) -> Exception:
    """A click usage error (exit code 2, with a pointer to --help), of the click typer runs on."""
    try:  # typer >= 0.2x vendors its own click
        from typer._click.exceptions import UsageError
    except ImportError:  # older typer runs on click
        from click.exceptions import UsageError
    return UsageError(message, ctx)


def echo(msg: str) -> None:
    if not print_above(msg):  # a progress bar on the terminal: above it
        typer.echo(msg, err=True)


def error(msg: str) -> None:
    echo(f"Error: {msg}")


def warn(msg: str) -> None:
    echo(f"Warning: {msg}")


def notice(quiet: bool):
    """The engine's on_notice: its messages (licence, download) on stderr unless quiet."""

    def show(msg: str) -> None:
        if not quiet:
            echo(msg)

    return show


def run_settings(preset: str | None, flags: dict[str, Any]) -> tuple[st.Preset | None, st.Resolved]:
    """defaults < --preset < flags, checked, with the engine options that cannot go together refused."""
    chosen = st.find_preset(preset) if preset is not None else None
    layers = [(chosen.origin, chosen.settings)] if chosen else []
    resolved = st.resolve(*layers, (st.FLAG_SOURCE, flags))
    dropped = st.check_engine_options(resolved.values, resolved.sources)
    if dropped:
        warn(dropped)
    return chosen, resolved


def run_session(quiet: bool, unit: str = "lines") -> Session:
    """The app layer's session of a command: messages on stderr, the status line and the bars
    (progress.py; counting `unit`) unless quiet, the engine's notices unless quiet."""
    shown = not quiet
    return Session(
        echo=echo, quiet=quiet, notice=notice(quiet),
        status=lambda message: status(message, enabled=shown),
        progress=lambda total: BatchProgress(total, enabled=shown, echo=echo, unit=unit),
    )  # fmt: skip


def load_engine(settings: st.Resolved, quiet: bool, encoder: bool = False) -> tuple[Any, float]:
    """Load the model the settings name (a status line while it loads), and the codec's encoder
    when a recording is to be cloned; returns (engine, seconds): session.load_engine."""
    return run_session(quiet).load_engine(Hardware.from_settings(settings.values), encoder=encoder)
