"""ElevenLabs' sockets refusing for load (server/elevenlabs/socket.py), against a real uvicorn on
127.0.0.1: in their shapes, never OpenAI's. Before the upgrade (an address over its socket cap)
their HTTP error, `{"detail": {"status", "message"}}`; once open (a full engine, the socket's
backlog) their error message, `{"message", "error", "code"}`, then the close with that code (1013:
try again later). The server is made busy by holding its engine loop (server_util.hold_engine)."""

import json

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("websockets")

import websockets
from helpers.elevensocket import KEY, dial
from server_util import hold_engine, running_server, wait_for

from omnivoice_cli.server.socketmessages import MAX_WAITING

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]


def refusal_and_close(ws):
    """The refusal message (after any other messages) and the close frame the server sent after it."""
    seen = []
    with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
        while True:
            seen.append(json.loads(ws.recv(timeout=300)))
    errors = [m for m in seen if "error" in m]
    assert len(errors) == 1, seen
    return errors[0], closed.value.rcvd


def assert_theirs(error, close, words):
    """Their error message (no OpenAI `{"error": {...}}` object), its code the close's: 1013."""
    assert set(error) - {"contextId"} == {"message", "error", "code"}, error
    assert error["error"] == "busy" and error["code"] == 1013 and words in error["message"], error
    assert close is not None and close.code == 1013 and words in close.reason, close


def test_a_socket_over_its_address_cap_is_refused_in_their_http_shape(engine):
    """One socket an address: a second (stream-input or multi-stream-input) is refused before the
    upgrade with 429 and Retry-After, its body their `{"detail": {"status", "message"}}` naming the cap."""
    with running_server(engine, api_key=KEY, socket_max_per_peer=1) as (url, _server, state):
        for multi in (False, True):
            with dial(url, multi=multi):
                with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
                    dial(url, multi=not multi).close()
            wait_for(lambda: "127.0.0.1" not in state.sockets, 120.0, "the socket to be let go")
            response = refused.value.response
            assert response.status_code == 429 and response.headers["Retry-After"] == "5"
            body = json.loads(response.body)
            assert list(body) == ["detail"] and body["detail"]["status"] == "busy", body
            assert "127.0.0.1 has 1 sockets open, the most one address may hold" in body["detail"]["message"]


def test_a_full_engine_is_their_error_then_a_close(engine):
    """--max-queue 1, the engine held with one socket's utterance in it: a second socket's utterance
    is refused as theirs (`busy`, code 1013) and that socket closed 1013; the first is then spoken."""
    with running_server(engine, api_key=KEY, max_queue=1) as (url, _server, state):
        state.speaker.build("Hello.", voice="alloy", settings={})  # the voice made (by the engine loop) first
        with dial(url) as first, dial(url) as second:
            gate = hold_engine(state)
            try:
                first.send(json.dumps({"text": " "}))
                first.send(json.dumps({"text": "The first one. ", "flush": True}))
                wait_for(lambda: state.service.open == 1, 120.0, "the first utterance in the engine")
                second.send(json.dumps({"text": " "}))
                second.send(json.dumps({"text": "The second one. ", "flush": True}))
                error, close = refusal_and_close(second)
            finally:
                gate.set()
            first.send(json.dumps({"text": ""}))
            spoken = []
            with pytest.raises(websockets.exceptions.ConnectionClosedOK):
                while True:
                    spoken.append(json.loads(first.recv(timeout=300)))
    assert_theirs(error, close, "the server is busy")
    assert spoken[-1] == {"isFinal": True} and any(m.get("audio") for m in spoken)


def test_a_backlog_over_max_waiting_is_their_error_then_a_close(engine):
    """multi-stream-input with the engine held on its first context: each new context's message ends
    the one before (its isFinal waits behind it); the one that finds MAX_WAITING ends waiting is
    refused as theirs (`busy`, code 1013, its contextId) and the socket closed 1013."""
    with running_server(engine, api_key=KEY) as (url, _server, state):
        state.speaker.build("Hello.", voice="alloy", settings={})  # the voice made (by the engine loop) first
        with dial(url, multi=True) as ws:
            gate = hold_engine(state)
            try:
                ws.send(json.dumps({"text": " ", "context_id": "a"}))
                ws.send(json.dumps({"text": "Held in the engine. ", "context_id": "a"}))
                wait_for(lambda: state.service.open == 1, 120.0, "the first context in the engine")
                for i in range(MAX_WAITING + 1):  # c0 opens; each later one queues the end of the one before
                    ws.send(json.dumps({"text": "", "context_id": f"c{i}"}))
                error, close = refusal_and_close(ws)
                wait_for(lambda: state.service.open == 0, 120.0, "the closed socket's request to leave the engine")
            finally:
                gate.set()
    assert_theirs(error, close, f"{MAX_WAITING} parts and ends are already waiting on this socket")
    assert error["contextId"] == f"c{MAX_WAITING - 1}"
