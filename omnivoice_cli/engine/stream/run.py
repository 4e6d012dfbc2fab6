"""`StreamRun`: the streamed render (render.stream) in a worker thread, its pieces iterated in
the caller's thread.

    with StreamRun(engine, request) as run:        # generated in a worker thread
        for piece in run:                           # StreamPiece, strictly in order
            out.write(piece.audio)
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

from ..planning import Request
from .cut import StreamConfig
from .render import StepCallback, StreamEngine, StreamPiece, StreamSummary, stream


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
        engine: StreamEngine,
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
