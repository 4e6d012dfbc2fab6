"""A dialogue script spoken by `say --cast` (`DialogueRun`): every line of the script
(dialogue.plan_script) in one packed run, joined with gaps of silence; subtitles, then the audio,
then the player; its report (`DialogueReport`, a `SpokenLine` per line).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from ...engine.hardware import Hardware
from ...engine.planning import Result
from ...media.marks import Mark
from ...media.output import OutputTarget
from ...media.subtitles import Subtitle, finish_subtitles, subtitles_from_pieces
from ..deliver import Audio, Outputs, Take, deliver
from ..request import Built, References, finish_request
from ..session import Session, WarnOnce
from ..signals import HoldSignals
from ..voices.design import request_voice_prompt
from .dialogue import Script
from .speakrun import Shown, Writes, open_the_player, stopped_after, where

if TYPE_CHECKING:
    from ...engine.pipeline import Engine


@dataclass(frozen=True)
class SpokenLine:
    """One line of a dialogue, spoken: where it is in the audio (samples)."""

    number: int  # its line number in the script
    speaker: str  # the cast member's name
    voice: str  # the member's VOICE as --cast gave it
    text: str  # what the model was given
    seed: int
    start: int
    end: int
    voice_prompt: str | None = (
        None  # the voice prompt it cloned (design.voice_prompt): a designed member's first line's
    )


@dataclass(frozen=True)
class DialogueReport:
    """What speaking a dialogue script gave: the numbers of its summary line and of its --json."""

    target: OutputTarget | None  # where the audio went (None: the player only)
    sample_rate: int
    audio_seconds: float
    seconds: float  # generating every line, joining and writing (and playing)
    load_seconds: float
    seed: int  # the base seed: line i has seed + i
    lines: tuple[SpokenLine, ...]
    subtitles: Path | None
    warnings: tuple[str, ...]

    @property
    def where(self) -> str:
        return where(self.target)


class DialogueRun:
    """Load, generate every line in one packed run, write subtitles then audio (a stop waits),
    and play the whole when there is a player."""

    def __init__(
        self,
        script: Script,
        target: OutputTarget | None,
        hardware: Hardware,
        *,
        model: str,
        gap: float | Sequence[float],
        subtitles: Path | None = None,
        play: bool = False,
        session: Session = Session(),
        shown: Shown | None = None,
        loudness: float | None = None,
        sample_rate: int | None = None,
        mark: Mark | None = None,
    ) -> None:
        self.mark = mark  # the AI mark of the file (app/marking.run_mark; None: --no-mark)
        self.loudness = loudness  # --loudness: the target of the whole dialogue (LUFS)
        self.sample_rate = sample_rate  # --sample-rate: the output's (None: the model's)
        self.script, self.target, self.model, self.hardware = script, target, model, hardware  # dialogue.Script
        self.gap = gap
        self.requests: list = []  # the lines' engine requests, their designed voices rendered (run)
        self.subtitles, self.play, self.session = subtitles, play, session
        self.shown: Shown = shown if shown is not None else WarnOnce(session.warn)

    def run(self, signals: HoldSignals) -> DialogueReport:
        """Speak; StoppedBySignal on Ctrl-C / SIGTERM (`signals`: the HoldSignals the writes are held by)."""
        built, target, writes = self.script.lines, self.target, Writes(signals)
        player = open_the_player(self.play)  # before the model is loaded
        try:
            engine, load = self.session.load_engine(self.model, self.hardware)
            t0 = time.perf_counter()
            with self.session.status("preparing the voices ..."):  # a designed member: rendered once, then cloned
                self.requests, spoken = prepare_lines(engine, [b for _, b in built], self.script.refs)
            with self.session.steps(f"generating {len(built)} lines", None) as on_step:
                made = iter(engine.generate([r for r, s in zip(self.requests, spoken) if s is None], on_step=on_step))
                results = [s if s is not None else next(made) for s in spoken]
            for r in results:
                self.shown(r.warnings)
            audio, subs, starts = join_dialogue(built, results, self.gap, engine.sample_rate)
            outputs = Outputs(
                target=target,
                subtitles=self.subtitles,
                loudness=self.loudness,
                loudness_what="the dialogue",
                sample_rate=self.sample_rate,
                stdout=self.session.stdout,
                mark=self.mark,
            )
            take = Take(audio, engine.sample_rate, cues=subs)
            played = deliver(take, outputs, protect=writes.protect, player=player, warn=lambda w: self.shown([w]))
        except KeyboardInterrupt as e:
            if player is not None:
                player.stop()
            raise stopped_after(e, writes.done and target is not None, target) from None
        return self.report(played.audio, results, starts, engine.sample_rate, time.perf_counter() - t0, load)

    def report(
        self, audio: Audio, results: list[Result], starts: list[int], rate: int, seconds: float, load: float
    ) -> DialogueReport:
        lines = tuple(
            SpokenLine(
                line.number,
                line.speaker.name,
                line.speaker.spec,
                req.text,
                req.seed,
                s,
                s + len(r.audio),
                request_voice_prompt(req),
            )
            for (line, _), req, r, s in zip(self.script.lines, self.requests, results, starts)
        )
        return DialogueReport(
            self.target,
            rate,
            len(audio) / rate,
            seconds,
            load,
            self.script.seed,
            lines,
            self.subtitles,
            tuple(self.shown.shown),
        )


def prepare_lines(engine: Engine, built: Sequence[Built], refs: References) -> tuple[list, list[Result | None]]:
    """The lines' engine requests, their voices rendered (a recording encoded, a design rendered
    once), and each line's result where it is spoken already: a line that designs its member's
    voice (its words and seed are the design's sample and seed: the first line asking for it) is
    spoken once, as the render itself (`design.render_line`), never again as a clone of its own
    render; the voice it reports is the render's, the one every later line of the member clones."""
    requests: list = []
    spoken: list[Result | None] = []
    for b in built:
        done = refs.render_line(engine, b)
        requests.append(
            finish_request(engine, b, refs) if done is None else dataclasses.replace(b.request, ref=done[0])
        )
        spoken.append(None if done is None else done[1])
    return requests, spoken


def join_dialogue(
    built: Iterable, results: list[Result], gap: float | Sequence[float], rate: int
) -> tuple[Audio, list[Subtitle], list[int]]:
    """The lines' audio joined with gaps (a sequence: the one before each line after the first,
    an SSML document's breaks), their subtitle cues, where each line starts."""
    from ...media.tracks import join_with_gaps

    gaps = round(gap * rate) if isinstance(gap, (int, float)) else [round(g * rate) for g in gap]
    audio, starts = join_with_gaps([r.audio for r in results], gaps)
    subs = []
    for (line, b), r, start in zip(built, results, starts):
        pieces = r.pieces or [(b.request.text, 0, len(r.audio))]
        subs += subtitles_from_pieces(pieces, rate, offset=start, speaker=line.speaker.name)
    return audio, finish_subtitles(subs, round(len(audio) * 1000 / rate)), starts
