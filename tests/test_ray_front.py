"""server/ray/rayfront.py without a cluster: the front's relay over a stand-in deployment handle (a
lost replica tried once more, then a 503; all full a 503; the key and the body limit checked
before anything is carried), and `relay_through`, which runs one request through a replica's app."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("ray.serve")  # the ray extra (the errors the front tells apart are Ray's)

from ray.exceptions import ActorDiedError
from ray.serve.exceptions import BackPressureError
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from omnivoice_cli.server.config import ServeOptions
from omnivoice_cli.server.ray.rayfront import Front, plain_scope, relay_through


async def _echo(request):
    body = await request.body()
    return JSONResponse({"path": request.url.path, "body": body.decode(), "query": request.url.query})


async def _streamed(request):
    async def pieces():
        for n in range(3):
            yield f"piece {n};".encode()

    return StreamingResponse(pieces(), media_type="text/plain")


REPLICA_APP = Starlette(routes=[Route("/echo", _echo, methods=["POST"]), Route("/stream", _streamed)])


class Replicas:
    """A stand-in for the model deployment's handle: `relay.remote` runs REPLICA_APP, after
    failing as told (before any message, or after the first)."""

    def __init__(self, *failures: BaseException | tuple[str, BaseException]) -> None:
        self.failures, self.calls, self.cancelled = list(failures), 0, 0

    def options(self, stream: bool) -> Replicas:
        assert stream
        return self

    @property
    def relay(self) -> Replicas:
        return self

    def remote(self, scope, body) -> Reply:
        self.calls += 1
        return Reply(self, scope, body, self.failures.pop(0) if self.failures else None)


class Reply:
    def __init__(self, owner: Replicas, scope, body, failure) -> None:
        self.owner, self.scope, self.body, self.failure = owner, scope, body, failure

    def cancel(self) -> None:
        self.owner.cancelled += 1

    async def __aiter__(self):
        if isinstance(self.failure, BaseException):
            raise self.failure
        n = 0
        async for message in relay_through(REPLICA_APP, self.scope, self.body):
            if self.failure and n == 1:
                raise self.failure[1]
            n += 1
            yield message


def _call(front: Front, method: str, path: str, body: bytes = b"", headers=()) -> tuple[int, dict, bytes]:
    """One request through the front's ASGI app: (status, headers, body)."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"q=1",
        "headers": [(b"content-length", str(len(body)).encode()), *headers],
        "client": ("127.0.0.1", 5),
        "server": ("127.0.0.1", 80),
        "state": {"not": object()},  # not picklable: never carried to a replica
    }
    sent: list[dict] = []
    given = asyncio.Event()

    async def receive():
        if not given.is_set():
            given.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays

    async def send(message):
        sent.append(message)

    asyncio.run(front(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), content


def test_a_request_is_relayed_whole():
    replicas = Replicas()
    status, _, content = _call(Front(ServeOptions(), replicas), "POST", "/echo", b"hello")
    assert status == 200 and json.loads(content) == {"path": "/echo", "body": "hello", "query": "q=1"}
    status, _, content = _call(Front(ServeOptions(), replicas), "GET", "/stream")
    assert (status, content) == (200, b"piece 0;piece 1;piece 2;")
    assert replicas.calls == 2


def test_a_lost_replica_is_tried_once_more_then_answered_503():
    lost = ActorDiedError()
    replicas = Replicas(lost)
    status, _, content = _call(Front(ServeOptions(), replicas), "POST", "/echo", b"again")
    assert status == 200 and json.loads(content)["body"] == "again" and replicas.calls == 2

    replicas = Replicas(lost, lost)
    status, headers, content = _call(Front(ServeOptions(), replicas), "POST", "/echo", b"x")
    error = json.loads(content)["error"]
    assert status == 503 and error["code"] == "replica_lost" and headers[b"retry-after"] == b"1"
    assert "the replica serving this request stopped" in error["message"] and replicas.calls == 2


def test_a_reply_under_way_is_not_sent_twice():
    replicas = Replicas(("after the start", ActorDiedError()))
    with pytest.raises(ActorDiedError):
        _call(Front(ServeOptions(), replicas), "GET", "/stream")
    assert replicas.calls == 1  # not retried: the client has its status line already


def test_every_replica_full_is_a_503_naming_the_queue():
    replicas = Replicas(BackPressureError(num_queued_requests=8, max_queued_requests=8))
    status, _, content = _call(Front(ServeOptions(max_queue=4), replicas), "POST", "/echo")
    error = json.loads(content)["error"]
    assert (
        status == 503
        and error["code"] == "server_busy"
        and "every replica has 4 requests (--max-queue)" in error["message"]
    )
    assert replicas.calls == 1


def test_the_key_and_the_body_limit_are_checked_before_relaying():
    replicas = Replicas()
    front = Front(ServeOptions(api_key="k"), replicas)
    status, _, content = _call(front, "POST", "/echo", b"{}")
    assert status == 401 and json.loads(content)["error"]["code"] == "missing_api_key"
    status, _, content = _call(front, "POST", "/echo", b"{}", [(b"authorization", b"Bearer no")])
    assert status == 401 and json.loads(content)["error"]["code"] == "invalid_api_key"
    status, _, _ = _call(front, "POST", "/echo", b"{}", [(b"authorization", b"Bearer k")])
    assert status == 200
    status, _, _ = _call(front, "GET", "/health")  # the probes need no key
    assert status == 404  # (REPLICA_APP has no /health: it was relayed)
    limit = ServeOptions().json_limit
    status, _, content = _call(Front(ServeOptions(), replicas), "POST", "/echo", b"x" * (limit + 1))
    assert status == 413 and "the request body is over" in json.loads(content)["error"]["message"]
    assert replicas.calls == 2  # only the keyed request and /health reached a replica


def test_the_scope_carried_is_plain():
    scope = {"type": "http", "path": "/v1", "headers": [(b"a", b"b")], "state": {}, "app": object()}
    assert plain_scope(scope) == {
        "type": "http",
        "path": "/v1",
        "headers": [(b"a", b"b")],
        "root_path": "",
        "client": None,
        "server": None,
    }


def test_a_client_that_leaves_cancels_its_reply():
    from ray.serve.exceptions import RequestCancelledError

    class Endless(Replicas):
        def remote(self, scope, body):
            self.calls += 1
            return EndlessReply(self)

    class EndlessReply:
        def __init__(self, owner) -> None:
            self.owner, self.stop = owner, asyncio.Event()

        def cancel(self) -> None:
            self.owner.cancelled += 1
            self.stop.set()

        async def __aiter__(self):
            yield {"type": "http.response.start", "status": 200, "headers": []}
            await self.stop.wait()  # a long reply, until cancelled
            raise RequestCancelledError("cancelled")

    replicas, sent = Endless(), []
    messages = [{"type": "http.request", "body": b"", "more_body": False}, {"type": "http.disconnect"}]

    async def receive():
        await asyncio.sleep(0)
        return messages.pop(0) if messages else await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/stream", "headers": []}
    asyncio.run(Front(ServeOptions(), replicas)(scope, receive, send))
    assert replicas.calls == 1 and replicas.cancelled >= 1 and [m["type"] for m in sent] == ["http.response.start"]


def test_on_elevenlabs_routes_the_fronts_refusals_are_in_their_shape():
    tts = "/v1/text-to-speech/alloy/stream"
    limit = ServeOptions().json_limit
    full = Replicas(BackPressureError(num_queued_requests=8, max_queued_requests=8))
    lost = Replicas(ActorDiedError(), ActorDiedError())
    answers = [
        _call(Front(ServeOptions(), Replicas()), "POST", tts, b"x" * (limit + 1)),
        _call(Front(ServeOptions(max_queue=4), full), "POST", tts, b"{}"),
        _call(Front(ServeOptions(), lost), "POST", tts, b"{}"),
        _call(Front(ServeOptions(api_key="k"), Replicas()), "POST", tts, b"{}", [(b"xi-api-key", b"no")]),
    ]
    statuses = [(status, json.loads(content)["detail"]["status"]) for status, _, content in answers]
    assert statuses == [(413, "body_too_large"), (503, "server_busy"), (503, "replica_lost"), (401, "invalid_api_key")]
    for _, _, content in answers:
        body = json.loads(content)
        assert set(body) == {"detail"} and "\n" not in body["detail"]["message"]  # ElevenLabs': no "error"
    assert answers[1][1][b"retry-after"] == b"1"
    # our routes keep OpenAI's shape
    status, _, content = _call(Front(ServeOptions(), Replicas()), "POST", "/v1/audio/speech", b"x" * (limit + 1))
    assert status == 413 and json.loads(content)["error"]["code"] == "body_too_large"
