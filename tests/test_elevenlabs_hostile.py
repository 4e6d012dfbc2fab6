"""ElevenLabs' routes and sockets (server/elevenlabs/) against a real uvicorn on 127.0.0.1, sent what
someone hostile sends: names of any length and script in the path, where the reply must stay a
bounded 4xx in the CLI's words and a refused socket must still be closed properly."""

import httpx
import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("websockets")

import websockets
from server_util import running_server
from websockets.sync.client import connect

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]

KEY = "sesame"
HEADERS = {"xi-api-key": KEY}


@pytest.fixture(scope="module")
def server(engine):
    with running_server(engine, api_key=KEY) as (url, _server, state):
        yield url


def closed_by_server(url: str) -> websockets.exceptions.ConnectionClosed:
    with connect(url, additional_headers=HEADERS) as ws:
        with pytest.raises(websockets.exceptions.ConnectionClosed) as e:
            while True:
                ws.recv(timeout=60)
    return e.value


@pytest.mark.parametrize("kind", ["stream-input", "multi-stream-input"])
def test_a_refused_voice_of_many_accents_is_closed_with_its_reason(server, kind):
    """The refusal's reason echoes the voice: cut to a close frame's 123 bytes, not a protocol error
    that leaves the socket without a close frame."""
    voice = "%C3%A9" * 200  # 'é' x 200: 120 characters are 240 bytes
    url = server.replace("http://", "ws://") + f"/v1/text-to-speech/{voice}/{kind}?output_format=pcm_24000"
    closed = closed_by_server(url)
    assert closed.rcvd is not None, "the server sent no close frame"
    assert closed.rcvd.code == 1008
    assert "unknown voice" in closed.rcvd.reason and len(closed.rcvd.reason.encode()) <= 123


def test_an_unknown_voice_of_fifty_thousand_characters_is_a_short_404(server):
    r = httpx.get(server + "/v1/voices/" + "x" * 50_000, headers=HEADERS, timeout=60)
    assert r.status_code == 404
    message = r.json()["detail"]["message"]
    assert message.startswith("voice 'xxx") and "known: " in message
    assert len(r.content) < 2000
