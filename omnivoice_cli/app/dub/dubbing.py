"""`omnivoice dub`: a subtitle file spoken into one track, every cue in its own time slot: the run
(the cues' plan: dubplan.py), the stems and the placement of each cue's audio on the track.

A run (`DubRun`), in order:
  1. read the cues and plan each one without the model (dubplan.py: its speaker, words, pieces,
     requests, seed and speed; the checks that span cues). Anything wrong stops the run here,
     before anything is written (DubRun.dry_run stops here);
  2. with --stems DIR: the folder is created, and a cue whose stem is there with a matching
     record in DIR/manifest.jsonl (same words, times, seed and settings) is reused (a rerun of
     an interrupted dub resumes);
  3. load the model and send the other cues' pieces to `Engine.generate` in groups; each cue's
     audio is placed on the track, and its stem written, as soon as its pieces are done;
  4. with --words FILE.json: every spoken word's time on the track (words.py), each cue's
     pieces transcribed where they lie on the final track (cue start + piece offset), the cues
     in the track's order (by start time); the speech recogniser is loaded before the TTS model,
     so a missing `asr` extra or recogniser fails before anything is spoken;
  5. write the words, the track (atomically; or WAV on stdout) and rewrite DIR/manifest.jsonl.

Placement: a cue's audio is exactly what `omnivoice say "<its words>" --duration <its length>
--seed <S + index>` writes (0.1 s of silence, the speech, 0.1 s of silence), starting at the
cue's start sample (start ms x 24). The engine never makes more than the slot, but its padding
can carry the end of that audio up to 0.2 s past the cue's end (its 0.1 s fade-out and 0.1 s
of silence): it runs on into the silence after the cue, or is mixed into the next cue's opening
silence. A cue cut into pieces: each piece is placed at the start of its share of the slot.
The track is exactly as long as the latest cue end of the file (empty cues count), to the
sample; what runs past it is cut. Cues whose times overlap are mixed (summed, then clipped to
[-1, 1]) with a warning naming them. Silence everywhere else. Each cue's audio is placed as a
16-bit file holds it (which changes nothing a 16-bit track holds where cues do not overlap), so
a dub resumed from its stems is identical to one made in one go.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ...engine.errors import OmniVoiceError, one_line
from ...engine.model.config import SAMPLE_RATE
from ...engine.planning import Result
from ...media.cues import Cue
from ...media.formats import AUDIO_FORMATS, FORMATS
from ...media.output import OutputTarget
from ...media.tracks import as_written, ms_to_samples, place
from ..batch.executor import GROUP_SIZE, redesign_done
from ..batch.folder import prepare_output_dir, remove_stale_temporaries
from ..batch.manifest import MANIFEST, ManifestWriter, read_manifest
from ..deliver import Outputs, Span, Take, deliver
from ..listening.listen import Recogniser, recogniser
from ..marking import run_mark
from ..request import References, Voices, finish_request
from ..say.dialogue import Cast
from ..session import Session, WarnOnce, hardware_from_settings
from ..settings.presets import Preset
from ..signals import HoldSignals
from ..voices.design import request_voice_prompt, voice_prompt
from .dubplan import CuePlan, CuePlanner, jsonable
from .sourcevoices import SourceVoices

if TYPE_CHECKING:  # annotations only: numpy is not imported for `--help`
    import numpy as np

    from ..session import Progress


@dataclass
class DubReport:
    """What a run did."""

    cues: list[CuePlan] = field(default_factory=list)
    seed: int = 0
    track_samples: int = 0
    generate_seconds: float = 0.0
    load_seconds: float | None = None
    voice_seconds: float | None = None  # encoding the recordings of ref (None: none to encode)
    interrupted: int | None = None  # the signal number when stopped
    written: bool = False
    warnings: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for c in self.cues if c.status == status)


def default_output(input_path: str, fmt: str) -> str:
    """The track beside the subtitle file: episode.srt -> episode.wav."""
    return str(Path(input_path).expanduser().with_suffix(f".{fmt}"))


def stems_format(track_format: str) -> str:
    """Stems are lossless files with a header, so a rerun can reuse them exactly: the track's
    format where it is one (wav, flac), else flac (an .ogg or .mp3 track, raw samples)."""
    fmt = AUDIO_FORMATS.get(track_format)
    return track_format if fmt is not None and not fmt.lossy and fmt.sf_format != "RAW" else "flac"


# --------------------------------------------------------------------------------------------
# Planning (no model)
# --------------------------------------------------------------------------------------------


class DubRun:
    """One dub: plan every cue (no model), reuse stems, speak the rest, write the track."""

    def __init__(
        self,
        input_path: str,
        target: OutputTarget,
        *,
        preset: Preset | None,
        flags: dict[str, object],
        cast: Cast,
        stems: str | None = None,
        overwrite: bool = False,
        session: Session | None = None,
        stdout: BinaryIO | None = None,
        words: Path | None = None,
        source_audio: str | None = None,
        cues: list[Cue] | None = None,
        track_ms: int = 0,
    ) -> None:
        self.input_path, self.target, self.preset, self.flags = input_path, target, preset, flags
        self.words = words  # --words FILE.json: the word timings on the track (words.py)
        self.listener: Recogniser | None = None  # its speech recogniser (listen.py), loaded before the TTS model
        self.cast, self.stems, self.overwrite = cast, stems, overwrite
        self.session = session or Session()  # how the run shows itself (the face's status line and bars)
        self.echo = self.session.echo
        self.stdout = stdout
        self.refs, self.voices = References(keep_designs=True), Voices()  # a designed speaker: its first cue's voice
        self.report = DubReport()
        self.track: np.ndarray | None = None  # float32 [samples], allocated once the plan is checked
        self.manifest: ManifestWriter | None = None  # the stems folder's manifest
        self._once = WarnOnce(self._show_warning)
        folder = Path(stems).expanduser() / "sources" if stems and source_audio else None  # kept: a rerun reuses
        self.source = SourceVoices(source_audio, folder) if source_audio else None  # --source-audio
        self.planner = CuePlanner(
            input_path, preset, flags, cast, self.refs, self.voices, self.warn, self.source, cues, track_ms
        )

    def warn(self, message: str) -> None:
        """Show a warning, each text once for the whole dub."""
        self._once([message])

    def _show_warning(self, message: str) -> None:
        self.report.warnings.append(message)
        self.echo(f"Warning: {message}")

    def the_track(self) -> np.ndarray:
        """The track being filled (allocated once the plan is checked)."""
        if self.track is None:
            raise RuntimeError("the track is allocated once the plan is checked")
        return self.track

    def layers(self) -> list:
        """The preset and the flags as the cues have them (CuePlanner.layers)."""
        return self.planner.layers()

    def plan(self, earlier: list[dict[str, object]]) -> list[CuePlan]:
        """Every cue planned (dubplan.py), the plan in the report."""
        plans = self.planner.plan(earlier)
        r = self.report
        r.cues, r.seed, r.track_samples = plans, self.planner.seed, self.planner.track_samples
        return plans

    # -- stems and resuming ----------------------------------------------------------------

    def stems_dir(self) -> Path | None:
        """The stems folder, created, with what a killed run left behind removed."""
        if self.stems is None:
            return None
        out = prepare_output_dir(self.stems)
        remove_stale_temporaries(out, [p.stem for p in self.report.cues if p.stem])
        return out

    def name_stems(self, fmt: str) -> None:
        width = max(4, len(str(len(self.report.cues))))
        for p in self.report.cues:
            if p.status != "empty":
                p.stem = f"{p.cue.index + 1:0{width}d}.{fmt}"

    def reuse(self, out: Path, earlier: list[dict[str, object]]) -> None:
        """Place every cue whose stem matches its record (same key) on the track, unread ones not."""
        import soundfile as sf

        records = {rec.get("output"): rec for rec in earlier if rec.get("status") in ("done", "reused")}
        for p in self.report.cues:
            rec = records.get(p.stem)
            if (
                p.status is not None
                or p.stem is None
                or rec is None
                or self.overwrite
                or rec.get("key") != jsonable(p.key())
            ):
                continue
            try:
                audio, rate = sf.read(str(out / p.stem), dtype="float32", always_2d=False)
            except Exception:  # gone or unreadable: spoken again
                continue
            if rate != SAMPLE_RATE or audio.ndim != 1:
                continue
            place(self.the_track(), audio, ms_to_samples(p.cue.start_ms, SAMPLE_RATE))
            p.status, p.audio_seconds = "reused", len(audio) / SAMPLE_RATE

    # -- speaking ----------------------------------------------------------------------------

    def speak(
        self, pending: list[CuePlan], signals: HoldSignals, out: Path | None, progress: Progress, reused=()
    ) -> None:
        """The pending cues spoken; `reused`: the cues an earlier run spoke (a designing cue among
        them is rendered again, its audio dropped, so that the pending cues clone the voice a run
        from the start gives them: one generation, as the render it replaces)."""
        built = [b for p in pending for b in p.built]
        values = self.cast.settings(None, self.layers()).values
        engine, self.report.load_seconds = self.session.load_engine(
            str(values["model"]), hardware_from_settings(values)
        )
        if engine.sample_rate != SAMPLE_RATE:
            raise OmniVoiceError(f"the model makes {engine.sample_rate} Hz audio; dub needs {SAMPLE_RATE} Hz")
        items, spoken = [], []  # spoken: cues whose every piece was spoken as its voice's render
        if any(b.reference for b in built):  # the encoder and the recordings: "voices prepared in"
            t_voice = time.perf_counter()
            with self.session.status("preparing the reference voices ..."):
                engine.load_encoder()
                # a designing cue is its cue's first piece
                redesign_done(
                    self.refs,
                    engine,
                    [(p.built[0], None) for p in reused if p.built],
                    [b.reference for b in built if b.reference],
                )
                for p in pending:
                    for k, b in enumerate(p.built):
                        done = self.refs.render_line(engine, b)  # a speaker's designing cue: generated once
                        if done is None:
                            items.append((p, k, finish_request(engine, b, self.refs)))
                        else:
                            p.results[k] = done[1]
                            p.voice_prompt = voice_prompt(done[0]) if k == 0 else p.voice_prompt
                    if len(p.results) == len(p.pieces):
                        spoken.append(p)
            self.report.voice_seconds = time.perf_counter() - t_voice
        else:
            items = [(p, k, b.request) for p in pending for k, b in enumerate(p.built)]
        for p, k, request in items:
            if k == 0:
                p.voice_prompt = request_voice_prompt(request)
        for p in spoken:
            with signals.protect():
                self.finish_cue(p, out, progress)
        t0 = time.perf_counter()
        for start in range(0, len(items), GROUP_SIZE):
            group = items[start : start + GROUP_SIZE]

            def on_result(i: int, result: Result, group=group) -> None:
                plan, k, _ = group[i]
                plan.results[k] = result
                if len(plan.results) == len(plan.pieces):
                    with signals.protect():
                        self.finish_cue(plan, out, progress)

            try:
                engine.generate([req for _, _, req in group], on_step=progress.step, on_result=on_result)
            except (RuntimeError, MemoryError) as e:
                raise OmniVoiceError(f"generation failed: {one_line(e)}") from None
        self.report.generate_seconds = time.perf_counter() - t0

    def finish_cue(self, plan: CuePlan, out: Path | None, progress: Progress) -> None:
        """A cue whose pieces are all done: its audio (pieces at their offsets) on the track, its stem."""
        import numpy as np

        offsets = [ms_to_samples(o, SAMPLE_RATE) for o in plan.offsets()]
        results = [plan.results[k] for k in range(len(plan.pieces))]
        audio = np.zeros(max(o + len(r.audio) for o, r in zip(offsets, results)), dtype=np.float32)
        for o, r in zip(offsets, results):
            place(audio, r.audio, o)
            plan.warnings += [w for w in r.warnings if w not in plan.warnings]
            for w in r.warnings:
                self.warn(w)
        plan.results = {}
        audio = as_written(audio, SAMPLE_RATE)  # as its stem holds it: a resumed dub is the same
        if out is not None and plan.stem is not None:  # (the stems are named when they are kept)
            fmt = Path(plan.stem).suffix.lower()
            mark = run_mark(self.cast.settings(None, self.layers()))
            deliver(Take(audio, SAMPLE_RATE), Outputs(target=OutputTarget(out / plan.stem, *FORMATS[fmt]), mark=mark))
        place(self.the_track(), audio, ms_to_samples(plan.cue.start_ms, SAMPLE_RATE))
        plan.status, plan.audio_seconds = "done", len(audio) / SAMPLE_RATE
        if self.manifest is not None:
            self.manifest.append(jsonable(plan.record()))
        progress.line("done", f"cue {plan.cue.index + 1}")

    # -- the run ---------------------------------------------------------------------------------

    def earlier(self) -> list[dict[str, object]]:
        """The records of the stems folder's manifest (a rerun resumes from them)."""
        stems_path = Path(self.stems).expanduser() if self.stems else None
        return read_manifest(stems_path / MANIFEST) if stems_path and stems_path.is_dir() else []

    def stems_format(self) -> str:
        path = self.target.path
        return stems_format("wav" if self.target.to_stdout or path is None else path.suffix.lower().lstrip("."))

    def close(self) -> None:
        """The clips of --source-audio removed (those in a stems folder kept for a rerun)."""
        if self.source is not None:
            self.source.close()

    def dry_run(self) -> list[dict[str, object]]:
        """Plan every cue as run() would (the model is not loaded, nothing is written): for each,
        its times, words, speaker and voice, speed (see CuePlan.speed), seed and pieces, and what
        the run would do with it: speak it, reuse its stem, or skip it (empty)."""
        earlier = self.earlier()
        plans = self.plan(earlier)
        self.name_stems(self.stems_format())
        kept = {rec.get("output"): rec.get("key") for rec in earlier if rec.get("status") in ("done", "reused")}
        out = []
        for p in plans:
            action = "skip (empty)" if p.status == "empty" else "speak"
            stem = Path(self.stems).expanduser() / p.stem if self.stems and p.stem else None
            if (
                action == "speak"
                and stem is not None
                and not self.overwrite
                and stem.is_file()
                and kept.get(p.stem) == jsonable(p.key())
            ):
                action = "reuse its stem"
            rec = p.record()
            out.append(
                {
                    "cue": rec["cue"],
                    "line": rec["line"],
                    "start": rec["start"],
                    "end": rec["end"],
                    "seconds": (p.cue.end_ms - p.cue.start_ms) / 1000,
                    "text": p.text,
                    "speaker": rec["speaker"],
                    "voice": p.voice(),
                    "speed": rec["speed"],
                    "seed": rec["seed"],
                    "pieces": rec["pieces"],
                    "action": action,
                    "warnings": p.warnings,
                }
            )
        return out

    def run(self) -> DubReport:
        """Plan (errors raised before anything is written), reuse stems, speak, write the track.
        A stop by Ctrl-C / SIGTERM is recorded in the report (finished stems are kept)."""
        import numpy as np

        earlier = self.earlier()
        plans = self.plan(earlier)
        self.name_stems(self.stems_format())
        out = self.stems_dir()
        self.manifest = ManifestWriter(out / MANIFEST) if out else None
        self.track = track = np.zeros(self.report.track_samples, dtype=np.float32)
        if out is not None:
            self.reuse(out, earlier)
        progress = self.session.progress(len(plans))
        signals = HoldSignals().__enter__()
        try:
            with progress:
                for p in plans:
                    if p.status is not None:
                        progress.line("skipped")
                pending = [p for p in plans if p.status is None]
                self.load_listener()
                if pending:
                    self.speak(pending, signals, out, progress, [p for p in plans if p.status == "reused"])
                np.clip(track, -1.0, 1.0, out=track)
                self.deliver_track(signals)
        except KeyboardInterrupt as e:
            self.report.interrupted = int(getattr(e, "signum", signal.SIGINT))
        finally:
            if self.listener is not None:
                self.listener.close()
            signals.depth += 1  # no stop while the manifest is rewritten
            try:
                if self.manifest is not None:
                    self.manifest.rewrite([jsonable(p.record()) for p in plans])
            finally:
                signals.__exit__()
        return self.report

    # -- word timings ------------------------------------------------------------------------

    def load_listener(self) -> None:
        """--words: the speech recogniser, before the TTS model (its errors before anything is spoken)."""
        if self.words is None:
            return
        settings = self.cast.settings(None, self.layers())
        with self.session.status("loading the speech recogniser ..."):
            self.listener = recogniser(settings["asr_model"], settings["device"] or "auto", "--words")

    def word_spans(self) -> list[tuple[CuePlan, int, int, int]]:
        """(cue, piece, start, end) of every spoken piece on the track, in samples: a piece from its
        cue's start plus its offset to the next piece's (the last: to the end of the cue's audio),
        inside the track; the cues by start time (the track's order), then by their index."""
        n = len(self.the_track())
        spoken = [p for p in self.report.cues if p.status in ("done", "reused")]
        out = []
        for p in sorted(spoken, key=lambda p: (p.cue.start_ms, p.cue.index)):
            start = ms_to_samples(p.cue.start_ms, SAMPLE_RATE)
            end = min(start + round(p.audio_seconds * SAMPLE_RATE), n)
            at = [min(start + ms_to_samples(o, SAMPLE_RATE), end) for o in p.offsets()] + [end]
            out += [(p, k, at[k], at[k + 1]) for k in range(len(p.pieces))]
        return out

    def deliver_track(self, signals: HoldSignals) -> None:
        """The track through the one delivery step: --words timed on it (each cue's pieces where
        they lie), --loudness over it, the words, then the track written (a stop waits)."""
        settings = self.cast.settings(None, self.layers())
        spans = None
        if self.words is not None:
            spans = [
                Span(p.pieces[k][0], s, e, p.built[k].request.lang, k, p.cue.index + 1)
                for p, k, s, e in self.word_spans()
            ]
        stdout = self.stdout
        outputs = Outputs(
            target=self.target,
            words=self.words,
            loudness=settings["loudness"],  # --loudness: over the whole track
            loudness_what="the track",
            level_in_place=True,  # the track is levelled where it lies: no second 4 h copy
            stdout=None if stdout is None else (lambda: stdout),
            pipe_error=False,  # stdout's reader gone: the command's BrokenPipeError
            mark=run_mark(settings),
        )
        deliver(
            Take(self.the_track(), SAMPLE_RATE, spans=spans),
            outputs,
            listener=self.listener,
            status=self.session.status,
            protect=signals.protect,
            warn=self.warn,
        )
        self.report.written = True
