"""Streamed rendering: a text spoken piece by piece, each piece handed out as soon as it is ready.

    summary = stream(engine, request, on_piece=lambda p: play(p.audio), on_step=bar, on_warning=warn)

    with StreamRun(engine, request) as run:        # the same, generated in a worker thread
        for piece in run:                           # StreamPiece, strictly in order
            out.write(piece.audio)

How (used by `say --stream / --play` and by the server):
- The text is cut at its pause tags, then at sentence boundaries (`cut_segments`): the first piece
  short (whole sentences up to `first_seconds`, or clauses of a longer first sentence), the
  others whole sentences up to `piece_seconds`. A pause is a segment of its exact silence.
- The pieces run by the engine's one piece policy (pieces.py), as Engine.generate's do: without
  a reference voice, piece 0 is generated first and its codes and text are the voice of every
  later piece; with one, every piece uses it. Piece k (k-th spoken piece) uses seed + k.
- Every piece is decoded and post-processed on its own exactly as a whole request of its text
  (silence removal, level, fade, pad), so a text that is one piece renders exactly as
  Engine.generate renders it. The pieces joined are the streamed output (`StreamedPieces`, which
  the service runs too).
- After piece 0 the rest run in packed waves (all of a wave's jobs share each forward). A wave
  is as large as can be generated, by the speed measured so far, before the audio already
  handed out has played (`WavePlanner`); when even one piece cannot be, the device is slower
  than real time: on_warning says so once, and waves then double in size (fewer, fuller
  forwards; playback pauses between waves whatever the sizes).
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

from .cancel import Cancelled, cancellable
from .pipeline import Engine, Request
from .streamcut import (
    Segment,
    StreamConfig,
    cut_part,
    cut_request,
    cut_segments,
    estimated_seconds,
    group_units,
    text_units,
)
from .streamed import StepCallback, StreamedPieces, StreamPiece, StreamSummary, stream, stream_pieces
from .waves import WavePlanner, forward_model

__all__ = [  # StreamRun is this module's; the rest are re-exported from streamcut, waves and streamed
    "StreamRun",
    "Cancelled",
    "cancellable",
    "Segment",
    "StreamConfig",
    "cut_part",
    "cut_request",
    "cut_segments",
    "estimated_seconds",
    "group_units",
    "text_units",
    "StepCallback",
    "StreamedPieces",
    "StreamPiece",
    "StreamSummary",
    "stream",
    "stream_pieces",
    "WavePlanner",
    "forward_model",
]


class StreamRun:
    """`stream` in a worker thread; iterate for the pieces in order, in the caller's thread.

        with StreamRun(engine, req, on_step=bar) as run:
            for piece in run:
                player.play(piece.audio)
        run.summary

    on_step, on_progress and on_warning are called in the iterating thread too (between pieces), so a caller
    needs no locking; so is on_idle(), every `idle_seconds` while no piece comes: what it raises
    ends the iteration (a caller's check that its reader or player is still there).

    Leaving the block early (an exception, Ctrl-C, a `break`) cancels the render and waits for
    the worker, which stops within one layer of its forward: no thread is left running torch
    when the block is left (an interpreter exiting under one aborts the process)."""

    def __init__(
        self,
        engine: Engine,
        req: Request,
        *,
        on_step: StepCallback | None = None,
        on_progress: StepCallback | None = None,
        on_warning: Callable[[str], None] | None = None,
        config: StreamConfig | None = None,
        on_idle: Callable[[], None] | None = None,
        idle_seconds: float = 0.25,
        check=None,
    ) -> None:
        self.check = check
        self.on_step, self.on_warning, self.on_idle, self.idle_seconds = on_step, on_warning, on_idle, idle_seconds
        self.on_progress = on_progress
        self.summary: StreamSummary | None = None
        self.error: BaseException | None = None  # what ended the worker, if not success (Cancelled, ...)
        self._events: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self._thread = threading.Thread(
            target=self._work, args=(engine, req, config), name="omnivoice-stream", daemon=True
        )
        self._thread.start()

    def _work(self, engine, req, config) -> None:
        put = self._events.put
        try:
            summary = stream(
                engine,
                req,
                lambda p: put(("piece", p)),
                on_step=lambda d, t: put(("step", d, t)),
                on_progress=lambda d, t: put(("progress", d, t)),
                on_warning=lambda w: put(("warning", w)),
                config=config,
                cancel=self._cancel,
                **({"check": self.check} if self.check is not None else {}),
            )
            put(("done", summary))
        except BaseException as e:  # handed to the iterating thread
            self.error = e
            put(("error", e))

    def __iter__(self) -> Iterator[StreamPiece]:
        while True:
            try:
                event = self._events.get(timeout=self.idle_seconds if self.on_idle else None)
            except queue.Empty:  # only with an on_idle (else the wait has no timeout)
                if self.on_idle is not None:
                    self.on_idle()
                continue
            kind = event[0]
            if kind == "piece":
                yield event[1]
            elif kind == "step":
                if self.on_step:
                    self.on_step(event[1], event[2])
            elif kind == "progress":
                if self.on_progress:
                    self.on_progress(event[1], event[2])
            elif kind == "warning":
                if self.on_warning:
                    self.on_warning(event[1])
            elif kind == "done":
                self.summary = event[1]
                return
            else:
                raise event[1]

    def cancel(self) -> None:
        """Stop the render within one layer of its forward (not waited for: see `wait`)."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Cancel the render (unless it is done) and wait until the worker has ended. A
        KeyboardInterrupt while waiting (a second Ctrl-C) does not cut the wait short, since
        the worker ends within a layer anyway; it is raised once the worker has ended."""
        if self.summary is None:
            self.cancel()
        interrupted: BaseException | None = None
        while self._thread.is_alive():
            try:
                self._thread.join()
            except KeyboardInterrupt as e:
                interrupted = e
        if interrupted is not None:
            raise interrupted

    def __enter__(self) -> "StreamRun":
        return self

    def __exit__(self, kind, value, tb) -> None:
        try:
            self.close()
        except KeyboardInterrupt:
            if kind is None:  # else the exception that left the block goes on
                raise
