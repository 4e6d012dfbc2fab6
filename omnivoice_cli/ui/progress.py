"""Progress on stderr: a status while the model loads, bars while it speaks.

On a terminal these are rich live displays (a spinner, then bars with an ETA). When stderr is not
a terminal (a log file, a pipe), a live display would print nothing until the end, so they print
plain lines instead: one when loading starts, one per quarter of the steps of `say`, one per
finished line of `batch` (cue of `dub`), so that a log shows the run is alive.

One live display at a time: the bars of `batch` and `dub` start with the first forward (after the
model is loaded), and a message printed while one is live (`print_above`, which the commands' echo
uses) goes above it, so no half-drawn bar is left behind in the terminal.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:  # rich is imported when a bar is shown, never by --help
    from rich.console import Console
    from rich.progress import Progress, TaskID

Echo = Callable[[str], None]


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _echo(msg: str) -> None:
    if not print_above(msg):
        print(msg, file=sys.stderr, flush=True)


_LIVE: list = []  # the rich consoles of the live displays now shown (a spinner, bars), innermost last


def print_above(msg: str) -> bool:
    """Print a message above the live display now shown, if any (True); False when none is, and the
    caller prints it itself. (Written past the display, it would leave a copy of the bar behind.)"""
    if not _LIVE:
        return False
    _LIVE[-1].print(msg, markup=False, highlight=False, emoji=False, soft_wrap=True)
    return True


@contextmanager
def _live_on(console) -> Iterator[None]:
    _LIVE.append(console)
    try:
        yield
    finally:
        _LIVE.remove(console)


def _bar(*columns):
    """A transient rich progress display on stderr: the given columns, a bar, n/total, elapsed, ETA."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        *columns,
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )


@contextmanager
def status(message: str, enabled: bool, live: bool | None = None, echo: Echo = _echo) -> Iterator[None]:
    """`message` while the block runs: a spinner on a terminal (a line above a live display
    already shown), else one line."""
    if not enabled:
        yield
        return
    live = stderr_is_terminal() if live is None else live
    if not live or _LIVE:
        echo(message)
        yield
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(message), _live_on(console):
        yield


class StepProgress:
    """The steps of `say`, advanced by the engine's on_step(done, total).

    `total`, when the caller knows it before the run (the plan's steps: Plan.steps), is the bar's total
    from the start and never changes. Without it the bar takes the engine's totals, which may be
    estimates (a long text's later chunks, streamed waves); the engine may also run several
    forward loops, each counting from 1 to its own total, and the bar adds them up."""

    def __init__(
        self,
        enabled: bool,
        label: str = "generating",
        live: bool | None = None,
        echo: Echo = _echo,
        total: int | None = None,
    ) -> None:
        self.enabled, self.label, self.echo = enabled, label, echo
        self.live = stderr_is_terminal() if live is None else live
        self.fixed = total if total else None
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._console: Console | None = None
        self._offset = 0  # steps of finished loops
        self._last = (0, 0)  # (done, total) of the current loop
        self._quarter = 0  # plain lines printed so far (one per quarter)
        self._t0 = time.perf_counter()
        self.completed = 0  # steps done, all loops
        self.total = self.fixed or 0  # steps known so far, all loops (the fixed total when given)
        self.totals: list[int] = []  # every total the bar showed, in order (a test reads it)

    def __enter__(self) -> "StepProgress":
        self._t0 = time.perf_counter()
        if self.enabled and self.live:
            from rich.progress import TextColumn

            self._progress = _bar(TextColumn(self.label.replace("[", "\\[")), TextColumn("steps"))
            self._progress.start()
            self._task = self._progress.add_task("generating", total=self.fixed)
            self._console = self._progress.console
            _LIVE.append(self._console)
        return self

    def __call__(self, done: int, total: int) -> None:
        last_done, last_total = self._last
        if done < last_done or (done == last_done and done == last_total and last_total):
            self._offset += last_total  # a new forward loop started
        self._last = (done, total)
        self.completed = self._offset + done
        # a fixed total holds unless the run outgrows it (it should not: then the engine's)
        self.total = max(self.fixed, self.completed) if self.fixed else self._offset + total
        if not self.totals or self.totals[-1] != self.total:
            self.totals.append(self.total)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.completed, total=self.total)
        elif self.enabled and self.total:
            quarter = 4 * self.completed // self.total
            if quarter > self._quarter:
                self._quarter = quarter
                seconds = time.perf_counter() - self._t0
                self.echo(f"{self.label}: {self.completed}/{self.total} steps, {seconds:.1f} s")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
            _LIVE.remove(self._console)


class BatchProgress:
    """Two bars for `batch` (and `dub`, counting cues): items done / failed / skipped, moving as
    each one finishes, and the steps of the current forward loop. Not on a terminal: one plain
    line per finished item. The app layer sees it as a session.Progress (commands/ pass it in).

    On a terminal the bars start with the first forward (`step`) or finished item, not when the
    block is entered: the model is loaded in between, under its own spinner, and a run whose items
    are all skipped shows no bar at all."""

    def __init__(
        self, total_lines: int, enabled: bool, live: bool | None = None, echo: Echo = _echo, unit: str = "lines"
    ) -> None:
        self.total, self.enabled, self.echo, self.unit = total_lines, enabled, echo, unit
        self.live = stderr_is_terminal() if live is None else live
        self.done = self.failed = self.skipped = 0
        self._progress: Progress | None = None
        self._console: Console | None = None
        self._inside = False
        self._t0 = time.perf_counter()

    @property
    def shows_steps(self) -> bool:
        """Whether step() shows anything (the bars, on a terminal): session.Progress."""
        return self.enabled and self.live

    def __enter__(self) -> "BatchProgress":
        self._t0 = time.perf_counter()
        self._inside = True
        return self

    def _start(self) -> None:
        """Show the bars (on a terminal, inside the block, once)."""
        if self._progress is not None or not (self.enabled and self.live and self._inside):
            return
        from rich.progress import TextColumn

        self._progress = _bar(TextColumn("{task.description:>5}"), TextColumn("{task.fields[info]}"))
        self._progress.start()
        self._lines = self._progress.add_task(self.unit, total=self.total, info="")
        self._steps = self._progress.add_task("steps", total=None, info="current forward loop")
        self._console = self._progress.console
        _LIVE.append(self._console)
        self._refresh()

    def line(self, status: str, what: str = "") -> None:
        """An item finished: status is done, failed or skipped; `what` names it for the log."""
        if status == "done":
            self.done += 1
            self._start()
        elif status == "failed":
            self.failed += 1
        elif status == "skipped":
            self.skipped += 1
        self._refresh()
        if self.enabled and not self.live and status != "skipped":
            count = self.done + self.failed + self.skipped
            seconds = time.perf_counter() - self._t0
            self.echo(f"[{count}/{self.total}] {status}{': ' + what if what else ''} ({seconds:.1f} s)")

    def step(self, done: int, total: int) -> None:
        self._start()
        if self._progress is not None:
            self._progress.update(self._steps, completed=done, total=total)

    def _refresh(self) -> None:
        if self._progress is not None:
            info = f"done {self.done} · failed {self.failed} · skipped {self.skipped}"
            self._progress.update(self._lines, completed=self.done + self.failed + self.skipped, info=info)

    def __exit__(self, *exc) -> None:
        self._inside = False
        if self._progress is not None:
            self._progress.stop()
            _LIVE.remove(self._console)
            self._progress = None


class DownloadProgress:
    """A download's bytes, advanced by the engine's on_progress(done_bytes, total_bytes): a bar with
    the transfer speed on a terminal, else a plain line every tenth of the total."""

    def __init__(self, what: str, enabled: bool, live: bool | None = None, echo: Echo = _echo):
        self.what, self.enabled, self.echo = what, enabled, echo
        self.live = stderr_is_terminal() if live is None else live
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._tenth = 0

    def __enter__(self) -> "DownloadProgress":
        if self.enabled and self.live:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            self._progress = Progress(
                TextColumn(f"downloading {self.what}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("download", total=None)
            _LIVE.append(self._progress.console)
        return self

    def __call__(self, done: int, total: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done, total=total or None)
        elif self.enabled and total:
            tenth = 10 * done // total
            if tenth > self._tenth:
                self._tenth = tenth
                self.echo(f"downloading {self.what}: {done / 1e6:.0f} of {total / 1e6:.0f} MB")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
            _LIVE.remove(self._progress.console)


def clock(seconds: float | None) -> str:
    """1:02:03, 4:05 (h:mm:ss, m:ss); '?' for None."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    h, m, s = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class BookBars:
    """The bars of `book` (app/book.BookProgress): the whole book, in estimated seconds of audio
    with the ETA the run measures; the current chapter's parts; the steps of the current forward
    loop. Not on a terminal: one plain line per finished part. Shown from the first forward."""

    def __init__(self, enabled: bool, live: bool | None = None, echo: Echo = _echo) -> None:
        self.enabled, self.echo = enabled, echo
        self.live = stderr_is_terminal() if live is None else live
        self._progress: Progress | None = None
        self._console: Console | None = None
        self._inside = False
        self.states: list = []  # every state shown (a test reads them)

    @property
    def shows_steps(self) -> bool:
        return self.enabled and self.live

    def __enter__(self) -> "BookBars":
        self._inside = True
        return self

    def _start(self) -> None:
        if self._progress is not None or not (self.enabled and self.live and self._inside):
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(  # the ETA is the run's own (over the whole book), in `info`
            TextColumn("{task.description:>7}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._book = self._progress.add_task("book", total=None, info="")
        self._chapter = self._progress.add_task("chapter", total=None, info="")
        self._steps = self._progress.add_task("steps", total=None, info="current forward loop")
        self._console = self._progress.console
        _LIVE.append(self._console)

    @staticmethod
    def describe(state) -> str:
        """One line for a state: the book's parts and chapters, audio, ETA, the chapter being read
        and its parts."""
        parts = f"parts {state.book_parts_done}/{state.book_parts}, " if state.book_parts else ""
        line = (
            f"{parts}chapters {state.chapters_done}/{state.chapters}, audio {clock(state.audio_done)} of about "
            f"{clock(state.audio_total)}, eta {clock(state.eta)}"
        )
        if state.chapter is not None:
            from .text import visible  # the book's own title: its control characters made visible

            line += f"; chapter {state.chapter} ({visible(state.title)}): part {state.parts_done}/{state.parts}"
        return line + (f"; {state.failed} failed" if state.failed else "")

    def update(self, state) -> None:
        self.states.append(state)
        self._start()
        if self._progress is not None:
            parts = f"parts {state.book_parts_done}/{state.book_parts} · " if state.book_parts else ""
            book = f"{parts}chapters {state.chapters_done}/{state.chapters} · eta {clock(state.eta)}"
            self._progress.update(self._book, completed=state.audio_done, total=state.audio_total or None, info=book)
            from rich.markup import escape

            from .text import visible

            title = state.title if len(state.title) <= 40 else state.title[:37] + "..."
            title = escape(visible(title))  # the book's text: no control characters, no rich markup
            title = f"{state.chapter}. {title}" if state.chapter is not None else title  # the chapter being read
            self._progress.update(self._chapter, completed=state.parts_done, total=state.parts or None, info=title)
        elif self.enabled and not self.live:
            self.echo(self.describe(state))

    def step(self, done: int, total: int) -> None:
        self._start()
        if self._progress is not None:
            self._progress.update(self._steps, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        self._inside = False
        if self._progress is not None:
            self._progress.stop()
            _LIVE.remove(self._console)
            self._progress = None
