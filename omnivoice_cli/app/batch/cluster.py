"""`omnivoice batch --ray`: the pending lines of a batch spoken by engine actors on a Ray cluster.

    omnivoice batch jobs.jsonl -o out/ --ray local --workers 2                   # a cluster on this machine
    omnivoice batch jobs.jsonl -o out/ --ray auto --workers 8 --gpus-per-worker 1  # RAY_ADDRESS or a running head

The driver is batch.BatchRun, unchanged: it checks every line before anything starts, skips the
files that exist, and is the only writer of the output folder and the manifest (resume,
--overwrite, atomic writes and exit codes are a local batch's). This module is its executor
(executor.Executor), the part that speaks the pending lines (`BatchRun(..., executor=RayExecutor(options))`):

  1. connect to the cluster (`local`: start one here; shut down again at the end);
  2. start `workers` actors (clusterworker.OmnivoiceWorker): each loads the engine once, with the run's settings
     (Session.load_engine, from the run's model and engine/hardware.Hardware), on `gpus_per_worker` GPUs or
     `threads` CPU cores;
  3. cut the lines into groups, the longest first (estimated frames x steps, from plan_request),
     and hand a group to each idle worker. A worker encodes the reference recordings its group
     needs (prepared by the driver; encoded once per worker) and runs the group through the
     packed continuous-batching loop (Engine.generate); it returns the audio and what the
     manifest record needs, and writes nothing (so the nodes need no shared file system).
     A line that designs its voice (`designing_lines`) is a group of its own, handed out first:
     its worker speaks it once, as the voice's render (design.render_line), and the lines that
     clone that voice wait in the queue until it is back, then go with the voice it gave;
  4. the driver saves each result as a local batch does (BatchRun.save_result, or fail_line);
  5. a worker that dies (its process killed, its node lost) has its group retried on another
     worker, and a replacement is started; a group is retried MAX_RETRIES times, then its lines
     fail with a message (a rerun retries them);
  6. Ctrl-C / SIGTERM: the actors are killed, a local cluster is shut down, and BatchRun records
     the lines not spoken as pending: only complete files are left, and a rerun resumes.

The steps bar is fed by the workers (through a ray.util.queue.Queue, only when the bars are
shown); the lines bar moves as results arrive. Ray is an optional extra (`import_ray`); nothing
imports this module but `omnivoice batch --ray`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable

from ...engine.errors import InvalidRequest, MissingExtra, OmniVoiceError, install_hint, one_line
from ...engine.model.config import ModelConfig
from ...engine.planning import Request, plan_request
from ..signals import HoldSignals
from .batchinput import Line
from .clusterworker import OmnivoiceWorker, Outcome, Task
from .executor import GROUP_SIZE, BatchDriver, kept_seed

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.actor import ActorHandle
    from ray.util.queue import Queue

    from ...engine.sound.voice import VoicePrompt
    from ..request import Reference

INSTALL_HINT = install_hint("ray")
MAX_RETRIES = 2  # times a group is given to another worker after its worker died
GROUPS_PER_WORKER = 2  # smaller groups, down to one line, until each worker gets about this many
POLL_SECONDS = 0.2  # the driver's wait between looks at the steps queue (and at Ctrl-C)
MAX_WORKERS = 10_000
__all__ = ["ClusterOptions", "RayExecutor", "import_ray", "make_groups", "line_cost", "INSTALL_HINT"]


def import_ray() -> ModuleType:
    """The ray module, or InvalidRequest saying how to install it."""
    try:
        import ray
    except ImportError:
        raise MissingExtra("--ray", "Ray", "ray") from None
    return ray


@dataclass(frozen=True)
class ClusterOptions:
    """Where and how wide a batch runs on Ray."""

    address: str = "local"  # local | auto | a cluster address (host:6379, ray://host:10001)
    workers: int = 1  # engine actors, each loading the model once
    gpus_per_worker: float = 0.0  # GPUs each actor reserves (fractions share a GPU); 0: CPU only
    cpus: int = 1  # CPU cores each actor reserves: the run's threads (its torch threads), else 1

    def __post_init__(self) -> None:
        if not self.address or not self.address.strip():
            raise InvalidRequest("--ray must be local, auto or a cluster address such as 10.0.0.5:6379, got ''")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise InvalidRequest(f"--workers must be an integer in 1..{MAX_WORKERS}, got {self.workers}")
        if not (math.isfinite(self.gpus_per_worker) and 0 <= self.gpus_per_worker <= 64):
            raise InvalidRequest(
                f"--gpus-per-worker must be a number in 0..64 (0.5: two workers share a GPU), "
                f"got {self.gpus_per_worker:g}"
            )


@dataclass
class LineGroup:
    """Lines given to one worker at a time."""

    lines: list[Line]
    attempts: int = 0  # workers that died running it
    cost: float = 0.0


def line_cost(request: Request) -> float:
    """How long a line takes, roughly: its estimated frames times its steps (plan_request's
    frames of each piece, as the engine estimates them)."""
    return float(sum(plan_request(request, ModelConfig()).frames) * request.generation.num_step)


def make_groups(costs: list[tuple[Line, float]], workers: int) -> list[LineGroup]:
    """Items (with their cost) in groups, the costliest first: groups of similar lines, about
    GROUPS_PER_WORKER per worker, of 1 to GROUP_SIZE items."""
    ordered = sorted(costs, key=lambda ic: -ic[1])  # stable: equal costs keep the input order
    size = max(1, min(GROUP_SIZE, math.ceil(len(ordered) / (workers * GROUPS_PER_WORKER))))
    groups = []
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        groups.append(LineGroup([item for item, _ in chunk], cost=sum(c for _, c in chunk)))
    return groups


def ref_key(ref: Reference) -> tuple[str, str]:
    """A reference's key in a group's references (a worker renders or encodes it once)."""
    return (str(ref.path.resolve()), ref.transcript)


def designing_lines(pending: list[Line]) -> dict[tuple[str, str], int]:
    """The line that designs each voice designed in this run: the first pending line with the
    design's seed (Reference.designs_with, References.render_line's rule; the worker checks its
    words), by the design's reference key."""
    found: dict[tuple[str, str], int] = {}
    for line in pending:
        ref = line.planned.reference
        if ref is not None and ref.designs_with(line.planned.request.seed):
            found.setdefault(ref_key(ref), line.number)
    return found


def sum_steps(steps: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(done, total) of the forward loops running on all workers."""
    return sum(d for d, _ in steps.values()), sum(t for _, t in steps.values())


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------


def check_device(device: str | None, options: ClusterOptions) -> None:
    """A worker sees only the GPUs Ray gave it (--gpus-per-worker): CUDA needs some, and cuda:N
    cannot pick one."""
    device = (device or "auto").lower()
    if device.startswith("cuda:"):
        raise InvalidRequest(
            f"--device {device} picks a GPU, but with --ray each worker uses the GPUs Ray gives it: "
            "give --device cuda (or auto) and --gpus-per-worker"
        )
    if device == "cuda" and not options.gpus_per_worker:
        raise InvalidRequest("--device cuda with --ray needs --gpus-per-worker (the GPUs each worker takes)")


def connect(ray: ModuleType, options: ClusterOptions, echo: Callable[[str], object]) -> None:
    """Start or join the cluster (unless this program set Ray up itself)."""
    if ray.is_initialized():
        return
    quiet = dict(logging_level=logging.ERROR, log_to_driver=False)
    if options.address == "local":
        cpus = max(os.cpu_count() or 1, options.workers * options.cpus)
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)  # a new one, even if one runs
        echo(f"Ray: started a local cluster ({cpus} CPUs)")
        return
    package = Path(__file__).resolve().parents[2]  # the omnivoice_cli package: the workers run this very code
    try:
        ray.init(address=options.address, runtime_env={"py_modules": [str(package)]}, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        auto = "(RAY_ADDRESS or a head started on this machine)"
        where = auto if options.address == "auto" else "at " + options.address
        hint = (
            "; a cluster with token authentication also needs RAY_AUTH_MODE=token (and its token in "
            "RAY_AUTH_TOKEN or ~/.ray/auth_token)"
            if "RAY_AUTH_MODE" not in os.environ
            else ""
        )
        raise OmniVoiceError(f"cannot reach a Ray cluster {where}: {one_line(e)}{hint}") from None
    echo(f"Ray: connected to the cluster at {options.address}")


def check_resources(ray: ModuleType, options: ClusterOptions, echo: Callable[[str], object]) -> None:
    """Fail when not even one worker fits the cluster; warn when not all of them do."""
    have = ray.cluster_resources()
    fits = int(have.get("CPU", 0) // options.cpus)
    if options.gpus_per_worker:
        fits = min(fits, int(have.get("GPU", 0) // options.gpus_per_worker + 1e-9))
    if fits >= options.workers:
        return
    need = f"{options.cpus} CPU" + (f" and {options.gpus_per_worker:g} GPU" if options.gpus_per_worker else "")
    what = f"the Ray cluster has {have.get('CPU', 0):g} CPUs and {have.get('GPU', 0):g} GPUs; a worker needs {need}"
    if fits == 0 and options.address == "local":
        raise InvalidRequest(f"{what}: no worker fits (check --gpus-per-worker and --threads)")
    echo(f"Warning: {what}: {fits} of {options.workers} workers fit now, the others wait for resources")


class RayExecutor:
    """BatchRun's executor (batch.Executor) on a Ray cluster (see the module doc)."""

    def __init__(self, options: ClusterOptions) -> None:
        self.options = options

    def speak(self, run: BatchDriver, pending: list[Line], signals: HoldSignals) -> None:
        ray = import_ray()
        _, hardware = run.hardware()
        check_device(hardware.device, self.options)
        options = dataclasses.replace(self.options, cpus=hardware.threads or 1)
        cluster_run = _ClusterRun(ray, options, run, signals)
        # Ray prints what its raylets report (a worker that died) on stdout, which carries only data
        with contextlib.redirect_stdout(sys.stderr):
            try:
                cluster_run.start(pending)
                cluster_run.loop()
            finally:
                with signals.protect():  # a second Ctrl-C waits for the cluster to be let go
                    cluster_run.close()


class _ClusterRun:
    """One run on the cluster: the workers, the groups to do, the calls in flight."""

    def __init__(self, ray: ModuleType, options: ClusterOptions, run: BatchDriver, signals: HoldSignals) -> None:
        self.ray, self.options, self.run, self.signals = ray, options, run, signals
        self.echo = run.echo if not run.quiet else (lambda msg: run.echo(msg) if msg.startswith("Warning") else None)
        self.owns_ray = not ray.is_initialized()  # this run starts (or joins) Ray, and lets go at the end
        self.queue: Queue | None = None  # a queue of the workers' steps (with a steps bar)
        self.workers: dict[str, ActorHandle] = {}  # name -> actor
        self.idle: list[str] = []
        self.todo: deque[LineGroup] = deque()
        self.in_flight: dict[ObjectRef, tuple[str, str, LineGroup | None]] = {}  # ref -> (ready | run, worker, group)
        self.lines: dict[int, Line] = {}  # line number -> its line
        self.waiting: dict[tuple[str, str], int] = {}  # a design's key -> its designing line, not spoken yet
        self.voices: dict[tuple[str, str], VoicePrompt] = {}  # a design's key -> the voice its line gave
        self.redesign: dict[int, Line] = {}  # designing lines an earlier run spoke, spoken again for their voice
        self.steps: dict[str, tuple[int, int]] = {}
        self.started = self.load_deaths = 0
        self.t_ready: float | None = None

    # -- start and stop -------------------------------------------------------------------

    def start(self, pending: list) -> None:
        for line in pending:
            self.run.warn(line, line.warnings)
        self.lines = {line.number: line for line in pending}
        self.waiting = designing_lines(pending)
        # a voice whose designing line an earlier run spoke: that line's first piece again (executor.redesign_done)
        wanted = {ref_key(ref) for ln in pending if (ref := ln.planned.reference) is not None}
        spoken = {ln.number: ln for ln in self.run.lines if ln.status == "skipped" and ln.built is not None}
        for key, number in designing_lines(list(spoken.values())).items():
            if key in wanted and key not in self.waiting:
                self.waiting[key], self.redesign[number] = number, spoken[number]
        alone = {**{n: self.lines[n] for n in self.waiting.values() if n in self.lines}, **self.redesign}
        rest = [(ln, line_cost(ln.planned.request)) for ln in pending if ln.number not in alone]
        self.todo = deque(  # each designing line a group of its own, first: the lines cloning it wait for it
            [LineGroup([ln], cost=line_cost(ln.planned.request)) for _, ln in sorted(alone.items())]
            + make_groups(rest, self.options.workers)
        )
        connect(self.ray, self.options, self.echo)
        self.signals.reclaim()  # ray.init installs its own SIGTERM handler in the driver: the batch's again
        check_resources(self.ray, self.options, self.echo)
        model, hardware = self.run.hardware()
        if Path(model).expanduser().exists():  # a local checkpoint: the workers do not start in this folder
            model = str(Path(model).expanduser().resolve())
        self.model, self.hardware, self.encoder = (
            model,
            hardware,
            any(ln.planned.reference is not None for ln in pending),
        )
        if self.run.progress.shows_steps:
            from ray.util.queue import Queue

            self.queue = Queue(maxsize=10_000, actor_options={"num_cpus": 0})
        self.actor = self.ray.remote(num_cpus=self.options.cpus, num_gpus=self.options.gpus_per_worker, max_restarts=0)(
            OmnivoiceWorker
        )
        self.t_start = time.perf_counter()
        count = min(self.options.workers, len(self.todo))
        each = "workers, each" if count > 1 else "worker,"
        self.echo(f"Ray: starting {count} {each} loading the model ({model})")
        for _ in range(count):
            self._start_worker()

    def _start_worker(self) -> None:
        self.started += 1
        name = f"worker {self.started}"
        actor = self.actor.remote(self.model, self.hardware, self.encoder, self.queue, name)
        self.workers[name] = actor
        self.in_flight[actor.ready.remote()] = ("ready", name, None)

    def close(self) -> None:
        """Kill the actors (work in flight is dropped), and shut a local cluster down."""
        report = self.run.report
        if self.t_ready is not None:
            report.generate_seconds = time.perf_counter() - self.t_ready
        for actor in self.workers.values():
            try:
                self.ray.kill(actor)
            except Exception:
                pass
        if self.queue is not None:
            try:
                self.queue.shutdown(force=True)
            except Exception:
                pass
        if self.owns_ray and self.ray.is_initialized():
            self.ray.shutdown()  # a local cluster stops; a cluster joined stays up

    # -- the loop ---------------------------------------------------------------------------

    def _running(self) -> bool:
        return any(kind == "run" for kind, _, _ in self.in_flight.values())

    def loop(self) -> None:
        while self.todo or self._running():
            if not self.in_flight:
                raise OmniVoiceError("no Ray worker is left to speak the remaining lines")
            done, _ = self.ray.wait(list(self.in_flight), num_returns=1, timeout=POLL_SECONDS)
            self._poll_steps()
            for ref in done:
                kind, name, group = self.in_flight.pop(ref)
                if kind == "ready":
                    self._on_ready(ref, name)
                elif group is not None:  # (a run's call always has its group)
                    self._on_group(ref, name, group)
            self._dispatch()

    def _ready(self, group: LineGroup) -> bool:
        """No line of the group clones a voice whose designing line is not spoken yet (but that line)."""
        for line in group.lines:
            ref = line.planned.reference
            if ref is not None and self.waiting.get(ref_key(ref), line.number) != line.number:
                return False
        return True

    def _dispatch(self) -> None:
        while self.idle:
            group = next((g for g in self.todo if self._ready(g)), None)
            if group is None:
                return
            self.todo.remove(group)
            name = self.idle.pop(0)
            tasks, references = [], {}
            for line in group.lines:
                ref, key = line.planned.reference, None
                if ref is not None:
                    key = ref_key(ref)
                    # a recording to encode, a design to render (request.reference_prompt), or the voice its
                    # designing line gave on another worker: a designing line is spoken once, as the render
                    references[key] = self.voices.get(key, ref)
                designs = key is not None and self.waiting.get(key) == line.number
                seed = kept_seed(line) if line.number in self.redesign else None
                tasks.append(Task(line.number, line.planned.request, key, designs, line.number in self.redesign, seed))
            self.in_flight[self.workers[name].run.remote(tasks, references)] = ("run", name, group)

    def _poll_steps(self) -> None:
        if self.queue is None:
            return
        try:
            count = self.queue.qsize()
            items = self.queue.get_nowait_batch(count) if count else []
        except Exception:
            return
        for name, done, total in items:
            self.steps[name] = (done, total)
        if items:
            self.run.progress.step(*sum_steps(self.steps))

    # -- what comes back ----------------------------------------------------------------------

    def _died(self) -> tuple[type[BaseException], ...]:
        """What a worker's death (or Ray's memory monitor killing it) raises: worth another worker."""
        e = self.ray.exceptions
        kinds = ("RayActorError", "WorkerCrashedError", "ObjectLostError", "NodeDiedError", "OutOfMemoryError")
        return tuple(getattr(e, kind) for kind in kinds if hasattr(e, kind))

    def _on_ready(self, ref: ObjectRef, name: str) -> None:
        try:
            _pid, seconds, error = self.ray.get(ref)
        except self._died() as e:
            self._lost(name, None, e)
            return
        except self.ray.exceptions.RayError as e:  # e.g. an error that does not travel
            raise OmniVoiceError(f"a Ray worker could not start: {one_line(e)}") from None
        if error is not None:
            raise error  # the model does not load (the same on every worker): the run stops
        if self.t_ready is None:
            self.t_ready = time.perf_counter()
            self.run.report.load_seconds = self.t_ready - self.t_start
        self.idle.append(name)

    def _on_group(self, ref: ObjectRef, name: str, group: LineGroup) -> None:
        try:
            outcomes = self.ray.get(ref)
        except self._died() as e:
            self._lost(name, group, e)
            return
        except self.ray.exceptions.RayTaskError as e:  # an unexpected error in the worker's code
            cause = one_line(getattr(e, "cause", None) or e)
            outcomes = [
                Outcome(line.number, error=f"generation failed on a Ray worker: {cause}") for line in group.lines
            ]
        self.steps.pop(name, None)
        self.idle.append(name)
        for outcome in outcomes:
            self._save(outcome)

    def _save(self, outcome: Outcome) -> None:
        for key in [k for k, n in self.waiting.items() if n == outcome.number]:  # a designing line: its voice
            del self.waiting[key]  # (none where it failed: the lines cloning it render the design apart)
            if outcome.prompt is not None:
                self.voices[key] = outcome.prompt
        if outcome.number in self.redesign:  # spoken by an earlier run: its voice only, nothing to save
            return
        line = self.lines[outcome.number]
        if outcome.error is None:  # its seconds: from its group's start on the worker to its file here
            if outcome.result is None:
                raise RuntimeError(f"line {outcome.number}: the worker sent neither a result nor an error")
            line.prompt = line.prompt or outcome.prompt  # what its record's voice_prompt names
            self.run.save_result(line, outcome.result, time.perf_counter() - outcome.seconds)
        elif outcome.ref_error:
            self.run.fail_line(line, f"{line.planned.settings.name('ref')}: {outcome.error}")
        else:
            self.run.fail_line(line, outcome.error)

    def _lost(self, name: str, group: LineGroup | None, error: BaseException) -> None:
        """A worker died: its group goes to another worker (or fails), and a new worker starts."""
        self.workers.pop(name, None)
        self.steps.pop(name, None)
        reason = one_line(error).split(". ")[0].rstrip(".")
        if group is None:
            self.load_deaths += 1
            if self.load_deaths > self.options.workers * MAX_RETRIES:
                raise OmniVoiceError(f"the Ray workers keep dying while they load the model ({reason})")
        else:
            group.attempts += 1
            if group.attempts > MAX_RETRIES:
                for line in group.lines:
                    self._save(
                        Outcome(
                            line.number,
                            error=f"a Ray worker died {group.attempts} times while speaking "
                            f"this line ({reason}); run the batch again to retry it",
                        )
                    )
            else:
                self.todo.appendleft(group)
                self.echo(f"Warning: {name} died ({reason}): its {len(group.lines)} line(s) go to another worker")
        if self.todo or self._running():
            self._start_worker()
