"""`omnivoice book`: a book (EPUB, Markdown, plain text) into an audiobook, on the batch run.

    omnivoice book novel.epub -o novel.m4b --voice alice   # one .m4b: chapter marks, tags, cover
    omnivoice book notes.md -o out/ --format mp3           # one file per chapter: 01-Intro.mp3 ...

The modules of a book, by idea: bookplan.py (the chapters, their parts as typed Text and Pause
segments, the parts' keys), booktrack.py (progress), bookwork.py (the work folder, and the sink the
batch run tells of each part), bookaudio.py (a chapter's audio streamed from its parts),
bookassembly.py (the outputs written from the parts), bookdescribe.py (the dry run); this one the
run. Each output is delivered by deliver.deliver_blocks (media/leveller.Leveller, the one streamed
leveller, then the file or media/m4b.py's .m4b) and its subtitles by deliver.write_cues.

A run (`BookRun`), in order:
  1. read the book (bookread/open.py's open_book: chapters, titles, metadata, cover; front and back matter
     skipped unless --keep-front-matter), keep the chapters --chapters names, and cut each
     chapter into parts: its title (unless --no-titles) and a TITLE_PAUSE, then its paragraphs
     with PARAGRAPH_PAUSE between them, at most PART_CHARS characters a part (a longer chapter
     is cut between paragraphs, else between sentences). Each part is one batch line, planned
     here (BatchRun.plan_line) and handed to the batch run (BatchRun.run(planned=...));
  2. speak the parts with the batch run (batch.BatchRun, composed, not subclassed: its packing
     into Engine.generate calls, its manifest, its executor: this process or --ray's cluster; it
     tells bookwork.PartSink of each part, which writes the part's pieces first and moves the
     bars) into the work folder
     (`novel.m4b.parts/`, or `out/.parts/` for a folder), one lossless FLAC file per part, named
     by the part's content key: a hash of its text and of every setting that changes its audio
     (hardware aside: device, threads, compile). A part whose file exists is not spoken again,
     so a rerun after Ctrl-C or a kill resumes, and a changed chapter text or setting gives new
     keys for the parts it changes and only those are spoken. Seeds: each part's comes from its
     text (and --seed S when given), so an unchanged part is spoken the same way;
  3. once every part is there, assemble each output (bookassembly.Assembly): the whole book for
     .m4b, each chapter for a folder, at one loudness over each whole output (-18 LUFS by
     default, --loudness), never a gain per part; an output whose inputs did not change is not
     written again. Beside them: the chapter list as JSON and, with --subtitles, one subtitle
     file per chapter.

Every file is written to a temporary name and renamed: nothing is ever half-written.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...engine.errors import InvalidRequest, MissingExtra
from ...media.formats import AudioFormat, check_available, format_named
from ...media.loudness import require
from ...media.m4b import BookTags, cover_image
from ..batch.batch import BatchRun
from ..batch.executor import Executor
from ..dryrun import describe
from ..marking import run_mark
from ..session import Session
from ..settings.layers import FLAG_SOURCE, Resolved, resolve
from ..settings.presets import Preset
from ..settings.schema import BOOK_LOUDNESS
from ..settings.setting import SettingsError
from ..signals import HoldSignals, Stop
from .bookassembly import Assembly, Loudness, output_names
from .bookplan import (
    KEY_CHARS,
    PART_FORMAT,
    BookOutput,
    ChapterPlan,
    PartLine,
    book_output,
    chapter_stem,
    lexicon_key,
    parse_chapters,
    part_key,
    part_seed,
    part_text,
    plan_parts,
    settings_key,
)
from .bookread.chapters import Book
from .bookread.open import open_book
from .booktrack import BookProgress, NoBookProgress, Tracker
from .bookwork import PartSink, check_parts, remove_old_parts

BOOK_GROUP_SIZE = 8  # parts per Engine.generate call (it keeps every result of a call until the call ends)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class BookReport:
    chapters: int = 0
    parts: int = 0
    done: int = 0  # parts spoken by this run
    skipped: int = 0  # parts already there
    failed: int = 0
    pending: int = 0
    audio_seconds: float = 0.0  # spoken by this run
    generate_seconds: float = 0.0
    load_seconds: float | None = None
    wall_seconds: float = 0.0
    duration: float = 0.0  # seconds of the book's outputs, all together
    written: list[str] = field(default_factory=list)  # outputs written by this run
    kept: list[str] = field(default_factory=list)  # outputs already up to date
    loudness: dict[str, Loudness | None] = field(default_factory=dict)  # per output
    interrupted: int | None = None
    manifest: Path | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def rtf(self) -> float | None:
        return self.generate_seconds / self.audio_seconds if self.audio_seconds > 0 else None


class BookRun:
    """One book: plan its chapters and parts (no model), speak the parts left on a batch run
    (composed: the planned parts in, each part's end told to bookwork.PartSink), assemble."""

    def __init__(
        self,
        book_path: str | Path,
        output: str | None,
        *,
        preset: Preset | None,
        flags: dict[str, object],
        chapters: str | None = None,
        titles: bool = True,
        keep_front_matter: bool = False,
        subtitles: str | None = None,
        session: Session | None = None,
        bars: Callable[[], BookProgress] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.book_path, self.spec = Path(book_path), output
        self.preset, self.flags = preset, dict(flags)
        self.chapter_spec, self.titles, self.keep_front_matter = chapters, titles, keep_front_matter
        self.subtitles = subtitles
        self.session = session or Session()
        self.bars: Callable[[], BookProgress] = bars or NoBookProgress
        self.report = BookReport()
        self._book: Book | None = None
        self.plans: list[ChapterPlan] = []
        self.lines: list[PartLine] = []  # the parts, each once (chapters may share one)
        self.warnings: list[str] = []  # about the book, found before anything is spoken (its cover)
        self.cover_ok = False  # the book's cover is used (checked as the .m4b writer uses it)
        self.fmt: AudioFormat | None = None
        self.output: BookOutput | None = None if output is None else book_output(output)
        self.work = self._work_folder()
        self.tracker: Tracker | None = None
        self.sink = PartSink(self.work or Path("."))
        part_flags = {k: v for k, v in self.flags.items() if k != "loudness"}  # never per part
        self.parts = BatchRun(
            self.book_path,
            self.work or Path("."),
            preset=preset,
            flags=part_flags,
            executor=executor,
            session=dataclasses.replace(self.session, progress=self._progress),
            sink=self.sink,
        )
        self.parts.group_size = BOOK_GROUP_SIZE

    @property
    def book(self) -> Book:
        if self._book is None:
            raise RuntimeError("the book is read by plan()")
        return self._book

    def _work_folder(self) -> Path | None:
        return None if self.output is None else self.output.work

    def _progress(self, total: int) -> Tracker:
        """The batch run's Progress: the tracker over the book's chapters (made by run())."""
        if self.tracker is None:
            raise RuntimeError("the tracker is made by run()")
        return self.tracker

    def _paths(self) -> tuple[BookOutput, Path]:
        """(-o, the work folder) of a run that writes (run() checks -o is given)."""
        if self.output is None or self.work is None:
            raise InvalidRequest("-o is missing: give a .m4b file or a folder (or --dry-run)")
        return self.output, self.work

    # -- planning ------------------------------------------------------------------------

    def settings(self) -> Resolved:
        layers = [(self.preset.origin, self.preset.settings)] if self.preset else []
        return resolve(*layers, (FLAG_SOURCE, self.flags))

    def loudness_target(self) -> float:
        """The LUFS each output is brought to: the `loudness` setting, else BOOK_LOUDNESS."""
        value = self.settings().get("loudness")
        return BOOK_LOUDNESS if value is None else float(value)

    def audio_format(self) -> AudioFormat | None:
        """The format of a folder's chapter files (the `format` setting); an .m4b is AAC (None)."""
        if self.output is not None and self.output.m4b:
            if "format" in self.flags:
                raise InvalidRequest(
                    f"--format {self.flags['format']} is for a folder output (-o DIR/, one file per chapter): "
                    "an .m4b is AAC"
                )
            return None
        fmt = format_named(self.settings()["format"])
        check_available(fmt)
        return fmt

    def _check_extras(self) -> None:
        """What the outputs need, checked before anything is read or spoken: PyAV for an .m4b,
        pyloudnorm (its filters) for the loudness every output is brought to."""
        if self.output is not None and self.output.m4b:
            try:
                import av  # noqa: F401
            except ImportError:
                raise MissingExtra("writing an .m4b audiobook", "PyAV", "book") from None
        if self.output is not None:
            try:
                require()
            except MissingExtra:
                raise MissingExtra("the loudness of a book's outputs", "pyloudnorm", "book") from None

    def _check_cover(self) -> None:
        """The book's cover checked as the .m4b writer will use it (media/m4b.cover_image: its
        size from the header, then decoded whole), before anything is spoken: one it cannot use
        is left out, with a warning (the book is still written, without a cover)."""
        info = self.book.info
        self.warnings = list(info.warnings)
        self.cover_ok = info.cover is not None
        if info.cover is not None and self.output is not None and self.output.m4b:
            try:
                cover_image(info.cover)
            except InvalidRequest as e:
                self.cover_ok = False
                self.warnings.append(f"{e}; the book is written without it")
        for message in self.warnings:
            self.report.warnings.append(message)

    def plan(self, *, keep_text: bool = True) -> None:
        """Read the book, pick the chapters, cut them into parts and plan each part's request
        (InvalidRequest for the book or the run, or for a part that cannot be planned).
        keep_text=False (a dry run) drops each part's text once it is estimated."""
        self.fmt = self.audio_format()
        self._check_extras()
        self._book = book = open_book(self.book_path, keep_front_matter=self.keep_front_matter)
        self._check_cover()
        if len(book) == 0:
            raise InvalidRequest(f"{self.book_path}: no chapter to speak (every chapter is empty or front matter)")
        numbers = parse_chapters(self.chapter_spec, len(book)) if self.chapter_spec else None
        resolved = self.settings()
        key_settings = settings_key(dict(resolved.values))
        run = self.parts.run_settings()
        width = max(2, len(str(len(book))))
        words = {ref.number: ref.words for ref in book.outline}
        by_name: dict[str, PartLine] = {}
        seed = self.flags.get("seed")
        for chapter in book.chapters(numbers):
            plan = ChapterPlan(
                chapter.number,
                chapter.title,
                chapter.source,
                words.get(chapter.number, 0),
                chapter_stem(chapter.number, chapter.title, width),
            )
            parts = plan_parts(chapter.text, chapter.title if self.titles else None)
            if not parts:  # nothing to say (no title, no words)
                continue
            for i, segments in enumerate(parts, start=1):
                text = part_text(segments)
                keyed, replaced = lexicon_key(text, resolved)
                name = f"{part_key(keyed, key_settings)[:KEY_CHARS]}.{PART_FORMAT}"
                line = by_name.get(name)
                if line is None:
                    line = PartLine(
                        len(by_name) + 1,
                        name=name,
                        text=text,
                        chapter=chapter.number,
                        part=i,
                        parts=len(parts),
                        segments=segments,
                    )
                    for pair in replaced:
                        line.replaced[pair] = line.replaced.get(pair, 0) + 1
                    line.fields = {"output": name, "seed": part_seed(text, seed if isinstance(seed, int) else None)}
                    by_name[name] = self._plan_part(line, run, keep_text)
                plan.parts.append(line)
            self.plans.append(plan)
        if not self.plans:
            raise InvalidRequest(f"{self.book_path}: the chapters picked have nothing to speak")
        self.lines = list(by_name.values())
        self.report.chapters, self.report.parts = len(self.plans), len(self.lines)

    def _plan_part(self, line: PartLine, run: Resolved, keep: bool) -> PartLine:
        """Plan one part's request on the batch run and estimate its length (or fail it). The
        part as spoken has no loudness of its own (a preset's `loudness` is the book's, over each
        whole output, never a part's)."""
        try:
            self.parts.plan_line(line, run, 4)
            built = line.built
            assert built is not None  # plan_line built it, or raised
            if built.settings.get("loudness") is not None:
                built.settings = built.settings.with_values({"loudness": None})
            described = describe(built)
            line.estimate, line.pieces = float(described["seconds"]), len(described["pieces"])
        except MissingExtra:
            raise
        except (InvalidRequest, SettingsError) as e:
            # Every part has the run's settings (a book has no per-line fields): what one part
            # cannot be planned with, none can. The run stops before anything is spoken (exit 2).
            message = str(e)
            if not message.startswith("--"):  # about this part's text, not a flag
                line.fail(message)
                message = line.error or message
            raise InvalidRequest(message) from None
        if not keep:
            line.text, line.built, line.segments = None, None, ()
        return line

    # -- speaking ------------------------------------------------------------------------

    def _warn_voice(self, work: Path) -> None:
        values = self.settings()
        to_speak = any(not (work / p.name).exists() for p in self.lines if p.name)
        if values["voice"] is None and values["ref"] is None and to_speak:
            message = (
                "no --voice or --ref: each part of the book is spoken in a voice the model makes up for it; "
                "give --voice NAME or --ref FILE for one narrator"
            )
            self.report.warnings.append(message)
            self.session.echo(f"Warning: {message}")

    def run(self) -> BookReport:
        """Plan (unless done), speak the parts left, then assemble the outputs. Per-part problems
        go to echo and the manifest; the book is assembled only when every part is there."""
        t_start = time.perf_counter()
        _, work = self._paths()
        if not self.plans:
            self.plan()
        for message in self.warnings:
            self.session.echo(f"Warning: {message}")
        self._check_outputs()
        self.check_parts(remove=True)
        self._warn_voice(work)
        self.tracker = self.sink.tracker = Tracker(self.bars(), self.plans, work)
        batch = self.parts.run(planned=list(self.lines))
        r = self.report
        r.done, r.skipped, r.failed, r.pending = batch.done, batch.skipped, batch.failed, batch.pending
        r.audio_seconds, r.generate_seconds, r.load_seconds = (
            batch.audio_seconds,
            batch.generate_seconds,
            batch.load_seconds,
        )
        r.manifest, r.interrupted = batch.manifest, batch.interrupted
        r.warnings += batch.warnings
        r.errors = [ln.error for ln in self.lines if ln.status == "failed" and ln.error]
        if not r.interrupted and not r.failed and not r.pending:
            self._assemble_held()
        r.wall_seconds = time.perf_counter() - t_start
        return r

    def _folder(self) -> Path:
        """Where the outputs go: -o for a folder, the .m4b's folder."""
        return self._paths()[0].folder

    def _check_outputs(self) -> None:
        """Before the model loads: the outputs' folder made (or there) and writable, no folder
        where an output file goes (InvalidRequest, one line)."""
        folder = self._folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InvalidRequest(f"-o {self.spec}: cannot make the folder {folder}: {e.strerror or e}") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InvalidRequest(f"-o {self.spec}: the folder {folder} is not writable")
        for name in self._output_names():
            if (folder / name).is_dir():
                raise InvalidRequest(f"-o {self.spec}: {folder / name} is a folder: remove it or give another -o")

    def check_parts(self, *, remove: bool) -> set[str]:
        """The parts in the work folder the manifest vouches for (bookwork.check_parts); with
        `remove`, anything else in a part's place is deleted, so it is spoken again."""
        return check_parts(self.work, self.lines, remove=remove)

    def _assemble_held(self) -> None:
        """Assemble with Ctrl-C and SIGTERM turned into a Stop between two blocks of audio (never
        inside an encoder's callback): the output being written is then dropped, not left half."""
        try:
            with HoldSignals() as signals, signals.protect():
                self.assemble(signals)
        except Stop as stop:  # from a block of audio, or as the block ends
            self.report.interrupted = stop.signum
        if not self.chapter_spec and not self.report.interrupted:
            remove_old_parts(self._paths()[1], self.lines)

    # -- assembling ----------------------------------------------------------------------

    def assemble(self, signals: HoldSignals | None = None) -> None:
        """Write the outputs from the parts (every part must be in the work folder): an
        Assembly (bookassembly.py), what it wrote and kept in the report."""
        output, work = self._paths()
        assembly = Assembly(
            self.plans,
            self.lines,
            output,
            work,
            self.fmt,
            self.loudness_target(),
            self.tags(),
            self.subtitles,
            self._warn_output,
            run_mark(self.settings()),
        )
        try:
            assembly.write(signals)
        finally:
            r = self.report
            r.written += assembly.written
            r.kept += assembly.kept
            r.loudness.update(assembly.levels)
            r.duration = assembly.duration

    def _warn_output(self, message: str) -> None:
        self.report.warnings.append(message)
        self.session.echo(f"Warning: {message}")

    def _output_names(self) -> list[str]:
        return output_names(self._paths()[0], self.fmt, self.plans)

    def tags(self) -> BookTags:
        info = self.book.info
        title = info.title or self.book_path.stem
        language = info.language or self.settings().get("lang")
        return BookTags(
            title=title,
            author=info.author,
            album=title,
            language=str(language) if language is not None else None,
            cover=info.cover if self.cover_ok else None,
            cover_type=info.cover_type if self.cover_ok else None,
        )
