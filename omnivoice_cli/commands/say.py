"""`omnivoice say`: speak one text into one audio file (or stdout).

The app layer is imported inside the functions that run it: `omnivoice say --help` reads only
the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import typer

from ..app.settings.setting import LISTENING, MACHINE, VOICE_DETAILS
from ..app.settings.values import join_lines
from ..engine.errors import InvalidRequest
from ..media.formats import usual_extensions
from ..ui.helpfmt import BARE, MORE, click_exceptions
from ..ui.messages import echo, pace, usage_error, warn
from ..ui.options import (
    HARDWARE_SETTINGS,
    LISTEN_SETTINGS,
    MARK_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    SPEECH_SETTINGS,
    dry_run_option,
    json_option,
    output_option,
    with_settings,
    words_file_option,
)
from ..ui.text import visible

# After MORE: the details, shown by --help-all (ui/helpfmt.py).
HELP = f"""Speak TEXT (or the text of -f FILE): play it, or write it to a file (-o), or to stdout (-o -).
{MORE}
Without -o the speech is played as it is made (--play also plays while writing -o). Files are
24 kHz mono, in the format of their extension ({usual_extensions()}), written to a
temporary file and renamed, so never left partial; --stream sends stdout's audio piece by piece.
Long texts are spoken in chunks; [pause 1.5s], [pause 500ms] and [pause] insert silences;
[laughter], [sigh] and the other tags of `omnivoice tags` are spoken as sounds.

Progress and a summary (path, audio length, time, the seconds taken per second of audio, seed,
the path taken: int8 or not, the steps, the step cache) go to stderr. Exit
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
        raise InvalidRequest(
            f"{what} is not UTF-8 text (bad byte at offset {e.start}): give text, not binary data"
        ) from None


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
    either, a piped stdin (`echo Hello | omnivoice say -o hi.wav`). The text keeps its line
    breaks: `--markdown` reads them (request.spoken_text joins the lines after)."""
    if words and text_file is not None:
        raise usage_error("give the text either as TEXT or with -f/--text-file, not both", ctx)
    if text_file is not None:
        return read_text_file(text_file, quiet)
    if not words:
        piped = read_stdin(quiet) if stdin_is_piped() else ""
        if join_lines(piped):
            return piped
        if ctx.meta.get(BARE):  # `omnivoice say </dev/null`: nothing at all, so the help as before
            raise _no_args_is_help(ctx)
        raise usage_error("Missing argument 'TEXT': give the text to speak, - to read stdin, or -f FILE", ctx)
    if words == ["-"]:
        return read_stdin(quiet)
    text = " ".join(words)
    if len(words) == 1 and _is_file(text):
        warn(f"'{text}' is the name of a file: speaking the name itself (to speak the file's text, give -f {text})")
    return text


def _no_args_is_help(ctx: typer.Context) -> Exception:
    return click_exceptions.NoArgsIsHelpError(ctx)


def _markdown_file(text_file: str | None) -> bool:
    """A -f file named like Markdown (.md, .markdown)."""
    return text_file is not None and Path(text_file).suffix.lower() in (".md", ".markdown", ".mdown")


def _is_file(text: str) -> bool:
    try:
        return len(text) < 4096 and Path(text).expanduser().is_file()
    except (OSError, ValueError):  # a name too long for the system, a NUL
        return False


def script_text(ctx: Any, words: list[str] | None, text_file: str | None, quiet: bool) -> tuple[str, str]:
    """The text of a dialogue script with its line breaks, and how messages name it."""
    if words and text_file is not None:
        raise usage_error("give the text either as TEXT or with -f/--text-file, not both", ctx)
    if text_file is not None:
        return read_text_file(text_file, quiet), ("stdin" if text_file == "-" else text_file)
    if not words:
        raise usage_error("Missing argument 'TEXT': give the script, - to read stdin, or -f FILE", ctx)
    if words == ["-"]:
        return read_stdin(quiet), "stdin"
    return " ".join(words), "the text"


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _report(report: Any, t_start: float, json_out: bool, quiet: bool) -> None:
    """The summary line on stderr, or the --json report (speakrun.SpeechReport)."""
    from ..app.say.speak import report_settings

    target, ref, rtf, first = report.target, report.reference, report.rtf, report.first_audio_seconds
    if json_out:
        data = {
            "path": None if target is None else str(target),
            "played": report.played,
            "format": None if target is None else target.audio_format.name,
            "sample_rate": report.sample_rate,
            "audio_seconds": round(report.audio_seconds, 4),
            "seconds": round(report.seconds, 4),
            "first_audio_seconds": _rounded(first),
            "load_seconds": round(report.load_seconds, 4),
            "voice_seconds": _rounded(report.voice_seconds),
            "total_seconds": round(time.perf_counter() - t_start, 4),
            "rtf": _rounded(rtf),  # seconds taken per second of audio
            "ran": report.ran,  # the path taken, resolved (int8, the steps, the step cache); null: a server's
            "seed": report.seed,
            "pieces": report.pieces,
            "ref": None if ref is None or ref.design is not None else str(ref.path),
            "ref_text": None if ref is None or ref.design is not None else ref.transcript,
            "ref_text_source": None if ref is None or ref.design is not None else ref.transcript_source,
            "voice_file": None if report.voice_file is None else str(report.voice_file),
            "voice_prompt": report.voice_prompt,
            "settings": report_settings(report.settings.values),
            "warnings": list(report.warnings),
            "subtitles": None if report.subtitles is None else str(report.subtitles),
            **({} if report.verify is None else {"verify": report.verify}),
            **({} if report.loudness is None else {"loudness": report.loudness}),
            **({} if report.cache is None else {"cache": report.cache}),  # say --cache: hit or miss
        }
        typer.echo(json.dumps(data, ensure_ascii=False), err=target is not None and target.to_stdout)
    elif not quiet:
        from ..app.say.speakrun import path_words

        pieces = f" ({report.pieces} pieces)" if report.pieces > 1 else ""
        first_s = "" if first is None else f"; first audio after {first:.2f} s"
        voice_s = "" if report.voice_seconds is None else f", voice prepared in {report.voice_seconds:.1f} s"
        ran = "" if report.ran is None else f"; {path_words(report.ran)}"
        if report.cache == "hit":  # say --cache: no model, the file written from the phrase cache
            echo(f"{report.where}: {report.audio_seconds:.2f} s of audio from the phrase cache, seed {report.seed}")
            return
        echo(
            f"{report.where}: {report.audio_seconds:.2f} s of audio{pieces} in {report.seconds:.2f} s ({pace(rtf)}"
            f"{first_s}; model loaded in {report.load_seconds:.1f} s{voice_s}), seed {report.seed}{ran}"
        )


def _dry_run(built: Any, json_out: bool, streamed: bool = False) -> None:
    from ..app.dryrun import describe, dry_run_text

    report = describe(built, streamed)
    out = typer.get_text_stream("stdout")  # the text may come from a file (-f): its controls made visible
    out.write(json.dumps(report, ensure_ascii=False) + "\n" if json_out else visible(dry_run_text(report), lines=True))


@with_settings(*SPEECH_SETTINGS, "sample_rate", "ref", "ref_text", *HARDWARE_SETTINGS, *LISTEN_SETTINGS, *MARK_SETTINGS)
def say(
    ctx: typer.Context,
    text: Optional[list[str]] = typer.Argument(
        None,
        metavar="TEXT",
        show_default=False,
        rich_help_panel="Input",
        help="The text to speak; - or a pipe reads stdin.",
    ),
    text_file: Optional[str] = typer.Option(
        None,
        "-f",
        "--text-file",
        metavar="PATH",
        show_default=False,
        rich_help_panel="Input",
        help="Speak this UTF-8 file's text; - reads stdin.",
    ),
    preset: Optional[str] = PRESET_OPTION,
    output: Optional[str] = output_option(f"Audio file ({usual_extensions()}), - for stdout. Default: play it."),
    play: bool = typer.Option(False, "--play", rich_help_panel="Output", help="Play it as it is made (also with -o)."),
    stream: bool = typer.Option(
        False,
        "--stream",
        rich_help_panel="Output",
        help="Send each sentence as it is ready (-o - too).",
    ),
    json_out: bool = json_option("A JSON report in place of the summary."),
    dry_run: bool = dry_run_option("Show what would be spoken and how; no model."),
    quiet: bool = QUIET_OPTION,
    # -- subtitles and dialogue (issue 15: cues.py, commands/dialogue.py) --
    subtitles: Optional[str] = typer.Option(
        None,
        "--subtitles",
        metavar="FILE",
        show_default=False,
        rich_help_panel="Output",
        help="Also write timed subtitles (.srt or .vtt).",
    ),
    words_file: Optional[str] = words_file_option(
        "Also write when each word is spoken (JSON), heard by the speech recogniser."
    ),
    subtitle_level: str = typer.Option(
        "line",
        "--subtitle-level",
        metavar="line|word",
        rich_help_panel=LISTENING,
        help="--subtitles cues: line, or word (VTT with each word's time, from the speech recogniser).",
    ),
    cast: Optional[list[str]] = typer.Option(
        None,
        "--cast",
        metavar="NAME=VOICE",
        show_default=False,
        rich_help_panel="Voice",
        help="NAME's voice in a 'NAME: text' script: a saved voice, a voice file, instruct:ITEMS or auto.",
    ),
    gap: Optional[float] = typer.Option(
        None,
        "--gap",
        metavar="SECONDS",
        show_default=False,
        rich_help_panel=VOICE_DETAILS,
        help="Silence between the lines of a --cast script. Default: 0.3.",
    ),
    server: Optional[str] = typer.Option(
        None,
        "--server",
        metavar="URL",
        show_default=False,
        rich_help_panel=MACHINE,
        help="Speak on a running `omnivoice serve` at URL (a warm model; also OMNIVOICE_SERVER): the same "
        "audio as here, written or played here.",
    ),
    ssml: bool = typer.Option(
        False,
        "--ssml",
        rich_help_panel="Input",
        help="SSML input (auto when it starts with <speak).",
    ),
    cache: bool = typer.Option(
        False,
        "--cache",
        rich_help_panel=MACHINE,
        help="Keep the file in the phrase cache and write it from there when the same request comes again "
        "(no model load); without --seed, the seed comes from the text and voice. `omnivoice cache` shows it.",
    ),
    flags: dict = NO_FLAGS,
) -> None:
    """Speak TEXT (or the text of -f FILE) into an audio file, or to stdout with -o -."""
    from ..app.request import References, Voices, build_request
    from ..app.say.remote import RemoteRun, check_remote, server_url
    from ..app.say.speak import check_cacheable, check_streamable, output_target, phrase_cache, speech_run
    from ..app.say.speakrun import Speech
    from ..app.session import WarnOnce, hardware_from_settings
    from ..app.ssml.parse import is_ssml
    from ..media.lock import output_lock
    from .common import held, run_session, run_settings, stdout_is_terminal
    from .dialogue import say_dialogue
    from .sayssml import ssml_built

    t_start = time.perf_counter()
    url = None if dry_run else server_url(server)
    if cast and url is not None:
        raise usage_error("--cast cannot go with --server: a dialogue script is spoken here", ctx)
    if cast:  # a dialogue script (commands/dialogue.py), unless SSML whose <voice> names the cast
        script, name = script_text(ctx, text, text_file, quiet)
        ssml = ssml or is_ssml(script)
    if cast and not ssml:
        given = (script, name, preset, flags, cast, gap, output, subtitles, json_out, quiet, t_start)
        return say_dialogue(*given, dry_run=dry_run, play=play or output is None)
    if gap is not None:
        raise usage_error("--gap sets the silence between the lines of a dialogue: give --cast too", ctx)
    text_value = script if cast else the_text(ctx, text, text_file, quiet)
    ssml = ssml or is_ssml(text_value)
    _, settings = run_settings(preset, flags)
    if _markdown_file(text_file) and not settings["markdown"] and not quiet:
        warn(f"'{text_file}' looks like Markdown: add --markdown to read it as its words (headings, lists, no code)")
    refs = References()
    voice = None
    if url is not None:  # the model, the machine and the voices are the server's (app/say/remote.py)
        check_remote(settings, subtitles=subtitles is not None, words=words_file is not None)
        voice, settings = settings["voice"], settings.with_values({"voice": None})
    if ssml:  # its parts (commands/sayssml.py): one is spoken as any text, several as a dialogue here
        shown_as = (dry_run, json_out, stream, output, subtitles, quiet, t_start, play or output is None)
        built = ssml_built(text_value, settings, refs, cast, url is not None, *shown_as)
        if built is None:
            return
    else:
        built = build_request(text_value, settings, refs=refs, voices=Voices(), phrase_seed=cache)
    heard(built.reference, quiet)
    (shown := WarnOnce(warn))(built.warnings)
    if dry_run:
        _dry_run(built, json_out, streamed=stream)
        return
    if output is None and not play and not json_out:
        check_stdout_not_a_file()
    target = output_target(output, settings, stdout_is_terminal)
    words_path = _words_options(ctx, words_file, subtitle_level, subtitles, play or stream or target is None)
    if url is None:  # through a server, its recogniser checks (--verify)
        check_listening(settings, words_path is not None or subtitle_level == "word", "--words / --subtitle-level word")
    speech = Speech(
        built,
        refs,
        target,
        hardware_from_settings(settings.values),
        _subtitles_path(subtitles),
        play=play or target is None,
        stream=stream,
        words=words_path,
        subtitle_level=subtitle_level,
        cache=phrase_cache(warn) if cache else None,
    )
    check_cacheable(speech, url)
    if speech.streamed:  # the streamed render (speakstream.StreamedRun)
        check_streamable(target)
    session = run_session(quiet)
    run = (
        speech_run(speech, session, shown) if url is None else RemoteRun(speech, text_value, url, voice, session, shown)
    )
    with output_lock(None if target is None else target.path):  # one run at a time on a file
        _report(held(run), t_start, json_out, quiet)


say.reads_stdin = stdin_is_piped  # HelpCommand: `echo Hi | omnivoice say` speaks


def check_stdout_not_a_file() -> None:
    """`say Hello > out.wav`: without -o the audio is played and nothing goes to stdout, so the
    file would be left empty. Refused before the model loads (a usage error), when stdout is a
    regular file; a pipe, /dev/null and a terminal are left alone, as are --json (its report is
    stdout's) and --play (played on purpose)."""
    import os
    import stat
    import sys

    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # no real stdout (a test runner's, closed)
        return
    if stat.S_ISREG(mode):
        raise InvalidRequest(
            "stdout is redirected to a file, but without -o the audio is played and nothing is written there: "
            "did you mean -o - (the audio on stdout) or -o FILE? (--play plays it anyway)"
        )


def check_listening(settings: Any, words: bool, words_flag: str) -> None:
    """The speech recogniser of --verify and --words can be had (the asr extra, the model on disk
    when offline): checked before the TTS model loads, so nothing is generated in vain."""
    from ..app.listening import listen

    if settings["verify"]:
        listen.check_recogniser(settings["asr_model"], "--verify")
    if words:
        listen.check_recogniser(settings["asr_model"], words_flag)


def heard(reference: Any, quiet: bool) -> None:
    """A --ref transcribed by the speech recogniser: its words, shown."""
    if reference is not None and reference.transcript_source == "asr" and not quiet:
        echo(f"--ref: transcribed as {json.dumps(reference.transcript, ensure_ascii=False)}")


def _words_options(ctx: Any, words_file: Optional[str], level: str, subtitles: Optional[str], streamed: bool) -> Any:
    """--words FILE.json and --subtitle-level, checked before the model loads."""
    if level not in ("line", "word"):
        raise usage_error(f"--subtitle-level must be line or word, got {level!r}", ctx)
    if streamed and (words_file is not None or level == "word"):
        raise usage_error(
            "--words and --subtitle-level word time the whole render: give -o FILE without --stream or --play", ctx
        )
    if level == "word" and (subtitles is None or not subtitles.lower().endswith(".vtt")):
        raise usage_error("--subtitle-level word needs --subtitles FILE.vtt (SRT has no word times)", ctx)
    return words_path(ctx, words_file)


def words_path(ctx: Any, words_file: Optional[str]) -> Any:
    """--words FILE.json (say, dub): a JSON file's path, checked before the model loads."""
    if words_file is None:
        return None
    path = Path(words_file).expanduser()
    if path.suffix.lower() != ".json":
        raise usage_error(f"--words writes JSON: give a .json file name, got {words_file!r}", ctx)
    if path.is_dir():
        raise usage_error(f"--words {words_file!r} is a folder", ctx)
    return path


def _subtitles_path(spec: Optional[str]) -> Any:
    from ..media.subtitles import check_subtitles_path

    return None if spec is None else check_subtitles_path(spec)
