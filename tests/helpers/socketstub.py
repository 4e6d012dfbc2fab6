"""A socket session without a server (server/socketsession.py and its ElevenLabs subclasses): a
websocket and a server state that take what a session reads, and never run its worker (as when its
sends are blocked on a client that reads nothing)."""

from types import SimpleNamespace


class StubSocket:
    def __init__(self, query=None):
        self.query_params = query or {"output_format": "pcm_24000"}
        self.path_params = {"voice_id": "alloy"}


def stub_state():
    options = SimpleNamespace(json_limit=1 << 16, max_input_chars=4000, socket_idle_timeout=60.0)
    speaker = SimpleNamespace(build=lambda *a, **k: None, mark=None)
    service = SimpleNamespace(engine=SimpleNamespace(sample_rate=24000))
    return SimpleNamespace(options=options, speaker=speaker, require_service=lambda: service)


async def read_all(session, messages):
    """Each message read as the socket reads it: -> the BadMessage refusals."""
    from omnivoice_cli.server.socketmessages import BadMessage

    refused = []
    for raw in messages:
        try:
            await session.read(raw)
        except BadMessage as e:
            refused.append(e)
    return refused
