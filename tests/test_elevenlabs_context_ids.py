"""multi-stream-input's context ids (server/elevenlabs/socket.py): every message of a context sends
its id back, so a long one is refused (an error event, the socket goes on), not echoed with each
piece of audio."""

import asyncio
import json

from helpers.socketstub import StubSocket, read_all, stub_state

from omnivoice_cli.server.elevenlabs.socket import MultiSession


def test_a_context_id_of_thirty_thousand_characters_is_refused():
    async def main():
        session = MultiSession(StubSocket(), stub_state())
        refused = await read_all(session, [json.dumps({"context_id": "c" * 30_000, "text": "Hi there. "})])
        return session, refused

    session, refused = asyncio.run(main())
    (error,) = refused
    assert "30000 characters" in str(error) and "at most" in str(error)
    assert session.open is None and not session.jobs


def test_a_context_id_of_ordinary_length_is_taken():
    async def main():
        session = MultiSession(StubSocket(), stub_state())
        refused = await read_all(session, [json.dumps({"context_id": "ctx-" + "a" * 60, "text": "Hi there. "})])
        return session, refused

    session, refused = asyncio.run(main())
    assert not refused and session.open == "ctx-" + "a" * 60
