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

import math
import queue
import statistics
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import text as textmod
from .cancel import Cancelled, cancellable
from .pieces import Piece, RequestPieces

if TYPE_CHECKING:
    import numpy as np

    from .pipeline import Engine, Request

StepCallback = Callable[[int, int], None]  # (forwards done, forwards planned)


# ---------------------------------------------------------------------------------------------
# Cutting the text
# ---------------------------------------------------------------------------------------------

_SENTENCE_END = frozenset(".!?。！？…")  # a unit ending with one of these ends a sentence
_CLOSING = "\"')]}>»’”」』】）》"  # marks that may follow a sentence's end
_YARDSTICK = ("Nice to meet you.", 25)  # the engine's duration yardstick: this text in 25 frames (1 s)


@dataclass(frozen=True)
class StreamConfig:
    """How a streamed text is cut and scheduled."""

    first_seconds: float = 4.0  # first piece: whole sentences up to this estimated length (else clauses)
    piece_seconds: float = 10.0  # later pieces: whole sentences up to this estimated length (else clauses)
    margin: float = 0.8  # a wave must be ready within this share of the audio queued when it starts


@dataclass(frozen=True)
class Segment:
    """A piece of the streamed output: text to speak, or an exact silence."""

    text: str | None  # what to say; None for a pause
    pause: float = 0.0  # seconds of silence (pauses only)


def estimated_seconds(s: str) -> float:
    """Rough spoken length of `s` at speed 1 (linear in the text; for sizing pieces only)."""
    return textmod.estimate_duration(s, _YARDSTICK[0], _YARDSTICK[1], low_threshold=None) / 25.0


def text_units(part: str) -> list[tuple[int, int, bool]]:
    """The part cut by the engine's splitting rules (`text.chunk_text` at every punctuation mark):
    (start, end, ends_a_sentence) spans, in order; the spans plus the whitespace between them
    are the whole part."""
    units = textmod.chunk_text(part, 1, min_chunk_len=None)  # each unit alone: the splitting only
    spans, pos = [], 0
    for u in units:
        start = part.index(u, pos)
        pos = start + len(u)
        core = u.rstrip(_CLOSING)
        spans.append((start, pos, bool(core) and core[-1] in _SENTENCE_END))
    return spans


def group_units(seconds: list[float], ends: list[bool], first_limit: float | None, limit: float) -> list[int]:
    """How many units go in each piece: whole sentences while the piece stays within its limit
    (first_limit for the first piece, if given), at least one; a sentence over the limit alone is
    cut into clauses (units) the same way. Returns the count of units per piece."""
    sizes: list[int] = []
    i, n = 0, len(seconds)
    while i < n:
        cap = first_limit if (first_limit is not None and not sizes) else limit
        j, total = i, 0.0
        while j < n:  # whole sentences
            k = j
            while k < n - 1 and not ends[k]:
                k += 1
            s = sum(seconds[j : k + 1])
            if j > i and total + s > cap:
                break
            if j == i and s > cap:  # the first sentence alone is too long: its clauses
                while j < n and (j == i or total + seconds[j] <= cap) and not (j > i and ends[j - 1]):
                    total += seconds[j]
                    j += 1
                break
            total, j = total + s, k + 1
        sizes.append(j - i)
        i = j
    return sizes


def cut_part(part: str, first_limit: float | None, limit: float) -> list[str]:
    """Slices of `part` (joined they are the part) for its pieces."""
    spans = text_units(part)
    if len(spans) <= 1:
        return [part]
    seconds = [estimated_seconds(part[s:e]) for s, e, _ in spans]
    sizes = group_units(seconds, [end for _, _, end in spans], first_limit, limit)
    cuts, u = [0], 0
    for size in sizes[:-1]:
        u += size
        cuts.append(spans[u][0])
    cuts.append(len(part))
    return [part[a:b] for a, b in zip(cuts, cuts[1:])]


def cut_segments(text: str, first_seconds: float, piece_seconds: float, whole: bool = False) -> list[Segment]:
    """The text as segments, in order: pieces to speak and the exact silences of its pause tags
    (a leading or trailing pause included). whole: no cutting at sentences (one piece per part)."""
    parts, gaps = textmod.split_pauses(text)
    out: list[Segment] = [Segment(None, gaps[0])] if gaps[0] > 0 else []
    for p, part in enumerate(parts):
        first = first_seconds if p == 0 else None
        for piece in [part] if whole else cut_part(part, first, piece_seconds):
            out.append(Segment(piece))
        if gaps[p + 1] > 0:
            out.append(Segment(None, gaps[p + 1]))
    return out


def cut_request(req: "Request", config: StreamConfig) -> list[Segment]:
    """A request's segments as the streamed render (and the server) cut them: pieces up to the
    config's lengths and never over the request's chunk threshold; a fixed duration is not cut."""
    whole = req.duration is not None  # a fixed length is one generation: not cut
    limit = min(config.piece_seconds, req.generation.audio_chunk_threshold)
    return cut_segments(req.text, config.first_seconds, limit, whole=whole)


# ---------------------------------------------------------------------------------------------
# Scheduling
# ---------------------------------------------------------------------------------------------


def forward_model(points: list[tuple[int, float]]) -> Callable[[int], float]:
    """Seconds per forward as a function of the packed tokens, from measured (tokens, seconds)
    points: proportional to the tokens from a single point (pessimistic where a forward costs
    about the same at any size, as on a GPU), a line a + b * tokens (a, b >= 0) fitted by least
    squares through two or more distinct sizes."""
    if not points:
        raise ValueError("forward_model needs a measurement")
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    if len(set(xs)) < 2:
        rate = max(y / x for x, y in zip(xs, ys))
        return lambda tokens: rate * tokens
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    b = max(b, 0.0)
    a = max(my - b * mx, 0.0)
    return lambda tokens: a + b * tokens


@dataclass
class WavePlanner:
    """Sizes the waves after piece 0 from the measured speed.

    A wave of pieces is ready when its forwards (num_step of them, all the wave's jobs packed in
    each) and the decoding of its first piece are done; it must be ready within `margin` of the
    audio still queued for playback when it starts. The largest such wave is taken (packing more
    pieces in one forward is cheaper per piece). When even one piece cannot be, `behind` is set
    and waves double in size from the last one."""

    num_step: int
    max_batch_size: int
    max_packed_tokens: int
    margin: float = 0.8
    points: list[tuple[int, float]] = field(default_factory=list)  # measured (packed tokens, s per forward)
    decode_rate: float = 0.0  # seconds of decoding + post-processing per second of audio
    behind: bool = False  # the device was found slower than real time
    last_size: int = 1

    def measure_wave(self, tokens: int, seconds_per_forward: float) -> None:
        self.points.append((tokens, seconds_per_forward))

    def measure_decode(self, seconds: float, audio_seconds: float) -> None:
        self.decode_rate = seconds / max(audio_seconds, 1e-3)  # the latest: the first decode warms up

    def predicted(self, tokens: int, first_audio_seconds: float) -> float:
        """Seconds until the first piece of a wave of `tokens` packed tokens is ready."""
        return self.num_step * forward_model(self.points)(tokens) + self.decode_rate * first_audio_seconds

    def size(self, lens: list[int], audio_seconds: list[float], queued: float) -> int:
        """How many of the next pieces (packed lengths `lens`, estimated audio seconds) to run
        together, given `queued` seconds of audio not yet played."""
        n, tokens = 0, 0
        while n < len(lens) and n < self.max_batch_size and (n == 0 or tokens + lens[n] <= self.max_packed_tokens):
            if self.predicted(tokens + lens[n], audio_seconds[0]) > self.margin * queued:
                break
            tokens += lens[n]
            n += 1
        if n == 0:  # not even one piece in time: slower than real time
            self.behind = True
            n = 1
        if self.behind:
            n = max(n, min(2 * self.last_size, len(lens)))
            n = min(n, self.max_batch_size, _fitting(lens, self.max_packed_tokens))
        self.last_size = n
        return n


def _fitting(lens: list[int], budget: int) -> int:
    """How many of lens fit in one forward of `budget` tokens (at least one)."""
    n, used = 0, 0
    for length in lens:
        if n and used + length > budget:
            break
        used += length
        n += 1
    return max(n, 1)


# ---------------------------------------------------------------------------------------------
# The render
# ---------------------------------------------------------------------------------------------


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


def stream_pieces(req: "Request", texts: list[str], frame_rate: float) -> list[Piece]:
    """The pieces of spoken texts as the streamed render runs them: each estimated against its
    voice when its job is made, at the request's speed (relative to the voice's rate:
    pieces.speed_against); a fixed duration (one piece: a fixed length is not cut) is the piece's
    length whatever the voice, spoken at its effective speed."""
    if req.duration is None:
        return [Piece(0, k, text, None, req.speed) for k, text in enumerate(texts)]
    fixed = [textmod.resolve_target_len(text, None, None, req.speed, req.duration, frame_rate) for text in texts]
    return [Piece(0, k, text, target, rate) for k, (text, (target, rate)) in enumerate(zip(texts, fixed))]


class StreamedPieces(RequestPieces):
    """A request as the streamed render and the service run it (pieces.py has the policy): cut at
    pauses and sentences (`cut_request`), each spoken piece decoded and post-processed on its own
    exactly as a whole request of its text (`Engine.render`), and every segment, pauses
    included, handed out strictly in order (`hand_out`)."""

    def __init__(
        self, engine: "Engine", req: "Request", config: StreamConfig, check=None, segments: list[Segment] | None = None
    ) -> None:
        self.engine, self.req = engine, req
        self.segments = cut_request(req, config) if segments is None else segments  # given: cut by the caller
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
        # (text, audio or a count of zero samples, seed) of each segment ready and not yet handed out
        self._ready: list = [None] * len(self.segments)
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
        text, seed = self.segments[i].text, self.seed_for(k)
        result = self.engine.render(replace(self.req, text=text, seed=seed), job)
        audio = result.audio
        if result.pieces:
            self.kept[i] = (result.pieces[0][1], result.pieces[-1][2])
        self._ready[i] = (text, audio, seed)
        self.lengths[k] = len(audio)

    def take_audio(self, k: int, job) -> tuple:
        """A take as it would be handed out (its seed: the take's)."""
        text = self.segments[self.speech[k]].text
        return self.engine.render(
            replace(self.req, text=text, seed=self.seed_for(k)), job
        ).audio, self.engine.sample_rate

    def hand_out(self) -> Iterator[StreamPiece]:
        """The segments ready at the head, in order, each marked handed out as it is taken."""
        import numpy as np

        while self.next < len(self.segments) and self._ready[self.next] is not None:
            text, audio, seed = self._ready[self.next]
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
    then waves of the ready pieces sized by `WavePlanner`."""

    def __init__(
        self, engine: "Engine", req: "Request", config: StreamConfig, clock, cancel, on_warning, check=None
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
        self.forward_times: list[float] = []  # seconds of each forward of the running wave
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
            self.forward_times.append(self.clock() - self.last_forward)  # its last forward
            self.planner.measure_wave(self.wave_tokens, statistics.median(self.forward_times))
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
            self.forward_times.append(now - self.last_forward)
        self.last_forward = now

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
    engine: "Engine",
    req: "Request",
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
    from .generation import run_jobs
    from .pipeline import validate_request

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
        engine: "Engine",
        req: "Request",
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
            except queue.Empty:
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
