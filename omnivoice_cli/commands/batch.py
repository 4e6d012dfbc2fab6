"""`omnivoice batch`: every line of a file into its own audio file, resumable (batch.py does the work).

The app layer is imported inside the functions that run it: `omnivoice batch --help` reads only
the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..app.settings.setting import LISTENING
from ..app.signals import signal_name
from ..engine.errors import InvalidRequest
from ..ui.helpfmt import MORE
from ..ui.messages import echo, pace, warn
from ..ui.options import (
    GPUS_PER_WORKER_OPTION,
    HARDWARE_SETTINGS,
    LISTEN_SETTINGS,
    MARK_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    RAY_OPTION,
    SPEECH_SETTINGS,
    WORKERS_OPTION,
    with_settings,
)
from ..ui.text import visible

# After MORE: the details, shown by --help-all (ui/helpfmt.py).
HELP = (
    """Speak every line of INPUT into its own audio file in the folder -o.

INPUT is a .txt file (one text per line) or a .jsonl file (one JSON object per line with "text" and
any of: id, output, preset, ref, ref_text and the settings below by their names, e.g. num_step).
Blank lines and lines starting with # are skipped.
"""
    + MORE
    + """
Files are named after id / output, else the zero-padded line number (0007.wav). Existing files are
skipped, so running the same command again resumes an interrupted batch (--overwrite redoes them).
OUT/manifest.jsonl records every line. Settings: defaults < preset < flags < the fields of a line.
Seeds: a line's own seed, else --seed S + the line's 0-based index in the file, else random.

With --ray the lines are spoken by --workers engines on a Ray cluster (pip install
'omnivoice-cli[ray]'); this command still writes every file and the manifest, as above.

Exit codes: 0 every line done or skipped; 1 a line failed (or a runtime failure); 2 bad usage;
130 / 143 stopped by Ctrl-C / SIGTERM (finished files are kept)."""
)

EXAMPLES = """
omnivoice batch lines.txt -o out/
omnivoice batch jobs.jsonl -o out/ --preset fast --seed 100
omnivoice batch jobs.jsonl -o out/ --voice alice --format flac
omnivoice batch jobs.jsonl -o out/ --ray local --workers 2
omnivoice batch jobs.jsonl -o /shared/out --ray auto --workers 8 --gpus-per-worker 1
"""


def _summary(run, quiet: bool, json_out: bool = False) -> None:
    report = run.report
    counts = f"{report.done} done, {report.failed} failed, {report.skipped} skipped"
    if report.pending:
        counts += f", {report.pending} not run"
    if json_out:
        _json_summary(run)
    if report.interrupted:
        name = "Ctrl-C" if report.interrupted == 2 else f"signal {int(report.interrupted)}"
        warn(
            f"stopped by {name}: {report.lines} lines: {counts}; finished files are kept, "
            f"run the same command again to finish ({report.manifest})"
        )
        raise typer.Exit(128 + int(report.interrupted))
    if not quiet and not json_out:
        loaded = "" if report.load_seconds is None else f"; model loaded in {report.load_seconds:.1f} s"
        if report.voice_seconds is not None:
            loaded += f", voices prepared in {report.voice_seconds:.1f} s"
        echo(
            f"{report.lines} lines: {counts}; {report.audio_seconds:.2f} s of audio in "
            f"{report.generate_seconds:.2f} s ({pace(report.rtf)}{loaded}); wall time {report.wall_seconds:.1f} s; "
            f"manifest {report.manifest}"
        )
    if report.failed:
        raise typer.Exit(1)


def _json_summary(run) -> None:
    """--json: the run's summary as one JSON object on stdout (as `say --json`), instead of the
    line on stderr; every line's own record is in the manifest."""
    import json

    from ..app.say.speak import report_settings

    r = run.report

    def rounded(x):
        return None if x is None else round(x, 4)

    data = {
        "input": str(run.input_path),
        "output": str(run.output_dir),
        "manifest": str(r.manifest),
        "lines": r.lines,
        "done": r.done,
        "failed": r.failed,
        "skipped": r.skipped,
        "pending": r.pending,
        "audio_seconds": round(r.audio_seconds, 4),
        "seconds": round(r.generate_seconds, 4),
        "load_seconds": rounded(r.load_seconds),
        "voice_seconds": rounded(r.voice_seconds),
        "total_seconds": round(r.wall_seconds, 4),
        "rtf": rounded(r.rtf),
        "seed": run.flags.get("seed"),
        "settings": report_settings(run.run_settings().values),
        "warnings": r.warnings,
        "errors": [ln.error for ln in run.lines if ln.status == "failed"],
        "interrupted": None if not r.interrupted else signal_name(int(r.interrupted)),
    }
    typer.echo(json.dumps(data, ensure_ascii=False))


@with_settings(*SPEECH_SETTINGS, *HARDWARE_SETTINGS, *LISTEN_SETTINGS, *MARK_SETTINGS)
def batch(
    input: str = typer.Argument(..., metavar="INPUT", show_default=False, help="A .txt or .jsonl file."),
    output: str = typer.Option(
        ...,
        "-o",
        "--output",
        metavar="DIR",
        show_default=False,
        rich_help_panel="Output",
        help="Output folder (created when missing): the audio files and manifest.jsonl.",
    ),
    preset: Optional[str] = PRESET_OPTION,
    overwrite: bool = typer.Option(
        False, "--overwrite", rich_help_panel="Output", help="Redo lines whose file exists."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        rich_help_panel="Output",
        help="Load no model, write nothing: print what each line would speak (with --json, one JSON object a line).",
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        rich_help_panel="Output",
        help="A JSON summary on stdout instead of the summary line (with --dry-run: one JSON object a line).",
    ),
    quiet: bool = QUIET_OPTION,
    subtitles: Optional[str] = typer.Option(  # issue 15 (cues.py)
        None,
        "--subtitles",
        metavar="srt|vtt",
        show_default=False,
        rich_help_panel="Output",
        help="Also write subtitles beside each audio file (0001.wav -> 0001.srt), as say --subtitles does.",
    ),
    words: bool = typer.Option(
        False,
        "--words",
        rich_help_panel=LISTENING,
        help="Also write when each word is spoken beside each audio file (0001.words.json), heard by the speech "
        "recogniser (the asr extra).",
    ),
    ray: Optional[str] = RAY_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    gpus_per_worker: Optional[float] = GPUS_PER_WORKER_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Speak every line of INPUT into its own audio file in the folder -o."""
    from ..app.batch.batch import BatchRun
    from ..app.batch.folder import check_output_dir
    from ..app.settings.layers import FLAG_SOURCE, resolve
    from ..media.lock import output_lock
    from .common import check_run, cluster_executor, run_session
    from .say import check_listening

    if subtitles is not None and subtitles.lower().lstrip(".") not in ("srt", "vtt"):
        raise InvalidRequest(f"--subtitles must be srt or vtt (a file beside each audio file), got {subtitles!r}")
    chosen = check_run(flags, preset)
    check_output_dir(output)
    if not dry_run:  # the recogniser of --verify / --words, before any model loads
        layers = [(chosen.origin, chosen.settings)] if chosen else []
        check_listening(resolve(*layers, (FLAG_SOURCE, flags)), words, "--words")
    subtitles = subtitles.lower().lstrip(".") if subtitles else None
    # a dry run needs no cluster (and no Ray), but --workers without --ray is still refused
    executor = None if dry_run and ray is not None else cluster_executor(ray, workers, gpus_per_worker, preset, flags)
    run = BatchRun(
        input,
        output,
        preset=chosen,
        flags=flags,
        overwrite=overwrite,
        session=run_session(quiet),
        subtitles=subtitles,
        executor=executor,
        words=words,
    )
    if dry_run:
        _dry_run(run, json_out)
        return
    with output_lock(Path(output), folder=True):  # one run at a time on a folder
        run.run()
    _summary(run, quiet, json_out)


def _dry_run(run, json_out: bool) -> None:
    """Plan every line (no model, nothing written) and print what each would speak."""
    import json

    from ..app.dryrun import describe

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
            out.write(
                f"line {line.number} -> {visible(line.name)}: {len(report['pieces'])} piece(s), about "
                f"{report['seconds']:.1f} s, seed {report['seed']}\n"
            )
    if any(line.error is not None for line in run.lines):
        raise typer.Exit(1)
