"""Ray for the tests: the `omnivoice` script's command and environment for a real local cluster, and
FakeRay (enough of the ray module for cluster.py: actors in this process) and FakeQueue (the steps
queue's). test_ray.py, test_book.py."""

from __future__ import annotations

import os
import sys

from conftest import ROOT, TINY_CKPT

from omnivoice_cli.app.batch import clusterworker

MAIN = [sys.executable, "-c", "from omnivoice_cli.cli import main; main()"]  # the `omnivoice` script
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
ENV.pop("OMNIVOICE_MODEL", None)
ENV.pop("RAY_ADDRESS", None)
# Other jobs share the test machine's memory: Ray's memory monitor (which kills workers when the
# whole machine is at 95%) would kill this test's workers for them. A test that wants it says so.
ENV["RAY_memory_monitor_refresh_ms"] = "0"


class FakeRef:
    def __init__(self, value=None, error: BaseException | None = None):
        self.value, self.error = value, error


class FakeExceptions:
    class RayError(Exception):
        pass

    class RayActorError(RayError):
        pass

    class ActorDiedError(RayActorError):
        pass

    class WorkerCrashedError(RayError):
        pass

    class ObjectLostError(RayError):
        pass

    class OwnerDiedError(ObjectLostError):
        pass

    class NodeDiedError(RayError):
        pass

    class OutOfMemoryError(RayError):  # Ray's memory monitor killed the worker
        pass

    class RayTaskError(RayError):
        cause = None


class FakeQueue:
    """Enough of ray.util.queue.Queue for the steps the workers report: every item put is kept in
    `puts` too (a FakeRay's groups run at once, so the driver takes a whole run's items together)."""

    def __init__(self, maxsize: int = 0, actor_options: dict | None = None):
        self.items: list = []
        self.puts: list = []

    def put_nowait(self, item) -> None:
        self.items.append(item)
        self.puts.append(item)

    def qsize(self) -> int:
        return len(self.items)

    def get_nowait_batch(self, count: int) -> list:
        taken, self.items = self.items[:count], self.items[count:]
        return taken

    def shutdown(self, force: bool = False) -> None:
        pass


class FakeRay:
    """Enough of the ray module for cluster.py: actors run in this process, at once. A `run` call
    for which dies(k, tasks) is true (k: 1-based, over all workers) ends as if its worker had been
    SIGKILLed; on_wait(fake) is called at each ray.wait."""

    exceptions = FakeExceptions

    def __init__(self, dies=lambda k, tasks: False, on_wait=None, death=FakeExceptions.ActorDiedError):
        self.dies, self.on_wait, self.death = dies, on_wait, death
        self.runs = self.waits = 0
        self.actors: list = []
        self.killed: list = []
        self.options: dict = {}

    def is_initialized(self):
        return True  # as if the program had set Ray up: no init, no shutdown

    def cluster_resources(self):
        return {"CPU": 8.0}

    def remote(self, **options):
        self.options = options
        fake = self

        class ActorClass:
            @staticmethod
            def remote(*args):
                return fake._actor(*args)

        return lambda cls: ActorClass

    def _actor(self, *args):
        worker = clusterworker.OmnivoiceWorker(*args)
        fake, handle = self, type("Handle", (), {})()
        handle.dead = False

        class Method:
            def __init__(self, name):
                self.name = name

            def remote(self, *a):
                if self.name == "run":
                    fake.runs += 1
                    if fake.dies(fake.runs, a[0]):
                        handle.dead = True
                if handle.dead:
                    return FakeRef(error=fake.death("The actor died unexpectedly. More."))
                return FakeRef(getattr(worker, self.name)(*a))

        handle.ready, handle.run = Method("ready"), Method("run")
        self.actors.append(handle)
        return handle

    def wait(self, refs, num_returns=1, timeout=None):
        self.waits += 1
        if self.on_wait:
            self.on_wait(self)
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        if ref.error is not None:
            raise ref.error
        return ref.value

    def kill(self, actor):
        self.killed.append(actor)


RUN = ["--model", str(TINY_CKPT), "--threads", "1"]  # one torch thread each: float sums depend on the count
