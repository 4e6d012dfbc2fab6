"""A book's outputs assembled from its parts (step 3 of the book's run, book.py): the whole book
for an .m4b, each chapter for a folder, once every part is in the work folder.

A chapter is CHAPTER_LEAD of silence, its parts (PARAGRAPH_PAUSE between two), then CHAPTER_TAIL
of silence (bookaudio.py streams it from its parts). Each whole output goes through
deliver.deliver_blocks: its loudness measured (ITU-R BS.1770) and one gain bringing it to the
target, with a true-peak limiter at PEAK_DBTP, never a gain per part; then the file, or
media/m4b.py's .m4b with its chapter marks, tags and cover. An output whose inputs did not change
(its key: the parts' names and sha256, the layout, the format; book.json in the work folder keeps
each output's key and the file's size and sha256) is not written again, so finished chapter files
stay byte for byte. Beside them: the chapter list as JSON and, with --subtitles, one subtitle file
per chapter (times on that chapter's file in a folder, on the .m4b's timeline for an .m4b).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ...engine.errors import OmniVoiceError
from ...media.formats import AudioFormat
from ...media.leveller import LoudnessReport
from ...media.m4b import BookTags, ChapterMark, write_chapters_json
from ...media.marks import Mark
from ..batch.folder import remove_stale_temporaries
from ..batch.manifest import fingerprint, is_recorded
from ..deliver import Chapters, deliver_blocks
from ..signals import HoldSignals
from .bookaudio import Layout, chapter_blocks, chapter_layout, frames_of, part_info, write_chapter_subtitles
from .bookplan import CHAPTER_LEAD, CHAPTER_TAIL, PARAGRAPH_PAUSE, PEAK_DBTP, BookOutput, ChapterPlan, PartLine
from .bookwork import STATE, State, pieces_name, read_state, write_json

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np

CHAPTERS_JSON = "chapters.json"  # a folder's chapter list (an .m4b's: NAME.chapters.json beside it)
Loudness = dict[str, object]  # leveller.LoudnessReport.as_dict() and its "warning"


def chapters_json(m4b: Path) -> Path:
    """An .m4b's chapter list, beside it."""
    return m4b.with_name(m4b.stem + ".chapters.json")


def output_names(output: BookOutput, fmt: AudioFormat | None, plans: list[ChapterPlan]) -> list[str]:
    """The files the outputs are, in their folder (BookOutput.folder): the .m4b or each chapter's
    file, and the chapter list."""
    if output.m4b:
        return [output.path.name, chapters_json(output.path).name]
    extension = fmt.extension if fmt is not None else ""
    return [plan.stem + extension for plan in plans] + [CHAPTERS_JSON]


def _loudness(rep: LoudnessReport) -> Loudness:
    """An output's loudness as book.json and the report keep it: the leveller's report and its warning."""
    return {**rep.as_dict(), "warning": rep.warning()}


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Assembly:
    """The outputs of a planned book written from its parts in the work folder (see the module
    doc): what was written, what was kept, each output's loudness and the book's duration."""

    plans: list[ChapterPlan]
    lines: list[PartLine]  # the parts, each once
    output: BookOutput  # -o: the .m4b, or the folder
    work: Path  # the work folder (the parts, book.json)
    fmt: AudioFormat | None  # a folder's chapter files' format (None: an .m4b)
    loudness: float  # the LUFS each output is brought to
    tags: BookTags
    subtitles: str | None  # "srt" | "vtt": one subtitle file per chapter
    warn: Callable[[str], None]  # a warning about an output (its loudness)
    mark: Mark | None = None  # the AI mark of every output (app/marking.run_mark; None: --no-mark)
    written: list[str] = field(default_factory=list)  # outputs written
    kept: list[str] = field(default_factory=list)  # outputs already up to date
    levels: dict[str, Loudness | None] = field(default_factory=dict)  # per output
    duration: float = 0.0  # seconds of the book's outputs, all together
    sha: dict[str, str] = field(default_factory=dict)  # each part's sha256, checked
    state: State = field(default_factory=lambda: State(outputs={}))  # book.json

    def write(self, signals: HoldSignals | None = None) -> None:
        """Write the outputs from the parts (every part must be in the work folder)."""
        work = self.work
        self.sha = {}  # each part's sha256, as its record gives it and as checked
        for line in self.lines:
            if line.record is None or not is_recorded(work, line.name, line.record):
                for path in (work / line.name, work / pieces_name(line.name)):
                    if path.is_symlink() or path.is_file():
                        path.unlink()
                raise OmniVoiceError(
                    f"{work / line.name} changed while the book was spoken: it is deleted, "
                    "run the same command again to speak it again"
                )
            self.sha[line.name] = str(line.record["sha256"])
        sr = part_info(work / self.plans[0].parts[0].name)[0]
        layouts = [chapter_layout(work, plan, sr) for plan in self.plans]
        self.state = read_state(work / STATE)
        remove_stale_temporaries(self.output.folder, output_names(self.output, self.fmt, self.plans))
        if self.output.m4b:
            self._write_m4b(layouts, sr, signals)
        else:
            self._write_folder(layouts, sr, signals)

    def _chapter_key(self, plan: ChapterPlan, sr: int) -> str:
        parts = [p.name for p in plan.parts]
        sha = [self.sha.get(p.name) for p in plan.parts]  # what is in them, as checked
        layout = [CHAPTER_LEAD, PARAGRAPH_PAUSE, CHAPTER_TAIL, sr, PEAK_DBTP, self.loudness]
        fmt = self.fmt.name if self.fmt is not None else "m4b"
        marked = self.mark.model if self.mark is not None else None  # on or off, not the day: a rerun keeps it
        return _digest({"parts": parts, "sha256": sha, "layout": layout, "format": fmt, "mark": marked})

    def _up_to_date(self, path: Path, key: str) -> bool:
        """Whether the output is there as written from these parts: its key (the parts' names
        and sha256, the layout) and the file itself (its size and sha256, checked)."""
        entry = self.state["outputs"].get(path.name)
        if not isinstance(entry, dict) or entry.get("key") != key:
            return False
        return is_recorded(path.parent, path.name, {"bytes": entry.get("size"), "sha256": entry.get("sha256")})

    def _written(self, path: Path, key: str, duration: float, level: Loudness | None) -> None:
        """Record an output just written (state saved at once: a kill keeps what is done)."""
        fp = fingerprint(path)
        entry: dict[str, object] = {"key": key, "size": fp["bytes"], "sha256": fp["sha256"]}
        entry["duration"], entry["loudness"] = round(duration, 3), level
        self.state["outputs"][path.name] = entry
        write_json(self.work / STATE, self.state)
        self.written.append(str(path))
        self.levels[path.name] = level
        warning = level.get("warning") if level else None
        if warning:
            self.warn(f"{path.name}: {warning}")

    def _kept(self, path: Path) -> None:
        self.kept.append(str(path))
        level = self.state["outputs"][path.name].get("loudness")
        self.levels[path.name] = level if isinstance(level, dict) else None

    def _write_m4b(self, layouts: list[Layout], sr: int, signals: HoldSignals | None) -> None:
        output, work = self.output.path, self.work
        marks, start = [], 0
        for plan, layout in zip(self.plans, layouts):
            frames = frames_of(layout)
            marks.append(ChapterMark(plan.title, start / sr, (start + frames) / sr))
            start += frames
        tags = self.tags
        cover = hashlib.sha256(tags.cover).hexdigest() if tags.cover else None
        fields = {k: v for k, v in dataclasses.asdict(tags).items() if k != "cover"}
        key = _digest({"chapters": [self._chapter_key(p, sr) for p in self.plans], "tags": fields, "cover": cover})
        titled = [ChapterMark(p.title, m.start, m.end) for p, m in zip(self.plans, marks)]
        if self._up_to_date(output, key):
            self._kept(output)
        else:

            def chunks() -> Iterator[np.ndarray]:
                for layout in layouts:
                    yield from chapter_blocks(layout, signals)

            chapters = Chapters(titled, tags)
            loud, duration = deliver_blocks(
                chunks, sr, output, loudness=self.loudness, ceiling=PEAK_DBTP, chapters=chapters, mark=self.mark
            )
            self._written(output, key, duration, _loudness(loud))
        self.duration = start / sr
        write_chapters_json(chapters_json(output), titled, tags)
        if self.subtitles:
            for plan, layout, mark in zip(self.plans, layouts, marks):
                path = output.with_name(f"{output.stem}.{plan.stem}.{self.subtitles}")
                write_chapter_subtitles(path, work, layout, round(mark.start * sr), sr)

    def _write_folder(self, layouts: list[Layout], sr: int, signals: HoldSignals | None) -> None:
        output, work = self.output.path, self.work
        fmt = self.fmt
        assert fmt is not None  # a folder's format (audio_format, planned)
        marks, files, start = [], [], 0
        for plan, layout in zip(self.plans, layouts):
            frames = frames_of(layout)
            path = output / (plan.stem + fmt.extension)
            key = self._chapter_key(plan, sr)
            if self._up_to_date(path, key):
                self._kept(path)
            else:
                chunks = functools.partial(chapter_blocks, layout, signals)
                loud, seconds = deliver_blocks(
                    chunks, sr, path, loudness=self.loudness, ceiling=PEAK_DBTP, fmt=fmt, frames=frames, mark=self.mark
                )
                self._written(path, key, seconds, _loudness(loud))
            if self.subtitles:
                write_chapter_subtitles(path.with_suffix("." + self.subtitles), work, layout, 0, sr)
            marks.append(ChapterMark(plan.title, start / sr, (start + frames) / sr))
            files.append(path.name)
            start += frames
        self.duration = start / sr
        write_chapters_json(output / CHAPTERS_JSON, marks, self.tags, files)
