"""The messages of `/tts/ws` (socket.py has the protocol): what a client may send, a socket's
settings (`Config`), and a message read (`parse_message`; `BadMessage`: an error event, and the
socket goes on)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..app.settings.values import type_name
from ..media.formats import headerless_served

FORMATS = headerless_served()  # what a socket's `format` may be (pcm, mulaw, alaw): samples alone
MAX_PENDING = 32  # parts of text waiting on one socket (beyond: an error event)
MAX_WAITING = 4 * MAX_PENDING  # jobs of every kind waiting on one socket (utterances' ends too): beyond, an error event
TRY_AGAIN_LATER = 1013  # the close code of a socket over a cap (RFC 6455's registry)
CONFIG_KEYS = ("sample_rate", "format", "binary", "voice", "language", "speed", "extra", "normalize", "pauses")
MESSAGES = ("config", "text", "flush", "cancel", "ping")


MAX_REASON = 123  # bytes of a close frame's reason (RFC 6455: a control frame's payload is 125, the code 2)


def close_reason(text: str) -> str:
    """`text` as a close frame's reason: one line, cut to MAX_REASON bytes of UTF-8 at a character's
    end (a longer one is a protocol error: the close is never sent and the server logs a traceback)."""
    line = " ".join(text.split()).encode("utf-8", "backslashreplace")
    return line[:MAX_REASON].decode("utf-8", "ignore")


class BadMessage(Exception):
    """A message this socket cannot take: an error event, and the socket goes on."""

    def __init__(self, message: str, code: str = "invalid_message") -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Config:
    """A socket's settings (see the module doc)."""

    sample_rate: int
    format: str = "pcm"
    binary: bool = False
    voice: object = None  # a voice's name, as the message gave it (the Speaker checks it)
    language: object = None
    settings: dict = field(default_factory=dict)  # `extra` and `speed`, schema settings


def parse_message(raw: str) -> dict:
    """A message: a JSON object with a string `type` (BadMessage otherwise)."""
    try:
        message = json.loads(raw)
    except RecursionError:
        raise BadMessage("the message's JSON is nested too deeply", "parse_error") from None
    except ValueError as e:
        raise BadMessage(f"the message is not valid JSON: {e}", "parse_error") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        got = type_name(message) if not isinstance(message, dict) else "no string 'type'"
        raise BadMessage(f"a message must be a JSON object with a 'type' ({', '.join(MESSAGES)}), got {got}")
    return message
