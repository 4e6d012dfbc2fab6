"""`omnivoice batch`: every line of a file into its own audio file, resumable (batch.py does the work)."""

from __future__ import annotations

from typing import Optional

import typer

from .. import settings as st
from ..engine.errors import InvalidRequest
from ..options import HARDWARE_SETTINGS, NO_FLAGS, PRESET_OPTION, QUIET_OPTION, SPEECH_SETTINGS, with_settings
from .common import echo, run_settings, warn

HELP = """Speak every line of INPUT into its own audio file in the folder -o.

INPUT is a .txt file (one text per line) or a .jsonl file (one JSON object per line with "text" and
any of: id, output, preset, ref, ref_text and the settings below by their names, e.g. num_step).
Blank lines and lines starting with # are skipped.

Files are named after id / output, else the zero-padded line number (0007.wav). Existing files are
skipped, so running the same command again resumes an interrupted batch (--overwrite redoes them).
OUT/manifest.jsonl records every line. Settings: defaults < preset < flags < the fields of a line.
Seeds: a line's own seed, else --seed S + the line's 0-based index in the file, else random.

Exit codes: 0 every line done or skipped; 1 a line failed (or a runtime failure); 2 bad usage;
130 / 143 stopped by Ctrl-C / SIGTERM (finished files are kept)."""

EXAMPLES = """
omnivoice batch lines.txt -o out/
omnivoice batch jobs.jsonl -o out/ --preset fast --seed 100
omnivoice batch jobs.jsonl -o out/ --voice alice --format flac
"""


def _check_run(flags: dict, preset: Optional[str]) -> st.Preset | None:
    """The run's preset and flags, checked before any line is read."""
    chosen, run = run_settings(preset, flags)
    if run["instruct"] is not None:
        from ..engine.text import resolve_instruct
        from ..request import named

        try:
            resolve_instruct(run["instruct"])
        except InvalidRequest as e:
            raise named(run, e, "instruct") from None
    return chosen


def _summary(report, quiet: bool) -> None:
    counts = f"{report.done} done, {report.failed} failed, {report.skipped} skipped"
    if report.pending:
        counts += f", {report.pending} not run"
    if report.interrupted:
        name = "Ctrl-C" if report.interrupted == 2 else f"signal {int(report.interrupted)}"
        warn(f"stopped by {name}: {report.lines} lines: {counts}; finished files are kept, "
             f"run the same command again to finish ({report.manifest})")  # fmt: skip
        raise typer.Exit(128 + int(report.interrupted))
    if not quiet:
        rtf = "n/a" if report.rtf is None else f"{report.rtf:.3f}"
        loaded = "" if report.load_seconds is None else f"; model loaded in {report.load_seconds:.1f} s"
        echo(f"{report.lines} lines: {counts}; {report.audio_seconds:.2f} s of audio in "
             f"{report.generate_seconds:.2f} s (RTF {rtf}{loaded}); wall time {report.wall_seconds:.1f} s; "
             f"manifest {report.manifest}")  # fmt: skip
    if report.failed:
        raise typer.Exit(1)


@with_settings(*SPEECH_SETTINGS, *HARDWARE_SETTINGS)
def batch(
    input: str = typer.Argument(..., metavar="INPUT", show_default=False, help="A .txt or .jsonl file."),
    output: str = typer.Option(
        ..., "-o", "--output", metavar="DIR", show_default=False, rich_help_panel="Output",
        help="Output folder (created when missing): the audio files and manifest.jsonl.",
    ),
    preset: Optional[str] = PRESET_OPTION,
    overwrite: bool = typer.Option(False, "--overwrite", rich_help_panel="Output", help="Redo lines whose file exists."),
    dry_run: bool = typer.Option(
        False, "--dry-run", rich_help_panel="Output",
        help="Load no model, write nothing: print what each line would speak (with --json, one JSON object a line).",
    ),
    json_out: bool = typer.Option(False, "--json", rich_help_panel="Output", help="With --dry-run: JSON lines."),
    quiet: bool = QUIET_OPTION,
    subtitles: Optional[str] = typer.Option(  # issue 15 (cues.py)
        None, "--subtitles", metavar="srt|vtt", show_default=False, rich_help_panel="Output",
        help="Also write subtitles beside each audio file (0001.wav -> 0001.srt), one cue per piece.",
    ),
    flags: dict = NO_FLAGS,
) -> None:  # fmt: skip
    """Speak every line of INPUT into its own audio file in the folder -o."""
    from ..batch import BatchRun

    if subtitles is not None and subtitles.lower().lstrip(".") not in ("srt", "vtt"):
        raise InvalidRequest(f"--subtitles must be srt or vtt (a file beside each audio file), got {subtitles!r}")
    chosen = _check_run(flags, preset)
    subtitles = subtitles.lower().lstrip(".") if subtitles else None
    run = BatchRun(input, output, preset=chosen, flags=flags, overwrite=overwrite, quiet=quiet, echo=echo,
                   subtitles=subtitles)  # fmt: skip
    if dry_run:
        _dry_run(run, json_out)
        return
    _summary(run.run(), quiet)


def _dry_run(run, json_out: bool) -> None:
    """Plan every line (no model, nothing written) and print what each would speak."""
    import json

    from ..dryrun import describe

    run.plan()
    out = typer.get_text_stream("stdout")
    for line in run.lines:
        if line.error is not None:
            echo(f"Error: {line.error}")
            continue
        report = {"line": line.number, "output": line.name, **describe(line.built)}
        if json_out:
            out.write(json.dumps(report, ensure_ascii=False) + "\n")
        else:
            out.write(f"line {line.number} -> {line.name}: {len(report['pieces'])} piece(s), about "
                      f"{report['seconds']:.1f} s, seed {report['seed']}\n")  # fmt: skip
    if any(line.error is not None for line in run.lines):
        raise typer.Exit(1)
