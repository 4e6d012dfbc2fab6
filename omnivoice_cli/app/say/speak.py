"""Speaking one text, or one dialogue script, into a file, stdout and/or the player: the runs
under `omnivoice say`, free of typer and rich (the command passes its printers in: a session.Session).

    target = output_target(output, settings, stdout_is_terminal)        # before the model
    speech = Speech(built, refs, target, hardware_from_settings(settings.values), play=True)
    with HoldSignals() as signals:
        try:
            report = speech_run(speech, session, shown).run(signals)   # a SpeechReport
        except StoppedBySignal as stop:                                # Ctrl-C / SIGTERM
            ...print stop.message; exit with stop.exit_code

Three runs, each returning a typed report (what the summary line and --json print):
- `PlainRun` (`-o FILE`, `-o -`): the render that matches the reference. The model is loaded,
  the recording encoded, every piece generated at once, then the subtitles and the audio written
  (a stop waits until the file is complete).
- `StreamedRun` (`--play`, `--stream`, no -o): the text cut at sentences (engine/stream/);
  the first piece is generated alone, the rest in packed waves, and each piece is played and/or
  written to stdout as soon as it and the ones before it are ready. A file (`-o FILE` with
  --play / --stream) holds the same streamed render, written at the end through a temporary
  file, so it is never partial.
- `DialogueRun` (`--cast`): every line of a script (dialogue.plan_script) in one packed run,
  joined with gaps of silence; subtitles, then the audio, then the player.

Stopping a streamed render (each exits within a layer of the forward running then, the render's
thread joined):
- Ctrl-C (or SIGTERM) stops the sound at once (`speakrun.StoppedBySignal`: exit 130 / 143); on
  stdout the piece being written is finished first (the stream stays a valid WAV/MP3/... up to there); a file under
  -o is written only at the end, so a stop leaves none (nor its temporary file).
- stdout's reader going away (`... --stream -o - | head -c 1000`): OmniVoiceError "stdout: ...".
- the player quitting before the end (its window closed, the command killed): PlayerFailed.

Here: where the audio goes (`output_target`), the checks made before the model, and the choice of
run (`speech_run`). What the runs share (`Speech`, `SpeechReport`, the stop): speakrun.py; the
runs: speakplain.py, speakstream.py, speakdialogue.py.
"""

from __future__ import annotations

from typing import Callable, Mapping

from ...engine.errors import InvalidRequest
from ...media.formats import streaming_formats
from ...media.loudness import streaming_refused
from ...media.output import OutputTarget, check_output
from ..phrases.phrasecache import DEFAULT_MB, PhraseCache
from ..session import Session
from ..settings.layers import Resolved
from .speakplain import PlainRun
from .speakrun import Shown, Speech
from .speakstream import StreamedRun


def output_target(
    output: str | None, settings: Resolved, stdout_is_terminal: Callable[[], bool]
) -> OutputTarget | None:
    """Where the audio goes: None (the player), stdout or a file (output.OutputTarget). A file's
    format is its extension's; --format, when given as a flag, must agree with it; stdout takes
    the format. Binary audio is not written to a terminal."""
    if output is None:
        return None
    flagged = settings.source("format").kind == "flag"
    wanted = settings["format"] if (flagged or output == "-") else None
    target = check_output(output, wanted, settings["sample_rate"])
    if target.to_stdout and stdout_is_terminal():
        raise InvalidRequest("-o - writes binary audio to stdout, which is a terminal: redirect it or pipe it")
    return target


def check_streamable(target: OutputTarget | None) -> None:
    """Before the model: stdout streaming needs a format that can be written piece by piece."""
    if target is not None and target.to_stdout and not target.audio_format.streams:
        raise InvalidRequest(
            f"--stream -o - cannot send {target.audio_format.name} piece by piece: use {streaming_formats()}"
        )


def report_settings(values: Mapping[str, object]) -> dict:
    """Settings as a --json report gives them: `speed` as used, 1.0 (the normal rate) when none
    was given, and None when --duration sets the length (the speed is then ignored)."""
    out = dict(values)
    if out.get("duration") is not None:
        out["speed"] = None
    elif out.get("speed") is None and "speed" in out:
        out["speed"] = 1.0
    return out


def phrase_cache(notice: Callable[[str], None]) -> PhraseCache:
    """`say --cache`'s phrase cache (app/phrases/), bounded at DEFAULT_MB."""
    return PhraseCache.open(DEFAULT_MB << 20, notice=notice)


def check_cacheable(speech: Speech, server: str | None) -> None:
    """Before the model: --cache keeps a plain render's file, so it needs -o FILE and nothing that
    listens to the audio or sends it elsewhere as it is made."""
    if speech.cache is None:
        return
    given = [
        flag
        for flag, on in (
            ("--server", server is not None),
            ("--play", speech.play),
            ("--stream", speech.stream),
            ("--words", speech.words is not None),
            ("--subtitles", speech.subtitles is not None),
            ("--verify", bool(speech.settings["verify"])),
        )
        if on
    ]
    if given:
        raise InvalidRequest(f"--cache keeps the file of a plain render: leave out {', '.join(given)}")
    if speech.target is None or speech.target.to_stdout:
        raise InvalidRequest("--cache keeps the file a render writes: give -o FILE (not -o - or the player)")


def speech_run(speech: Speech, session: Session, shown: Shown | None = None) -> "PlainRun | StreamedRun":
    """The run that speaks `speech` (shown through `session`): streamed when it is played or
    streamed, else plain."""
    check_loudness(speech)
    return (StreamedRun if speech.streamed else PlainRun)(speech, session, shown)


def check_loudness(speech: Speech) -> None:
    """Before the model: --loudness measures the whole output, which --stream sends before it exists."""
    if speech.stream and speech.loudness is not None:
        name = speech.built.settings.name("loudness")
        instead = "leave out --stream (the audio is then written, or played, once it is complete)"
        raise InvalidRequest(streaming_refused(name, "--stream", instead), "loudness")
