"""The `omnivoice` command line.

    omnivoice say "Hello world" -o hello.wav
    omnivoice say "Good evening." --instruct "female, low pitch, british accent" --lang en -o out.flac
    echo "Text from a pipe" | omnivoice say - -o - > out.wav
    omnivoice say "Quick draft" --preset fast -o d.wav
    omnivoice say -f chapter1.txt -o chapter1.flac
    omnivoice say "I can speak in your voice." --ref me.wav --ref-text "What I say in me.wav." -o out.wav
    omnivoice voice add alice --ref alice.flac --ref-text "Transcript of alice.flac."
    omnivoice voice list
    omnivoice say "Hello again." --voice alice -o hi.wav
    omnivoice voice import my_voice.pt --name bob
    omnivoice voice rm alice
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
(InvalidRequest, SettingsError, a bad option value); 130 / 143 stopped by Ctrl-C / SIGTERM (a file
being written is finished first).

The engine (and torch) is imported inside the command functions only, so `omnivoice --help`
stays fast and never imports torch.
"""

from __future__ import annotations

import json
import re
import signal
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
    "chunk_duration": (float, "seconds > 0"),
    "chunk_threshold": (float, "seconds in (0, 30]"),
    "threads": (int, "an integer >= 1"),
}

# Flags checked by the CLI itself (settings.check_setting), with the flag in the message; the
# generation settings are checked by GenerationConfig, in its own words.
_CHECKED_FLAGS = ("chunk_duration", "chunk_threshold", "threads", "quantize")


def _parse_number(key: str, raw: str | None) -> int | float | None:
    from .engine.errors import InvalidRequest

    if raw is None:
        return None
    kind, allowed = _NUMBERS[key]
    try:
        return kind(raw.strip())
    except ValueError:
        raise InvalidRequest(f"{st.flag_name(key)} {raw!r} is not allowed: use {allowed}") from None


def _parse_numbers(given: dict[str, Any]) -> dict[str, int | float | None]:
    """Every numeric option of `say` / `batch` parsed from `given` (the command's arguments)."""
    return {key: _parse_number(key, given[key]) for key in _NUMBERS}


def _check_flags(flags: dict[str, Any], keys) -> None:
    """settings.check_setting on the flags given, as '--flag VALUE is not allowed: use ...'."""
    from .engine.errors import InvalidRequest

    for key in keys:
        value = flags.get(key)
        if value is None:
            continue
        if isinstance(value, str) and key == "quantize":
            value = flags[key] = value.strip().lower()
        try:
            flags[key] = st.check_setting(key, value)
        except st.SettingsError:
            raise InvalidRequest(f"{st.flag_name(key)} {value!r} is not allowed: use {st.allowed(key)}") from None


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

    def __init__(self, enabled: bool, label: str = "generating") -> None:
        self.enabled = enabled
        self.label = label
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
                TextColumn(self.label.replace("[", "\\[")),
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
    "Speak TEXT (or the text of -f FILE) and write it to an audio file, or to stdout with -o -.\n\n"
    "Files are 24 kHz mono: .wav and .flac as 16-bit PCM, .ogg as Vorbis. A file is written to a "
    "temporary file in the same folder and renamed, so it is never left partial.\n\n"
    "Long texts are spoken in chunks (--chunk-duration, --chunk-threshold); \\[pause 1.5s], "
    "\\[pause 500ms] and \\[pause] (0.5 s) insert silences. Line breaks are read as spaces.\n\n"
    "Voice cloning: --ref RECORDING with --ref-text (else the .txt file beside the recording), or "
    "--voice NAME|FILE (see `omnivoice voice`).\n\n"
    "Progress and a summary (path, audio length, time, real-time factor, seed) go to stderr.\n\n"
    "Exit codes: 0 ok; 1 runtime failure (model, checkpoint, writing); 2 bad usage or value; "
    "130 / 143 stopped by Ctrl-C / SIGTERM."
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
_MODEL_OPTION = typer.Option(
    None, "--model", envvar="OMNIVOICE_MODEL", metavar="ID|DIR", show_default=False,
    help=f"Hugging Face hub id or local checkpoint folder. Default: {st.DEFAULT_MODEL}.",
)
_THREADS_OPTION = _num("--threads", "N", "Torch CPU threads. Default: torch's default (the CPU cores).")
_QUANTIZE_OPTION = typer.Option(
    None, "--quantize", metavar="int8|none", show_default=False,
    help="int8: dynamic int8 weights for the model body (CPU only; the audio differs slightly from "
    "float32). Default: none.",
)
_COMPILE_OPTION = typer.Option(
    None, "--compile/--no-compile", show_default=False,
    help="torch.compile the layers' position-wise parts (slow first call; on CPU the default is faster). Default: off.",
)
# generation options shared by `say` and `batch`
_NUM_STEP_OPTION = _num("--num-step", "INT", f"Diffusion steps, 1..64. Default: {G['num_step']}.")
_GUIDANCE_SCALE_OPTION = _num(
    "--guidance-scale", "FLOAT", f"Classifier-free guidance, >= 0. Default: {G['guidance_scale']}."
)
_T_SHIFT_OPTION = _num("--t-shift", "FLOAT", f"Time-step shift, > 0. Default: {G['t_shift']}.")
_LAYER_PENALTY_OPTION = _num(
    "--layer-penalty-factor", "FLOAT", f"Codebook layer penalty, >= 0. Default: {G['layer_penalty_factor']}."
)
_POSITION_TEMPERATURE_OPTION = _num(
    "--position-temperature", "FLOAT",
    f"Position sampling temperature, >= 0 (0 = greedy). Default: {G['position_temperature']}.",
)  # fmt: skip
_CLASS_TEMPERATURE_OPTION = _num(
    "--class-temperature", "FLOAT",
    f"Token sampling temperature, >= 0 (0 = argmax). Default: {G['class_temperature']}.",
)  # fmt: skip
_DENOISE_OPTION = typer.Option(
    None, "--denoise/--no-denoise", show_default=False, help="Clean audio with a reference voice. Default: --denoise."
)
_SPEED_OPTION = _num("--speed", "FLOAT", "Speaking rate, > 0 (1.2 = faster). Default: 1.0.")
_CHUNK_DURATION_OPTION = _num(
    "--chunk-duration", "SECONDS",
    f"Speech per chunk of a long text, > 0. Default: {st.CHUNK_DEFAULTS['chunk_duration']:g}.",
)
_CHUNK_THRESHOLD_OPTION = _num(
    "--chunk-threshold", "SECONDS",
    f"Texts estimated longer than this are chunked, in (0, 30]. Default: {st.CHUNK_DEFAULTS['chunk_threshold']:g}.",
)


def _read_text_file(spec: str, quiet: bool) -> str:
    """The text of -f PATH (- reads stdin)."""
    from pathlib import Path

    from .engine.errors import InvalidRequest

    if spec == "-":
        return _read_stdin(quiet)
    p = Path(spec).expanduser()
    if not p.exists():
        raise InvalidRequest(f"text file '{spec}' does not exist")
    if p.is_dir():
        raise InvalidRequest(f"text file '{spec}' is a folder: give a text file")
    try:
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidRequest(f"text file '{spec}' is not UTF-8 text (bad byte at offset {e.start})") from None
    except OSError as e:
        raise OSError(e.errno, f"cannot read the text file '{spec}': {e.strerror or e}") from None


def _engine_notice(quiet: bool):
    def notice(msg: str) -> None:
        if not quiet:
            typer.echo(msg, err=True)

    return notice


class _Warnings:
    """Warnings on stderr, each once."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def __call__(self, warnings) -> None:
        for w in warnings:
            if w not in self.shown:
                _warn(w)
                self.shown.append(w)


@app.command(help=_SAY_HELP, no_args_is_help=True)
def say(
    ctx: typer.Context,
    text: Optional[str] = typer.Argument(
        None, metavar="TEXT", show_default=False, help="The text to speak; - reads stdin. Or give -f FILE."
    ),
    text_file: Optional[str] = typer.Option(
        None, "-f", "--text-file", metavar="PATH", show_default=False,
        help="Speak the whole text of this UTF-8 file (line breaks are read as spaces); - reads stdin.",
    ),
    output: Optional[str] = typer.Option(
        None, "-o", "--output", metavar="PATH", show_default=False,
        help=f"Audio file: .wav, .flac or .ogg; - writes WAV to stdout. Default: {st.DEFAULT_OUTPUT} "
        "(another extension when the preset sets format).",
    ),
    preset: Optional[str] = typer.Option(
        None, "--preset", metavar="NAME|FILE", show_default=False,
        help="Settings from a preset (see `omnivoice presets`) or a .toml file; flags override it.",
    ),
    model: Optional[str] = _MODEL_OPTION,
    lang: Optional[str] = typer.Option(
        None, "--lang", metavar="LANG",
        help="Language code or name, e.g. en or English (see `omnivoice languages`). Default: none.",
    ),
    instruct: Optional[str] = typer.Option(
        None, "--instruct", metavar="ITEMS",
        help="Voice design, e.g. \"female, low pitch\" (see `omnivoice instructs`). Default: auto voice.",
    ),
    ref: Optional[str] = typer.Option(
        None, "--ref", metavar="AUDIO", show_default=False,
        help="Clone the voice of this recording (3-10 s is best; any format libsndfile reads).",
    ),
    ref_text: Optional[str] = typer.Option(
        None, "--ref-text", metavar="TEXT", show_default=False,
        help="The words spoken in --ref. Default: the .txt file beside it (me.txt for me.wav).",
    ),
    voice: Optional[str] = typer.Option(
        None, "--voice", metavar="NAME|FILE", show_default=False,
        help="A saved voice (see `omnivoice voice list`) or a voice file (.safetensors, or a reference .pt prompt).",
    ),
    num_step: Optional[str] = _NUM_STEP_OPTION,
    guidance_scale: Optional[str] = _GUIDANCE_SCALE_OPTION,
    t_shift: Optional[str] = _T_SHIFT_OPTION,
    layer_penalty_factor: Optional[str] = _LAYER_PENALTY_OPTION,
    position_temperature: Optional[str] = _POSITION_TEMPERATURE_OPTION,
    class_temperature: Optional[str] = _CLASS_TEMPERATURE_OPTION,
    denoise: Optional[bool] = _DENOISE_OPTION,
    speed: Optional[str] = _SPEED_OPTION,
    duration: Optional[str] = _num(
        "--duration", "SECONDS",
        "Length of the speech, up to 30; overrides --speed; not with pause tags. Default: from the text.",
    ),
    chunk_duration: Optional[str] = _CHUNK_DURATION_OPTION,
    chunk_threshold: Optional[str] = _CHUNK_THRESHOLD_OPTION,
    seed: Optional[str] = _num("--seed", "INT", "Random seed, >= 0. Default: random (printed, to repeat the run)."),
    device: Optional[str] = _DEVICE_OPTION,
    dtype: Optional[str] = _DTYPE_OPTION,
    threads: Optional[str] = _THREADS_OPTION,
    quantize: Optional[str] = _QUANTIZE_OPTION,
    compile: Optional[bool] = _COMPILE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON report instead of the summary (stderr if -o -)."),
) -> None:  # fmt: skip
    t_start = time.perf_counter()
    import dataclasses

    from .engine.config import GenerationConfig
    from .engine.errors import InvalidRequest
    from .engine.pipeline import Request, validate_request
    from .output import check_output, write_audio

    # --- everything that needs no model: fail fast -------------------------------------------
    if text is not None and text_file is not None:
        raise _cx.UsageError("give the text either as TEXT or with -f/--text-file, not both", ctx)
    if text is None and text_file is None:
        raise _cx.UsageError("Missing argument 'TEXT': give the text to speak, - to read stdin, or -f FILE", ctx)
    if text_file is not None:
        text = _read_text_file(text_file, quiet)
    elif text == "-":
        text = _read_stdin(quiet)
    text = st.join_lines(text)
    flags = _parse_numbers(locals())
    flags.update(
        model=model, device=device, dtype=dtype, lang=lang, instruct=instruct, denoise=denoise,
        voice=voice, quantize=quantize, compile=compile,
    )  # fmt: skip
    _check_flags(flags, _CHECKED_FLAGS)
    if ref_text is not None and ref is None:
        raise InvalidRequest("--ref-text needs --ref, the recording it transcribes")
    if ref is not None and voice is not None:
        raise InvalidRequest("give either --ref (a recording) or --voice (a saved voice), not both")
    chosen = st.find_preset(preset) if preset is not None else None
    settings = st.resolve_settings(st.DEFAULTS, chosen.settings if chosen else None, flags)
    _check_choices(settings["device"], settings["dtype"])
    st.check_engine_options(settings)

    # the voice: a recording (encoded once the model is loaded) or a saved voice (read now)
    from . import voices

    shown = _Warnings()
    prompt = None
    ref_path = transcript = None
    voice_path = None
    if ref is not None:
        settings["voice"] = None  # --ref beats a preset's voice
        ref_path = voices.check_reference_file(ref)
        transcript = voices.reference_transcript(ref_path, ref_text)
        _, ref_warnings = voices.precheck_reference(ref_path, transcript)
        shown(ref_warnings)
    elif settings["voice"] is not None:
        from_preset = voice is None
        base = chosen.path.parent if from_preset and chosen is not None else None
        try:
            voice_path, prompt = voices.find_voice(settings["voice"], base)
        except InvalidRequest as e:
            if not from_preset:
                raise
            raise InvalidRequest(f"preset {chosen.name!r} sets voice {settings['voice']!r}: {e}") from None

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
        ref=prompt,
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
    shown(warnings)

    # --- the model -------------------------------------------------------------------------------
    from .engine.pipeline import Engine
    from .signals import HoldSignals, signal_name

    written = False
    chunks = 1
    signals = HoldSignals()
    try:
        with signals:
            t_load = time.perf_counter()
            engine = Engine.load(
                settings["model"], device=settings["device"], dtype=settings["dtype"],
                on_notice=_engine_notice(quiet), **st.engine_kwargs(settings),
            )  # fmt: skip
            t_gen = time.perf_counter()
            if ref_path is not None:
                prompt = engine.voice_from_audio(str(ref_path), transcript)
                shown(getattr(prompt, "warnings", ()))
                request = dataclasses.replace(request, ref=prompt)
            label = "generating"
            if hasattr(engine, "plan"):
                chunks = len(engine.plan(request).pieces)
                if chunks > 1:
                    label = f"generating {chunks} pieces"
            with _StepProgress(enabled=not quiet, label=label) as progress:
                [result] = engine.generate([request], on_step=progress)
            shown(result.warnings)
            with signals.protect():  # a Ctrl-C now waits until the file is complete
                try:
                    write_audio(result.audio, result.sample_rate, target, stdout=typer.get_binary_stream("stdout"))
                except BrokenPipeError:
                    raise
                except OSError as e:
                    where = "stdout" if target.to_stdout else str(target)
                    raise OSError(e.errno, f"cannot write {where}: {e.strerror or e}") from None
                written = True
    except KeyboardInterrupt as e:  # Stop (SIGINT / SIGTERM), or a KeyboardInterrupt of our own
        signum = int(getattr(e, "signum", signal.SIGINT))
        if written:
            _warn(f"stopped by {signal_name(signum)} after writing {target}")
        else:
            _error(f"stopped by {signal_name(signum)}; nothing was written")
        raise typer.Exit(128 + signum) from None
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
            "pieces": chunks,
            "ref": None if ref_path is None else str(ref_path),
            "ref_text": transcript,
            "voice_file": None if voice_path is None else str(voice_path),
            "settings": settings,
            "warnings": shown.shown,
        }
        typer.echo(json.dumps(report, ensure_ascii=False), err=target.to_stdout)
    elif not quiet:
        where = "stdout" if target.to_stdout else str(target)
        rtf_s = "n/a" if rtf is None else f"{rtf:.3f}"
        pieces = f" ({chunks} pieces)" if chunks > 1 else ""
        typer.echo(
            f"{where}: {audio_seconds:.2f} s of audio{pieces} in {seconds:.2f} s (RTF {rtf_s}; "
            f"model loaded in {t_gen - t_load:.1f} s), seed {result.seed}",
            err=True,
        )


_BATCH_HELP = (
    "Speak every line of INPUT into its own audio file in the folder -o.\n\n"
    "INPUT is a .txt file (one text per line) or a .jsonl file (one JSON object per line with "
    "\"text\" and optionally id, output, lang, instruct, voice, ref, ref_text, duration, "
    "speed, seed, num_step, guidance_scale, t_shift, layer_penalty_factor, position_temperature, "
    "class_temperature, denoise, chunk_duration, chunk_threshold, preset). Blank lines and lines "
    "starting with # are skipped.\n\n"
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
    model: Optional[str] = _MODEL_OPTION,
    lang: Optional[str] = typer.Option(None, "--lang", metavar="LANG", help="Language of every line. Default: none."),
    instruct: Optional[str] = typer.Option(
        None, "--instruct", metavar="ITEMS", help="Voice design of every line. Default: auto voice."
    ),
    voice: Optional[str] = typer.Option(
        None, "--voice", metavar="NAME|FILE", show_default=False,
        help="A saved voice or voice file for every line without its own ref or voice.",
    ),
    num_step: Optional[str] = _NUM_STEP_OPTION,
    guidance_scale: Optional[str] = _GUIDANCE_SCALE_OPTION,
    t_shift: Optional[str] = _T_SHIFT_OPTION,
    layer_penalty_factor: Optional[str] = _LAYER_PENALTY_OPTION,
    position_temperature: Optional[str] = _POSITION_TEMPERATURE_OPTION,
    class_temperature: Optional[str] = _CLASS_TEMPERATURE_OPTION,
    denoise: Optional[bool] = _DENOISE_OPTION,
    speed: Optional[str] = _SPEED_OPTION,
    duration: Optional[str] = _num(
        "--duration", "SECONDS", "Length of every line, up to 30; overrides --speed. Default: from the text."
    ),
    chunk_duration: Optional[str] = _CHUNK_DURATION_OPTION,
    chunk_threshold: Optional[str] = _CHUNK_THRESHOLD_OPTION,
    seed: Optional[str] = _num(
        "--seed", "INT", "Line i (0-based) uses SEED + i unless it has its own seed. Default: random per line."
    ),
    device: Optional[str] = _DEVICE_OPTION,
    dtype: Optional[str] = _DTYPE_OPTION,
    threads: Optional[str] = _THREADS_OPTION,
    quantize: Optional[str] = _QUANTIZE_OPTION,
    compile: Optional[bool] = _COMPILE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:  # fmt: skip
    from .engine.config import GenerationConfig
    from .engine.errors import InvalidRequest

    flags: dict[str, Any] = _parse_numbers(locals())
    flags.update(quantize=quantize, voice=voice)
    _check_flags(flags, [*_NUMBERS, "quantize", "voice"])
    if format is not None and format.lower().lstrip(".") not in st.FORMATS:
        raise InvalidRequest(f"--format {format!r} is not allowed: use {', '.join(st.FORMATS)}")
    flags.update(
        model=model, device=device, dtype=dtype, lang=lang, instruct=instruct, denoise=denoise,
        compile=compile, format=format.lower().lstrip(".") if format else None,
    )  # fmt: skip
    chosen = st.find_preset(preset) if preset is not None else None
    run = st.resolve_settings(st.DEFAULTS, chosen.settings if chosen else None, flags)
    _check_choices(run["device"], run["dtype"])
    st.check_engine_options(run)
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


voice_app = typer.Typer(
    help=(
        "Saved voices: add one from a recording, list, show, remove, or import a reference .pt prompt. "
        "`omnivoice say --voice NAME` speaks in a saved voice.\n\n"
        "Voices live in $OMNIVOICE_HOME/voices when OMNIVOICE_HOME is set, else "
        "$XDG_DATA_HOME/omnivoice/voices (~/.local/share/omnivoice/voices), one .safetensors file each."
    ),
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(voice_app, name="voice")


@voice_app.command("add", no_args_is_help=True)
def voice_add(
    name: str = typer.Argument(..., metavar="NAME", help="The voice's name: letters, digits, '-', '_', '.'."),
    ref: str = typer.Option(..., "--ref", metavar="AUDIO", show_default=False, help="The recording (3-10 s is best)."),
    ref_text: Optional[str] = typer.Option(
        None, "--ref-text", metavar="TEXT", show_default=False,
        help="The words spoken in it. Default: the .txt file beside it (alice.txt for alice.flac).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace a saved voice of the same name."),
    model: Optional[str] = _MODEL_OPTION,
    device: Optional[str] = _DEVICE_OPTION,
    dtype: Optional[str] = _DTYPE_OPTION,
    threads: Optional[str] = _THREADS_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:  # fmt: skip
    """Encode a recording and its transcript into a saved voice (needs the model's audio encoder)."""
    from . import voices

    flags: dict[str, Any] = {"threads": _parse_number("threads", threads)}
    _check_flags(flags, ["threads"])
    flags.update(model=model, device=device, dtype=dtype)
    settings = st.resolve_settings(st.DEFAULTS, None, flags)
    _check_choices(settings["device"], settings["dtype"])
    voices.check_new_name(name, force)
    path = voices.check_reference_file(ref)
    transcript = voices.reference_transcript(path, ref_text)
    shown = _Warnings()
    _, warnings = voices.precheck_reference(path, transcript)
    shown(warnings)

    from .engine.pipeline import Engine

    engine = Engine.load(
        settings["model"], device=settings["device"], dtype=settings["dtype"],
        on_notice=_engine_notice(quiet), **st.engine_kwargs(settings),
    )  # fmt: skip
    prompt = engine.voice_from_audio(str(path), transcript)
    shown(getattr(prompt, "warnings", ()))
    saved = voices.save(name, prompt, force=force, source=str(path.resolve()), model=settings["model"])
    if not quiet:
        seconds = prompt.codes.shape[-1] / 25.0
        typer.echo(f"voice {name!r}: {seconds:.2f} s of audio, transcript {prompt.text!r} -> {saved}", err=True)


@voice_app.command("import", no_args_is_help=True)
def voice_import(
    file: str = typer.Argument(..., metavar="FILE", help="A reference .pt prompt, or a .safetensors voice file."),
    name: Optional[str] = typer.Option(
        None, "--name", metavar="NAME", show_default=False, help="The voice's name. Default: the file's name."
    ),
    force: bool = typer.Option(False, "--force", help="Replace a saved voice of the same name."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Save a reference .pt prompt or a .safetensors voice file as a saved voice.

    A .pt prompt is one saved by the reference implementation's Python API (VoiceClonePrompt.save);
    it is read with torch.load(weights_only=True), which loads tensors and plain values only.
    """
    from pathlib import Path

    from . import voices
    from .engine.errors import InvalidRequest

    p = Path(file).expanduser()
    if name is None:
        name = p.stem if p.suffix.lower() in (voices.VOICE_SUFFIX, voices.PROMPT_SUFFIX) else p.name
        try:
            voices.check_name(name)
        except InvalidRequest:
            raise InvalidRequest(f"{file}: the file's name {name!r} cannot name a voice: give --name NAME") from None
    voices.check_new_name(name, force)
    if not p.exists():
        raise InvalidRequest(f"voice file '{file}' does not exist")
    if not p.is_file():
        raise InvalidRequest(f"voice file '{file}' is a folder, not a voice file")
    if p.suffix.lower() not in (voices.VOICE_SUFFIX, voices.PROMPT_SUFFIX):
        raise InvalidRequest(f"voice file '{file}' must end in .pt (a reference prompt) or .safetensors")
    prompt = voices.load_voice_file(p)
    meta = {"source": str(p.resolve()), "imported": "reference prompt" if p.suffix.lower() == ".pt" else "voice file"}
    if p.suffix.lower() == voices.VOICE_SUFFIX:
        from .engine.voice import read_voice_metadata

        old = read_voice_metadata(p)
        meta.update({k: old[k] for k in ("model", "source") if old.get(k)})
        meta["imported_from"] = str(p.resolve())
    saved = voices.save(name, prompt, force=force, **meta)
    if not quiet:
        seconds = prompt.codes.shape[-1] / 25.0
        typer.echo(f"voice {name!r}: {seconds:.2f} s of audio, transcript {prompt.text!r} -> {saved}", err=True)


@voice_app.command("list")
def voice_list() -> None:
    """List the saved voices: name, seconds of audio, date added, transcript."""
    from . import voices

    entries = voices.list_voices()
    out = typer.get_text_stream("stdout")
    width = max([len(e.name) for e in entries] + [4])
    for e in entries:
        if e.meta is None:
            out.write(f"{e.name:<{width}}  (broken: {e.error})\n")
            _warn(e.error)
            continue
        seconds = e.meta.get("seconds") or "?"
        created = (e.meta.get("created") or "").replace("T", " ").rstrip("Z")[:16] or "-"
        text = e.meta.get("text", "")
        if len(text) > 50:
            text = text[:47] + "..."
        out.write(f"{e.name:<{width}}  {seconds:>6} s  {created:<16}  {text}\n")
    if not entries:
        typer.echo(f"no saved voices yet ({voices.ADD_HINT})", err=True)
    typer.echo(f"voices: {voices.voice_dir()}", err=True)


@voice_app.command("show", no_args_is_help=True)
def voice_show(
    spec: str = typer.Argument(..., metavar="NAME|FILE", help="A saved voice's name or a voice file."),
) -> None:
    """Print what a saved voice holds: transcript, length, source recording, model, date."""
    from . import voices

    path = voices.resolve_voice(spec)
    info = voices.describe(path)
    out = typer.get_text_stream("stdout")
    width = max(len(k) for k in info)
    for key, value in info.items():
        out.write(f"{key + ':':<{width + 1}} {value}\n")


@voice_app.command("rm", no_args_is_help=True)
def voice_rm(
    names: list[str] = typer.Argument(..., metavar="NAME...", help="Saved voices to delete."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Delete saved voices (every name must exist; nothing is deleted otherwise)."""
    from . import voices

    paths = [voices.find_saved(name) for name in names]  # all known, before deleting any
    for name, path in zip(names, paths):
        path.unlink(missing_ok=True)
        if not quiet:
            typer.echo(f"removed voice {name!r} ({path})", err=True)


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
