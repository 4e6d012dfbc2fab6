"""The plain render of `say` (`-o FILE`, `-o -`): the render that matches the reference. The
model is loaded, the recording encoded, every piece generated at once, then the words, the
subtitles and the audio written through deliver.py (a stop waits until the file is complete).

With --cache (the phrase cache, app/phrases/), the file is looked up first: a hit is written from
the cache through a temporary file and a rename, with no model loaded; a miss is rendered as
above, and the file it wrote is kept.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import AbstractContextManager, contextmanager
from typing import Callable, Iterator

from ...engine.pipeline import Engine
from ...engine.planning import Planned, Request, Result, plan_of
from ...media.atomic import replace_atomically
from ...media.leveller import LoudnessReport
from ...media.phrasestore import Found
from ..deliver import Outputs, Take, deliver
from ..listening import listen
from ..listening.verify import RequestCheck
from ..request import finish_request
from ..signals import HoldSignals
from ..voices.design import request_voice_prompt
from .speakrun import (
    SpeechReport,
    SpeechRun,
    Writes,
    open_the_player,
    playback_stopped,
    speech_report,
    stopped_after,
)


class PlainRun(SpeechRun):
    """Load, prepare the voice, generate every piece at once, write (see the module doc)."""

    def run(self, signals: HoldSignals) -> SpeechReport:
        """Speak; StoppedBySignal on Ctrl-C / SIGTERM (`signals`: the HoldSignals the writes are held by)."""
        speech, writes = self.speech, Writes(signals)
        key = self.cache_key()
        found = None if key is None else self.cached(key)
        if found is not None:
            return self.from_cache(found, writes)
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
                raise playback_stopped(e) from None
            raise stopped_after(e, writes.done, speech.target) from None
        finally:
            if self.heard is not None:
                self.heard.close()
        key = key or self.cache_key()  # a designed voice's first render: keyed now it is rendered
        if key is not None:
            self.keep(key, len(result.audio), result.sample_rate, pieces, done.loudness)
        report = speech_report(
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
            engine=engine,
            loudness=done.loudness,
            voice_prompt=request_voice_prompt(request),
        )
        return report if key is None else dataclasses.replace(report, cache="miss")

    # --- --cache: the phrase cache ------------------------------------------------------------
    def cache_key(self) -> str | None:
        """The phrase cache's key of this render's file (None: --cache is off, or the checkpoint
        is not here yet)."""
        speech = self.speech
        if speech.cache is None or speech.target is None or speech.target.path is None:
            return None
        rate = int(speech.sample_rate or 0)  # 0: the model's own (the checkpoint is keyed)
        return speech.cache.key_of(speech.built, speech.target.audio_format.name, rate, "file")

    def cached(self, key: str) -> Found | None:
        assert self.speech.cache is not None
        return self.speech.cache.get(key)

    def from_cache(self, found: Found, writes: Writes) -> SpeechReport:
        """A hit: the kept file written in place of a render (no model)."""
        speech, t0 = self.speech, time.perf_counter()
        target = speech.target
        assert target is not None and target.path is not None
        try:
            with writes.protect():
                replace_atomically(target.path, lambda f: f.write(found.data))
        except KeyboardInterrupt as e:
            raise stopped_after(e, writes.done, target) from None
        import numpy as np  # (not at import: `say --help` and a bare `say` load no numpy)

        meta, rate = found.meta, int(found.meta.get("sample_rate") or 1)
        silent = np.zeros(int(meta.get("samples") or 0), dtype=np.float32)  # the report's length
        report = speech_report(
            speech,
            self.shown,
            result=silent,
            sample_rate=rate,
            seconds=time.perf_counter() - t0,
            load=0.0,
            voice=None,
            first=None,
            seed=int(speech.built.request.seed),
            pieces=int(meta.get("pieces") or 1),
        )
        loudness = meta.get("loudness") if isinstance(meta.get("loudness"), dict) else None
        return dataclasses.replace(report, cache="hit", loudness=loudness)

    def keep(self, key: str, samples: int, rate: int, pieces: int, loudness: LoudnessReport | None) -> None:
        """A miss: the file just written, kept (read back bounded: a file over the store's
        bound is not kept)."""
        speech = self.speech
        assert speech.cache is not None and speech.target is not None and speech.target.path is not None
        try:
            if speech.target.path.stat().st_size > speech.cache.store.cap_bytes:
                return
            data = speech.target.path.read_bytes()
        except OSError:
            return
        meta: dict[str, object] = {"samples": samples, "sample_rate": rate, "pieces": pieces}
        if loudness is not None:
            meta["loudness"] = loudness.as_dict()
        speech.cache.put(key, data, meta)

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
            mark=speech.mark,
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
        ref = built.reference
        what = "rendering the designed voice" if ref.design is not None else f"preparing the voice of {ref.path}"
        with self.session.status(f"{what} ..."):
            if ref.design is None:  # a recording: the encoder (a design is rendered by the model itself)
                engine.load_encoder()
            request = finish_request(engine, built, self.speech.refs)
        return request, time.perf_counter() - t0
