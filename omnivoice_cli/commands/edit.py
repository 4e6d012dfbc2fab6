"""`omnivoice edit`: change words inside a recording, the rest of it kept (app/edit/);
`omnivoice revoice`: a take spoken again in another voice, in its timing (app/edit/revoice.py,
through dub's run).

The app layer is imported inside the function: `omnivoice edit --help` reads only the options.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import typer

from ..app.settings.schema import GENERATION_KEYS
from ..ui.helpfmt import MORE
from ..ui.messages import echo, warn
from ..ui.options import (
    HARDWARE_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    dry_run_option,
    json_option,
    output_option,
    with_settings,
    words_file_option,
)
from .dub import DUB_SETTINGS, LISTEN

HELP = (
    """Change words inside a recording: only the changed stretch is made again, in the take's voice.
"""
    + MORE
    + """
The take is encoded; the stretches whose words changed (the two transcripts aligned word by
word) are masked, each given as many frames as its new words take at the take's own pace, and
the model fills them with the whole new transcript in view, the take's other codes kept bit for
bit. Where the words lie: --span START:END (seconds, one per change, in order) or --words (the
speech recogniser hears the take: the asr extra). The joins are cross-faded over 80 ms; the
output keeps the take's sample rate and level. A change of more than half the take is refused:
speak it with `omnivoice say TEXT --ref TAKE` instead. --dry-run shows the changes and the
canvas (the known and the masked frames) without loading the model. docs/edit.md has the method.
Exit codes: 0 ok; 1 runtime failure; 2 bad usage (a span past the end, an empty transcript, a
take without speech), nothing written."""
)

EXAMPLES = """
omnivoice edit take.wav --ref-text "See you on Monday." --text "See you on Tuesday." --span 1.1:1.6 -o fixed.wav
omnivoice edit take.wav --text "See you on Tuesday." --words -o fixed.wav
omnivoice edit take.wav --ref-text "..." --text "..." --span 0.4:0.9 --span 2.0:2.3 --dry-run --json
"""

EDIT_SETTINGS = ("lang", "lexicon", "normalize", *GENERATION_KEYS, "seed", *HARDWARE_SETTINGS, "asr_model")
JSON_HELP = "A JSON report (stderr if -o -)."
REVOICE_SETTINGS = (*DUB_SETTINGS, *HARDWARE_SETTINGS, *LISTEN)  # dub's: a revoice is a dub of the take's words


@with_settings(*EDIT_SETTINGS)
def edit(
    take: str = typer.Argument(..., metavar="TAKE", show_default=False, help="The recording to edit."),
    text: str = typer.Option(
        ...,
        "--text",
        metavar="TEXT",
        show_default=False,
        rich_help_panel="Input",
        help="The whole new transcript of the take.",
    ),
    ref_text: Optional[str] = typer.Option(
        None,
        "--ref-text",
        metavar="TEXT",
        show_default=False,
        rich_help_panel="Input",
        help="What the take says now (without it: --words hears it).",
    ),
    span: Optional[list[str]] = typer.Option(
        None,
        "--span",
        metavar="START:END",
        show_default=False,
        rich_help_panel="Input",
        help="Seconds of the take where a change lies (one per change, in order).",
    ),
    words: bool = typer.Option(
        False,
        "--words",
        rich_help_panel="Input",
        help="Find where the changed words lie with the speech recogniser (the asr extra).",
    ),
    output: Optional[str] = output_option(
        "The edited recording (its extension is the format); - writes WAV to stdout. Default: TAKE.edited.wav."
    ),
    dry_run: bool = dry_run_option("Load no model, write nothing: show the changes and canvas."),
    preset: Optional[str] = PRESET_OPTION,
    json_out: bool = json_option(JSON_HELP),
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Change words inside a recording: only the changed stretch is made again, in the take's voice."""
    from ..app.edit import editplan
    from ..media.output import check_output
    from .common import run_session, run_settings

    t_start = time.perf_counter()
    _, settings = run_settings(preset, flags)
    spans = [editplan.parse_span(s) for s in span or []]
    the_take = editplan.read_take(take)
    word_times = _heard(the_take, settings) if words else None
    plan = editplan.plan_edit(the_take, text, ref_text=ref_text, spans=spans, word_times=word_times)
    path = output if output is not None else str(Path(take).expanduser().with_suffix(".edited.wav"))
    target = check_output(path, sample_rate=the_take.sample_rate)
    if dry_run:
        return _dry_run(plan, json_out)
    if target.to_stdout and typer.get_binary_stream("stdout").isatty():
        from ..engine.errors import InvalidRequest

        raise InvalidRequest("-o - writes binary audio to stdout, which is a terminal: redirect it or pipe it")
    from ..app.edit.editrun import EditRun

    run = EditRun(plan, settings, run_session(quiet))
    if not quiet and not json_out:
        for w in run.report.warnings:
            warn(w)
    report = run.run(target, typer.get_binary_stream("stdout") if target.to_stdout else None)
    where = "stdout" if target.to_stdout else str(target)
    if json_out:
        data = {
            "path": where,
            "sample_rate": the_take.sample_rate,
            "audio_seconds": round(report.seconds, 4),
            "seed": report.seed,
            **{k: v for k, v in plan.record().items() if k in ("take_seconds", "changes", "canvas")},
            "seconds": round(report.generate_seconds, 4),
            "load_seconds": round(report.load_seconds, 4),
            "total_seconds": round(time.perf_counter() - t_start, 4),
            "warnings": report.warnings,
        }
        typer.echo(json.dumps(data, ensure_ascii=False), err=target.to_stdout)
    elif not quiet:
        echo(
            f"{where}: {report.seconds:.2f} s ({the_take.seconds:.2f} s take), {len(plan.changes)} "
            f"change{'s' * (len(plan.changes) != 1)} made in {report.generate_seconds:.2f} s "
            f"(model loaded in {report.load_seconds:.1f} s); seed {report.seed}"
        )


def _heard(the_take: Any, settings: Any) -> list[tuple[str, float, float]]:
    """--words: the take's words and their times, heard by the speech recogniser."""
    from ..app.listening import listen
    from ..engine.model.config import SAMPLE_RATE

    rec = listen.recogniser(settings["asr_model"], settings["device"] or "auto", "--words")
    try:
        heard = rec.transcribe(the_take.prepared.wav, SAMPLE_RATE, settings["lang"])
    finally:
        rec.close()
    if not heard.words:
        from ..engine.errors import InvalidRequest

        raise InvalidRequest(f"the speech recogniser heard no words in the take {the_take.path}: nothing to edit")
    return [(w.text, w.start, w.end) for w in heard.words]


def _dry_run(plan: Any, json_out: bool) -> None:
    """The plan on stdout: the changes and the canvas the model would fill."""
    from ..app.edit.editplan import FRAME_RATE

    out = typer.get_text_stream("stdout")
    record = plan.record()
    if json_out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return
    out.write(
        f"{record['take']}: {record['take_seconds']:.2f} s -> {record['output_seconds']:.2f} s, "
        f"{len(plan.changes)} change{'s' * (len(plan.changes) != 1)}\n"
    )
    for c in plan.changes:
        out.write(
            f"  {c.start / FRAME_RATE:7.2f}-{c.end / FRAME_RATE:.2f} s  {c.end - c.start:>4} -> {c.new_frames:>4} frames  "
            f"{c.old_words or '(nothing)'!r} -> {c.new_words or '(nothing)'!r}\n"
        )
    canvas = record["canvas"]
    out.write(f"  canvas: {canvas['target_frames']} frames, known {canvas['known']}, masked {canvas['masked']}\n")


@with_settings(*REVOICE_SETTINGS)
def revoice(
    ctx: typer.Context,
    take: str = typer.Argument(..., metavar="TAKE", show_default=False, help="The recording to speak again."),
    cues: Optional[str] = typer.Option(
        None,
        "--cues",
        metavar="FILE",
        show_default=False,
        rich_help_panel="Input",
        help="An .srt or .vtt of the take: its words and times (without it: the speech recogniser hears them).",
    ),
    text: Optional[str] = typer.Option(
        None,
        "--text",
        metavar="TEXT",
        show_default=False,
        rich_help_panel="Input",
        help="What the take says, timed by the words heard.",
    ),
    output: Optional[str] = output_option(
        "The new recording (its extension is the format); - writes WAV to stdout. Default: TAKE.revoiced.wav."
    ),
    words_file: Optional[str] = words_file_option(
        "Also write when each word is spoken in the output (JSON), heard by the speech recogniser."
    ),
    dry_run: bool = dry_run_option("Load no model, write nothing: show every cue."),
    preset: Optional[str] = PRESET_OPTION,
    json_out: bool = json_option(JSON_HELP),
    quiet: bool = QUIET_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Speak a take again in another voice, in its own timing: its words in the slots they had."""
    from ..app.edit import revoice as rv
    from ..app.say.dialogue import Cast
    from .dub import DubStart, track_target

    start = DubStart.begin(ctx, words_file, preset, flags, dry_run=dry_run, json_out=json_out, quiet=quiet)
    heard = None
    if cues is None:
        rv.take_ms(take)  # a take that is no audio: said before the recogniser loads
        heard = _heard_file(take, start.settings)
    timed, length = rv.take_cues(take, cues_file=cues, heard=heard, text=text)
    path = output if output is not None else str(Path(take).expanduser().with_suffix(".revoiced.wav"))
    start.run(cues or take, track_target(path, dry_run), cast=Cast(), cues=timed, track_ms=length)


def _heard_file(take: str, settings: Any) -> list[tuple[str, float, float]]:
    """The take's words and their times, heard by the speech recogniser (at the codec's rate)."""
    from ..app.listening import listen
    from ..engine.model.config import SAMPLE_RATE
    from ..engine.sound.voice import load_reference

    wav = load_reference(take)
    rec = listen.recogniser(settings["asr_model"], settings["device"] or "auto", "revoice (hearing the take)")
    try:
        heard = rec.transcribe(wav, SAMPLE_RATE, settings["lang"])
    finally:
        rec.close()
    return [(w.text, w.start, w.end) for w in heard.words]
