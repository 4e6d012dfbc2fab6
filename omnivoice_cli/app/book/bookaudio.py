"""A chapter's audio, streamed from its parts (never held whole): the chapter's layout (the
lead-in silence, its parts with the pauses between, the tail), its blocks, and its subtitles'
cues from the parts' pieces. What is written, and how it is levelled, is deliver.py's
(`deliver_blocks`, `write_cues`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Union

from ...engine.errors import OmniVoiceError
from ...media.subtitles import finish_subtitles, subtitles_from_pieces
from ..batch.manifest import open_regular
from ..deliver import write_cues
from ..signals import HoldSignals, Stop
from .bookplan import CHAPTER_LEAD, CHAPTER_TAIL, PARAGRAPH_PAUSE, ChapterPlan
from .bookwork import pieces_name, read_pieces

if TYPE_CHECKING:
    import numpy as np

BLOCK = 1 << 16  # samples read from a part at a time


@dataclass(frozen=True)
class Silence:
    frames: int


@dataclass(frozen=True)
class PartAudio:
    path: Path  # a part in the work folder
    frames: int


Span = Union[Silence, PartAudio]  # a stretch of a chapter's audio
Layout = list[Span]


def frames_of(layout: Layout) -> int:
    return sum(span.frames for span in layout)


def chapter_layout(work: Path, plan: ChapterPlan, sr: int) -> Layout:
    """A chapter as spans: the lead-in silence, its parts with pauses between, the tail."""
    spans: Layout = [Silence(round(CHAPTER_LEAD * sr))]
    for i, part in enumerate(plan.parts):
        if i:
            spans.append(Silence(round(PARAGRAPH_PAUSE * sr)))
        path = work / part.name
        rate, frames = part_info(path)
        if rate != sr:
            raise OmniVoiceError(
                f"{path}: {rate} Hz, not the {sr} Hz of the book's other parts: delete it and run again"
            )
        spans.append(PartAudio(path, frames))
    spans.append(Silence(round(CHAPTER_TAIL * sr)))
    return spans


def _open_part(path: Path) -> BinaryIO:
    """A part of the work folder opened for reading: a regular file, never through a link."""
    f = open_regular(path)
    if f is None:
        raise OmniVoiceError(f"{path} is not a regular file: delete it and run the same command again")
    return f


def part_info(path: Path) -> tuple[int, int]:
    """(sample rate, frames) of a part (OmniVoiceError, one line, when it does not read)."""
    import soundfile as sf

    with _open_part(path) as f:
        try:
            with sf.SoundFile(f) as snd:
                return snd.samplerate, snd.frames
        except (sf.LibsndfileError, RuntimeError, ValueError) as e:
            raise OmniVoiceError(f"{path} does not read as audio ({e}): delete it and run again") from None


def _stop_point(signals: HoldSignals | None) -> None:
    """A Ctrl-C / SIGTERM held by `signals` is raised here (between two blocks), once."""
    if signals is not None and signals.pending is not None and not signals.stopping:
        signum, signals.pending = signals.pending, None
        signals.stopping = True
        raise Stop(signum)


def chapter_blocks(layout: Layout, signals: HoldSignals | None) -> Iterator[np.ndarray]:
    """A chapter's audio, float32 blocks of at most BLOCK samples (never the whole chapter)."""
    import numpy as np
    import soundfile as sf

    for span in layout:
        _stop_point(signals)
        if isinstance(span, Silence):
            for i in range(0, span.frames, BLOCK):
                yield np.zeros(min(BLOCK, span.frames - i), dtype=np.float32)
            continue
        with _open_part(span.path) as f:
            try:
                for block in sf.blocks(f, blocksize=BLOCK, dtype="float32"):
                    _stop_point(signals)
                    yield block
            except (sf.LibsndfileError, RuntimeError) as e:
                raise OmniVoiceError(f"{span.path} does not read as audio ({e}): delete it and run again") from None


def write_chapter_subtitles(path: Path, work: Path, layout: Layout, offset: int, sr: int) -> None:
    """One chapter's subtitles from its parts' pieces, at `offset` samples (the chapter's start
    on the timeline of the file they go with)."""
    subs, at = [], offset
    for span in layout:
        if isinstance(span, PartAudio):
            where = work / pieces_name(span.path.name)
            record = read_pieces(where)
            if record is None:
                raise OmniVoiceError(f"{where} does not read: delete it and run again")
            subs += subtitles_from_pieces(record["pieces"], sr, at)
        at += span.frames
    write_cues(path, finish_subtitles(subs, round(at * 1000 / sr)))
