"""A socket whose client sends and never reads: what waits on it stays bounded. The worker is not
run here (as when its sends are blocked on a client that reads nothing), so every message's work
waits: flushes on /tts/ws and new contexts on multi-stream-input must be refused past the cap with
an error event, never kept without end."""

import asyncio
import json

import pytest
from helpers.socketstub import StubSocket, read_all, stub_state

from omnivoice_cli.server.elevenlabs.socket import MultiSession
from omnivoice_cli.server.socketmessages import MAX_WAITING
from omnivoice_cli.server.socketsession import SocketSession


@pytest.mark.parametrize("count", [10_000])
def test_ten_thousand_contexts_on_multi_stream_input_stay_bounded(count):
    async def main():
        session = MultiSession(StubSocket(), stub_state())
        messages = [json.dumps({"context_id": f"c{i}", "text": ""}) for i in range(count)]
        refused = await read_all(session, messages)
        return session, refused

    session, refused = asyncio.run(main())
    assert len(session.jobs) <= MAX_WAITING
    assert len(session.contexts) <= MAX_WAITING + 1
    assert refused and all(e.code == "busy" for e in refused)
    assert "read" in str(refused[0])


def test_endless_flushes_on_tts_ws_stay_bounded():
    async def main():
        session = SocketSession(StubSocket(), stub_state())
        messages = [json.dumps({"type": "flush"})] * 5000
        refused = await read_all(session, messages)
        return session, refused

    session, refused = asyncio.run(main())
    assert len(session.jobs) <= MAX_WAITING
    assert refused and all(e.code == "busy" for e in refused)
