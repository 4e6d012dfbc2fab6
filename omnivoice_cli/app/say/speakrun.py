"""What every run under `omnivoice say` shares (speak.py chooses the run): the text to speak,
checked without the model (`Speech`), the report of speaking it (`SpeechReport`), the stop by
Ctrl-C or SIGTERM (`StoppedBySignal`: a whole output or nothing written), the writes held from a
stop (`Writes`), the base of the plain and streamed runs (`SpeechRun`: the model, --verify's
check) and the player, started before the model.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Protocol

from ...engine.hardware import Hardware
from ...engine.pipeline import Engine
from ...engine.planning import Request
from ...media.leveller import LoudnessReport
from ...media.marks import Mark
from ...media.output import OutputTarget
from ...media.player import open_player
from ...media.players import Player
from ..deliver import Audio
from ..listening.verify import RequestCheck, Verifier
from ..marking import run_mark
from ..phrases.phrasecache import PhraseCache
from ..request import Built, Reference, References
from ..session import Session, WarnOnce
from ..settings.layers import Resolved
from ..signals import HoldSignals, signal_name


class Shown(Protocol):
    """Warnings shown once per run (session.WarnOnce): `shown` lists them."""

    shown: list[str]

    def __call__(self, warnings: Iterable[str]) -> None: ...


@dataclass(frozen=True)
class Speech:
    """One text to speak, checked without the model: what `PlainRun` and `StreamedRun` are given."""

    built: Built  # the request (its recording still to encode) and its settings
    refs: References  # where that recording is encoded, once
    target: OutputTarget | None  # a file or stdout; None: the player only
    hardware: Hardware  # how to load the model (its settings name the model)
    subtitles: Path | None = None  # --subtitles: written just before the audio
    play: bool = False  # played as it is made
    stream: bool = False  # --stream: stdout piece by piece
    words: Path | None = None  # --words: the word timings (words.py), written just before the audio
    subtitle_level: str = "line"  # --subtitle-level word: VTT cues with each word's time
    cache: PhraseCache | None = None  # --cache: the phrase cache (a plain render to -o FILE)

    @property
    def loudness(self) -> float | None:
        """--loudness: the target of the whole output (LUFS), or None."""
        return self.built.settings.get("loudness")

    @property
    def sample_rate(self) -> int | None:
        """--sample-rate: the output's rate in Hz (None: the model's); the player gets the model's."""
        return self.built.settings.get("sample_rate")

    @property
    def mark(self) -> Mark | None:
        """The AI mark of what it writes (None: --no-mark)."""
        return run_mark(self.built.settings)

    @property
    def streamed(self) -> bool:
        """Rendered piece by piece: --stream, or played (but for --loudness: measured whole, then played)."""
        return self.stream or (self.play and self.loudness is None)

    @property
    def settings(self) -> Resolved:
        """The settings used: the request's, with the format of the output it goes to."""
        if self.target is None:
            return self.built.settings
        return self.built.settings.with_values({"format": self.target.audio_format.name})


class StoppedBySignal(Exception):
    """A run stopped by Ctrl-C or SIGTERM: its one line (an error when nothing was written).

    `complete`: the stop came while the whole output was being written, so the run is whole (exit
    0); otherwise exit 128 + signum (130 for Ctrl-C, 143 for SIGTERM). A stop is either a complete
    run or nothing written, never a partial file."""

    def __init__(self, signum: int, message: str, failed: bool, complete: bool = False) -> None:
        super().__init__(message)
        self.signum, self.message, self.failed, self.complete = signum, message, failed, complete

    @property
    def exit_code(self) -> int:
        return 0 if self.complete else 128 + self.signum


def signal_number(e: BaseException) -> int:
    """The signal a stop came by (SIGINT for a KeyboardInterrupt of our own)."""
    return int(getattr(e, "signum", signal.SIGINT))  # Stop (SIGINT / SIGTERM), or a KeyboardInterrupt of our own


def playback_stopped(e: BaseException) -> StoppedBySignal:
    """The stop of a run that only played: not a failure, nothing was to be written."""
    return StoppedBySignal(signal_number(e), f"playback stopped by {signal_name(signal_number(e))}", failed=False)


class Writes:
    """The writes of a run, held from a stop (HoldSignals.protect), and whether they all went out:
    a stop held while they were written is raised as they end, after `done` is set."""

    def __init__(self, signals: HoldSignals) -> None:
        self.signals, self.done = signals, False

    @contextmanager
    def protect(self) -> Iterator[None]:
        with self.signals.protect():
            yield
            self.done = True


def stopped_after(e: BaseException, written: bool, target: OutputTarget | None) -> StoppedBySignal:
    """The stop of a run that writes `target`: a complete run when it was `written`, else a failure."""
    signum = signal_number(e)
    if written:
        return StoppedBySignal(
            signum, f"stopped by {signal_name(signum)} after writing {target}", failed=False, complete=True
        )
    return StoppedBySignal(signum, f"stopped by {signal_name(signum)}; nothing was written", failed=True)


# --------------------------------------------------------------------------------------------
# What a run gives
# --------------------------------------------------------------------------------------------


def where(target: OutputTarget | None) -> str:
    """How a summary names where the audio went."""
    return "the player" if target is None else "stdout" if target.to_stdout else str(target)


@dataclass(frozen=True)
class SpeechReport:
    """What speaking one text gave: the numbers of `say`'s summary line and of its --json."""

    target: OutputTarget | None  # where the audio went (None: the player only)
    played: bool  # played as it was made
    sample_rate: int
    audio_seconds: float
    seconds: float  # generating (streamed: until the last piece was handed on) and writing
    load_seconds: float  # the model ("model loaded in")
    voice_seconds: float | None  # encoding the recording (None: none, or within `seconds` when streamed)
    first_audio_seconds: float | None  # streamed: the first piece ready, from the start of the render
    seed: int
    pieces: int
    settings: Resolved  # the settings used (the format: the output's)
    reference: Reference | None  # the recording cloned
    voice_file: Path | None  # the saved voice or voice file spoken in
    subtitles: Path | None
    warnings: tuple[str, ...]  # every warning shown, once
    verify: list | None = None  # --verify: per piece (verify.RequestCheck.report)
    loudness: dict | None = None  # --loudness: what normalising did (leveller.LoudnessReport.as_dict)
    ran: dict | None = None  # the path taken, resolved (`path_taken`); None: a server's
    cache: str | None = None  # --cache: "hit" (written from the phrase cache) or "miss"; None: off
    voice_prompt: str | None = None  # the sha256 of the voice prompt cloned (design.voice_prompt); None: none

    @property
    def rtf(self) -> float | None:
        return self.seconds / self.audio_seconds if self.audio_seconds > 0 else None

    @property
    def where(self) -> str:
        return where(self.target)


def speech_report(
    speech: Speech,
    shown: Shown,
    *,
    result: Audio,
    sample_rate: int,
    seconds: float,
    load: float,
    voice: float | None,
    first: float | None,
    seed: int,
    pieces: int,
    verify: list | None = None,
    loudness: LoudnessReport | None = None,
    engine: Engine | None = None,
    voice_prompt: str | None = None,
) -> SpeechReport:
    return SpeechReport(
        target=speech.target,
        played=speech.play,
        sample_rate=sample_rate,
        audio_seconds=len(result) / sample_rate,
        seconds=seconds,
        load_seconds=load,
        voice_seconds=voice,
        first_audio_seconds=first,
        seed=seed,
        pieces=pieces,
        settings=speech.settings,
        reference=speech.built.reference,
        voice_file=speech.built.voice_file,
        subtitles=speech.subtitles,
        warnings=tuple(shown.shown),
        verify=verify,
        loudness=None if loudness is None else loudness.as_dict(),
        ran=None if engine is None else path_taken(engine, speech.settings),
        voice_prompt=voice_prompt,
    )


def path_taken(engine: Engine, settings: Resolved) -> dict:
    """The path a run took, resolved (what `--preset fast`'s `quantize = "auto"` came to on this
    machine): the device, the body's precision, int8 or not, the steps, the step cache."""
    return {
        "device": str(engine.device),
        "dtype": str(engine.dtype).removeprefix("torch."),
        "quantize": getattr(engine, "quantize", None) or "none",
        "num_step": settings["num_step"],
        "step_cache": bool(settings["step_cache"]),
    }


def path_words(ran: dict) -> str:
    """The path taken in words: "int8 on cpu, 16 steps with the step cache"."""
    body = "int8" if ran["quantize"] == "int8" else ran["dtype"]
    cache = " with the step cache" if ran["step_cache"] else ""
    return f"{body} on {ran['device']}, {ran['num_step']} steps{cache}"


class SpeechRun:
    def __init__(self, speech: Speech, session: Session = Session(), shown: Shown | None = None) -> None:
        self.speech, self.session = speech, session
        self.shown: Shown = shown if shown is not None else WarnOnce(session.warn)

    def load(self, encoder: bool = False) -> tuple[Engine, float]:
        return self.session.load_engine(str(self.speech.settings["model"]), self.speech.hardware, encoder=encoder)

    def verifier(self, request: Request) -> RequestCheck | None:
        """--verify: the per-piece check of `request` (its recogniser loaded now, beside the TTS model)."""
        if not self.speech.settings["verify"]:
            return None
        with self.session.status("loading the speech recogniser ..."):
            return Verifier.from_settings(self.speech.settings).for_request(request.lang)


def open_the_player(play: bool) -> Player | None:
    """The player, started before the model is loaded (none that works: PlayerUnavailable, exit 1)."""
    if not play:
        return None
    return open_player()
