"""The piece policy of one request: how its pieces are run, the same in every driver.

Three drivers run requests through the packed loop: `Engine.generate` (pipeline.py), the
streamed render (stream/render.py) and the service (service.py). They cut a text differently by
design (Engine.generate in chunks like the reference, `plan_request`; the other two at pauses
and sentences, `stream.cut.cut_streamed`), but run the pieces by this one policy:

- the voice: with a reference voice every piece uses it; without one, piece 0 is generated
  first and its codes and text are the voice of every later piece;
- the speed, once: a piece is estimated against its voice at its speed relative to the rate the
  voice's codes already have (`speed_against`): piece 0's codes speak at the request's speed (or
  a fixed duration's effective speed) already, so the pieces it voices are estimated against it
  at speed 1 (the reference divides by the speed a second time there: docs/correctness.md);
- the seed of piece k is the request's seed + k (its retake a: + 1000 x a, see below);
- what a finished piece unlocks: with a reference (or a single piece) every piece is ready at
  once and unlocks nothing; without one, piece 0 unlocks all the others;
- a finished piece's output is accepted in one place, `accept`: `pipeline.JoinedPieces` keeps its
  codes (decoded and joined when all are done), `stream.render.StreamedPieces` renders its audio (and
  hands the segments out in order, for the streamed render and the service). A per-piece check
  (speech recognition) hooks in there, once: with a `check`, each finished take of piece k is
  shown to it (`PieceTake`: its text, audio, attempt, seed) before it is accepted; the check answers
  (error, retake?). A retake is the same piece again with seed + k + 1000 x attempt, queued into
  the driver's next forwards with whatever else is running; when the check stops asking, the
  take of least error (the earliest of equal ones) is the one accepted, and `check.kept` is told
  which. The engine never knows what the check is (the application's recogniser).

A driver keeps only its admission policy: which ready pieces go into the next forward.

    pieces = JoinedPieces(engine, plan)    # or StreamedPieces(engine, req, config)
    jobs = [pieces.job(k) for k in pieces.first()]
    ...                                    # piece k's job finishes in the loop:
    jobs += [pieces.job(j) for j in pieces.done(k, job)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:  # annotations only (torch)
    from .model.generation import Job
    from .sound.voice import VoicePrompt

# make a piece's job: (piece, its voice or None, its seed) -> Job
Prepare = Callable[["Piece", "VoicePrompt | None", int], "Job"]
RETAKE_SEED_STEP = 1000  # retake a of piece k: the request's seed + k + 1000 x a


@dataclass(frozen=True)
class PieceTake:
    """One finished generation of a piece, for a check to judge."""

    piece: int
    text: str
    attempt: int  # 0: the first take
    seed: int
    audio: Any  # float32 [N], the piece alone decoded (no post-processing)
    sample_rate: int


class PieceCheck(Protocol):
    """A per-piece check (the application's: e.g. a speech recogniser's word error rate)."""

    def check(self, take: PieceTake) -> tuple[float, bool]:
        """(error, retake?) of one take."""

    def kept(self, piece: int, attempt: int, seed: int) -> None:
        """The take of piece `piece` that is accepted."""


@dataclass(frozen=True)
class Piece:
    """One generation of a request: a whole text, a part between pauses, or a chunk of one."""

    part: int  # which pause-separated part it belongs to
    chunk: int  # its index within the part
    text: str  # what it says
    target_len: int | None  # frames, or None: estimated against its voice when its job is made
    # the rate it is spoken at (the request's speed, or a fixed duration's effective speed; None:
    # 1); estimated against a voice at speed_against(speed, the voice's rate)
    speed: float | None = None


def speed_against(speed: float | None, voice_rate: float | None) -> float | None:
    """The speed to estimate a text at against a voice whose codes already speak at `voice_rate`
    (VoicePrompt.rate; None: a recording, rate 1), for it to be spoken at `speed` (None: 1).
    None when that is 1: against piece 0's own codes, at piece 0's speed."""
    relative = (1.0 if speed is None else speed) / (1.0 if voice_rate is None else voice_rate)
    return None if relative == 1.0 else relative


class RequestPieces:
    """The pieces of one request and the policy they run by (see the module doc).

    pieces: the driver's cut; ref: the request's voice (None: piece 0 voices the rest); seed: the
    request's; voice_text: piece 0's text as the voice of the others (the driver's cut says how
    it reads); prepare(piece, voice, seed): its job. Subclasses say what `accept` does."""

    def __init__(
        self,
        pieces: list[Piece],
        *,
        ref: "VoicePrompt | None",
        seed: int,
        voice_text: str,
        prepare: Prepare,
        check: PieceCheck | None = None,
    ) -> None:
        self.pieces, self.ref, self.seed = pieces, ref, seed
        self.voice = ref  # the voice of pieces after 0: the reference, or piece 0's once it is done
        self.finished = [False] * len(pieces)
        self.voice_text, self._prepare = voice_text, prepare
        self.check = check
        self.attempts = [0] * len(pieces)  # the take of piece k now running (or kept, once finished)
        self._best: dict[int, tuple[float, int, "Job"]] = {}  # piece -> (error, attempt, job) of its best take

    def __len__(self) -> int:
        return len(self.pieces)

    @property
    def independent(self) -> bool:
        """Every piece can run at once (a reference voice, or a single piece)."""
        return self.ref is not None or len(self.pieces) <= 1

    @property
    def complete(self) -> bool:
        return all(self.finished)

    def seed_for(self, k: int, attempt: int | None = None) -> int:
        """The seed of piece k (of its take `attempt`; default: the one running, or kept)."""
        attempt = self.attempts[k] if attempt is None else attempt
        return self.seed + k + RETAKE_SEED_STEP * attempt

    def first(self) -> list[int]:
        """The pieces ready before any is done."""
        return list(range(len(self.pieces))) if self.independent else [0]

    def unlocks(self, k: int) -> list[int]:
        """The pieces that become ready when piece k is done."""
        return [] if self.independent or k != 0 else list(range(1, len(self.pieces)))

    def ready(self, k: int) -> bool:
        return self.independent or k == 0 or self.voice is not None

    def waiting(self) -> int:
        """Pieces not ready yet (waiting for piece 0's voice)."""
        return 0 if self.independent or self.voice is not None else len(self.pieces) - 1

    def voice_for(self, k: int) -> "VoicePrompt | None":
        """The voice piece k is spoken in: the reference, or (after 0, without one) piece 0's."""
        return self.ref if k == 0 else self.voice

    def job(self, k: int, voice: "VoicePrompt | None" = None) -> "Job":
        """The job of piece k, which must be ready. `voice`: the voice to speak it in (by default
        the one voice_for gives, once piece 0 is done when it voices the others)."""
        if voice is None:
            if not self.ready(k):
                raise RuntimeError(f"piece {k} waits for piece 0's voice")
            voice = self.voice_for(k)
        return self._prepare(self.pieces[k], voice, self.seed_for(k))

    def take_audio(self, k: int, job: "Job") -> tuple[Any, int]:
        """(audio, sample rate) of a finished take of piece k, for the check."""
        raise NotImplementedError

    def _judge(self, k: int, job: "Job", check: PieceCheck) -> "Job | None":
        """The check's verdict on piece k's take: None (retake it), or the take to accept."""
        attempt = self.attempts[k]
        audio, rate = self.take_audio(k, job)
        error, retake = check.check(PieceTake(k, self.pieces[k].text, attempt, self.seed_for(k), audio, rate))
        best = self._best.get(k)
        if best is None or error < best[0]:
            self._best[k] = best = (float(error), attempt, job)
        if retake:
            self.attempts[k] = attempt + 1
            return None
        del self._best[k]
        self.attempts[k] = best[1]
        check.kept(k, best[1], self.seed_for(k))
        return best[2]

    def done(self, k: int, job: "Job") -> list[int]:
        """Piece k's job is finished: its output is accepted (`accept`); -> the pieces it unlocks
        (or [k] itself: the check asks for a retake)."""
        if self.check is not None:
            kept = self._judge(k, job, self.check)
            if kept is None:
                return [k]
            job = kept
        self.accept(k, job)
        self.finished[k] = True
        if k == 0 and self.ref is None:  # piece 0 speaks for the rest (and, alone, for a caller's next)
            self.voice = self.first_voice(job.tokens)
        return self.unlocks(k)

    def first_voice(self, codes) -> "VoicePrompt":
        """Piece 0's codes as the voice of the others (without a reference): its text, and the
        rate it was spoken at, so the pieces it voices are not sped up again."""
        from .sound.voice import VoicePrompt

        return VoicePrompt(codes, self.voice_text, None, rate=self.pieces[0].speed if self.pieces else None)

    def accept(self, k: int, job: "Job") -> None:
        """The one place a finished piece's output is taken (kept, or rendered to audio)."""
        raise NotImplementedError
