"""`omnivoice book`: an EPUB, Markdown or text book into an .m4b or one file per chapter (book.py does the work).

The app layer is imported inside the functions that run it: `omnivoice book --help` reads only
the options (ui/options.py) and the help texts here.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..app.settings.schema import BOOK_LOUDNESS, GENERATION_KEYS, SCHEMA
from ..app.signals import signal_name
from ..engine.errors import InvalidRequest
from ..ui.helpfmt import MORE
from ..ui.messages import echo, error, pace, warn
from ..ui.options import (
    GPUS_PER_WORKER_OPTION,
    HARDWARE_SETTINGS,
    LISTEN_SETTINGS,
    MARK_SETTINGS,
    NO_FLAGS,
    PRESET_OPTION,
    QUIET_OPTION,
    RAY_OPTION,
    WORKERS_OPTION,
    with_settings,
)
from ..ui.progress import BookBars, clock
from ..ui.text import visible  # the book's titles and names: their control characters made visible

if TYPE_CHECKING:
    from ..app.book.book import BookRun

# After MORE: the details, shown by --help-all (ui/helpfmt.py).
HELP = (
    """Read a book aloud: an .m4b audiobook with chapter marks, or one audio file per chapter.

BOOK is an EPUB (chapters in reading order, titled by its table of contents; the cover, contents,
copyright and similar pages are skipped unless --keep-front-matter), a Markdown file (# and ##
headings are chapters) or plain text (chapters at lines such as "Chapter 12"). Each chapter starts
with its title spoken (--no-titles: not) and a pause; paragraphs are apart by a short pause.
"""
    + MORE
    + """
-o NAME.m4b writes one audiobook (AAC, chapter marks, title, author and cover from the book) and
NAME.chapters.json; -o DIR/ writes 01-Title.wav ... (--format) and DIR/chapters.json. Each output
is brought to -18 LUFS (--loudness), its true peak at most -1 dBTP, by one gain for the whole output.

The parts of the book are spoken by the batch run into a work folder (NAME.m4b.parts/ or
DIR/.parts/, with its manifest.jsonl); running the same command again resumes, and after an edit
of the book or a setting only the chapters it changes are spoken again.

Exit codes: 0 done; 1 a part failed (or a runtime failure); 2 bad usage; 130 / 143 stopped by
Ctrl-C / SIGTERM (finished parts are kept)."""
)

EXAMPLES = """
omnivoice book novel.epub -o novel.m4b --voice alice
omnivoice book notes.md -o out/ --format mp3
omnivoice book novel.epub --dry-run
omnivoice book novel.epub -o novel.m4b --chapters 3-5 --verify
omnivoice book novel.epub -o novel.m4b --ray auto --workers 8 --gpus-per-worker 1
"""

# the settings of `book`: a speech request's (not markdown: the book is read already; not duration:
# a chapter's length is its text's), its hardware and the speech recogniser of --verify
BOOK_SETTINGS = tuple(
    k
    for k in ("lang", "normalize", "chunk_duration", "chunk_threshold", "instruct", "voice", "ref", "ref_text")
    + ("speed", *GENERATION_KEYS, "seed", "format", "loudness", "lexicon")
    if k in SCHEMA
)


def _subtitles(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    fmt = value.lower().lstrip(".")
    if fmt not in ("srt", "vtt"):
        raise InvalidRequest(f"--subtitles must be srt or vtt (one subtitle file per chapter), got {value!r}")
    return fmt


def _summary(run: BookRun, quiet: bool, json_out: bool) -> None:
    r = run.report
    counts = f"{r.parts} parts: {r.done} spoken, {r.skipped} kept, {r.failed} failed"
    if r.pending:
        counts += f", {r.pending} not run"
    if json_out:
        _json_summary(run)
    if r.interrupted:
        warn(
            f"stopped by {signal_name(int(r.interrupted))}: {counts}; finished parts are kept, "
            f"run the same command again to finish ({r.manifest})"
        )
        raise typer.Exit(128 + int(r.interrupted))
    if r.failed or r.pending:
        error(
            f"the book is not written: {counts}; fix what failed and run the same command again "
            f"(the parts done are kept: {r.manifest})"
        )
        raise typer.Exit(1)
    if not quiet and not json_out:
        rtf = "" if r.rtf is None else f" ({pace(r.rtf)})"
        wrote = "; ".join(f"{p}{_level(run, p)}" for p in r.written)
        outs = [f"wrote {wrote}"] if wrote else []
        if r.kept:
            outs.append(f"{len(r.kept)} output{'s' if len(r.kept) != 1 else ''} already up to date")
        out = "; ".join(outs) or "nothing written"
        echo(
            f"{r.chapters} chapters, {counts}; {r.audio_seconds:.1f} s spoken in {r.generate_seconds:.1f} s{rtf}; "
            f"the book is {clock(r.duration)} long; {out}; wall time {r.wall_seconds:.1f} s"
        )
        if run.work is not None and run.work.is_dir():  # kept for the next run: say where, and how big
            from .models import size_text

            echo(
                f"its parts are kept in {run.work} ({size_text(_folder_bytes(run.work))}) for the next run; "
                "delete the folder to free the space"
            )


def _folder_bytes(folder: Path) -> int:
    """The bytes of the regular files in `folder` and below (links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _level(run: BookRun, path: str) -> str:
    level = run.report.loudness.get(Path(path).name)
    if not level or level.get("lufs") is None:
        return ""
    peak = "" if level.get("dbtp") is None else f", true peak {level['dbtp']:.1f} dBTP"
    return f" ({level['lufs']:.1f} LUFS{peak})"


def _json_summary(run: BookRun) -> None:
    r = run.report

    def rounded(x):
        return None if x is None else round(x, 4)

    data = {
        "book": str(run.book_path),
        "output": None if run.output is None else str(run.output.path),
        "kind": None if run.output is None else run.output.kind,
        "manifest": None if r.manifest is None else str(r.manifest),
        "chapters": r.chapters,
        "parts": r.parts,
        "done": r.done,
        "skipped": r.skipped,
        "failed": r.failed,
        "pending": r.pending,
        "duration": round(r.duration, 3),
        "audio_seconds": round(r.audio_seconds, 4),
        "seconds": round(r.generate_seconds, 4),
        "load_seconds": rounded(r.load_seconds),
        "total_seconds": round(r.wall_seconds, 4),
        "rtf": rounded(r.rtf),
        "written": r.written,
        "kept": r.kept,
        "parts_folder": None if run.work is None else str(run.work),
        "loudness": r.loudness,
        "warnings": r.warnings,
        "errors": r.errors,
        "interrupted": None if not r.interrupted else signal_name(int(r.interrupted)),
    }
    typer.echo(json.dumps(data, ensure_ascii=False))


def _dry_run(run: BookRun, json_out: bool) -> None:
    """Plan the book (no model, nothing written) and print its chapters."""
    from ..app.book.bookdescribe import describe_book

    run.plan(keep_text=False)
    report = describe_book(run)
    for message in report["warnings"]:
        warn(message)
    out = typer.get_text_stream("stdout")
    if json_out:
        out.write(json.dumps(report, ensure_ascii=False) + "\n")
    else:
        by = f", by {report['author']}" if report["author"] else ""
        lang = f" ({report['language']})" if report["language"] else ""
        out.write(
            visible(f"{report['title'] or run.book_path.name}{by}{lang}")
            + f": {len(report['chapters'])} chapters, {report['words']} words, about {clock(report['seconds'])} of audio\n"
        )
        for c in report["chapters"]:
            file = f" -> {visible(c['file'])}" if c["file"] else ""
            done = " (done)" if c["done"] else ""
            said = visible(", ".join(f"{r['words']} -> {r['say']}" for r in c["replaced"]))
            out.write(
                f"  {c['number']:>3}. {visible(c['title'])}: {c['words']} words, {c['parts']} part(s), "
                f"about {clock(c['seconds'])}{file}{done}\n" + (f"       lexicon: {said}\n" if said else "")
            )
        if report["skipped"]:
            out.write(visible("skipped: " + ", ".join(report["skipped"])) + "\n")
    for message in report["errors"]:
        echo(f"Error: {message}")
    if report["errors"]:
        raise typer.Exit(1)


@with_settings(*BOOK_SETTINGS, *HARDWARE_SETTINGS, *LISTEN_SETTINGS, *MARK_SETTINGS)
def book(
    input: str = typer.Argument(
        ..., metavar="BOOK", show_default=False, help="An .epub, a Markdown file (.md) or a plain-text file."
    ),
    output: Optional[str] = typer.Option(
        None,
        "-o",
        "--output",
        metavar="FILE.m4b|DIR/",
        show_default=False,
        rich_help_panel="Output",
        help="An .m4b audiobook, or a folder for one file per chapter (needed but for --dry-run).",
    ),
    preset: Optional[str] = PRESET_OPTION,
    chapters: Optional[str] = typer.Option(
        None,
        "--chapters",
        metavar="LIST",
        show_default=False,
        rich_help_panel="Input",
        help="Only these chapters (numbered as --dry-run shows them): 3, 3-5, 1,4,7-9, 5- (to the end). Default: all.",
    ),
    titles: bool = typer.Option(
        True, "--titles/--no-titles", rich_help_panel="Input", help="Speak each chapter's title first, then a pause."
    ),
    keep_front_matter: bool = typer.Option(
        False,
        "--keep-front-matter",
        rich_help_panel="Input",
        help="Also speak the cover, contents, copyright and similar pages (skipped by default: docs/book.md).",
    ),
    subtitles: Optional[str] = typer.Option(
        None,
        "--subtitles",
        metavar="srt|vtt",
        show_default=False,
        rich_help_panel="Output",
        help="Also write one subtitle file per chapter (times on the chapter's file; on the .m4b's timeline for an .m4b).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        rich_help_panel="Output",
        help="Load no model, write nothing: print the chapters, words and estimated audio length.",
    ),
    json_out: bool = typer.Option(
        False, "--json", rich_help_panel="Output", help="A JSON report on stdout instead of the summary line."
    ),
    quiet: bool = QUIET_OPTION,
    ray: Optional[str] = RAY_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    gpus_per_worker: Optional[float] = GPUS_PER_WORKER_OPTION,
    flags: dict = NO_FLAGS,
) -> None:
    """Read a book aloud: an .m4b audiobook with chapter marks, or one audio file per chapter."""
    from ..app.book.book import BookRun
    from .common import check_run, cluster_executor, run_session

    subtitles = _subtitles(subtitles)
    chosen = check_run(flags, preset)
    if output is None and not dry_run:
        raise InvalidRequest("-o is missing: give a .m4b file or a folder for the chapters (or --dry-run)")
    executor = None if dry_run else cluster_executor(ray, workers, gpus_per_worker, preset, flags)
    run = BookRun(
        input,
        output,
        preset=chosen,
        flags=flags,
        chapters=chapters,
        titles=titles,
        keep_front_matter=keep_front_matter,
        subtitles=subtitles,
        session=run_session(quiet, unit="parts"),
        bars=lambda: BookBars(enabled=not quiet, echo=echo),
        executor=executor,
    )
    if dry_run:
        _dry_run(run, json_out)
        return
    run.run()
    _summary(run, quiet, json_out)


def _book_default(name: str, default: str) -> None:
    """A setting whose default is the book's own (loudness: -18 LUFS, not off): its --help says so."""
    param = inspect.signature(book).parameters.get(name)
    if param is not None and param.default.help:
        param.default.help = re.sub(r"Default: [^.]*\.$", f"Default: {default} (for book).", param.default.help)


_book_default("loudness", f"{BOOK_LOUDNESS:g}")
