"""`omnivoice say`: speak one text into one audio file (or stdout)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any, Optional

import typer

from .. import settings as st
from ..engine.errors import InvalidRequest
from ..options import HARDWARE_SETTINGS, NO_FLAGS, PRESET_OPTION, QUIET_OPTION, SPEECH_SETTINGS, with_settings
from ..helpfmt import BARE
from ..progress import StepProgress
from ..session import WarnOnce
from .common import echo, error, load_engine, run_settings, usage_error, warn

HELP = """Speak TEXT (or the text of -f FILE): play it, or write it to a file (-o), or to stdout (-o -).

Without -o the speech is played as it is made (--play also plays while writing -o). Files are
24 kHz mono, in the format of their extension (wav, flac, ogg, opus, mp3, raw), written to a
temporary file and renamed, so never left partial; --stream sends stdout's audio piece by piece.
Long texts are spoken in chunks; [pause 1.5s], [pause 500ms] and [pause] insert silences;
[laughter], [sigh] and the other tags of `omnivoice tags` are spoken as sounds.

Progress and a summary (path, audio length, time, real-time factor, seed) go to stderr. Exit
codes: 0 ok; 1 runtime failure; 2 bad usage or value; 130 / 143 stopped by Ctrl-C / SIGTERM."""

EXAMPLES = """
omnivoice say Hello world
omnivoice say Good evening --instruct "female, low pitch" -o out.flac
omnivoice say -f chapter.txt --voice alice --stream -o - | ffplay -nodisp -i -
echo "Text from a pipe" | omnivoice say -o out.wav
"""

MAX_TEXT_BYTES = 10 * 1024 * 1024  # what -f / stdin read at most (about 3 hours of speech)


def _read_limited(stream: Any, what: str) -> str:
    """Read at most MAX_TEXT_BYTES of UTF-8 text from a binary stream (InvalidRequest beyond)."""
    data = stream.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise InvalidRequest(f"{what} is over {MAX_TEXT_BYTES / 2**20:g} MiB: split it into several texts")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidRequest(f"{what} is not UTF-8 text (bad byte at offset {e.start}): give text, "
                             "not binary data") from None  # fmt: skip


def read_stdin(quiet: bool) -> str:
    stream = typer.get_binary_stream("stdin")
    if stream.isatty() and not quiet:
        echo("Reading the text from stdin (end with Ctrl-D) ...")
    return _read_limited(stream, "the text on stdin")


def stdin_is_piped() -> bool:
    """Whether stdin is a pipe or a file (not a terminal, and open): then, without TEXT or -f,
    the text is read from it, as piper and macOS `say` do."""
    try:
        return not typer.get_binary_stream("stdin").isatty()
    except (AttributeError, OSError, ValueError, RuntimeError):  # no stdin at all (closed, or None)
        return False


def read_text_file(spec: str, quiet: bool) -> str:
    """The text of -f PATH (- reads stdin)."""
    if spec == "-":
        return read_stdin(quiet)
    p = Path(spec).expanduser()
    if not p.exists():
        raise InvalidRequest(f"text file '{spec}' does not exist")
    if p.is_dir():
        raise InvalidRequest(f"text file '{spec}' is a folder: give a text file")
    try:
        with open(p, "rb") as f:
            return _read_limited(f, f"text file '{spec}'")
    except OSError as e:
        raise OSError(e.errno, f"cannot read the text file '{spec}': {e.strerror or e}") from None


def the_text(ctx: typer.Context, words: list[str] | None, text_file: str | None, quiet: bool) -> str:
    """TEXT (words joined, as macOS `say` does; - reads stdin) or the text of -f FILE; without
    either, a piped stdin (`echo Hello | omnivoice say -o hi.wav`)."""
    if words and text_file is not None:
        raise usage_error("give the text either as TEXT or with -f/--text-file, not both", ctx)
    if not words and text_file is None:
        piped = st.join_lines(read_stdin(quiet)) if stdin_is_piped() else ""
        if piped:
            return piped
        if ctx.meta.get(BARE):  # `omnivoice say </dev/null`: nothing at all, so the help as before
            raise _no_args_is_help(ctx)
        raise usage_error("Missing argument 'TEXT': give the text to speak, - to read stdin, or -f FILE", ctx)
    if text_file is not None:
        return st.join_lines(read_text_file(text_file, quiet))
    if words == ["-"]:
        return st.join_lines(read_stdin(quiet))
    text = " ".join(words)
    if len(words) == 1 and _is_file(text):
        warn(f"'{text}' is the name of a file: speaking the name itself (to speak the file's text, give -f {text})")
    return st.join_lines(text)


def _no_args_is_help(ctx: typer.Context) -> Exception:
    try:  # typer >= 0.2x vendors its own click
        from typer._click.exceptions import NoArgsIsHelpError
    except ImportError:
        from click.exceptions import NoArgsIsHelpError
    return NoArgsIsHelpError(ctx)


def _is_file(text: str) -> bool:
    try:
        return len(text) < 4096 and Path(text).expanduser().is_file()
    except (OSError, ValueError):  # a name too long for the system, a NUL
        return False


def _target(output: str | None, settings: st.Resolved):
    """Where the audio goes: None (the player), stdout or a file. A file's format is its
    extension's; --format, when given as a flag, must agree with it; stdout takes the format."""
    from ..output import check_output

    if output is None:
        return None
    flagged = settings.source("format").kind == "flag"
    target = check_output(output, settings["format"] if (flagged or output == "-") else None)
    settings.values["format"] = target.audio_format.name
    if target.to_stdout and typer.get_binary_stream("stdout").isatty():
        raise InvalidRequest("-o - writes binary audio to stdout, which is a terminal: redirect it or pipe it")
    return target


def _speak(built: Any, refs: Any, target: Any, settings: st.Resolved, quiet: bool, shown: WarnOnce,
           subtitles: Any = None) -> dict:  # fmt: skip
    """Load the model, generate, write. Returns timings and the result; a stop raises Stop."""
    from ..engine.pipeline import plan_request
    from ..signals import HoldSignals

    timing: dict[str, Any] = {"written": False}
    with HoldSignals() as signals:
        try:
            engine, timing["load"] = load_engine(settings, quiet)
            request, timing["voice"] = prepare_voice(engine, built, refs, quiet)
            shown(getattr(request.ref, "warnings", ()) if built.reference else ())
            t_gen = time.perf_counter()
            timing["pieces"] = pieces = len(plan_request(request).pieces)
            label = f"generating {pieces} pieces" if pieces > 1 else "generating"
            with StepProgress(enabled=not quiet, label=label, total=forwards(engine, [request])) as progress:
                [result] = engine.generate([request], on_step=progress)
            shown(result.warnings)
            with signals.protect():  # a Ctrl-C now waits until the file is complete
                if subtitles is not None:  # --subtitles: written just before the audio
                    from ..cues import write_result_subtitles

                    write_result_subtitles(subtitles, result, request.text)
                _write(result, target)
                timing["written"] = True
        except KeyboardInterrupt as e:  # Stop (SIGINT / SIGTERM), or a KeyboardInterrupt of our own
            _stopped(int(getattr(e, "signum", signal.SIGINT)), timing["written"], target)
    timing.update(generate=time.perf_counter() - t_gen, audio=result.audio, sample_rate=result.sample_rate,
                  seed=result.seed)  # fmt: skip
    return timing


def prepare_voice(engine: Any, built: Any, refs: Any, quiet: bool) -> tuple[Any, float | None]:
    """The engine request of `built` with its recording encoded (the encoder loaded first), and
    the seconds that took: the summary's "voice prepared in", apart from "model loaded in"
    (None: no recording to encode; a saved voice is read before the model loads)."""
    from ..progress import status
    from ..request import finish_request

    if built.reference is None:
        return built.request, None
    t0 = time.perf_counter()
    with status(f"preparing the voice of {built.reference.path} ...", enabled=not quiet):
        engine.load_encoder()
        request = finish_request(engine, built, refs)
    return request, time.perf_counter() - t0


def forwards(engine: Any, requests: list) -> int | None:
    """The forwards generating `requests` takes, for a bar whose total never changes (None from
    an engine that cannot tell, e.g. a test's stand-in: the bar then takes the engine's totals)."""
    count = getattr(engine, "count_forwards", None)
    return count(requests) if count is not None else None


def report_settings(values: dict) -> dict:
    """Settings as a --json report gives them: `speed` as used, 1.0 (the normal rate) when none
    was given, and None when --duration sets the length (the speed is then ignored)."""
    out = dict(values)
    if out.get("duration") is not None:
        out["speed"] = None
    elif out.get("speed") is None and "speed" in out:
        out["speed"] = 1.0
    return out


def _write(result: Any, target: Any) -> None:
    """The audio into its file, or every byte of it to stdout (a reader that goes away is an error)."""
    from ..engine.errors import OmniVoiceError
    from ..output import StreamClosed, quiet_stdout, write_audio

    try:
        stdout = typer.get_binary_stream("stdout") if target.to_stdout else None  # stdout may be closed
        write_audio(result.audio, result.sample_rate, target, stdout=stdout)
    except StreamClosed as e:
        quiet_stdout()
        raise OmniVoiceError(f"stdout: {e.strerror}") from None
    except OSError as e:
        where = "stdout" if target.to_stdout else str(target)
        raise OSError(e.errno, f"cannot write {where}: {e.strerror or e}") from None


def _stopped(signum: int, written: bool, target: Any) -> None:
    from ..signals import signal_name

    if written:
        warn(f"stopped by {signal_name(signum)} after writing {target}")
    else:
        error(f"stopped by {signal_name(signum)}; nothing was written")
    raise typer.Exit(128 + signum)


def _report(built: Any, target: Any, timing: dict, t_start: float, json_out: bool, quiet: bool, shown: WarnOnce):
    audio_seconds = len(timing["audio"]) / timing["sample_rate"]
    seconds = timing["generate"]
    rtf = seconds / audio_seconds if audio_seconds > 0 else None
    where = "the player" if target is None else "stdout" if target.to_stdout else str(target)
    first = timing.get("first")
    if json_out:
        report = {
            "path": None if target is None else str(target), "played": timing.get("played", False),
            "format": None if target is None else target.audio_format.name, "sample_rate": timing["sample_rate"],
            "audio_seconds": round(audio_seconds, 4), "seconds": round(seconds, 4),
            "first_audio_seconds": None if first is None else round(first, 4),
            "load_seconds": round(timing["load"], 4),
            "voice_seconds": None if timing.get("voice") is None else round(timing["voice"], 4),
            "total_seconds": round(time.perf_counter() - t_start, 4),
            "rtf": None if rtf is None else round(rtf, 4), "seed": timing["seed"], "pieces": timing["pieces"],
            "ref": None if built.reference is None else str(built.reference.path),
            "ref_text": None if built.reference is None else built.reference.transcript,
            "voice_file": None if built.voice_file is None else str(built.voice_file),
            "settings": report_settings(built.settings.values), "warnings": shown.shown,
            "subtitles": None if timing.get("subtitles") is None else str(timing["subtitles"]),
        }  # fmt: skip
        typer.echo(json.dumps(report, ensure_ascii=False), err=target is not None and target.to_stdout)
    elif not quiet:
        rtf_s = "n/a" if rtf is None else f"{rtf:.3f}"
        pieces = f" ({timing['pieces']} pieces)" if timing["pieces"] > 1 else ""
        first_s = "" if first is None else f"; first audio after {first:.2f} s"
        voice_s = "" if timing.get("voice") is None else f", voice prepared in {timing['voice']:.1f} s"
        echo(f"{where}: {audio_seconds:.2f} s of audio{pieces} in {seconds:.2f} s (RTF {rtf_s}{first_s}; "
             f"model loaded in {timing['load']:.1f} s{voice_s}), seed {timing['seed']}")  # fmt: skip


def _dry_run(built: Any, json_out: bool) -> None:
    from ..dryrun import describe, render

    report = describe(built)
    out = typer.get_text_stream("stdout")
    out.write(json.dumps(report, ensure_ascii=False) + "\n" if json_out else render(report))


@with_settings(*SPEECH_SETTINGS, "ref", "ref_text", *HARDWARE_SETTINGS)
def say(
    ctx: typer.Context,
    text: Optional[list[str]] = typer.Argument(
        None, metavar="TEXT", show_default=False,
        help="The text to speak (the words of the command line); - reads stdin, as does a pipe without TEXT.",
    ),
    text_file: Optional[str] = typer.Option(
        None, "-f", "--text-file", metavar="PATH", show_default=False, rich_help_panel="Input",
        help="Speak the whole text of this UTF-8 file (line breaks are read as spaces); - reads stdin.",
    ),
    preset: Optional[str] = PRESET_OPTION,
    output: Optional[str] = typer.Option(
        None, "-o", "--output", metavar="PATH", show_default=False, rich_help_panel="Output",
        help="Audio file (.wav .flac .ogg .opus .mp3 .raw); - writes to stdout (--format, default wav). "
        "Default: play it.",
    ),
    play: bool = typer.Option(False, "--play", rich_help_panel="Output", help="Play it as it is made (also with -o)."),
    stream: bool = typer.Option(
        False, "--stream", rich_help_panel="Output",
        help="Cut at sentences and send each piece as soon as it is ready (with -o -: progressive stdout).",
    ),
    json_out: bool = typer.Option(
        False, "--json", rich_help_panel="Output", help="A JSON report instead of the summary (stderr if -o -).",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", rich_help_panel="Output",
        help="Load no model: print what would be spoken (text, language, pieces, settings and their source).",
    ),
    quiet: bool = QUIET_OPTION,
    # -- subtitles and dialogue (issue 15: cues.py, commands/dialogue.py) --
    subtitles: Optional[str] = typer.Option(
        None, "--subtitles", metavar="FILE", show_default=False, rich_help_panel="Output",
        help="Also write subtitles (.srt or .vtt) at the pieces' real times: cues of at most 2 lines of 42 "
        "characters and about 7 s, cut at sentences and clauses.",
    ),
    cast: Optional[list[str]] = typer.Option(
        None, "--cast", metavar="NAME=VOICE", show_default=False, rich_help_panel="Voice",
        help="Speak a script of 'NAME: text' lines, NAME in this voice: a saved voice, a voice file, "
        "instruct:ITEMS or auto (once per speaker).",
    ),
    gap: Optional[float] = typer.Option(
        None, "--gap", metavar="SECONDS", show_default=False, rich_help_panel="Voice",
        help="Silence between the lines of a --cast script. Default: 0.3.",
    ),
    flags: dict = NO_FLAGS,
) -> None:  # fmt: skip
    """Speak TEXT (or the text of -f FILE) into an audio file, or to stdout with -o -."""
    from ..request import References, Voices, build_request

    if cast:  # a dialogue script (commands/dialogue.py)
        from .dialogue import say_dialogue

        return say_dialogue(ctx, text, text_file, preset, flags, cast, gap, output, subtitles, json_out, quiet,
                            dry_run=dry_run, play=play or output is None)  # fmt: skip
    if gap is not None:
        raise usage_error("--gap sets the silence between the lines of a dialogue: give --cast too", ctx)
    t_start = time.perf_counter()
    text_value = the_text(ctx, text, text_file, quiet)
    _, settings = run_settings(preset, flags)
    refs = References()
    built = build_request(text_value, settings, refs=refs, voices=Voices())
    shown = WarnOnce(warn)
    shown(built.warnings)
    if dry_run:
        _dry_run(built, json_out)
        return
    target = _target(output, settings)
    subtitles_path = _subtitles_path(subtitles)
    play = play or target is None
    if play or stream:  # the streamed render (commands/stream.py)
        from .stream import check_streamable, speak_streamed

        check_streamable(target, play)
        timing = speak_streamed(built, refs, target, settings, quiet, play, subtitles_path)
        timing["played"] = play
    else:
        timing = _speak(built, refs, target, settings, quiet, shown, subtitles_path)
    timing["subtitles"] = subtitles_path
    _report(built, target, timing, t_start, json_out, quiet, shown)


say.reads_stdin = stdin_is_piped  # type: ignore[attr-defined]  # HelpCommand: `echo Hi | omnivoice say` speaks


def _subtitles_path(spec: Optional[str]) -> Any:
    from ..cues import check_subtitles_path

    return None if spec is None else check_subtitles_path(spec)
