"""The streamed render: one request spoken piece by piece through one run_jobs loop, each
segment handed out strictly in order as soon as it and all before it are ready (`stream`).

The pieces run by the engine's one piece policy (pieces.py), as Engine.generate's do: without a
reference voice, piece 0 is generated first and its codes and text are the voice of every later
piece; with one, every piece uses it. Piece k (k-th spoken piece) uses seed + k. Every piece is
decoded and post-processed on its own exactly as a whole request of its text (`StreamedPieces`,
which the service runs too). The text is cut by `cut`, the waves sized by `waves`; the
worker thread around it is `run.StreamRun`.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from ..cancel import Cancelled, cancellable
from ..model.admission import Stagger
from ..pieces import Piece, RequestPieces
from ..planning import Request, Result, validate_request
from ..text.duration import resolve_target_len
from .cut import Segment, StreamConfig, cut_streamed
from .waves import WavePlanner

if TYPE_CHECKING:
    import numpy as np

    from ..model.config import ModelConfig


StepCallback = Callable[[int, int], None]  # (forwards done, forwards planned)


class StreamEngine(Protocol):
    """What the streamed render uses of the engine (pipeline.Engine, whose `stream` starts it: this
    package never imports the engine's face back)."""

    cfg: ModelConfig
    model: Any  # the body (OmniVoiceModel)
    forward: Any  # what runs the body each step

    @property
    def sample_rate(self) -> int: ...

    def use_threads(self) -> None: ...

    def prepare(self, req: Request, piece: Piece | None = None, ref=None, seed: int | None = None) -> Any: ...

    def render(self, req: Request, job, warnings: list[str] | None = None) -> Result: ...


@dataclass(frozen=True)
class StreamPiece:
    """One emitted piece of the streamed output."""

    index: int  # order of emission: 0, 1, 2, ... (pauses included)
    text: str  # what it says ('' for a pause)
    audio: "np.ndarray"  # float32 [N] at the engine's sample rate
    start: int  # its first sample in the joined output
    seed: int | None  # the seed it was generated with (None for a pause)
    kept: tuple[int, int] | None = None  # where its text is heard in `audio` (Result.pieces; None: all of it)


@dataclass
class StreamSummary:
    """What a streamed render did."""

    pieces: int  # spoken pieces generated
    samples: int  # samples emitted in all (the joined output's length)
    sample_rate: int  # Hz
    waves: list[int]  # pieces per wave after piece 0
    kept_up: bool  # False when the device was found slower than real time
    first_audio: float | None  # seconds from the start to the first spoken piece's emission
    seconds: float  # seconds from the start to the end
    seed: int  # the request's seed (piece k used seed + k)
    warnings: list[str] = field(default_factory=list)


def stream_pieces(req: Request, texts: list[str], frame_rate: float) -> list[Piece]:
    """The pieces of spoken texts as the streamed render runs them: each estimated against its
    voice when its job is made, at the request's speed (relative to the voice's rate:
    pieces.speed_against); a fixed duration (one piece: a fixed length is not cut) is the piece's
    length whatever the voice, spoken at its effective speed."""
    if req.duration is None:
        return [Piece(0, k, text, None, req.speed) for k, text in enumerate(texts)]
    fixed = [resolve_target_len(text, None, None, req.speed, req.duration, frame_rate) for text in texts]
    return [Piece(0, k, text, target, rate) for k, (text, (target, rate)) in enumerate(zip(texts, fixed))]


class StreamedPieces(RequestPieces):
    """A request as the streamed render and the service run it (pieces.py has the policy): cut at
    pauses and sentences (`cut_streamed`), each spoken piece decoded and post-processed on its own
    exactly as a whole request of its text (`Engine.render`), and every segment, pauses
    included, handed out strictly in order (`hand_out`)."""

    def __init__(
        self,
        engine: StreamEngine,
        req: Request,
        config: StreamConfig,
        check=None,
        segments: list[Segment] | None = None,
    ) -> None:
        self.engine, self.req = engine, req
        self.segments = (
            cut_streamed(req, config, cfg=engine.cfg) if segments is None else segments
        )  # given: cut by the caller
        self.speech = [i for i, s in enumerate(self.segments) if s.text is not None]  # segment of spoken piece k
        texts = [self.segments[i].text or "" for i in self.speech]
        super().__init__(
            stream_pieces(req, texts, engine.cfg.frame_rate),
            ref=req.ref,
            seed=req.seed,
            voice_text=texts[0].strip() if texts else "",
            prepare=lambda piece, voice, seed: engine.prepare(req, piece, ref=voice, seed=seed),
            check=check,
        )
        # (text, audio or a count of zero samples, seed) of each segment ready and not yet handed out;
        # None: not ready; (): handed out
        self._ready: list[tuple[str, np.ndarray | int, int | None] | tuple[()] | None] = [None] * len(self.segments)
        for i, s in enumerate(self.segments):
            if s.text is None:  # a pause: its silence made when it is handed out
                self._ready[i] = ("", round(s.pause * engine.sample_rate), None)
        self.lengths = [0] * len(self.speech)  # samples of each spoken piece's audio, once done
        self.kept: dict[int, tuple[int, int]] = {}  # segment -> where its text is heard in its audio
        self.next = 0  # the next segment to hand out
        self.samples = 0  # samples handed out

    def accept(self, k: int, job) -> None:
        """Piece k's audio: decoded and post-processed exactly as a whole request of its text."""
        i = self.speech[k]
        text, seed = self.segments[i].text or "", self.seed_for(k)  # a spoken segment: text, never None
        result = self.engine.render(replace(self.req, text=text, seed=seed), job)
        audio = result.audio
        if result.pieces:
            self.kept[i] = (result.pieces[0][1], result.pieces[-1][2])
        self._ready[i] = (text, audio, seed)
        self.lengths[k] = len(audio)

    def take_audio(self, k: int, job) -> tuple:
        """A take as it would be handed out (its seed: the take's)."""
        text = self.segments[self.speech[k]].text or ""
        return self.engine.render(
            replace(self.req, text=text, seed=self.seed_for(k)), job
        ).audio, self.engine.sample_rate

    def hand_out(self) -> Iterator[StreamPiece]:
        """The segments ready at the head, in order, each marked handed out as it is taken."""
        import numpy as np

        while self.next < len(self.segments) and self._ready[self.next] is not None:
            text, audio, seed = self._ready[self.next]  # type: ignore[misc]  # ready: a triple
            if isinstance(audio, int):
                audio = np.zeros(audio, dtype=np.float32)
            piece = StreamPiece(self.next, text, audio, self.samples, seed, self.kept.pop(self.next, None))
            self._ready[self.next] = ()  # handed out: keep no audio
            self.samples += len(audio)
            self.next += 1
            yield piece

    @property
    def handed_out(self) -> bool:
        """Every segment is handed out."""
        return self.next == len(self.segments)


class _Driver:
    """One request streamed through one run_jobs loop (see `stream`). Admission: piece 0 alone,
    then waves of the ready pieces sized by `WavePlanner`, a wave's pieces staggered (`may_join`:
    admission.Stagger) so that they leave one by one, not all at the wave's end."""

    def __init__(
        self, engine: StreamEngine, req: Request, config: StreamConfig, clock, cancel, on_warning, check=None
    ) -> None:
        self.engine, self.req, self.clock, self.cancel, self.on_warning = engine, req, clock, cancel, on_warning
        self.pieces = StreamedPieces(engine, req, config, check)
        self.on_piece: Callable[[StreamPiece], None] | None = None
        self.jobs: dict[int, int] = {}  # id(job) -> piece k
        self.running: dict[int, Any] = {}  # id(job) -> the job, while it is in run_jobs' hands
        self.finished = 0  # pieces generated
        self.retakes = 0  # takes sent back by the check (each runs its steps again: piece_steps counts them)
        self.wave_left = 0  # pieces of the running wave not finished yet
        self.wave_measured = False  # its forwards' time is measured (when its first piece is done)
        self.forward_times: list[float] = []  # seconds per packed token of each forward of the running wave
        self.forward_tokens = 1  # packed tokens of the forward just run (its jobs staggered in)
        self.last_forward = clock()  # when the last forward ended (or the wave started)
        self.boundary = False  # a wave ended in this forward (its callbacks' time is no forward's)
        self.wave_tokens = 0
        self.queued_k = 1  # pieces handed to run_jobs so far
        self.emitted_seconds = 0.0
        self.t0 = clock()
        self.first_emit: float | None = None
        self.first_audio: float | None = None
        self.planner = WavePlanner(
            req.generation.num_step, engine.cfg.max_batch_size, engine.cfg.max_packed_tokens, config.margin
        )
        self.waves: list[int] = []
        self.sr = engine.sample_rate

    # --- jobs ---------------------------------------------------------------------------------
    def job(self, k: int):
        job = self.pieces.job(k)
        self.jobs[id(job)] = k
        self.running[id(job)] = job
        return job

    # --- emission -----------------------------------------------------------------------------
    def start(self, on_piece) -> None:
        self.on_piece = on_piece
        if any(s.text is None for s in self.pieces.segments):  # the leading pauses go out now
            self._hand_out()

    def _hand_out(self) -> None:
        now = self.clock()
        n = 0
        for piece in self.pieces.hand_out():
            if self.on_piece is not None:  # set by start(), before any piece
                self.on_piece(piece)
            n += 1
        if n and self.first_emit is None:
            self.first_emit = now
        if n:
            done = self.pieces.next
            self.emitted_seconds = self.pieces.samples / self.sr
            if self.first_audio is None and any(self.pieces.segments[j].text is not None for j in range(done)):
                self.first_audio = self.clock() - self.t0

    def queued(self) -> float:
        """Seconds of emitted audio not yet played, if playback began at the first emission."""
        if self.first_emit is None:
            return 0.0
        return max(0.0, self.emitted_seconds - (self.clock() - self.first_emit))

    # --- the loop's callbacks -----------------------------------------------------------------
    def done(self, job) -> list:
        k = self.jobs.pop(id(job))
        self.running.pop(id(job), None)
        self.finished += 1
        if not self.wave_measured:  # the first of its wave to finish: its forwards' typical time
            self.wave_measured = True
            self.forward_times.append((self.clock() - self.last_forward) / self.forward_tokens)  # its last forward
            self.planner.measure_wave(self.wave_tokens, statistics.median(self.forward_times) * self.wave_tokens)
        t_render = self.clock()
        self.pieces.done(k, job)  # its audio rendered (and, for piece 0, the voice of the rest)
        if not self.pieces.finished[k]:  # the check asked for a retake: it runs in its wave still
            self.finished -= 1
            self.retakes += 1
            return [self.job(k)]
        self.planner.measure_decode(self.clock() - t_render, self.pieces.lengths[k] / self.sr)
        self._hand_out()
        self.wave_left = max(self.wave_left - 1, 0)
        if self.wave_left == 0 and self.queued_k < len(self.pieces):
            return self.next_wave()
        return []

    def next_wave(self) -> list:
        rest = range(self.queued_k, len(self.pieces))
        jobs = [self.job(k) for k in rest[: self.engine.cfg.max_batch_size]]
        lens = [j.packed_len for j in jobs]
        seconds = [j.canvas.target_len / self.engine.cfg.frame_rate for j in jobs]
        was_behind = self.planner.behind
        n = self.planner.size(lens, seconds, self.queued())
        if self.planner.behind and not was_behind and self.on_warning:
            self.on_warning(
                f"generation is slower than real time here ({self.predicted_text(lens[0], seconds[0])}): "
                "playback will pause between pieces"
            )
        for j in jobs[n:]:
            del self.jobs[id(j)]
            del self.running[id(j)]
        self.queued_k += n
        self.waves.append(n)
        self.wave_left, self.wave_tokens, self.wave_measured = n, sum(lens[:n]), False
        self.boundary = True
        return jobs[:n]

    def predicted_text(self, tokens: int, seconds: float) -> str:
        need = self.planner.predicted(tokens, seconds)
        return f"the next piece needs about {need:.1f} s, {self.queued():.1f} s of audio is queued"

    def forward_done(self) -> None:
        """After each forward: record how long it took (wave boundaries start a new record)."""
        now = self.clock()
        if self.boundary:
            self.boundary, self.forward_times = False, []
        else:
            self.forward_times.append((now - self.last_forward) / self.forward_tokens)
        self.last_forward = now

    def advanced(self, jobs: list) -> None:
        """A forward ran these jobs (run_jobs' on_advance): its size, for the speed measured."""
        self.forward_tokens = max(sum(j.packed_len for j in jobs), 1)

    def may_join(self, active: list, job) -> bool:
        """run_jobs' admission: the running wave's pieces join staggered (admission.Stagger)."""
        return Stagger(max(self.planner.last_size, 1))(active, job)

    def piece_steps(self) -> tuple[int, int]:
        """(steps done, steps in all) over every piece: a total known from the start, which the
        forwards' is not (waves are sized as they come); a retake adds its steps to both (the
        take sent back counts as done), so the total never falls behind nor runs ahead."""
        per_piece = self.req.generation.num_step
        done = (self.finished + self.retakes) * per_piece + sum(j.step for j in self.running.values())
        return done, (len(self.pieces) + self.retakes) * per_piece

    def forwards_to_come(self) -> int:
        """Forwards of the pieces not yet handed to the loop, in waves of the last size."""
        left = len(self.pieces) - self.queued_k
        return math.ceil(left / max(self.planner.last_size, 1)) * self.req.generation.num_step


def stream(
    engine: StreamEngine,
    req: Request,
    on_piece: Callable[[StreamPiece], None],
    *,
    on_step: StepCallback | None = None,
    on_progress: StepCallback | None = None,
    on_warning: Callable[[str], None] | None = None,
    config: StreamConfig | None = None,
    cancel: threading.Event | None = None,
    clock: Callable[[], float] = time.perf_counter,
    check=None,
) -> StreamSummary:
    """Speak `req` piece by piece: on_piece(StreamPiece) for every segment, strictly in order, each
    as soon as it and all before it are ready (called from this thread, between forwards).

    on_step(done, planned) after every forward (planned grows as waves are sized); on_progress(done,
    total) after every forward in steps over all pieces (a total that changes only when a retake adds
    its steps); on_warning(msg)
    for the request's warnings and, once, when the device cannot keep up with playback.
    cancel: once set (from any thread), the render stops with Cancelled before the next layer of
    the forward running then (engine/cancel.py), or at the next forward. check: the per-piece
    check (pieces.PieceCheck): a piece is handed out once its check accepts a take."""
    from ..model.generation import run_jobs  # torch

    engine.use_threads()
    warnings = validate_request(req, engine.cfg)
    for w in warnings:
        if on_warning:
            on_warning(w)
    d = _Driver(engine, req, config or StreamConfig(), clock, cancel, on_warning, check)
    d.start(on_piece)

    def step(done: int, planned: int) -> None:
        d.forward_done()
        if cancel is not None and cancel.is_set():
            raise Cancelled("the streamed render was cancelled")
        if on_step:
            on_step(done, planned + d.forwards_to_come())
        if on_progress:
            on_progress(*d.piece_steps())

    if len(d.pieces):
        first = d.job(0)
        d.wave_tokens, d.last_forward = first.packed_len, clock()
        with cancellable(cancel):
            run_jobs(
                engine.model,
                [first],
                mask_id=engine.cfg.audio_mask_id,
                max_batch_size=engine.cfg.max_batch_size,
                max_packed_tokens=engine.cfg.max_packed_tokens,
                on_step=step,
                on_done=d.done,
                forward=engine.forward,
                on_advance=d.advanced,
                may_join=d.may_join,
            )
    return StreamSummary(
        pieces=len(d.pieces),
        samples=d.pieces.samples,
        sample_rate=engine.sample_rate,
        waves=d.waves,
        kept_up=not d.planner.behind,
        first_audio=d.first_audio,
        seconds=clock() - d.t0,
        seed=req.seed,
        warnings=warnings,
    )
