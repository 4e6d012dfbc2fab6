"""The plain render of `say` (`-o FILE`, `-o -`): the render that matches the reference. The
model is loaded, the recording encoded, every piece generated at once, then the words, the
subtitles and the audio written through deliver.py (a stop waits until the file is complete).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager
from typing import Callable, Iterator

from ...engine.pipeline import Engine
from ...engine.planning import Planned, Request, Result, plan_of
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
        return speech_report(
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
        ref = built.reference
        what = "rendering the designed voice" if ref.design is not None else f"preparing the voice of {ref.path}"
        with self.session.status(f"{what} ..."):
            if ref.design is None:  # a recording: the encoder (a design is rendered by the model itself)
                engine.load_encoder()
            request = finish_request(engine, built, self.speech.refs)
        return request, time.perf_counter() - t0
