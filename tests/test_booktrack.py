"""`book`'s progress (app/book/booktrack.py, ui/progress.BookBars): the book's parts counted, the
chapter being read named, and an ETA from the measured rate that counts down between parts."""

from __future__ import annotations

import re

import pytest

from omnivoice_cli.app.book import booktrack
from omnivoice_cli.app.book.bookplan import ChapterPlan, PartLine
from omnivoice_cli.app.book.booktrack import BookState, Tracker

BOOK = "# One\n\nHello there. This is the first chapter.\n\n# Two\n\nGood night. The second chapter ends here.\n"


def test_the_lines_off_a_terminal_count_parts_and_name_the_chapter(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "b.md"
    src.write_text(BOOK, encoding="utf-8")
    r = invoke("book", src, "-o", f"{tmp_path / 'out'}/", "--format", "wav", "--voice", "alloy")
    assert r.exit_code == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("parts ")]
    assert lines[0].startswith("parts 1/2, chapters 1/2, ") and lines[0].endswith("; chapter 2 (Two): part 0/1")
    assert re.search(r", eta \d+:\d\d", lines[0])  # measured after the first part
    assert lines[-1].startswith("parts 2/2, chapters 2/2, ") and lines[-1].endswith("eta 0:00")


class Bars:
    """The face's bars on a terminal (steps shown), recording every state."""

    shows_steps = True

    def __init__(self) -> None:
        self.states: list[BookState] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def update(self, state: BookState) -> None:
        self.states.append(state)

    def step(self, done: int, total: int) -> None:
        return None


def test_the_eta_counts_down_between_parts_and_is_measured_again_at_each(tmp_path, monkeypatch):
    lines = [PartLine(i + 1, name=f"p{i}.flac", chapter=c, estimate=10.0) for i, c in enumerate([1, 1, 2])]
    plans = [ChapterPlan(1, "One", "", 1, "01-One", lines[:2]), ChapterPlan(2, "Two", "", 1, "02-Two", lines[2:])]
    total = sum(p.estimate for p in plans)
    now = [100.0]
    monkeypatch.setattr(booktrack.time, "perf_counter", lambda: now[0])
    bars = Bars()
    with Tracker(bars, plans, tmp_path) as tracker:
        tracker.step(1, 8)  # the first forward: the clock starts
        assert bars.states == []  # no ETA to count down yet
        now[0] = 120.0  # 20 s for the first 10 s of audio: 2 s a second
        tracker.finished(lines[0], "done")
        first = bars.states[-1]
        assert first.eta == pytest.approx(2.0 * (total - 10.0))
        assert (first.book_parts_done, first.book_parts, first.chapter, first.parts_done) == (1, 3, 1, 1)
        now[0] = 125.0
        tracker.step(2, 8)  # 5 s later, no part ended: the ETA has moved down by 5 s
        assert bars.states[-1].eta == pytest.approx(first.eta - 5.0)
        now[0] = 180.0  # the second part was slower: 80 s for 20 s of audio, 4 s a second
        tracker.finished(lines[1], "done")
        second = bars.states[-1]
        assert second.eta == pytest.approx(4.0 * (total - second.audio_done))  # chapter 1 done: its silences too
        assert (second.book_parts_done, second.chapters_done, second.chapter, second.title) == (2, 1, 2, "Two")
        now[0] = 10_000.0
        tracker.step(1, 8)
        assert bars.states[-1].eta == 0.0  # late: never below zero


def test_a_plain_line_shows_the_books_parts():
    from omnivoice_cli.ui.progress import BookBars

    shown: list[str] = []
    state = BookState(1, 3, 2, "The Lamp", 1, 2, 75.0, 3600.0, 61.0, book_parts_done=4, book_parts=9)
    with BookBars(enabled=True, live=False, echo=shown.append) as bars:
        bars.update(state)
    assert shown == ["parts 4/9, chapters 1/3, audio 1:15 of about 1:00:00, eta 1:01; chapter 2 (The Lamp): part 1/2"]
