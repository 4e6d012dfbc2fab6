"""The progress of a book run: BookState (where it stands) for the face's bars (BookProgress,
ui/progress.BookBars), and the Tracker, the batch run's Progress that counts parts per chapter."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..batch.batchinput import Line
from ..session import NoProgress
from .bookplan import ChapterPlan


@dataclass(frozen=True)
class BookState:
    """Where a book run stands, for the face's bars: chapters, the current chapter's parts, and
    the audio (the engine's estimates) done, with an ETA from the rate measured so far."""

    chapters_done: int
    chapters: int
    chapter: int | None  # the number of the first chapter not done (None: all done)
    title: str
    parts_done: int  # of that chapter
    parts: int
    audio_done: float  # estimated seconds of audio whose parts are done (resumed ones too)
    audio_total: float
    eta: float | None  # seconds left, once a part was spoken in this run
    failed: int = 0  # parts
    book_parts_done: int = 0  # of the whole book (resumed ones too)
    book_parts: int = 0


class BookProgress(Protocol):
    """What the face's bars implement (ui/progress.BookBars)."""

    @property
    def shows_steps(self) -> bool: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> object: ...

    def update(self, state: BookState) -> None: ...

    def step(self, done: int, total: int) -> None: ...


class NoBookProgress(NoProgress):
    def update(self, state: BookState) -> None:
        return None


class Tracker:
    """The batch run's Progress for a book: it counts parts per chapter and hands BookState to
    the face's bars as each part ends (in time linear in the parts: a book may have thousands).

    The ETA is the time per estimated second of audio spoken in this run, times the estimated
    seconds left, measured again as each part ends; between two ends it counts down with the
    clock (at each step, on a live terminal), so it moves while a long part is spoken."""

    def __init__(self, bars: BookProgress, chapters: list[ChapterPlan], work: Path) -> None:
        self.bars, self.chapters, self.work = bars, chapters, work
        self.where: dict[str, list[int]] = {}  # a part's name -> the chapters (indices) that have it
        for i, ch in enumerate(chapters):
            for p in ch.parts:
                self.where.setdefault(p.name, []).append(i)
        self.left = [len(ch.parts) for ch in chapters]  # parts not done, per chapter
        self.total = sum(ch.estimate for ch in chapters)
        self.done: set[str] = set()
        self.audio_done = 0.0  # estimated seconds of the parts done, and of the chapters' silences
        self.chapters_done = 0
        self.first = 0  # the first chapter not done
        self.failed = 0
        self.t0: float | None = None  # the first forward of this run
        self.spoken = 0.0  # estimated seconds spoken in this run
        self.measured: tuple[float, float] | None = None  # (when, the ETA then) at the last part's end
        self.parts = len(self.where)  # distinct parts: one shared by chapters is spoken once
        self.shows_steps = bars.shows_steps

    def __enter__(self) -> "Tracker":
        self.bars.__enter__()
        for name in self.where:
            if (self.work / name).exists():  # what the batch will skip
                self._mark(name)
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.__exit__(*exc)

    def line(self, status: str, what: str = "") -> None:
        return None  # told by finished(), which knows the part

    def step(self, done: int, total: int) -> None:
        if self.t0 is None:
            self.t0 = time.perf_counter()
        self.bars.step(done, total)
        if self.shows_steps and self.measured is not None:  # the ETA counts down between parts
            self.bars.update(self.state())

    def _mark(self, name: str) -> float:
        """A part is done: count it in its chapters; its estimated seconds."""
        if name in self.done or name not in self.where:
            return 0.0
        self.done.add(name)
        for i in self.where[name]:
            ch = self.chapters[i]
            self.left[i] -= sum(p.name == name for p in ch.parts)
            self.audio_done += sum(p.estimate for p in ch.parts if p.name == name)
            if self.left[i] == 0:
                self.chapters_done += 1
                self.audio_done += ch.estimate - sum(p.estimate for p in ch.parts)  # its silences
        while self.first < len(self.chapters) and self.left[self.first] == 0:
            self.first += 1
        return next(p.estimate for p in self.chapters[self.where[name][0]].parts if p.name == name)

    def finished(self, line: Line, status: str) -> None:
        """A part ended (status: done or failed): its chapters counted, the bars told."""
        if status == "done" and line.name:
            self.spoken += self._mark(line.name)
        else:
            self.failed += 1
        if self.spoken > 0 and self.t0 is not None:
            now = time.perf_counter()
            self.measured = (now, (now - self.t0) / self.spoken * max(0.0, self.total - self.audio_done))
        self.bars.update(self.state())

    def eta(self) -> float | None:
        """Seconds left: the last measured ETA less the time since (None before a part is spoken)."""
        if self.measured is None:
            return None
        when, eta = self.measured
        return max(0.0, eta - (time.perf_counter() - when))

    def state(self) -> BookState:
        current = self.chapters[self.first] if self.first < len(self.chapters) else None
        return BookState(
            chapters_done=self.chapters_done,
            chapters=len(self.chapters),
            chapter=current.number if current else None,
            title=current.title if current else "",
            parts_done=len(current.parts) - self.left[self.first] if current else 0,
            parts=len(current.parts) if current else 0,
            audio_done=self.audio_done,
            audio_total=self.total,
            eta=self.eta(),
            failed=self.failed,
            book_parts_done=len(self.done),
            book_parts=self.parts,
        )
