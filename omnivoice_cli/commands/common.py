"""What the commands share: messages on stderr, the run's session (status line, bars), loading the
engine, and the held signals a run of speak.py is run under (`held(run)`)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import typer

from ..app import settings as st
from ..app.checkpoint import model_config
from ..app.cluster import ClusterOptions, RayExecutor, check_device, import_ray
from ..app.idle import idle_seconds
from ..app.lexicon import load_lexicon
from ..app.request import named
from ..app.session import Session, hardware_from_settings
from ..app.signals import HoldSignals
from ..app.speaker import SpeakerOptions
from ..app.speakrun import StoppedBySignal
from ..engine.errors import InvalidRequest
from ..engine.pipeline import Engine
from ..engine.text import resolve_instruct
from ..ui.progress import BatchProgress, StepProgress, print_above, status
from ..ui.text import visible

# the exceptions of the click typer runs on: its own vendored copy (typer >= 0.2x) or click (older typer)
click_exceptions = importlib.import_module(
    "typer._click.exceptions" if importlib.util.find_spec("typer._click") else "click.exceptions"
)


def usage_error(message: str, ctx: Any = None) -> Exception:
    """A click usage error (exit code 2, with a pointer to --help), of the click typer runs on."""
    return click_exceptions.UsageError(message, ctx)


def echo(msg: str) -> None:
    """A message on stderr; its control characters made visible (it may quote a file: ui/text.py)."""
    msg = visible(msg, lines=True)
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


def stdout_is_terminal() -> bool:
    return typer.get_binary_stream("stdout").isatty()


def held(run: Any) -> Any:
    """`run.run(signals)` with Ctrl-C and SIGTERM held while it writes (signals.HoldSignals); a
    stop is its one line (speakrun.StoppedBySignal), then exit 128 + signum."""
    with HoldSignals() as signals:
        try:
            return run.run(signals)
        except StoppedBySignal as stop:
            (error if stop.failed else warn)(stop.message)
            raise typer.Exit(stop.exit_code) from None


def run_settings(preset: str | None, flags: dict[str, Any]) -> tuple[st.Preset | None, st.Resolved]:
    """defaults < --preset < flags, checked, with the engine options that cannot go together refused."""
    chosen = st.find_preset(preset) if preset is not None else None
    layers = [(chosen.origin, chosen.settings)] if chosen else []
    resolved, dropped = st.engine_options(st.resolve(*layers, (st.FLAG_SOURCE, flags)))
    if dropped:
        warn(dropped)
    if resolved["lexicon"] is not None:  # read and checked now, once: every request of the run uses it
        load_lexicon(resolved["lexicon"], fresh=True)
    return chosen, resolved


def speaker_options(
    preset: str | None, flags: dict[str, Any], max_queue: int, max_chars: int, idle_unload: str | None = None
) -> tuple[st.Resolved, SpeakerOptions]:
    """The run's settings and the SpeakerOptions of an engine-loop server (wyoming, mcp): its
    preset and flags as the layers every request starts from; --idle-unload read."""
    unload = idle_seconds(idle_unload)
    chosen, settings = run_settings(preset, flags)
    layers = ((chosen.origin, chosen.settings),) if chosen else ()
    options = SpeakerOptions(
        layers=(*layers, (st.FLAG_SOURCE, flags)),
        model=settings["model"],
        max_queue=max_queue,
        max_chars=max_chars,
        idle_unload=unload,
    )
    return settings, options


def run_session(quiet: bool, unit: str = "lines") -> Session:
    """The app layer's session of a command: messages and warnings on stderr, the status line,
    the bars (progress.py: over items counting `unit`, or one text's steps) and the engine's
    notices unless quiet; the audio of -o - on stdout."""
    shown = not quiet
    return Session(
        echo=echo,
        quiet=quiet,
        notice=notice(quiet),
        status=lambda message: status(message, enabled=shown),
        progress=lambda total: BatchProgress(total, enabled=shown, echo=echo, unit=unit),
        warn=warn,
        steps=lambda label, total: StepProgress(enabled=shown, label=label, total=total),
        stdout=lambda: typer.get_binary_stream("stdout"),
    )


def load_model(settings: st.Resolved, quiet: bool, encoder: bool = False) -> tuple[Engine, float]:
    """Load the model the settings name (a status line while it loads), and the codec's encoder
    when a recording is to be cloned; returns (engine, seconds): Session.load_engine."""
    hardware = hardware_from_settings(settings.values)
    return run_session(quiet).load_engine(str(settings["model"]), hardware, encoder=encoder)


def check_run(flags: dict, preset: str | None) -> st.Preset | None:
    """A batch-like run's preset and flags (batch, book), checked before any line is read."""
    chosen, run = run_settings(preset, flags)
    if run["instruct"] is not None:
        try:
            resolve_instruct(run["instruct"], own=model_config(run["model"]).own)
        except InvalidRequest as e:
            raise named(run, e, "instruct") from None
    return chosen


def cluster_executor(
    ray: str | None, workers: int | None, gpus: float | None, preset: str | None, flags: dict
) -> RayExecutor | None:
    """The Ray executor of --ray (None: this process speaks); --workers and --gpus-per-worker need --ray."""
    if ray is None:
        for name, value in (("--workers", workers), ("--gpus-per-worker", gpus)):
            if value is not None:
                raise InvalidRequest(f"{name} needs --ray (a Ray cluster to run the workers on)")
        return None
    _, run = run_settings(preset, flags)
    options = ClusterOptions(ray.strip(), 1 if workers is None else workers, gpus or 0.0, run["threads"] or 1)
    check_device(run["device"], options)
    import_ray()  # installed? (exit 2 with how to install it, before any line is read)
    return RayExecutor(options)
