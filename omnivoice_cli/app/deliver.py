"""The end of every run, in one place: what a finished render becomes (as whisper's
`get_writer(fmt)(result, path)` is its one way out).

    take = Take.of(result, request.text, request.lang)     # the model's audio, where its pieces lie
    outputs = Outputs(target=target, subtitles=path, words=path, loudness=-16.0, sample_rate=None)
    delivered = deliver(take, outputs, listener=recogniser, protect=signals.protect, player=player)

One order, the same for `say` (plain, a streamed render's file, a dialogue), `batch`, `dub`, the
book's parts and the server's whole replies, so the same request gives the same words everywhere:
  1. the words (--words, --subtitle-level word, line subtitles moved to where their words are
     heard, the server's `timestamps`): timed on the model's own audio, at its own rate, before
     any gain (`time_words`; the recogniser is the caller's: --verify's, or one loaded for this);
  2. the loudness (--loudness, `loudness`): one gain over the whole output (media/loudness.py);
     a target its peaks do not allow is said once, through `warn`; with `level_in_place` (a
     dub's track, up to 4 h) streamed over the take's own array and written back into it, so
     the loudness adds a few blocks' memory, never a copy of the track;
  3. the output's sample rate (--sample-rate, `sample_rate`): resampled once (media/rates.py);
  4. written, inside `protect` (a stop waits until all is written): the word timings, the
     subtitles, then the audio (a file, atomically; stdout; or the encoded bytes of a reply).
     An audio file therefore always has its subtitles and word timings beside it. Audio that is
     all silence (none, or nothing a 16-bit sample can hold: a broken checkpoint's, trimmed to
     nothing) is never written to a file or stdout: `SilentAudio`, one line, and nothing written;
  5. played: the levelled audio at the model's rate, until it has played (a stop stops it);
     The audio carries the run's AI mark (`Outputs.mark`, app/marking.py) in its metadata,
     where its format has a container (media/marks.py), as every streamed piece writer does;
  6. the report: `Delivered` (the levelled audio, the words, the loudness report, the bytes),
     from which each run makes its own summary (say's SpeechReport, a batch line's record, ...).

Every front end ends here: `say`, `batch`, `dub` and the server's replies through `deliver`; MCP's
`synthesize` (a file under its root) and `speak` (played once levelled) through `deliver` with
their own target (or none) and the report's loudness for their warnings; the server's dialogue
(`/v1/audio/script`) through `deliver` with `encoded` for the mix and for each speaker's track.

A streamed render (`say --stream` / `--play`, the server's chunked and SSE replies, the socket of
/tts/ws, Wyoming's audio chunks) sends its pieces as they come: `PieceWriter` (to a file or
stdout), `PieceEncoder` (the bytes of a format), `PiecePcm` (16-bit PCM, Wyoming's chunks), each
resampled as it comes to the output's rate and encoded piece by piece: there is no whole output
to level or time then; the file a streamed `say` also writes goes through `deliver` once the
render is complete.

A book's outputs are never held whole (a chapter, or the whole .m4b, is read from its parts):
`deliver_blocks` is its delivery, in the same order as far as it applies: the loudness measured
over the stream and one gain chosen (media/leveller.Leveller, the streamed form of the same
algorithm: measuring is not an output, but choosing the output's gain is, so it is done here),
then the audio written from the blocks (a file of a format, atomically, or the .m4b); a chapter's
subtitles, made from its parts' pieces, are written through `write_cues`. (The book's
chapters.json, its table of contents, is the book's own record, as book.json is.)

tests/test_deliver.py checks that the package's runs reach the output functions (subtitles, word
timings, loudness, resampling, writing, encoding) through this module only, with no exemptions.
"""

from __future__ import annotations

import select
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Iterator, Protocol, Sequence, cast

from ..engine.errors import OmniVoiceError
from ..media.atomic import replace_atomically
from ..media.formats import AudioFormat, check_fits
from ..media.leveller import Leveller, LoudnessReport
from ..media.leveller import level as normalise_loudness
from ..media.m4b import BookTags, ChapterMark, write_m4b
from ..media.marks import Mark
from ..media.output import OutputTarget, encode, write_audio
from ..media.pcm import pcm16
from ..media.pipes import StreamClosed, quiet_stdout
from ..media.provenance import write_whole
from ..media.rates import StreamResampler, at_rate
from ..media.streams import StreamEncoder, StreamWriter
from ..media.subtitles import Subtitle, finish_subtitles, subtitles_from_pieces, write_result_subtitles, write_subtitles
from .listening import words as words_module
from .listening.words import Rendered, WordTime, monotonic, span_words, write_word_subtitles, write_words

if TYPE_CHECKING:
    import numpy as np

    from .listening.listen import Recogniser

    Audio = np.ndarray  # float32 [N]
else:
    Audio = object


Piece = tuple[str, int, int]  # (text, start, end in samples) of one piece in the audio


@dataclass(frozen=True)
class Span:
    """A stretch of the audio whose words are timed on their own (a dub's pieces on its track)."""

    text: str
    start: int  # samples
    end: int
    lang: str | None = None  # its own language (None: the take's)
    piece: int = 0  # its number in the word rows ("piece")
    cue: int | None = None  # dub: its cue's number in the word rows ("cue")


@dataclass(frozen=True)
class Take:
    """A finished render, at the model's rate: what `deliver` is given (quacks as an engine
    Result for the subtitle writers: audio, sample_rate, pieces)."""

    audio: Audio  # float32 [N]
    sample_rate: int  # the model's
    text: str = ""  # what was spoken (the fallback piece of a result that does not say its pieces)
    lang: str | None = None
    pieces: list[Piece] = field(default_factory=list)  # where each piece lies (empty: unknown)
    cues: list[Subtitle] | None = None  # the run's own cues (a dialogue's, with its speakers)
    spans: list[Span] | None = None  # the stretches timed apart (None: the pieces; a dub's cues)

    @classmethod
    def of(cls, result: Rendered, text: str, lang: str | None = None) -> "Take":
        """An engine Result (or anything with its audio, sample_rate and pieces)."""
        return cls(result.audio, result.sample_rate, text, lang, list(result.pieces or []))

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


@dataclass(frozen=True)
class Outputs:
    """Where one take goes, and what comes with it (each None: not asked for)."""

    target: OutputTarget | None = None  # a file or stdout (None: no audio written)
    subtitles: Path | None = None  # .srt / .vtt, written just before the audio
    words: Path | None = None  # the word timings (words.py's JSON), written just before the subtitles
    word_subtitles: bool = False  # the subtitles timed by the words (needs the words timed)
    word_level: bool = False  # --subtitle-level word: VTT cues with each word's time
    timestamps: bool = False  # the words timed and handed back only (the server's `timestamps`)
    loudness: float | None = None  # the whole output's target (LUFS)
    loudness_what: str = "the audio"  # how the loudness warning names the output
    level_in_place: bool = False  # the loudness applied to the take's audio itself (a dub's track: no copy)
    sample_rate: int | None = None  # the output's rate (None: the model's)
    encoded: AudioFormat | None = None  # the output as bytes of this format (a reply), not written
    stdout: Callable[[], BinaryIO] | None = None  # the binary stdout, asked for when the audio goes there
    pipe_error: bool = True  # stdout's reader gone: OmniVoiceError "stdout: ..." (False: BrokenPipeError)
    mark: Mark | None = None  # the AI mark in the audio's metadata (app/marking.run_mark; None: none)

    @property
    def needs_words(self) -> bool:
        return self.words is not None or self.word_subtitles or self.timestamps


@dataclass(frozen=True)
class Delivered:
    """What `deliver` made: the summary's numbers come from here."""

    audio: Audio  # levelled, at the model's rate (what was played)
    sample_rate: int  # the model's
    out_samples: int  # samples of the output, at its rate
    out_rate: int
    words: list[WordTime] | None = None
    loudness: LoudnessReport | None = None
    data: bytes | None = None  # Outputs.encoded: the encoded output
    warnings: tuple[str, ...] = ()  # the loudness warning, when there was one


class WriteFailed(OSError):
    """The audio could not be written: "cannot write WHERE: REASON" (`reason`: the system's words,
    `error`: the system's error itself)."""

    def __init__(self, error: OSError, where: str) -> None:
        self.error = error
        self.reason = str(error.strerror or error)
        super().__init__(error.errno, f"cannot write {where}: {self.reason}")


class SilentAudio(OmniVoiceError):
    """The audio to write is silence (a runtime failure, exit 1; `reason`: as WriteFailed's, for a
    batch line's record)."""

    def __init__(self, seconds: float, where: str) -> None:
        self.reason = self.strerror = f"the speech came out silent ({seconds:.2f} s of silence after trimming)"
        super().__init__(f"{self.reason}: nothing was written to {where}; the model (--model) may be broken")


SILENCE = 0.5 / 32768  # the largest level a 16-bit sample rounds to zero


def check_not_silent(audio: Audio, rate: int, where: str) -> None:
    """SilentAudio when nothing in `audio` would be heard (or it is empty)."""
    import numpy as np

    samples = np.asarray(audio)  # max and min read it in place (abs would copy a whole track)
    if len(samples) == 0 or (float(samples.max()) < SILENCE and float(samples.min()) > -SILENCE):
        raise SilentAudio(len(audio) / rate, where)


class Protector(Protocol):
    """What holds a stop while something is written (signals.HoldSignals)."""

    def protect(self) -> AbstractContextManager: ...


class PlaybackSink(Protocol):
    """What `deliver` plays a take through: media/players.Player, or a test's stand-in."""

    def play(self, audio: Audio) -> None: ...

    def close(self) -> None: ...


def _no_warning(message: str) -> None:
    pass


def _no_status(message: str) -> AbstractContextManager:
    return nullcontext()


def time_words(listener: "Recogniser", take: Take) -> list[WordTime]:
    """Every word of the take, timed in its audio (words.py): each piece (or span) heard alone,
    the times never decreasing, inside the audio."""
    if take.spans is None:  # the pieces (words.word_timings, looked up as the module has it now)
        return words_module.word_timings(listener, take.audio, take.sample_rate, take.pieces, take.text, take.lang)
    timed: list[WordTime] = []
    for sp in take.spans:
        lang = sp.lang if sp.lang is not None else take.lang
        found = span_words(listener, take.audio, take.sample_rate, sp.text, sp.start, sp.end, lang, sp.piece)
        timed += found if sp.cue is None else [replace(w, cue=sp.cue) for w in found]
    return monotonic(timed, take.seconds)


def piece_cues(pieces: Sequence[Piece], sample_rate: int, samples: int) -> list[Subtitle]:
    """The cues of pieces at their places, the last ending with the audio (a streamed render's)."""
    return finish_subtitles(subtitles_from_pieces(pieces, sample_rate), round(samples * 1000 / sample_rate))


def deliver(
    take: Take,
    outputs: Outputs,
    *,
    listener: "Recogniser | Callable[[], AbstractContextManager[Recogniser]] | None" = None,
    status: Callable[[str], AbstractContextManager] | None = None,
    protect: Callable[[], AbstractContextManager] | None = None,
    player: PlaybackSink | None = None,
    warn: Callable[[str], None] = _no_warning,
    words: list[WordTime] | None = None,
) -> Delivered:
    """The take's outputs, in the module's order (see the module doc). `listener`: the speech
    recogniser that times the words (needed when they are asked for), or a context manager
    factory that loads one and lets it go (used only when the words are asked for); `status`:
    the face's status line while the words are timed ("timing the words ..."); `protect()`: what holds
    a stop while the files are written (HoldSignals.protect); `warn`: the loudness warning;
    `words`: the words when the caller timed them already (time_words, e.g. a dub's track)."""
    # 1. the words, on the model's own audio
    if outputs.needs_words and words is None:
        if listener is None:
            raise ValueError("deliver: the words are asked for, but no recogniser was given")
        with (status or _no_status)("timing the words ..."):
            with _held(listener) as recogniser:
                words = time_words(recogniser, take)
    # 2. the loudness, over the whole
    audio, loud = normalise_loudness(take.audio, take.sample_rate, outputs.loudness, in_place=outputs.level_in_place)
    said = loud.warning(outputs.loudness_what) if loud is not None else None
    if said:
        warn(said)
    # 3. the output's rate
    out_rate = int(outputs.sample_rate or take.sample_rate)
    out_audio = at_rate(audio, take.sample_rate, out_rate)
    # 4. written: the words, the subtitles, the audio (never silence alone)
    if outputs.target is not None:
        check_not_silent(audio, take.sample_rate, str(outputs.target))
    data = None
    with protect() if protect is not None else nullcontext():
        if outputs.words is not None and words is not None:
            write_words(outputs.words, words)
        if outputs.subtitles is not None:
            _write_subtitles(outputs, take, words)
        if outputs.encoded is not None:
            fmt = outputs.encoded
            data = encode(out_audio, out_rate, fmt.sf_format, fmt.subtype, outputs.mark)
        if outputs.target is not None:
            _write_audio(out_audio, out_rate, outputs)
    # 5. played
    if player is not None:
        player.play(audio)
        player.close()  # until it has played; a Ctrl-C stops it at once
    # 6. what was made
    return Delivered(audio, take.sample_rate, len(out_audio), out_rate, words, loud, data, (said,) if said else ())


def _held(
    listener: "Recogniser | Callable[[], AbstractContextManager[Recogniser]]",
) -> "AbstractContextManager[Recogniser]":
    """The recogniser, as a context manager: one given as it is, or one a factory loads."""
    if hasattr(listener, "transcribe"):
        return nullcontext(cast("Recogniser", listener))  # hasattr does not narrow a Protocol
    return listener()


def _write_subtitles(outputs: Outputs, take: Take, words: list[WordTime] | None) -> None:
    assert outputs.subtitles is not None
    if take.cues is not None:  # the run's own cues (a dialogue's speakers)
        write_subtitles(outputs.subtitles, take.cues)
    elif outputs.word_subtitles and words is not None:  # cues where their words are heard
        write_word_subtitles(outputs.subtitles, take, take.text, words, take.lang, outputs.word_level)
    else:
        write_result_subtitles(outputs.subtitles, take, take.text)


def _write_audio(audio: Audio, rate: int, outputs: Outputs) -> None:
    """The audio into its file (atomically), or every byte of it to stdout."""
    target = outputs.target
    assert target is not None
    try:
        stdout = outputs.stdout() if (target.to_stdout and outputs.stdout is not None) else None
        write_audio(audio, rate, target, stdout=stdout, mark=outputs.mark)
    except StreamClosed as e:
        if not outputs.pipe_error:
            raise
        quiet_stdout()
        raise OmniVoiceError(f"stdout: {e.strerror}") from None
    except OSError as e:
        if isinstance(e, BrokenPipeError) and not outputs.pipe_error:
            raise
        raise WriteFailed(e, "stdout" if target.to_stdout else str(target)) from None


# --------------------------------------------------------------------------------------------
# Pieces as they come (a streamed render)
# --------------------------------------------------------------------------------------------


class PieceEncoder:
    """The bytes of one audio stream, piece by piece: fed at the model's rate, resampled as it
    comes to the output's (StreamResampler), encoded as it comes (StreamEncoder)."""

    def __init__(self, fmt: AudioFormat | str, rate: int, out_rate: int | None, mark: Mark | None = None) -> None:
        self.out_rate = int(out_rate or rate)
        self.resampler = StreamResampler(rate, out_rate)
        self.encoder = StreamEncoder(fmt, self.out_rate, mark)

    def feed(self, audio: Audio) -> bytes:
        return self.encoder.feed(self.resampler.feed(audio))

    def finish(self) -> bytes:
        return self.encoder.feed(self.resampler.finish()) + self.encoder.finish()


class PiecePcm:
    """16-bit PCM bytes of one audio stream, piece by piece (Wyoming's audio chunks): fed at the
    model's rate, resampled as it comes to the output's (StreamResampler)."""

    def __init__(self, rate: int, out_rate: int | None) -> None:
        self.out_rate = int(out_rate or rate)
        self.resampler = StreamResampler(rate, out_rate)

    def feed(self, audio: Audio) -> bytes:
        return pcm16(self.resampler.feed(audio))

    def finish(self) -> bytes:
        return pcm16(self.resampler.finish())


class PieceWriter:
    """A StreamWriter fed at the model's rate and writing at the output's (say --stream -o -)."""

    def __init__(
        self, out: BinaryIO | int, fmt: AudioFormat | str, rate: int, out_rate: int | None, mark: Mark | None = None
    ) -> None:
        self.writer = StreamWriter(out, fmt, int(out_rate or rate), mark)
        self.resampler = StreamResampler(rate, out_rate)
        self.out = out  # what the idle watch polls

    def write(self, audio: Audio) -> None:
        self.writer.write(self.resampler.feed(audio))

    def close(self) -> None:
        self.writer.write(self.resampler.finish())
        self.writer.close()

    def stop(self) -> None:
        """Stopped before its end: a WAV in a regular file gets the sizes of what was written."""
        self.writer.stop()


@contextmanager
def stopping(writer: PieceWriter | None) -> Iterator[None]:
    """A streamed run whose stop (Ctrl-C, an error) leaves `writer`'s file true: `writer.stop()`
    before the exception goes on."""
    try:
        yield
    except BaseException:
        if writer is not None:
            writer.stop()
        raise


def send_piece(write: Callable[[], None], signals: Protector) -> None:
    """A piece (or the stream's end) to stdout, whole (a stop waits: `signals.protect()`); a
    reader that went away is the error `say -o -` gives (exit 1)."""
    try:
        with signals.protect():  # a piece is written whole, so the stream stays valid
            write()
    except StreamClosed as e:
        quiet_stdout()
        raise OmniVoiceError(f"stdout: {e.strerror}") from None


def reader_gone(fd: int) -> bool:
    """The reading end of the pipe (or socket) on fd was closed (POSIX poll: POLLERR / POLLHUP)."""
    if not hasattr(select, "poll"):  # Windows: found at the next write
        return False
    p = select.poll()
    p.register(fd, 0)  # no events asked for: only the errors and hang-ups, always reported
    try:
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# An output read as blocks, never held whole (a book's chapter, its .m4b)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chapters:
    """The .m4b's chapter marks and tags (media/m4b.py): the blocks go into one .m4b."""

    marks: list[ChapterMark]
    tags: BookTags


def deliver_blocks(
    chunks: Callable[[], Iterator[Audio]],
    sample_rate: int,
    path: Path,
    *,
    loudness: float,
    ceiling: float,
    fmt: AudioFormat | None = None,
    frames: int = 0,
    chapters: Chapters | None = None,
    mark: Mark | None = None,
) -> tuple[LoudnessReport, float]:
    """An output from blocks, in deliver's order: the loudness measured over the stream and one
    gain to `loudness` LUFS (peaks under `ceiling` dBTP; media/leveller.Leveller; `chunks()` gives
    the audio anew at each call, it is read up to four times), then written at that gain: into
    one .m4b with `chapters`, else one file of `fmt` of `frames` samples (write_stream), with
    `mark` in its metadata. Returns the loudness report and the seconds written."""
    lev = Leveller(chunks, sample_rate, loudness, ceiling).measure()
    if chapters is not None:
        seconds = float(write_m4b(path, lev.output(), sample_rate, chapters.marks, chapters.tags, mark=mark))
    else:
        assert fmt is not None
        write_stream(path, lev.output(), sample_rate, fmt, frames, mark)
        seconds = frames / sample_rate
    return lev.report(), seconds


def write_stream(
    path: Path, chunks: Iterable[Audio], sr: int, fmt: AudioFormat, frames: int, mark: Mark | None = None
) -> None:
    """Float32 blocks into one audio file of `fmt` by its encoder, streamed (AAC formats: in
    memory), to a temporary name then renamed. Blocks are re-cut to the format's own size, so the
    file does not depend on how the audio came in."""
    check_fits(fmt, frames, sr)
    replace_atomically(path, lambda f: write_whole(f, fmt, chunks, sr, mark))


def write_cues(path: Path, cues: Sequence[Subtitle]) -> None:
    """Cues made by the run (a book chapter's, from its parts' pieces) into an .srt / .vtt."""
    write_subtitles(path, list(cues))
