"""What the service (service.py) hands its callers: a submitted request's `Ticket`, the `Event`s
its on_event receives, the `Summary` of what it took, `Places` reserved for one caller, and the
refusals (`Busy`, `ServiceStopped`, `RequestCancelled`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Protocol

from .errors import OmniVoiceError
from .pipeline import Engine
from .planning import Request
from .stream.render import StreamedPieces, StreamPiece

if TYPE_CHECKING:
    from .sound.voice import VoicePrompt


class Owner(Protocol):
    """What a ticket and its places need of the service that made them (service.Service)."""

    engine: Engine
    clock: Callable[[], float]

    def give_back(self, places: "Places") -> None: ...

    def drop(self, ticket: "Ticket") -> None: ...


class Busy(OmniVoiceError):
    """max_queue requests are open: try again in `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServiceStopped(OmniVoiceError):
    """The service is stopping (or stopped) and takes no new requests."""


class RequestCancelled(OmniVoiceError):
    """The request was cancelled (its client left) or the service stopped under it."""


@dataclass(frozen=True)
class Summary:
    """What one request took."""

    pieces: int  # spoken pieces generated
    samples: int  # samples handed out in all
    sample_rate: int  # Hz
    seed: int  # the request's seed (piece k used seed + k)
    queued: float  # seconds from submit to its first forward
    first_audio: float | None  # seconds from submit to its first spoken piece handed out
    seconds: float  # seconds from submit to its end
    forwards: int  # forwards it took part in
    warnings: list[str] = field(default_factory=list)

    @property
    def audio_seconds(self) -> float:
        return self.samples / self.sample_rate


EventKind = Literal["piece", "done", "error"]  # what an Event says: a piece spoken, the end, or the error


@dataclass(frozen=True)
class Event:
    """What a request's on_event receives: "piece", then "done" (or "error" at any time)."""

    kind: EventKind
    piece: StreamPiece | None = None
    summary: Summary | None = None
    error: BaseException | None = None


class Places:
    """Places of max_queue held for one caller's requests (a dialogue's lines: one admission for
    them all): `size` places taken at once by Service.reserve, its requests taking only these,
    given back by release()."""

    def __init__(self, service: Owner, size: int) -> None:
        self.service, self.size = service, size
        self.released = False

    def release(self) -> None:
        self.service.give_back(self)


class Ticket:
    """One submitted request, as the service tracks it. `cancel()` may be called from any thread;
    the rest belongs to the loop thread."""

    def __init__(
        self,
        service: Owner,
        number: int,
        req: Request,
        pieces: StreamedPieces,
        on_event,
        warnings,
        places: Places | None = None,
    ):
        self.service, self.id, self.request, self.on_event = service, number, req, on_event
        self.places = places  # the places it takes (None: one of max_queue's own)
        self.pieces = pieces  # its segments, the voice and seeds of its pieces, what is ready to hand out
        self.warnings = list(warnings)
        self.active = 0  # its jobs in the forward now
        self.forwards = 0
        self.cancelled = False
        self.closed = False
        self.submitted = service.clock()
        self.started: float | None = None
        self.first_audio: float | None = None

    @property
    def voice(self) -> "VoicePrompt | None":
        """The voice its pieces after 0 are spoken in: the reference, or piece 0's once it is done
        (also for a text of one piece: a caller's voice to go on in, e.g. the next part of a
        streamed answer)."""
        return self.pieces.voice

    @property
    def seed(self) -> int:
        return self.request.seed

    def cancel(self) -> None:
        """Drop this request: its jobs leave at the next forward and its place is free at once."""
        self.service.drop(self)
