"""The engine as a service: one loop thread runs forwards without pause for requests that arrive
at any time (what `omnivoice serve` runs on; no web framework here).

    service = Service(engine, max_queue=64).start()
    ticket = service.submit(request, on_event)   # Busy when max_queue requests are open
    # on_event(Event("piece", piece=StreamPiece)) for every segment, strictly in order, then
    # Event("done", summary=...) or Event("error", error=...): called in the loop thread, between
    # forwards, so it must only hand the event on (a queue), never block
    ticket.cancel()                              # its jobs leave at the next forward (within a layer
                                                 # when they are all the forward has)
    places = service.reserve(8)                  # 8 of max_queue held at once for one caller (Busy)
    service.submit(request, on_event, places=places)  # its requests take its places, no others
    places.release()                             # (after its requests are done or cancelled)
    ticket.voice                                 # after piece 0: the VoicePrompt its other pieces use
    service.call(lambda engine: ...)             # run on the engine between forwards -> Future
    service.observe(watcher)                     # an Observer: each forward, each request's end
    service.stop()

A request is rendered exactly as the streamed render (engine/stream/render.py) renders it, by the
same `StreamedPieces`: its text is cut at pauses and sentences (`cut_segments`), and its pieces
run by the engine's one piece policy (pieces.py): piece k is generated with seed + k, without a
reference voice piece 0 is generated first and its codes and text are the voice of the others,
and each piece is decoded and post-processed on its own as a whole request of its text
(`Engine.render`). So a text of one piece gives exactly what `Engine.generate` gives, and the
pieces of any text, joined, are what `stream.render.stream` hands out. What it hands its callers (`Ticket`, `Event`,
`Summary`, `Places`, the refusals) is in tickets.py; what one forward holds in forwardfit.py.

Scheduling (continuous batching across requests): every piece is a job of the packed loop
(engine/model/generation.py). Before each forward, the loop takes new requests, drops the jobs of
cancelled ones, and admits waiting jobs (engine/model/admission.py, run_jobs' admission too)
while the forward stays within max_batch_size jobs and max_packed_tokens positions, the request
with the fewest jobs in the forward first (then the oldest, then piece order), so a new request
joins the next forward even beside a long text. A job leaves when its own steps are done. The packing is row-independent, so a request's samples
do not depend on what shares its forwards.

A request's own pieces leave one by one, never a whole reply together: its first job in the
forward joins at once, each further one only when the request's youngest job has done 1/n of
its steps (admission.Stagger), with n sized from the measured speed of the forwards
(admission.steady_width: the fewest in flight that run about as fast as any number would), so its
pieces finish spread over the forwards, in order.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from . import cancel as cancelmod
from .errors import InvalidRequest
from .forwardfit import check_sizes, fit_sizes
from .model.admission import Stagger, admit, forward_model, steady_width
from .pipeline import Engine
from .planning import Request, validate_request
from .stream.cut import StreamConfig, cut_request, cut_stretches
from .stream.render import StreamedPieces
from .tickets import Busy, Event, Places, RequestCancelled, ServiceStopped, Summary, Ticket

if TYPE_CHECKING:
    from .model.generation import Job


class Observer(Protocol):
    """What the service tells a watcher that registered (`Service.observe`; server/metrics.py's
    counters). Called in the loop thread: it must return at once (count, never block or raise)."""

    def forward(self, pieces: list[tuple[int, int]], positions: int) -> None:
        """A forward is about to run: (request id, piece index) of each job packed into it, and their
        positions (packed tokens)."""

    def finished(self, summary: Summary) -> None:
        """A request is done: what it made (its "done" event's summary, before the event is handed on)."""

    def failed(self, error: BaseException) -> None:
        """A request failed or was cancelled (its "error" event's error, before the event is handed on)."""


@dataclass
class _Slot:
    """A job of the loop and the piece it renders."""

    ticket: Ticket
    k: int  # spoken piece
    job: "Job"


class Service:
    """The engine loop (see the module doc). Thread-safe: submit, cancel, call, stats, stop."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_queue: int = 64,
        config: StreamConfig | None = None,
        clock: Callable[[], float] = time.perf_counter,
        fit: bool = False,
    ) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self.engine, self.max_queue, self.config, self.clock = engine, max_queue, config or StreamConfig(), clock
        self.fit = fit  # stretches over one generation or forward cut as `say` cuts them (cut_stretches, fit_sizes)
        self.forwards = 0  # forwards run so far
        self.served = 0  # requests finished
        self._cond = threading.Condition()
        self._inbox: list[Ticket] = []  # submitted, not yet started by the loop
        self._calls: list[tuple[Callable, Future]] = []
        self._open: dict[int, Ticket] = {}  # accepted and not finished (what max_queue bounds)
        self._held: list[Places] = []  # places reserved (each counts its size against max_queue)
        self._numbers = itertools.count(1)
        self._stopping = False
        self._halt = threading.Event()  # set by stop(): the forward running then ends within a layer
        self._dirty = False  # a ticket was cancelled since the loop last looked
        self._active: list[_Slot] = []  # jobs in the forward (loop thread only)
        self._pending: list[_Slot] = []  # jobs waiting for a place (loop thread only)
        self._mean_seconds = 0.0  # running mean of a request's seconds (for retry_after)
        self._speed: collections.deque = collections.deque(maxlen=32)  # (packed tokens, seconds) of recent forwards
        self._thread = threading.Thread(target=self._loop, name="omnivoice-engine", daemon=True)
        self._observers: tuple[Observer, ...] = ()  # registered by observe (replaced whole: read without a lock)

    # --- the public face ----------------------------------------------------------------------
    def start(self) -> "Service":
        self._thread.start()
        return self

    def submit(
        self,
        req: Request,
        on_event: Callable[[Event], None],
        check=None,
        places: Places | None = None,
        continued: bool = False,
    ) -> Ticket:
        """Accept a request (checked: InvalidRequest), or raise Busy / ServiceStopped. `check`: its
        per-piece check (pieces.PieceCheck), run in the loop thread as each piece is done;
        `places`: reserved places it takes one of (reserve; a caller submits at most `size` at once);
        `continued`: it goes on from a request already spoken (a socket's or Wyoming's next part),
        its first piece cut as a later one (cut_request)."""
        warnings = validate_request(req, self.engine.cfg)
        segments = cut_request(req, self.config, continued)
        if self.fit:  # a stretch without a mark to cut at cut as the streamed render cuts it, then to one forward
            cut = cut_stretches(req, segments, self.config, continued, self.engine.cfg.max_target_seconds)
            segments = fit_sizes(req, cut, self.engine.cfg)
        pieces = StreamedPieces(self.engine, req, self.config, check, segments)
        check_sizes(req, pieces.segments, self.engine.cfg)
        with self._cond:
            if self._stopping:
                raise ServiceStopped("the server is shutting down")
            if places is not None:
                if places.released or self._using(places) >= places.size:
                    raise RuntimeError(f"all {places.size} reserved places are in use (or given back)")
            elif self._taken() >= self.max_queue:
                raise Busy(
                    f"the server is busy: {self._taken()} requests are queued (the most it takes, "
                    "--max-queue); try again shortly",
                    self.retry_after(),
                )
            ticket = Ticket(self, next(self._numbers), req, pieces, on_event, warnings, places)
            self._open[ticket.id] = ticket
            self._inbox.append(ticket)
            self._cond.notify()
        return ticket

    def reserve(self, size: int) -> Places:
        """Hold `size` places of max_queue at once for one caller's requests (submit(places=)):
        Busy when fewer are free now, InvalidRequest when max_queue has fewer in all, ServiceStopped
        while stopping. The caller releases them (Places.release) once its requests are over."""
        if size < 1:
            raise ValueError("a reservation holds at least one place")
        if size > self.max_queue:
            raise InvalidRequest(
                f"{size} requests at once are more than the server ever takes ({self.max_queue}, --max-queue)"
            )
        with self._cond:
            if self._stopping:
                raise ServiceStopped("the server is shutting down")
            taken = self._taken()
            if taken + size > self.max_queue:
                raise Busy(
                    f"the server is busy: {taken} of its {self.max_queue} places are taken and this needs "
                    f"{size} (--max-queue); try again shortly",
                    self.retry_after(),
                )
            places = Places(self, size)
            self._held.append(places)
            return places

    def give_back(self, places: Places) -> None:
        """Places.release: the reserved places are free again."""
        with self._cond:
            if not places.released:
                places.released = True
                self._held.remove(places)

    def _taken(self) -> int:
        """Places of max_queue taken: requests of their own, and every reservation's size (under _cond)."""
        own = sum(1 for t in self._open.values() if t.places is None or t.places.released)
        return own + sum(p.size for p in self._held)

    def _using(self, places: Places) -> int:
        return sum(1 for t in self._open.values() if t.places is places)

    def call(self, fn: Callable[[Engine], Any]) -> Future:
        """Run fn(engine) in the loop thread between two forwards; its Future has the result."""
        future: Future = Future()
        with self._cond:
            if self._stopping:
                raise ServiceStopped("the server is shutting down")
            self._calls.append((fn, future))
            self._cond.notify()
        return future

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Tell `observer` of every forward and every request's end from now on (Observer); what
        is returned stops that (a watcher that leaves before the service does)."""
        with self._cond:
            self._observers = (*self._observers, observer)

        def stop() -> None:
            with self._cond:
                self._observers = tuple(o for o in self._observers if o is not observer)

        return stop

    def retry_after(self) -> int:
        """Seconds after which a refused request may find a place (from the requests so far)."""
        return max(1, min(60, math.ceil(self._mean_seconds or 1.0)))

    def stats(self) -> dict:
        with self._cond:
            return {
                "forwards": self.forwards,
                "open": len(self._open),
                "served": self.served,
                "active_jobs": len(self._active),
                "waiting_jobs": len(self._pending),
            }

    @property
    def open(self) -> int:
        """Requests accepted and not finished."""
        with self._cond:
            return len(self._open)

    def stop(self, timeout: float | None = 10.0) -> None:
        """Refuse new requests, cancel the open ones (an "error" event: RequestCancelled) and end the loop:
        a forward running then stops within one layer, so the loop thread ends promptly (waited
        for up to `timeout` seconds)."""
        with self._cond:
            self._stopping = True
            self._halt.set()
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def drop(self, ticket: Ticket) -> None:
        """Ticket.cancel: the request leaves (its jobs at the next forward), its place free at once."""
        with self._cond:
            if ticket.closed:
                return
            ticket.cancelled = ticket.closed = True
            self._open.pop(ticket.id, None)
            self._dirty = True
            self._cond.notify()

    # --- the loop -----------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (
                    self._inbox or self._calls or self._active or self._pending or self._stopping or self._dirty
                ):
                    self._cond.wait()
                if self._stopping:
                    break
                inbox, self._inbox = self._inbox, []
                calls, self._calls = self._calls, []
                dirty, self._dirty = self._dirty, False
            self.engine.use_threads()  # the engine's count, also if torch's was changed since
            for fn, future in calls:
                _run_call(self.engine, fn, future)
            for ticket in inbox:
                self._start(ticket)
            if dirty:
                self._drop_cancelled()
            self._admit()
            if self._active:
                self._forward()
        self._shut_down()

    def _start(self, ticket: Ticket) -> None:
        """Hand out leading pauses and make the first jobs: piece 0 alone without a reference."""
        if ticket.cancelled:
            return
        try:
            self._pending += [self._slot(ticket, k) for k in ticket.pieces.first()]
            self._hand_out(ticket)
        except Exception as e:  # noqa: BLE001 - this request's own failure (its text, its voice)
            self._fail(ticket, e)

    def _slot(self, ticket: Ticket, k: int) -> _Slot:
        job = ticket.pieces.job(k)
        if job.packed_len > self.engine.cfg.max_packed_tokens:  # check_sizes estimated it without piece 0's voice
            raise InvalidRequest(
                f"piece {k + 1} of the text needs {job.packed_len} positions, more than one "
                f"forward holds ({self.engine.cfg.max_packed_tokens}): add punctuation to cut it"
            )
        return _Slot(ticket, k, job)

    def _drop_cancelled(self) -> None:
        self._active = [s for s in self._active if not s.ticket.closed]
        self._pending = [s for s in self._pending if not s.ticket.closed]

    def _may_join(self, forward: list[_Slot], slot: _Slot, model) -> bool:
        """Whether a further job of its request joins `forward` (admit's policy): staggered over
        the request's jobs in it, as many at most as its width (waves in flight: steady_width,
        from the forwards measured so far, `model`; None before any is: one)."""
        mine = [s.job for s in forward if s.ticket is slot.ticket]
        width = 1
        if model is not None:
            width = steady_width(
                model,
                len(slot.job.schedule),
                slot.job.packed_len,
                self.engine.cfg.max_batch_size,
                others=sum(s.job.packed_len for s in forward) - sum(j.packed_len for j in mine),
            )
        return Stagger(width)(mine, slot.job)

    def _admit(self) -> None:
        """Move waiting jobs into the forward within the limits, fairest first (admission.admit:
        each request's pieces in order, the request with the fewest in the forward first, then
        the oldest; see the module doc)."""
        cfg = self.engine.cfg
        model = forward_model(list(self._speed)) if self._speed else None
        joining = admit(
            self._active,
            sorted(self._pending, key=lambda s: (s.ticket.id, s.k)),
            max_jobs=cfg.max_batch_size,
            max_tokens=cfg.max_packed_tokens,
            tokens=lambda s: s.job.packed_len,
            group=lambda s: s.ticket.id,
            may_join=lambda forward, s: self._may_join(forward, s, model),
        )
        joined = {id(s) for s in joining}
        self._pending = [s for s in self._pending if id(s) not in joined]
        for slot in joining:
            self._active.append(slot)
            slot.ticket.active += 1
            if slot.ticket.started is None:
                slot.ticket.started = self.clock()

    def _forward(self) -> None:
        import torch

        from .model.generation import forward_step

        tokens, t0 = sum(s.job.packed_len for s in self._active), self.clock()
        if self._observers:
            pieces = [(s.ticket.id, s.k) for s in self._active]
            for observer in self._observers:
                observer.forward(pieces, tokens)
        try:
            with torch.inference_mode(), cancelmod.cancellable(_ForwardStop(self._halt, list(self._active))):
                forward_step(
                    self.engine.model,
                    [s.job for s in self._active],
                    mask_id=self.engine.cfg.audio_mask_id,
                    forward=self.engine.forward,
                )
        except cancelmod.Cancelled:  # stop() under the forward: the loop ends, _shut_down fails the requests
            if not self._halt.is_set():  # else every job in it was cancelled (barge-in): they leave now
                self._active = [s for s in self._active if not s.ticket.closed]
            return
        except Exception as e:  # noqa: BLE001 - the forward failed: every request in it fails
            for ticket in {s.ticket.id: s.ticket for s in self._active}.values():
                self._fail(ticket, e)
            return
        self.forwards += 1
        self._speed.append((tokens, self.clock() - t0))
        for ticket in {s.ticket.id: s.ticket for s in self._active}.values():
            ticket.forwards += 1
        finished = [s for s in self._active if s.job.done]
        self._active = [s for s in self._active if not s.job.done]
        for slot in finished:
            slot.ticket.active -= 1
            if not slot.ticket.closed:
                self._finish_piece(slot)

    def _finish_piece(self, slot: _Slot) -> None:
        """A piece's steps are done: its audio, the jobs of the pieces it unlocks, and every
        segment now ready handed out in order."""
        ticket = slot.ticket
        try:
            unlocked = ticket.pieces.done(slot.k, slot.job)
            self._pending += [self._slot(ticket, j) for j in unlocked]
            self._hand_out(ticket)
        except Exception as e:  # noqa: BLE001 - this request's own failure
            self._fail(ticket, e)

    def _hand_out(self, ticket: Ticket) -> None:
        """Emit the segments ready at the head, in order; close the request after its last."""
        for piece in ticket.pieces.hand_out():
            if ticket.closed:
                return
            if piece.seed is not None and ticket.first_audio is None:
                ticket.first_audio = self.clock() - ticket.submitted
            self._emit(ticket, Event("piece", piece=piece))
        if ticket.pieces.handed_out and not ticket.closed:
            self._close(ticket)
            self._emit(ticket, Event("done", summary=self._summary(ticket)))

    def _summary(self, ticket: Ticket) -> Summary:
        now = self.clock()
        started = ticket.started if ticket.started is not None else now
        return Summary(
            len(ticket.pieces),
            ticket.pieces.samples,
            self.engine.sample_rate,
            ticket.seed,
            started - ticket.submitted,
            ticket.first_audio,
            now - ticket.submitted,
            ticket.forwards,
            ticket.warnings,
        )

    def _emit(self, ticket: Ticket, event: Event) -> None:
        for observer in self._observers:
            if event.kind == "done" and event.summary is not None:
                observer.finished(event.summary)
            elif event.kind == "error" and event.error is not None:
                observer.failed(event.error)
        try:
            ticket.on_event(event)
        except Exception:  # noqa: BLE001 - a receiver that fails is gone: drop its request
            ticket.cancel()

    def _close(self, ticket: Ticket) -> None:
        with self._cond:
            ticket.closed = True
            self._open.pop(ticket.id, None)
            self.served += 1
            seconds = self.clock() - ticket.submitted
            self._mean_seconds += (seconds - self._mean_seconds) / min(self.served, 20)

    def _fail(self, ticket: Ticket, error: BaseException) -> None:
        if ticket.closed:
            return
        with self._cond:
            ticket.closed = True
            self._open.pop(ticket.id, None)
        self._drop_cancelled()
        self._emit(ticket, Event("error", error=error))

    def _shut_down(self) -> None:
        with self._cond:
            tickets = list(self._open.values()) + self._inbox
            calls, self._calls = self._calls, []
        for fn, future in calls:
            future.set_exception(ServiceStopped("the server is shutting down"))
        for ticket in tickets:
            self._fail(ticket, RequestCancelled("the server stopped before this request was done"))
        self._active, self._pending = [], []


class _ForwardStop:
    """A forward's cancel check (engine/cancel.py), read before each layer: the service stops, or
    every job in the forward belongs to a cancelled request (a client that left, a barge-in), so
    that the engine is free within one layer and nobody's work is lost."""

    def __init__(self, halt: threading.Event, slots: list) -> None:
        self.halt, self.slots = halt, slots

    def is_set(self) -> bool:
        return self.halt.is_set() or all(s.ticket.closed for s in self.slots)


def _run_call(engine: Engine, fn: Callable, future: Future) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn(engine))
    except BaseException as e:  # noqa: BLE001 - handed to the caller
        future.set_exception(e)
