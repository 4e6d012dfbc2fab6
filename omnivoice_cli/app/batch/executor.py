"""How a batch's pending lines are spoken: the `Executor` a run (batch.BatchRun) hands them to, and
`LocalExecutor`, the engine in this process (cluster.RayExecutor is the other: engine actors on a
Ray cluster). An executor writes nothing: it ends each line with the run's save_result (the run
writes the file and the manifest record) or fail_line; `BatchDriver` is what it may use of the run.
GROUP_SIZE is how many requests one Engine.generate call takes (batch, --ray's groups, dub)."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from ...engine.errors import InvalidRequest, OmniVoiceError, one_line
from ...engine.hardware import Hardware
from ...engine.planning import Result
from ..listening.verify import RequestCheck, Verifier
from ..request import Built, Reference, References, named
from ..session import Progress, Session
from ..signals import HoldSignals
from .batchinput import Line

if TYPE_CHECKING:  # annotations only: the engine pulls torch at import
    from ...engine.pipeline import Engine

GROUP_SIZE = 64  # requests per Engine.generate call (the engine bounds each forward itself)


class Timings(Protocol):
    """The times an executor reports (batch.BatchReport's)."""

    load_seconds: float | None
    voice_seconds: float | None
    generate_seconds: float


class BatchDriver(Protocol):
    """What an executor uses of the run that drives it (batch.BatchRun): its session, engine
    (`hardware`), references, bars and report; a line ended with save_result or fail_line, its
    warnings shown with warn."""

    session: Session
    verifier: Verifier | None  # --verify: the run's recogniser, loaded on first use
    progress: Progress
    group_size: int  # lines per Engine.generate call
    lines: list[Line]  # every line of the run (the pending ones and those done by an earlier run)

    @property
    def refs(self) -> References: ...

    @property
    def report(self) -> Timings: ...

    @property
    def echo(self) -> Callable[[str], None]: ...

    @property
    def quiet(self) -> bool: ...

    def hardware(self) -> tuple[str, Hardware]: ...

    def warn(self, line: Line, warnings: list[str]) -> None: ...

    def fail_line(self, line: Line, message: str) -> None: ...

    def save_result(self, line: Line, result: Result, started: float) -> None: ...


class Executor(Protocol):
    """What speaks the pending lines of a run: LocalExecutor (the engine in this process) or
    cluster.RayExecutor (engine actors on a Ray cluster). It ends each line with run.save_result
    or run.fail_line (the run writes the files and the manifest, the executor nothing), shows
    the run's warnings (run.warn), feeds run.progress.step, and sets run.report's load_seconds,
    voice_seconds and generate_seconds. `signals` are the run's (HoldSignals: reclaim them after a
    library took them, protect what must not be cut); a Stop (Ctrl-C, SIGTERM) goes through, and
    the run records the lines not spoken as pending."""

    def speak(self, run: BatchDriver, pending: list[Line], signals: HoldSignals) -> None: ...


def redesign_done(
    refs: References,
    engine: Engine,
    done: Iterable[tuple[Built, int | None]],
    wanted: Iterable[Reference],
    on_error: Callable[[Exception], None] | None = None,
) -> None:
    """A resumed run (batch, dub): a designed voice whose designing line an earlier run spoke (in
    `done`, with the seed of its first piece's take: a --verify line's kept take, None: the line's
    seed) is rendered from that line again (References.render_line, its first piece alone, its
    audio dropped: one generation, as the render it replaces), where a line spoken now clones it
    (its reference in `wanted`), so that those lines clone the voice a run from the start gives
    them, not `render(design)`'s at the design's own settings. A failure goes to `on_error` (None:
    raised)."""
    keys = {(r.path.resolve(), r.transcript) for r in wanted}
    for built, seed in done:
        ref = built.reference
        if ref is None or (ref.path.resolve(), ref.transcript) not in keys:
            continue
        try:
            refs.render_line(engine, built, first_only=True, seed=seed)
        except (OmniVoiceError, OSError, ValueError) as e:
            if on_error is None:
                raise
            on_error(e)


def kept_seed(line: Line) -> int | None:
    """The seed of the take of its first piece a line done with --verify kept (its manifest
    record's), None where it has none (the line's own seed: its first take)."""
    check = (line.record or {}).get("verify")
    pieces = check.get("pieces") if isinstance(check, dict) else None
    seed = pieces[0].get("seed") if isinstance(pieces, list) and pieces and isinstance(pieces[0], dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


class LocalExecutor:
    """The engine in this process (the default Executor): loaded once, the reference recordings
    encoded once each, the lines sent to Engine.generate in groups of GROUP_SIZE."""

    def speak(self, run: BatchDriver, pending: list[Line], signals: HoldSignals) -> None:
        engine, run.report.load_seconds = run.session.load_engine(*run.hardware())
        cloned = [(ln, ref) for ln in pending if (ref := ln.planned.reference) is not None]
        spoken: list[tuple[Line, Result, float]] = []  # lines spoken as their voice's render
        if cloned:  # the encoder and every recording: "voices prepared in", apart from the model's load
            t_voice = time.perf_counter()
            with run.session.status("preparing the reference voices ..."):
                engine.load_encoder()
                # a failure leaves the later lines to clone render(design), or to fail on it in their own words
                done_lines = [(ln.built, kept_seed(ln)) for ln in run.lines if ln.status == "skipped" and ln.built]
                redesign_done(run.refs, engine, done_lines, [r for _, r in cloned], lambda e: None)
                for line, ref in cloned:
                    try:  # a line designing its voice is generated once, as the render (with its --verify check)
                        started = time.perf_counter()
                        check = self.check_for(run, line) if ref.design is not None else None
                        done = run.refs.render_line(engine, line.planned, check=check)
                        line.prompt = run.refs.encode(engine, ref) if done is None else done[0]
                        if done is not None:
                            spoken.append((line, done[1], started))
                    except (OmniVoiceError, OSError, ValueError) as e:
                        run.fail_line(line, f"{line.planned.settings.name('ref')}: {one_line(e)}")
            run.report.voice_seconds = time.perf_counter() - t_voice
        for line, result, started in spoken:
            run.warn(line, line.warnings)
            run.save_result(line, result, started)
        t_gen = time.perf_counter()
        pending = [ln for ln in pending if ln.status is None]
        for line in pending:
            run.warn(line, line.warnings)
        size = run.group_size
        for start in range(0, len(pending), size):
            self.run_group(run, engine, pending[start : start + size])
        run.report.generate_seconds = time.perf_counter() - t_gen

    def check_for(self, run: BatchDriver, line: Line) -> RequestCheck | None:
        """A line's --verify check (the run's one recogniser, loaded on the first such line)."""
        settings = line.planned.settings
        if not settings["verify"]:
            return None
        if run.verifier is None:
            with run.session.status("loading the speech recogniser ..."):
                run.verifier = Verifier.from_settings(settings)
        line.check = run.verifier.for_request(
            line.planned.request.lang, settings["verify_max_error"], settings["verify_retries"]
        )
        return line.check

    def run_group(self, run: BatchDriver, engine: Engine, group: list[Line]) -> None:
        """One Engine.generate call: each line saved as soon as it is finished."""
        t0 = time.perf_counter()

        def on_result(i: int, result: Result) -> None:
            run.save_result(group[i], result, t0)

        def on_error(i: int, e: Exception) -> None:  # this line alone failed (its checks, size, decoding)
            line = group[i]
            if isinstance(e, InvalidRequest) and e.setting is not None:
                e = named(line.planned.settings, e)
            run.fail_line(line, f"generation failed: {one_line(e)}")

        requests = [
            dataclasses.replace(ln.planned.request, ref=ln.prompt) if ln.prompt else ln.planned.request for ln in group
        ]
        checks = [self.check_for(run, ln) for ln in group]  # --verify (verify.py)
        try:
            engine.generate(
                requests,
                on_step=run.progress.step,
                on_result=on_result,
                on_error=on_error,
                steady=True,  # lines leave one by one: a stop keeps what is finished (waves.Stagger)
                **({"checks": checks} if any(c is not None for c in checks) else {}),
            )
        except (OmniVoiceError, RuntimeError, MemoryError) as e:  # e.g. out of memory: the group fails
            msg = one_line(e)
            for line in group:
                if line.status is None:
                    run.fail_line(line, f"generation failed: {msg}")
