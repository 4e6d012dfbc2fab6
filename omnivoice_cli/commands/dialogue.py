"""`omnivoice say --cast NAME=VOICE ...`: a dialogue script spoken line by line, each line in its
speaker's voice, joined with --gap seconds of silence (dialogue.py plans the script and the cast,
speakdialogue.DialogueRun speaks it; this file prints).

Line i (from 0, counting the spoken lines) is its own request with seed S + i, so
`omnivoice say "<its text>" --voice <its voice> --seed <S + i>` makes exactly its audio; all
lines run in one packed `Engine.generate`. The file is line 0's audio, `gap` zero samples, line
1's audio, and so on (each line's audio keeps its own 0.1 s of padding at both ends).
"""

from __future__ import annotations

import json
import time
from typing import Any

import typer

from ..app.dryrun import describe, render_script
from ..app.marking import run_mark
from ..app.say.dialogue import check_gap, check_gaps_total, plan_script
from ..app.say.speak import output_target
from ..app.say.speakdialogue import DialogueRun
from ..app.session import WarnOnce, hardware_from_settings
from ..media.lock import output_lock
from ..media.subtitles import check_subtitles_path
from ..ui.messages import echo, warn
from ..ui.text import visible
from .common import check_cast, held, run_session, run_settings, stdout_is_terminal


def print_report(report: Any, t_start: float, json_out: bool, quiet: bool) -> None:
    """The summary line on stderr, or the --json report (speakdialogue.DialogueReport)."""
    rate, target = report.sample_rate, report.target
    if json_out:
        lines = [
            {
                "line": ln.number,
                "speaker": ln.speaker,
                "voice": ln.voice,
                "text": ln.text,
                "seed": ln.seed,
                "voice_prompt": ln.voice_prompt,
                "start_seconds": round(ln.start / rate, 4),
                "end_seconds": round(ln.end / rate, 4),
            }
            for ln in report.lines
        ]
        data = {
            "path": None if target is None else str(target),
            "format": None if target is None else target.audio_format.name,
            "sample_rate": rate,
            "audio_seconds": round(report.audio_seconds, 4),
            "seconds": round(report.seconds, 4),
            "load_seconds": round(report.load_seconds, 4),
            "total_seconds": round(time.perf_counter() - t_start, 4),
            "seed": report.seed,
            "lines": lines,
            "subtitles": None if report.subtitles is None else str(report.subtitles),
            "warnings": list(report.warnings),
        }
        typer.echo(json.dumps(data, ensure_ascii=False), err=target is not None and target.to_stdout)
    elif not quiet:
        echo(
            f"{report.where}: {report.audio_seconds:.2f} s of audio, {len(report.lines)} lines in "
            f"{report.seconds:.2f} s (model loaded in {report.load_seconds:.1f} s), seed {report.seed}"
        )


def _dry_run(built: Any, json_out: bool, output: str | None, gap: float) -> None:
    """--dry-run: what each line would speak, no model: the settings the lines share once, a row
    per line, where it goes (one JSON object a line with --json)."""
    out = typer.get_text_stream("stdout")
    reports = [
        {"line": line.number, "speaker": line.speaker.name, "voice": line.speaker.spec, **describe(b)}
        for line, b in built
    ]
    if json_out:
        out.write("".join(json.dumps(report, ensure_ascii=False) + "\n" for report in reports))
        return
    where = "played" if output is None else "stdout" if output == "-" else output
    out.write(visible(render_script(reports, where, gap), lines=True))


def say_dialogue(
    script: str,
    name: str,
    preset: str | None,
    flags: dict,
    cast: list[str],
    gap: float | None,
    output: str | None,
    subtitles: str | None,
    json_out: bool,
    quiet: bool,
    t_start: float,
    dry_run: bool = False,
    play: bool = False,
) -> None:
    """`say --cast ...`: check everything, then speak the script (see the module doc)."""
    chosen, settings = run_settings(preset, flags)
    check_cast(cast)
    gap_s = check_gap(gap)
    if flags.get("ref") is not None:
        warn("--ref is not used: every line's voice comes from --cast")
    planned = plan_script(script, name, cast, chosen, flags)
    for member in planned.cast.unused():
        warn(f"--cast {member.name} speaks no line")
    check_gaps_total(gap_s, len(planned.lines))
    if dry_run:
        return _dry_run(planned.lines, json_out, output, gap_s)
    speak_script(
        planned, settings, output, subtitles, gap_s, play=play, json_out=json_out, quiet=quiet, t_start=t_start
    )


def speak_script(
    script: Any,
    settings: Any,
    output: str | None,
    subtitles: str | None,
    gap: Any,
    *,
    play: bool,
    json_out: bool,
    quiet: bool,
    t_start: float,
) -> None:
    """A planned script (say --cast's, or the parts of an SSML document: commands/sayssml.py)
    spoken into its target, the file marked (app/marking.py), each line's warnings shown once, and
    reported; `gap`: seconds between lines, one for all or one a line."""
    target = output_target(output, settings, stdout_is_terminal)
    subs_path = check_subtitles_path(subtitles) if subtitles else None
    shown = WarnOnce(warn)
    for _, b in script.lines:
        shown(b.warnings)
    run = DialogueRun(
        script,
        target,
        hardware_from_settings(settings.values),
        model=str(settings["model"]),
        gap=gap,
        subtitles=subs_path,
        play=play,
        session=run_session(quiet),
        shown=shown,
        loudness=settings["loudness"],
        sample_rate=settings["sample_rate"],
        mark=run_mark(settings),
    )
    with output_lock(None if target is None else target.path):  # one run at a time on a file
        print_report(held(run), t_start, json_out, quiet)
