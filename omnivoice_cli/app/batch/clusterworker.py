"""What runs on a worker of `batch --ray` (cluster.py is the driver): `OmnivoiceWorker`, a Ray actor
with one engine, loaded once (Session.load_engine, from the run's model and engine/hardware.Hardware), that speaks
groups of lines through the packed continuous-batching loop (Engine.generate); and what travels
between it and the driver: a `Task` per line out (its request, and the key of a reference
recording the worker encodes once), an `Outcome` per line back (the audio, or an error message).
A worker writes nothing, so the nodes need no shared file system; it reports its steps through a
ray.util.queue.Queue when the driver shows a steps bar."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...engine.errors import OmniVoiceError, one_line
from ...engine.hardware import Hardware
from ...engine.pipeline import Engine
from ...engine.planning import Request, Result
from ..request import Reference, reference_prompt
from ..session import Session
from ..voices.design import render_line

if TYPE_CHECKING:  # annotations only: the voice pulls torch
    from ray.util.queue import Queue

    from ...engine.sound.voice import VoicePrompt

STEP_SECONDS = 0.25  # a worker reports its steps at most this often


@dataclass(frozen=True)
class Task:
    """One line for a worker: its request (ref None while `ref_key` names a recording to encode, a
    design to render, or a voice the driver has already)."""

    number: int  # the line number (the driver's key)
    request: Request
    ref_key: tuple[str, str] | None = None  # (file, transcript) of its recording, in the group's references
    designs: bool = False  # the line designs its voice (`ref_key` a design): spoken once, as the voice's render
    redesign: bool = False  # a designing line spoken by an earlier run: its first piece again, for the voice only
    seed: int | None = None  # with redesign: its first piece's seed (a --verify take's; None: the line's)


@dataclass
class Outcome:
    """What became of one task on a worker: a result (its tokens dropped) or an error message."""

    number: int
    result: Result | None = None  # with tokens=None
    error: str | None = None
    ref_error: bool = False  # the error is about the line's reference recording
    seconds: float = 0.0  # from the start of its group to its result, on the worker
    prompt: VoicePrompt | None = None  # the voice prompt it cloned (encoded or rendered here), for its record


class OmnivoiceWorker:
    """One engine, loaded once, speaking groups of lines (wrapped by ray.remote at run time)."""

    def __init__(
        self, model: str, hardware: Hardware, encoder: bool, queue: Queue | None = None, name: str = ""
    ) -> None:
        self.queue, self.name = queue, name
        self.prompts: dict[tuple[str, str], VoicePrompt] = {}  # encoded recordings
        self.engine: Engine | None = None
        self.error: BaseException | None = None
        self.load_seconds = 0.0
        self._last = 0.0
        try:
            self.engine, self.load_seconds = Session().load_engine(model, hardware, encoder=encoder)
        except Exception as e:  # sent back by ready(), raised by the driver
            self.error = e

    def ready(self) -> tuple[int, float, BaseException | None]:
        """(process id, seconds the model took to load, the loading error or None)."""
        return os.getpid(), self.load_seconds, self.error

    def _request(self, engine: Engine, task: Task, references: dict) -> Request:
        if task.ref_key is None:
            return task.request
        if task.ref_key not in self.prompts:  # a voice the driver has (another worker's render) is used as it is
            ref = references[task.ref_key]
            self.prompts[task.ref_key] = reference_prompt(engine, ref) if isinstance(ref, Reference) else ref
        return dataclasses.replace(task.request, ref=self.prompts[task.ref_key])

    def _designed(self, engine: Engine, task: Task, references: dict, t0: float) -> Outcome | None:
        """A line that designs its voice, spoken once as the voice's render (design.render_line: its
        first piece's codes and words the voice the group's other lines clone, and the driver hands
        to other workers); None where it is not the design's line (then it clones the render). A
        `redesign` task: that line's first piece again, an Outcome with its voice only."""
        key = task.ref_key
        ref = references[key] if key is not None else None
        if key is None or not isinstance(ref, Reference) or ref.design is None:
            return None
        try:
            done = None
            if key not in self.prompts:
                done = render_line(  # its steps feed the bar as any other group's
                    engine,
                    task.request,
                    ref.design.sample,
                    first_only=task.redesign,
                    seed=task.seed,
                    on_step=self._step,
                )
            if task.redesign:  # the line's voice only (or the design's render, where it is not its line)
                return Outcome(task.number, prompt=done[0] if done else self._request(engine, task, references).ref)
        except (OmniVoiceError, OSError, ValueError) as e:
            return Outcome(task.number, error=one_line(e), ref_error=True)
        if done is None:
            return None
        self.prompts[key], result = done
        result.tokens = None  # the codes stay here: only the audio travels
        return Outcome(task.number, result=result, seconds=time.perf_counter() - t0, prompt=done[0])

    def _step(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.queue is None or (now - self._last < STEP_SECONDS and done < total):
            return
        self._last = now
        try:
            self.queue.put_nowait((self.name, done, total))
        except Exception:  # a full or lost queue only costs a bar update
            pass

    def run(self, tasks: list[Task], references: dict) -> list[Outcome]:
        """Speak a group: every task gets an Outcome (a generation error fails the whole group)."""
        if self.error is not None:
            return [
                Outcome(t.number, error=f"the worker could not load the model: {one_line(self.error)}") for t in tasks
            ]
        engine = self.engine
        if engine is None:  # never: an engine that did not load left its error (above)
            raise RuntimeError("the worker has no engine")
        t0 = time.perf_counter()
        outcomes: dict[int, Outcome] = {}
        requests, numbers = [], []
        for task in sorted(tasks, key=lambda t: not t.designs):  # a designing line first: the others clone it
            if task.designs and (outcome := self._designed(engine, task, references, t0)) is not None:
                outcomes[task.number] = outcome
                continue
            try:
                requests.append(self._request(engine, task, references))
                numbers.append(task.number)
            except (OmniVoiceError, OSError, ValueError) as e:
                outcomes[task.number] = Outcome(task.number, error=one_line(e), ref_error=True)

        def on_result(i: int, result: Result) -> None:
            result.tokens = None  # the codes stay here: only the audio travels
            seconds = time.perf_counter() - t0
            outcomes[numbers[i]] = Outcome(numbers[i], result=result, seconds=seconds, prompt=requests[i].ref)

        try:
            if requests:
                engine.generate(requests, on_step=self._step, on_result=on_result)
        except (OmniVoiceError, RuntimeError, MemoryError) as e:  # e.g. out of memory: the group fails
            for number in numbers:
                outcomes.setdefault(number, Outcome(number, error=f"generation failed: {one_line(e)}"))
        if self.queue is not None:
            self._step(0, 0)  # this worker's loop is over
        return [outcomes[t.number] for t in tasks]
