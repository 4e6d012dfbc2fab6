"""`omnivoice dub`: speak an SRT or WebVTT file into one track, each cue in its time slot (dubbing.py).

The app layer is imported inside the functions that run it: `omnivoice dub --help` reads only
the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..app.settings.schema import GENERATION_KEYS
from ..app.signals import signal_name
from ..engine.errors import InvalidRequest
from ..engine.model.config import SAMPLE_RATE
from ..ui.helpfmt import MORE
from ..ui.messages import echo, error, warn
from ..ui.options import (
    HARDWARE_SETTINGS,
    MARK_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    dry_run_option,
    json_option,
    output_option,
    with_settings,
    words_file_option,
)
from ..ui.text import counted, visible

if TYPE_CHECKING:
    from pathlib import Path

    from ..app.settings.layers import Resolved
    from ..app.settings.presets import Preset
    from ..media.output import OutputTarget

# After MORE: the details, shown by --help-all (ui/helpfmt.py).
HELP = (
    """Speak every cue of an SRT or WebVTT file into one audio track, each in its time slot.
"""
    + MORE
    + """
Each cue is one request whose fixed length is the cue's (a cue over 30 s is cut into pieces that
fill it), all generated together; cue i (from 0) uses seed S + i, so
`omnivoice say "<cue text>" --duration <cue length> --seed <S + i>` remakes one cue exactly. The
track is as long as the last cue's end, with silence between cues; overlapping cues are mixed.
Markup (<i>, {\\an8}, <v Bob>) is not spoken. With --cast NAME=VOICE, a VTT voice span or a
'NAME:' label picks a cue's voice (VOICE: a saved voice, a voice file, instruct:ITEMS or auto).

With --source-audio ORIGINAL, each speaker without a --cast voice is cloned from the original
track at their cues' times (a cue with no speaker: from its own stretch), their words there
heard by the speech recogniser (the asr extra); docs/edit.md.

A cue whose words must be said over 2x faster than their natural pace to fit its times is
warned about (its "speed" is in --json and --dry-run); --dry-run shows every cue (times, words,
voice, speed) without loading the model. An existing track is replaced.

--stems DIR also writes each cue's audio and DIR/manifest.jsonl; running the same command again
then reuses the cues already made and speaks only the changed ones (--overwrite: all). Exit
codes: 0 ok; 1 runtime failure; 2 bad usage, a malformed subtitle file (with its line number) or
a bad cast; 130 / 143 stopped by Ctrl-C / SIGTERM."""
)

EXAMPLES = """
omnivoice dub episode.srt -o episode.wav --voice alice
omnivoice dub episode.vtt -o track.flac --cast ALICE=alice --cast BOB=bob --stems stems/
omnivoice dub episode.srt --cast "NARRATOR=instruct:male, low pitch" --seed 7 --json
omnivoice dub episode.srt --cast ALICE=alice --dry-run
omnivoice dub episode.srt -o episode.wav --words episode.words.json
omnivoice dub episode.fr.srt -o episode.fr.wav --source-audio episode.wav
"""

DUB_SETTINGS = (
    "lang",
    "lexicon",
    "normalize",
    "instruct",
    "voice",
    "ref",
    "ref_text",
    *GENERATION_KEYS,
    "seed",
    "format",
    "loudness",
)
LISTEN = ("asr_model",)  # --words: the speech recogniser (listen.py)


def track_target(output: str, dry_run: bool) -> OutputTarget:
    """The track's target (-o, or the default beside the input). An existing track is replaced,
    as every command replaces its output (docs/say.md#existing-outputs); with --stems the cues
    already made are reused."""
    from ..media.output import check_output

    target = check_output(output)
    if target.to_stdout and typer.get_binary_stream("stdout").isatty() and not dry_run:
        raise InvalidRequest("-o - writes binary audio to stdout, which is a terminal: redirect it or pipe it")
    return target


def _report(run: Any, report: Any, t_start: float, json_out: bool, quiet: bool) -> None:
    seconds = report.track_samples / SAMPLE_RATE
    where = "stdout" if run.target.to_stdout else str(run.target)
    counts = {s: report.count(s) for s in ("done", "reused", "empty")}
    if json_out:
        data = {
            "path": where,
            "format": run.target.format.lower(),
            "sample_rate": SAMPLE_RATE,
            "audio_seconds": round(seconds, 4),
            "seed": report.seed,
            "cues": [c.record() for c in report.cues],
            "spoken": counts["done"],
            "reused": counts["reused"],
            "empty": counts["empty"],
            "stems": run.stems,
            "words": None if run.words is None else str(run.words),
            "seconds": round(report.generate_seconds, 4),
            "load_seconds": None if report.load_seconds is None else round(report.load_seconds, 4),
            "voice_seconds": None if report.voice_seconds is None else round(report.voice_seconds, 4),
            "total_seconds": round(time.perf_counter() - t_start, 4),
            "warnings": report.warnings,
        }
        for cue in data["cues"]:
            cue.pop("key", None)
        typer.echo(json.dumps(data, ensure_ascii=False), err=run.target.to_stdout)
    elif not quiet:
        loaded = "" if report.load_seconds is None else f" (model loaded in {report.load_seconds:.1f} s)"
        if report.voice_seconds is not None:
            loaded = loaded[:-1] + f", voices prepared in {report.voice_seconds:.1f} s)"
        echo(
            f"{where}: {seconds:.2f} s track, {counted(len(report.cues), 'cue')}: {counts['done']} spoken, "
            f"{counts['reused']} reused, {counts['empty']} empty, in {report.generate_seconds:.2f} s{loaded}; "
            f"seed {report.seed}"
        )


@with_settings(*DUB_SETTINGS, *HARDWARE_SETTINGS, *LISTEN, *MARK_SETTINGS)
def dub(
    ctx: typer.Context,
    input: str = typer.Argument(..., metavar="INPUT", show_default=False, help="An .srt or .vtt file."),
    output: Optional[str] = output_option(
        "The track (.wav, .flac, .mp3, ...: its extension is the format); - writes WAV to stdout. "
        "Default: INPUT's name with --format."
    ),
    cast: Optional[list[str]] = typer.Option(
        None,
        "--cast",
        metavar="NAME=VOICE",
        show_default=False,
        rich_help_panel="Voice",
        help="A speaker's voice: a saved voice, a voice file, instruct:ITEMS or auto (once per speaker).",
    ),
    stems: Optional[str] = typer.Option(
        None,
        "--stems",
        metavar="DIR",
        show_default=False,
        rich_help_panel="Output",
        help="Also write each cue's audio here, with manifest.jsonl; a rerun reuses them.",
    ),
    words_file: Optional[str] = words_file_option(
        "Also write when each word is spoken on the track (JSON), heard by the speech recogniser (the asr extra)."
    ),
    source_audio: Optional[str] = typer.Option(
        None,
        "--source-audio",
        metavar="AUDIO",
        show_default=False,
        rich_help_panel="Voice",
        help="The original track: each speaker (a NAME: label or VTT voice) cloned from their cues' times in it.",
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        rich_help_panel="Output",
        help="Remake every cue, also those whose stems are there.",
    ),
    force: bool = typer.Option(
        False, "--force", hidden=True, help="Nothing: an existing track is replaced (kept for old scripts)."
    ),
    dry_run: bool = dry_run_option(
        "Load no model, write nothing: print every cue (times, words, voice, speed); with --json, JSON lines."
    ),
    preset: Optional[str] = PRESET_OPTION,
    json_out: bool = json_option("A JSON report with every cue (stderr if -o -)."),
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Speak every cue of an SRT or WebVTT file into one audio track, each in its time slot."""
    from ..app.dub import dubbing  # (imports numpy: loaded when a track is dubbed, not by --help)
    from ..app.say.dialogue import Cast
    from .common import check_cast

    start = DubStart.begin(ctx, words_file, preset, flags, dry_run=dry_run, json_out=json_out, quiet=quiet)
    check_cast(cast)
    the_cast = Cast.parse(cast)
    track = output if output is not None else dubbing.default_output(input, start.settings["format"])
    target = track_target(track, dry_run)
    start.run(input, target, cast=the_cast, stems=stems, overwrite=overwrite, source_audio=source_audio)


@dataclass(frozen=True)
class DubStart:
    """What dub and revoice (edit.py) share around their own part: --words checked, the settings
    (defaults < --preset < flags) and, for a run, the speech recogniser of --words / --verify
    checked before any loading; then the DubRun made, run (or, with --dry-run, shown) and reported."""

    chosen: Preset | None  # --preset
    settings: Resolved
    flags: dict[str, Any]
    words: Path | None  # --words FILE.json
    dry_run: bool
    json_out: bool
    quiet: bool
    t_start: float

    @classmethod
    def begin(
        cls,
        ctx: Any,
        words_file: Optional[str],
        preset: Optional[str],
        flags: dict[str, Any],
        *,
        dry_run: bool,
        json_out: bool,
        quiet: bool,
    ) -> DubStart:
        from .common import run_settings
        from .say import check_listening, words_path

        t_start = time.perf_counter()
        words = words_path(ctx, words_file)
        chosen, settings = run_settings(preset, flags)
        if not dry_run:
            check_listening(settings, words is not None, "--words")
        return cls(chosen, settings, flags, words, dry_run, json_out, quiet, t_start)

    def run(self, input_path: str, target: OutputTarget, **more: Any) -> None:
        """A DubRun of `input_path` into `target` (`more`: DubRun's own: cast, stems, cues, ...)."""
        from ..app.dub.dubbing import DubRun
        from .common import run_session

        run = DubRun(
            input_path,
            target,
            preset=self.chosen,
            flags=self.flags,
            session=run_session(self.quiet, unit="cues"),
            stdout=typer.get_binary_stream("stdout"),
            words=None if self.dry_run else self.words,
            **more,
        )
        try:
            if self.dry_run:
                return _dry_run(run, self.json_out)
            report = run.run()
        finally:
            run.close()
        if report.interrupted:
            if report.written:
                warn(f"stopped by {signal_name(report.interrupted)} after writing {run.target}")
            else:
                kept = " (finished stems are kept: run the same command again to resume)" if run.stems else ""
                error(f"stopped by {signal_name(report.interrupted)}; the track was not written{kept}")
            raise typer.Exit(128 + report.interrupted)
        _report(run, report, self.t_start, self.json_out, self.quiet)


def _dry_run(run: Any, json_out: bool) -> None:
    """Every cue as the run would make it, on stdout (the warnings on stderr, as in a run)."""
    from ..media.cues import timestamp

    cues = run.dry_run()
    out = typer.get_text_stream("stdout")
    if json_out:
        for cue in cues:
            out.write(json.dumps(cue, ensure_ascii=False) + "\n")
        return
    where = "stdout" if run.target.to_stdout else str(run.target)
    spoken = [c for c in cues if c["action"] != "skip (empty)"]
    out.write(
        f"{run.input_path}: {counted(len(cues), 'cue')} ({len(cues) - len(spoken)} empty) -> {where}, "
        f"{timestamp(run.report.track_samples * 1000 // SAMPLE_RATE)} long, seed {run.report.seed}\n"
    )
    who = [f"{c['speaker']}={c['voice']}" if c["speaker"] else c["voice"] or "-" for c in cues]
    width = min(max(len(w) for w in who), 32)
    for c, voice in zip(cues, who):
        speed = "" if c["speed"] is None else f"{c['speed']:.2f}x"
        text = c["text"] if len(c["text"]) <= 60 else c["text"][:57] + "..."
        text, voice = visible(text), visible(voice)  # the cue file's text: ui/text.py
        out.write(
            f"{c['cue']:>4}  {c['start']} --> {c['end']}  {speed:>6}  {voice:<{width}}  {text}"
            f"{'' if c['action'] == 'speak' else '  [' + c['action'] + ']'}\n"
        )
