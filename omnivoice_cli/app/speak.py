"""Speaking one text, or one dialogue script, into a file, stdout and/or the player: the runs
under `omnivoice say`, free of typer and rich (the command passes its printers in: a session.Session).

    target = output_target(output, settings, stdout_is_terminal)        # before the model
    speech = Speech(built, refs, target, Hardware.from_settings(settings.values), play=True)
    with HoldSignals() as signals:
        try:
            report = speech_run(speech, session, shown).run(signals)   # a SpeechReport
        except Stopped as stop:                                        # Ctrl-C / SIGTERM
            ...print stop.message; exit with stop.exit_code

Three runs, each returning a typed report (what the summary line and --json print):
- `PlainRun` (`-o FILE`, `-o -`): the render that matches the reference. The model is loaded,
  the recording encoded, every piece generated at once, then the subtitles and the audio written
  (a stop waits until the file is complete).
- `StreamedRun` (`--play`, `--stream`, no -o): the text cut at sentences (engine/streaming.py);
  the first piece is generated alone, the rest in packed waves, and each piece is played and/or
  written to stdout as soon as it and the ones before it are ready. A file (`-o FILE` with
  --play / --stream) holds the same streamed render, written at the end through a temporary
  file, so it is never partial.
- `DialogueRun` (`--cast`): every line of a script (dialogue.plan_script) in one packed run,
  joined with gaps of silence; subtitles, then the audio, then the player.

Stopping a streamed render (each exits within a layer of the forward running then, the render's
thread joined):
- Ctrl-C (or SIGTERM) stops the sound at once (`Stopped`: exit 130 / 143); on stdout the piece
  being written is finished first (the stream stays a valid WAV/MP3/... up to there); a file under
  -o is written only at the end, so a stop leaves none (nor its temporary file).
- stdout's reader going away (`... --stream -o - | head -c 1000`): OmniVoiceError "stdout: ...".
- the player quitting before the end (its window closed, the command killed): PlayerFailed.
"""

from __future__ import annotations

import signal
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Mapping, Protocol

from ..engine.errors import InvalidRequest, OmniVoiceError
from ..engine.pipeline import Engine, Planned, Request, Result, plan_of
from ..engine.streaming import StreamPiece, StreamRun
from ..media import output as media_output  # (quiet_stdout looked up when called)
from ..media.formats import streaming_formats
from ..media.leveller import LoudnessReport
from ..media.loudness import streaming_refused
from ..media.output import OutputTarget, check_output
from ..media.player import open_player
from ..media.players import Player
from ..media.subtitles import Subtitle, finish_subtitles, subtitles_from_pieces
from . import listen
from . import settings as st
from .deliver import Audio, Outputs, PieceWriter, Take, deliver, piece_cues, reader_gone, send_piece
from .dialogue import Script
from .request import Built, Reference, References, finish_request
from .session import Hardware, Session, WarnOnce
from .signals import HoldSignals, signal_name
from .verify import RequestCheck, Verifier


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
    hardware: Hardware  # the model to load, and how
    subtitles: Path | None = None  # --subtitles: written just before the audio
    play: bool = False  # played as it is made
    stream: bool = False  # --stream: stdout piece by piece
    words: Path | None = None  # --words: the word timings (words.py), written just before the audio
    subtitle_level: str = "line"  # --subtitle-level word: VTT cues with each word's time

    @property
    def loudness(self) -> float | None:
        """--loudness: the target of the whole output (LUFS), or None."""
        return self.built.settings.get("loudness")

    @property
    def sample_rate(self) -> int | None:
        """--sample-rate: the output's rate in Hz (None: the model's); the player gets the model's."""
        return self.built.settings.get("sample_rate")

    @property
    def streamed(self) -> bool:
        """Rendered piece by piece: --stream, or played (but for --loudness: measured whole, then played)."""
        return self.stream or (self.play and self.loudness is None)

    @property
    def settings(self) -> st.Resolved:
        """The settings used: the request's, with the format of the output it goes to."""
        if self.target is None:
            return self.built.settings
        return self.built.settings.with_values({"format": self.target.audio_format.name})


class Stopped(Exception):
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


def _signum(e: BaseException) -> int:
    return int(getattr(e, "signum", signal.SIGINT))  # Stop (SIGINT / SIGTERM), or a KeyboardInterrupt of our own


def _signal_name(e: BaseException) -> str:
    return signal_name(_signum(e))


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


def _stopped(e: BaseException, written: bool, target: OutputTarget | None) -> Stopped:
    signum = _signum(e)
    if written:
        return Stopped(signum, f"stopped by {signal_name(signum)} after writing {target}", failed=False, complete=True)
    return Stopped(signum, f"stopped by {signal_name(signum)}; nothing was written", failed=True)


def output_target(
    output: str | None, settings: st.Resolved, stdout_is_terminal: Callable[[], bool]
) -> OutputTarget | None:
    """Where the audio goes: None (the player), stdout or a file (output.OutputTarget). A file's
    format is its extension's; --format, when given as a flag, must agree with it; stdout takes
    the format. Binary audio is not written to a terminal."""
    if output is None:
        return None
    flagged = settings.source("format").kind == "flag"
    wanted = settings["format"] if (flagged or output == "-") else None
    target = check_output(output, wanted, settings["sample_rate"])
    if target.to_stdout and stdout_is_terminal():
        raise InvalidRequest("-o - writes binary audio to stdout, which is a terminal: redirect it or pipe it")
    return target


def check_streamable(target: OutputTarget | None) -> None:
    """Before the model: stdout streaming needs a format that can be written piece by piece."""
    if target is not None and target.to_stdout and not target.audio_format.streams:
        raise InvalidRequest(
            f"--stream -o - cannot send {target.audio_format.name} piece by piece: use {streaming_formats()}"
        )


def report_settings(values: Mapping[str, Any]) -> dict:
    """Settings as a --json report gives them: `speed` as used, 1.0 (the normal rate) when none
    was given, and None when --duration sets the length (the speed is then ignored)."""
    out = dict(values)
    if out.get("duration") is not None:
        out["speed"] = None
    elif out.get("speed") is None and "speed" in out:
        out["speed"] = 1.0
    return out


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
    settings: st.Resolved  # the settings used (the format: the output's)
    reference: Reference | None  # the recording cloned
    voice_file: Path | None  # the saved voice or voice file spoken in
    subtitles: Path | None
    warnings: tuple[str, ...]  # every warning shown, once
    verify: list | None = None  # --verify: per piece (verify.RequestCheck.report)
    loudness: dict | None = None  # --loudness: what normalising did (loudness.LoudnessReport.as_dict)

    @property
    def rtf(self) -> float | None:
        return self.seconds / self.audio_seconds if self.audio_seconds > 0 else None

    @property
    def where(self) -> str:
        return where(self.target)


def _report(
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
    )


def speech_run(speech: Speech, session: Session, shown: Shown | None = None) -> "PlainRun | StreamedRun":
    """The run that speaks `speech` (shown through `session`): streamed when it is played or
    streamed, else plain."""
    check_loudness(speech)
    return (StreamedRun if speech.streamed else PlainRun)(speech, session, shown)


def check_loudness(speech: Speech) -> None:
    """Before the model: --loudness measures the whole output, which --stream sends before it exists."""
    if speech.stream and speech.loudness is not None:
        name = speech.built.settings.name("loudness")
        instead = "leave out --stream (the audio is then written, or played, once it is complete)"
        raise InvalidRequest(streaming_refused(name, "--stream", instead), "loudness")


class _Run:
    def __init__(self, speech: Speech, session: Session = Session(), shown: Shown | None = None) -> None:
        self.speech, self.session = speech, session
        self.shown: Shown = shown if shown is not None else WarnOnce(session.warn)

    def load(self, encoder: bool = False) -> tuple[Engine, float]:
        return self.session.load_engine(self.speech.hardware, encoder=encoder)

    def verifier(self, request: Request) -> RequestCheck | None:
        """--verify: the per-piece check of `request` (its recogniser loaded now, beside the TTS model)."""
        if not self.speech.settings["verify"]:
            return None
        with self.session.status("loading the speech recogniser ..."):
            return Verifier.from_settings(self.speech.settings).for_request(request.lang)


# --------------------------------------------------------------------------------------------
# The plain render
# --------------------------------------------------------------------------------------------


class PlainRun(_Run):
    """Load, prepare the voice, generate every piece at once, write (see the module doc)."""

    def run(self, signals: HoldSignals) -> SpeechReport:
        """Speak; Stopped on Ctrl-C / SIGTERM (`signals`: the HoldSignals the writes are held by)."""
        speech, writes = self.speech, Writes(signals)
        player = open_the_player(speech.play)  # --play with --loudness: the whole, once measured
        try:
            self.heard = self.words_recogniser()  # before the TTS model: its failure comes first
            engine, load = self.load()
            request, voice = self.prepare_voice(engine)
            self.shown(getattr(request.ref, "warnings", ()) if speech.built.reference else ())
            t_gen = time.perf_counter()
            plan = plan_of(request)  # made when the request was built, unless its recording changed it
            pieces = len(plan.pieces)
            label = f"generating {pieces} pieces" if pieces > 1 else "generating"
            check = self.verifier(request)
            result = self.generate(engine, Planned.of(request, plan), label, check, plan.steps)
            self.shown(result.warnings)
            if check is not None:
                self.shown(check.warnings())
            done = deliver(
                Take.of(result, request.text, request.lang),
                self.outputs(),
                listener=self.listener(check),
                status=self.session.status,
                protect=writes.protect,  # a Ctrl-C now waits until the file is complete
                player=player,
                warn=lambda w: self.shown([w]),
            )
        except KeyboardInterrupt as e:
            if player is not None:
                player.stop()
            if speech.target is None:
                raise Stopped(_signum(e), f"playback stopped by {_signal_name(e)}", failed=False) from None
            raise _stopped(e, writes.done, speech.target) from None
        finally:
            if self.heard is not None:
                self.heard.close()
        return _report(
            speech,
            self.shown,
            result=result.audio,
            sample_rate=result.sample_rate,
            seconds=time.perf_counter() - t_gen,
            load=load,
            voice=voice,
            first=None,
            seed=result.seed,
            pieces=pieces,
            verify=None if check is None else check.report(),
            loudness=done.loudness,
        )

    def generate(self, engine: Engine, request: Planned, label: str, check: RequestCheck | None, steps: int) -> Result:
        """The request's Result, its steps on the bar: the plan's total (every piece's num_step),
        known from the start; --verify's retakes add theirs as they are queued (the engine's total)."""
        if check is None:
            with self.session.steps(label, steps) as on_step:
                [result] = engine.generate([request], on_step=on_step)
            return result
        with self.session.steps(label, None) as on_step:
            [result] = engine.generate([request], on_step=on_step, checks=[check])
        return result

    def outputs(self) -> Outputs:
        """Where the plain render goes: --words, --subtitles (by the words with them), the file or stdout."""
        speech = self.speech
        return Outputs(
            target=speech.target,
            subtitles=speech.subtitles,
            words=speech.words,
            word_subtitles=speech.words is not None or speech.subtitle_level == "word",
            word_level=speech.subtitle_level == "word",
            loudness=speech.loudness,
            sample_rate=speech.sample_rate,
            stdout=self.session.stdout,
        )

    heard: listen.Recogniser | None = None  # the recogniser of the words, loaded before the TTS model

    def words_recogniser(self) -> listen.Recogniser | None:
        """--words / --subtitle-level word without --verify: the recogniser that times the words,
        loaded before the TTS model, so that a recogniser that cannot be had (not in the cache
        and not downloadable, broken) fails before anything is generated, as --verify's does."""
        speech = self.speech
        if speech.settings["verify"] or not self.outputs().needs_words:
            return None
        with self.session.status("loading the speech recogniser ..."):
            return listen.recogniser(
                speech.settings["asr_model"], speech.settings["device"] or "auto", "--words / --subtitle-level word"
            )

    def listener(self, check: RequestCheck | None) -> Callable[[], AbstractContextManager[listen.Recogniser]]:
        """--words / --subtitle-level word: the recogniser of --verify, the one loaded before the
        model (words_recogniser), or one loaded for the words."""
        speech = self.speech

        @contextmanager
        def hear() -> Iterator[listen.Recogniser]:
            if check is not None:
                yield check.recogniser
                return
            if self.heard is not None:
                yield self.heard
                return
            rec = listen.recogniser(
                speech.settings["asr_model"], speech.settings["device"] or "auto", "--words / --subtitle-level word"
            )
            try:
                yield rec
            finally:
                rec.close()

        return hear

    def prepare_voice(self, engine: Engine) -> tuple[Request, float | None]:
        """The engine request with its recording encoded (the encoder loaded first), and the
        seconds that took: the summary's "voice prepared in", apart from "model loaded in"
        (None: no recording to encode; a saved voice is read before the model loads)."""
        built = self.speech.built
        if built.reference is None:
            return built.request, None
        t0 = time.perf_counter()
        with self.session.status(f"preparing the voice of {built.reference.path} ..."):
            engine.load_encoder()
            request = finish_request(engine, built, self.speech.refs)
        return request, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# The streamed render
# --------------------------------------------------------------------------------------------


class _Streams(Protocol):
    out: BinaryIO | int  # what a stream writer writes to (PieceWriter, media.output.StreamWriter)


def _watch(player: Player | None, writer: _Streams | None) -> Callable[[], None] | None:
    """While the next piece is made: a player that quit, or stdout's reader gone, ends the run now
    (not when the next piece is handed over, which may be a wave's time away)."""
    fd = None
    if writer is not None:
        try:
            fd = writer.out.fileno() if not isinstance(writer.out, int) else writer.out
        except (AttributeError, OSError, ValueError):  # not a real file (a test's buffer)
            fd = None
    if player is None and fd is None:
        return None

    def check() -> None:
        if player is not None:
            player.check()
        if fd is not None and reader_gone(fd):
            media_output.quiet_stdout()
            raise OmniVoiceError("stdout: the reader of the audio stream went away: the audio is incomplete")

    return check


def open_the_player(play: bool) -> Player | None:
    """The player, started before the model is loaded (none that works: PlayerUnavailable, exit 1)."""
    if not play:
        return None
    return open_player()


@dataclass
class _Rendered:
    pieces: list[StreamPiece] = field(default_factory=list)  # in order
    first: float | None = None  # seconds from the render's start to the first piece


class StreamedRun(_Run):
    """The text rendered piece by piece: played, streamed to stdout and/or kept for a file."""

    def run(self, signals: HoldSignals) -> SpeechReport:
        """Speak; Stopped on Ctrl-C / SIGTERM, also while the end plays (it stops at once)."""
        import numpy as np

        speech, written = self.speech, False
        self.file_written = False  # set inside write_file's protected block, before a held stop is raised
        try:
            player = open_the_player(speech.play)
            with player or nullcontext():  # left normally: waits until all has played
                engine, load = self.load(encoder=speech.built.reference is not None)
                t_gen = time.perf_counter()
                request = finish_request(engine, speech.built, speech.refs)
                check = self.verifier(request)
                rendered = self.render(engine, request, player, signals, check)
                if check is not None:
                    self.shown(check.warnings())
                pieces = rendered.pieces
                audio = np.concatenate([p.audio for p in pieces]) if pieces else np.zeros(0, np.float32)
                if speech.target is not None and not speech.target.to_stdout:
                    self.write_file(audio, engine.sample_rate, pieces, signals)
                written = speech.target is not None
        except KeyboardInterrupt as e:
            # a stop held while the file was written is raised as the write ends, before `written`
            # is set here: the file is complete then, and the message must say so
            raise self.stopped(e, written or self.file_written) from None
        return _report(
            speech,
            self.shown,
            result=audio,
            sample_rate=engine.sample_rate,
            seconds=time.perf_counter() - t_gen,
            load=load,
            voice=None,
            first=rendered.first,
            seed=request.seed,
            pieces=sum(1 for p in pieces if p.seed is not None),
            verify=None if check is None else check.report(),
        )

    def render(
        self,
        engine: Engine,
        request: Request,
        player: Player | None,
        signals: HoldSignals,
        check: RequestCheck | None = None,
    ) -> _Rendered:
        target, out = self.speech.target, _Rendered()
        writer = None
        if target is not None and target.to_stdout:
            writer = PieceWriter(
                self.session.stdout(), target.audio_format, engine.sample_rate, self.speech.sample_rate
            )
        t0 = time.perf_counter()
        idle = _watch(player, writer)
        with self.session.steps("streaming", None) as on_step:
            # the bar counts steps over all pieces: its total is known from the start, never changes
            with StreamRun(
                engine, request, on_progress=on_step, on_warning=self.session.warn, on_idle=idle, check=check
            ) as run:
                for piece in run:  # each, in order, to the player and to stdout; kept for a file
                    if out.first is None and piece.seed is not None:
                        out.first = time.perf_counter() - t0
                    if player is not None:
                        player.play(piece.audio)
                    if writer is not None:
                        send_piece(lambda: writer.write(piece.audio), signals)
                    out.pieces.append(piece)
        if writer is not None:
            send_piece(writer.close, signals)
        return out

    def write_file(self, audio: Audio, sample_rate: int, pieces: list[StreamPiece], signals: HoldSignals) -> None:
        """The streamed render's file (and its subtitles), complete or nothing (a stop waits)."""
        spans = [(p.text, p.start, p.start + len(p.audio)) for p in pieces if p.text]
        take = Take(audio, sample_rate, cues=piece_cues(spans, sample_rate, len(audio)))
        outputs = Outputs(
            target=self.speech.target, subtitles=self.speech.subtitles, sample_rate=self.speech.sample_rate
        )

        writes = Writes(signals)
        try:
            deliver(take, outputs, protect=writes.protect)
        finally:
            self.file_written = writes.done  # set before a held stop is raised as the block ends

    def stopped(self, e: BaseException, written: bool) -> Stopped:
        signum, target = _signum(e), self.speech.target
        what = f"{'playback stopped' if self.speech.play else 'stopped'} by {signal_name(signum)}"
        if target is None:
            return Stopped(signum, what, failed=False)
        if target.to_stdout:
            return Stopped(signum, f"{what}: the stream on stdout ends after its last whole piece", failed=False)
        if written:  # the file is whole; a playback cut short is not a complete run
            return Stopped(signum, f"{what} after writing {target}", failed=False, complete=not self.speech.play)
        return Stopped(signum, f"{what}; nothing was written", failed=True)


# --------------------------------------------------------------------------------------------
# A dialogue script
# --------------------------------------------------------------------------------------------


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
        gap: float,
        subtitles: Path | None = None,
        play: bool = False,
        session: Session = Session(),
        shown: Shown | None = None,
        loudness: float | None = None,
        sample_rate: int | None = None,
    ) -> None:
        self.loudness = loudness  # --loudness: the target of the whole dialogue (LUFS)
        self.sample_rate = sample_rate  # --sample-rate: the output's (None: the model's)
        self.script, self.target, self.hardware, self.gap = script, target, hardware, gap  # dialogue.Script
        self.subtitles, self.play, self.session = subtitles, play, session
        self.shown: Shown = shown if shown is not None else WarnOnce(session.warn)

    def run(self, signals: HoldSignals) -> DialogueReport:
        """Speak; Stopped on Ctrl-C / SIGTERM (`signals`: the HoldSignals the writes are held by)."""
        built, target, writes = self.script.lines, self.target, Writes(signals)
        player = open_the_player(self.play)  # before the model is loaded
        try:
            engine, load = self.session.load_engine(self.hardware)
            t0 = time.perf_counter()
            with self.session.steps(f"generating {len(built)} lines", None) as on_step:
                results = engine.generate([b.request for _, b in built], on_step=on_step)
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
            )
            take = Take(audio, engine.sample_rate, cues=subs)
            played = deliver(take, outputs, protect=writes.protect, player=player, warn=lambda w: self.shown([w]))
        except KeyboardInterrupt as e:
            if player is not None:
                player.stop()
            raise _stopped(e, writes.done and target is not None, target) from None
        return self.report(played.audio, results, starts, engine.sample_rate, time.perf_counter() - t0, load)

    def report(
        self, audio: Audio, results: list[Result], starts: list[int], rate: int, seconds: float, load: float
    ) -> DialogueReport:
        lines = tuple(
            SpokenLine(
                line.number, line.speaker.name, line.speaker.spec, b.request.text, b.request.seed, s, s + len(r.audio)
            )
            for (line, b), r, s in zip(self.script.lines, results, starts)
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


def join_dialogue(
    built: Iterable, results: list[Result], gap: float, rate: int
) -> tuple[Audio, list[Subtitle], list[int]]:
    """The lines' audio joined with gaps, their subtitle cues, where each line starts."""
    from ..media.tracks import join_with_gaps

    audio, starts = join_with_gaps([r.audio for r in results], round(gap * rate))
    subs = []
    for (line, b), r, start in zip(built, results, starts):
        pieces = r.pieces or [(b.request.text, 0, len(r.audio))]
        subs += subtitles_from_pieces(pieces, rate, offset=start, speaker=line.speaker.name)
    return audio, finish_subtitles(subs, round(len(audio) * 1000 / rate)), starts
