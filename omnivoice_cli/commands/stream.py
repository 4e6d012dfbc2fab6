"""`say --play` / `say --stream`: the streamed render, heard (or written) as its pieces finish.

    omnivoice say "Hello there."                          # no -o: plays
    omnivoice say -f chapter.txt --play -o chapter.mp3    # plays while it writes
    omnivoice say -f chapter.txt --stream -o - | ffplay -autoexit -nodisp -i -

The text is cut at sentences (engine/streaming.py): the first piece is generated alone, the rest
in packed waves, and each piece is played and/or written to stdout as soon as it and the ones
before it are ready. A file (`-o FILE` with --play or --stream) holds the same streamed render,
written at the end through a temporary file, so it is never partial. A plain `-o FILE` without
--play / --stream is not streamed (the render that matches the reference, `say`'s default).

Stopping (each exits within a layer of the forward running then, the render's thread joined):
- Ctrl-C (or SIGTERM) stops the sound at once and exits 130 (143); on stdout the piece being
  written is finished first (the stream stays a valid WAV/MP3/... up to there); a file under
  -o is written only at the end, so a stop leaves none (nor its temporary file).
- stdout's reader going away (`... --stream -o - | head -c 1000`): one line, exit 1, as `say -o -`.
- the player quitting before the end (its window closed, the command killed): one line, exit 1.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import typer

from .. import settings as st
from ..engine.errors import InvalidRequest
from ..progress import StepProgress
from .common import error, load_engine, warn


def check_streamable(target: Any, play: bool) -> None:
    """Before the model: stdout streaming needs a format that can be written piece by piece."""
    if target is not None and target.to_stdout and not target.audio_format.streams:
        raise InvalidRequest(f"--stream -o - cannot send {target.audio_format.name} piece by piece: "
                             "use wav, raw, mp3, ogg or opus")  # fmt: skip


def open_the_player(play: bool) -> Any:
    """The player, started before the model is loaded (none that works: exit 1, nothing written)."""
    if not play:
        return None
    from ..player import open_player

    return open_player()


def _pieces(run: Any, player: Any, writer: Any, signals: Any, keep: list, timing: dict) -> None:
    """Hand each piece, in order, to the player and to stdout; keep it for a file."""
    for piece in run:
        if timing.get("first") is None and piece.seed is not None:
            timing["first"] = time.perf_counter() - timing["t0"]
        if player is not None:
            player.play(piece.audio)
        if writer is not None:
            _send(lambda: writer.write(piece.audio), signals)
        keep.append(piece)


def _send(write: Any, signals: Any) -> None:
    """A piece (or the stream's end) to stdout, whole (a stop waits); a reader that went away is
    the error `say -o -` gives (exit 1)."""
    from ..engine.errors import OmniVoiceError
    from ..output import StreamClosed, quiet_stdout

    try:
        with signals.protect():  # a piece is written whole, so the stream stays valid
            write()
    except StreamClosed as e:
        quiet_stdout()
        raise OmniVoiceError(f"stdout: {e.strerror}") from None


def _watch(player: Any, writer: Any) -> Any:
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
        if fd is not None and _reader_gone(fd):
            from ..engine.errors import OmniVoiceError
            from ..output import quiet_stdout

            quiet_stdout()
            raise OmniVoiceError("stdout: the reader of the audio stream went away: the audio is incomplete")

    return check


def _reader_gone(fd: int) -> bool:
    """The reading end of the pipe (or socket) on fd was closed (POSIX poll: POLLERR / POLLHUP)."""
    import select

    if not hasattr(select, "poll"):  # Windows: found at the next write
        return False
    p = select.poll()
    p.register(fd, 0)  # no events asked for: only the errors and hang-ups, always reported
    try:
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except OSError:
        return False


def _render(engine: Any, request: Any, target: Any, player: Any, signals: Any, quiet: bool, timing: dict) -> list:
    from ..engine.streaming import StreamRun
    from ..output import StreamWriter

    writer = None
    if target is not None and target.to_stdout:
        writer = StreamWriter(typer.get_binary_stream("stdout"), target.audio_format, engine.sample_rate)
    keep: list = []
    timing["t0"] = time.perf_counter()
    idle = _watch(player, writer)
    with StepProgress(enabled=not quiet, label="streaming") as progress:
        with StreamRun(engine, request, on_step=progress, on_warning=warn, on_idle=idle) as run:
            _pieces(run, player, writer, signals, keep, timing)
    if writer is not None:
        _send(writer.close, signals)
    timing["summary"] = run.summary
    return keep


def speak_streamed(built: Any, refs: Any, target: Any, settings: st.Resolved, quiet: bool, play: bool,
                   subtitles: Any = None) -> dict:  # fmt: skip
    """Load the model and render the request piece by piece (played, streamed to stdout, and/or
    collected for a file). Returns timings, the joined audio and the pieces."""
    from contextlib import nullcontext

    import numpy as np

    from ..request import finish_request
    from ..signals import HoldSignals

    timing: dict[str, Any] = {"written": False}
    with HoldSignals() as signals:
        try:
            player = open_the_player(play)
            with player or nullcontext():  # left normally: waits until all has played
                engine, timing["load"] = load_engine(settings, quiet, encoder=built.reference is not None)
                t_gen = time.perf_counter()
                request = finish_request(engine, built, refs)
                pieces = _render(engine, request, target, player, signals, quiet, timing)
                audio = np.concatenate([p.audio for p in pieces]) if pieces else np.zeros(0, np.float32)
                if target is not None and not target.to_stdout:
                    _write_file(target, audio, engine.sample_rate, pieces, subtitles, signals)
                timing["written"] = target is not None
        except KeyboardInterrupt as e:  # Stop (SIGINT / SIGTERM), also while the end plays: it stops at once
            _stopped(int(getattr(e, "signum", signal.SIGINT)), target, play, timing["written"])
    timing.update(generate=time.perf_counter() - t_gen, audio=audio, sample_rate=engine.sample_rate,
                  pieces=sum(1 for p in pieces if p.seed is not None), seed=request.seed)  # fmt: skip
    return timing


def _write_file(target: Any, audio: Any, sample_rate: int, pieces: list, subtitles: Any, signals: Any) -> None:
    from ..output import write_audio

    with signals.protect():  # the file (and its subtitles) complete, or nothing
        if subtitles is not None:
            from ..cues import finish_subtitles, subtitles_from_pieces, write_subtitles

            spans = [(p.text, p.start, p.start + len(p.audio)) for p in pieces if p.text]
            subs = subtitles_from_pieces(spans, sample_rate)
            write_subtitles(subtitles, finish_subtitles(subs, round(len(audio) * 1000 / sample_rate)))
        try:
            write_audio(audio, sample_rate, target)
        except OSError as e:
            raise OSError(e.errno, f"cannot write {target}: {e.strerror or e}") from None


def _stopped(signum: int, target: Any, play: bool, written: bool = False) -> None:
    from ..signals import signal_name

    what = f"{'playback stopped' if play else 'stopped'} by {signal_name(signum)}"
    if target is None:
        warn(what)
    elif target.to_stdout:
        warn(f"{what}: the stream on stdout ends after its last whole piece")
    elif written:
        warn(f"{what} after writing {target}")
    else:
        error(f"{what}; nothing was written")
    raise typer.Exit(128 + signum)
