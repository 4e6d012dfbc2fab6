"""The streamed render of `say` (`--play`, `--stream`, no -o): the text cut at sentences
(engine/stream/); the first piece is generated alone, the rest in packed waves, and each
piece is played and/or written to stdout as soon as it and the ones before it are ready. A file
(`-o FILE` with --play / --stream) holds the same streamed render, written at the end, whole or
not at all. A player that quits, or stdout's reader going away, ends the run while the next piece
is made (`watch_ends`).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Protocol

from ...engine.errors import OmniVoiceError
from ...engine.pipeline import Engine
from ...engine.planning import Request
from ...engine.stream.render import StreamPiece
from ...media import pipes  # (pipes.quiet_stdout looked up when called: a test stands in for it)
from ...media.players import Player
from ..deliver import Audio, Outputs, PieceWriter, Take, deliver, piece_cues, reader_gone, send_piece, stopping
from ..listening.verify import RequestCheck
from ..request import finish_request
from ..signals import HoldSignals, signal_name
from ..voices.design import request_voice_prompt
from .speakrun import SpeechReport, SpeechRun, StoppedBySignal, Writes, open_the_player, signal_number, speech_report


class _Streams(Protocol):
    out: BinaryIO | int  # what a stream writer writes to (PieceWriter, media.output.StreamWriter)


def watch_ends(player: Player | None, writer: _Streams | None) -> Callable[[], None] | None:
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
            pipes.quiet_stdout()
            raise OmniVoiceError("stdout: the reader of the audio stream went away: the audio is incomplete")

    return check


@dataclass
class _Rendered:
    pieces: list[StreamPiece] = field(default_factory=list)  # in order
    first: float | None = None  # seconds from the render's start to the first piece


class StreamedRun(SpeechRun):
    """The text rendered piece by piece: played, streamed to stdout and/or kept for a file."""

    def run(self, signals: HoldSignals) -> SpeechReport:
        """Speak; StoppedBySignal on Ctrl-C / SIGTERM, also while the end plays (it stops at once)."""
        import numpy as np

        speech, written = self.speech, False
        self.file_written = False  # set inside write_file's protected block, before a held stop is raised
        try:
            player = open_the_player(speech.play)
            with player or nullcontext():  # left normally: waits until all has played
                ref = speech.built.reference
                engine, load = self.load(encoder=ref is not None and ref.design is None)  # a recording's
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
        return speech_report(
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
            engine=engine,
            voice_prompt=request_voice_prompt(request),
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
                self.session.stdout(),
                target.audio_format,
                engine.sample_rate,
                self.speech.sample_rate,
                self.speech.mark,
            )
        t0 = time.perf_counter()
        idle = watch_ends(player, writer)
        with stopping(writer), self.session.steps("streaming", None) as on_step:
            # the bar counts steps over all pieces: its total is known from the start, never changes
            with engine.stream(
                request, on_progress=on_step, on_warning=self.session.warn, on_idle=idle, check=check
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
        speech = self.speech
        outputs = Outputs(
            target=speech.target, subtitles=speech.subtitles, sample_rate=speech.sample_rate, mark=speech.mark
        )

        writes = Writes(signals)
        try:
            deliver(take, outputs, protect=writes.protect)
        finally:
            self.file_written = writes.done  # set before a held stop is raised as the block ends

    def stopped(self, e: BaseException, written: bool) -> StoppedBySignal:
        signum, target = signal_number(e), self.speech.target
        what = f"{'playback stopped' if self.speech.play else 'stopped'} by {signal_name(signum)}"
        if target is None:
            return StoppedBySignal(signum, what, failed=False)
        if target.to_stdout:
            return StoppedBySignal(
                signum, f"{what}: the stream on stdout ends after its last whole piece", failed=False
            )
        if written:  # the file is whole; a playback cut short is not a complete run
            return StoppedBySignal(
                signum, f"{what} after writing {target}", failed=False, complete=not self.speech.play
            )
        return StoppedBySignal(signum, f"{what}; nothing was written", failed=True)
