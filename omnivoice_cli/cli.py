"""The `omnivoice` command line.

    omnivoice say "Hello world" -o hello.wav
    omnivoice say "Good evening." --instruct "female, low pitch, british accent" --lang en -o out.flac
    echo "Text from a pipe" | omnivoice say - -o - > out.wav
    omnivoice say "Quick draft" --preset fast -o d.wav
    omnivoice batch lines.txt -o out/
    omnivoice batch jobs.jsonl -o out/ --preset fast
    omnivoice presets
    omnivoice presets show quality
    omnivoice languages
    omnivoice instructs

Streams: stdout carries only data (the audio of `-o -`, the `--json` report when the audio is not
on stdout, the listings); messages, warnings, errors and the progress bar go to stderr.

Exit codes, mapped once in `_Group.invoke`: 0 ok; 1 runtime failure (an OmniVoiceError such as
CheckpointError or ModelUnavailable, an OSError; for `batch`, any line that failed); 2 usage
(InvalidRequest, SettingsError, a bad option value); 130 / 143 a batch stopped by Ctrl-C / SIGTERM.

The engine (and torch) is imported inside the command functions only, so `omnivoice --help`
stays fast and never imports torch.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Optional

import typer
from typer.core import TyperGroup

try:  # typer >= 0.2x vendors its own click
    from typer._click import exceptions as _cx
except ImportError:  # older typer runs on click
    from click import exceptions as _cx

from . import settings as st

G = st.GENERATION_DEFAULTS


class _Group(TyperGroup):
    """Maps exceptions to one-line messages and exit codes: the only place that does so."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
            raise
        except _cx.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help itself
                raise
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            _error(e.format_message() + hint)
            raise typer.Exit(2) from None
        except Exception as e:
            code = exit_code_for(e)
            if code is None:
                raise  # a bug: keep the traceback
            _error(error_message(e))
            raise typer.Exit(code) from None


def exit_code_for(e: BaseException) -> int | None:
    """2 for usage errors, 1 for runtime failures, None for anything unexpected."""
    from .engine.errors import InvalidRequest, OmniVoiceError

    if isinstance(e, (InvalidRequest, st.SettingsError, _cx.UsageError)):
        return 2
    if isinstance(e, (OmniVoiceError, OSError)):
        return 1
    return None


def error_message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    msg = str(e).strip() or type(e).__name__
    return " ".join(msg.splitlines())  # one line


def _error(msg: str) -> None:
    typer.echo(f"Error: {msg}", err=True)


def _warn(msg: str) -> None:
    typer.echo(f"Warning: {msg}", err=True)


app = typer.Typer(
    cls=_Group,
    name="omnivoice",
    help="Text to speech with the OmniVoice model (plain PyTorch, runs on CPU or GPU).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|mps|cuda:\d+)$")

# Options given as text and parsed here, so that every bad value gets the same kind of one-line
# message naming the flag, the value and what is allowed (whatever the typer/click version).
_NUMBERS: dict[str, tuple[type, str]] = {
    "num_step": (int, "an integer in 1..64"),
    "guidance_scale": (float, "a number >= 0"),
    "t_shift": (float, "a number > 0"),
    "layer_penalty_factor": (float, "a number >= 0"),
    "position_temperature": (float, "a number >= 0"),
    "class_temperature": (float, "a number >= 0"),
    "speed": (float, "a number > 0 (1.0 is normal)"),
    "duration": (float, "seconds in (0, 30]"),
    "seed": (int, f"an integer in 0..{2**63 - 1}"),
}


def _parse_number(key: str, raw: str | None) -> int | float | None:
    from .engine.errors import InvalidRequest

    if raw is None:
        return None
    kind, allowed = _NUMBERS[key]
    try:
        return kind(raw.strip())
    except ValueError:
        raise InvalidRequest(f"{st.flag_name(key)} {raw!r} is not allowed: use {allowed}") from None


def _check_choices(device: str, dtype: str) -> None:
    from .engine.errors import InvalidRequest

    if not _DEVICE_RE.match(device):
        raise InvalidRequest(f"--device {device!r} is not allowed: use auto, cpu, cuda, cuda:N or mps")
    if dtype not in st.DTYPES:
        raise InvalidRequest(f"--dtype {dtype!r} is not allowed: use {', '.join(st.DTYPES)}")


def _with_flag(msg: str) -> str:
    """'num_step 0 is out of range ...' -> '--num-step 0 is out of range ...' (engine names -> flags)."""
    for key in sorted(st.DEFAULTS, key=len, reverse=True):
        if msg.startswith(key + " "):
            return st.flag_name(key) + msg[len(key) :]
    return msg


def _rethrow_with_flag(e: Exception) -> None:
    from .engine.errors import InvalidRequest

    new = _with_flag(str(e))
    if new != str(e):
        raise InvalidRequest(new) from None
    raise e


class _StepProgress:
    """A rich progress bar on stderr advanced by the engine's on_step(done, total).

    The engine may run several forward loops (e.g. long text in chunks), each counting from 1 to
    its own total; the bar adds them up.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress = None
        self._task = None
        self._offset = 0  # steps of finished loops
        self._last = (0, 0)  # (done, total) of the current loop
        self.completed = 0  # steps done, all loops
        self.total = 0  # steps known so far, all loops

    def __enter__(self) -> "_StepProgress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("generating"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("generating", total=None)
        return self

    def __call__(self, done: int, total: int) -> None:
        last_done, last_total = self._last
        if done < last_done or (done == last_done and done == last_total and last_total):
            self._offset += last_total  # a new forward loop started
        self._last = (done, total)
        self.completed, self.total = self._offset + done, self._offset + total
        if self._progress is not None:
            self._progress.update(self._task, completed=self.completed, total=self.total)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()


def _read_stdin(quiet: bool) -> str:
    stream = typer.get_text_stream("stdin")
    if stream.isatty() and not quiet:
        typer.echo("Reading the text from stdin (end with Ctrl-D) ...", err=True)
    try:
        return stream.read()
    except UnicodeDecodeError as e:
        from .engine.errors import InvalidRequest

        raise InvalidRequest(f"the text on stdin is not valid {e.encoding}: give text, not binary data") from None


def _random_seed() -> int:
    import secrets

    return secrets.randbelow(2**31)


_SAY_HELP = (
    "Speak TEXT and write it to an audio file, or to stdout with -o -.\n\n"
    "Files are 24 kHz mono: .wav and .flac as 16-bit PCM, .ogg as Vorbis. A file is written to a "
    "temporary file in the same folder and renamed, so it is never left partial.\n\n"
    "Progress and a summary (path, audio length, time, real-time factor, seed) go to stderr.\n\n"
    "Exit codes: 0 ok; 1 runtime failure (model, checkpoint, writing); 2 bad usage or value."
)


def _num(flag: str, metavar: str, help: str):
    return typer.Option(None, flag, metavar=metavar, help=help, show_default=False)


_DEVICE_OPTION = typer.Option(
    None, "--device", metavar="auto|cpu|cuda|mps", show_default=False,
    help="Where to run; cuda:N picks a GPU. Default: auto.",
)
_DTYPE_OPTION = typer.Option(
    None, "--dtype", metavar="auto|float32|float16|bfloat16", show_default=False,
    help="Precision; auto = float32 on CPU, float16 on GPU. Default: auto.",
)


@app.command(help=_SAY_HELP, no_args_is_help=True)
def say(
    text: str = typer.Argument(..., metavar="TEXT", help="The text to speak; - reads stdin.", show_default=False),
    output: Optional[str] = typer.Option(
        None, "-o", "--output", metavar="PATH", show_default=False,
        help=f"Audio file: .wav, .flac or .ogg; - writes WAV to stdout. Default: {st.DEFAULT_OUTPUT} "
        "(another extension when the preset sets format).",
    ),
    preset: Optional[str] = typer.Option(
        None, "--preset", metavar="NAME|FILE", show_default=False,
        help="Settings from a preset (see `omnivoice presets`) or a .toml file; flags override it.",
    ),
    model: Optional[str] = typer.Option(
        None, "--model", envvar="OMNIVOICE_MODEL", metavar="ID|DIR", show_default=False,
        help=f"Hugging Face hub id or local checkpoint folder. Default: {st.DEFAULT_MODEL}.",
    ),
    lang: Optional[str] = typer.Option(
        None, "--lang", metavar="LANG",
        help="Language code or name, e.g. en or English (see `omnivoice languages`). Default: none.",
    ),
    instruct: Optional[str] = typer.Option(
        None, "--instruct", metavar="ITEMS",
        help="Voice design, e.g. \"female, low pitch\" (see `omnivoice instructs`). Default: auto voice.",
    ),
    num_step: Optional[str] = _num("--num-step", "INT", f"Diffusion steps, 1..64. Default: {G['num_step']}."),
    guidance_scale: Optional[str] = _num(
        "--guidance-scale", "FLOAT", f"Classifier-free guidance, >= 0. Default: {G['guidance_scale']}."
    ),
    t_shift: Optional[str] = _num("--t-shift", "FLOAT", f"Time-step shift, > 0. Default: {G['t_shift']}."),
    layer_penalty_factor: Optional[str] = _num(
        "--layer-penalty-factor", "FLOAT", f"Codebook layer penalty, >= 0. Default: {G['layer_penalty_factor']}."
    ),
    position_temperature: Optional[str] = _num(
        "--position-temperature", "FLOAT",
        f"Position sampling temperature, >= 0 (0 = greedy). Default: {G['position_temperature']}.",
    ),
    class_temperature: Optional[str] = _num(
        "--class-temperature", "FLOAT",
        f"Token sampling temperature, >= 0 (0 = argmax). Default: {G['class_temperature']}.",
    ),
    denoise: Optional[bool] = typer.Option(
        None, "--denoise/--no-denoise", show_default=False,
        help="Clean audio with a reference voice. Default: --denoise.",
    ),
    speed: Optional[str] = _num("--speed", "FLOAT", "Speaking rate, > 0 (1.2 = faster). Default: 1.0."),
    duration: Optional[str] = _num(
        "--duration", "SECONDS", "Length of the speech, up to 30; overrides --speed. Default: from the text."
    ),
    seed: Optional[str] = _num("--seed", "INT", "Random seed, >= 0. Default: random (printed, to repeat the run)."),
    device: Optional[str] = _DEVICE_OPTION,
    dtype: Optional[str] = _DTYPE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON report instead of the summary (stderr if -o -)."),
) -> None:  # fmt: skip
    t_start = time.perf_counter()
    from .engine.config import GenerationConfig
    from .engine.errors import InvalidRequest
    from .engine.pipeline import Request, validate_request
    from .output import check_output, write_audio

    # --- everything that needs no model: fail fast -------------------------------------------
    if text == "-":
        text = _read_stdin(quiet)
    numbers = {
        "num_step": num_step,
        "guidance_scale": guidance_scale,
        "t_shift": t_shift,
        "layer_penalty_factor": layer_penalty_factor,
        "position_temperature": position_temperature,
        "class_temperature": class_temperature,
        "speed": speed,
        "duration": duration,
        "seed": seed,
    }
    flags = {key: _parse_number(key, raw) for key, raw in numbers.items()}
    flags.update(model=model, device=device, dtype=dtype, lang=lang, instruct=instruct, denoise=denoise)
    chosen = st.find_preset(preset) if preset is not None else None
    settings = st.resolve_settings(st.DEFAULTS, chosen.settings if chosen else None, flags)
    _check_choices(settings["device"], settings["dtype"])
    if settings["voice"] is not None:
        raise InvalidRequest(f"the preset sets voice {settings['voice']!r}, but voice cloning is not available yet")
    try:
        generation = GenerationConfig(**st.generation_kwargs(settings))
    except InvalidRequest as e:
        _rethrow_with_flag(e)
    if settings["seed"] is None:
        settings["seed"] = _random_seed()
    elif not 0 <= settings["seed"] < 2**63:
        raise InvalidRequest(f"--seed {settings['seed']} is not allowed: use an integer in 0..{2**63 - 1}")
    request = Request(
        text=text,
        lang=settings["lang"],
        instruct=settings["instruct"],
        duration=settings["duration"],
        speed=settings["speed"],
        seed=int(settings["seed"]),
        generation=generation,
    )
    try:
        warnings = list(validate_request(request))
    except InvalidRequest as e:
        _rethrow_with_flag(e)
    if settings["duration"] is not None and settings["speed"] is not None:
        warnings.append("--duration sets the length, so --speed is ignored")
    target = check_output(output if output is not None else f"{st.DEFAULT_OUTPUT_STEM}.{settings['format']}")
    if not target.to_stdout:
        settings["format"] = target.path.suffix.lower().lstrip(".")
    else:
        settings["format"] = "wav"
    if target.to_stdout and typer.get_binary_stream("stdout").isatty():
        raise InvalidRequest("-o - writes binary audio to stdout, which is a terminal: redirect it or pipe it")
    shown: set[str] = set()
    for w in warnings:
        _warn(w)
        shown.add(w)

    # --- the model -------------------------------------------------------------------------------
    from .engine.pipeline import Engine

    def notice(msg: str) -> None:
        if not quiet:
            typer.echo(msg, err=True)

    t_load = time.perf_counter()
    engine = Engine.load(settings["model"], device=settings["device"], dtype=settings["dtype"], on_notice=notice)
    t_gen = time.perf_counter()
    with _StepProgress(enabled=not quiet) as progress:
        [result] = engine.generate([request], on_step=progress)
    for w in result.warnings:
        if w not in shown:
            _warn(w)
            shown.add(w)
    try:
        write_audio(result.audio, result.sample_rate, target, stdout=typer.get_binary_stream("stdout"))
    except BrokenPipeError:
        raise
    except OSError as e:
        where = "stdout" if target.to_stdout else str(target)
        raise OSError(e.errno, f"cannot write {where}: {e.strerror or e}") from None
    t_end = time.perf_counter()

    # --- the report ------------------------------------------------------------------------------
    audio_seconds = len(result.audio) / result.sample_rate
    seconds = t_end - t_gen
    rtf = seconds / audio_seconds if audio_seconds > 0 else None
    if json_out:
        report = {
            "path": str(target),
            "format": target.format.lower(),
            "sample_rate": result.sample_rate,
            "audio_seconds": round(audio_seconds, 4),
            "seconds": round(seconds, 4),
            "load_seconds": round(t_gen - t_load, 4),
            "total_seconds": round(t_end - t_start, 4),
            "rtf": None if rtf is None else round(rtf, 4),
            "seed": result.seed,
            "settings": settings,
            "warnings": sorted(shown),
        }
        typer.echo(json.dumps(report, ensure_ascii=False), err=target.to_stdout)
    elif not quiet:
        where = "stdout" if target.to_stdout else str(target)
        rtf_s = "n/a" if rtf is None else f"{rtf:.3f}"
        typer.echo(
            f"{where}: {audio_seconds:.2f} s of audio in {seconds:.2f} s (RTF {rtf_s}; "
            f"model loaded in {t_gen - t_load:.1f} s), seed {result.seed}",
            err=True,
        )


_BATCH_HELP = (
    "Speak every line of INPUT into its own audio file in the folder -o.\n\n"
    "INPUT is a .txt file (one text per line) or a .jsonl file (one JSON object per line with "
    "\"text\" and optionally id, output, lang, instruct, ref, ref_text, voice, duration, "
    "speed, seed, num_step, guidance_scale, t_shift, layer_penalty_factor, position_temperature, "
    "class_temperature, denoise, preset). Blank lines and lines starting with # are skipped.\n\n"
    "Files are named after id / output, else the zero-padded line number (0007.wav). Existing "
    "files are skipped, so running the same command again resumes an interrupted batch "
    "(--overwrite redoes them). OUT/manifest.jsonl records every line.\n\n"
    "Settings: defaults < preset < flags < the fields of a JSON line. Seeds: a line's own seed, "
    "else --seed S + the line's 0-based index in the file, else random (all recorded).\n\n"
    "Exit codes: 0 every line done or skipped; 1 a line failed (or a runtime failure); 2 bad "
    "usage; 130 / 143 stopped by Ctrl-C / SIGTERM (finished files are kept)."
)


@app.command(help=_BATCH_HELP, no_args_is_help=True)
def batch(
    input: str = typer.Argument(..., metavar="INPUT", help="A .txt or .jsonl file.", show_default=False),
    output: str = typer.Option(
        ..., "-o", "--output", metavar="DIR", show_default=False,
        help="Output folder (created when missing); holds the audio files and manifest.jsonl.",
    ),
    preset: Optional[str] = typer.Option(
        None, "--preset", metavar="NAME|FILE", show_default=False,
        help="Settings from a preset (see `omnivoice presets`) or a .toml file; flags override it.",
    ),
    format: Optional[str] = typer.Option(
        None, "--format", metavar="wav|flac|ogg", show_default=False,
        help="Format of files whose output name has no extension. Default: wav.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Redo lines whose file already exists."),
    model: Optional[str] = typer.Option(
        None, "--model", envvar="OMNIVOICE_MODEL", metavar="ID|DIR", show_default=False,
        help=f"Hugging Face hub id or local checkpoint folder. Default: {st.DEFAULT_MODEL}.",
    ),
    lang: Optional[str] = typer.Option(None, "--lang", metavar="LANG", help="Language of every line. Default: none."),
    instruct: Optional[str] = typer.Option(
        None, "--instruct", metavar="ITEMS", help="Voice design of every line. Default: auto voice."
    ),
    num_step: Optional[str] = _num("--num-step", "INT", f"Diffusion steps, 1..64. Default: {G['num_step']}."),
    guidance_scale: Optional[str] = _num(
        "--guidance-scale", "FLOAT", f"Classifier-free guidance, >= 0. Default: {G['guidance_scale']}."
    ),
    t_shift: Optional[str] = _num("--t-shift", "FLOAT", f"Time-step shift, > 0. Default: {G['t_shift']}."),
    layer_penalty_factor: Optional[str] = _num(
        "--layer-penalty-factor", "FLOAT", f"Codebook layer penalty, >= 0. Default: {G['layer_penalty_factor']}."
    ),
    position_temperature: Optional[str] = _num(
        "--position-temperature", "FLOAT",
        f"Position sampling temperature, >= 0 (0 = greedy). Default: {G['position_temperature']}.",
    ),
    class_temperature: Optional[str] = _num(
        "--class-temperature", "FLOAT",
        f"Token sampling temperature, >= 0 (0 = argmax). Default: {G['class_temperature']}.",
    ),
    denoise: Optional[bool] = typer.Option(
        None, "--denoise/--no-denoise", show_default=False,
        help="Clean audio with a reference voice. Default: --denoise.",
    ),
    speed: Optional[str] = _num("--speed", "FLOAT", "Speaking rate, > 0 (1.2 = faster). Default: 1.0."),
    duration: Optional[str] = _num(
        "--duration", "SECONDS", "Length of every line, up to 30; overrides --speed. Default: from the text."
    ),
    seed: Optional[str] = _num(
        "--seed", "INT", "Line i (0-based) uses SEED + i unless it has its own seed. Default: random per line."
    ),
    device: Optional[str] = _DEVICE_OPTION,
    dtype: Optional[str] = _DTYPE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:  # fmt: skip
    from .engine.config import GenerationConfig
    from .engine.errors import InvalidRequest

    numbers = {
        "num_step": num_step,
        "guidance_scale": guidance_scale,
        "t_shift": t_shift,
        "layer_penalty_factor": layer_penalty_factor,
        "position_temperature": position_temperature,
        "class_temperature": class_temperature,
        "speed": speed,
        "duration": duration,
        "seed": seed,
    }
    flags: dict[str, Any] = {key: _parse_number(key, raw) for key, raw in numbers.items()}
    for key, value in flags.items():
        if value is not None:
            try:
                flags[key] = st.check_setting(key, value)
            except st.SettingsError:
                raise InvalidRequest(f"{st.flag_name(key)} {value!r} is not allowed: use {st.allowed(key)}") from None
    if format is not None and format.lower().lstrip(".") not in st.FORMATS:
        raise InvalidRequest(f"--format {format!r} is not allowed: use {', '.join(st.FORMATS)}")
    flags.update(
        model=model, device=device, dtype=dtype, lang=lang, instruct=instruct, denoise=denoise,
        format=format.lower().lstrip(".") if format else None,
    )  # fmt: skip
    chosen = st.find_preset(preset) if preset is not None else None
    run = st.resolve_settings(st.DEFAULTS, chosen.settings if chosen else None, flags)
    _check_choices(run["device"], run["dtype"])
    try:
        GenerationConfig(**st.generation_kwargs(run))
        if run["instruct"] is not None:
            from .engine.text import resolve_instruct

            resolve_instruct(run["instruct"])
    except InvalidRequest as e:
        _rethrow_with_flag(e)

    from .batch import run_batch

    def echo(msg: str) -> None:
        typer.echo(msg, err=True)

    report = run_batch(input, output, preset=chosen, flags=flags, overwrite=overwrite, quiet=quiet, echo=echo)

    counts = f"{report.done} done, {report.failed} failed, {report.skipped} skipped"
    if report.pending:
        counts += f", {report.pending} not run"
    if report.interrupted:
        name = "Ctrl-C" if report.interrupted == 2 else f"signal {int(report.interrupted)}"
        _warn(
            f"stopped by {name}: {report.lines} lines: {counts}; finished files are kept, "
            f"run the same command again to finish ({report.manifest})"
        )
        raise typer.Exit(128 + int(report.interrupted))
    if not quiet:
        rtf = "n/a" if report.rtf is None else f"{report.rtf:.3f}"
        loaded = "" if report.load_seconds is None else f"; model loaded in {report.load_seconds:.1f} s"
        typer.echo(
            f"{report.lines} lines: {counts}; {report.audio_seconds:.2f} s of audio in "
            f"{report.generate_seconds:.2f} s (RTF {rtf}{loaded}); wall time {report.wall_seconds:.1f} s; "
            f"manifest {report.manifest}",
            err=True,
        )
    if report.failed:
        raise typer.Exit(1)


presets_app = typer.Typer(
    help="List the presets (built-in and user), or show one's resolved settings with `presets show NAME`.",
    no_args_is_help=False,
    add_completion=False,
)
app.add_typer(presets_app, name="presets")


@presets_app.callback(invoke_without_command=True)
def presets(ctx: typer.Context) -> None:
    """List the built-in and user presets: name, source, description (user ones shadow built-in ones).

    User presets are TOML files in $OMNIVOICE_HOME/presets, else $XDG_CONFIG_HOME/omnivoice/presets
    (~/.config/omnivoice/presets).
    """
    if ctx.invoked_subcommand is not None:
        return
    rows = st.list_presets()
    out = typer.get_text_stream("stdout")
    width = max([len(name) for name, *_ in rows] + [4])
    src_width = max([len(source) for _, _, source, *_ in rows] + [8])
    for name, path, source, found, error in rows:
        about = found.description if found is not None else f"(broken: {error})"
        out.write(f"{name:<{width}}  {source:<{src_width}}  {about}".rstrip() + "\n")
        if error:
            _warn(error)
    typer.echo(f"user presets: {st.user_preset_dir()}", err=True)


@presets_app.command("show")
def presets_show(
    name: str = typer.Argument(..., metavar="NAME|FILE", help="A preset name or a .toml file."),
) -> None:
    """Print the settings a preset resolves to (defaults < preset), as a preset file."""
    found = st.find_preset(name)
    resolved = st.resolve_settings(st.DEFAULTS, found.settings, {})
    out = typer.get_text_stream("stdout")
    out.write(f"# preset {found.name!r} ({found.source}): {found.path}\n")
    if found.description:
        out.write(f"description = {_toml_value(found.description)}\n")
    for key in st.PRESET_KEYS:
        value = resolved[key]
        origin = "preset" if key in found.settings else "default"
        if value is None:
            out.write(f"# {key} is not set ({origin})\n")
        else:
            out.write(f"{key} = {_toml_value(value)}  # {origin}\n")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


@app.command()
def languages() -> None:
    """List the accepted languages, one 'code<TAB>name' per line (--lang takes either)."""
    from .engine.text import list_languages

    out = typer.get_text_stream("stdout")
    for code, name in list_languages():
        out.write(f"{code}\t{name}\n")


@app.command()
def instructs() -> None:
    """List the voice-design items accepted by --instruct, by category (at most one item per category)."""
    from .engine.text import instruct_vocabulary

    out = typer.get_text_stream("stdout")
    for cat in instruct_vocabulary():
        out.write(f"{cat.name}:\n")
        for en, zh in cat.pairs:
            if en and zh:
                out.write(f"  {en} ({zh})\n")
            else:
                out.write(f"  {en or zh}\n")


def main() -> None:
    """Entry point of the `omnivoice` script."""
    app(prog_name="omnivoice")


if __name__ == "__main__":
    main()
