"""What every way in shares once its settings are resolved (free of typer and rich).

    hw = Hardware.from_settings(resolved.values)
    engine, seconds = load_engine(hw, encoder=True, status=loading_line, on_notice=echo)
    seed = random_seed()                  # a drawn seed: printed, so a run can be repeated
    seed_for(base, i)                     # item i of a run whose base seed is `base` (checked)
    shown = WarnOnce(warn); shown(["..."])

`say`, `batch`, `dub`, the dialogue, `voice add`, the server and the Ray workers load their
engine here; the face (commands/) only passes its status line and message printers in.
"""

from __future__ import annotations

import secrets
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .engine.errors import InvalidRequest
from .settings import MAX_SEED

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

    def __call__(self, warnings: Iterable[str]) -> None:
        for w in warnings:
            if w not in self.shown:
                self.show(w)
                self.shown.append(w)


@dataclass(frozen=True)
class Hardware:
    """Which model to load and how: the hardware settings of a run, resolved."""

    model: str  # hub id or checkpoint folder
    device: str = "auto"  # auto, cpu, cuda, cuda:N, mps
    dtype: str = "auto"  # auto, float32, float16, bfloat16
    quantize: str | None = None  # "int8" (CPU body in int8) or None
    compile: bool = False  # torch.compile the layers
    threads: int | None = None  # torch CPU threads (None: the engine's default)

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> "Hardware":
        """From resolved setting values (the keys of the settings schema)."""
        quantize = values.get("quantize")
        return cls(
            model=str(values["model"]),
            device=values.get("device") or "auto",
            dtype=values.get("dtype") or "auto",
            quantize=None if quantize in (None, "none") else quantize,
            compile=bool(values.get("compile")),
            threads=values.get("threads"),
        )

    def engine_kwargs(self) -> dict[str, Any]:
        """Engine.load's keyword arguments: only those asked for, so its own defaults stand."""
        kwargs: dict[str, Any] = {"device": self.device, "dtype": self.dtype}
        if self.quantize is not None:
            kwargs["quantize"] = self.quantize
        if self.compile:
            kwargs["compile"] = True
        if self.threads is not None:
            kwargs["threads"] = self.threads
        return kwargs


def load_engine(
    hw: Hardware,
    *,
    encoder: bool = False,
    status: Callable[[str], AbstractContextManager] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> tuple[Any, float]:
    """Load the engine `hw` names, and the codec's encoder when a recording is to be cloned;
    returns (engine, seconds). The seconds are the "model loaded in" of every summary, the same
    with or without a voice: the model (with compile, its compilation: Engine.load runs a first
    forward), not the encoder, which belongs to preparing a voice (callers time that apart).
    `status(what)` is a context manager shown while each loads (the face's status line);
    `on_notice` gets the engine's messages (licence, download)."""
    from .engine import pipeline

    status = status or (lambda what: nullcontext())
    t0 = time.perf_counter()
    with status(f"the model ({hw.model})"):
        engine = pipeline.Engine.load(hw.model, on_notice=on_notice, **hw.engine_kwargs())
    seconds = time.perf_counter() - t0
    if encoder:
        with status("the voice encoder"):
            engine.load_encoder()
    return engine, seconds
