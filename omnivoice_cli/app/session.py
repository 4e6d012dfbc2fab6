"""What every way in shares once its settings are resolved (free of typer and rich).

    hw = hardware_from_settings(resolved.values)  # engine/hardware.py's record
    seed = random_seed()                  # a drawn seed: printed, so a run can be repeated
    seed_for(base, i)                     # item i of a run whose base seed is `base` (checked)
    shown = WarnOnce(warn); shown(["..."])
    session = Session(echo=..., status=..., progress=..., notice=..., quiet=...)  # how a run shows itself
    engine, seconds = session.load_engine(resolved["model"], hw)

`say`, `batch`, `dub`, the dialogue, `voice add`, the server and the Ray workers load their
engine here; the face (commands/) only passes its status line, progress bars and message printers
in (a `Session`; the `Progress` protocol is what its bars implement).
"""

from __future__ import annotations

import secrets
import sys
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Mapping, Protocol

from ..engine import pipeline
from ..engine.errors import InvalidRequest
from ..engine.hardware import Hardware
from ..engine.pipeline import Engine
from .settings.schema import MAX_SEED

RANDOM_SEED_BOUND = 2**31  # drawn seeds stay short enough to read and retype


def random_seed() -> int:
    """A fresh seed for a run that names none (reported, so the run can be repeated)."""
    return secrets.randbelow(RANDOM_SEED_BOUND)


def check_seed_range(base: int, count: int) -> None:
    """Items 0..count-1 of a run take seeds base + i: the last must still be a seed."""
    if count > 0 and base + count - 1 > MAX_SEED:
        raise InvalidRequest(f"seed {base} + {count - 1} is more than {MAX_SEED}: give a smaller --seed")


def seed_for(base: int, i: int) -> int:
    """The seed of item i (a line, a cue, a piece) of a run whose base seed is `base`."""
    check_seed_range(base, i + 1)
    return base + i


class WarnOnce:
    """Hands each warning to `show` once per run (the same text again is dropped)."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self.show = show
        self.shown: list[str] = []

    def new(self, warnings: Iterable[str]) -> list[str]:
        """The warnings not seen before, in order (now seen; nothing is shown)."""
        fresh = []
        for w in warnings:
            if w not in self.shown:
                self.shown.append(w)
                fresh.append(w)
        return fresh

    def __call__(self, warnings: Iterable[str]) -> None:
        for w in self.new(warnings):
            self.show(w)


def hardware_from_settings(values: Mapping[str, Any]) -> Hardware:
    """The engine's hardware record (engine/hardware.py) from resolved setting values (the keys of
    the settings schema: device, dtype, quantize, compile, threads), built once per run; a setting
    not given keeps the record's default. quantize "none" is no quantisation."""
    quantize = values.get("quantize")
    return Hardware(
        device=values.get("device") or "auto",
        dtype=values.get("dtype") or "auto",
        quantize=None if quantize in (None, "none") else str(quantize),
        compile=bool(values.get("compile")),
        threads=values.get("threads"),
    )


# --------------------------------------------------------------------------------------------
# How a run shows itself: the face passes its own in (commands/common.run_session)
# --------------------------------------------------------------------------------------------

Status = Callable[[str], AbstractContextManager]
"""status(message): a context manager that shows `message` while its block runs (the face's
status line: a spinner on a terminal, else one line)."""


def no_status(message: str) -> AbstractContextManager:
    return nullcontext()


class Progress(Protocol):
    """The progress of a run over many items (batch lines, dub cues); the face's bars implement it
    (progress.BatchProgress). Entered around the speaking."""

    @property
    def shows_steps(self) -> bool:
        """step() shows something (a cluster gathers its workers' steps only then)."""
        ...

    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> object: ...

    def line(self, status: str, what: str = "") -> None:
        """An item finished: status is done, failed or skipped; `what` names it (for a log)."""

    def step(self, done: int, total: int) -> None:
        """The engine's on_step: the current forward loop's step `done` of `total`."""


class NoProgress:
    """Progress that shows nothing (the default)."""

    shows_steps = False

    def __init__(self, total: int = 0) -> None:
        self.total = total

    def __enter__(self) -> "NoProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def line(self, status: str, what: str = "") -> None:
        return None

    def step(self, done: int, total: int) -> None:
        return None


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _nothing(message: str) -> None:
    pass


StepCallback = Callable[[int, int], None]  # on_step(done, total): the engine's steps


@contextmanager
def no_steps(label: str, total: int | None) -> Iterator[StepCallback]:
    yield lambda done, total: None


def _stdout() -> BinaryIO:
    return sys.stdout.buffer


@dataclass(frozen=True)
class Session:
    """How one run shows itself, as the face set it up, and its engine loaded through it: the
    one record every run is given (say, the dialogue, batch, dub, the book; the defaults: messages
    on stderr, no warnings of a text's run, no status line, no bars, no engine notices).

    echo: messages (errors, notes; batch's and dub's warnings, which they word themselves);
    warn: one warning as it comes (a text's run: say, the dialogue); quiet: the run's
    informational messages are off (the face's status and bars already know it); status: the
    status line; progress(total): the bars over a run of `total` items (batch lines, dub cues);
    steps(label, total): the bar of one text's steps, a context manager giving its on_step
    (total None: the engine's totals); notice: the engine's messages (licence, download);
    stdout: the binary stdout, asked for when the audio goes there."""

    echo: Callable[[str], None] = _to_stderr
    quiet: bool = False
    status: Status = no_status
    progress: Callable[[int], Progress] = NoProgress
    notice: Callable[[str], None] | None = None
    warn: Callable[[str], None] = _nothing
    steps: Callable[[str, int | None], AbstractContextManager[StepCallback]] = no_steps
    stdout: Callable[[], BinaryIO] = _stdout

    def loading(self, what: str) -> AbstractContextManager:
        """The status line while `what` loads: "loading the model (x) ..."."""
        return self.status(f"loading {what} ...")

    def load_engine(self, model: str, hw: Hardware, *, encoder: bool = False) -> tuple[Engine, float]:
        """Load `model` on `hw`, and the codec's encoder when a recording is to be cloned;
        returns (engine, seconds): the one way every run loads its model. The seconds are the
        "model loaded in" of every summary, the same with or without a voice: the model (with
        compile, its compilation: Engine.load runs a first forward), not the encoder, which
        belongs to preparing a voice (callers time that apart). This session's status line is
        shown while each loads ("loading the model (x) ..."); its `notice` gets the engine's
        messages (licence, download)."""
        t0 = time.perf_counter()
        with self.loading(f"the model ({model})"):
            engine = pipeline.Engine.load(model, hardware=hw, on_notice=self.notice)
        seconds = time.perf_counter() - t0
        if encoder:
            with self.loading("the voice encoder"):
                engine.load_encoder()
        return engine, seconds
