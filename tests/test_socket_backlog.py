"""A socket whose client sends and never reads: what waits on it stays bounded. The worker is not
run here (as when its sends are blocked on a client that reads nothing), so every message's work
waits: flushes on /tts/ws and new contexts on multi-stream-input must be refused past the cap with
an error event, never kept without end."""

import asyncio
import json
from types import SimpleNamespace

import pytest

from omnivoice_cli.server.elevenlabs.socket import MultiSession
from omnivoice_cli.server.socketmessages import MAX_WAITING, BadMessage
from omnivoice_cli.server.socketsession import SocketSession


class _Socket:
    def __init__(self, query=None):
        self.query_params = query or {"output_format": "pcm_24000"}
        self.path_params = {"voice_id": "alloy"}


def _state():
    options = SimpleNamespace(json_limit=1 << 16, max_input_chars=4000, socket_idle_timeout=60.0)
    speaker = SimpleNamespace(build=lambda *a, **k: None, mark=None)
    return SimpleNamespace(
        options=options,
        speaker=speaker,
        require_service=lambda: SimpleNamespace(engine=SimpleNamespace(sample_rate=24000)),
    )


async def _read_all(session, messages):
    refused = []
    for raw in messages:
        try:
            await session.read(raw)
        except BadMessage as e:
            refused.append(e)
    return refused


@pytest.mark.parametrize("count", [10_000])
def test_ten_thousand_contexts_on_multi_stream_input_stay_bounded(count):
    async def main():
        session = MultiSession(_Socket(), _state())
        messages = [json.dumps({"context_id": f"c{i}", "text": ""}) for i in range(count)]
        refused = await _read_all(session, messages)
        return session, refused

    session, refused = asyncio.run(main())
    assert len(session.jobs) <= MAX_WAITING
    assert len(session.contexts) <= MAX_WAITING + 1
    assert refused and all(e.code == "busy" for e in refused)
    assert "read" in str(refused[0])


def test_endless_flushes_on_tts_ws_stay_bounded():
    async def main():
        session = SocketSession(_Socket(), _state())
        messages = [json.dumps({"type": "flush"})] * 5000
        refused = await _read_all(session, messages)
        return session, refused

    session, refused = asyncio.run(main())
    assert len(session.jobs) <= MAX_WAITING
    assert refused and all(e.code == "busy" for e in refused)
