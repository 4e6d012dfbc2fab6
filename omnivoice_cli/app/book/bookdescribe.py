"""`omnivoice book --dry-run`: a planned book described (no model, nothing written): the book, each
chapter (words, parts, the engine's pieces, estimated seconds, its file, whether its parts are all
done, what the lexicon replaced in it), what was skipped, and the errors of parts that cannot be
spoken (`describe_book`, typed as `BookDescription`)."""

from __future__ import annotations

from typing import TypedDict

from .book import BookRun
from .bookplan import ChapterPlan


class Replaced(TypedDict):
    words: str
    say: str
    times: int


class ChapterDescription(TypedDict):
    number: int
    title: str
    source: str
    words: int
    parts: int
    pieces: int
    seconds: float
    file: str | None
    done: bool
    replaced: list[Replaced]


class BookDescription(TypedDict):
    book: str
    format: str
    title: str | None
    author: str | None
    language: str | None
    cover: str | None
    output: str | None
    kind: str | None
    chapters: list[ChapterDescription]
    words: int
    seconds: float
    skipped: list[str]
    loudness: float
    errors: list[str]
    warnings: list[str]


def _replaced(plan: ChapterPlan) -> list[Replaced]:
    """What the lexicon replaced in a chapter: each (words, replacement) once, in the order first
    met, with the times it was replaced."""
    times: dict[tuple[str, str], int] = {}
    for part in plan.parts:
        for pair, n in part.replaced.items():
            times[pair] = times.get(pair, 0) + n
    return [{"words": w, "say": say, "times": n} for (w, say), n in times.items()]


def describe_book(run: BookRun) -> BookDescription:
    """The dry run of a planned book (no model, nothing written): the book, each chapter (words,
    parts, the engine's pieces, estimated seconds, its file, whether its parts are all done,
    what the lexicon replaced in it),
    what was skipped, and the errors of parts that cannot be spoken."""
    info = run.book.info
    chapters: list[ChapterDescription] = []
    good = run.check_parts(remove=False)  # done: a part the manifest vouches for (nothing deleted)
    words, seconds = 0, 0.0
    for plan in run.plans:
        file = (
            plan.stem + run.fmt.extension
            if run.output is not None and not run.output.m4b and run.fmt is not None
            else None
        )
        done = all(p.name in good for p in plan.parts)
        estimate = round(plan.estimate, 2)
        words, seconds = words + plan.words, seconds + estimate
        chapters.append(
            {
                "number": plan.number,
                "title": plan.title,
                "source": plan.source,
                "words": plan.words,
                "parts": len(plan.parts),
                "pieces": sum(p.pieces for p in plan.parts),
                "seconds": estimate,
                "file": file,
                "done": done,
                "replaced": _replaced(plan),
            }
        )
    return {
        "book": str(run.book_path),
        "format": info.format,
        "title": info.title,
        "author": info.author,
        "language": info.language,
        "cover": info.cover_type if run.cover_ok else None,
        "output": None if run.output is None else str(run.output.path),
        "kind": None if run.output is None else run.output.kind,
        "chapters": chapters,
        "words": words,
        "seconds": round(seconds, 2),
        "skipped": list(info.skipped),
        "loudness": run.loudness_target(),
        "errors": [ln.error for ln in run.lines if ln.error is not None],
        "warnings": list(run.warnings),
    }
