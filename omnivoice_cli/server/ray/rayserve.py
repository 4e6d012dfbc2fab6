"""`omnivoice serve --ray ADDRESS`: the same app (app.py) as a Ray Serve application, one engine
per replica.

    deploy(options, loader, RayOptions(address="auto", replicas=2), echo)   # blocks until stopped

Each replica (ModelReplica) builds its own ServerState and app on the replica, so each loads its
own model and runs its own engine loop with its own continuous batching. HTTP reaches them through
a light front deployment (rayfront.py: the key, the body limit, then a deployment handle; a lost
replica is tried again or answered 503, never the proxy's 500); the socket /tts/ws goes from Ray
Serve's proxy straight to a replica (the replicas are their own application, routed at /tts).
The limits, /health and /metrics are each replica's, as in a plain `serve`: --max-queue bounds one
replica's engine (Ray Serve's `max_ongoing_requests`), and requests waiting beyond --max-queue
times the replicas get a 503. A replica is ready once its model is loaded (and warmed with
--warmup): until then it is sent nothing; the ready line is printed once /health/ready answers 200
through the proxy (replica_ready), as a plain serve prints it once its own does. Its replies carry `X-OmniVoice-Replica`.
Saved voices are read from the driver's OMNIVOICE_HOME, which every replica is given (on a
cluster: a path every node sees, e.g. a shared file system).

With --min-replicas / --max-replicas the replicas are scaled by Ray Serve's autoscaler on the
requests ongoing per replica (its `target_ongoing_requests`).
"""

from __future__ import annotations

import http.client
import logging
import math
import os
import signal
import threading
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable

import anyio

from ...engine.checkpoint.hub import user_home
from ...engine.errors import InvalidRequest, MissingExtra, OmniVoiceError, one_line
from ..app import create_app
from ..asgi import ASGIApp, Message, Receive, Scope, Send
from ..config import ServeOptions
from ..state import ServerState
from .rayfront import MODEL_APP, MODEL_DEPLOYMENT, SOCKET_PREFIX, FrontReplica, relay_through

if TYPE_CHECKING:
    from ...engine.pipeline import Engine

APP_NAME = "omnivoice"
MAX_REPLICAS = 10_000
FRONT_SLACK = 16  # requests the front holds beyond the replicas' own (the probes, /metrics)
TARGET_ONGOING = 2  # Ray Serve's default: requests ongoing per replica the autoscaler aims at


@dataclass(frozen=True)
class RayOptions:
    """Where and how many replicas serve."""

    address: str = "auto"  # local | auto | a cluster address (host:6379, ray://host:10001)
    replicas: int = 1  # replicas (the initial number when autoscaled)
    min_replicas: int | None = None  # autoscaling bounds (either given: autoscaled)
    max_replicas: int | None = None
    gpus_per_replica: float = 0.0  # GPUs each replica takes (1: a replica per GPU)
    cpus_per_replica: float = 1.0  # CPU cores each replica reserves

    def __post_init__(self) -> None:
        if not self.address or not self.address.strip():
            raise InvalidRequest("--ray must be local, auto or a cluster address such as 10.0.0.5:6379, got ''")
        for name, value in (
            ("--replicas", self.replicas),
            ("--min-replicas", self.min_replicas),
            ("--max-replicas", self.max_replicas),
        ):
            if value is not None and not 0 <= value <= MAX_REPLICAS or (name == "--replicas" and value == 0):
                low = 0 if name == "--min-replicas" else 1
                raise InvalidRequest(f"{name} must be an integer in {low}..{MAX_REPLICAS}, got {value}")
        if self.autoscaled and self.low > self.high:
            raise InvalidRequest(f"--min-replicas ({self.low}) must not be above --max-replicas ({self.high})")
        if not (math.isfinite(self.gpus_per_replica) and 0 <= self.gpus_per_replica <= 64):
            raise InvalidRequest(
                f"--gpus-per-replica must be a number in 0..64 (1: a replica per GPU), got {self.gpus_per_replica:g}"
            )

    @property
    def autoscaled(self) -> bool:
        return self.min_replicas is not None or self.max_replicas is not None

    @property
    def low(self) -> int:
        return self.min_replicas if self.min_replicas is not None else min(1, self.replicas)

    @property
    def high(self) -> int:
        return self.max_replicas if self.max_replicas is not None else max(self.replicas, self.low)

    def scaling(self) -> dict[str, object]:
        """The deployment's replica options: a fixed number, or Ray Serve's autoscaling config."""
        if not self.autoscaled:
            return {"num_replicas": self.replicas}
        initial = min(max(self.replicas, self.low), self.high)
        return {
            "autoscaling_config": {
                "min_replicas": self.low,
                "max_replicas": self.high,
                "initial_replicas": initial,
                "target_ongoing_requests": TARGET_ONGOING,
            }
        }


def import_serve() -> tuple[ModuleType, ModuleType]:
    """(ray, ray.serve), or MissingExtra naming the extra (exit 2)."""
    try:
        import ray
        from ray import serve
    except ImportError:
        raise MissingExtra("omnivoice serve --ray", "Ray Serve (ray[serve])", "ray") from None
    return ray, serve


class LoadedFirst:
    """ASGI middleware of a replica: its lifespan's startup completes once the model is loaded
    (and warmed), so Ray Serve counts the replica ready, and sends it requests, only then; a model
    that fails to load fails the startup (Ray Serve then says why and tries again)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            return await self.app(scope, receive, send)

        async def sending(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                await anyio.to_thread.run_sync(self.state.loaded.wait)
                while self.state.status == "loading":  # the warm-up request
                    await anyio.sleep(0.05)
                if self.state.status == "failed":
                    message = {
                        "type": "lifespan.startup.failed",
                        "message": f"the model failed to load: {self.state.error}",
                    }
            await send(message)

        await self.app(scope, receive, sending)


class FromTheRoot:
    """A replica's app as the proxy reaches it (the socket, under MODEL_APP's prefix /tts): routed
    from the root, so /tts/ws is the app's /tts/ws."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            scope = {**scope, "root_path": ""}
        await self.app(scope, receive, send)


class ModelReplica:
    """A model replica (Ray Serve's ingress of MODEL_APP): its own state, model and engine loop.
    Its ASGI app serves the socket through the proxy; `relay` serves the front's HTTP requests.
    `loader()` makes the function that loads its model."""

    def __init__(self, options: ServeOptions, loader: Callable[[], Callable[[], Engine | None]]) -> None:
        self.options, self.loader = options, loader
        self.served: ASGIApp | None = None  # (not `app`: Ray Serve's wrapper has one)

    def __serve_build_asgi_app__(self) -> ASGIApp:
        from ray import serve

        try:
            replica = str(serve.get_replica_context().replica_id.unique_id)
        except Exception:  # noqa: BLE001 - an older Ray: the process says which
            replica = str(os.getpid())
        state = ServerState(replace(self.options, replica=replica), self.loader())
        self.served = LoadedFirst(create_app(state), state)
        return FromTheRoot(self.served)

    async def relay(self, scope: dict[str, object], body: bytes) -> AsyncIterator[Message]:
        """One HTTP request from the front: the messages the app sends (a streamed call)."""
        assert self.served is not None
        async for message in relay_through(self.served, scope, body):
            yield message


def deploy(
    options: ServeOptions,
    loader: Callable[[], Callable[[], Engine | None]],
    ray_options: RayOptions,
    echo: Callable[[str], object],
    stop: threading.Event | None = None,
) -> None:
    """Deploy the app on the cluster and serve until SIGTERM / Ctrl-C (or `stop`); then the
    application is deleted (its replicas drain for up to --grace seconds)."""
    ray, serve = import_serve()
    _connect(ray, ray_options, echo)
    actor: dict[str, object] = {"num_cpus": ray_options.cpus_per_replica}
    if ray_options.gpus_per_replica:
        actor["num_gpus"] = ray_options.gpus_per_replica
    high = max(1, ray_options.high)
    model = serve.deployment(
        serve.ingress()(ModelReplica),
        name=MODEL_DEPLOYMENT,
        max_ongoing_requests=options.max_queue,
        max_queued_requests=options.max_queue * high,
        graceful_shutdown_timeout_s=options.grace,
        ray_actor_options=actor,
        **ray_options.scaling(),
    )
    held = 2 * options.max_queue * high + FRONT_SLACK  # the replicas' requests and their queue
    front = serve.deployment(
        serve.ingress()(FrontReplica),
        name=APP_NAME,
        num_replicas=1,
        max_ongoing_requests=held,
        max_queued_requests=held,
        graceful_shutdown_timeout_s=options.grace,
        ray_actor_options={"num_cpus": 0},
    )
    serve.start(http_options={"host": options.host, "port": options.port})
    url = f"http://{options.host}:{options.port}"
    if not options.quiet:
        replicas = (
            f"{ray_options.low}..{ray_options.high} replicas (autoscaled)"
            if ray_options.autoscaled
            else f"{ray_options.replicas} replicas"
        )
        echo(f"omnivoice serve: deploying {replicas} on Ray Serve; loading the model on each ...")
    serve.run(model.bind(options, loader), name=MODEL_APP, route_prefix=SOCKET_PREFIX, blocking=False)
    serve.run(front.bind(options), name=APP_NAME, route_prefix="/", blocking=False)
    stopped = stop or threading.Event()
    handlers = {sig: signal.signal(sig, lambda *_: stopped.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # ready as a plain serve is: once /health/ready answers 200 (a replica's model loaded)
        if replica_ready(url, stopped) and not options.quiet:
            echo(f"omnivoice serve: listening on {url} (Ray Serve; OpenAI base URL {url}/v1); ready")
        while not stopped.wait(0.5):
            pass
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        serve.delete(APP_NAME)
        serve.delete(MODEL_APP)
        if not options.quiet:
            echo("omnivoice serve: the Ray Serve applications are deleted; stopped")


def replica_ready(url: str, stopped: threading.Event) -> bool:
    """True once GET /health/ready through Ray Serve's proxy answers 200 (no key needed: a replica
    has its model loaded), asked again every half second; False if `stopped` is set first."""
    host, port = urllib.parse.urlsplit(url).hostname or "", urllib.parse.urlsplit(url).port
    local = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, f"[{host}]" if ":" in host else host)
    probe = f"http://{local}:{port}/health/ready"
    while not stopped.is_set():
        try:
            with urllib.request.urlopen(probe, timeout=10) as reply:
                if reply.status == 200:
                    return True
        except (OSError, http.client.HTTPException):
            pass  # not listening yet, or 503 (HTTPError is an OSError): loading
        stopped.wait(0.5)
    return False


def _connect(ray: ModuleType, options: RayOptions, echo: Callable[[str], object]) -> None:
    """Start or join the cluster; every replica is given this OMNIVOICE_HOME (saved voices) and,
    on a cluster, this very package."""
    env = {"env_vars": {"OMNIVOICE_HOME": str(user_home())}}
    quiet = dict(logging_level=logging.ERROR, log_to_driver=False)
    if ray.is_initialized():
        return
    if options.address == "local":
        cpus = max(os.cpu_count() or 1, math.ceil(options.high * options.cpus_per_replica))
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, runtime_env=env, **quiet)
        echo(f"Ray: started a local cluster ({cpus} CPUs)")
        return
    package = Path(__file__).resolve().parents[2]
    try:
        ray.init(address=options.address, runtime_env={**env, "py_modules": [str(package)]}, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = "(RAY_ADDRESS or a head started on this machine)" if options.address == "auto" else options.address
        raise OmniVoiceError(f"cannot reach a Ray cluster {where}: {one_line(e)}") from None
    echo(f"Ray: connected to the cluster at {options.address}")
