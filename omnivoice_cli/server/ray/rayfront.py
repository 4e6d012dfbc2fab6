"""`serve --ray`'s front: a light deployment that relays each HTTP request to one of the model
replicas (rayserve.ModelReplica), so that a replica lost mid-request is answered cleanly.

    client --HTTP--> Ray Serve proxy --> Front (route "/") --handle--> ModelReplica.relay
    client --WebSocket /tts/ws--> Ray Serve proxy --> ModelReplica (route "/tts", its own app)

Ray Serve's proxy answers a request whose replica died with its own 500; the front calls the
replicas through a deployment handle instead, where a lost replica is a typed error: a request
that has not sent a byte yet is tried once more on another replica, else answered 503 with a
Retry-After (`replica_lost`); all replicas full is 503 `server_busy`, as a plain serve's queue.
A reply already under way when its replica dies ends there (its length tells the client).
The front holds no model (no CPU reserved); the key and body limit are checked there first, with
the words of a plain serve, so nothing unauthorised or oversized is carried to a replica. Its own
refusals (401, 413, 503) are in the route's shape, as a plain serve's gate answers: ElevenLabs'
on their routes (elevenlabs/api.py's `shaped`), else OpenAI's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

from ..app import error_response, limited, refusal
from ..asgi import ASGIApp, Message, Receive, Scope, Send
from ..config import ServeOptions
from ..elevenlabs.api import shaped
from ..errors import ApiError, busy

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator

MODEL_APP = "omnivoice-model"  # the replicas' application (its route: the socket, /tts)
MODEL_DEPLOYMENT = "omnivoice-model"
SOCKET_PREFIX = "/tts"
RETRY_AFTER = 1  # seconds a client is told to wait after a lost replica
SCOPE_KEYS = ("type", "http_version", "method", "scheme", "path", "raw_path", "query_string", "headers")


def plain_scope(scope: Scope) -> dict[str, object]:
    """What a replica needs of an HTTP request's scope, in plain (picklable) values."""
    plain = {key: scope[key] for key in SCOPE_KEYS if key in scope}
    plain["headers"] = [(bytes(k), bytes(v)) for k, v in scope.get("headers", [])]
    plain.update(root_path="", client=scope.get("client"), server=scope.get("server"))
    return plain


async def relay_through(app: ASGIApp, scope: dict[str, object], body: bytes) -> AsyncIterator[Message]:
    """Run one HTTP request through `app` (a replica's), yielding each message it sends. When the
    caller stops listening (its client left), the app hears `http.disconnect`, as from a server."""
    sent: asyncio.Queue[Message | None] = asyncio.Queue()
    gone = asyncio.Event()
    given = False

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await sent.put(message)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        finally:
            await sent.put(None)

    task = asyncio.create_task(run())
    try:
        while (message := await sent.get()) is not None:
            yield message
        await task  # its error, if any
    finally:
        gone.set()  # the app winds down by itself (a streamed reply stops at its next piece)


def lost_replica_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for a replica that died or cannot be reached."""
    from ray import exceptions as rx
    from ray.serve import exceptions as sx

    return (rx.RayActorError, rx.ActorUnavailableError, sx.ReplicaUnavailableError, sx.DeploymentUnavailableError)


class Front:
    """The ASGI app of the front deployment: HTTP relayed to the model replicas (see the module's
    docstring); lifespan answered here; a WebSocket anywhere but /tts/ws is refused."""

    def __init__(self, options: ServeOptions, model: DeploymentHandle) -> None:
        self.options, self.model = options, model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            return await send({"type": "lifespan.shutdown.complete"})
        if scope["type"] == "websocket":  # the socket's route is the replicas' own app
            return await send({"type": "websocket.close", "code": 1008})
        try:
            body = await self.read(scope, receive)
        except ApiError as refused:
            return await self.answer(scope, refused, receive, send)
        await self.relay(plain_scope(scope), body, receive, send)

    async def read(self, scope: Scope, receive: Receive) -> bytes:
        """The whole body, once the key is right and within the endpoint's limit (as a replica's
        gate says: app.refusal, app.limited)."""
        refused = refusal(scope, self.options)
        if refused is not None:
            raise refused
        receiving, chunks, more = limited(scope, receive, self.options), [], True
        while more:
            message = await receiving()
            if message["type"] != "http.request":
                raise ApiError(400, "the client left before sending the whole body", code="client_gone")
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def relay(self, scope: dict[str, object], body: bytes, receive: Receive, send: Send) -> None:
        """To one replica; once more to another if the first is lost before it answers; else 503."""
        from ray.serve.exceptions import BackPressureError, RequestCancelledError

        lost = lost_replica_errors()
        for attempt in range(2):
            started = False
            call = self.model.options(stream=True).relay.remote(scope, body)
            replies = cast("DeploymentResponseGenerator", call)  # stream=True: a generator of messages
            watcher = asyncio.ensure_future(self.until_gone(receive, replies))
            try:
                async for message in replies:
                    started = True
                    await send(message)
                return
            except RequestCancelledError:  # the client left: nobody to answer
                return
            except BackPressureError:
                queue = self.options.max_queue
                answer = busy(
                    f"the server is busy: every replica has {queue} requests (--max-queue); try again shortly",
                    RETRY_AFTER,
                )
            except lost:
                if started:
                    raise  # the reply is cut where it stands
                answer = busy(
                    "the replica serving this request stopped; try again shortly", RETRY_AFTER, "replica_lost"
                )
                if attempt == 0:
                    continue
            finally:
                watcher.cancel()
                replies.cancel()
            return await self.answer(scope, answer, receive, send)

    @staticmethod
    async def answer(scope: Scope, error: ApiError, receive: Receive, send: Send) -> None:
        """The front's own refusal, in the shape of the route asked (ElevenLabs' on theirs)."""
        await error_response(shaped(scope, error) or error)(scope, receive, send)

    @staticmethod
    async def until_gone(receive: Receive, replies: DeploymentResponseGenerator) -> None:
        """The client's disconnect cancels the relay (and the replica's work with it)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        replies.cancel()


class FrontReplica:
    """The front deployment (Ray Serve's ingress at "/"): a Front over a handle to the replicas."""

    def __init__(self, options: ServeOptions) -> None:
        from ray import serve

        self.front = Front(options, serve.get_deployment_handle(MODEL_DEPLOYMENT, app_name=MODEL_APP))

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return self.front
