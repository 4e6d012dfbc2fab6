"""What the commands share: messages on stderr, warnings shown once, loading the engine, and
the hooks and held signals a run of speak.py is run under (`held(run)`)."""

from __future__ import annotations

from typing import Any, Iterable

import typer

from .. import settings as st
from ..progress import loading, print_above


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


class Warnings:
    """Warnings on stderr, each once."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def __call__(self, warnings: Iterable[str]) -> None:
        for w in warnings:
            if w not in self.shown:
                warn(w)
                self.shown.append(w)


def notice(quiet: bool):
    """The engine's on_notice: its messages (licence, download) on stderr unless quiet."""

    def show(msg: str) -> None:
        if not quiet:
            echo(msg)

    return show


def stdout_is_terminal() -> bool:
    return typer.get_binary_stream("stdout").isatty()


def hooks(quiet: bool) -> Any:
    """What a run of speak.py shows: warnings, and unless quiet the engine's notices, status lines
    and progress bars, on stderr; the audio of -o - on stdout."""
    from ..progress import StepProgress, status
    from ..speak import Hooks

    return Hooks(warn=warn, notice=notice(quiet), status=lambda message: status(message, enabled=not quiet),
                 progress=lambda label, total: StepProgress(enabled=not quiet, label=label, total=total),
                 stdout=lambda: typer.get_binary_stream("stdout"))  # fmt: skip


def held(run: Any) -> Any:
    """`run.run(signals)` with Ctrl-C and SIGTERM held while it writes (signals.HoldSignals); a
    stop is its one line (speak.Stopped), then exit 128 + signum."""
    from ..signals import HoldSignals
    from ..speak import Stopped

    with HoldSignals() as signals:
        try:
            return run.run(signals)
        except Stopped as stop:
            (error if stop.failed else warn)(stop.message)
            raise typer.Exit(stop.exit_code) from None


def run_settings(preset: str | None, flags: dict[str, Any]) -> tuple[st.Preset | None, st.Resolved]:
    """defaults < --preset < flags, checked, with the engine options that cannot go together refused."""
    chosen = st.find_preset(preset) if preset is not None else None
    layers = [(chosen.origin, chosen.settings)] if chosen else []
    resolved, dropped = st.engine_options(st.resolve(*layers, (st.FLAG_SOURCE, flags)))
    if dropped:
        warn(dropped)
    return chosen, resolved


def load_engine(settings: st.Resolved | dict[str, Any], quiet: bool, encoder: bool = False) -> tuple[Any, float]:
    """Load the model the settings name (a status line while it loads), and the codec's encoder
    when a recording is to be cloned; returns (engine, seconds): session.load_engine."""
    from ..session import Hardware, load_engine as load

    values = settings.values if isinstance(settings, st.Resolved) else settings
    status = lambda what: loading(what, enabled=not quiet)  # noqa: E731
    return load(Hardware.from_settings(values), encoder=encoder, status=status, on_notice=notice(quiet))
