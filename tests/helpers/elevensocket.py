"""Dialling ElevenLabs' streaming input sockets of a test server (server/elevenlabs/socket.py) with
the `websockets` client, the key in their header."""

from websockets.sync.client import connect

KEY = "sesame"  # the test servers' API key


def socket_url(url, voice="alloy", multi=False, query="output_format=pcm_24000"):
    kind = "multi-stream-input" if multi else "stream-input"
    return url.replace("http://", "ws://") + f"/v1/text-to-speech/{voice}/{kind}?{query}"


def dial(url, key=KEY, **kw):
    return connect(socket_url(url, **kw), additional_headers={"xi-api-key": key})
