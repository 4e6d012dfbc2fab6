"""What the commands share: messages on stderr, the run's session (status line, bars), loading the
engine, and the held signals a run of speak.py is run under (`held(run)`)."""

from __future__ import annotations

import importlib
from typing import Any, Callable

import typer

from ..app.batch.cluster import ClusterOptions, RayExecutor, check_device, import_ray
from ..app.checkpoint import model_config
from ..app.door.idle import idle_seconds
from ..app.door.speaker import SpeakerOptions
from ..app.lexicon import load_lexicon
from ..app.marking import check_marking
from ..app.request import check_language, named
from ..app.say.speakrun import StoppedBySignal
from ..app.session import Session, hardware_from_settings
from ..app.settings.layers import FLAG_SOURCE, Resolved, engine_options, resolve
from ..app.settings.presets import Preset, find_preset
from ..app.signals import HoldSignals
from ..app.voices.voices import resolve_voice
from ..engine.checkpoint.hub import model_problem
from ..engine.errors import InvalidRequest, MissingExtra
from ..engine.pipeline import Engine
from ..engine.text.instructs import resolve_instruct
from ..ui.messages import echo, error, notice, warn
from ..ui.progress import BatchProgress, StepProgress, status


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


def run_settings(preset: str | None, flags: dict[str, Any]) -> tuple[Preset | None, Resolved]:
    """defaults < --preset < flags, checked, with the engine options that cannot go together refused."""
    chosen = find_preset(preset) if preset is not None else None
    layers = [(chosen.origin, chosen.settings)] if chosen else []
    resolved, dropped = engine_options(resolve(*layers, (FLAG_SOURCE, flags)))
    if dropped:
        warn(dropped)
    if resolved["lexicon"] is not None:  # read and checked now, once: every request of the run uses it
        load_lexicon(resolved["lexicon"], fresh=True)
    problem = model_problem(str(resolved["model"]))  # a folder not there: a usage error, before any loading
    if problem is not None:
        raise named(resolved, InvalidRequest(problem, "model"))
    if resolved["lang"] is not None:  # the run's language, once (a batch's lines, a server's requests)
        check_language(resolved)
    check_marking(resolved)  # --c2pa-cert / --c2pa-key sign (app/marking.py), before any loading
    return chosen, resolved


def speaker_options(
    preset: str | None, flags: dict[str, Any], max_queue: int, max_chars: int, idle_unload: str | None = None
) -> tuple[Resolved, SpeakerOptions]:
    """The run's settings and the SpeakerOptions of an engine-loop server (wyoming, mcp): its
    preset and flags as the layers every request starts from; --idle-unload read."""
    unload = idle_seconds(idle_unload)
    chosen, settings = run_settings(preset, flags)
    layers = ((chosen.origin, chosen.settings),) if chosen else ()
    options = SpeakerOptions(
        layers=(*layers, (FLAG_SOURCE, flags)),
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


def load_model(settings: Resolved, quiet: bool, encoder: bool = False) -> tuple[Engine, float]:
    """Load the model the settings name (a status line while it loads), and the codec's encoder
    when a recording is to be cloned; returns (engine, seconds): Session.load_engine."""
    hardware = hardware_from_settings(settings.values)
    return run_session(quiet).load_engine(str(settings["model"]), hardware, encoder=encoder)


def check_run(flags: dict, preset: str | None) -> Preset | None:
    """A batch-like run's preset and flags (batch, book), checked before any line is read."""
    chosen, run = run_settings(preset, flags)
    if run["instruct"] is not None:
        try:
            resolve_instruct(run["instruct"], own=model_config(run["model"]).own)
        except InvalidRequest as e:
            raise named(run, e, "instruct") from None
    return chosen


def check_extra(command: str, extra: str, *stack: tuple[str, tuple[str, ...]]) -> None:
    """Each package of `command`'s extra, (name, the modules it may be imported as), imports, or
    MissingExtra naming the first that does not (exit 2)."""
    for package, modules in stack:
        for module in modules:
            try:
                importlib.import_module(module)
                break
            except ImportError:
                continue
        else:
            raise MissingExtra(command, package, extra)


def engine_loader(settings: Resolved, quiet: bool, command: str, ready: str = "") -> Callable[[], Engine]:
    """A server's engine, loaded when it is first needed (Session.load_engine; no status line: the
    server's own lines say it), then 'omnivoice COMMAND: model loaded in N s' and `ready`."""

    def load() -> Engine:
        hardware = hardware_from_settings(settings.values)
        engine, seconds = Session(notice=notice(quiet)).load_engine(str(settings["model"]), hardware)
        if not quiet:
            echo(f"{command}: model loaded in {seconds:.1f} s{ready}")
        return engine

    return load


def check_cast(specs: list[str] | None) -> None:
    """A --cast VOICE that is neither a saved voice nor a voice file but voice-design items
    (`--cast BOB="male, low pitch"`) is refused in one line that shows the instruct: form."""
    for spec in specs or []:
        name, sep, voice = (part.strip() for part in spec.partition("="))
        if not sep or not name or not voice or voice.lower() == "auto" or voice.lower().startswith("instruct:"):
            continue  # malformed, or plainly no voice: Cast.parse says so
        try:
            resolve_voice(voice)
            continue
        except InvalidRequest:
            pass
        try:
            resolve_instruct(voice)
        except InvalidRequest:
            continue  # not voice-design words either: the voice's own error follows
        raise InvalidRequest(
            f'--cast {name}: {voice!r} is not a voice but voice-design items: write --cast "{name}=instruct:{voice}"'
        )


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
